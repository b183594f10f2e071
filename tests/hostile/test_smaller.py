"""Issue #30 item 7: a twice-answered request keeps its first answer, a ``null`` answer is "no answer", an
oversized compaction summary is refused (retried once, then a visible failure), a ``cwd`` with NUL or over
PATH_MAX is -32602."""

from __future__ import annotations

from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from dsh.errors import DshError
from dsh.frontends.acp._rpc import Connection
from tests.context.test_compaction import SUMMARY, core, new_agent, turn
from tests.support.provider_server import FakeProvider, Reply
from tests.support.provider_wire import oa_text_reply
from tests.support.raw import spawn_daemon, write_script

WAIT = 15.0


async def test_the_first_answer_to_a_request_settles_it() -> None:
    sent: list[bytes] = []
    connection = Connection(sent.append, lambda message: None)  # type: ignore[arg-type, return-value]
    async with anyio.create_task_group() as group:
        results: list[object] = []

        async def ask() -> None:
            results.append(await connection.request("session/request_permission", {}))

        group.start_soon(ask)
        with anyio.fail_after(WAIT):
            while not sent:
                await anyio.lowlevel.checkpoint()
        # both answers arrive before the asking task runs again
        connection._receive_response({"jsonrpc": "2.0", "id": 0, "result": {"first": True}})
        connection._receive_response({"jsonrpc": "2.0", "id": 0, "result": {"first": False}})
    assert results == [{"first": True}]
    connection._receive_response({"jsonrpc": "2.0", "id": 0, "result": {"third": True}})  # late: ignored too


async def _permission_flow(
    tmp_path: Path, answers: list[object], call: dict[str, object] | None = None
) -> tuple[dict[str, object], str]:
    """A scripted tool call that asks (``write_file`` unless *call* says otherwise, id ``w1``); the raw client
    answers the permission request with *answers*, all in one write; returns the prompt's response and the text
    of the tool's result."""
    target = tmp_path / "written.txt"
    call = call or {"name": "write_file", "arguments": {"path": str(target), "content": "x"}}
    model = write_script(tmp_path, [{"tool_calls": [{**call, "id": "w1"}]}, {"text": "done"}])
    async with spawn_daemon(model=model, stderr_path=tmp_path / "stderr.log") as daemon:
        with anyio.fail_after(WAIT):
            await daemon.initialize()
            session = await daemon.new_session(str(tmp_path))
            rid = daemon.next_id()
            await daemon.send(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "method": "session/prompt",
                    "params": {"sessionId": session, "prompt": [{"type": "text", "text": "write"}]},
                }
            )
            while True:
                message = await daemon.read()
                if message.get("method") == "session/request_permission":
                    break
            frames = b"".join(
                (__import__("json").dumps({"jsonrpc": "2.0", "id": message["id"], "result": answer}) + "\n").encode()
                for answer in answers
            )
            await daemon.send_bytes(frames)
            response, notes = await daemon.collect(rid)
    results = [
        n["params"]["update"]
        for n in notes
        if n.get("method") == "session/update" and n["params"]["update"].get("toolCallId") == "w1"
    ]
    shown = " ".join(
        c.get("content", {}).get("text", "") for u in results for c in u.get("content", []) or [] if isinstance(c, dict)
    )
    return response, shown


async def test_a_twice_answered_permission_request_keeps_the_first_answer(tmp_path: Path) -> None:
    reject = {"outcome": {"outcome": "selected", "optionId": "reject_once"}}
    allow = {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
    response, _ = await _permission_flow(tmp_path, [reject, allow])
    assert response["result"]["stopReason"] == "end_turn"
    assert not (tmp_path / "written.txt").exists()  # the second answer (allow) was not used


async def test_a_null_answer_to_a_question_is_no_answer_not_a_cancelled_turn(tmp_path: Path) -> None:
    question = {"name": "ask_user", "arguments": {"question": "Which one?", "choices": ["red", "blue"]}}
    response, shown = await _permission_flow(tmp_path, [None], question)
    assert response["result"]["stopReason"] == "end_turn"
    assert "No answer: the editor answered null." in shown
    assert "withdrawn" not in shown and "cancelled" not in shown


@pytest.mark.parametrize("cwd", ["/tmp/a\u0000b", "/" + "a" * 10_000])
async def test_an_unusable_cwd_is_invalid_params(tmp_path: Path, cwd: str) -> None:
    async with spawn_daemon(stderr_path=tmp_path / "stderr.log") as daemon:
        with anyio.fail_after(WAIT):
            await daemon.initialize()
            for method, params in (
                ("session/new", {"cwd": cwd, "mcpServers": []}),
                ("session/load", {"sessionId": "s", "cwd": cwd, "mcpServers": []}),
                ("session/list", {"cwd": cwd}),
            ):
                answer = await daemon.request(method, params)
                assert answer.get("error", {}).get("code") == -32602, (method, answer)
            await daemon.assert_serving()


async def test_a_summary_that_does_not_shrink_the_history_is_refused_then_retried(
    server: FakeProvider, tmp_path: Path
) -> None:
    huge = "S " * 20_000
    server.script(
        Reply(events=oa_text_reply("one")),
        Reply(events=oa_text_reply("two")),
        Reply(events=oa_text_reply(huge)),  # refused
        Reply(events=oa_text_reply(SUMMARY)),  # the retry: accepted
        Reply(events=oa_text_reply(huge)),
        Reply(events=oa_text_reply(huge)),  # twice: a visible failure
    )
    async with core(server, tmp_path, window=None) as ctx:
        handle = await new_agent(ctx, tmp_path)
        await turn(handle, "first " + "fact " * 400)  # ~500 tokens: a short summary shrinks it
        await turn(handle, "second")
        with anyio.fail_after(WAIT):
            data = await handle.agent.compact(None)
        assert data is not None and data["summary"] == SUMMARY
        with anyio.fail_after(WAIT), pytest.raises(DshError, match="compaction failed twice"):
            await handle.agent.compact(None)
        summaries = [e for e in handle.agent.session.events if e.type == "context/compaction"]
        assert [e.data["summary"] for e in summaries] == [SUMMARY]
        await handle.dispose()
