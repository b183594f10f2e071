"""The plugin in the application: registration, meta and cards, and tools driven by an agent whose scripted
model calls them (cancel through the agent kills a running command)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio

from dsh.app import load_core
from dsh.kernel import App, Context
from dsh.services.agents import Agent, AgentOptions
from dsh.services.tools import ToolCard, ToolDefinition
from dsh.tools import ResolvedPath
from dsh.tools._builtin import BUILTIN_TOOL_NAMES
from tests.support.timing import promised
from tests.tools.conftest import needs_proc, wait_for_file, wait_until_dead

# -- registration ---------------------------------------------------------------------------------------------


def _tool(core: Context, name: str) -> ToolDefinition:
    tool = core.tools.get(name)
    assert tool is not None, name
    return tool


async def test_load_core_registers_the_tools_and_the_workspace(core: Context) -> None:
    names = [schema["name"] for schema in core.tools.schemas()]
    assert set(BUILTIN_TOOL_NAMES) <= set(names)
    kinds = {name: _tool(core, name).meta["kind"] for name in BUILTIN_TOOL_NAMES}
    assert kinds == {
        "read_file": "read",
        "write_file": "edit",
        "edit_file": "edit",
        "notebook_edit": "edit",
        "list_files": "search",
        "glob": "search",
        "grep": "search",
        "run_command": "execute",
        "command_output": "read",
        "command_wait": "read",
        "command_kill": "execute",
        "fetch_url": "fetch",
    }
    for name in BUILTIN_TOOL_NAMES:
        tool = _tool(core, name)
        assert callable(tool.meta["present"]) and callable(tool.meta["paths"])
        assert tool.description
    assert core.get("workspace") is not None
    assert _tool(core, "edit_file").parameters["required"] == ["path"]  # old/new_string or an edits list


async def test_disposing_the_application_removes_the_tools() -> None:
    async with App() as application:
        load_core(application.ctx)
        assert application.ctx.tools.get("read_file") is not None
        assert application.ctx.get("workspace") is not None
    assert application.ctx.get("workspace") is None


def test_importing_dsh_tools_stays_light() -> None:
    code = "import sys, dsh.tools; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", "import json; " + code], capture_output=True, text=True, timeout=30, check=True
    )
    modules = set(json.loads(out.stdout))
    assert "dsh.tools" in modules
    assert not {m for m in modules if m.split(".")[0] in ("pydantic", "httpx", "structlog")}
    assert "dsh.tools._builtin" not in modules


# -- cards ----------------------------------------------------------------------------------------------------


def _present(core: Context, name: str, arguments: Any, cwd: Path) -> ToolCard | None:
    card: ToolCard | None = _tool(core, name).meta["present"](arguments, str(cwd))
    return card


async def test_cards_have_titles_kinds_and_absolute_locations(core: Context, work: Path) -> None:
    (work / "src").mkdir()
    (work / "src" / "app.py").write_text("a = 1\nb = 2\nc = 3\n")
    assert _present(core, "read_file", {"path": "src/app.py", "offset": 2}, work) == ToolCard(
        "Read src/app.py", "read", ((str(work / "src" / "app.py"), 2),)
    )
    assert _present(core, "read_file", {"path": "src/app.py"}, work) == ToolCard(
        "Read src/app.py", "read", ((str(work / "src" / "app.py"), 1),)
    )
    assert _present(core, "read_file", {"path": "/etc/hosts"}, work) == ToolCard(
        "Read /etc/hosts", "read", (("/etc/hosts", 1),)
    )
    assert _present(core, "edit_file", {"path": "src/app.py", "old_string": "c = 3", "new_string": "c = 4"}, work) == (
        ToolCard(
            "Edit src/app.py",
            "edit",
            ((str(work / "src" / "app.py"), None),),  # the line comes with the result (display["line"])
            (str(work / "src" / "app.py"), "c = 3", "c = 4"),
        )
    )
    assert _present(core, "list_files", {}, work) == ToolCard("List .", "search", ((str(work), None),))
    assert _present(core, "glob", {"pattern": "**/*.py", "path": "src"}, work) == ToolCard(
        "Glob **/*.py in src", "search", ((str(work / "src"), None),)
    )
    assert _present(core, "grep", {"pattern": "TODO", "path": "src"}, work) == ToolCard(
        "Grep 'TODO' in src", "search", ((str(work / "src"), None),)
    )


async def test_cards_depend_on_the_arguments_alone_never_on_the_files(core: Context, work: Path) -> None:
    """A replayed session must show the cards the live one showed, though the files have changed since:
    a write's old text and an edit's line come with the result's display, not with the card."""
    new = _present(core, "write_file", {"path": "f.txt", "content": "hi\n"}, work)
    assert new == ToolCard("Write f.txt", "edit", ((str(work / "f.txt"), None),))
    edit = {"path": "f.txt", "old_string": "hi", "new_string": "ho"}
    before = _present(core, "edit_file", edit, work)
    (work / "f.txt").write_text("something\nelse\nhi\n")
    assert _present(core, "write_file", {"path": "f.txt", "content": "hi\n"}, work) == new
    assert _present(core, "edit_file", edit, work) == before


