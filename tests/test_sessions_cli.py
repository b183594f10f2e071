"""``dsh sessions list|show|export|rm`` (issue 5, CLI): real sessions written by the loop with JSONL persistence,
read back by the real command in a subprocess; plus the pure renderers of :mod:`dsh.frontends.sessions_cli`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from dsh import events as ev
from dsh.app import load_core
from dsh.frontends import sessions_cli as sc
from dsh.kernel import App, Context
from dsh.plugins.persistence import CorruptSessionError, JsonlPersistence
from dsh.services.agents import Agent, AgentHandle, AgentOptions
from dsh.services.llm import ContentBlock
from dsh.services.sessions import SessionEvent, SessionHeader, SessionInfo
from dsh.services.tools import ToolDefinition, ToolExecution

CLI_WAIT = 30.0


# -- helpers ------------------------------------------------------------------------------------------------


def text(value: str) -> list[ContentBlock]:
    return [{"type": "text", "text": value}]


def cli_env(root: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("DSH_")}
    env.pop("PYTHONWARNINGS", None)
    env["DSH_DATA_DIR"] = str(root)
    env["XDG_DATA_HOME"] = str(root.parent / "xdg")
    return env


async def cli(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    """Run ``python -m dsh sessions ARGS`` with ``DSH_DATA_DIR=root``, without blocking the event loop."""
    with anyio.fail_after(CLI_WAIT):
        return await anyio.run_process([sys.executable, "-m", "dsh", "sessions", *args], env=cli_env(root), check=False)


def snapshot(directory: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under *directory*: its bytes and modification time (ns)."""
    return {
        str(path.relative_to(directory)): (path.read_bytes(), path.stat().st_mtime_ns)
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


async def lookup(arguments: Any, execution: ToolExecution) -> str:
    return f"found {arguments['q']}"


async def broken(arguments: Any, execution: ToolExecution) -> str:
    raise RuntimeError("no such thing")


@asynccontextmanager
async def lifetime(root: Path) -> AsyncIterator[Context]:
    """One dsh process lifetime with JSONL persistence in *root*, tools and scripts registered."""
    async with App() as application:
        ctx = application.ctx
        load_core(ctx, data_dir=root)
        ctx.tools.register(ToolDefinition("lookup", "look something up", {"type": "object"}, lookup))
        ctx.tools.register(ToolDefinition("broken", "always fails", {"type": "object"}, broken))
        ctx.scripted_models.add(
            "rich",
            [
                {
                    "reasoning": "plan the lookup",
                    "text": "calling lookup",
                    "tool_calls": [{"name": "lookup", "arguments": {"q": "x"}}],
                },
                {"tool_calls": [{"name": "broken", "arguments": "not json"}]},
                {"text": "summary of alpha"},
                {"text": "cut short", "finish": "max-tokens"},
                {"error": {"message": "model exploded", "code": "BOOM"}},
            ],
        )
        ctx.scripted_models.add("hang", [{"hang": True}])
        yield ctx


async def create(ctx: Context, session_id: str, cwd: Path, model: str) -> AgentHandle:
    return await ctx.agents.create(
        agent_id=f"agent-{session_id}",
        session_id=session_id,
        meta={"cwd": str(cwd)},
        agent_options=AgentOptions(model=model),
    )


async def prompt(agent: Agent, value: str) -> None:
    agent.send(text(value))
    with anyio.fail_after(5):
        await agent.when_idle()


async def start_hanging_turn(ctx: Context, agent: Agent, value: str) -> None:
    """Send *value* to an agent on the ``hang`` script; return once its step is in flight and the log is on disk."""
    started = anyio.Event()

    def on_step_start(who: Agent, turn: int, step: int) -> None:
        if who is agent:
            started.set()

    ctx.on(ev.AGENT_STEP_START, on_step_start)
    agent.send(text(value))
    with anyio.fail_after(5):
        await started.wait()
    await ctx.sessions.flush(agent.session)


@dataclass
class Store:
    root: Path
    project_a: Path
    project_b: Path

    def path(self, session_id: str) -> Path:
        return self.root / f"{session_id}.jsonl"


@pytest.fixture
async def store(tmp_path: Path) -> Store:
    """Three stored sessions written by the real loop:

    * ``alpha`` (project A): tool call and result, a failing tool, reasoning (turn 1, completed); max tokens
      (turn 2); a model error (turn 3).
    * ``beta`` (project B): one echo turn.
    * ``gamma`` (project A): one turn cancelled mid-step.

    Modification times are then set so that the newest is gamma, then alpha, then beta.
    """
    root = tmp_path / "data"
    project_a, project_b = tmp_path / "project-a", tmp_path / "project-b"
    async with lifetime(root) as ctx:
        alpha = await create(ctx, "alpha", project_a, "scripted:rich")
        await prompt(alpha.agent, "Alpha first question")
        await prompt(alpha.agent, "alpha second")
        await prompt(alpha.agent, "alpha third")
        beta = await create(ctx, "beta", project_b, "echo")
        await prompt(beta.agent, "Beta   question\nwith a second line")
        gamma = await create(ctx, "gamma", project_a, "scripted:hang")
        await start_hanging_turn(ctx, gamma.agent, "gamma will be cancelled")
        gamma.agent.cancel()
        with anyio.fail_after(5):
            await gamma.agent.when_idle()
    now = time.time()
    for session_id, age in (("gamma", 100), ("alpha", 200), ("beta", 300)):
        os.utime(root / f"{session_id}.jsonl", (now - age, now - age))
    return Store(root, project_a, project_b)


# -- list ---------------------------------------------------------------------------------------------------


async def test_list_is_newest_first_with_cwd_and_title(store: Store) -> None:
    result = await cli(store.root, "list")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.decode().splitlines()
    assert [line.split()[0] for line in lines] == ["gamma", "alpha", "beta"]
    gamma, alpha, beta = lines
    assert str(store.project_a) in alpha and "Alpha first question" in alpha
    assert str(store.project_b) in beta and "Beta question with a second line" in beta
    assert "gamma will be cancelled" in gamma
    updated = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(store.path("alpha").stat().st_mtime))
    assert f"alpha  {updated}  " in alpha, "the last update (the file's mtime) is shown in local time"


