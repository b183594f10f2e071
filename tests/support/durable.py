"""The real ``dsh acp`` daemon driven by the official ACP Python SDK client, for the durable-session tests.

What this module guarantees to the tests that use it:

* Every daemon gets an explicit environment: ``DSH_DATA_DIR`` is the data directory the test chose (always under
  the test's temporary directory), ``HOME`` and the XDG directories point into that temporary directory too, and
  nothing of the runner's ``DSH_*`` settings leaks in.
* Every message the daemon wrote is recorded in wire order (:attr:`RecordingClient.wire`, from the SDK
  connection's stream observer, which runs synchronously in the receive loop, before any handler task), and every
  update is also collected through the client's ``session_update`` callback (:attr:`RecordingClient.updates`).
* Every spawned daemon is reaped: :func:`run_daemon` ends a live daemon by closing its stdin (and, when the block
  succeeded, asserts that it exits 0 within :data:`EXIT_DEADLINE`); the SDK's transport escalates to SIGTERM and
  SIGKILL when a daemon does not go.
* Every wait is bounded (:data:`WAIT`) with ``anyio.fail_after``; synchronisation is on received messages only.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import anyio
from acp import Client, RequestError, spawn_agent_process, text_block
from acp.client.connection import ClientSideConnection
from acp.connection import StreamDirection, StreamEvent
from acp.schema import (
    ClientCapabilities,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    PromptResponse,
)

from tests.support.env import ROOT, sandbox_env, write_script
from tests.support.timing import EXIT_DEADLINE as _EXIT_HANG

__all__ = [
    "EXIT_DEADLINE",
    "ROOT",
    "WAIT",
    "Daemon",
    "RecordingClient",
    "assert_contiguous",
    "read_session",
    "request_error",
    "run_daemon",
    "session_path",
    "turn_starts",
    "write_script",
]

"""The repository root (on the daemon's ``PYTHONPATH`` so test plugins under ``tests/`` import)."""
WAIT = 30.0
"""Upper bound for any single wait on a daemon: hang detection (see ``raw.WAIT``)."""
EXIT_DEADLINE = _EXIT_HANG
"""How long a daemon may take to exit after stdin EOF (hang detection, :mod:`tests.support.timing`)."""
ANNOUNCEMENTS = frozenset({"available_commands_update"})
"""Updates that describe the session (sent after each new/load/resume response) rather than replay its log: the
durable-session tests compare logs and replays, so these are left out of :attr:`RecordingClient.updates` and
:meth:`Daemon.updates_in` (``tests/commands`` checks them on their own)."""


# -- the client -------------------------------------------------------------------------------------------------


class RecordingClient:
    """The editor side: records the wire and the ``session_update`` callbacks; lets tests wait on either."""

    def __init__(self) -> None:
        self.wire: list[tuple[str, dict[str, Any]]] = []
        """``("in" | "out", message)`` for every JSON-RPC message, in the order it crossed the pipe."""
        self.updates: list[tuple[str, dict[str, Any]]] = []
        """``(sessionId, update)`` from ``session_update``, dumped exactly as the SDK parsed them."""
        self.on_incoming: Callable[[dict[str, Any]], None] | None = None
        """Called synchronously for each incoming message, before the SDK dispatches it (e.g. to SIGKILL)."""
        self._changed = anyio.Event()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        dumped = update.model_dump(mode="json", by_alias=True, exclude_unset=True)
        if dumped.get("sessionUpdate") not in ANNOUNCEMENTS:
            self.updates.append((session_id, dumped))
        self._poke()

    def observe(self, event: StreamEvent) -> None:
        direction = "in" if event.direction == StreamDirection.INCOMING else "out"
        self.wire.append((direction, event.message))
        if direction == "in" and self.on_incoming is not None:
            self.on_incoming(event.message)
        self._poke()

    def _poke(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_until(self, predicate: Callable[[], bool], what: str) -> None:
        """Return once *predicate* holds; it is re-checked on every received message or update."""
        try:
            with anyio.fail_after(WAIT):
                while not predicate():
                    await self._changed.wait()
        except TimeoutError:
            raise AssertionError(f"timed out after {WAIT} s waiting for {what}") from None

    def update_frames(self) -> int:
        return sum(
            1
            for d, m in self.wire
            if d == "in"
            and m.get("method") == "session/update"
            and m["params"]["update"].get("sessionUpdate") not in ANNOUNCEMENTS
        )

    async def settled(self) -> None:
        """Every ``session/update`` received so far has reached ``session_update`` (the SDK runs handlers as tasks)."""
        await self.wait_until(lambda: len(self.updates) >= self.update_frames(), "session_update handlers")
        assert len(self.updates) == self.update_frames(), "the SDK dropped or duplicated an update"


def request_error(exc_info: Any) -> RequestError:
    error = exc_info.value
    assert isinstance(error, RequestError), error
    return error


@dataclass
class Daemon:
    """One running daemon with its SDK connection."""

    conn: ClientSideConnection
    process: asyncio.subprocess.Process
    client: RecordingClient
    data_dir: Path
    stderr_path: Path
    cwd: Path
    killed: bool = False
    exit_code: int | None = field(default=None)

    # -- the wire ---------------------------------------------------------------------------------------

    def mark(self) -> int:
        """A position in :attr:`RecordingClient.wire` (the messages after it are the ones still to come)."""
        return len(self.client.wire)

    def request_index(self, method: str, since: int) -> int:
        found = [
            i for i, (d, m) in enumerate(self.client.wire) if i >= since and d == "out" and m.get("method") == method
        ]
        assert len(found) == 1, f"expected one {method} request after {since}, found {len(found)}"
        return found[0]

    def response_index(self, method: str, since: int) -> int:
        """Where the answer to the one *method* request sent after *since* sits in the wire record."""
        request = self.client.wire[self.request_index(method, since)][1]
        found = [
            i
            for i, (d, m) in enumerate(self.client.wire)
            if d == "in" and "method" not in m and m.get("id") == request["id"]
        ]
        assert len(found) == 1, f"{method} {request['id']} was answered {len(found)} times"
        return found[0]

    def updates_in(self, start: int, end: int | None = None, session_id: str | None = None) -> list[dict[str, Any]]:
        """The ``update`` objects of the ``session/update`` frames in ``wire[start:end]`` (for *session_id*)."""
        return [
            m["params"]["update"]
            for d, m in self.client.wire[start:end]
            if d == "in"
            and m.get("method") == "session/update"
            and m["params"]["update"].get("sessionUpdate") not in ANNOUNCEMENTS
            and (session_id is None or m["params"]["sessionId"] == session_id)
        ]

    # -- requests ---------------------------------------------------------------------------------------

    async def initialize(self) -> InitializeResponse:
        with anyio.fail_after(WAIT):
            return await self.conn.initialize(
                protocol_version=1,
                client_capabilities=ClientCapabilities(),
                client_info=Implementation(name="dsh-durable-tests", version="0"),
            )

    async def new_session(self, cwd: Path | str | None = None) -> str:
        with anyio.fail_after(WAIT):
            response = await self.conn.new_session(cwd=str(cwd or self.cwd), mcp_servers=[])
        return response.session_id

    async def start(self, cwd: Path | str | None = None) -> str:
        await self.initialize()
        return await self.new_session(cwd)

    async def prompt(self, session_id: str, text: str) -> PromptResponse:
        with anyio.fail_after(WAIT):
            return await self.conn.prompt(session_id=session_id, prompt=[text_block(text)])

    async def load(self, session_id: str, cwd: Path | str | None = None) -> Any:
        with anyio.fail_after(WAIT):
            return await self.conn.load_session(cwd=str(cwd or self.cwd), session_id=session_id, mcp_servers=[])

    async def resume(self, session_id: str, cwd: Path | str | None = None) -> Any:
        with anyio.fail_after(WAIT):
            return await self.conn.resume_session(cwd=str(cwd or self.cwd), session_id=session_id, mcp_servers=[])

    async def list(self, cwd: Path | str | None = None, cursor: str | None = None) -> ListSessionsResponse:
        with anyio.fail_after(WAIT):
            return await self.conn.list_sessions(cwd=None if cwd is None else str(cwd), cursor=cursor)

    async def close_session(self, session_id: str) -> Any:
        with anyio.fail_after(WAIT):
            return await self.conn.close_session(session_id=session_id)

    async def delete(self, session_id: str) -> Any:
        """``session/delete`` (the Python SDK has no client method for it: sent as a plain request)."""
        return await self.request("session/delete", {"sessionId": session_id})

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        """Any request, params as given; returns the raw result (raises ``RequestError`` on an error)."""
        with anyio.fail_after(WAIT):
            return await self.conn._conn.send_request(method, params)

    # -- lifetime ---------------------------------------------------------------------------------------

    def kill(self) -> None:
        """SIGKILL, synchronously (safe to call from :attr:`RecordingClient.on_incoming`)."""
        if not self.killed and self.process.returncode is None:
            self.killed = True
            self.process.send_signal(signal.SIGKILL)

    async def wait_killed(self) -> None:
        with anyio.fail_after(WAIT):
            code = await self.process.wait()
        self.killed = True
        assert code == -signal.SIGKILL, f"the daemon exited {code}, not by SIGKILL"

    async def close_stdin(self) -> int:
        """Stdin EOF, the way an editor says goodbye; returns the exit code (asserted to come within the deadline)."""
        assert self.process.stdin is not None
        if not self.process.stdin.is_closing():
            try:
                self.process.stdin.write_eof()
            except (OSError, RuntimeError):
                self.process.stdin.close()
        with anyio.fail_after(EXIT_DEADLINE):
            self.exit_code = await self.process.wait()
        return self.exit_code

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")


@asynccontextmanager
async def run_daemon(
    workdir: Path,
    data_dir: Path,
    *,
    model: str = "echo",
    plugins: Iterable[str] = (),
    name: str = "dsh",
    allow_errors: bool = False,
    env: Mapping[str, str] | None = None,
) -> AsyncIterator[Daemon]:
    """Spawn ``python -m dsh acp`` (cwd *workdir*) and connect the SDK client to it.

    On leaving a block that succeeded with the daemon still alive: stdin EOF, and the daemon must exit 0 within
    :data:`EXIT_DEADLINE`, having logged no error and no traceback (unless *allow_errors*). Whatever happened, the
    process is reaped. *env*: extra variables (a provider's base URL and key).
    """
    client = RecordingClient()
    stderr_path = workdir / f"{name}.stderr.log"
    with stderr_path.open("ab") as stderr:
        async with spawn_agent_process(
            cast(Client, client),
            sys.executable,
            "-m",
            "dsh",
            "acp",
            env=sandbox_env(workdir, model, data_dir=data_dir, plugins=plugins, extra=env),
            cwd=workdir,
            transport_kwargs={"stderr": stderr},
            observers=[client.observe],
        ) as (conn, process):
            daemon = Daemon(conn, process, client, data_dir, stderr_path, workdir)
            body_ok = False
            try:
                yield daemon
                body_ok = True
            finally:
                with anyio.CancelScope(shield=True):
                    if process.returncode is None and not daemon.killed:
                        try:
                            await daemon.close_stdin()
                        except (TimeoutError, OSError):
                            pass  # the SDK's transport terminates and kills it on the way out
                    if body_ok and not daemon.killed:
                        assert daemon.exit_code == 0, (
                            f"{name} exited {daemon.exit_code} after stdin EOF; stderr:\n{daemon.stderr()[-3000:]}"
                        )
                        if not allow_errors:
                            errors = [
                                line
                                for line in daemon.stderr().splitlines()
                                if "Traceback" in line or '"level": "error"' in line or '"level": "critical"' in line
                            ]
                            assert not errors, f"{name} logged errors:\n" + "\n".join(e[:2000] for e in errors)


# -- session files --------------------------------------------------------------------------------------------


def session_path(data_dir: Path, session_id: str) -> Path:
    return data_dir / f"{session_id}.jsonl"


def read_session(data_dir: Path, session_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header and the events of a session file (every line must be complete JSON)."""
    raw = session_path(data_dir, session_id).read_bytes()
    assert raw.endswith(b"\n"), f"{session_id}: the file does not end with a complete line"
    lines = [json.loads(line) for line in raw.split(b"\n")[:-1]]
    assert lines and lines[0].get("type") == "session", "the first line is not a session header"
    return lines[0], lines[1:]


def assert_contiguous(events: list[dict[str, Any]]) -> None:
    seqs = [event["seq"] for event in events]
    assert seqs == list(range(len(events))), f"seqs are not contiguous from 0: {seqs}"


def turn_starts(events: list[dict[str, Any]]) -> list[int]:
    return [event["data"]["turn"] for event in events if event["type"] == "turn/start"]


def write_long_session(data_dir: Path, session_id: str, cwd: Path, words: int, *, reasoning: int = 0) -> list[str]:
    """Write a closed one-turn session whose answer streamed *words* text chunks (after *reasoning* reasoning
    chunks), in dsh's own file format (its encoders), without running a model: a big session in a fraction of the
    time the loop takes. Returns the chunks' texts in order (reasoning first)."""
    from dsh.plugins.persistence._format import encode_event, encode_header
    from dsh.services.sessions import SessionEvent, SessionHeader

    thoughts = [f"t{i} " for i in range(reasoning)]
    texts = [f"w{i} " for i in range(words)]
    specs: list[tuple[str, dict[str, Any]]] = [
        ("turn/start", {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}}),
        ("user/message", {"content": [{"type": "text", "text": "go"}], "source": {"kind": "user"}}),
        ("step/start", {"turn": 1, "step": 1}),
    ]
    specs += [
        ("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "reasoning-delta", "text": t}}) for t in thoughts
    ]
    specs += [("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "text": t}}) for t in texts]
    specs += [
        ("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "finish", "reason": "stop"}}),
        ("assistant/message", {"turn": 1, "step": 1, "content": [{"type": "text", "text": "".join(texts)}]}),
        ("step/end", {"turn": 1, "step": 1}),
        ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
    ]
    head = SessionHeader(id=session_id, created_at=1.0, cwd=str(cwd))
    data_dir.mkdir(parents=True, exist_ok=True)
    with session_path(data_dir, session_id).open("wb") as file:
        file.write(encode_header(head))
        file.writelines(encode_event(SessionEvent(kind, seq, 2.5, data)) for seq, (kind, data) in enumerate(specs))
    return thoughts + texts
