"""The workspace seam: the tools read, write and run only through ``workspace/*`` waterfalls, whose local
defaults a front end overrides with a listener."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from dsh import events as ev
from dsh.kernel import Context, Next
from dsh.services.tools import ToolExecution
from dsh.tools import CommandResult, ReadRequest, RunRequest, Workspace, WriteRequest
from dsh.tools._builtin import COMMAND_OUTPUT_LIMIT, READ_MAX_LINES
from tests.tools.conftest import Call, FakeAgent, text


async def test_a_read_listener_answers_read_file(core: Context, call: Call, work: Path) -> None:
    seen: list[ReadRequest] = []

    async def from_editor(request: ReadRequest, next_: Next[ReadRequest, str]) -> str:
        seen.append(request)
        return "from editor\n"

    core.on(ev.WORKSPACE_READ, from_editor)
    result = await call("read_file", {"path": "unsaved.py", "offset": 3}, call_id="r1")
    assert text(result) == "     3\tfrom editor"
    [request] = seen
    assert request.path == str(work / "unsaved.py")  # absolute
    assert (request.line, request.limit) == (3, READ_MAX_LINES + 1)
    assert request.execution.call_id == "r1"
    assert not (work / "unsaved.py").exists()


async def test_a_write_listener_takes_writes_and_edits_off_the_disk(core: Context, call: Call, work: Path) -> None:
    buffers: dict[str, str] = {str(work / "m.py"): "x = 1\n"}

    async def editor_read(request: ReadRequest, next_: Next[ReadRequest, str]) -> str:
        if request.path not in buffers:
            raise FileNotFoundError(request.path)
        return buffers[request.path]

    async def editor_write(request: WriteRequest, next_: Next[WriteRequest, None]) -> None:
        buffers[request.path] = request.content

    core.on(ev.WORKSPACE_READ, editor_read)
    core.on(ev.WORKSPACE_WRITE, editor_write)
    written = await call("write_file", {"path": "new.py", "content": "y = 2\n"})
    assert written.display == {"diff": {"path": str(work / "new.py"), "old_text": None, "new_text": "y = 2\n"}}
    edited = await call("edit_file", {"path": "m.py", "old_string": "x = 1", "new_string": "x = 3"})
    assert not edited.is_error, text(edited)
    assert buffers == {str(work / "m.py"): "x = 3\n", str(work / "new.py"): "y = 2\n"}
    assert [p async for p in anyio.Path(work).iterdir()] == []  # nothing touched the disk


async def test_a_run_listener_replaces_the_local_process(core: Context, call: Call, work: Path) -> None:
    seen: list[RunRequest] = []

    async def terminal(request: RunRequest, next_: Next[RunRequest, CommandResult]) -> CommandResult:
        seen.append(request)
        return CommandResult("from terminal\n", 0, terminal_id="term-1")

    core.on(ev.WORKSPACE_RUN, terminal)
    result = await call("run_command", {"command": "touch local", "timeout": 5})
    assert text(result) == "from terminal\n[exit code: 0]"
    assert result.display is not None and result.display["terminal_id"] == "term-1"
    [request] = seen
    assert (request.command, request.cwd, request.timeout, request.output_limit) == (
        "touch local",
        str(work),
        5.0,
        COMMAND_OUTPUT_LIMIT,
    )
    assert not (work / "local").exists()


async def test_listeners_can_fall_through_to_the_local_default(core: Context, call: Call, work: Path) -> None:
    async def shout(request: ReadRequest, next_: Next[ReadRequest, str]) -> str:
        return (await next_()).upper()

    async def elsewhere(request: RunRequest, next_: Next[RunRequest, CommandResult]) -> CommandResult:
        (work / "sub").mkdir()
        return await next_(RunRequest(request.execution, request.command, str(work / "sub"), 5, 100))

    core.on(ev.WORKSPACE_READ, shout)
    core.on(ev.WORKSPACE_RUN, elsewhere)
    (work / "f.txt").write_text("quiet\n")
    assert text(await call("read_file", {"path": "f.txt"})) == "     1\tQUIET"
    assert text(await call("run_command", {"command": "pwd"})) == f"{work / 'sub'}\n[exit code: 0]"


async def test_a_listener_error_becomes_the_tools_error(core: Context, call: Call) -> None:
    async def broken(request: ReadRequest, next_: Next[ReadRequest, str]) -> str:
        raise OSError("fs/read_text_file failed in the editor: no such buffer")

    core.on(ev.WORKSPACE_READ, broken)
    result = await call("read_file", {"path": "x.py"})
    assert result.is_error
    assert text(result) == "Error: fs/read_text_file failed in the editor: no such buffer"


# -- the service and its local defaults -----------------------------------------------------------------------


@pytest.fixture
def workspace(core: Context) -> Workspace:
    service: Workspace = core.workspace
    return service


def _execution(agent: FakeAgent) -> ToolExecution:
    return ToolExecution("c1", "test", {}, agent)  # type: ignore[arg-type]


async def test_local_read_and_write(workspace: Workspace, agent: FakeAgent, work: Path) -> None:
    execution = _execution(agent)
    target = str(work / "deep" / "dir" / "f.txt")
    await workspace.write(execution, target, "one\r\ntwo\nthree\n")
    assert await anyio.Path(target).read_bytes() == b"one\r\ntwo\nthree\n"
    assert await workspace.read(execution, target) == "one\r\ntwo\nthree\n"
    assert await workspace.read(execution, target, line=2) == "two\nthree\n"
    assert await workspace.read(execution, target, line=2, limit=1) == "two\n"
    assert await workspace.read(execution, target, limit=1) == "one\r\n"
    with pytest.raises(FileNotFoundError):
        await workspace.read(execution, str(work / "missing"))


async def test_the_service_takes_absolute_paths_only(workspace: Workspace, agent: FakeAgent) -> None:
    execution = _execution(agent)
    with pytest.raises(ValueError, match="absolute"):
        await workspace.read(execution, "relative.txt")
    with pytest.raises(ValueError, match="absolute"):
        await workspace.write(execution, "relative.txt", "")
    with pytest.raises(ValueError, match="absolute"):
        await workspace.run(execution, "true", "relative", 1, 100)


async def test_local_run_returns_a_result(workspace: Workspace, agent: FakeAgent, work: Path) -> None:
    result = await workspace.run(_execution(agent), "echo hi; exit 3", str(work), 5, 100)
    assert result == CommandResult("hi\n", 3)


async def test_cwd_and_roots(workspace: Workspace, work: Path, tmp_path: Path) -> None:
    with_cwd = _execution(FakeAgent.at(work))
    assert workspace.cwd(with_cwd) == str(work)
    assert workspace.roots(with_cwd) == [str(work)]
    without = ToolExecution("c1", "t", {})
    import os

    assert workspace.cwd(without) == os.getcwd()  # no session directory: the process's
    assert workspace.resolve(with_cwd, "a/../b").path == str(work / "b")
