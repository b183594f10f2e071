"""Issue #29 item 2: tool-call ids are unique within a session, live and in replay; the provider gets its own.

An OpenAI-compatible server that numbers its calls per response (``call_0`` every time, as vLLM and Ollama do)
answers three prompts, two in one daemon and one after a restart: every ``tool_call`` update has its own
``toolCallId``, the replay of ``session/load`` shows the same ids, and each follow-up request the server receives
carries the server's own ``call_0`` back, in the assistant's ``tool_calls`` and in the tool message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio

from tests.support.durable import WAIT, read_session, run_daemon
from tests.support.provider_server import FakeProvider, Reply
from tests.support.provider_wire import DONE, oa_finish, oa_text_reply, oa_tool_delta

PROVIDER_ID = "call_0"


def script_turn(server: FakeProvider, path: str) -> None:
    """One prompt's worth: a ``list_files`` call with the server's fixed id, then a text answer."""
    args = '{"path": "' + path + '"}'
    server.script(
        Reply(events=[oa_tool_delta(0, args, call_id=PROVIDER_ID, name="list_files"), oa_finish("tool_calls"), DONE]),
        Reply(events=oa_text_reply("listed")),
    )


def tool_calls(updates: list[dict[str, Any]]) -> list[str]:
    return [u["toolCallId"] for u in updates if u.get("sessionUpdate") == "tool_call"]


def tool_call_ids(updates: list[dict[str, Any]]) -> list[str]:
    """Every toolCallId mentioned, in order (cards and their updates)."""
    return [u["toolCallId"] for u in updates if "toolCallId" in u]


def check_follow_up(request: Any) -> None:
    """The server's own id comes back to it: the assistant's call and the tool's answer both say call_0."""
    messages = request.body["messages"]
    calls = [c["id"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    answered = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert calls and set(calls) == {PROVIDER_ID}, messages
    assert answered == calls, messages


async def test_a_provider_reusing_call_0_gives_distinct_ids_live_in_replay_and_after_a_restart(
    tmp_path: Path, server: FakeProvider
) -> None:
    data = tmp_path / "data"
    env = {"OPENAI_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": "sk-local"}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    async with run_daemon(tmp_path, data, model="openai:test-model", env=env, name="first") as first:
        session_id = await first.start()
        start = first.mark()
        for path in ("a", "b"):
            script_turn(server, path)
            assert (await first.prompt(session_id, f"list {path}")).stop_reason == "end_turn"
        live = first.updates_in(start, session_id=session_id)
    live_ids = tool_calls(live)
    assert len(live_ids) == 2 and len(set(live_ids)) == 2, live_ids
    assert live_ids[0] == PROVIDER_ID  # an id the session has not used is kept as the provider gave it
    assert set(tool_call_ids(live)) == set(live_ids)  # every update of a card names its own card
    follow_ups = [r for r in server.requests if any(m["role"] == "tool" for m in r.body["messages"])]
    assert len(follow_ups) == 3  # after the first call, before the second prompt's call, after it
    for request in follow_ups:
        check_follow_up(request)

    _, events = read_session(data, session_id)
    calls = [e["data"] for e in events if e["type"] == "tool/call"]
    results = [e["data"] for e in events if e["type"] == "tool/result"]
    assert [c["call_id"] for c in calls] == live_ids == [r["call_id"] for r in results]
    blocks = [
        b for e in events if e["type"] == "assistant/message" for b in e["data"]["content"] if b["type"] == "tool-call"
    ]
    assert [b["id"] for b in blocks] == live_ids  # the log keeps both: the session's id, and the provider's
    assert [b.get("provider_id", b["id"]) for b in blocks] == [PROVIDER_ID, PROVIDER_ID]

    async with run_daemon(tmp_path, data, model="openai:test-model", env=env, name="second") as second:
        await second.initialize()
        start = second.mark()
        await second.load(session_id)
        with anyio.fail_after(WAIT):
            await second.client.settled()
        replayed = second.updates_in(start, session_id=session_id)
        assert tool_calls(replayed) == live_ids  # the replay shows the ids the live stream showed
        script_turn(server, "a")
        start = second.mark()
        assert (await second.prompt(session_id, "list a again")).stop_reason == "end_turn"
        after_restart = tool_calls(second.updates_in(start, session_id=session_id))
    assert len(after_restart) == 1 and after_restart[0] not in live_ids, (after_restart, live_ids)
    check_follow_up(server.requests[-1])
    assert len([m for m in server.requests[-1].body["messages"] if m["role"] == "tool"]) == 3