async def test_run_cards(core: Context, work: Path) -> None:
    assert _present(core, "run_command", {"command": "pytest -q"}, work) == ToolCard("Run pytest -q", "execute")
    multi = _present(core, "run_command", {"command": "cd src\nmake all", "cwd": "sub"}, work)
    assert multi == ToolCard("Run cd src …", "execute", ((str(work / "sub"), None),))
    long = _present(core, "run_command", {"command": "echo " + "x" * 200}, work)
    assert long is not None and len(long.title) <= len("Run ") + 80


async def test_presenters_accept_json_text_and_never_raise(core: Context, work: Path) -> None:
    as_text = _present(core, "read_file", json.dumps({"path": "a.py"}), work)
    assert as_text == ToolCard("Read a.py", "read", ((str(work / "a.py"), 1),))
    for name in BUILTIN_TOOL_NAMES:
        assert _present(core, name, "{not json", work) is None
        assert _present(core, name, {"unexpected": 1}, work) is None or name == "list_files"


async def test_paths_meta_says_what_is_inside(core: Context, work: Path) -> None:
    paths = _tool(core, "read_file").meta["paths"]
    assert paths({"path": "../x"}, str(work)) == [
        ResolvedPath(str(work.parent / "x"), False, str((work.parent / "x").resolve()))
    ]
    assert [p.inside for p in paths({"path": "x"}, str(work))] == [True]
    assert _tool(core, "run_command").meta["paths"]({"command": "ls"}, str(work)) == []


# -- through an agent with a scripted model ---------------------------------------------------------------------


async def _agent(core: Context, work: Path, steps: list[dict[str, Any]], agent_id: str = "a") -> Agent:
    core.scripted_models.add(agent_id, steps)
    handle = await core.agents.create(
        agent_id=agent_id,
        session_id=f"s-{agent_id}",
        meta={"cwd": str(work)},
        agent_options=AgentOptions(model=f"scripted:{agent_id}"),
    )
    agent: Agent = handle.agent
    return agent


def _results(agent: Agent) -> list[dict[str, Any]]:
    return [event.data for event in agent.session.events if event.type == "tool/result"]


async def test_a_scripted_model_writes_edits_and_reads(core: Context, work: Path) -> None:
    def tool(name: str, call_id: str, **arguments: Any) -> dict[str, Any]:
        return {"tool_calls": [{"name": name, "arguments": arguments, "id": call_id}]}

    agent = await _agent(
        core,
        work,
        [
            tool("write_file", "w", path="notes/todo.md", content="- buy milk\n- call mum\n"),
            tool("edit_file", "e", path="notes/todo.md", old_string="milk", new_string="bread"),
            tool("read_file", "r", path="notes/todo.md"),
            tool("edit_file", "bad", path="notes/todo.md", old_string="- ", new_string="* "),
            tool("run_command", "run", command="cat notes/todo.md | wc -l"),
            {"text": "Done."},
        ],
    )
    agent.send([{"type": "text", "text": "go"}])
    with anyio.fail_after(10):
        await agent.when_idle()
    results = {result["call_id"]: result for result in _results(agent)}
    assert (work / "notes" / "todo.md").read_text() == "- buy bread\n- call mum\n"
    assert results["w"]["display"]["diff"]["old_text"] is None
    assert results["e"]["display"]["diff"] == {
        "path": str(work / "notes" / "todo.md"),
        "old_text": "- buy milk\n- call mum\n",
        "new_text": "- buy bread\n- call mum\n",
    }
    assert results["r"]["content"] == [{"type": "text", "text": "     1\t- buy bread\n     2\t- call mum"}]
    assert results["bad"]["is_error"] is True
    assert "matches 2 times" in results["bad"]["content"][0]["text"]
    assert results["run"]["content"][0]["text"] == "2\n[exit code: 0]"
    assert results["run"]["display"]["exit_code"] == 0
    assert all(not results[k]["is_error"] for k in ("w", "e", "r", "run"))


@needs_proc
async def test_cancelling_the_agent_kills_the_running_command(core: Context, work: Path) -> None:
    command = "echo $$ > pgid; sleep 60 & echo $! > bg; sleep 60"
    agent = await _agent(
        core,
        work,
        [{"tool_calls": [{"name": "run_command", "arguments": {"command": command}, "id": "slow"}]}, {"text": "never"}],
    )
    agent.send([{"type": "text", "text": "run it"}])
    await wait_for_file(work / "bg")
    pgid, background = int((work / "pgid").read_text()), int((work / "bg").read_text())
    cancelled_at = time.monotonic()
    agent.cancel()
    with anyio.fail_after(5):
        await agent.when_idle()
    assert time.monotonic() - cancelled_at < promised(1.0)  # the command sleeps 60 s
    await wait_until_dead(pgid, background, within=promised(1.0))
    [result] = _results(agent)
    assert result["call_id"] == "slow"
    assert result["is_error"] is True
    assert result["content"][0]["text"].endswith("[cancelled]")
    ends = [event.data["reason"] for event in agent.session.events if event.type == "turn/end"]
    assert ends == [{"kind": "aborted", "reason": "cancelled"}]
