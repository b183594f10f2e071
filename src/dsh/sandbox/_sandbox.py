"""Levels, the per-call containment and the ``sandbox`` service.

The policy's ``decide`` stage asks the sandbox about each command call (:meth:`Sandbox.judge`: may it run without a
question, at which level with and without one); the ``contain`` stage (:meth:`Sandbox.contain_step`) runs the rest
of the chain inside :meth:`Sandbox.contain` at the level that follows ``ToolExecution.decision`` (asked or not); the
process spawn (:mod:`dsh.tools._process`) reads the current :class:`Containment` (:func:`active`) and confines the
child. Guarantees:

* A command that runs without a question because the parser found it read-only runs at ``read-only``.
  Commands the user approved (a question, an "always" rule, ``bypass`` mode) run at the configured
  ``approved`` level (``workspace-write`` by default).
* Where the machine offers no sandbox, a command the parser found read-only asks instead (fail closed); once
  approved it runs unconfined, and the question says so.
* A command that failed at a level because of the sandbox is remembered (its exact text, per session); running
  the same text again asks, whatever the parser says, and the question says that the approval runs it one
  level wider (``read-only`` → the approved level → ``off``).
* ``read-only``: reads in the roots, the private temporary directory and the system's locations
  (:mod:`._paths`); writes only in the private temporary directory; no network (a network namespace where
  available, and TCP denied by Landlock from ABI 4). ``workspace-write``: writes in the roots too, except their
  ``.git`` and ``.dsh`` (read-only bind mounts; without namespaces, only the roots' other top-level entries are
  writable); network per ``sandbox.network``.
* The private temporary directory (mode 0700; ``DATA_DIR/sandbox-tmp/SESSION_ID`` with a data directory, else a
  fresh one under the system's) is made on the session's first confined command, is the command's ``TMPDIR``,
  and is removed when the session is disposed.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import anyio

from dsh._log import get_logger
from dsh.sandbox._config import ApprovedLevel, SandboxConfig
from dsh.sandbox._support import Support, support

if TYPE_CHECKING:
    from collections.abc import Callable

    from dsh.kernel import Context, Next
    from dsh.sandbox._child import ChildPlan
    from dsh.services.tools import ToolExecution, ToolResult

__all__ = [
    "BLOCKED_READ_ONLY",
    "CHOICE_EVENT",
    "BLOCKED_WORKSPACE",
    "FORCE_NO_ASK_ENV",
    "LEVELS",
    "Containment",
    "Judgement",
    "Level",
    "Sandbox",
    "SpawnPlan",
    "active",
]

Level = Literal["read-only", "workspace-write", "off"]
LEVELS: tuple[Level, ...] = ("read-only", "workspace-write", "off")

CHOICE_EVENT = "sandbox/choice"
"""The session event ``/sandbox LEVEL`` logs (``{"approved": LEVEL}``): a loaded session keeps its choice."""

FORCE_NO_ASK_ENV = "DSH_SANDBOX_TEST_FORCE_NO_ASK"
"""Test hook: when ``1``, every command call the policy would ask about runs without a question at ``read-only``
(the parser's verdict forced), so a test can show the sandbox alone holds. Logged loudly at start-up."""

BLOCKED_READ_ONLY = (
    "blocked by the sandbox: writes (and network) are not allowed for commands run without asking; "
    "run the same command again to ask the user to run it with writes in the project"
)
BLOCKED_WORKSPACE = (
    "blocked by the sandbox: approved commands may write only inside the project (not in .git or .dsh, not "
    "outside it){network}; run the same command again to ask the user to run it outside the sandbox"
)
_MARKERS = (
    "Permission denied",
    "Read-only file system",
    "Network is unreachable",
    "Operation not permitted",
    "Could not resolve host",
    "Temporary failure in name resolution",
    "Name or service not known",
)
"""What a command prints when the sandbox stopped one of its calls (EACCES from Landlock, EROFS from the read-only
binds, ENETUNREACH and failed name lookups without network)."""

log = get_logger("dsh.sandbox")

_CURRENT: contextvars.ContextVar[Containment | None] = contextvars.ContextVar("dsh_sandbox", default=None)


def _session_of(execution: ToolExecution) -> str:
    agent = execution.agent
    return agent.session.id if agent is not None else ""


def active() -> Containment | None:
    """The containment of the tool call running in this task (None outside the pipeline: run as before)."""
    return _CURRENT.get()


@dataclass(frozen=True, slots=True)
class Judgement:
    """The pipeline's adjusted verdict for a command call: ``ask`` with ``why`` when the sandbox wants a
    question; the level to run at without one (``quiet``) and once approved (``approved``)."""

    ask: bool
    why: str
    quiet: Level
    approved: Level
    label: str = ""
    """The "Allow" option's name when the sandbox asks (what allowing does); empty: the usual one."""


_JUDGED: contextvars.ContextVar[tuple[str, Judgement] | None] = contextvars.ContextVar(
    "dsh_sandbox_judged", default=None
)
"""The judgement of the call being decided, for its ``contain`` stage (this task only)."""


@dataclass(frozen=True, slots=True)
class SpawnPlan:
    """What the spawn adds for a confined command: ``env`` entries and the ``preexec`` step (last)."""

    env: dict[str, str]
    preexec: Callable[[], None]


@dataclass(frozen=True, slots=True)
class Containment:
    level: Level
    session: str
    command: str
    roots: tuple[str, ...]
    sandbox: Sandbox
    network: bool | None = None
    """At ``workspace-write``: None follows ``sandbox.network``; False cuts the network whatever it says (a
    language server, RFC 0037, needs none). Never widens: True is ``sandbox.network`` too."""

    async def plan(self) -> SpawnPlan | None:
        """The spawn plan at this level (None at ``off``); builds the session's ruleset once, in a worker thread.
        Raises OSError where the level cannot be had (the command must then not run)."""
        if self.level == "off":
            return None
        return await anyio.to_thread.run_sync(self.sandbox._plan, self)

    def blocked(self, exit_code: int | None, output: str) -> str | None:
        """The line to append when a command's output says one of its calls was stopped by the sandbox (the
        command may still exit 0: a shell goes on after a failed redirect); remembered, so the same command
        asks next time. None otherwise."""
        if self.level == "off" or not any(marker in output for marker in _MARKERS):
            return None
        self.sandbox._blocked.setdefault(self.session, {})[self.command] = self.level
        if self.level == "read-only":
            return BLOCKED_READ_ONLY
        network = "" if self.sandbox.network_on else ", without network"
        return BLOCKED_WORKSPACE.format(network=network)


@dataclass
class _Session:
    tmp: str
    rulesets: dict[tuple[Level, tuple[str, ...], bool], int] = field(default_factory=dict)


class Sandbox:
    """The ``sandbox`` service (see the module docstring)."""

    def __init__(
        self,
        config: SandboxConfig | None = None,
        machine: Support | None = None,
        ctx: Context | None = None,
        data_dir: str | None = None,
    ) -> None:
        self.config = config or SandboxConfig()
        self._ctx = ctx
        self._data_dir = data_dir
        self._machine = machine
        self._sessions: dict[str, _Session] = {}
        self._blocked: dict[str, dict[str, Level]] = {}
        self._chosen: dict[str, ApprovedLevel] = {}
        self._lock = threading.Lock()
        self.force_no_ask = os.environ.get(FORCE_NO_ASK_ENV) == "1"

    @property
    def support(self) -> Support:
        if self._machine is None:
            self._machine = support()
        return self._machine

    @property
    def network_on(self) -> bool:
        """Approved commands at ``workspace-write`` reach the network (a domain list is not supported yet)."""
        return self.config.network is True

    def describe(self, session: str | None = None) -> str:
        """One line: what confines commands here (``dsh config show``, ``/status`` with *session*, the start-up
        log)."""
        machine = self.support
        if not machine.available:
            return f"sandbox {machine.describe()}"
        network = self.config.network
        net = "on" if network is True else "off" if network is False else "off (domain lists are not supported yet)"
        approved = self.approved_level(session)
        return (
            f"sandbox {machine.describe()}; commands run without asking: read-only; approved commands: "
            f"{approved}" + (f" (network {net})" if approved == "workspace-write" else "")
        )

    def approved_level(self, session: str | None) -> ApprovedLevel:
        """Where *session*'s approved commands run: its own choice (:meth:`choose`), else the configuration's."""
        return self._chosen.get(session or "", self.config.approved)

    def choose(self, session: str, level: ApprovedLevel) -> None:
        """*session*'s approved commands run at *level* from now on (``/sandbox``)."""
        self._chosen[session] = level

    # -- deciding ---------------------------------------------------------------------------------------------

    def judge(self, execution: ToolExecution, command: str, *, asks: bool, read_only: bool, bypass: bool) -> Judgement:
        """The sandbox's say on a command call the policy would run without a question (``asks`` False) or
        ask about; *read_only*: the parser found every part read-only; *bypass*: the session never asks. The
        judgement is kept for this call's ``contain`` stage (:meth:`contain_step`)."""
        session = _session_of(execution)
        if session not in self._chosen and execution.agent is not None:  # a loaded session's own choice
            stored = execution.agent.session.last(CHOICE_EVENT)
            level = stored.data.get("approved") if stored is not None and isinstance(stored.data, dict) else None
            if level in ("workspace-write", "off"):
                self._chosen[session] = "off" if level == "off" else "workspace-write"
        judgement = self._judge(session, command, asks=asks, read_only=read_only, bypass=bypass)
        _JUDGED.set((execution.call_id, judgement))
        return judgement

    async def contain_step(self, execution: ToolExecution, next_: Next[ToolExecution, ToolResult]) -> ToolResult:
        """The ``contain`` stage: a command call the policy judged runs the rest of the chain at its level (the
        approved level when the user was asked, ``ToolExecution.decision``; else the no-question level)."""
        judged = _JUDGED.get()
        prepared = execution.prepared
        if judged is None or judged[0] != execution.call_id or prepared is None or prepared.command is None:
            return await next_()
        _JUDGED.set(None)  # a call the stages below start (a sub-agent's) is judged for itself
        judgement = judged[1]
        asked = execution.decision is not None and execution.decision.asked
        level = judgement.approved if asked else judgement.quiet
        workspace = self._ctx.get("workspace") if self._ctx is not None else None
        roots = tuple(workspace.roots(execution)) if workspace is not None else (prepared.cwd or os.getcwd(),)
        with self.contain(execution, level, prepared.command, roots):
            return await next_()

    def _judge(self, session: str, command: str, *, asks: bool, read_only: bool, bypass: bool) -> Judgement:
        machine = self.support
        approved: Level = self.approved_level(session) if machine.available else "off"
        quiet: Level = "read-only" if read_only else approved
        if not machine.available:
            if not asks and read_only and not bypass:
                why = f"no OS sandbox here ({machine.why}), so every command asks first; it would run unconfined"
                return Judgement(True, why, "off", "off", "Allow (no sandbox here: it runs unconfined)")
            return Judgement(asks, "", "off", "off")
        before = self._blocked.get(session, {}).get(command)
        if before is not None:
            wider: Level = approved if before == "read-only" else "off"
            if wider == before:
                wider = "off"
            where = "with writes in the project" if wider == "workspace-write" else "outside the sandbox"
            why = f"it failed in the sandbox ({before}); allowing runs it {where}"
            return Judgement(True, why, quiet, wider, f"Allow {where}")
        if self.force_no_ask:
            return Judgement(False, "", "read-only", approved)
        return Judgement(asks, "", quiet, approved)

    @contextlib.contextmanager
    def contain(self, execution: ToolExecution, level: Level, command: str, roots: tuple[str, ...]) -> Iterator[None]:
        """Run the rest of the call (in this task and the tasks it starts) at *level*."""
        token = _CURRENT.set(Containment(level, _session_of(execution), command, roots, self))
        try:
            yield
        finally:
            _CURRENT.reset(token)

    # -- sessions ---------------------------------------------------------------------------------------------

    def dispose_session(self, session: str) -> None:
        """Close the session's rulesets and remove its private temporary directory."""
        self._blocked.pop(session, None)
        self._chosen.pop(session, None)
        with self._lock:
            state = self._sessions.pop(session, None)
        if state is None:
            return
        for fd in state.rulesets.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(state.tmp, ignore_errors=True)

    def close(self) -> None:
        for session in list(self._sessions):
            self.dispose_session(session)

    def temporary_directory(self, session: str) -> str:
        """*session*'s private temporary directory, made on first use (worker threads and the event loop may ask at
        once: one of them makes it)."""
        with self._lock:
            return self._temporary_directory(session)

    def _temporary_directory(self, session: str) -> str:
        state = self._sessions.get(session)
        if state is None:
            if self._data_dir is not None and session and session.replace("-", "").isalnum():
                parent = os.path.join(self._data_dir, "sandbox-tmp")
                os.makedirs(parent, mode=0o700, exist_ok=True)
                path = os.path.join(parent, session)
                shutil.rmtree(path, ignore_errors=True)  # a leftover of a daemon that was killed
                os.mkdir(path, 0o700)
            else:
                path = tempfile.mkdtemp(prefix="dsh-sandbox-")
            state = _Session(path)
            self._sessions[session] = state
        return state.tmp

    # -- spawning (worker thread) -----------------------------------------------------------------------------

    def _plan(self, containment: Containment) -> SpawnPlan:
        from dsh.sandbox._child import confine_step

        machine = self.support
        if not machine.available:
            raise OSError(f"no sandbox on this machine: {machine.why}")
        level = containment.level
        roots = tuple(os.path.realpath(root) for root in containment.roots)
        network = level == "workspace-write" and self.network_on and containment.network is not False
        key = (level, roots, network)
        with self._lock:
            tmp = self._temporary_directory(containment.session)
            state = self._sessions[containment.session]
            ruleset = state.rulesets.get(key)
            if ruleset is None:
                ruleset = self._ruleset(level, roots, tmp, network=network, namespaces=machine.namespaces)
                state.rulesets[key] = ruleset
        plan = self.child_plan(level, roots, ruleset, network=network, parent=os.getpid())
        env = {"TMPDIR": tmp, "TMP": tmp, "TEMP": tmp}
        return SpawnPlan(env, confine_step(plan))

    def child_plan(
        self, level: Level, roots: tuple[str, ...], ruleset: int, *, network: bool, parent: int
    ) -> ChildPlan:
        """What the confined process does before exec (namespaces, the read-only binds, the ruleset)."""
        from dsh.sandbox._child import CLONE_NEWNET, CLONE_NEWNS, CLONE_NEWUSER, ChildPlan, locked_flags

        binds: list[tuple[bytes, int]] = []
        flags = 0
        if self.support.namespaces:
            flags = CLONE_NEWUSER | (0 if network else CLONE_NEWNET)
            if level == "workspace-write":
                for root in roots:
                    for name in (".git", ".dsh"):
                        path = os.path.join(root, name)
                        if os.path.lexists(path) and not os.path.islink(path):
                            binds.append((os.fsencode(path), locked_flags(path)))
                if binds:
                    flags |= CLONE_NEWNS
        return ChildPlan(flags, tuple(binds), ruleset, parent, os.getuid(), os.getgid())

    def terminal_command(self, containment: Containment) -> tuple[str, list[str]]:
        """The program and arguments an editor's terminal runs for *containment*'s command: this Python running
        :mod:`dsh.sandbox` (``python -m dsh.sandbox``), which confines itself as a forked child would and then
        execs ``bash -c COMMAND`` (see :mod:`dsh.sandbox._exec`)."""
        import sys

        machine = self.support
        if not machine.available:
            raise OSError(f"no sandbox on this machine: {machine.why}")
        level = containment.level
        network = level == "workspace-write" and self.network_on
        args = ["-m", "dsh.sandbox", "--level", level, "--tmp", self.temporary_directory(containment.session)]
        args += ["--abi", str(machine.abi), "--namespaces" if machine.namespaces else "--no-namespaces"]
        args += ["--network" if network else "--no-network"]
        for root in containment.roots:
            args += ["--root", os.path.realpath(root)]
        return sys.executable, [*args, "--", "bash", "-c", containment.command]

    def _ruleset(self, level: Level, roots: tuple[str, ...], tmp: str, *, network: bool, namespaces: bool) -> int:
        from dsh.sandbox._landlock import Rule, build_ruleset, read_rights, write_rights
        from dsh.sandbox._paths import DEVICES, PROC_FILES, SYSTEM_READ, etc_entries, git_dirs, home_toolchains

        version = self.support.abi
        read, write = read_rights(), write_rights(version)
        rules = [Rule(path, read) for path in (*SYSTEM_READ, *etc_entries(), *PROC_FILES, *home_toolchains())]
        rules += [Rule(path, write) for path in DEVICES]
        rules.append(Rule(tmp, write))
        for root in roots:
            rules += [Rule(path, read) for path in git_dirs(root)]
            if level == "workspace-write" and namespaces:
                rules.append(Rule(root, write))
            elif level == "workspace-write":  # no mount namespace: .git and .dsh stay read-only by leaving them out
                rules.append(Rule(root, read))
                try:
                    names = os.listdir(root)
                except OSError:
                    names = []
                rules += [Rule(os.path.join(root, name), write) for name in names if name not in (".git", ".dsh")]
            else:
                rules.append(Rule(root, read))
        return build_ruleset(version, rules, cut_tcp=not network)