async def test_list_filters_by_cwd(store: Store) -> None:
    only_a = await cli(store.root, "list", "--cwd", str(store.project_a))
    assert only_a.returncode == 0, only_a.stderr
    assert [line.split()[0] for line in only_a.stdout.decode().splitlines()] == ["gamma", "alpha"]

    not_normal = await cli(store.root, "list", "--cwd", f"{store.project_b}/./")
    assert [line.split()[0] for line in not_normal.stdout.decode().splitlines()] == ["beta"]

    nowhere = await cli(store.root, "list", "--cwd", str(store.root.parent / "elsewhere"))
    assert nowhere.returncode == 0
    assert nowhere.stdout.decode().startswith("No sessions for ")


async def test_list_of_an_empty_or_missing_store_says_so(tmp_path: Path) -> None:
    missing = tmp_path / "never-created"
    result = await cli(missing, "list")
    assert result.returncode == 0, result.stderr
    # issue 43: a store that does not exist is named with where its path came from, so a typo shows
    assert result.stdout.decode() == f"No sessions: {missing} (DSH_DATA_DIR) does not exist.\n"
    assert not missing.exists(), "listing creates nothing"

    empty = tmp_path / "empty"
    empty.mkdir()
    result = await cli(tmp_path / "ignored", "list", "--data-dir", str(empty))
    assert result.returncode == 0
    assert result.stdout.decode() == f"No sessions in {empty}.\n", "--data-dir wins over DSH_DATA_DIR"


