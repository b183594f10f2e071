"""The official ACP Python SDK client playing the editor against a real ``dsh acp`` subprocess.

What :func:`run_dsh` gives a test, and what it guarantees:

* The daemon runs as ``python -m dsh acp`` with an explicit environment (the model, extra plugins, ``PYTHONPATH``),
  stdin and stdout are real pipes, stderr goes to a file in the test's ``tmp_path`` (it can never fill a pipe).
* The SDK's ``ClientSideConnection`` (built with ``acp.connect_to_agent``) drives it. Every byte the daemon writes
  to stdout is recorded before the SDK parses it (a tee between the process's stdout and the SDK's reader), and
  every request and notification the SDK sends is recorded (a connection observer).
* The client's stdin writer can be *corked*: frames the SDK writes while corked reach the daemon in one ``write``,
  as they do when an editor's frames pile up in the pipe.
* At the end of the ``async with`` block: stdin is closed, the daemon must exit 0 (hang detection: within
  :data:`tests.support.timing.EXIT_DEADLINE`; the exit-time promise has its own dedicated test), and — when the
  block itself succeeded — every captured frame must be one line of compact JSON that validates against the SDK's
  schema models (``session/update`` params as ``SessionNotification``, results by the method of the request they
  answer, errors as ``{code: int, message: str, data?}``), and every request must have been answered exactly once.
"""

from __future__ import annotations

import asyncio
import asyncio.streams
import json
import os
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

import anyio
from acp import Client, RequestError, connect_to_agent, text_block
from acp.client.connection import ClientSideConnection
from acp.connection import StreamEvent
from acp.schema import (
    AgentErrorMessage,
    AgentMessageChunk,
    AuthenticateResponse,
    ClientCapabilities,
    CloseSessionResponse,
    DeleteSessionResponse,
    ForkSessionResponse,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    LogoutResponse,
    NewSessionResponse,
    PromptResponse,
    ResumeSessionResponse,
    SessionNotification,
    SetSessionConfigOptionResponse,
    SetSessionModeResponse,
    TextContentBlock,
)
from pydantic import BaseModel, ValidationError

from tests.support.agent_events import ASK, PREFIX, AgentEvents, check_agent_event
from tests.support.env import sandbox_env, write_script
from tests.support.timing import EXIT_DEADLINE

__all__ = [
    "RESULT_MODELS",
    "DshProcess",
    "RecordingClient",
    "check_frames",
    "run_dsh",
    "write_script",
]


class SteerResponse(BaseModel):
    """The result of ``_dsh/session/steer`` (RFC 0036): exactly these fields, nothing else."""

    model_config = {"extra": "forbid"}
    outcome: Literal["steered", "queued", "cancelled"]
    turn: int | None = None
    prompt: list[dict[str, Any]] | None = None


RESULT_MODELS: dict[str, type[BaseModel]] = {
    "initialize": InitializeResponse,
    "authenticate": AuthenticateResponse,
    "logout": LogoutResponse,
    "session/new": NewSessionResponse,
    "session/prompt": PromptResponse,
    "session/load": LoadSessionResponse,
    "session/resume": ResumeSessionResponse,
    "session/fork": ForkSessionResponse,
    "session/list": ListSessionsResponse,
    "session/close": CloseSessionResponse,
    "session/delete": DeleteSessionResponse,
    "session/set_config_option": SetSessionConfigOptionResponse,
    "session/set_mode": SetSessionModeResponse,
    "_dsh/session/steer": SteerResponse,
}
READER_LIMIT = 64 * 1024 * 1024


# -- the client side -------------------------------------------------------------------------------------------


@dataclass
class _Waiter:
    ready: Callable[[], bool]
    event: anyio.Event = field(default_factory=anyio.Event)


