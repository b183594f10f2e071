"""Language servers per root and language, started lazily, shared by the sessions on a root.

Guarantees:

* No server is started unless a tool reads (:meth:`LspManager.warm`) or changes (:meth:`LspManager.after_edit`) a
  file of a language with a found server (configured, else the first built-in candidate on an absolute ``PATH``
  entry or beside the running Python) under a root that, with ``enabled: auto``, looks like a project of that
  language (:data:`MARKERS` in the root or a parent).
* :meth:`LspManager.after_edit` never takes longer than its *bound* and never raises; of it, a server that is
  still starting is waited for at most ``start_wait`` (then one short note, and the start goes on in the
  background): a server that fails to start, hangs, crashes or floods yields a one-line note instead.
* A server that failed once is not started again for that root and language; its failure is said once, in the
  next edit's result (one line per failure, not per edit), also when the start was a warm-up.
* A server is spawned with the spawn plan *confine* gives (the sandbox of approved commands, RFC 0028); a plan
  that cannot be had is a failed start, never an unconfined one.
* :meth:`LspManager.release` stops the servers no session uses any more; :meth:`LspManager.close` kills all.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsh._log import get_logger
from dsh.lsp._client import Diagnostic, LspServer
from dsh.lsp._config import LspConfig

if TYPE_CHECKING:
    from dsh.sandbox import SpawnPlan

__all__ = ["LANGUAGES", "MARKERS", "Confine", "EditReport", "LspManager", "render_list"]

Confine = Callable[[str, str], Awaitable["SpawnPlan | None"]]
"""``confine(root, family)``: the spawn plan of a server for *root* (None: unconfined); raises OSError when the
confinement asked for cannot be had."""

LANGUAGES: dict[str, str] = {
    ".py": "python",
    ".pyi": "python",
    ".ts": "typescript",
    ".tsx": "typescriptreact",
    ".js": "javascript",
    ".jsx": "javascriptreact",
    ".go": "go",
    ".rs": "rust",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".hpp": "cpp",
}
"""File suffix → LSP language id."""

_CANDIDATES: dict[str, list[tuple[str, list[str]]]] = {
    "python": [
        ("ruff", ["ruff", "server"]),
        ("basedpyright", ["basedpyright-langserver", "--stdio"]),
        ("pyright", ["pyright-langserver", "--stdio"]),
        ("pylsp", ["pylsp"]),
    ],
    "typescript": [("typescript-language-server", ["typescript-language-server", "--stdio"])],
    "go": [("gopls", ["gopls"])],
    "rust": [("rust-analyzer", ["rust-analyzer"])],
    "c": [("clangd", ["clangd"])],
}
MARKERS: dict[str, tuple[str, ...]] = {
    "python": (".git", "pyproject.toml", "setup.py", "setup.cfg", "requirements.txt", "Pipfile", "tox.ini"),
    "typescript": ("package.json", "tsconfig.json", "jsconfig.json"),
    "go": ("go.mod", "go.work"),
    "rust": ("Cargo.toml",),
    "c": ("compile_commands.json", "compile_flags.txt", ".clangd", "CMakeLists.txt", "meson.build"),
}
"""With ``enabled: auto``, a language family's servers start only for a root where one of these exists (in the
root or one of its parents): no rust-analyzer for a stray ``.rs`` file, no type checker scanning a home directory."""
_FAMILY = {"typescriptreact": "typescript", "javascript": "typescript", "javascriptreact": "typescript", "cpp": "c"}
_SEVERITY = {"error": 1, "warning": 2, "information": 3, "hint": 4}
log = get_logger("dsh.lsp")
_LABEL = {1: "error", 2: "warning", 3: "info", 4: "hint"}
_INITIALIZE = 60.0
"""Seconds a server gets to answer ``initialize`` before it counts as failed (each edit waits its own bound)."""
MAX_OTHERS = 5
"""Lines listing other files' new diagnostics in one edit's result."""
MAX_LISTED = 20
"""Diagnostics listed per file in one edit's result; the rest are counted."""