# -- show ---------------------------------------------------------------------------------------------------


async def test_show_renders_the_whole_conversation(store: Store) -> None:
    before = snapshot(store.root)
    result = await cli(store.root, "show", "alpha")
    assert result.returncode == 0, result.stderr
    out = result.stdout.decode()
    expected_in_order = [
        "Session alpha",
        f"cwd: {store.project_a}",
        "=== Turn 1 ",
        "User:\n  Alpha first question",
        "Reasoning:\n  plan the lookup",
        "Assistant:\n  calling lookup",
        'Tool call lookup [call_1_1]:\n  {\n    "q": "x"\n  }',
        "Tool result lookup [call_1_1]:\n  found x",
        "Tool call broken [call_2_1]:\n  not json",
        "Tool result broken [call_2_1] (error):\n  Error: no such thing",
        "Assistant:\n  summary of alpha",
        "--- Turn 1 ended: completed ---",
        "=== Turn 2 ",
        "User:\n  alpha second",
        "Assistant:\n  cut short",
        "--- Turn 2 ended: stopped at the model's max tokens limit ---",
        "=== Turn 3 ",
        "User:\n  alpha third",
        "Error [BOOM]: model exploded",
        "--- Turn 3 ended: error: model exploded [BOOM] ---",
    ]
    position = 0
    for fragment in expected_in_order:
        found = out.find(fragment, position)
        assert found >= 0, f"missing (or out of order): {fragment!r}\n{out}"
        position = found + len(fragment)
    assert out.count("Assistant:\n  calling lookup") == 1, "text comes from assistant/message, not chunks too"
    assert snapshot(store.root) == before, "show changes nothing"


async def test_show_reports_a_cancelled_turn(store: Store) -> None:
    result = await cli(store.root, "show", "gamma")
    assert result.returncode == 0, result.stderr
    out = result.stdout.decode()
    assert "User:\n  gamma will be cancelled" in out
    assert "--- Turn 1 ended: cancelled (cancelled) ---" in out


async def test_show_works_while_a_process_holds_the_session_and_touches_nothing(tmp_path: Path) -> None:
    """A live, mid-turn session is locked by this process; show (another process) still reads it."""
    root = tmp_path / "data"
    async with lifetime(root) as ctx:
        handle = await create(ctx, "live", tmp_path, "scripted:hang")
        await start_hanging_turn(ctx, handle.agent, "still thinking")
        before = snapshot(root)

        shown = await cli(root, "show", "live")
        assert shown.returncode == 0, shown.stderr
        out = shown.stdout.decode()
        assert "User:\n  still thinking" in out
        assert "--- Turn 1 ended: no end recorded" in out
        removed = await cli(root, "rm", "live")
        assert removed.returncode == 1
        assert "in use by another dsh process" in removed.stderr.decode()
        assert snapshot(root) == before, "neither show nor a refused rm changed the live file"

        mid_turn = (root / "live.jsonl").read_bytes()
        handle.agent.cancel()
        with anyio.fail_after(5):
            await handle.agent.when_idle()

    # A crash at that moment: the file ends mid-turn. show says so and repairs nothing ...
    (root / "live.jsonl").write_bytes(mid_turn)
    before = snapshot(root)
    shown = await cli(root, "show", "live")
    assert "--- Turn 1 ended: no end recorded" in shown.stdout.decode()
    assert snapshot(root) == before
    # ... loading repairs it, and show then reports the turn interrupted.
    persistence = JsonlPersistence(root)
    await persistence.load("live")
    persistence.release("live")
    shown = await cli(root, "show", "live")
    assert shown.returncode == 0, shown.stderr
    assert "--- Turn 1 ended: interrupted (the process stopped before the turn finished) ---" in shown.stdout.decode()


