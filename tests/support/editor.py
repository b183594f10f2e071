"""The official ACP Python SDK client playing an editor that answers permission requests, serves files and runs
terminals, against a real ``dsh acp`` daemon driven by the scripted model.

Built on :mod:`tests.support.sdk` (its stdout tee, corkable stdin, environment and frame validation). What it adds:

* :class:`EditorClient` — a :class:`~tests.support.sdk.RecordingClient` that also implements the client side of
  ``session/request_permission`` (answers queued by the test, or *held* until the test releases them),
  ``fs/read_text_file`` / ``fs/write_text_file`` (an in-memory set of editor buffers; writes are recorded, never
  put on disk) and ``terminal/*`` (a fake terminal that "runs" by returning canned output and an exit code, or
  that runs until it is killed). Every callback is recorded in :attr:`EditorClient.calls`, in arrival order,
  and wakes :meth:`~tests.support.sdk.RecordingClient.wait_until`.
* :func:`run_editor` — spawns the daemon (its stdout tee'd, stderr to a file), connects the client, sends
  ``initialize`` with the capabilities the test chose and yields an :class:`Editor`. On leaving: held
  permission requests are released (answered ``cancelled``, as a client must), stdin is closed, the daemon
  must exit 0 within 2 s and is reaped in every case; when the block succeeded, every frame is checked:
  :func:`check_editor_frames` validates the daemon's requests (only methods the client enabled), its
  ``$/cancel_request`` notifications (only for its own requests), the ``set_mode`` / ``set_config_option``
  results, then hands everything else to :func:`tests.support.sdk.check_frames`; and every daemon request must
  have been answered exactly once by the client.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from acp import RequestError, text_block
from acp.client.connection import ClientSideConnection
from acp.schema import (
    AcceptElicitationResponse,
    AllowedOutcome,
    CancelElicitationResponse,
    CancelRequestNotification,
    ClientCapabilities,
    CreateFormSessionElicitationRequest,
    CreateTerminalRequest,
    CreateTerminalResponse,
    DeclineElicitationResponse,
    DeniedOutcome,
    ElicitationCapabilities,
    ElicitationFormCapabilities,
    EnvVariable,
    FileSystemCapabilities,
    Implementation,
    KillTerminalRequest,
    KillTerminalResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    ReadTextFileRequest,
    ReadTextFileResponse,
    ReleaseTerminalRequest,
    ReleaseTerminalResponse,
    RequestPermissionRequest,
    RequestPermissionResponse,
    SetSessionConfigOptionResponse,
    SetSessionModeResponse,
    TerminalExitStatus,
    TerminalOutputRequest,
    TerminalOutputResponse,
    ToolCallUpdate,
    WaitForTerminalExitRequest,
    WaitForTerminalExitResponse,
    WriteTextFileRequest,
    WriteTextFileResponse,
)
from pydantic import BaseModel, ValidationError

from tests.support.env import sandbox_env
from tests.support.sdk import (
    EXIT_DEADLINE,
    DshProcess,
    RecordingClient,
    check_frames,
    connected_daemon,
    write_script,
)

__all__ = [
    "DEADLINE",
    "HOLD",
    "PERMISSION",
    "Editor",
    "EditorClient",
    "FakeTerminal",
    "call",
    "check_editor_frames",
    "read_log",
    "run_editor",
    "text_of",
    "tool_results",
    "write_script",
]

DEADLINE = 30.0
"""Upper bound for any one scenario step that waits on the daemon: hang detection (10 s failed under a two-core load)."""

PERMISSION = "session/request_permission"
FS_READ = "fs/read_text_file"
FS_WRITE = "fs/write_text_file"
ELICIT = "elicitation/create"
TERMINAL_METHODS = ("terminal/create", "terminal/output", "terminal/wait_for_exit", "terminal/kill", "terminal/release")
DAEMON_REQUEST_MODELS: dict[str, type[BaseModel]] = {
    PERMISSION: RequestPermissionRequest,
    FS_READ: ReadTextFileRequest,
    FS_WRITE: WriteTextFileRequest,
    ELICIT: CreateFormSessionElicitationRequest,
    "terminal/create": CreateTerminalRequest,
    "terminal/output": TerminalOutputRequest,
    "terminal/wait_for_exit": WaitForTerminalExitRequest,
    "terminal/kill": KillTerminalRequest,
    "terminal/release": ReleaseTerminalRequest,
}
EXTRA_RESULT_MODELS: dict[str, type[BaseModel]] = {
    "session/set_mode": SetSessionModeResponse,
    "session/set_config_option": SetSessionConfigOptionResponse,
}
HOLD = "hold"
"""A permission answer: keep the request pending until :meth:`EditorClient.release_held`, then answer
``cancelled``."""


# -- the editor ------------------------------------------------------------------------------------------------


@dataclass
class FakeTerminal:
    """What the editor's terminal does: ``output`` and ``exit_code`` once it "ran"; with ``runs_until_killed``
    ``terminal/wait_for_exit`` only answers after ``terminal/kill`` (then with ``SIGKILL``)."""

    output: str = ""
    exit_code: int = 0
    runs_until_killed: bool = False
    killed: anyio.Event = field(default_factory=anyio.Event)


@dataclass
class Call:
    """One client callback: the JSON-RPC method and its params (as the SDK parsed them, dumped back to JSON)."""

    method: str
    params: dict[str, Any]


class EditorClient(RecordingClient):
    """See the module docstring. ``answers`` are the permission answers to give, in order: an option id
    (``allow_once`` …), ``"cancelled"``, or :data:`HOLD`. A permission request with no answer left is recorded
    in ``unexpected`` (failing the test at shutdown) and rejected."""

    def __init__(
        self,
        answers: list[str] | None = None,
        *,
        buffers: Mapping[str, str] | None = None,
        terminal: FakeTerminal | None = None,
        elicitations: list[Any] | None = None,
        on_permission: Callable[[RequestPermissionRequest], None] | None = None,
    ) -> None:
        super().__init__()
        self.answers = list(answers or [])
        self.on_permission = on_permission
        """Called with each permission request before it is answered (a test changes a file "meanwhile")."""
        self.elicitations = list(elicitations or [])
        """Answers to ``elicitation/create``, in order: ``("accept", value)``, ``"decline"``, ``"cancel"`` or
        :data:`HOLD` (pending until :meth:`release_held`, then ``cancel``)."""
        self.buffers = dict(buffers or {})
        self.terminal = terminal or FakeTerminal()
        self.calls: list[Call] = []
        self.held: list[str] = []
        """toolCallIds of the permission requests being held."""
        self._release = anyio.Event()

    # -- bookkeeping ---------------------------------------------------------------------------------------

    def _record(self, method: str, request: BaseModel) -> None:
        self.calls.append(Call(method, request.model_dump(mode="json", by_alias=True, exclude_none=True)))
        self._wake()

    def methods(self) -> list[str]:
        return [call.method for call in self.calls]

    def of_method(self, method: str) -> list[dict[str, Any]]:
        return [call.params for call in self.calls if call.method == method]

    def permissions(self) -> list[dict[str, Any]]:
        """The params of every ``session/request_permission`` received, in order."""
        return self.of_method(PERMISSION)

    def release_held(self) -> None:
        self._release.set()

    # -- session/request_permission ------------------------------------------------------------------------

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption], **kwargs: Any
    ) -> RequestPermissionResponse:
        request = RequestPermissionRequest(session_id=session_id, tool_call=tool_call, options=options)
        if not self.answers:
            self.unexpected.append(f"{PERMISSION} for {tool_call.title!r} (no answer was queued)")
            self._record(PERMISSION, request)
            return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id="reject_once"))
        answer = self.answers.pop(0)
        if self.on_permission is not None:
            self.on_permission(request)
        if answer == HOLD:
            self.held.append(tool_call.tool_call_id)
            self._record(PERMISSION, request)
            await self._release.wait()
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        self._record(PERMISSION, request)
        if answer == "cancelled":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=answer))

    # -- elicitation/create (form mode, session scope) ------------------------------------------------------
    async def create_elicitation(self, message: str, mode: Any, **kwargs: Any) -> Any:
        request = CreateFormSessionElicitationRequest(
            session_id=mode.session_id,
            tool_call_id=mode.tool_call_id,
            message=message,
            mode="form",
            requested_schema=mode.requested_schema,
        )
        self._record(ELICIT, request)
        if not self.elicitations:
            self.unexpected.append(f"{ELICIT} for {message!r} (no answer was queued)")
            return CancelElicitationResponse(action="cancel")
        answer = self.elicitations.pop(0)
        if answer == HOLD:
            await self._release.wait()
            return CancelElicitationResponse(action="cancel")
        if answer == "decline":
            return DeclineElicitationResponse(action="decline")
        if answer == "cancel":
            return CancelElicitationResponse(action="cancel")
        return AcceptElicitationResponse(action="accept", content={"answer": answer[1]})

    # -- fs/* ------------------------------------------------------------------------------------------------

    async def read_text_file(
        self, session_id: str, path: str, line: int | None = None, limit: int | None = None, **kwargs: Any
    ) -> ReadTextFileResponse:
        self._record(FS_READ, ReadTextFileRequest(session_id=session_id, path=path, line=line, limit=limit))
        if path not in self.buffers:
            raise RequestError.resource_not_found(path)
        lines = self.buffers[path].splitlines(keepends=True)
        start = (line or 1) - 1
        stop = None if limit is None else start + limit
        return ReadTextFileResponse(content="".join(lines[start:stop]))

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> WriteTextFileResponse | None:
        self._record(FS_WRITE, WriteTextFileRequest(session_id=session_id, path=path, content=content))
        self.buffers[path] = content
        return WriteTextFileResponse()

    # -- terminal/* ------------------------------------------------------------------------------------------

    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: list[EnvVariable] | None = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **kwargs: Any,
    ) -> CreateTerminalResponse:
        request = CreateTerminalRequest(
            session_id=session_id,
            command=command,
            args=args,
            env=env,
            cwd=cwd,
            output_byte_limit=output_byte_limit,
        )
        self._record("terminal/create", request)
        return CreateTerminalResponse(terminal_id=f"term-{len(self.of_method('terminal/create'))}")

    def _status(self) -> TerminalExitStatus:
        if self.terminal.killed.is_set():
            return TerminalExitStatus(exit_code=None, signal="SIGKILL")
        return TerminalExitStatus(exit_code=self.terminal.exit_code)

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> WaitForTerminalExitResponse:
        self._record(
            "terminal/wait_for_exit", WaitForTerminalExitRequest(session_id=session_id, terminal_id=terminal_id)
        )
        if self.terminal.runs_until_killed:
            await self.terminal.killed.wait()
        status = self._status()
        return WaitForTerminalExitResponse(exit_code=status.exit_code, signal=status.signal)

    async def terminal_output(self, session_id: str, terminal_id: str, **kwargs: Any) -> TerminalOutputResponse:
        self._record("terminal/output", TerminalOutputRequest(session_id=session_id, terminal_id=terminal_id))
        done = not self.terminal.runs_until_killed or self.terminal.killed.is_set()
        return TerminalOutputResponse(
            output=self.terminal.output, truncated=False, exit_status=self._status() if done else None
        )

    async def kill_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> KillTerminalResponse | None:
        self._record("terminal/kill", KillTerminalRequest(session_id=session_id, terminal_id=terminal_id))
        self.terminal.killed.set()
        return KillTerminalResponse()

    async def release_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> ReleaseTerminalResponse | None:
        self._record("terminal/release", ReleaseTerminalRequest(session_id=session_id, terminal_id=terminal_id))
        self.terminal.killed.set()  # release kills a terminal that still runs
        return ReleaseTerminalResponse()


# -- the daemon and the connection -----------------------------------------------------------------------------


@dataclass
class Editor:
    """A running daemon, initialized with the editor's capabilities; ``project`` is the sessions' cwd."""

    dsh: DshProcess
    client: EditorClient
    project: Path
    enabled: frozenset[str]
    """The daemon→client methods the capabilities allow."""

    @property
    def conn(self) -> ClientSideConnection:
        return self.dsh.conn

    async def new_session(self) -> NewSessionResponse:
        with anyio.fail_after(DEADLINE):
            return await self.dsh.conn.new_session(cwd=str(self.project), mcp_servers=[])

    async def load_session(self, session_id: str) -> LoadSessionResponse:
        with anyio.fail_after(DEADLINE):
            response = await self.dsh.conn.load_session(cwd=str(self.project), session_id=session_id, mcp_servers=[])
        assert response is not None
        return response

    async def prompt(self, session_id: str, text: str) -> PromptResponse:
        with anyio.fail_after(DEADLINE):
            return await self.dsh.conn.prompt(session_id=session_id, prompt=[text_block(text)])

    async def wait(self, ready: Callable[[], bool]) -> None:
        """Until ``ready()`` holds, re-checked after every client callback; bounded by :data:`DEADLINE`."""
        with anyio.fail_after(DEADLINE):
            await self.client.wait_until(ready)

    # -- what the daemon wrote -------------------------------------------------------------------------------

    def frames(self) -> list[dict[str, Any]]:
        return self.dsh.frames()

    def updates(self, session_id: str) -> list[dict[str, Any]]:
        """Every ``session/update`` payload for *session_id*, in wire order."""
        return [update for _, update in self.dsh.update_frames(session_id)]

    def tool_updates(self, session_id: str, call_id: str) -> list[dict[str, Any]]:
        """The ``tool_call`` and ``tool_call_update`` payloads of one tool call, in wire order."""
        return [
            update
            for update in self.updates(session_id)
            if update.get("sessionUpdate") in ("tool_call", "tool_call_update") and update.get("toolCallId") == call_id
        ]

    def final(self, session_id: str, call_id: str) -> dict[str, Any]:
        """The last update of a tool call that carries a status (it must be terminal)."""
        statuses = [u for u in self.tool_updates(session_id, call_id) if "status" in u]
        assert statuses, f"no update with a status for {call_id}"
        return statuses[-1]

    def ended(self, session_id: str, call_id: str) -> bool:
        return any(
            u.get("status") in ("completed", "failed")
            for u in self.tool_updates(session_id, call_id)
            if u.get("sessionUpdate") == "tool_call_update"
        )

    def daemon_requests(self, method: str) -> list[tuple[int, dict[str, Any]]]:
        """(wire position, frame) of every request of *method* the daemon sent."""
        return [(i, f) for i, f in enumerate(self.frames()) if f.get("method") == method and "id" in f]

    def cancel_requests(self) -> list[Any]:
        """The request ids of every ``$/cancel_request`` the daemon sent."""
        return [f["params"]["requestId"] for f in self.frames() if f.get("method") == "$/cancel_request"]


def text_of(update: dict[str, Any]) -> str:
    """The text of an update's ``content`` entries of type ``content`` (tool results as the model got them)."""
    return "\n".join(
        entry["content"]["text"]
        for entry in update.get("content") or []
        if entry.get("type") == "content" and entry["content"].get("type") == "text"
    )