class RecordingClient:
    """An ACP client that records every ``session/update`` in arrival order and lets tests wait on them.

    It advertises no capabilities, so the daemon may send it nothing but ``session/update``: a permission request
    is recorded in ``unexpected`` (checked when the daemon is shut down) and answered ``method not found``, as is
    any other client method, which this class does not define.
    """

    def __init__(self) -> None:
        self.updates: list[tuple[str, Any]] = []
        self.unexpected: list[str] = []
        self._waiters: list[_Waiter] = []
        self.agent_events = AgentEvents()
        """The ``_dsh/agent/*`` stream, when the client asked for it (the SDK's extension-notification hook)."""

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        self._wake()

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        if method.startswith("dsh/agent/"):
            self.agent_events.record(method, params)
        else:
            self.unexpected.append(f"extension notification {method}")
        self._wake()

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        self.unexpected.append("session/request_permission")
        raise RequestError.method_not_found("session/request_permission")

    def _wake(self) -> None:
        for waiter in list(self._waiters):
            if waiter.ready():
                self._waiters.remove(waiter)
                waiter.event.set()

    async def wait_until(self, ready: Callable[[], bool]) -> None:
        """Return once ``ready()`` holds (checked now and after every update)."""
        if ready():
            return
        waiter = _Waiter(ready)
        self._waiters.append(waiter)
        await waiter.event.wait()

    def of(self, session_id: str) -> list[Any]:
        return [update for sid, update in self.updates if sid == session_id]

    def chunk_texts(self, session_id: str) -> list[str]:
        """The texts of the session's ``agent_message_chunk`` updates, in order."""
        texts = []
        for update in self.of(session_id):
            if isinstance(update, AgentMessageChunk):
                assert isinstance(update.content, TextContentBlock), update
                texts.append(update.content.text)
        return texts

    def text(self, session_id: str) -> str:
        return "".join(self.chunk_texts(session_id))

    async def wait_for_chunks(self, session_id: str, count: int = 1) -> None:
        await self.wait_until(lambda: len(self.chunk_texts(session_id)) >= count)


class _StdinProtocol(asyncio.streams.FlowControlMixin):
    """Flow control for the stdin pipe, plus a future that is done once the pipe is closed."""

    def __init__(self) -> None:
        super().__init__()
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if not self.closed.done():
            self.closed.set_result(None)


class CorkableWriter(asyncio.StreamWriter):
    """The daemon's stdin. While corked, writes are held back and then delivered in a single ``write``."""

    _held: bytearray | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._held is not None:
            self._held.extend(data)
        else:
            super().write(data)

    def cork(self) -> None:
        self._held = bytearray()

    def uncork(self) -> None:
        held, self._held = self._held, None
        if held:
            super().write(bytes(held))


@dataclass
class DshProcess:
    """One daemon and the SDK connection to it, plus everything that crossed the pipes."""

    process: asyncio.subprocess.Process
    conn: ClientSideConnection
    client: RecordingClient
    stdin: CorkableWriter
    stderr_path: Path
    cwd: Path
    agent_events: bool = False
    """``initialize`` asks for the ``_dsh/agent/*`` stream."""
    stdout: bytearray = field(default_factory=bytearray)
    exit_code: int | None = None
    """Set once the daemon was closed: its exit code, or None when it did not exit in time and was killed."""
    sent: list[dict[str, Any]] = field(default_factory=list)
    _sent_waiters: list[_Waiter] = field(default_factory=list)

    # -- what was sent --------------------------------------------------------------------------------------

    def _observe(self, event: StreamEvent) -> None:
        if event.direction.value != "outgoing":
            return
        self.sent.append(event.message)
        for waiter in list(self._sent_waiters):
            if waiter.ready():
                self._sent_waiters.remove(waiter)
                waiter.event.set()

    def requests(self) -> dict[Any, str]:
        """Request id → method, for every request the client sent."""
        return {m["id"]: m["method"] for m in self.sent if "method" in m and "id" in m}

    def prompt_request_id(self, text: str) -> Any:
        """The id of the ``session/prompt`` request whose first block is *text*."""
        ids = [
            m["id"]
            for m in self.sent
            if m.get("method") == "session/prompt" and m["params"]["prompt"][0].get("text") == text
        ]
        assert len(ids) == 1, (text, ids)
        return ids[0]

    async def wait_sent_prompt(self, text: str) -> None:
        """Return once the prompt with *text* was fully handed to the stdin pipe (or the cork)."""
        await self.wait_sent(
            lambda m: m.get("method") == "session/prompt" and m["params"]["prompt"][0].get("text") == text
        )

    async def wait_sent(self, matches: Callable[[dict[str, Any]], bool]) -> None:
        """Return once a message the client sent *matches* (checked now and after every message it sends)."""

        def ready() -> bool:
            return any(matches(m) for m in self.sent)

        if ready():
            return
        waiter = _Waiter(ready)
        self._sent_waiters.append(waiter)
        await waiter.event.wait()

    # -- what was received ----------------------------------------------------------------------------------

    def frames(self) -> list[dict[str, Any]]:
        """Every complete frame the daemon wrote so far, parsed, in order."""
        data = bytes(self.stdout)
        complete = data[: data.rfind(b"\n") + 1]
        return [json.loads(line) for line in complete.split(b"\n") if line]

    def response_index(self, request_id: Any) -> int:
        """Position of the (single) response to *request_id* in :meth:`frames`."""
        positions = [
            i
            for i, frame in enumerate(self.frames())
            if "method" not in frame and "id" in frame and frame["id"] == request_id
        ]
        assert len(positions) == 1, (request_id, positions)
        return positions[0]

    def update_frames(self, session_id: str) -> list[tuple[int, dict[str, Any]]]:
        """(position, update) of every ``session/update`` for *session_id*, from the raw frames."""
        return [
            (i, frame["params"]["update"])
            for i, frame in enumerate(self.frames())
            if frame.get("method") == "session/update" and frame["params"]["sessionId"] == session_id
        ]

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    # -- conveniences ---------------------------------------------------------------------------------------

    async def initialize(self) -> InitializeResponse:
        return await self.conn.initialize(
            protocol_version=1,
            client_capabilities=ClientCapabilities(field_meta=dict(ASK)) if self.agent_events else ClientCapabilities(),
            client_info=Implementation(name="dsh-e2e-tests", version="0"),
        )

    async def new_session(self) -> str:
        response = await self.conn.new_session(cwd=str(self.cwd), mcp_servers=[])
        return response.session_id

    async def start(self) -> str:
        """initialize + session/new; the new session's id."""
        await self.initialize()
        return await self.new_session()

    async def prompt(self, session_id: str, text: str) -> PromptResponse:
        return await self.conn.prompt(session_id=session_id, prompt=[text_block(text)])


