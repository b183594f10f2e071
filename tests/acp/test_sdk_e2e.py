"""End to end: the official ACP Python SDK client plays the editor against the real ``dsh acp`` daemon.

Each scenario spawns its own daemon (``run_dsh``), which also checks, when the scenario is done, that the daemon
exits 0 within 2 s of stdin EOF, that every frame it wrote is a line of compact JSON valid against the SDK's
schema models, and that every request got exactly one answer. Synchronisation is on the client's
``session/update`` callbacks and on what the client sent, never on sleeps.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError
from acp.schema import (
    AgentMessageChunk,
    AvailableCommandsUpdate,
    ConfigOptionUpdate,
    CurrentModeUpdate,
    PromptResponse,
    SessionInfoUpdate,
    TextContentBlock,
    ToolCallProgress,
    ToolCallStart,
    UsageUpdate,
)

from tests.support.sdk import DshProcess, check_frames, run_dsh, write_script

DEADLINE = 10
WATCHDOG_WARNING = "cancelled turn did not end in time"


class Prompt:
    """A prompt running in the background; ``answer`` is its response (or the error it raised)."""

    def __init__(self, daemon: DshProcess, session_id: str, text: str) -> None:
        self.daemon = daemon
        self.session_id = session_id
        self.text = text
        self.answer: PromptResponse | RequestError | None = None
        self.done = anyio.Event()

    async def run(self) -> None:
        try:
            self.answer = await self.daemon.prompt(self.session_id, self.text)
        except RequestError as exc:
            self.answer = exc
        finally:
            self.done.set()

    async def result(self) -> PromptResponse:
        await self.done.wait()
        assert isinstance(self.answer, PromptResponse), self.answer
        return self.answer


def stop_reason(response: PromptResponse) -> str:
    return str(response.stop_reason)


def chunks(updates: list[tuple[int, dict[str, Any]]]) -> list[tuple[int, dict[str, Any]]]:
    """The raw ``agent_message_chunk`` updates among (position, update) pairs."""
    return [(i, u) for i, u in updates if u["sessionUpdate"] == "agent_message_chunk"]


def chunk_texts(updates: list[tuple[int, dict[str, Any]]]) -> list[str]:
    return [u["content"]["text"] for _, u in chunks(updates)]


METADATA = (SessionInfoUpdate, UsageUpdate, AvailableCommandsUpdate, CurrentModeUpdate, ConfigOptionUpdate)


def stream(updates: list[Any]) -> list[Any]:
    """The turn's visible stream: updates other than session metadata (titles, usage, commands, modes)."""
    return [u for u in updates if not isinstance(u, METADATA)]


# -- the echo model --------------------------------------------------------------------------------------------


async def test_initialize_authenticate_and_echo_prompt(tmp_path: Path) -> None:
    text = "Hello from the editor:  two spaces,\ta tab,\nand a second line. "
    with anyio.fail_after(DEADLINE):
        async with run_dsh(tmp_path) as dsh:
            init = await dsh.initialize()
            assert init.protocol_version == 1
            assert init.agent_info is not None
            assert init.agent_info.name == "dsh"
            assert init.auth_methods, "the ACP registry requires at least one auth method"
            method_id = init.auth_methods[0].id
            await dsh.conn.authenticate(method_id=method_id)

            session_id = await dsh.new_session()
            response = await dsh.prompt(session_id, text)

            assert stop_reason(response) == "end_turn"
            streamed = dsh.client.chunk_texts(session_id)
            assert len(streamed) > 1, "the answer is streamed, one chunk per word"
            assert "".join(streamed) == text
            visible = stream(dsh.client.of(session_id))
            assert all(isinstance(u, AgentMessageChunk) for u in visible), visible
            # Raw frames: every update precedes the answer and the chunks of the one message share a messageId.
            updates = dsh.update_frames(session_id)
            assert chunk_texts(updates) == streamed
            assert len({u["messageId"] for _, u in chunks(updates)}) == 1
            answer_at = dsh.response_index(dsh.prompt_request_id(text))
            assert all(position < answer_at for position, _ in updates)


# -- scripted scenarios ----------------------------------------------------------------------------------------