def _which(program: str) -> str | None:
    """*program* on an absolute ``PATH`` entry (a relative one would resolve against the daemon's directory, which
    may be the workspace the model writes), else beside the running Python (dsh's own virtualenv)."""
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if os.path.isabs(p))
    found = shutil.which(program, path=path)
    if found is not None:
        return found
    beside = Path(sys.executable).parent / program  # a server installed in dsh's own environment
    return str(beside) if beside.is_file() and os.access(beside, os.X_OK) else None


@dataclass
class EditReport:
    """What one edit's diagnostics came to: new diagnostics per file, and notes (a server that failed,
    diagnostics that did not arrive in time)."""

    new: list[Diagnostic] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    others: list[Diagnostic] = field(default_factory=list)
    """New diagnostics the server published for *other* files while the edit was diagnosed (listed briefly)."""
    others_more: int = 0
    """How many more there were than ``others`` lists (a flooding server costs no memory here)."""
    checked: list[tuple[str, str]] = field(default_factory=list)
    """``(path, server)`` of every file whose diagnostics arrived."""

    def render(self, cwd: str | None) -> str:
        """The text appended to the tool's result ("" when there is nothing to say)."""
        lines: list[str] = []
        by_file: dict[str, list[Diagnostic]] = {}
        for item in self.new:
            by_file.setdefault(item.path, []).append(item)
        for path, items in by_file.items():
            shown = os.path.relpath(path, cwd) if cwd else path
            lines.append(f"New diagnostics in {shown} ({items[0].server}):")
            for item in sorted(items, key=lambda d: d.line)[:MAX_LISTED]:
                source = f" [{item.source}]" if item.source else ""
                lines.append(f"  line {item.line}: {_LABEL.get(item.severity, 'error')}: {item.message}{source}")
            if len(items) > MAX_LISTED:
                lines.append(f"  … and {len(items) - MAX_LISTED} more")
        if self.others:
            lines.append("New diagnostics in other files:")
            for item in sorted(self.others, key=lambda d: (d.path, d.line)):
                shown = os.path.relpath(item.path, cwd) if cwd else item.path
                lines.append(f"  {shown}:{item.line}: {item.message} ({item.server})")
            if self.others_more:
                lines.append(f"  … and {self.others_more} more")
        lines.extend(self.notes)
        return "\n".join(lines)

    def as_json(self) -> dict[str, Any]:
        return {
            "new": [d.as_json() for d in self.new],
            "others": [d.as_json() for d in self.others],
            "notes": list(self.notes),
        }


def render_list(items: list[Diagnostic], cwd: str, limit: int = 100) -> str:
    """*items* one per line (``mod.py:3: error: message [source] (server)``), at most *limit*, the rest counted."""
    lines = []
    for item in sorted(items, key=lambda d: (d.path, d.line))[:limit]:
        source = f" [{item.source}]" if item.source else ""
        where = os.path.relpath(item.path, cwd)
        lines.append(
            f"{where}:{item.line}: {_LABEL.get(item.severity, 'error')}: {item.message}{source} ({item.server})"
        )
    if len(items) > limit:
        lines.append(f"… and {len(items) - limit} more")
    return "\n".join(lines)


