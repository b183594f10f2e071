"""Shell commands split into their simple commands, for rules by command prefix (tree-sitter's bash grammar).

Guarantees:

* :func:`split_command` finds every simple command a command line would run: the parts of ``&&``, ``||``, ``;``,
  ``|`` and ``&`` lists, subshells and braces, and the commands inside ``$(...)``, backticks and ``<(...)``,
  wherever they stand (in an argument, a string, a redirection). Each comes with its words (quotes removed
  when the word is static) and whether it writes a file by redirection (``>``, ``>>``, ``&>``; ``/dev/null`` and
  ``>&N`` do not count).
* Anything the parser does not read as plain commands (a syntax error, ``if``/``for``/``while``/``case``,
  function definitions, ``[[ ]]``, ``export``/``declare``, bare assignments, a command name that is not a static
  word) makes the split ``opaque``: no rule and no read-only entry can allow it, so it asks.
* :func:`is_read_only` is the built-in set of commands that only read (they run without asking in default
  mode); :func:`command_prefix` is what an "always allow" records: the first word, and the second when it is a
  subcommand (``npm test``, ``git diff``), never the arguments.

The grammar is imported on the first command checked, not with :mod:`dsh.policy`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tree_sitter import Node, Parser

__all__ = ["ShellSplit", "SimpleCommand", "command_prefix", "is_read_only", "split_command"]


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    words: tuple[str, ...]
    """The command name and its arguments; a word with an expansion is kept as written (``$HOME``)."""
    writes_file: bool = False
    """Its output is redirected to a file."""
    assigns: bool = False
    """It is prefixed by variable assignments (``FOO=1 make``)."""


@dataclass(frozen=True, slots=True)
class ShellSplit:
    commands: tuple[SimpleCommand, ...]
    opaque: bool = False
    """Something in the line is not a plain simple command (see the module docstring): it must ask."""


@lru_cache(maxsize=1)
def _parser() -> Parser:
    import tree_sitter_bash
    from tree_sitter import Language, Parser

    return Parser(Language(tree_sitter_bash.language()))


_CONTAINERS = frozenset(
    {"program", "list", "pipeline", "subshell", "compound_statement", "redirected_statement", "negated_command"}
)
_IGNORED = frozenset(
    {"comment", "&&", "||", ";", "|", "|&", "&", "(", ")", "{", "}", "!", ";;", "\n", "$(", "`", "<(", ">("}
)
_SUBSTITUTIONS = frozenset({"command_substitution", "process_substitution"})
_WRITE_OPERATORS = frozenset({">", ">>", "&>", "&>>", ">|"})


class _Walker:
    def __init__(self) -> None:
        self.commands: list[SimpleCommand] = []
        self.opaque = False

    def statement(self, node: Node) -> None:
        kind = node.type
        if kind in _IGNORED:
            return
        if kind == "command":
            self.command(node, writes_file=False)
        elif kind == "redirected_statement":
            body = node.child_by_field_name("body")
            writes = any(self.redirect(child) for child in node.children if child is not body)
            if body is None:
                self.opaque = True
            elif body.type == "command":
                self.command(body, writes_file=writes)
            else:
                if writes:  # a redirected list or subshell: every command in it writes to the file
                    self.opaque = True
                self.statement(body)
        elif kind in _CONTAINERS:
            for child in node.children:
                self.statement(child)
        else:
            self.opaque = True

    def redirect(self, node: Node) -> bool:
        """Whether the redirection writes a file; commands inside it are collected."""
        self.substitutions(node)
        if node.type != "file_redirect":
            return False
        operator = next((c.type for c in node.children if c.type in _WRITE_OPERATORS), None)
        destination = node.child_by_field_name("destination")
        target = _text(destination) if destination is not None else ""
        return operator is not None and target != "/dev/null"

    def command(self, node: Node, *, writes_file: bool) -> None:
        words: list[str] = []
        assigns = False
        for child in node.children:
            kind = child.type
            if kind == "variable_assignment":
                assigns = True
                self.substitutions(child)
            elif kind == "command_name":
                name = child.children[0] if child.children else child
                if name.type not in ("word", "raw_string", "string") or _dynamic(name):
                    self.opaque = True
                words.append(_word(name))
                self.substitutions(child)
            elif kind in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
                writes_file = self.redirect(child) or writes_file
            else:
                words.append(_word(child))
                self.substitutions(child)
        if not words:
            self.opaque = True
            return
        self.commands.append(SimpleCommand(tuple(words), writes_file, assigns))

    def substitutions(self, node: Node) -> None:
        """Collect the commands of every ``$(...)``, backtick and ``<(...)`` in or below *node*."""
        if node.type in _SUBSTITUTIONS:
            for inner in node.children:
                self.statement(inner)
            return
        for child in node.children:
            self.substitutions(child)


def _text(node: Node) -> str:
    raw = node.text
    return raw.decode("utf-8", "replace") if raw is not None else ""


def _dynamic(node: Node) -> bool:
    if node.type in (
        "simple_expansion",
        "expansion",
        "command_substitution",
        "process_substitution",
        "arithmetic_expansion",
    ):
        return True
    return any(_dynamic(child) for child in node.children)


def _word(node: Node) -> str:
    text = _text(node)
    if _dynamic(node):
        return text
    if node.type == "raw_string" and len(text) >= 2:
        return text[1:-1]
    if node.type == "string" and len(text) >= 2:
        return text[1:-1]
    if node.type == "word":
        return re.sub(r"\\(.)", r"\1", text)
    if node.type == "concatenation":
        return "".join(_word(child) for child in node.children)
    return text


def _has_error(node: Node) -> bool:
    return node.has_error


@lru_cache(maxsize=512)
def split_command(command: str) -> ShellSplit:
    """The simple commands of *command* (see the module docstring); never raises."""
    try:
        tree: Any = _parser().parse(command.encode("utf-8"))
    except Exception:
        return ShellSplit((), opaque=True)
    root = tree.root_node
    walker = _Walker()
    walker.statement(root)
    opaque = walker.opaque or _has_error(root) or not walker.commands
    return ShellSplit(tuple(walker.commands), opaque)


# -- the read-only set ----------------------------------------------------------------------------------------

_READ_ONLY = frozenset(
    [
        "ls",
        "cat",
        "head",
        "tail",
        "wc",
        "pwd",
        "cd",
        "true",
        "false",
        "which",
        "type",
        "whoami",
        "id",
        "date",
        "uname",
        "hostname",
        "file",
        "stat",
        "du",
        "df",
        "tree",
        "basename",
        "dirname",
        "realpath",
        "readlink",
        "uniq",
        "cut",
        "tr",
        "nl",
        "diff",
        "cmp",
        "comm",
        "grep",
        "egrep",
        "fgrep",
        "column",
        "seq",
        "sha256sum",
        "sha1sum",
        "md5sum",
        "jq",
    ]
)
_FIND_WRITES = frozenset({"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"})
_RG_RUNS = ("--pre", "--hostname-bin", "--search-zip", "-z")
_GIT_READS = frozenset({"status", "diff", "log", "show", "rev-parse", "ls-files", "blame", "shortlog", "describe"})
_GIT_BRANCH_LISTS = frozenset(
    {"-a", "--all", "-r", "--remotes", "-v", "-vv", "--verbose", "--list", "-l", "--show-current", "--no-color"}
)


def is_read_only(command: SimpleCommand) -> bool:
    """Whether *command* only reads (the built-in set; see the module docstring). Redirection to a file,
    variable prefixes and expansions in the command name are never read-only."""
    if command.writes_file or command.assigns or not command.words:
        return False
    name, args = command.words[0], command.words[1:]
    if name in _READ_ONLY:
        return True
    if name == "find":
        return not any(arg in _FIND_WRITES for arg in args)
    if name == "rg":
        return not any(arg == flag or arg.startswith(flag + "=") for arg in args for flag in _RG_RUNS)
    if name == "sort":
        return not any(arg == "-o" or arg.startswith(("-o", "--output")) for arg in args)
    if name == "git" and args and args[0] == "--no-pager":
        args = args[1:]
    if name == "git" and args:
        sub, rest = args[0], args[1:]
        if sub in _GIT_READS:
            return not any(arg.startswith(("--output", "--ext-diff", "-o")) for arg in rest)
        if sub == "branch":
            return all(arg in _GIT_BRANCH_LISTS for arg in rest)
        if sub == "remote":
            return all(arg in ("-v", "--verbose") for arg in rest)
    return False


_SUBCOMMAND = re.compile(r"^[a-z][a-z0-9_:-]*$")


def command_prefix(command: SimpleCommand) -> tuple[str, ...]:
    """What "always allow" records for *command*: its name, plus its first argument when that is a subcommand
    (lower-case letters, digits, ``-``, ``_``, ``:``; not an option, a path or a file name)."""
    words = command.words
    if len(words) >= 2 and _SUBCOMMAND.match(words[1]):
        return words[:2]
    return words[:1]