async def test_tool_call_card_for_an_unknown_tool(tmp_path: Path) -> None:
    model = write_script(
        tmp_path / "script.json",
        [
            {
                "text": "Let me look.",
                "tool_calls": [{"name": "list_nothing", "arguments": {"path": "."}, "id": "call_model_1"}],
            },
            {"text": "That tool does not exist."},
        ],
    )
    with anyio.fail_after(DEADLINE):
        async with run_dsh(tmp_path, model) as dsh:
            session_id = await dsh.start()
            response = await dsh.prompt(session_id, "list the files")

            assert stop_reason(response) == "end_turn"
            updates = stream(dsh.client.of(session_id))
            kinds = [type(u).__name__ for u in updates]
            start = next(i for i, u in enumerate(updates) if isinstance(u, ToolCallStart))
            finish = next(  # issue #11: after in_progress (the gate let it run), the final status
                i for i, u in enumerate(updates) if isinstance(u, ToolCallProgress) and u.status != "in_progress"
            )
            card, result = updates[start], updates[finish]
            assert start < finish, kinds
            assert card.tool_call_id == "call_model_1"
            assert card.status == "pending"  # issue #11: in_progress only once it runs
            assert card.title == "list_nothing"
            assert card.raw_input == {"path": "."}
            assert result.tool_call_id == "call_model_1"
            assert result.status == "failed"
            assert result.content, "a failed tool call says why"
            before = [u.content.text for u in updates[:start] if isinstance(u, AgentMessageChunk)]
            after = [u.content.text for u in updates[finish + 1 :] if isinstance(u, AgentMessageChunk)]
            assert "".join(before) == "Let me look."
            assert "".join(after) == "That tool does not exist."
            assert len(updates) == len(before) + 3 + len(after), kinds  # issue #11: pending, in_progress, failed


async def test_max_tokens_answers_max_tokens(tmp_path: Path) -> None:
    model = write_script(tmp_path / "script.json", [{"finish": "max-tokens", "text": "This answer was cut"}])
    with anyio.fail_after(DEADLINE):
        async with run_dsh(tmp_path, model) as dsh:
            session_id = await dsh.start()
            response = await dsh.prompt(session_id, "write a long essay")

            assert stop_reason(response) == "max_tokens"
            assert dsh.client.text(session_id) == "This answer was cut"


async def test_error_turn_fails_the_prompt_with_internal_error(tmp_path: Path) -> None:
    model = write_script(
        tmp_path / "script.json",
        [{"error": {"message": "rate limited", "code": "RATE_LIMIT"}}, {"text": "Recovered."}],
    )
    with anyio.fail_after(DEADLINE):
        async with run_dsh(tmp_path, model) as dsh:
            session_id = await dsh.start()
            with pytest.raises(RequestError) as caught:
                await dsh.prompt(session_id, "hello")
            assert caught.value.code == -32603
            assert str(caught.value).startswith("turn failed:"), str(caught.value)
            assert "rate limited" in str(caught.value)
            # The session survives a failed turn.
            response = await dsh.prompt(session_id, "again")
            assert stop_reason(response) == "end_turn"
            assert dsh.client.text(session_id) == "Recovered."


async def test_cancel_mid_stream_answers_cancelled_and_the_session_goes_on(tmp_path: Path) -> None:
    long_text = "one two three four five six seven"
    model = write_script(tmp_path / "script.json", [{"text": long_text, "delay": 5}, {"text": "Still here."}])
    with anyio.fail_after(DEADLINE):
        async with run_dsh(tmp_path, model, agent_events=True) as dsh, anyio.create_task_group() as group:
            session_id = await dsh.start()
            first = Prompt(dsh, session_id, "talk slowly")
            mark = dsh.client.agent_events.mark()
            group.start_soon(first.run)
            await dsh.client.wait_for_chunks(session_id)
            await dsh.conn.cancel(session_id=session_id)

            assert stop_reason(await first.result()) == "cancelled"
            # The agent says it is idle: every update of the aborted turn has arrived (no inference from timing).
            await dsh.client.agent_events.wait_idle(session_id, mark)
            streamed = dsh.client.text(session_id)
            assert streamed and long_text.startswith(streamed) and streamed != long_text
            assert WATCHDOG_WARNING not in dsh.stderr(), "the aborted turn ended by itself, not by the watchdog"

            response = await dsh.prompt(session_id, "are you there?")
            assert stop_reason(response) == "end_turn"
            assert dsh.client.text(session_id) == streamed + "Still here."
            # On the wire: the aborted turn's updates all went out before its answer, the next turn's after it.
            cancelled_at = dsh.response_index(dsh.prompt_request_id("talk slowly"))
            updates = dsh.update_frames(session_id)
            assert "".join(chunk_texts([(i, u) for i, u in updates if i < cancelled_at])) == streamed
            assert "".join(chunk_texts([(i, u) for i, u in updates if i > cancelled_at])) == "Still here."