def _enabled(capabilities: ClientCapabilities) -> frozenset[str]:
    methods = {PERMISSION}
    if capabilities.fs is not None and capabilities.fs.read_text_file:
        methods.add(FS_READ)
    if capabilities.fs is not None and capabilities.fs.write_text_file:
        methods.add(FS_WRITE)
    if capabilities.terminal:
        methods.update(TERMINAL_METHODS)
    if capabilities.elicitation is not None and capabilities.elicitation.form is not None:
        methods.add(ELICIT)
    return frozenset(methods)


def capabilities(*, fs: bool = False, terminal: bool = False, elicitation: bool = False) -> ClientCapabilities:
    return ClientCapabilities(
        fs=FileSystemCapabilities(read_text_file=fs, write_text_file=fs),
        terminal=terminal,
        elicitation=ElicitationCapabilities(form=ElicitationFormCapabilities()) if elicitation else None,
    )


@asynccontextmanager
async def run_editor(
    tmp_path: Path,
    model: str,
    client: EditorClient,
    *,
    project: Path | None = None,
    fs: bool = False,
    terminal: bool = False,
    elicitation: bool = False,
    name: str = "dsh",
    env: Mapping[str, str] | None = None,
    command: Sequence[str] | None = None,
    unstable: bool = False,
) -> AsyncIterator[Editor]:
    """Spawn ``python -m dsh acp`` (data directory ``tmp_path/dsh-data``: a second daemon on the same
    *tmp_path* sees the first one's sessions), connect *client*, ``initialize`` with fs / terminal
    capabilities as asked, and yield the :class:`Editor` (see the module docstring for the checks on exit).
    *env* overrides entries of the daemon's environment; *command* is the argv to spawn instead of
    ``python -m dsh acp`` (an editor's configured command). *unstable*: the client speaks the unstable protocol
    (``session/fork``; *elicitation* implies it)."""
    project = project or tmp_path / "project"
    project.mkdir(exist_ok=True)
    caps = capabilities(fs=fs, terminal=terminal, elicitation=elicitation)
    body_ok = False
    async with connected_daemon(
        {**sandbox_env(tmp_path, model), **(env or {})},
        client,
        tmp_path,
        tmp_path / f"{name}.stderr.log",
        project=project,
        unstable_protocol=elicitation or unstable,
        before_close=client.release_held,
        command=command,
    ) as dsh:
        editor = Editor(dsh, client, project, _enabled(caps))
        with anyio.fail_after(DEADLINE):
            await dsh.conn.initialize(
                protocol_version=1,
                client_capabilities=caps,
                client_info=Implementation(name="dsh-tools-e2e", version="0"),
            )
        yield editor
        body_ok = True
    exit_code = dsh.exit_code
    if body_ok:
        tail = dsh.stderr()[-3000:]
        assert exit_code is not None, f"the daemon did not exit within {EXIT_DEADLINE} s of stdin EOF; stderr:\n{tail}"
        assert exit_code == 0, f"the daemon exited {exit_code}; stderr:\n{tail}"
        problems = check_editor_frames(bytes(dsh.stdout), dsh.requests(), editor.enabled, dsh.sent)
        assert not problems, "\n".join(problems) + f"\nstderr:\n{tail}"
        assert not client.unexpected, client.unexpected