# -- frame validation ------------------------------------------------------------------------------------------


def _round_trips(model: BaseModel, payload: dict[str, Any]) -> bool:
    """The model kept every field, unchanged: no unknown keys dropped, no value coerced."""
    return model.model_dump(mode="json", by_alias=True, exclude_unset=True) == payload


def _check_payload(model_type: type[BaseModel], payload: Any, where: str, problems: list[str]) -> None:
    try:
        model = model_type.model_validate(payload)
    except ValidationError as exc:
        problems.append(f"{where}: not a valid {model_type.__name__}: {exc}")
        return
    if not _round_trips(model, payload):
        dumped = model.model_dump(mode="json", by_alias=True, exclude_unset=True)
        problems.append(f"{where}: {model_type.__name__} does not round-trip: {payload!r} became {dumped!r}")


LEGACY_MODELS_RESULTS = frozenset({"session/new", "session/load", "session/resume", "session/fork"})
"""Results that also carry the legacy ``models`` state (removed from the SDK's schema, still read by older
clients): it is checked against its old shape here, then the rest must round-trip through the SDK's model."""


def _check_legacy_models(models: Any, where: str, problems: list[str]) -> None:
    ok = (
        isinstance(models, dict)
        and set(models) == {"currentModelId", "availableModels"}
        and isinstance(models["currentModelId"], str)
        and isinstance(models["availableModels"], list)
        and all(
            isinstance(m, dict)
            and {"modelId", "name"} <= set(m) <= {"modelId", "name", "description"}
            and all(isinstance(v, str) for v in m.values())
            for m in models["availableModels"]
        )
        and models["currentModelId"] in [m["modelId"] for m in models["availableModels"]]
    )
    if not ok:
        problems.append(f"{where}: malformed legacy models state: {models!r:.300}")


