"""Compaction with a small configured window, against the loopback provider (real HTTP): the trigger, the
summary request the plugin builds, what the next request carries, the persisted event, resume, the overflow
path (one compaction, one retry, a clear failure the second time), cancel, and ``agent.compact()``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from dsh.context import ContextConfig
from dsh.context._compaction import SUMMARY_PROMPT
from dsh.kernel import AbortedError, App, Context
from dsh.providers._settings import ProviderSettings
from dsh.services.agents import AgentHandle, AgentOptions
from dsh.services.sessions import Session, SessionEvent, SessionHeader
from tests.support.provider_server import FakeProvider, Reply
from tests.support.provider_wire import oa_text_reply

MODEL = "openai:test-model"
SUMMARISER = "openai:summariser"
WINDOW = 1000
SUMMARY = "SUMMARY: the user said first and second."


def settings(server: FakeProvider, window: int | None = WINDOW) -> dict[str, ProviderSettings]:
    values: dict[str, Any] = {"base_url": f"{server.url}/v1", "api_key": "k", "retries": 0}
    if window is not None:
        values["context_windows"] = {"test-model": window}
    return {"openai": ProviderSettings.model_validate(values)}


def context_config(**compaction: Any) -> ContextConfig:
    values = {"keep_recent_turns": 1, "model": SUMMARISER} | compaction
    # no sections: the requests carry only what these tests look at
    off = {name: False for name in ("identity", "tools", "mode", "environment", "instructions")}
    return ContextConfig.model_validate({"sections": off, "compaction": values})


@asynccontextmanager
async def core(
    server: FakeProvider, tmp_path: Path, *, window: int | None = WINDOW, **compaction: Any
) -> AsyncIterator[Context]:
    from dsh.app import load_core

    async with App() as app:
        load_core(
            app.ctx,
            providers=settings(server, window),
            data_dir=tmp_path / "data",
            builtin_tools=False,
            context=context_config(**compaction),
        )
        yield app.ctx


async def new_agent(ctx: Context, tmp_path: Path, session_id: str = "s1") -> AgentHandle:
    handle: AgentHandle = await ctx.agents.create(
        agent_id=session_id, session_id=session_id, meta={"cwd": str(tmp_path)}, agent_options=AgentOptions(model=MODEL)
    )
    return handle


async def turn(handle: AgentHandle, text: str) -> None:
    handle.agent.send([{"type": "text", "text": text}])
    with anyio.fail_after(15):
        await handle.agent.when_idle()


def texts(body: dict[str, Any]) -> list[tuple[str, Any]]:
    """The messages as (role, content), a session note (the date and the mode, ``dsh.context._notes``) as NOTE."""
    return [
        ("user", "NOTE")
        if m["role"] == "user"
        and isinstance(m["content"], str)
        and m["content"].startswith('<context source="session">')
        else (m["role"], m["content"])
        for m in body["messages"]
    ]


def reasons(session: Session) -> list[Any]:
    return [e.data["reason"] for e in session.events if e.type == "turn/end"]


def stored(tmp_path: Path, session_id: str) -> list[dict[str, Any]]:
    path = next((tmp_path / "data").rglob(f"{session_id}*.jsonl"))
    return [json.loads(line) for line in path.read_text().splitlines()[1:]]


def two_turns_near_the_window() -> list[Reply]:
    return [
        Reply(events=oa_text_reply("one", prompt=100, completion=10)),
        Reply(events=oa_text_reply("two", prompt=790, completion=20)),  # 810 > 0.8 x 1000
    ]


def summary_of(text: str) -> str:
    return (
        "The earlier part of this conversation was compacted to save context; this summary replaces it:\n\n"
        f"<summary>\n{text}\n</summary>"
    )


async def test_threshold_compaction_then_resume(server: FakeProvider, tmp_path: Path) -> None:
    server.script(
        *two_turns_near_the_window(),
        Reply(events=oa_text_reply(SUMMARY)),
        Reply(events=oa_text_reply("three", prompt=120, completion=5)),
        Reply(events=oa_text_reply("four", prompt=150, completion=5)),
    )
    async with core(server, tmp_path) as ctx:
        handle = await new_agent(ctx, tmp_path)
        await turn(handle, "first")
        await turn(handle, "second")
        assert len(server.requests) == 2  # below the threshold until the second report
        await turn(handle, "third")
        session = handle.agent.session
        assert reasons(session) == [{"kind": "completed"}] * 3
        await handle.dispose()
        bodies = server.bodies()
        # the summary request is what the plugin built: the dedicated prompt, the older turns as a transcript
        summary_request = bodies[2]
        assert summary_request["model"] == "summariser"
        assert summary_request["messages"][0] == {"role": "system", "content": SUMMARY_PROMPT}
        transcript = summary_request["messages"][1]["content"]
        assert "[user] first\n[assistant] one\n[user] second\n[assistant] two" in transcript
        assert "third" not in transcript
        # the next request carries the summary, then the recent turn verbatim
        # (the note of the date and mode, summarised away, is told again after the compaction)
        assert texts(bodies[3]) == [("user", summary_of(SUMMARY)), ("user", "third"), ("user", "NOTE")]
        # the event is persisted
        events = stored(tmp_path, "s1")
        compactions = [e["data"] for e in events if e["type"] == "context/compaction"]
        third_start = [e["seq"] for e in events if e["type"] == "turn/start"][2]
        assert compactions == [
            {
                "summary": SUMMARY,
                "upto": third_start,
                "trigger": "threshold",
                "model": SUMMARISER,
                "tokens_after": compactions[0]["tokens_after"],
                # the report + the estimate of the new user message (2 + 4), calibrated: the provider counted 790
                # for a request estimated at 14, so the ratio is clamped at its maximum, 4
                "tokens_before": 810 + 4 * (2 + 4),
                "window": WINDOW,
            }
        ]
        # the summary and the kept turn, estimated and calibrated by the same ratio (4)
        from dsh.services.llm import estimate_request
        from dsh.services.sessions import summary_message

        third: Any = {"role": "user", "content": [{"type": "text", "text": "third"}]}
        assert compactions[0]["tokens_after"] == 4 * estimate_request([summary_message(SUMMARY), third]) < 200
        # a resumed agent continues from the compacted history
        resumed = await ctx.agents.resume(
            agent_id="s1b", resume_session_id="s1", agent_options=AgentOptions(model=MODEL)
        )
        await turn(resumed, "fourth")
        assert texts(server.bodies()[4]) == [
            ("user", summary_of(SUMMARY)),
            ("user", "third"),
            ("user", "NOTE"),
            ("assistant", "three"),
            ("user", "fourth"),  # the resumed session is not told the same facts again
        ]
        await resumed.dispose()


async def test_agent_compact_on_demand_with_instructions(server: FakeProvider, tmp_path: Path) -> None:
    server.script(
        Reply(events=oa_text_reply("one")),
        Reply(events=oa_text_reply("two")),
        Reply(events=oa_text_reply(SUMMARY)),
        Reply(events=oa_text_reply("three")),
    )
    async with core(server, tmp_path, window=None) as ctx:  # no window: only on demand
        handle = await new_agent(ctx, tmp_path)
        await turn(handle, "first")
        await turn(handle, "second")
        with anyio.fail_after(10):
            data = await handle.agent.compact("keep the file names")
        assert data is not None and data["trigger"] == "manual" and data["summary"] == SUMMARY
        assert data["instructions"] == "keep the file names"
        transcript = server.bodies()[2]["messages"][1]["content"]
        assert transcript.endswith("The user asks you to focus on: keep the file names")
        assert "[user] first" in transcript and "[user] second" not in transcript  # keep_recent_turns = 1
        await turn(handle, "third")
        assert texts(server.bodies()[3]) == [
            ("user", summary_of(SUMMARY)),
            ("user", "second"),
            ("assistant", "two"),
            ("user", "third"),
            ("user", "NOTE"),  # the date and mode, told again after the compaction
        ]
        kinds = [(e.type, e.data.get("trigger")) for e in handle.agent.session.events if e.type == "turn/start"]
        assert kinds[2] == ("turn/start", {"kind": "compaction"})
        await handle.dispose()


OVERFLOW = Reply(
    status=400,
    body={
        "error": {
            "message": "This model's maximum context length is 1000 tokens. However, your messages resulted in 5000.",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
    },
)


async def test_overflow_compacts_and_retries_the_step_once(server: FakeProvider, tmp_path: Path) -> None:
    server.script(
        Reply(events=oa_text_reply("one")),
        OVERFLOW,
        Reply(events=oa_text_reply(SUMMARY)),
        Reply(events=oa_text_reply("two")),
    )
    async with core(server, tmp_path, window=None) as ctx:  # the window is unknown: only the overflow path
        handle = await new_agent(ctx, tmp_path)
        await turn(handle, "first")
        await turn(handle, "second")
        session = handle.agent.session
        assert reasons(session) == [{"kind": "completed"}, {"kind": "completed"}]
        bodies = server.bodies()
        assert len(bodies) == 4
        assert texts(bodies[1]) == [("user", "first"), ("user", "NOTE"), ("assistant", "one"), ("user", "second")]
        assert bodies[2]["model"] == "summariser"
        assert texts(bodies[3]) == [("user", summary_of(SUMMARY)), ("user", "second")]
        [compaction] = [e.data for e in session.events if e.type == "context/compaction"]
        assert compaction["trigger"] == "overflow"
        assert [e.type for e in session.events if e.type in ("step/start", "error")] == ["step/start", "step/start"]
        await handle.dispose()


async def test_a_second_overflow_fails_the_turn_clearly(server: FakeProvider, tmp_path: Path) -> None:
    server.script(Reply(events=oa_text_reply("one")), OVERFLOW, Reply(events=oa_text_reply(SUMMARY)), OVERFLOW)
    async with core(server, tmp_path, window=None) as ctx:
        handle = await new_agent(ctx, tmp_path)
        await turn(handle, "first")
        await turn(handle, "second")
        [_, failed] = reasons(handle.agent.session)
        assert failed["kind"] == "error" and failed["code"] == "CONTEXT_WINDOW_EXCEEDED"
        assert "still does not fit the context window of openai:test-model after compacting it" in failed["message"]
        assert len(server.requests) == 4  # one compaction, one retry, no more
        await handle.dispose()


async def test_overflow_with_a_failing_summariser_fails_clearly(server: FakeProvider, tmp_path: Path) -> None:
    server.script(Reply(events=oa_text_reply("one")), OVERFLOW, Reply(status=500, body={"error": {"message": "down"}}))
    async with core(server, tmp_path, window=None) as ctx:
        handle = await new_agent(ctx, tmp_path)
        await turn(handle, "first")
        before = handle.agent.session.derive_messages()
        await turn(handle, "second")
        session = handle.agent.session
        [_, failed] = reasons(session)
        assert failed["kind"] == "error"
        assert "does not fit the context window of openai:test-model" in failed["message"]
        assert "compacting it failed" in failed["message"]
        assert not [e for e in session.events if e.type == "context/compaction"]
        assert session.derive_messages()[: len(before)] == before
        await handle.dispose()


async def test_cancel_during_compaction_leaves_history_unchanged(server: FakeProvider, tmp_path: Path) -> None:
    server.script(*two_turns_near_the_window(), Reply(events=[], hang=True))
    async with core(server, tmp_path) as ctx:
        handle = await new_agent(ctx, tmp_path)
        await turn(handle, "first")
        await turn(handle, "second")
        before = handle.agent.session.derive_messages()
        handle.agent.send([{"type": "text", "text": "third"}])
        await server.wait_requests(3)  # the summary request is in flight
        assert server.bodies()[2]["model"] == "summariser"
        handle.agent.cancel()
        with anyio.fail_after(10):
            await handle.agent.when_idle()
        session = handle.agent.session
        assert reasons(session)[-1]["kind"] == "aborted"
        assert not [e for e in session.events if e.type == "context/compaction"]
        assert session.derive_messages() == [*before, {"role": "user", "content": [{"type": "text", "text": "third"}]}]
        await handle.dispose()


async def test_cancel_of_agent_compact_leaves_history_unchanged(server: FakeProvider, tmp_path: Path) -> None:
    server.script(Reply(events=oa_text_reply("one")), Reply(events=oa_text_reply("two")), Reply(events=[], hang=True))
    async with core(server, tmp_path, window=None) as ctx:
        handle = await new_agent(ctx, tmp_path)
        await turn(handle, "first")
        await turn(handle, "second")
        before = handle.agent.session.derive_messages()

        async def cancel_when_asked() -> None:
            await server.wait_requests(3)
            handle.agent.cancel()

        with anyio.fail_after(10):
            async with anyio.create_task_group() as group:
                group.start_soon(cancel_when_asked)
                with pytest.raises(AbortedError):
                    await handle.agent.compact()
        assert handle.agent.session.derive_messages() == before
        assert reasons(handle.agent.session)[-1]["kind"] == "aborted"
        await handle.dispose()


def test_derive_messages_puts_the_summary_in_place_of_the_range() -> None:
    session = Session(SessionHeader("x", 0.0))
    for n in range(3):
        session.append("turn/start", {"turn": n + 1})
        session.append("user/message", {"content": [{"type": "text", "text": f"u{n}"}]})
        session.append("assistant/message", {"content": [{"type": "text", "text": f"a{n}"}]})
        session.append("turn/end", {"turn": n + 1, "reason": {"kind": "completed"}})
    full = session.derive_messages()
    assert len(full) == 6
    session.append("context/compaction", {"summary": "S", "upto": 8})
    view = session.derive_messages()
    assert view == [
        {"role": "user", "content": [{"type": "text", "text": summary_of("S")}]},
        {"role": "user", "content": [{"type": "text", "text": "u2"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "a2"}]},
    ]
    # a fresh session seeded from the same log (a load) derives the same view, and the log lost nothing
    loaded = Session(SessionHeader("x", 0.0), [SessionEvent(e.type, e.seq, e.time, e.data) for e in session.events])
    assert loaded.derive_messages() == view
    assert len(session.events) == 13