class LspManager:
    """The servers of one daemon (see the module docstring)."""

    def __init__(
        self, config: LspConfig, confine: Confine | None = None, unconfine: Callable[[str, str], None] | None = None
    ) -> None:
        self.config = config
        self._confine = confine
        self._unconfine = unconfine
        self._failures: dict[tuple[str, str], str] = {}
        """Why a server failed to start, until an edit's result said it."""
        self._projects: dict[tuple[str, str], bool] = {}
        self.servers: dict[tuple[str, str], LspServer] = {}
        self._starting: dict[tuple[str, str], asyncio.Task[LspServer]] = {}
        self._failed: set[tuple[str, str]] = set()
        self._users: dict[tuple[str, str], set[str]] = {}
        self._threshold = _SEVERITY[config.severity]
        self._spawned: list[LspServer] = []
        self._commands: dict[str, tuple[str, list[str], dict[str, Any]] | None] = {}

    def command_for(self, language: str) -> tuple[str, list[str], dict[str, Any]] | None:
        """``(name, argv, init_options)`` of the server for *language*, or None when none is found (looked up once
        per language; blocking: it searches ``PATH``)."""
        if language not in self._commands:
            self._commands[language] = self._lookup(language)
        return self._commands[language]

    def _lookup(self, language: str) -> tuple[str, list[str], dict[str, Any]] | None:
        family = _FAMILY.get(language, language)
        for name, server in self.config.servers.items():
            if language in server.languages or family in server.languages:
                return name, list(server.command), dict(server.init_options)
        for name, argv in _CANDIDATES.get(family, ()):
            found = _which(argv[0])
            if found is not None:
                return name, [found, *argv[1:]], {}
        return None

    def wants(self, path: str, root: str | None = None) -> bool:
        """Whether an edit of *path* under *root* would be diagnosed: its language has a server and, with
        ``enabled: auto``, *root* looks like a project of that language (blocking: it searches ``PATH`` and
        looks for :data:`MARKERS`, each once per language and root)."""
        language = LANGUAGES.get(Path(path).suffix.lower())
        if language is None or self.command_for(language) is None:
            return False
        return root is None or self.config.enabled != "auto" or self.is_project(root, language)

    def known_wants(self, path: str, root: str) -> bool | None:
        """:meth:`wants` when it needs no I/O (the server and the root's markers were looked up before), else None:
        the event loop asks this first and goes to a worker thread only for the first file of a language and root."""
        language = LANGUAGES.get(Path(path).suffix.lower())
        if language is None:
            return False
        if language not in self._commands:
            return None
        if self._commands[language] is None:
            return False
        if self.config.enabled != "auto":
            return True
        return self._projects.get((root, _FAMILY.get(language, language)))

    def is_project(self, root: str, language: str) -> bool:
        """Whether *root* or one of its parents holds a :data:`MARKERS` file of *language*'s family (cached)."""
        family = _FAMILY.get(language, language)
        key = (root, family)
        if key not in self._projects:
            markers = MARKERS.get(family, ())
            here = Path(root)
            self._projects[key] = any((d / m).exists() for d in (here, *here.parents) for m in markers)
        return self._projects[key]

    def warm(self, path: str, root: str, session: str) -> None:
        """Start (in the background) the server an edit of *path* would use, so that the edit finds it warm: the
        model reads a file before it edits it. *path* must be :meth:`wants` (checked off the event loop)."""
        language = LANGUAGES.get(Path(path).suffix.lower())
        if language is None:
            return
        key = (root, _FAMILY.get(language, language))
        self._users.setdefault(key, set()).add(session)
        server = self.servers.get(key)
        if server is not None and not server.dead:
            server.last_used = asyncio.get_running_loop().time()
            return
        found = self.command_for(language)
        if key not in self._failed and found is not None:
            self._launch(key, found)

    async def after_edit(
        self, changes: list[tuple[str, str | None, str | None]], root: str, session: str, bound: float | None = None
    ) -> EditReport:
        """Diagnose *changes* (``(path, text before or None, text now or None for a deleted file)``) under
        *root*: what is new since before. Bounded by *bound* (default: the configuration's); never raises."""
        report = EditReport()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (bound if bound is not None else self.config.timeout)
        try:
            await asyncio.wait_for(self._diagnose(changes, root, session, deadline, report), deadline - loop.time())
        except TimeoutError:
            if not report.checked:
                report.notes.append(f"(diagnostics: none arrived within {self.config.timeout:g} s)")
        except Exception as exc:  # a server's failure is a note, never the edit's
            report.notes.append(f"(diagnostics unavailable: {exc})")
        return report

    async def check(self, path: str, text: str, root: str, session: str) -> tuple[list[Diagnostic], list[str]]:
        """*path*'s diagnostics now (at or above the configured severity) and notes, *text* being its content;
        bounded by the configuration's timeout; never raises."""
        notes: list[str] = []
        language = LANGUAGES.get(Path(path).suffix.lower())
        if language is None:
            return [], [f"(no language server for {Path(path).suffix or 'this kind of file'})"]

        async def run() -> list[Diagnostic] | None:
            report = EditReport()
            server = await self._server(root, language, session, report)
            notes.extend(report.notes)
            if server is None:
                return None
            server.forget(path)
            version = await server.open_or_change(path, text, language)
            return await server.wait_diagnostics(path, version, deadline)

        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.timeout
        try:
            got = await asyncio.wait_for(run(), self.config.timeout)
        except TimeoutError:
            got = None
        except Exception as exc:
            notes.append(f"(diagnostics unavailable: {exc})")
            got = None
        if got is None:
            if not notes:
                notes.append(f"(diagnostics: none arrived within {self.config.timeout:g} s)")
            return [], notes
        return [d for d in got if d.severity <= self._threshold], notes

    def known(self, root: str) -> list[Diagnostic]:
        """Every diagnostic the servers of *root* last published (for the files opened so far), at or above the
        configured severity."""
        found: list[Diagnostic] = []
        for (server_root, _), server in self.servers.items():
            if server_root == root:
                for published in server.published.values():
                    found.extend(d for d in published.items if d.severity <= self._threshold)
        return found

    async def _diagnose(
        self,
        changes: list[tuple[str, str | None, str | None]],
        root: str,
        session: str,
        deadline: float,
        report: EditReport,
    ) -> None:
        for path, before, now in changes:
            language = LANGUAGES.get(Path(path).suffix.lower())
            if language is None:
                continue
            server = await self._server(root, language, session, report)
            if server is None:
                continue
            if now is None:
                await server.close(path)
                continue
            uri = Path(path).as_uri()
            held = server.texts.get(uri)
            old: list[Diagnostic] = []
            if before is not None and held != before:  # not open (or changed behind our back): baseline first
                server.forget(path)
                version = await server.open_or_change(path, before, language)
                old = await server.wait_diagnostics(path, version, deadline) or []
            elif held is not None:  # open at the old text (a read warmed it): what it published for that version
                old = await server.wait_diagnostics(path, server.versions[uri], deadline) or []
            server.forget(path)
            elsewhere = {uri: published for uri, published in server.published.items()}
            version = await server.open_or_change(path, now, language)
            got = await server.wait_diagnostics(path, version, deadline)
            if got is None:
                report.notes.append(f"(diagnostics: {server.name} did not answer in time for {Path(path).name})")
                continue
            report.checked.append((path, server.name))
            self._others(server, path, elsewhere, report)
            report.new.extend(self._new_since(old, got))

    def _others(self, server: LspServer, path: str, before: dict[str, Any], report: EditReport) -> None:
        """What *server* published for files other than *path* since *before* (a snapshot of its publications)
        that is new, at or above the threshold, into ``report.others``."""
        edited = Path(path).as_uri()
        for uri, published in list(server.published.items()):
            if uri == edited or before.get(uri) is published:
                continue
            old = before.get(uri)
            for item in self._new_since(old.items if old is not None else [], published.items):
                if len(report.others) < MAX_OTHERS:
                    report.others.append(item)
                else:
                    report.others_more += 1

    def _new_since(self, old: list[Diagnostic], now: list[Diagnostic]) -> list[Diagnostic]:
        """The diagnostics of *now* at or above the threshold that *old* has fewer of (same severity, message
        and source; lines are not compared: an edit above an old error moves it)."""
        seen: dict[tuple[int, str, str], int] = {}
        for item in old:
            seen[item.key()] = seen.get(item.key(), 0) + 1
        new = []
        for item in now:
            if item.severity > self._threshold:
                continue
            if seen.get(item.key(), 0) > 0:
                seen[item.key()] -= 1
                continue
            new.append(item)
        return new

    async def _server(self, root: str, language: str, session: str, report: EditReport) -> LspServer | None:
        """The running server of *root* and *language*'s family, started if need be; a server still starting is
        waited for at most ``start_wait`` (then a note, and None). None, with a note once, when it failed."""
        family = _FAMILY.get(language, language)
        key = (root, family)
        self._users.setdefault(key, set()).add(session)
        loop = asyncio.get_running_loop()
        server = self.servers.get(key)
        starting = self._starting.get(key)
        if server is not None and not server.dead and (starting is None or starting.done()):
            server.last_used = loop.time()
            return server
        if key in self._failed:
            self._tell_failure(key, report)
            return None
        found = self.command_for(language)
        if found is None:
            return None
        task = self._launch(key, found)
        try:
            return await asyncio.wait_for(asyncio.shield(task), self.config.start_wait)
        except TimeoutError:
            report.notes.append(f"(diagnostics: {found[0]} is still starting)")
            return None
        except Exception as exc:
            self._failed.add(key)
            self._failures.setdefault(key, f"(language server {found[0]} failed to start: {exc})")
            self._tell_failure(key, report)
            return None

    def _tell_failure(self, key: tuple[str, str], report: EditReport) -> None:
        why = self._failures.pop(key, None)
        if why is not None:
            report.notes.append(why)

    def _launch(self, key: tuple[str, str], found: tuple[str, list[str], dict[str, Any]]) -> asyncio.Task[LspServer]:
        """The start of *key*'s server (one task however many edits and reads ask for it)."""
        task = self._starting.get(key)
        if task is None:
            name, argv, options = found
            task = asyncio.get_running_loop().create_task(self._start(key, name, argv, options), name=f"lsp:{name}")
            self._starting[key] = task
            task.add_done_callback(lambda done: self._started(key, name, done))
        return task

    def _started(self, key: tuple[str, str], name: str, task: asyncio.Task[LspServer]) -> None:
        if self._starting.get(key) is task:
            del self._starting[key]
        if task.cancelled():
            return
        exc = task.exception()  # retrieved: a failure is the next edit's note
        if exc is not None:
            self._failed.add(key)
            self._failures.setdefault(key, f"(language server {name} failed to start: {exc})")
            log.warning("language server failed to start", server=name, root=key[0], error=str(exc))

    async def _start(self, key: tuple[str, str], name: str, argv: list[str], options: dict[str, Any]) -> LspServer:
        plan = await self._confine(*key) if self._confine is not None else None
        server = await LspServer.start(name, argv, key[0], options, plan)
        server.last_used = asyncio.get_running_loop().time()
        self._spawned.append(server)
        self.servers[key] = server
        try:
            await asyncio.wait_for(server.initialize(), _INITIALIZE)
        except BaseException:
            server.kill()
            self.servers.pop(key, None)
            self._unconfined(key)
            raise
        return server

    def _unconfined(self, key: tuple[str, str]) -> None:
        if self._unconfine is not None:
            with contextlib.suppress(Exception):
                self._unconfine(*key)

    def _stop(self, key: tuple[str, str]) -> int | None:
        """Kill *key*'s server (if any) and forget it; its pid."""
        server = self.servers.pop(key, None)
        if server is None:
            return None
        server.kill()
        if server in self._spawned:
            self._spawned.remove(server)
        self._unconfined(key)
        return server.pid

    def release(self, session: str) -> list[int]:
        """*session* ended: stop every server no other session uses; returns their pids."""
        stopped = []
        for key, users in list(self._users.items()):
            users.discard(session)
            if not users:
                del self._users[key]
                task = self._starting.pop(key, None)
                if task is not None:
                    task.cancel()
                pid = self._stop(key)
                if pid is not None:
                    stopped.append(pid)
        return stopped

    def sweep(self, now: float) -> list[int]:
        """Stop the servers unused since ``now - idle`` (``now``: ``loop.time()``); returns their pids. A server
        stopped so is started again by the next edit of its language (it did not fail)."""
        stopped = []
        for key, server in list(self.servers.items()):
            if now - server.last_used >= self.config.idle and key not in self._starting:
                pid = self._stop(key)
                if pid is not None:
                    stopped.append(pid)
        return stopped

    def close(self) -> None:
        """Kill every server (the daemon ends); never raises."""
        for task in self._starting.values():
            task.cancel()
        for key, server in list(self.servers.items()):
            with contextlib.suppress(Exception):
                server.kill()
            self._unconfined(key)
        self.servers.clear()

    async def aclose(self) -> None:
        """:meth:`close`, then wait (bounded) until every server ever started is reaped."""
        self.close()
        for server in self._spawned:
            await server.stop()
        self._spawned.clear()