def check_frames(raw: bytes, requests: Mapping[Any, str]) -> list[str]:
    """Every problem with what the daemon wrote (empty when all is well).

    *requests* maps the id of every request the client sent to its method.
    """
    problems: list[str] = []
    if raw and not raw.endswith(b"\n"):
        problems.append(f"stdout ends with an unterminated frame: {raw[-200:]!r}")
    answers: dict[Any, int] = {}
    stream_on = False  # an initialize answer said the _dsh/agent/* stream is on
    for number, line in enumerate(raw.split(b"\n")[:-1] if raw else []):
        where = f"frame {number}"
        try:
            text = line.decode("utf-8")
            frame = json.loads(text)
        except ValueError as exc:
            problems.append(f"{where}: not a line of JSON ({exc}): {line[:200]!r}")
            continue
        compact = {
            json.dumps(frame, separators=(",", ":")),
            json.dumps(frame, separators=(",", ":"), ensure_ascii=False),
        }
        if text not in compact:
            problems.append(f"{where}: not compact JSON: {text[:200]!r}")
        if not isinstance(frame, dict):
            problems.append(f"{where}: not a JSON object: {text[:200]!r}")
            continue
        if frame.get("jsonrpc") != "2.0":
            problems.append(f"{where}: jsonrpc is not '2.0': {text[:200]!r}")
        if "method" in frame:
            if "id" in frame:
                problems.append(f"{where}: the daemon sent a request this client never enabled: {text[:200]!r}")
            elif set(frame) != {"jsonrpc", "method", "params"}:
                problems.append(f"{where}: unexpected notification keys {sorted(frame)}")
            elif isinstance(frame["method"], str) and frame["method"].startswith(PREFIX) and stream_on:
                check_agent_event(frame, where, problems)
            elif frame["method"] != "session/update":
                problems.append(f"{where}: unexpected notification {frame['method']!r}")
            else:
                _check_payload(SessionNotification, frame["params"], where, problems)
            continue
        if "id" not in frame:
            problems.append(f"{where}: neither a notification nor a response: {text[:200]!r}")
            continue
        request_id = frame["id"]
        if isinstance(request_id, dict | list) or request_id is None or request_id not in requests:
            problems.append(f"{where}: a response to no request of ours: {text[:200]!r}")
            continue
        answers[request_id] = answers.get(request_id, 0) + 1
        method = requests[request_id]
        if set(frame) == {"jsonrpc", "id", "result"}:
            if method in LEGACY_MODELS_RESULTS and isinstance(frame["result"], dict) and "models" in frame["result"]:
                frame["result"] = dict(frame["result"])
                _check_legacy_models(frame["result"].pop("models"), where, problems)
            if method == "initialize" and isinstance(frame["result"], dict):
                meta = (frame["result"].get("agentCapabilities") or {}).get("_meta") or {}
                stream_on = stream_on or meta.get(next(iter(ASK))) is True
            model_type = RESULT_MODELS.get(method)
            if model_type is None:
                problems.append(f"{where}: no schema model known for a {method!r} result")
            else:
                _check_payload(model_type, frame["result"], f"{where} ({method} result)", problems)
        elif set(frame) == {"jsonrpc", "id", "error"}:
            error = frame["error"]
            if not isinstance(error, dict) or not {"code", "message"} <= set(error) <= {"code", "message", "data"}:
                problems.append(f"{where}: malformed error object: {error!r}")
                continue
            if type(error["code"]) is not int:
                problems.append(f"{where}: error code is not an integer: {error['code']!r}")
            if type(error["message"]) is not str:
                problems.append(f"{where}: error message is not a string: {error['message']!r}")
            try:
                AgentErrorMessage.model_validate({"id": request_id, "error": error})
            except ValidationError as exc:
                problems.append(f"{where}: not a valid error response: {exc}")
        else:
            problems.append(f"{where}: a response needs exactly one of result and error: keys {sorted(frame)}")
    for request_id, method in requests.items():
        count = answers.get(request_id, 0)
        if count != 1:
            problems.append(f"request {request_id!r} ({method}) was answered {count} times")
    return problems


# -- the daemon ------------------------------------------------------------------------------------------------


async def _pump(source: asyncio.StreamReader, record: bytearray, sink: asyncio.StreamReader) -> None:
    """Tee: every byte of the daemon's stdout is recorded, then handed to the SDK's reader."""
    try:
        while chunk := await source.read(1 << 16):
            record.extend(chunk)
            sink.feed_data(chunk)
    finally:
        sink.feed_eof()


