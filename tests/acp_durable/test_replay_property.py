"""Replay is the same pure projection as live streaming.

Property: for a random scripted conversation (prompts answered by steps of reasoning, text and calls to unknown
tools, ending in ``stop``, ``max-tokens`` or a model error), the ``session/update`` notifications a client received
live while prompting equal, one for one and in order, the ones ``session/load`` replays in a new daemon, once the
replay's ``user_message_chunk`` updates (which a live client does not get) and the live ``session_info_update`` (which
replay does not repeat) are set aside. The user chunks themselves must be the prompts, each before its turn's updates.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.acp_durable._tools import CANCEL_PLUGIN
from tests.support.durable import assert_contiguous, read_session, run_daemon, turn_starts, write_script

WORDS = st.sampled_from(["a", "bb", "ccc", "naïve", "日本", "x-y", "42", "{json}", "\\n", "tab\tbed", "end."])
TEXT = st.lists(WORDS, min_size=1, max_size=6).map(" ".join)
ARGUMENTS = st.one_of(
    st.dictionaries(
        st.sampled_from(["path", "query", "n", "flag"]), st.one_of(st.integers(-9, 99), TEXT, st.booleans()), max_size=3
    ),
    st.just("not json {"),
    st.just(""),
)
TOOL_CALL = st.fixed_dictionaries(
    {
        "name": st.sampled_from(["read_file", "bash", "grep_code", "mystery_tool", "edit_notes", "plan_it"]),
        "arguments": ARGUMENTS,
    }
)
TOOL_STEP = st.fixed_dictionaries(
    {"tool_calls": st.lists(TOOL_CALL, min_size=1, max_size=2)}, optional={"reasoning": TEXT, "text": TEXT}
)
FINAL_STEP = st.one_of(
    st.fixed_dictionaries({}, optional={"reasoning": TEXT, "text": TEXT}),
    st.fixed_dictionaries({"text": TEXT, "finish": st.just("max-tokens")}),
    st.fixed_dictionaries({"text": TEXT, "error": st.just({"message": "scripted failure", "code": "BOOM"})}),
)
TURN = st.tuples(TEXT, st.lists(TOOL_STEP, max_size=2), FINAL_STEP)
CONVERSATION = st.lists(TURN, min_size=1, max_size=3)


def expected_outcome(final: dict[str, Any]) -> str:
    if "error" in final:
        return "error"
    return "max_tokens" if final.get("finish") == "max-tokens" else "end_turn"


@settings(max_examples=10, deadline=None, database=None)
@given(conversation=CONVERSATION)
async def test_live_updates_equal_replayed_updates(
    conversation: list[tuple[str, list[dict[str, Any]], dict[str, Any]]],
) -> None:
    with tempfile.TemporaryDirectory(prefix="dsh-replay-") as temporary:
        workdir = Path(temporary)
        data = workdir / "data"  # one data directory per example, shared by both daemons
        project = workdir / "project"
        project.mkdir()
        steps = [step for _, tools, final in conversation for step in [*tools, final]]
        model = write_script(workdir / "script.json", steps)

        live: list[list[dict[str, Any]]] = []
        async with run_daemon(workdir, data, model=model, name="live") as daemon:
            session_id = await daemon.start(project)
            for text, _, final in conversation:
                mark = daemon.mark()
                try:
                    outcome = str((await daemon.prompt(session_id, text)).stop_reason)
                except RequestError as exc:
                    assert exc.code == -32603 and "scripted failure" in str(exc), exc
                    outcome = "error"
                assert outcome == expected_outcome(final)
                updates = daemon.updates_in(mark, session_id=session_id)
                live.append([u for u in updates if u["sessionUpdate"] != "session_info_update"])
            await daemon.client.settled()
            titles = [
                u for s, u in daemon.client.updates if s == session_id and u["sessionUpdate"] == "session_info_update"
            ]
            assert len(titles) == 1

        async with run_daemon(workdir, data, model=model, name="replay") as daemon:
            await daemon.initialize()
            mark = daemon.mark()
            await daemon.load(session_id, project)
            answered = daemon.response_index("session/load", mark)
            await daemon.client.settled()
            replay = daemon.updates_in(mark, session_id=session_id)
            assert daemon.updates_in(mark, answered, session_id) == replay
            assert [u for s, u in daemon.client.updates if s == session_id] == replay

        # The property: live and replayed updates agree, user chunks aside.
        flat_live = [u for turn in live for u in turn]
        assert [u for u in replay if u["sessionUpdate"] != "user_message_chunk"] == flat_live
        # And the user chunks are the prompts, each right before its turn's updates.
        expected: list[tuple[str, Any]] = []
        for (text, _, _), turn in zip(conversation, live, strict=True):
            expected.append(("user", text))
            expected.extend(("agent", u) for u in turn)
        shown = [
            ("user", u["content"]["text"]) if u["sessionUpdate"] == "user_message_chunk" else ("agent", u)
            for u in replay
        ]
        assert shown == expected

        _, events = read_session(data, session_id)
        assert_contiguous(events)
        assert turn_starts(events) == list(range(1, len(conversation) + 1))


def test_strategies_cover_every_step_kind() -> None:
    """The steps above do produce reasoning, text, tool calls, max-tokens and errors (a guard against a strategy
    edit that silently stops generating one of them)."""
    kinds = {"reasoning", "text", "tool_calls", "finish", "error"}
    seen: set[str] = set()
    for strategy in (TOOL_STEP, FINAL_STEP):
        seen |= {key for step in _samples(strategy) for key in step}
    assert kinds <= seen


def _samples(strategy: st.SearchStrategy[dict[str, Any]]) -> list[dict[str, Any]]:
    samples: list[dict[str, Any]] = []

    @settings(max_examples=60, database=None, deadline=None)
    @given(strategy)
    def collect(value: dict[str, Any]) -> None:
        samples.append(value)

    collect()
    return samples


@pytest.mark.parametrize("how", ["cancel", "close"])
async def test_a_tool_call_stopped_mid_run_replays_as_it_streamed(tmp_path: Path, how: str) -> None:
    """A turn stopped while a (well-behaved) tool runs: the updates the client got live, its tool call's final
    update included, are the ones a load replays."""
    data = tmp_path / "data"
    project = tmp_path / "project"
    project.mkdir()
    steps = [{"text": "calling a long tool", "tool_calls": [{"name": "until_cancelled", "arguments": {"x": 1}}]}]
    model = write_script(tmp_path / "script.json", [*steps, {"text": "unused"}])
    async with run_daemon(tmp_path, data, model=model, plugins=[CANCEL_PLUGIN], name="live") as daemon:
        session_id = await daemon.start(project)
        mark = daemon.mark()
        outcome: list[Any] = []

        async def prompt() -> None:
            outcome.append(await daemon.prompt(session_id, "run it"))

        async with anyio.create_task_group() as group:
            group.start_soon(prompt)
            await daemon.client.wait_until(  # issue #11: mid-run is once the card is in_progress
                lambda: any(u.get("status") == "in_progress" for u in daemon.updates_in(mark)), "the running tool call"
            )
            if how == "cancel":
                await daemon.conn.cancel(session_id=session_id)
            else:
                await daemon.close_session(session_id)
        assert [str(o.stop_reason) for o in outcome] == ["cancelled"]
        live = [
            u for u in daemon.updates_in(mark, session_id=session_id) if u["sessionUpdate"] != "session_info_update"
        ]
        updates = [u for u in live if u["sessionUpdate"] == "tool_call_update"]
        assert [u["status"] for u in updates] == ["in_progress", "failed"]  # issue #11: running, then stopped

    async with run_daemon(tmp_path, data, model=model, name="replay") as daemon:
        await daemon.initialize()
        mark = daemon.mark()
        await daemon.load(session_id, project)
        replay = [
            u for u in daemon.updates_in(mark, session_id=session_id) if u["sessionUpdate"] != "user_message_chunk"
        ]
    # a replay marks the cancelled turn (issue 43); live, the prompt's answer said it
    marks = [u for u in replay if u["sessionUpdate"] == "session_info_update" and "_meta" in u]
    if how == "cancel":
        assert marks == [{"sessionUpdate": "session_info_update", "_meta": {"dsh": {"turnEnd": "cancelled"}}}]
    assert [u for u in replay if u not in marks] == live