async def test_show_and_export_tolerate_a_torn_final_line(store: Store) -> None:
    path = store.path("beta")
    complete = path.read_bytes()
    path.write_bytes(complete + b'{"type":"assistant/chunk","seq":')
    before = snapshot(store.root)

    shown = await cli(store.root, "show", "beta")
    assert shown.returncode == 0, shown.stderr
    assert "Beta   question" in shown.stdout.decode()
    assert "incomplete line" in shown.stdout.decode()

    exported = await cli(store.root, "export", "beta", "--format", "jsonl")
    assert exported.returncode == 0
    assert exported.stdout == complete, "jsonl export has every complete line and no torn tail"
    assert "incomplete final line" in exported.stderr.decode()
    assert snapshot(store.root) == before


async def test_a_corrupt_middle_line_is_an_error_naming_file_and_line(store: Store) -> None:
    path = store.path("beta")
    lines = path.read_bytes().split(b"\n")
    lines[2] = b"{not json"
    path.write_bytes(b"\n".join(lines))
    before = snapshot(store.root)
    for args in (("show", "beta"), ("export", "beta", "--format", "markdown")):
        result = await cli(store.root, *args)
        assert result.returncode == 1
        assert f"{path}:3:" in result.stderr.decode()
        assert result.stdout == b""
    assert snapshot(store.root) == before


async def test_unknown_session_is_exit_1(store: Store) -> None:
    for args in (("show", "nope"), ("export", "nope"), ("export", "nope", "--format", "markdown")):
        result = await cli(store.root, *args)
        assert result.returncode == 1, args
        assert "no stored session 'nope'" in result.stderr.decode()
        assert result.stdout == b""


# -- export -------------------------------------------------------------------------------------------------


async def test_export_jsonl_is_the_file_verbatim(store: Store) -> None:
    for session_id in ("alpha", "beta", "gamma"):
        result = await cli(store.root, "export", session_id, "--format", "jsonl")
        assert result.returncode == 0, result.stderr
        assert result.stdout == store.path(session_id).read_bytes()
        assert result.stdout.startswith(b'{"type":"session"')
    default = await cli(store.root, "export", "alpha")
    assert default.stdout == store.path("alpha").read_bytes(), "jsonl is the default format"


async def test_export_markdown(store: Store) -> None:
    before = snapshot(store.root)
    result = await cli(store.root, "export", "alpha", "--format", "markdown")
    assert result.returncode == 0, result.stderr
    out = result.stdout.decode()
    expected_in_order = [
        "# Session `alpha`",
        f"- **cwd:** `{store.project_a}`",
        "## Turn 1",
        "**User**\n\n> Alpha first question",
        "*Reasoning*\n\n> plan the lookup",
        "**Assistant**\n\ncalling lookup",
        '**Tool call** `lookup` (`call_1_1`)\n\n```json\n{\n  "q": "x"\n}\n```',
        "**Tool result** `lookup` (`call_1_1`)\n\n```\nfound x\n```",
        "**Tool result (error)** `broken` (`call_2_1`)\n\n```\nError: no such thing\n```",
        "*Turn 1 ended: completed*",
        "## Turn 2",
        "*Turn 2 ended: stopped at the model's max tokens limit*",
        "## Turn 3",
        "**Error** (`BOOM`): model exploded",
        "*Turn 3 ended: error: model exploded [BOOM]*",
    ]
    position = 0
    for fragment in expected_in_order:
        found = out.find(fragment, position)
        assert found >= 0, f"missing (or out of order): {fragment!r}\n{out}"
        position = found + len(fragment)
    assert snapshot(store.root) == before

    bad_format = await cli(store.root, "export", "alpha", "--format", "html")
    assert bad_format.returncode == 2
    assert bad_format.stdout == b""


# -- rm -----------------------------------------------------------------------------------------------------


