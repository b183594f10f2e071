"""``dsh chat`` steers a running turn (issue #38 item 2, RFC 0036), driven in a real terminal (tmux types, the screen
is read) against ``dsh acp`` on a loopback provider whose captured requests show what the model was told: during a
turn, Enter sends the typed line with ``_dsh/session/steer``, Tab queues it as the next prompt."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.beyond_turn.helpers import gated, provider_env, text, tool_call, user_texts
from tests.chat.test_tty import PROMPT, prompt_ready, submit
from tests.support.chat import check_chat_frames, read_trace, tmux_available, tmux_chat
from tests.support.env import sandbox_env
from tests.support.provider_server import Recorded, Reply, serve

pytestmark = pytest.mark.skipif(not tmux_available(), reason="tmux is not installed")

STEER = "go left instead"
QUEUED = "then summarise"


async def test_enter_steers_the_running_turn_and_tab_queues_the_next_prompt(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello\n")
    release = threading.Event()

    def respond(recorded: Recorded) -> Reply:
        number = len(server.requests)  # this request included
        said = user_texts(recorded.body)
        if QUEUED in said:
            return text("Summary done.")
        if STEER in said:
            return text("Going left.")
        reply = tool_call(f"c{number}", "read_file", {"path": "notes.txt"})
        return gated(reply, release) if number == 2 else reply  # step 2 streams once the test has typed

    trace = tmp_path / "trace"
    with serve() as server:
        server.respond(respond)
        env = sandbox_env(tmp_path, "openai:test-model", extra=provider_env(server.url))
        with tmux_chat(tmp_path, ["--trace", str(trace)], env, tmp_path, width=120) as tmux:
            await tmux.wait_for(prompt_ready)
            await tmux.wait_for(lambda s: "Enter steers, Tab queues" in tmux.history())  # the help line says so
            await submit(tmux, "read the notes")
            await server.wait_requests(2, 30)  # the turn is running, its second step held
            await tmux.wait_for(lambda s: "type to steer" in s)
            tmux.type(STEER)
            await tmux.wait_for(lambda s: f"\u21b3 {STEER}" in s and "Enter steers the turn" in s)
            tmux.keys("Enter")
            await tmux.wait_for(lambda s: "steering…" in s)
            tmux.type(QUEUED)
            await tmux.wait_for(lambda s: f"\u21b3 {QUEUED}" in s)
            tmux.keys("Tab")
            await tmux.wait_for(lambda s: f"queued for after this turn: {QUEUED}" in s)
            release.set()
            screen = await tmux.wait_for(lambda s: "Summary done." in s and prompt_ready(s), within=30)
            history = tmux.history()
            assert "(the agent has it)" in history
            assert history.index("Going left.") < history.index(PROMPT + QUEUED) < history.index("Summary done.")
            tmux.keys("C-d")
            assert await tmux.exit_status() == 0
        bodies = server.bodies()
    assert "Going left." in screen or "Going left." in history
    told = [i for i, body in enumerate(bodies) if STEER in user_texts(body)]
    assert told and told[0] >= 2  # after the step that was running when it was sent
    assert f'<steering source="user">{STEER}</steering>' in user_texts(bodies[told[0]])
    assert QUEUED in user_texts(bodies[-1]) and QUEUED not in user_texts(bodies[-2])  # its own turn, after
    frames = read_trace(trace)
    assert check_chat_frames(frames) == []
    steers = [f for d, f in frames if d == ">" and f.get("method") == "_dsh/session/steer"]
    assert len(steers) == 1 and steers[0]["params"]["prompt"] == [{"type": "text", "text": STEER}]
    answers = [f for d, f in frames if d == "<" and f.get("id") == steers[0]["id"]]
    assert answers[0]["result"]["outcome"] == "steered"
    prompts = [f["params"]["prompt"][0]["text"] for d, f in frames if d == ">" and f.get("method") == "session/prompt"]
    assert prompts == ["read the notes", QUEUED]


async def test_a_cancel_puts_what_was_queued_and_typed_back_on_the_prompt_line_unsent(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello\n")
    release = threading.Event()

    def respond(recorded: Recorded) -> Reply:
        number = len(server.requests)
        reply = tool_call(f"c{number}", "read_file", {"path": "notes.txt"})
        if number == 1:
            return reply
        return gated(reply, release) if number == 2 else text("never")

    trace = tmp_path / "trace"
    with serve() as server:
        server.respond(respond)
        env = sandbox_env(tmp_path, "openai:test-model", extra=provider_env(server.url))
        with tmux_chat(tmp_path, ["--trace", str(trace)], env, tmp_path, width=120) as tmux:
            await tmux.wait_for(prompt_ready)
            await submit(tmux, "read the notes")
            await server.wait_requests(2, 30)
            tmux.type("first thought")
            await tmux.wait_for(lambda s: "\u21b3 first thought" in s)
            tmux.keys("Tab")
            await tmux.wait_for(lambda s: "queued for after this turn: first thought" in s)
            tmux.type("half typed")
            await tmux.wait_for(lambda s: "\u21b3 half typed" in s)
            tmux.keys("Escape")

            def restored(screen: str) -> bool:
                """The turn ended cancelled and both texts are back on the prompt line, in the order typed
                (waited for as one screen: the prompt line is redrawn a moment after "(cancelled)")."""
                lines = screen.splitlines()
                at = [i for i, line in enumerate(lines) if line.startswith(PROMPT + "first thought")]
                done = "(cancelled)" in screen and "Ctrl+C cancels" not in screen
                return done and bool(at) and at[-1] + 1 < len(lines) and lines[at[-1] + 1].strip() == "half typed"

            await tmux.wait_for(restored, within=15)
            release.set()
            tmux.keys("C-c")  # clears the line
            await tmux.wait_for(lambda s: not any(line.startswith(PROMPT + "first") for line in s.splitlines()[-4:]))
            tmux.keys("C-d")
            assert await tmux.exit_status() == 0
    frames = read_trace(trace)
    assert check_chat_frames(frames) == []
    sent = [f["params"]["prompt"][0]["text"] for d, f in frames if d == ">" and f.get("method") == "session/prompt"]
    assert sent == ["read the notes"]  # nothing queued or typed was sent
    assert not [f for d, f in frames if d == ">" and f.get("method") == "_dsh/session/steer"]
