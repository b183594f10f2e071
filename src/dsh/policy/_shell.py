"""Shell commands split into their simple commands, read conservatively (tree-sitter's bash grammar; RFC 0029).

Guarantees:

* :func:`split_command` finds every simple command a command line would run: the parts of ``&&``, ``||``, ``;``,
  ``|`` and ``&`` lists, subshells and braces, and the commands inside ``$(...)``, backticks and ``<(...)``,
  wherever they stand (an argument, a string, a redirection, a heredoc's body). Each comes with its words (quotes
  and backslashes removed when the word is static; kept as written otherwise), whether every word is static text,
  and what its redirections do.
* **Every redirection is a write** unless it reads a file (``<``, ``N<``), duplicates or closes a descriptor
  (``2>&1``, ``<&3``, ``>&-``) or writes to the literal target ``/dev/null``: ``>``, ``>>``, ``&>``, ``>|``,
  ``>&word``, ``<>``, ``N<>`` and a heredoc's own ``> file``. Heredocs and herestrings make a command not
  read-only whatever they feed it.
* A word is **static** only when it is plain text once quotes and backslashes are removed: ANSI-C strings
  (``$'…'``), ``$"…"``, parameter and arithmetic expansions, command and process substitutions (even of read-only
  commands), brace expansion (any unquoted ``{`` or ``}``), ``~user`` and globs that could expand to an option or
  to ``..`` are not. A command with a word that is not static is never read-only.
* Anything the parser does not read as plain commands makes the split ``opaque`` (with a ``reason`` a person can
  read): a syntax error, ``if``/``for``/``while``/``case``, function definitions, ``[[ ]]``,
  ``export``/``declare``, bare assignments, a command name that is not static, a node kind of the grammar this
  module does not know (:data:`KNOWN_KINDS`; a test walks the grammar's kinds), a line over
  :data:`MAX_COMMAND_BYTES`, a line holding control or invisible formatting characters, and nesting deeper
  than :data:`MAX_DEPTH`. Opaque asks and offers no "always" (:mod:`._rules`).
* :func:`split_command` never raises and never recurses deeper than :data:`MAX_DEPTH` node levels, whatever the
  input; :func:`split_command_async` runs it in a worker thread (its own limiter) unless the line was split
  before, so a long line never holds up the event loop.
* :func:`is_read_only` is the built-in set of commands that only read: a command name in :mod:`._readonly`'s
  allow-list, every flag in that command's allow-list (parsed as the tool parses them: short clusters, attached
  and separate values, ``--``; a long option must be spelled out, since the tool might read an abbreviation as
  an option the list does not allow), no redirection that writes, no heredoc, no assignment prefix, every word
  static. :func:`command_paths` gives the paths such a command reads (operands, path-valued flags, ``<`` files,
  ``cd`` targets), so that the caller can ask for paths outside the roots as ``read_file`` does.
* :func:`command_prefix` is what an "always allow" records: the first word, and the second when it is a
  subcommand (``npm test``, ``git diff``), never the arguments.

The grammar is imported on the first command checked, not with :mod:`dsh.policy`.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from threading import Lock
from typing import TYPE_CHECKING, Any

from dsh.policy._readonly import operands_and_paths

if TYPE_CHECKING:
    from tree_sitter import Node, Parser

__all__ = [
    "KNOWN_KINDS",
    "MAX_COMMAND_BYTES",
    "MAX_DEPTH",
    "ShellSplit",
    "SimpleCommand",
    "command_dirs",
    "command_paths",
    "command_prefix",
    "escape_control",
    "has_control_characters",
    "is_read_only",
    "split_command",
    "split_command_async",
]

MAX_COMMAND_BYTES = 64 * 1024
"""A longer command line is opaque without being parsed: nobody reviews 64 KiB of shell, and the parse is bounded."""
MAX_DEPTH = 200
"""Node levels walked below the root (about 60 nested ``$(…)``); deeper is opaque, with a message that says so."""
_MAX_CWDS = 32
"""Directories a line may ``cd`` through before its relative paths are no longer followed (they then ask)."""


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    words: tuple[str, ...]
    """The command name and its arguments; a word that is not static is kept as written (``$HOME``)."""
    writes_file: bool = False
    """A redirection may write a file (anything but ``<``, descriptor duplication and ``/dev/null``)."""
    assigns: bool = False
    """It is prefixed by variable assignments (``FOO=1 make``)."""
    dynamic: bool = False
    """Some word is not static text (an expansion, a substitution, an ANSI-C string, braces, a risky glob)."""
    here: bool = False
    """It has a heredoc or a herestring."""
    reads: tuple[str, ...] = ()
    """The static files its ``<`` redirections read."""
    write_targets: tuple[str | None, ...] = ()
    """The targets of its writing redirections (None: not static)."""


@dataclass(frozen=True, slots=True)
class ShellSplit:
    commands: tuple[SimpleCommand, ...]
    opaque: bool = False
    """Something in the line is not a plain simple command (see the module docstring): it must ask."""
    reason: str = ""
    """Why the line is opaque, for the person asked and the model (empty when it is not)."""


@lru_cache(maxsize=1)
def _parser() -> Parser:
    import tree_sitter_bash
    from tree_sitter import Language, Parser

    return Parser(Language(tree_sitter_bash.language()))


# -- the grammar's node kinds, each known --------------------------------------------------------------------

_CONTAINERS = frozenset({"program", "list", "pipeline", "subshell", "compound_statement", "negated_command"})
_STATEMENTS_OPAQUE = {
    "if_statement": "an if statement",
    "for_statement": "a for loop",
    "c_style_for_statement": "a for loop",
    "while_statement": "a while loop",
    "case_statement": "a case statement",
    "function_definition": "a function definition",
    "declaration_command": "a declaration (export, declare, local, readonly)",
    "unset_command": "unset",
    "test_command": "a [[ ]] test",
    "variable_assignment": "a variable assignment",
    "variable_assignments": "a variable assignment",
}
_STATIC_WORDS = frozenset({"word", "string", "raw_string", "number", "concatenation", "string_content"})
_DYNAMIC_WORDS = frozenset(
    {
        "ansi_c_string",
        "translated_string",
        "simple_expansion",
        "expansion",
        "arithmetic_expansion",
        "command_substitution",
        "process_substitution",
        "brace_expression",
        "array",
        "extglob_pattern",
    }
)
_REDIRECTS = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})
_INNER = frozenset(
    {
        # parts of statements and expressions that only appear inside the kinds above: met only while looking
        # for substitutions (any of them makes the word they are in dynamic, or the statement opaque)
        "binary_expression",
        "case_item",
        "command_name",
        "do_group",
        "elif_clause",
        "else_clause",
        "file_descriptor",
        "heredoc_body",
        "heredoc_content",
        "heredoc_end",
        "heredoc_start",
        "parenthesized_expression",
        "postfix_expression",
        "regex",
        "special_variable_name",
        "subscript",
        "ternary_expression",
        "test_operator",
        "unary_expression",
        "variable_name",
        "comment",
    }
)
KNOWN_KINDS: frozenset[str] = frozenset(
    {"command", "redirected_statement"}
    | _CONTAINERS
    | set(_STATEMENTS_OPAQUE)
    | _STATIC_WORDS
    | _DYNAMIC_WORDS
    | _REDIRECTS
    | _INNER
)
"""Every named node kind of the bash grammar this module has a rule for; any other kind makes a line opaque."""

_WRITE_FREE_TARGET = "/dev/null"
_DESCRIPTOR = re.compile(r"^(?:[0-9]+-?|-)$")
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def has_control_characters(text: str) -> bool:
    """Whether *text* holds a control character other than tab and newline, or an invisible formatting character
    (bidirectional overrides, zero-width characters): what could make a person read another command than runs."""
    if _CONTROL.search(text):
        return True
    if text.isascii():
        return False
    return any(unicodedata.category(char) == "Cf" for char in text if ord(char) > 0x7F)


def escape_control(text: str, *, newlines: bool = False) -> str:
    """*text* with every character :func:`has_control_characters` looks for written as an escape (``\\x1b``,
    ``\\u202e``); when anything is escaped, backslashes are doubled so that no escape is ambiguous: what a person is
    shown is what runs. Tabs stay; newlines stay unless *newlines* (a one-line title). Linear in C for the common
    case (only the characters that may need it reach Python), so a megabyte is cheap."""
    if not has_control_characters(text) and not (newlines and "\n" in text):
        return text
    pattern = _ESCAPE_LINES if newlines else _ESCAPE
    return pattern.sub(_escaped, text)


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\\":
        return "\\\\"
    code = ord(char)
    if code < 0x20 or 0x7F <= code <= 0x9F:
        return f"\\x{code:02x}"
    if unicodedata.category(char) == "Cf":
        return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
    return char


_ESCAPE = re.compile("[\\\\\x00-\x08\x0b-\x1f\x7f-\x9f]|[^\x00-\x7f]")
_ESCAPE_LINES = re.compile("[\\\\\x00-\x08\x0a-\x1f\x7f-\x9f]|[^\x00-\x7f]")


class _TooDeep(Exception):
    pass


@dataclass
class _Word:
    text: str
    static: bool


class _Walker:
    def __init__(self) -> None:
        self.commands: list[SimpleCommand] = []
        self.reason = ""

    def opaque(self, reason: str) -> None:
        if not self.reason:
            self.reason = reason

    def statement(self, node: Node, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise _TooDeep
        if not node.is_named:
            return
        kind = node.type
        if kind == "comment":
            return
        if kind == "command":
            self.command(node, (), depth + 1)
        elif kind == "redirected_statement":
            body = node.child_by_field_name("body")
            redirects = [child for child in node.children if child != body and child.is_named]
            if body is None:
                self.opaque("a redirection without a command")
                for child in redirects:
                    self.redirect(child, depth + 1)
            elif body.type == "command":
                self.command(body, redirects, depth + 1)
            else:
                effects = [self.redirect(child, depth + 1) for child in redirects]
                if any(effect[0] or effect[1] for effect in effects):  # a list or subshell writing to a file
                    self.opaque("a redirected group of commands")
                self.statement(body, depth + 1)
        elif kind in _CONTAINERS:
            for child in node.children:
                self.statement(child, depth + 1)
        elif kind in _STATEMENTS_OPAQUE:
            self.opaque(f"it holds {_STATEMENTS_OPAQUE[kind]}")
            self.substitutions(node, depth + 1)
        elif kind in KNOWN_KINDS:
            self.opaque(f"it holds a {kind.replace('_', ' ')} where a command was expected")
            self.substitutions(node, depth + 1)
        else:
            self.opaque(f"the parser does not know {kind!r}")

    def redirect(self, node: Node, depth: int) -> tuple[bool, bool, tuple[str, ...], tuple[str | None, ...]]:
        """(writes, here, files read, write targets) of one redirection; commands inside it are collected."""
        if depth > MAX_DEPTH:
            raise _TooDeep
        kind = node.type
        if kind not in KNOWN_KINDS:
            self.opaque(f"the parser does not know {kind!r}")
        if kind == "heredoc_redirect":
            writes = False
            reads: list[str] = []
            targets: list[str | None] = []
            for child in node.children:
                if child.type in _REDIRECTS:
                    inner = self.redirect(child, depth + 1)
                    writes = writes or inner[0]
                    reads.extend(inner[2])
                    targets.extend(inner[3])
                elif child.is_named:
                    self.substitutions(child, depth + 1)
            return writes, True, tuple(reads), tuple(targets)
        if kind == "herestring_redirect":
            self.substitutions(node, depth + 1)
            return False, True, (), ()
        if kind != "file_redirect":
            self.substitutions(node, depth + 1)
            return True, False, (), (None,)
        operator = ""
        targets_nodes: list[Node] = []
        for child in node.children:
            if not child.is_named:
                operator += child.type
            elif child.type != "file_descriptor":
                targets_nodes.append(child)
        self.substitutions(node, depth + 1)
        words = [self.word(target, depth + 1) for target in targets_nodes]
        texts = [w.text if w.static else None for w in words]
        if operator in ("<",) and len(words) == 1:
            return False, False, (texts[0],) if texts[0] is not None else (), ()
        if operator in (">&", "<&") and len(words) == 1 and texts[0] is not None and _DESCRIPTOR.match(texts[0]):
            return False, False, (), ()
        if operator in (">&-", "<&-") and not words:
            return False, False, (), ()
        if operator in (">", ">>", "&>", "&>>", ">|", ">&") and texts == [_WRITE_FREE_TARGET]:
            return False, False, (), ()
        if operator == "<&" and texts and texts[0] is not None and _DESCRIPTOR.match(texts[0]):
            return False, False, (), ()
        return True, False, (), tuple(texts) or (None,)

    def command(self, node: Node, redirects: Sequence[Node], depth: int) -> None:
        if depth > MAX_DEPTH:
            raise _TooDeep
        words: list[str] = []
        assigns = dynamic = here = writes = False
        reads: list[str] = []
        targets: list[str | None] = []

        def redirected(child: Node) -> None:
            nonlocal writes, here
            effect = self.redirect(child, depth + 1)
            writes = writes or effect[0]
            here = here or effect[1]
            reads.extend(effect[2])
            targets.extend(effect[3])

        for child in node.children:
            kind = child.type
            if not child.is_named:
                continue
            if kind == "variable_assignment":
                assigns = True
                self.substitutions(child, depth + 1)
            elif kind == "command_name":
                name = child.children[0] if child.children else child
                word = self.word(name, depth + 1)
                if not word.static:
                    self.opaque("the command's name is computed")
                words.append(word.text)
                self.substitutions(child, depth + 1)
            elif kind in _REDIRECTS:
                redirected(child)
            elif kind == "comment":
                continue
            else:
                word = self.word(child, depth + 1)
                dynamic = dynamic or not word.static
                words.append(word.text)
                self.substitutions(child, depth + 1)
        for child in redirects:
            redirected(child)
        if not words:
            self.opaque("a line with no command")
            return
        self.commands.append(SimpleCommand(tuple(words), writes, assigns, dynamic, here, tuple(reads), tuple(targets)))

    def substitutions(self, node: Node, depth: int) -> None:
        """Collect the commands of every ``$(...)``, backtick and ``<(...)`` in or below *node*."""
        if depth > MAX_DEPTH:
            raise _TooDeep
        kind = node.type
        if node.is_named and kind not in KNOWN_KINDS:
            self.opaque(f"the parser does not know {kind!r}")
        if kind in ("command_substitution", "process_substitution"):
            for inner in node.children:
                self.statement(inner, depth + 1)
            return
        for child in node.children:
            self.substitutions(child, depth + 1)

    def word(self, node: Node, depth: int) -> _Word:
        """The static text of *node*, or its text as written and ``static=False``."""
        if depth > MAX_DEPTH:
            raise _TooDeep
        text = _text(node)
        static = _static(node, depth)
        if static is None:
            if node.is_named and node.type not in KNOWN_KINDS:
                self.opaque(f"the parser does not know {node.type!r}")
            return _Word(text, False)
        return _Word(static, True)


def _static(node: Node, depth: int) -> str | None:
    """The text *node* stands for when it is static (module docstring), else None."""
    if depth > MAX_DEPTH:
        raise _TooDeep
    kind = node.type
    text = _text(node)
    if kind == "raw_string":
        return text[1:-1] if len(text) >= 2 else None
    if kind == "number":
        return text
    if kind == "word":
        return _unquoted(text)
    if kind == "string":
        parts: list[str] = []
        for child in node.children:
            if child.type == '"':
                continue
            if child.type != "string_content":
                return None
            parts.append(_in_double_quotes(_text(child)))
        return "".join(parts)
    if kind == "concatenation":
        pieces: list[str] = []
        for child in node.children:
            piece = _static(child, depth + 1)
            if piece is None:
                return None
            pieces.append(piece)
        joined = "".join(pieces)
        return joined if _safe_glob(joined) else None
    return None


_GLOB = frozenset("*?[")
_PLAIN_WORD = re.compile(r"[^\\{}$`*?\[~]*")


def _unquoted(text: str) -> str | None:
    """A bare word's text with backslashes removed; None when it expands: an unquoted ``{``/``}``, ``~user``,
    ``$``, a backtick, or a glob that could become an option or ``..`` (see :func:`_safe_glob`)."""
    if _PLAIN_WORD.fullmatch(text):
        return text
    out: list[str] = []
    globbed = False
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\":
            if index + 1 < len(text):
                escaped = text[index + 1]
                out.append("\\" + escaped if escaped in _GLOB else escaped)
            index += 2
            continue
        if char in "{}$`":
            return None
        if char in _GLOB:
            globbed = True
        out.append(char)
        index += 1
    word = "".join(out)
    if word.startswith("~") and not (word == "~" or word.startswith("~/")):
        return None
    if globbed and not _safe_glob(word):
        return None
    return word.replace("\\*", "*").replace("\\?", "?").replace("\\[", "[")


def _safe_glob(word: str) -> bool:
    """A word with an unescaped glob character expands to file names: safe only when none of them can be an option
    (the word's first character is neither ``-`` nor a glob character) nor ``..`` (no globbed component starts
    with ``.`` or ``[``)."""
    plain = word.replace("\\*", "").replace("\\?", "").replace("\\[", "")
    if not any(char in _GLOB for char in plain):
        return True
    if plain[:1] in ("-", *_GLOB):
        return False
    return not any(
        component[:1] in (".", "[") for component in plain.split("/") if any(char in _GLOB for char in component)
    )


def _in_double_quotes(text: str) -> str:
    return re.sub(r'\\([$`"\\\n])', lambda m: "" if m.group(1) == "\n" else m.group(1), text)


def _text(node: Node) -> str:
    raw = node.text
    return raw.decode("utf-8", "replace") if raw is not None else ""


# -- the split, cached, off the event loop ----------------------------------------------------------------------

_CACHE: OrderedDict[str, ShellSplit] = OrderedDict()
_CACHE_SIZE = 512
_CACHE_LOCK = Lock()


def _cached(command: str) -> ShellSplit | None:
    with _CACHE_LOCK:
        split = _CACHE.get(command)
        if split is not None:
            _CACHE.move_to_end(command)
        return split


def _remember(command: str, split: ShellSplit) -> ShellSplit:
    if len(command) > 4096:  # long lines are rare and would crowd the cache
        return split
    with _CACHE_LOCK:
        _CACHE[command] = split
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return split


def split_command(command: str) -> ShellSplit:
    """The simple commands of *command* (see the module docstring); never raises."""
    cached = _cached(command)
    if cached is not None:
        return cached
    return _remember(command, _split(command))


def _split(command: str) -> ShellSplit:
    if len(command.encode("utf-8", "surrogatepass")) > MAX_COMMAND_BYTES:
        return ShellSplit((), True, f"the command is longer than {MAX_COMMAND_BYTES // 1024} KiB")
    if has_control_characters(command):
        return ShellSplit((), True, "the command holds control or invisible characters")
    try:
        tree: Any = _parser().parse(command.encode("utf-8", "surrogatepass"))
    except Exception:
        return ShellSplit((), True, "the shell parser could not read it")
    root = tree.root_node
    walker = _Walker()
    try:
        walker.statement(root, 0)
    except _TooDeep:
        return ShellSplit((), True, f"it nests more than {MAX_DEPTH} levels deep")
    except RecursionError:  # never expected below MAX_DEPTH; still an answer, not a crash
        return ShellSplit((), True, "it nests too deep to read")
    if root.has_error:
        walker.opaque("it is not valid shell syntax")
    if not walker.commands:
        walker.opaque("it holds no command")
    return ShellSplit(tuple(walker.commands), bool(walker.reason), walker.reason)


_LIMITER: Any = None


async def split_command_async(command: str) -> ShellSplit:
    """:func:`split_command` in a worker thread (one at a time, its own limiter, so a burst of long lines never
    takes the threads other work needs); a line split before is answered from the cache without a thread."""
    cached = _cached(command)
    if cached is not None:
        return cached
    import anyio
    import anyio.to_thread

    global _LIMITER
    if _LIMITER is None:
        _LIMITER = anyio.CapacityLimiter(1)
    return await anyio.to_thread.run_sync(split_command, command, limiter=_LIMITER)


# -- what a command reads, whether it only reads ----------------------------------------------------------------


def is_read_only(command: SimpleCommand) -> bool:
    """Whether *command* only reads (the built-in allow-list; see the module docstring). Its paths are not
    judged here: :func:`command_paths` gives them to the caller, which asks for those outside the roots."""
    if command.writes_file or command.here or command.assigns or command.dynamic or not command.words:
        return False
    return operands_and_paths(command.words) is not None


def command_paths(split: ShellSplit, cwd: str, home: str | None = None) -> tuple[str, ...]:
    """The absolute, normalised paths the read-only parts of *split* would read or enter, run in *cwd*: their
    path operands and path-valued flags, their ``<`` files, and ``cd`` targets (a bare ``cd`` is the home
    directory). A relative path counts once for every directory the line may ``cd`` to, since subshells make the
    order of a line's ``cd``s no guide to where a later command runs."""
    home = home if home is not None else os.path.expanduser("~")
    cwds = [os.path.normpath(cwd)]
    found: list[str] = []
    for part in split.commands:
        if not is_read_only(part):
            continue
        parsed = operands_and_paths(part.words)
        if parsed is None:
            continue
        raw = [*parsed, *part.reads]
        if part.words[0] == "cd" and not parsed:
            raw = ["~"]
        for path in raw:
            found.extend(_absolute(path, base, home) for base in cwds)
        if part.words[0] == "cd":
            target = raw[0] if raw else "~"
            cwds.extend(_absolute(target, base, home) for base in list(cwds))
            if len(cwds) > _MAX_CWDS:
                found.append(os.sep)  # too many places to follow: the root stands for "somewhere outside"
                cwds = cwds[:_MAX_CWDS]
    return tuple(dict.fromkeys(found))


def command_dirs(split: ShellSplit, cwd: str, home: str | None = None) -> tuple[str, ...]:
    """Every directory the parts of *split* may run in: *cwd* and each static ``cd`` target, relative to each
    directory before it (as in :func:`command_paths`)."""
    home = home if home is not None else os.path.expanduser("~")
    cwds = [os.path.normpath(cwd)]
    for part in split.commands:
        if part.words[:1] != ("cd",) or not is_read_only(part):
            continue
        parsed = operands_and_paths(part.words) or ["~"]
        cwds.extend(_absolute(parsed[0], base, home) for base in list(cwds))
        if len(cwds) > _MAX_CWDS:
            break
    return tuple(dict.fromkeys(cwds))


def _absolute(path: str, base: str, home: str) -> str:
    if path == "~" or path.startswith("~/"):
        path = home + path[1:]
    # a globbed path reads what its directory holds: the part before the first glob character stands for it
    for index, char in enumerate(path):
        if char in _GLOB:
            path = path[:index].rpartition("/")[0] or ("/" if path.startswith("/") else ".")
            break
    return os.path.normpath(os.path.join(base, path))


_SUBCOMMAND = re.compile(r"^[a-z][a-z0-9_:-]*$")


def command_prefix(command: SimpleCommand) -> tuple[str, ...]:
    """What "always allow" records for *command*: its name, plus its first argument when that is a subcommand
    (lower-case letters, digits, ``-``, ``_``, ``:``; not an option, a path or a file name)."""
    words = command.words
    if len(words) >= 2 and _SUBCOMMAND.match(words[1]):
        return words[:2]
    return words[:1]