async def test_cancel_answers_the_running_and_the_queued_prompt(tmp_path: Path) -> None:
    model = write_script(
        tmp_path / "script.json", [{"text": "alpha beta gamma delta", "delay": 5}, {"text": "Fresh start."}]
    )
    with anyio.fail_after(DEADLINE):
        async with run_dsh(tmp_path, model, agent_events=True) as dsh, anyio.create_task_group() as group:
            session_id = await dsh.start()
            running = Prompt(dsh, session_id, "A: talk slowly")
            queued = Prompt(dsh, session_id, "B: then this")
            mark = dsh.client.agent_events.mark()
            group.start_soon(running.run)
            await dsh.client.wait_for_chunks(session_id)
            group.start_soon(queued.run)
            # The agent says B is queued (``_dsh/agent/queued``): no round-trip barrier, no timing.
            # The back-to-back case, without this barrier, is the next test.
            await dsh.client.agent_events.wait_for(
                session_id, "queued", mark, content=[{"type": "text", "text": queued.text}]
            )
            await dsh.conn.cancel(session_id=session_id)

            assert stop_reason(await running.result()) == "cancelled"
            assert stop_reason(await queued.result()) == "cancelled"
            await dsh.client.agent_events.wait_idle(session_id, mark)
            before = dsh.client.text(session_id)
            # B never ran: the script's second step is still there for the next prompt.
            response = await dsh.prompt(session_id, "C: a new prompt")
            assert stop_reason(response) == "end_turn"
            assert dsh.client.text(session_id) == before + "Fresh start."


async def test_cancel_right_behind_a_queued_prompt_cancels_it(tmp_path: Path) -> None:
    # An editor sends prompt B and then the cancel; both frames reach the daemon in one read (corked stdin).
    model = write_script(
        tmp_path / "script.json", [{"text": "alpha beta gamma delta", "delay": 5}, {"text": "Fresh start."}]
    )
    with anyio.fail_after(DEADLINE):
        async with run_dsh(tmp_path, model, agent_events=True) as dsh, anyio.create_task_group() as group:
            session_id = await dsh.start()
            running = Prompt(dsh, session_id, "A: talk slowly")
            queued = Prompt(dsh, session_id, "B: then this")
            mark = dsh.client.agent_events.mark()
            group.start_soon(running.run)
            await dsh.client.wait_for_chunks(session_id)
            dsh.stdin.cork()
            group.start_soon(queued.run)
            await dsh.wait_sent_prompt(queued.text)
            await dsh.conn.cancel(session_id=session_id)
            dsh.stdin.uncork()

            assert stop_reason(await running.result()) == "cancelled"
            assert stop_reason(await queued.result()) == "cancelled"
            await dsh.client.agent_events.wait_idle(session_id, mark)
            before = dsh.client.text(session_id)
            response = await dsh.prompt(session_id, "C: a new prompt")
            assert stop_reason(response) == "end_turn"
            assert dsh.client.text(session_id) == before + "Fresh start."