# -- frame validation ------------------------------------------------------------------------------------------


def _valid(model_type: type[BaseModel], payload: Any, where: str, problems: list[str]) -> None:
    try:
        model = model_type.model_validate(payload)
    except ValidationError as exc:
        problems.append(f"{where}: not a valid {model_type.__name__}: {exc}")
        return
    dumped = model.model_dump(mode="json", by_alias=True, exclude_unset=True)
    if dumped != payload:
        problems.append(f"{where}: {model_type.__name__} does not round-trip: {payload!r} became {dumped!r}")


def check_editor_frames(
    raw: bytes, requests: Mapping[Any, str], enabled: frozenset[str], sent: list[dict[str, Any]]
) -> list[str]:
    """Every problem with what the daemon wrote to an editor that enabled the methods *enabled*.

    *requests*: id → method of every request the client sent; *sent*: every message the client sent (its
    answers to the daemon's requests among them)."""
    problems: list[str] = []
    kept: list[bytes] = []
    ours = dict(requests)
    daemon_ids: list[Any] = []
    lines = raw.split(b"\n")
    tail = lines.pop()  # b"" when raw ends with a newline; check_frames reports an unterminated frame
    for number, line in enumerate(lines):
        where = f"frame {number}"
        try:
            frame = json.loads(line)
        except ValueError:
            kept.append(line)
            continue
        if not isinstance(frame, dict):
            kept.append(line)
            continue
        method = frame.get("method")
        if isinstance(method, str) and "id" in frame:
            if method not in enabled:
                problems.append(f"{where}: the daemon sent {method!r}, which this client never enabled")
            elif set(frame) != {"jsonrpc", "id", "method", "params"} or frame["jsonrpc"] != "2.0":
                problems.append(f"{where}: malformed request: {line[:200]!r}")
            else:
                _valid(DAEMON_REQUEST_MODELS[method], frame["params"], f"{where} ({method})", problems)
            if frame["id"] in daemon_ids:
                problems.append(f"{where}: the daemon reused request id {frame['id']!r}")
            daemon_ids.append(frame["id"])
            continue
        if method == "$/cancel_request":
            _valid(CancelRequestNotification, frame.get("params"), f"{where} ($/cancel_request)", problems)
            request_id = (frame.get("params") or {}).get("requestId")
            if request_id not in daemon_ids:
                problems.append(f"{where}: $/cancel_request for {request_id!r}, which the daemon never sent")
            continue
        if method is None and frame.get("id") in ours and ours[frame["id"]] in EXTRA_RESULT_MODELS:
            request_method = ours.pop(frame["id"])
            if "result" in frame:
                _valid(EXTRA_RESULT_MODELS[request_method], frame["result"], f"{where} ({request_method})", problems)
                continue
            ours[frame["id"]] = request_method  # an error answer: check_frames checks its shape
        kept.append(line)
    problems.extend(check_frames(b"".join(line + b"\n" for line in kept) + tail, ours))
    answers: dict[Any, int] = {}
    for message in sent:
        if "method" not in message and "id" in message:
            answers[message["id"]] = answers.get(message["id"], 0) + 1
    problems.extend(
        f"daemon request {request_id!r} was answered {answers.get(request_id, 0)} times"
        for request_id in daemon_ids
        if answers.get(request_id, 0) != 1
    )
    return problems


# -- the session log -------------------------------------------------------------------------------------------


def read_log(tmp_path: Path, session_id: str) -> list[dict[str, Any]]:
    """The events of a stored session (read once the daemon is gone: every line complete)."""
    raw = (tmp_path / "dsh-data" / f"{session_id}.jsonl").read_bytes()
    assert raw.endswith(b"\n")
    lines = [json.loads(line) for line in raw.split(b"\n")[:-1]]
    assert lines[0].get("type") == "session"
    return lines[1:]


def tool_results(events: list[dict[str, Any]], call_id: str) -> list[dict[str, Any]]:
    """The ``tool/result`` data of *call_id* in a session log: what the model was given for that call."""
    return [e["data"] for e in events if e["type"] == "tool/result" and e["data"]["call_id"] == call_id]


def call(name: str, call_id: str, **arguments: Any) -> dict[str, Any]:
    """A scripted-model step that calls one tool."""
    return {"tool_calls": [{"name": name, "arguments": arguments, "id": call_id}]}