@asynccontextmanager
async def connected_daemon(
    environment: Mapping[str, str],
    client: Any,
    cwd: Path,
    stderr_path: Path,
    *,
    args: Sequence[str] = (),
    project: Path | None = None,
    agent_events: bool = False,
    unstable_protocol: bool = False,
    before_close: Callable[[], None] = lambda: None,
    command: Sequence[str] | None = None,
) -> AsyncIterator[DshProcess]:
    """Spawn ``python -m dsh acp [ARGS]`` (or *command*, an editor's own argv, e.g. the README's
    ``.venv/bin/dsh acp``) in *cwd* with *environment* (stderr to *stderr_path*), connect the
    SDK with *client* through a tee that records every byte of stdout, and yield the :class:`DshProcess`
    (``cwd`` is *project* when given). The one spawn path of the ACP tests (:func:`run_dsh` and
    ``tests.support.editor.run_editor`` add their own checks).

    On exit, whatever happened in the block: *before_close* runs, stdin is closed (how an editor says goodbye),
    the process is given :data:`EXIT_DEADLINE` to exit and then killed, both pipes are drained, and the exit
    code is left in :attr:`DshProcess.exit_code` (None when it had to be killed)."""
    loop = asyncio.get_running_loop()
    read_fd, write_fd = os.pipe()
    try:
        with stderr_path.open("wb") as stderr:
            argv = list(command) if command is not None else [sys.executable, "-m", "dsh", "acp", *args]
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=read_fd,
                stdout=asyncio.subprocess.PIPE,
                stderr=stderr,
                env=dict(environment),
                cwd=str(cwd),
            )
    except BaseException:
        os.close(write_fd)
        raise
    finally:
        os.close(read_fd)
    transport, protocol = await loop.connect_write_pipe(_StdinProtocol, os.fdopen(write_fd, "wb", buffering=0))
    stdin = CorkableWriter(transport, protocol, None, loop)
    assert process.stdout is not None
    sdk_reader = asyncio.StreamReader(limit=READER_LIMIT)
    # ``conn`` is filled in below: the connection's observer is a method of the DshProcess.
    daemon = DshProcess(process, None, client, stdin, stderr_path, project or cwd, agent_events)  # type: ignore[arg-type]
    pump = asyncio.create_task(_pump(process.stdout, daemon.stdout, sdk_reader), name="dsh-stdout-tee")
    # The SDK routes each client method it finds; the ones the client lacks answer "method not found".
    daemon.conn = connect_to_agent(
        cast("Client", client), stdin, sdk_reader, observers=[daemon._observe], use_unstable_protocol=unstable_protocol
    )
    try:
        yield daemon
    finally:
        with anyio.CancelScope(shield=True):
            try:
                before_close()
                stdin.close()
                await protocol.closed
                with anyio.move_on_after(EXIT_DEADLINE):
                    daemon.exit_code = await process.wait()
            finally:
                if process.returncode is None:
                    process.kill()
                    await process.wait()
                try:
                    await pump
                finally:
                    await daemon.conn.close()


@asynccontextmanager
async def run_dsh(
    tmp_path: Path,
    model: str = "echo",
    *,
    plugins: Sequence[str] = (),
    python_path: Sequence[Path] = (),
    name: str = "dsh",
    env: Mapping[str, str | None] | None = None,
    args: Sequence[str] = (),
    agent_events: bool = False,
) -> AsyncIterator[DshProcess]:
    """Spawn ``python -m dsh acp [ARGS]`` and connect the SDK client to it (see the module docstring). *env*
    changes the sandbox environment: a value replaces a variable, None removes it. *agent_events*:
    :meth:`DshProcess.initialize` asks for the ``_dsh/agent/*`` stream."""
    environment = sandbox_env(tmp_path, model, plugins=plugins, python_path=python_path)
    for key, value in (env or {}).items():
        if value is None:
            environment.pop(key, None)
        else:
            environment[key] = value
    client = RecordingClient()
    body_ok = False
    async with connected_daemon(
        environment, client, tmp_path, tmp_path / f"{name}.stderr.log", args=args, agent_events=agent_events
    ) as daemon:
        yield daemon
        body_ok = True
    exit_code = daemon.exit_code
    if body_ok:
        tail = daemon.stderr()[-3000:]
        assert exit_code is not None, f"the daemon did not exit within {EXIT_DEADLINE} s of stdin EOF; stderr:\n{tail}"
        assert exit_code == 0, f"the daemon exited {exit_code}; stderr:\n{tail}"
        problems = check_frames(bytes(daemon.stdout), daemon.requests())
        assert not problems, "\n".join(problems) + f"\nstderr:\n{tail}"
        assert not client.unexpected, client.unexpected