async def test_second_prompt_is_queued_behind_the_running_one(tmp_path: Path) -> None:
    first_text = "the first answer arrives word by word"
    second_text = "and the second one after it"
    model = write_script(tmp_path / "script.json", [{"text": first_text, "delay": 0.05}, {"text": second_text}])
    with anyio.fail_after(DEADLINE):
        async with run_dsh(tmp_path, model) as dsh, anyio.create_task_group() as group:
            session_id = await dsh.start()
            first = Prompt(dsh, session_id, "A")
            second = Prompt(dsh, session_id, "B")
            group.start_soon(first.run)
            await dsh.client.wait_for_chunks(session_id)
            group.start_soon(second.run)
            await dsh.wait_sent_prompt("B")
            assert not first.done.is_set(), "B must be sent while A is still running"

            assert stop_reason(await first.result()) == "end_turn"
            assert stop_reason(await second.result()) == "end_turn"

            first_at = dsh.response_index(dsh.prompt_request_id("A"))
            second_at = dsh.response_index(dsh.prompt_request_id("B"))
            assert first_at < second_at
            updates = dsh.update_frames(session_id)
            assert all(i < second_at for i, _ in updates), "every update precedes the last answer"
            assert "".join(chunk_texts([(i, u) for i, u in updates if i < first_at])) == first_text
            assert "".join(chunk_texts([(i, u) for i, u in updates if first_at < i])) == second_text
            assert dsh.client.text(session_id) == first_text + second_text


async def test_two_sessions_stream_at_once_without_mixing(tmp_path: Path) -> None:
    texts = ["alpha session words flowing slowly here", "beta session has other words to say"]
    model = write_script(tmp_path / "script.json", [{"text": text, "delay": 0.03} for text in texts])
    with anyio.fail_after(DEADLINE):
        async with run_dsh(tmp_path, model) as dsh, anyio.create_task_group() as group:
            await dsh.initialize()
            sessions = [await dsh.new_session(), await dsh.new_session()]
            assert sessions[0] != sessions[1]
            prompts = [Prompt(dsh, sid, f"prompt for session {n}") for n, sid in enumerate(sessions)]
            # The script is shared: session 0 must take the first step before session 1 asks for the second.
            group.start_soon(prompts[0].run)
            await dsh.client.wait_for_chunks(sessions[0])
            group.start_soon(prompts[1].run)

            for prompt in prompts:
                assert stop_reason(await prompt.result()) == "end_turn"
            for sid, text, prompt in zip(sessions, texts, prompts, strict=True):
                assert dsh.client.text(sid) == text
                updates = dsh.update_frames(sid)
                assert "".join(chunk_texts(updates)) == text
                assert len({u["messageId"] for _, u in chunks(updates)}) == 1
                answer_at = dsh.response_index(dsh.prompt_request_id(prompt.text))
                assert all(i < answer_at for i, _ in updates)
            assert {sid for sid, _ in dsh.client.updates} == set(sessions)
            # They really streamed at once: session 1 started before session 0 finished.
            assert chunks(dsh.update_frames(sessions[1]))[0][0] < chunks(dsh.update_frames(sessions[0]))[-1][0]


TOOLS_PLUGIN = '''
"""Tools for the end-to-end tests: one that answers, one that runs until the turn is cancelled."""

from pydantic import BaseModel

from dsh.kernel import plugin
from dsh.services.tools import define_tool


class GreetArgs(BaseModel):
    name: str


class NoArgs(BaseModel):
    pass


async def greet(args, execution):
    return f"hello, {args.name}"


async def wait_for_cancel(args, execution):
    await execution.signal.wait()
    raise RuntimeError("stopped: the turn was cancelled")


@plugin("e2e_tools", inject=("tools",))
def e2e_tools(ctx, config):
    ctx.tools.register(define_tool("greet", "Greet someone.", GreetArgs, greet))
    ctx.tools.register(define_tool("wait_for_cancel", "Run until cancelled.", NoArgs, wait_for_cancel))
'''


