"""Rules by scope and the decision allow / ask / refuse, as pure logic (no I/O).

A rule is a tool name and an optional scope: for ``run_command`` (any tool of kind ``execute`` whose call was
prepared with a command) a command prefix in words (``npm test`` matches ``npm test -- -k x``, not ``npm
testing``); for file tools a pattern of the one glob dialect (:mod:`dsh.globs`: ``src/**``, ``*.md`` at every
depth, ``./*.md`` at the top, ``/etc/**``), relative to the session's directory or absolute; no scope: every call
of the tool. Rules come from the config file's ``permissions:`` section (allow,
ask, deny patterns such as ``run_command(npm test)`` or ``edit_file(src/**)``) and from "always" answers in the
session (allow or reject, with the scope the option named), which are recorded in the session log as
``permission/rule`` events ``{tool, decision, scope?}``.

The decision (:meth:`SessionPolicy.decide`), in order:

1. A deny pattern or an "always reject" that matches refuses (deny wins over everything, even bypass).
2. Reads and searches outside the roots are allowed when the session reads anywhere (``--allow-reads``); a
   command's paths are never reads in this sense.
3. Plan mode refuses edits, commands, tools that ask, and paths outside the roots.
4. Bypass mode allows.
5. Paths outside the session's roots ask (an "always allow" never reaches outside; a config ``allow`` pattern
   that names the path does). For a command these are the paths its read-only parts read or ``cd`` to
   (:func:`._shell.command_paths`, resolved by the pipeline), so ``cat ../x`` asks as ``read_file`` of it does.
6. Edits of a path with a ``.git`` component (the directory or a ``.git`` file) or named ``.gitattributes`` ask
   in every mode, accept-edits included, with no "always" (git runs programs its configuration names); a config
   ``allow`` pattern that names the path allows them.
7. An ``ask`` pattern that matches asks.
8. A command is split into its simple commands (:mod:`._shell`); it is allowed only when every part is, by the
   built-in read-only set or an allow rule; anything opaque asks with no "always". A prefix rule (an "always
   allow `cat`", a config ``run_command(npm test)``) never covers a part that writes a file by redirection, and
   no "always" is offered for such a part: what the user saw (``cat a > b``) must not later allow ``cat a >
   ../outside/authorized_keys``.
9. Edits: allowed in accept-edits mode or by an allow rule for the path; else ask.
10. Other commands and tools that say they ``ask`` (MCP tools that are not read-only): an allow rule, else ask.
11. Everything else (reads, searches) is allowed.

A config path scope covers a path when the pattern covers it (:meth:`dsh.globs.Glob.covers`, relative to the
session's directory); a session's scope (the directory an "always" answer named) is a literal path that covers
itself and what is below it, never a glob. An allow covers a path only both as written and with every symlink of
the path and the directory resolved, so a symlink inside ``src/`` that points elsewhere is not covered by "always
allow write_file in `src/`". A deny or ask pattern matches when either spelling does. Resolving those symlinks is
the only file access of the decision.

Legacy ``permission/rule`` events (before scopes) carry no scope: their "reject" still holds for the whole tool,
their "allow" holds only for tools that are neither commands nor edits (a remembered tool-wide "always allow
run_command" was the very hole this design closes).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from dsh.globs import GlobError, compile_glob
from dsh.policy._modes import DEFAULT_MODE
from dsh.policy._shell import ShellSplit, SimpleCommand, command_prefix, is_read_only, split_command
from dsh.tools import is_within

__all__ = [
    "COMMAND_KINDS",
    "EDIT_KINDS",
    "RULE_EVENT",
    "RUNNING_EVENT",
    "CallFacts",
    "Decision",
    "Rule",
    "SessionPolicy",
    "parse_pattern",
    "rules_from_log",
]

EDIT_KINDS = frozenset({"edit", "delete", "move"})
COMMAND_KINDS = frozenset({"execute"})
READ_KINDS = frozenset({"read", "search"})
RULE_EVENT = "permission/rule"
RUNNING_EVENT = "tool/running"
"""Logged by the pipeline when it lets a call run: the card goes ``pending`` → ``in_progress``. In the log (not
only on the wire) so that a replay shows the same transitions as the live stream did."""

Verdict = Literal["allow", "ask", "refuse"]


@dataclass(frozen=True, slots=True)
class Rule:
    tool: str
    scope: str | None
    decision: Literal["allow", "ask", "deny"]
    origin: Literal["config", "session"] = "session"

    def pattern(self) -> str:
        return self.tool if self.scope is None else f"{self.tool}({self.scope})"


_PATTERN = re.compile(r"^\s*([A-Za-z0-9_.:*-]+)\s*(?:\((.*)\))?\s*$", re.S)


def parse_pattern(text: str, decision: Literal["allow", "ask", "deny"]) -> Rule:
    """``tool`` or ``tool(scope)``; a command scope may end in ``:*`` or `` *`` (Claude Code's spelling), which
    means the same prefix. Raises ValueError with a message a user can act on."""
    match = _PATTERN.match(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(
            f"{text!r} is not a permission pattern: write a tool name, or tool(scope) such as run_command(npm test) or edit_file(src/**)"
        )
    tool, scope = match.group(1), match.group(2)
    if scope is not None:
        scope = scope.strip()
        for suffix in (":*", " *"):
            scope = scope.removesuffix(suffix)
        if not scope:
            raise ValueError(f"{text!r} has an empty scope: drop the parentheses to mean every call of {tool}")
        if tool not in PREFIX_TOOLS:
            try:
                compile_glob(scope)
            except GlobError as exc:
                raise ValueError(f"{text!r}: {exc}") from None
    return Rule(tool, scope, decision, "config")


PREFIX_TOOLS = frozenset({"run_command", "*", "fetch_url"})
"""Tools whose scope is not read as a path pattern when the config is loaded: a command prefix (``run_command``,
and ``*``, which may mean either) or a domain (``fetch_url``). A path scope on ``*`` is still a glob when a call
with paths meets it (one that does not compile fails closed, see :func:`_path_matches`)."""


@dataclass(frozen=True, slots=True)
class CallFacts:
    """What the decision looks at: the tool, its kind, whether it says it asks, what prepare found (paths, paths
    outside the roots, the command) and the session's directory (relative scopes are relative to it)."""

    tool: str
    kind: str
    cwd: str
    asks: bool = False
    paths: tuple[str, ...] = ()
    outside: tuple[str, ...] = ()
    command: str | None = None
    domain: str | None = None
    """The host a network tool (``fetch_url``) would reach: its "always" answers are per domain (RFC 0018)."""
    split: ShellSplit | None = None
    """The command already split (the pipeline splits it off the event loop); None: split here."""
    hazard: str = ""
    """Why the pipeline found that this command must ask whatever the parts are (a directory git would take
    for its own, say); empty: nothing found."""


@dataclass(frozen=True, slots=True)
class Decision:
    verdict: Verdict
    why: str = ""
    """For ask: why the user is asked; for refuse: the message the model gets."""
    scopes: tuple[str, ...] = ()
    """What an "always" answer would record (command prefixes; one directory); empty: the whole tool."""
    always: bool = True
    """Whether an "always" answer is offered (not for opaque commands or paths outside the roots)."""
    by_default: bool = False
    """For ask: the question is only the mode's default for this kind of call (an edit, a command that may change
    something, a tool that asks first), not a rule, a path outside the roots, a hazard or the sandbox: the one
    kind of question a ``PreToolUse`` hook's ``allow`` may skip (:func:`dsh.policy.amend_decision`)."""


def _path_matches(
    rule: Rule, path: str, cwd: str, *, strict: bool = True, real: Callable[[str], str] = os.path.realpath
) -> bool:
    """*path* (absolute) is covered by *rule*'s path scope, relative to *cwd*: both as written and with symlinks
    resolved for *strict* (allow rules), either way otherwise (deny, ask). A session rule's scope (the directory
    an "always" answer named) is a literal path, never a glob: it covers that directory and what is below it,
    whatever characters its name holds. A config scope is a pattern of the one glob dialect (:mod:`dsh.globs`); one
    that does not compile covers every path for a deny or ask rule and none for an allow rule (fail closed)."""
    scope = rule.scope or ""
    path = os.path.normpath(path)
    if len(path) > _PATH_MAX or any(len(name) > _NAME_MAX for name in path.split(os.sep)):
        return rule.decision != "allow"  # no file has this name: never allowed, always denied, and never matched
    if rule.origin == "session":
        base = os.path.normpath(os.path.join(cwd, os.path.expanduser(scope)))
        lexical = is_within(path, base)
        if lexical != strict:
            return lexical
        return is_within(real(path), real(base))
    try:
        glob = compile_glob(scope)
    except GlobError:
        return rule.decision != "allow"
    lexical = glob.covers(path, cwd)
    if lexical != strict:
        return lexical
    resolved = glob.resolved(cwd, real)
    return resolved.covers(real(path), real(cwd))


_PATH_MAX = 4096
_NAME_MAX = 255
"""Linux's limits: a longer path or name names no file, so a rule does not spend time matching it (a crafted
megabyte-long path against a glob is work for the event loop, RFC 0041)."""


def _memo(function: Callable[[str], str]) -> Callable[[str], str]:
    """*function* remembered for the life of the returned callable (one decision): never across decisions, so a
    symlink changed between two calls is read again."""
    seen: dict[str, str] = {}

    def call(argument: str) -> str:
        value = seen.get(argument)
        if value is None:
            value = seen[argument] = function(argument)
        return value

    return call


_GIT_CONTROL = frozenset({".git"})
_GIT_FILES = frozenset({".gitattributes"})


def _git_control(path: str) -> bool:
    """Whether editing *path* could change what git runs: anything in a ``.git`` directory (or a ``.git`` file,
    which names another git directory) or a ``.gitattributes`` file (it names diff and filter drivers)."""
    parts = os.path.normpath(path).split(os.sep)
    return any(part in _GIT_CONTROL for part in parts) or parts[-1] in _GIT_FILES


def _prefix_matches(scope: str, words: Sequence[str]) -> bool:
    wanted = scope.split()
    return bool(wanted) and tuple(words[: len(wanted)]) == tuple(wanted)


@dataclass
class SessionPolicy:
    """A session's mode and rules (config rules first, then the session's own "always" answers)."""

    mode: str = DEFAULT_MODE
    rules: list[Rule] = field(default_factory=list)
    reads_anywhere: bool = False
    """Reads and searches outside the roots run without asking (a run nobody can be asked in, ``--allow-reads``)."""

    # -- matching ----------------------------------------------------------------------------------------------

    def _of(self, tool: str, *decisions: str) -> list[Rule]:
        return [rule for rule in self.rules if rule.decision in decisions and rule.tool in (tool, "*")]

    def _rule_covers(
        self, rule: Rule, facts: CallFacts, part: SimpleCommand | None, real: Callable[[str], str] = os.path.realpath
    ) -> bool:
        if rule.scope is None:
            return True
        if facts.domain is not None:  # a domain scope: the host itself, or ``*.example.com`` for its subdomains
            scope = rule.scope.lower()
            return facts.domain == scope or (scope.startswith("*.") and facts.domain.endswith(scope[1:]))
        if part is not None:
            if rule.decision == "allow" and part.writes_file:
                return False  # a prefix never covers a redirection's write (the user saw another target)
            return _prefix_matches(rule.scope, part.words)
        if facts.command is not None:
            return False
        strict = rule.decision == "allow"
        paths = facts.paths
        return bool(paths) and all(_path_matches(rule, path, facts.cwd, strict=strict, real=real) for path in paths)

    def _matching(
        self,
        facts: CallFacts,
        decisions: tuple[str, ...],
        parts: Sequence[SimpleCommand],
        real: Callable[[str], str] = os.path.realpath,
    ) -> Rule | None:
        for rule in self._of(facts.tool, *decisions):
            if rule.scope is None and rule.origin == "session" and rule.decision == "allow" and _guarded(facts):
                continue  # a legacy tool-wide "always allow" for a command or an edit tool
            if parts:
                if any(self._rule_covers(rule, facts, part) for part in parts):
                    return rule
            elif self._rule_covers(rule, facts, None, real):
                return rule
        return None

    # -- the decision ------------------------------------------------------------------------------------------

    def decide(self, facts: CallFacts) -> Decision:
        """allow / ask / refuse for a call (see the module docstring for the order)."""
        split = facts.split
        if split is None and facts.command is not None:
            split = split_command(facts.command)
        parts = split.commands if split is not None else ()
        real = _memo(os.path.realpath)  # one call's symlink reads: each path resolved once, not once per rule
        denied = self._matching(facts, ("deny",), parts, real)
        if denied is not None:
            return Decision("refuse", self._denied(facts, denied))
        mutating = facts.kind in EDIT_KINDS or facts.kind in COMMAND_KINDS or facts.asks
        if facts.outside and self.reads_anywhere and not mutating and facts.kind in READ_KINDS:
            return Decision("allow")
        if self.mode == "plan" and (mutating or facts.outside):
            return Decision("refuse", self._plan(facts))
        if self.mode == "bypass":
            return Decision("allow")
        if facts.outside:
            configured = [r for r in self._of(facts.tool, "allow") if r.origin == "config" and r.scope is not None]
            if not any(all(_path_matches(r, p, facts.cwd, real=real) for p in facts.outside) for r in configured):
                return Decision("ask", "it touches paths outside the session's directory", always=False)
        if facts.kind in EDIT_KINDS and any(_git_control(path) for path in facts.paths):
            configured = [r for r in self._of(facts.tool, "allow") if r.origin == "config" and r.scope is not None]
            if not any(all(_path_matches(r, p, facts.cwd, real=real) for p in facts.paths) for r in configured):
                return Decision(
                    "ask",
                    "it changes git's own files (.git, .gitattributes), which can make git run programs",
                    always=False,
                )
        if split is not None:
            if facts.hazard:
                return Decision("ask", facts.hazard, always=False)
            return self._command(facts, split)
        if self._matching(facts, ("ask",), (), real) is not None:
            return Decision("ask", "a permissions rule says to ask", self._path_scopes(facts))
        if facts.kind in EDIT_KINDS and not facts.asks:
            if self.mode == "accept-edits" or self._matching(facts, ("allow",), (), real) is not None:
                return Decision("allow")
            return Decision("ask", "edits ask first in default mode", self._path_scopes(facts), by_default=True)
        if facts.kind in COMMAND_KINDS or facts.asks:
            if self._matching(facts, ("allow",), (), real) is not None:
                return Decision("allow")
            if facts.domain is not None:
                return Decision("ask", f"it reaches {facts.domain}", (facts.domain,))
            return Decision("ask", "this tool asks first", by_default=True)
        return Decision("allow")

    def _command(self, facts: CallFacts, split: ShellSplit) -> Decision:
        if split.opaque:
            return Decision("ask", f"the command cannot be read exactly: {split.reason}", always=False)
        parts = split.commands
        asked = [part for part in parts if self._part_rule(facts, part, "ask") is not None]
        pending = [
            part
            for part in parts
            if part in asked or (not is_read_only(part) and self._part_rule(facts, part, "allow") is None)
        ]
        if not pending:
            return Decision("allow")
        rememberable = [part for part in pending if not part.writes_file]
        scopes = tuple(dict.fromkeys(" ".join(command_prefix(part)) for part in rememberable))
        why = "a permissions rule says to ask" if asked else "commands that may change something ask first"
        return Decision("ask", why, scopes, always=bool(scopes), by_default=not asked)

    def _part_rule(self, facts: CallFacts, part: SimpleCommand, decision: str) -> Rule | None:
        for rule in self._of(facts.tool, decision):
            if rule.scope is None and rule.origin == "session" and decision == "allow":
                continue
            if self._rule_covers(rule, facts, part):
                return rule
        return None

    @staticmethod
    def _path_scopes(facts: CallFacts) -> tuple[str, ...]:
        """The directories of the call's paths: an "always" answer covers files there and below."""
        return tuple(dict.fromkeys(os.path.dirname(path) for path in facts.paths))

    # -- remembering ---------------------------------------------------------------------------------------------

    def remember(self, tool: str, scopes: Sequence[str], decision: Literal["allow", "reject"]) -> list[dict[str, Any]]:
        """Add the session rules of an "always" answer; return the ``permission/rule`` event data to log."""
        kind: Literal["allow", "deny"] = "allow" if decision == "allow" else "deny"
        events: list[dict[str, Any]] = []
        for scope in scopes or (None,):
            self.rules.append(Rule(tool, scope, kind))
            events.append({"tool": tool, "decision": decision} | ({"scope": scope} if scope is not None else {}))
        return events

    # -- messages --------------------------------------------------------------------------------------------------

    def refusal(self, tool: str, *, once: bool = False) -> str:
        """The model's message for a call the user declined (*once*) or refused for good."""
        if once:
            return (
                f"The user declined this {tool} call. It did not run. Do not repeat it unchanged; "
                "ask the user or try another way."
            )
        return f"The user does not allow {tool} in this session. Do not retry it; continue another way or ask."

    def _denied(self, facts: CallFacts, rule: Rule) -> str:
        if rule.origin == "session":
            scope = f" for `{rule.scope}`" if rule.scope else ""
            return (
                f"The user does not allow {facts.tool} in this session{scope}. Do not retry it; continue another "
                "way or ask."
            )
        return (
            f"{facts.tool} is denied by the permissions configuration (`{rule.pattern()}`). It did not run. Do not "
            "retry it; continue another way or ask the user."
        )

    def refusal_before_prepare(self, facts: CallFacts) -> Decision | None:
        """The refusal that holds whatever the call would do, so the pipeline gives it before the tool prepares
        (matches, reads) anything: plan mode refuses every edit and command, and an edit whose text is absent
        must say "plan mode", not "old_string not found" (issue 43). None: the decision needs the prepared facts."""
        mutating = facts.kind in EDIT_KINDS or facts.kind in COMMAND_KINDS or facts.asks
        if self.mode == "plan" and mutating:
            return Decision("refuse", self._plan(facts))
        return None

    def _plan(self, facts: CallFacts) -> str:
        mutating = facts.kind in EDIT_KINDS or facts.kind in COMMAND_KINDS or facts.asks
        what = "paths outside the session's directory" if facts.outside and not mutating else facts.tool
        return (
            f"Plan mode is on: {what} is not available (read-only). Describe the change you would make, "
            "or ask the user to leave plan mode."
        )


def _guarded(facts: CallFacts) -> bool:
    """Whether a tool-wide session "allow" must not cover this call: it has a command or file paths, so an
    "always" answer would have recorded a scope (only legacy logs hold a tool-wide one)."""
    return facts.command is not None or facts.domain is not None or (facts.kind in EDIT_KINDS and bool(facts.paths))


def rules_from_log(events: Iterable[Any]) -> list[Rule]:
    """The session's "always" rules recorded in its log, in order (a later answer for the same tool and scope
    replaces the earlier one)."""
    rules: dict[tuple[str, str | None], Rule] = {}
    for event in events:
        if event.type != RULE_EVENT:
            continue
        tool, decision, scope = event.data.get("tool"), event.data.get("decision"), event.data.get("scope")
        if not isinstance(tool, str) or decision not in ("allow", "reject"):
            continue
        if scope is not None and not isinstance(scope, str):
            continue
        rules.pop((tool, scope), None)
        rules[(tool, scope)] = Rule(tool, scope, "allow" if decision == "allow" else "deny")
    return list(rules.values())