async def test_rm_deletes_the_session(store: Store) -> None:
    result = await cli(store.root, "rm", "beta")
    assert result.returncode == 0, result.stderr
    assert not store.path("beta").exists()
    assert store.path("alpha").exists() and store.path("gamma").exists()
    listed = await cli(store.root, "list")
    assert [line.split()[0] for line in listed.stdout.decode().splitlines()] == ["gamma", "alpha"]

    again = await cli(store.root, "rm", "beta")
    assert again.returncode == 1
    assert "no stored session 'beta'" in again.stderr.decode()


HOSTILE_IDS = ["../x", "/etc/passwd", "%2e%2e%2f", "", "a" * 10_000, "..", "a/b", "x.jsonl/../../x"]


@pytest.mark.timeout(240)  # twelve CLI processes one after another: seconds each on a busy two-core machine
async def test_hostile_ids_are_exit_2_and_touch_nothing(store: Store) -> None:
    outside = store.root.parent / "x.jsonl"
    outside.write_bytes(store.path("alpha").read_bytes())
    before = snapshot(store.root.parent)
    for session_id in HOSTILE_IDS:
        result = await cli(store.root, "rm", session_id)
        assert result.returncode == 2, session_id
        assert "invalid session id" in result.stderr.decode()
        assert result.stdout == b""
    for command in ("show", "export"):
        for session_id in ("../x", "/etc/passwd"):
            result = await cli(store.root, command, session_id)
            assert result.returncode == 2, (command, session_id)
            assert "invalid session id" in result.stderr.decode()
            assert result.stdout == b""
    assert snapshot(store.root.parent) == before


# -- the pure renderers -------------------------------------------------------------------------------------

HEADER = SessionHeader(id="unit", created_at=1_700_000_000.0, cwd="/work/project")


def events(*entries: tuple[str, dict[str, Any]]) -> list[SessionEvent]:
    return [SessionEvent(kind, seq, 1_700_000_000.0 + seq, data) for seq, (kind, data) in enumerate(entries)]


def turn(
    number: int, *body: tuple[str, dict[str, Any]], reason: dict[str, Any] | None
) -> list[tuple[str, dict[str, Any]]]:
    entries: list[tuple[str, dict[str, Any]]] = [
        ("turn/start", {"turn": number, "trigger": {"kind": "message", "source": {"kind": "user"}}}),
        *body,
    ]
    if reason is not None:
        entries.append(("turn/end", {"turn": number, "reason": reason}))
    return entries


def test_describe_end_covers_every_reason() -> None:
    assert sc.describe_end({"kind": "completed"}) == "completed"
    assert sc.describe_end({"kind": "aborted", "reason": "session/cancel"}) == "cancelled (session/cancel)"
    assert sc.describe_end({"kind": "aborted"}) == "cancelled"
    assert sc.describe_end({"kind": "interrupted"}).startswith("interrupted")
    assert sc.describe_end({"kind": "error", "message": "boom", "code": "X"}) == "error: boom [X]"
    assert sc.describe_end({"kind": "error", "message": "boom"}) == "error: boom"
    assert sc.describe_end({"kind": "max-tokens"}) == "stopped at the model's max tokens limit"
    assert sc.describe_end({"kind": "disposed"}).startswith("disposed")
    assert sc.describe_end({"kind": "something-new"}) == "something-new"
    assert sc.describe_end(None).startswith("no end recorded")