async def test_tool_cards_complete_and_fail_when_cancelled(tmp_path: Path) -> None:
    plugin_dir = tmp_path / "plugins"
    plugin_dir.mkdir()
    (plugin_dir / "dsh_e2e_tools.py").write_text(TOOLS_PLUGIN, encoding="utf-8")
    model = write_script(
        tmp_path / "script.json",
        [
            {"tool_calls": [{"name": "greet", "arguments": {"name": "editor"}, "id": "call_greet"}]},
            {"text": "Greeted."},
            {"text": "Working.", "tool_calls": [{"name": "wait_for_cancel", "id": "call_wait"}]},
            {"text": "Back again."},
        ],
    )
    with anyio.fail_after(DEADLINE):
        async with (
            run_dsh(tmp_path, model, plugins=["dsh_e2e_tools:e2e_tools"], python_path=[plugin_dir]) as dsh,
            anyio.create_task_group() as group,
        ):
            session_id = await dsh.start()
            response = await dsh.prompt(session_id, "greet me")
            assert stop_reason(response) == "end_turn"
            cards = [u for u in dsh.client.of(session_id) if isinstance(u, ToolCallStart | ToolCallProgress)]
            assert [(type(c).__name__, c.tool_call_id, c.status) for c in cards] == [
                ("ToolCallStart", "call_greet", "pending"),  # issue #11: pending until it runs
                ("ToolCallProgress", "call_greet", "in_progress"),
                ("ToolCallProgress", "call_greet", "completed"),
            ]
            assert cards[0].raw_input == {"name": "editor"}
            result = cards[2].content
            assert result is not None and len(result) == 1
            assert isinstance(result[0].content, TextContentBlock)
            assert result[0].content.text == "hello, editor"
            assert dsh.client.text(session_id) == "Greeted."

            seen = len(dsh.client.updates)
            waiting = Prompt(dsh, session_id, "wait for it")
            group.start_soon(waiting.run)
            await dsh.client.wait_until(
                lambda: any(
                    isinstance(u, ToolCallProgress) and u.status == "in_progress" for _, u in dsh.client.updates[seen:]
                )
            )
            await dsh.conn.cancel(session_id=session_id)
            assert stop_reason(await waiting.result()) == "cancelled"
            cards = [u for _, u in dsh.client.updates[seen:] if isinstance(u, ToolCallStart | ToolCallProgress)]
            assert [(type(c).__name__, c.tool_call_id, c.status) for c in cards] == [
                ("ToolCallStart", "call_wait", "pending"),
                ("ToolCallProgress", "call_wait", "in_progress"),
                ("ToolCallProgress", "call_wait", "failed"),
            ]
            answer_at = dsh.response_index(dsh.prompt_request_id("wait for it"))
            assert all(i < answer_at for i, _ in dsh.update_frames(session_id)), "updates precede the answer"

            response = await dsh.prompt(session_id, "hello again")
            assert stop_reason(response) == "end_turn"
            assert dsh.client.text(session_id) == "Greeted.Working.Back again."


# -- the frame checker itself ----------------------------------------------------------------------------------


def test_the_frame_checker_catches_bad_frames() -> None:
    """The teardown check must be able to fail: each bad frame below is reported."""
    good_update = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {
            "sessionId": "s",
            "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}},
        },
    }
    lines = [
        json.dumps(good_update, separators=(",", ":")),
        json.dumps(good_update),  # not compact
        '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"nope"}}}',
        '{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"one"}}',  # initialize result of the wrong type
        '{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn","extra":1}}',  # unknown field
        '{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}',  # a second answer
        '{"jsonrpc":"2.0","id":2,"error":{"code":"-32603","message":"x"}}',  # string code
        '{"jsonrpc":"2.0","id":99,"result":{}}',  # answers nothing we sent
    ]
    raw = "\n".join(lines).encode() + b"\n"
    requests = {0: "initialize", 1: "session/prompt", 2: "session/prompt", 3: "session/new"}
    problems = check_frames(raw, requests)
    assert check_frames(lines[0].encode() + b"\n", {}) == []
    expected = [
        "frame 1: not compact JSON",
        "frame 2: not a valid SessionNotification",
        "frame 3 (initialize result): not a valid InitializeResponse",
        "frame 4 (session/prompt result): PromptResponse does not round-trip",
        "frame 6: error code is not an integer",
        "frame 7: a response to no request of ours",
        "request 1 (session/prompt) was answered 2 times",
        "request 3 (session/new) was answered 0 times",
    ]
    for prefix in expected:
        assert any(p.startswith(prefix) for p in problems), (prefix, problems)
    assert len(problems) == len(expected), problems
    assert check_frames(b'{"jsonrpc":"2.0","id":0,"result":{}}', {0: "session/new"})[0].startswith(
        "stdout ends with an unterminated frame"
    )
