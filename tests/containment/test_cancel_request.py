"""``$/cancel_request`` for a running ``session/prompt`` cancels the turn exactly as ``session/cancel`` does
(issue #10, item 5a; RFC 0003): the prompt is answered -32800, no update of that prompt follows the answer, and
the next prompt runs at once instead of queueing behind a turn that runs on.

The turn is a scripted model streaming a long text, one word per update every few milliseconds (so the client
keeps up and the cancel surely lands mid-turn): a turn that ran on after the answer would show updates after it,
and the next prompt would wait for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError, text_block

from tests.support.durable import WAIT, Daemon, run_daemon
from tests.support.env import write_script

WORDS = 5_000


def answer_index(daemon: Daemon, request_id: Any) -> int:
    found = [
        i
        for i, (d, m) in enumerate(daemon.client.wire)
        if d == "in" and "method" not in m and m.get("id") == request_id
    ]
    assert len(found) == 1, f"request {request_id} was answered {len(found)} times"
    return found[0]


async def test_cancel_request_on_a_prompt_cancels_its_turn(tmp_path: Path) -> None:
    model = write_script(tmp_path / "script.json", [{"text": "word " * WORDS, "delay": 0.002}, {"text": "hello again"}])
    async with run_daemon(tmp_path, tmp_path / "data", model=model) as daemon:
        session = await daemon.start()
        since = daemon.mark()
        failure: list[RequestError] = []

        async def long_prompt() -> None:
            with pytest.raises(RequestError) as caught:
                await daemon.conn.prompt(session_id=session, prompt=[text_block("talk")])
            failure.append(caught.value)

        with anyio.fail_after(WAIT):
            async with anyio.create_task_group() as group:
                group.start_soon(long_prompt)
                await daemon.client.wait_until(
                    lambda: len(daemon.updates_in(since, session_id=session)) > 50, "updates"
                )
                prompt_id = daemon.client.wire[daemon.request_index("session/prompt", since)][1]["id"]
                await daemon.conn._conn.send_notification("$/cancel_request", {"requestId": prompt_id})
        assert failure[0].code == -32800

        answered = answer_index(daemon, prompt_id)
        streamed = daemon.updates_in(since, answered, session_id=session)
        assert len(streamed) < WORDS, "the turn ended before the cancel: nothing was tested"

        # The next prompt runs at once: it is not queued behind the cancelled turn.
        await daemon.client.settled()
        after = daemon.mark()
        assert daemon.updates_in(answered + 1, after, session_id=session) == [], "updates followed the answer"
        response = await daemon.prompt(session, "hello again")
        assert response.stop_reason == "end_turn"
        second = daemon.response_index("session/prompt", after)
        texts = [
            u["content"]["text"]
            for u in daemon.updates_in(after, second, session_id=session)
            if u.get("sessionUpdate") == "agent_message_chunk"
        ]
        assert "".join(texts) == "hello again"