def test_transcript_items_in_log_order() -> None:
    log = events(
        *turn(
            1,
            (
                "user/message",
                {
                    "content": [*text("hi"), {"type": "image", "url": "data:image/png;base64,AAAA"}],
                    "source": {"kind": "user"},
                },
            ),
            ("step/start", {"turn": 1, "step": 1}),
            ("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "text": "hel"}}),
            (
                "assistant/message",
                {
                    "turn": 1,
                    "step": 1,
                    "content": [
                        {"type": "reasoning", "text": "think"},
                        {"type": "text", "text": "hello"},
                        {"type": "tool-call", "id": "c1", "name": "ls", "arguments": '{"path": "."}'},
                        {"type": "tool-call", "id": "c2", "name": "rm", "arguments": "{}"},
                    ],
                },
            ),
            ("usage", {"turn": 1, "step": 1, "usage": {"input_tokens": 1}}),
            ("tool/call", {"turn": 1, "step": 1, "call_id": "c1", "name": "ls", "arguments": '{"path": "."}'}),
            (
                "tool/result",
                {
                    "turn": 1,
                    "step": 1,
                    "call_id": "c1",
                    "content": text("a b"),
                    "is_error": True,
                    "error": {"name": "E", "code": "DENIED"},
                },
            ),
            (
                "steering/message",
                {"turn": 1, "content": text("faster"), "source": {"kind": "plugin", "plugin": "goal"}},
            ),
            ("context/message", {"content": text("ctx"), "source": {"kind": "agent", "agent_id": "other"}}),
            ("step/end", {"turn": 1, "step": 1}),
            reason={"kind": "completed"},
        )
    )
    [only] = sc.build_transcript(log)
    assert only.number == 1 and only.end == {"kind": "completed"}
    assert [(i.kind, i.text, i.label, i.call_id, i.flag, i.code) for i in only.items] == [
        ("user", "hi\n[image: data:image/png;base64, 26 characters]", "user", "", "", ""),
        ("reasoning", "think", "", "", "", ""),
        ("assistant", "hello", "", "", "", ""),
        ("tool_call", "{}", "rm", "c2", "not run", ""),
        ("tool_call", '{\n  "path": "."\n}', "ls", "c1", "", ""),
        ("tool_result", "a b", "ls", "c1", "error", "DENIED"),
        ("steering", "faster", "plugin goal", "", "", ""),
        ("context", "ctx", "agent other", "", "", ""),
    ]


def test_a_step_cut_off_shows_its_streamed_text_as_partial() -> None:
    log = events(
        *turn(
            1,
            ("user/message", {"content": text("go"), "source": {"kind": "user"}}),
            ("step/start", {"turn": 1, "step": 1}),
            ("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "reasoning-delta", "text": "hmm "}}),
            ("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "text": "half "}}),
            ("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "text": "an answer"}}),
            ("step/end", {"turn": 1, "step": 1}),
            reason={"kind": "aborted", "reason": "session/cancel"},
        ),
        *turn(2, ("user/message", {"content": text("again"), "source": {"kind": "user"}}), reason=None),
    )
    first, second = sc.build_transcript(log)
    assert [(i.kind, i.text, i.flag) for i in first.items] == [
        ("user", "go", ""),
        ("partial", "hmm ", "reasoning"),
        ("partial", "half an answer", ""),
    ]
    assert second.end is None
    out = sc.render_transcript(sc.StoredSession(HEADER, log))
    assert "Assistant (partial: streamed, the step did not finish):\n  half an answer" in out
    assert "--- Turn 1 ended: cancelled (session/cancel) ---" in out
    assert "--- Turn 2 ended: no end recorded" in out


def test_events_outside_a_turn_are_kept() -> None:
    log = events(("user/message", {"content": text("orphan"), "source": {"kind": "user"}}))
    [outside] = sc.build_transcript(log)
    assert outside.number is None and outside.items[0].text == "orphan"
    assert "=== Outside any turn" in sc.render_transcript(sc.StoredSession(HEADER, log))
    assert sc.render_transcript(sc.StoredSession(HEADER, [])).endswith("(no turns yet)\n")


def test_rendering_escapes_control_characters() -> None:
    log = events(
        *turn(
            1,
            (
                "user/message",
                {"content": text("red \x1b[31mALERT\x1b[0m\r\nline\rover\ttab\x07"), "source": {"kind": "user"}},
            ),
            reason={"kind": "completed"},
        )
    )
    for rendered in (
        sc.render_transcript(sc.StoredSession(HEADER, log)),
        sc.render_markdown(sc.StoredSession(HEADER, log)),
    ):
        assert "\x1b" not in rendered and "\r" not in rendered and "\x07" not in rendered
        assert "\\x1b[31mALERT\\x1b[0m" in rendered
        assert "line\\x0dover\ttab\\x07" in rendered
    info = SessionInfo("s", "/tmp/\x1b]0;title\x07", 0.0, 1_700_000_000.0, "t\x1bitle")
    listed = sc.render_list([info])
    assert "\x1b" not in listed and "\\x1b" in listed


def test_markdown_fences_survive_backticks_in_content() -> None:
    log = events(
        *turn(
            1,
            ("tool/call", {"turn": 1, "step": 1, "call_id": "c`1", "name": "sh", "arguments": "echo ```"}),
            (
                "tool/result",
                {
                    "turn": 1,
                    "step": 1,
                    "call_id": "c`1",
                    "content": text("```\nnot a fence end\n````"),
                    "is_error": False,
                },
            ),
            reason={"kind": "completed"},
        )
    )
    out = sc.render_markdown(sc.StoredSession(HEADER, log))
    assert "**Tool call** `sh` (``c`1``)\n\n````\necho ```\n````" in out
    assert "**Tool result** `sh` (``c`1``)\n\n`````\n```\nnot a fence end\n````\n`````" in out


def test_render_list_aligns_columns_in_the_given_order() -> None:
    infos = [
        SessionInfo("long-session-id", "/a", 0.0, 1_700_000_100.0, "First title"),
        SessionInfo("s2", None, 0.0, 1_700_000_000.0, None),
    ]
    lines = sc.render_list(infos).splitlines()
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(1_700_000_100.0))
    assert lines[0] == f"long-session-id  {stamp}  /a  First title"
    assert lines[1].startswith("s2               ")
    assert lines[1].endswith("-   (no title)")
    assert sc.render_list([]) == ""


def test_parse_session_cuts_a_torn_tail_and_rejects_a_corrupt_middle() -> None:
    header = b'{"type":"session","version":1,"id":"p","created_at":1.0}\n'
    event = b'{"type":"x","seq":0,"time":1.0,"data":{}}\n'
    assert sc.parse_session(header + event, "f").events == [SessionEvent("x", 0, 1.0, {})]
    torn = sc.parse_session(header + event + b'{"type":"x","se', "f")
    assert torn.torn_tail and len(torn.events) == 1
    unparseable_last = sc.parse_session(header + event + b"{oops\n", "f")
    assert unparseable_last.torn_tail and len(unparseable_last.events) == 1
    with pytest.raises(CorruptSessionError, match=r"^f:2: "):
        sc.parse_session(header + b"{oops\n" + event, "f")
    with pytest.raises(CorruptSessionError, match="not a dsh session header"):
        sc.parse_session(b'{"type":"other"}\n', "f")
    with pytest.raises(CorruptSessionError, match="version 2"):
        sc.parse_session(b'{"type":"session","version":2,"id":"p"}\n', "f")
    with pytest.raises(CorruptSessionError, match="version True"):
        sc.parse_session(b'{"type":"session","version":true,"id":"p"}\n', "f")
    with pytest.raises(CorruptSessionError, match=r"^f:1: .*wrong type"):  # the loader's rule: one parser for both
        sc.parse_session(b'{"type":"session","version":1,"id":"p","created_at":"x","cwd":5}\n', "f")
    with pytest.raises(CorruptSessionError, match="empty"):
        sc.parse_session(b"", "f")
    assert sc.complete_lines(header + b"partial") == header


def test_valid_id_rejects_what_check_session_id_rejects() -> None:
    assert sc.valid_id("ok-1.2_3") == "ok-1.2_3"
    for bad in [*HOSTILE_IDS, "a\x00b"]:
        with pytest.raises(sc.InvalidSessionIdError):
            sc.valid_id(bad)
