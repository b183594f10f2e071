"""Language servers per root and language, started lazily, shared by the sessions on a root.

Guarantees:

* No server is started unless a file of a language with a found server (configured, else the first built-in
  candidate on ``PATH`` or beside the running Python) is changed by a tool.
* :meth:`LspManager.after_edit` never takes longer than its *timeout* (server start-up included) and never
  raises: a server that fails to start, hangs, crashes or floods yields a one-line note instead of diagnostics.
* A server that failed once is not started again for that root and language (one line per failure, not per
  edit).
* :meth:`LspManager.release` stops the servers no session uses any more; :meth:`LspManager.close` kills all.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsh.lsp._client import Diagnostic, LspServer
from dsh.lsp._config import LspConfig

__all__ = ["LANGUAGES", "EditReport", "LspManager", "render_list"]

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
        ("basedpyright", ["basedpyright-langserver", "--stdio"]),
        ("pyright", ["pyright-langserver", "--stdio"]),
        ("pylsp", ["pylsp"]),
    ],
    "typescript": [("typescript-language-server", ["typescript-language-server", "--stdio"])],
    "go": [("gopls", ["gopls"])],
    "rust": [("rust-analyzer", ["rust-analyzer"])],
    "c": [("clangd", ["clangd"])],
}
_FAMILY = {"typescriptreact": "typescript", "javascript": "typescript", "javascriptreact": "typescript", "cpp": "c"}
_SEVERITY = {"error": 1, "warning": 2, "information": 3, "hint": 4}
_LABEL = {1: "error", 2: "warning", 3: "info", 4: "hint"}
_INITIALIZE = 60.0
"""Seconds a server gets to answer ``initialize`` before it counts as failed (each edit waits its own bound)."""
MAX_OTHERS = 5
"""Lines listing other files' new diagnostics in one edit's result."""
MAX_LISTED = 20
"""Diagnostics listed per file in one edit's result; the rest are counted."""


def _which(program: str) -> str | None:
    found = shutil.which(program)
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

    def __init__(self, config: LspConfig) -> None:
        self.config = config
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

    def wants(self, path: str) -> bool:
        """Whether an edit of *path* would be diagnosed (its language has a server that has not failed)."""
        language = LANGUAGES.get(Path(path).suffix.lower())
        return language is not None and self.command_for(language) is not None

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
            old: list[Diagnostic] = []
            if server.versions.get(Path(path).as_uri()) is None and before is not None:
                server.forget(path)
                version = await server.open_or_change(path, before, language)
                old = await server.wait_diagnostics(path, version, deadline) or []
            else:
                old = (
                    list(server.published[Path(path).as_uri()].items) if Path(path).as_uri() in server.published else []
                )
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
        family = _FAMILY.get(language, language)
        key = (root, family)
        self._users.setdefault(key, set()).add(session)
        server = self.servers.get(key)
        if server is not None and not server.dead:
            server.last_used = asyncio.get_running_loop().time()
            return server
        if key in self._failed:
            return None
        found = self.command_for(language)
        if found is None:
            return None
        name, argv, options = found
        task = self._starting.get(key)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._start(key, name, argv, options))
            self._starting[key] = task
            task.add_done_callback(lambda done: self._started(key, done))
        try:
            return await asyncio.shield(task)
        except Exception as exc:
            self._failed.add(key)
            report.notes.append(f"(language server {name} failed to start: {exc})")
            return None

    def _started(self, key: tuple[str, str], task: asyncio.Task[LspServer]) -> None:
        if self._starting.get(key) is task:
            del self._starting[key]
        if not task.cancelled() and task.exception() is not None:  # retrieved: a failure is the edit's note
            self._failed.add(key)

    async def _start(self, key: tuple[str, str], name: str, argv: list[str], options: dict[str, Any]) -> LspServer:
        server = await LspServer.start(name, argv, key[0], options)
        server.last_used = asyncio.get_running_loop().time()
        self._spawned.append(server)
        self.servers[key] = server
        try:
            await asyncio.wait_for(server.initialize(), _INITIALIZE)
        except BaseException:
            server.kill()
            self.servers.pop(key, None)
            raise
        return server

    def release(self, session: str) -> list[int]:
        """*session* ended: stop every server no other session uses; returns their pids."""
        stopped = []
        for key, users in list(self._users.items()):
            users.discard(session)
            if not users:
                del self._users[key]
                server = self.servers.pop(key, None)
                if server is not None:
                    stopped.append(server.pid)
                    server.kill()
                    if server in self._spawned:
                        self._spawned.remove(server)
        return stopped

    def sweep(self, now: float) -> list[int]:
        """Stop the servers unused since ``now - idle`` (``now``: ``loop.time()``); returns their pids. A server
        stopped so is started again by the next edit of its language (it did not fail)."""
        stopped = []
        for key, server in list(self.servers.items()):
            if now - server.last_used >= self.config.idle:
                del self.servers[key]
                stopped.append(server.pid)
                server.kill()
                if server in self._spawned:
                    self._spawned.remove(server)
        return stopped

    def close(self) -> None:
        """Kill every server (the daemon ends); never raises."""
        for task in self._starting.values():
            task.cancel()
        for server in self.servers.values():
            with contextlib.suppress(Exception):
                server.kill()
        self.servers.clear()

    async def aclose(self) -> None:
        """:meth:`close`, then wait (bounded) until every server ever started is reaped."""
        self.close()
        for server in self._spawned:
            await server.stop()
        self._spawned.clear()
