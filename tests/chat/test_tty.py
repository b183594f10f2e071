"""``dsh chat`` in a real terminal, driven the way a person drives it: tmux types keys (``send-keys``) and reads
the screen (``capture-pane``), against ``dsh acp`` on the scripted and echo models (issue 27's acceptance)."""

from __future__ import annotations

import re
import shlex
import sys
import time
from pathlib import Path

import pytest

from tests.support.chat import (
    SDK_ECHO_AGENT,
    Tmux,
    check_chat_frames,
    read_trace,
    run_piped,
    tmux_available,
    tmux_chat,
)
from tests.support.env import ROOT, approved_commands_unconfined, sandbox_env, write_script
from tests.support.provider_server import Reply, serve
from tests.support.provider_wire import oa_text_reply

pytestmark = pytest.mark.skipif(not tmux_available(), reason="tmux is not installed")

READ = {"name": "read_file", "arguments": {"path": "f.txt"}}  # edits follow a read (RFC 0018)
EDIT = {"name": "edit_file", "arguments": {"path": "f.txt", "old_string": "hello", "new_string": "bye"}}
PROMPT = "\u276f "  # the chat's prompt mark (HEAVY RIGHT-POINTING ANGLE QUOTATION MARK ORNAMENT)
WORDS = " ".join(f"word{n}" for n in range(1, 41))


def prompt_ready(screen: str) -> bool:
    """The prompt is back: no turn is running (its status line says "Ctrl+C cancels") and the session is up (the
    prompt's status line at the bottom names the model and the mode)."""
    lines = screen.splitlines()
    return (
        any(line.startswith(PROMPT.strip()) for line in lines)
        and "Ctrl+C cancels" not in screen
        and "cancelling" not in screen
        and "starting the agent" not in screen
        and lines[-1].startswith(" ")
        and "·" in lines[-1]
    )


def prompt_after(screen: str, marker: str) -> bool:
    """A prompt line is drawn below the line with *marker*: the chat is reading keys again."""
    lines = screen.splitlines()
    marked = [i for i, line in enumerate(lines) if marker in line]
    return bool(marked) and any(line.startswith(PROMPT.strip()) for line in lines[marked[-1] + 1 :])


async def submit(tmux: Tmux, text: str) -> None:
    tmux.type(text)
    await tmux.wait_for(lambda screen: text in screen)
    tmux.keys("Enter")


async def test_a_streamed_reply_and_an_edit_approved_with_y(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("hello world\n")
    steps = [
        {"reasoning": "I should stream it slowly", "text": "Streaming " + WORDS, "delay": 0.03},
        {"text": "I will edit it.", "tool_calls": [READ, EDIT]},
        {"text": "Edited."},
        {
            "tool_calls": [
                {"name": "edit_file", "arguments": {"path": "f.txt", "old_string": "bye", "new_string": "ciao"}}
            ]
        },
        {"text": "Left it."},
    ]
    model = write_script(tmp_path / "s.json", steps)
    trace = tmp_path / "trace"
    with tmux_chat(tmp_path, ["--trace", str(trace)], sandbox_env(tmp_path, model), tmp_path) as tmux:
        await tmux.wait_for(prompt_ready)
        await submit(tmux, "stream please")
        # part of the reply is on the screen while the turn still runs: it streams
        partial = await tmux.wait_for(lambda s: "Streaming word1" in s and "Ctrl+C cancels" in s)
        assert "word40" not in partial
        streamed = await tmux.wait_for(lambda s: "word40" in s and prompt_ready(s))
        history = tmux.history()
        assert (
            history.count("word40") == 1 and history.count("Streaming word1 ") == 1
        )  # printed once, never redrawn into the scrollback
        assert "✻ Thought (5 words; /thoughts shows them)" in streamed  # collapsed to one line
        assert "stream it slowly" not in streamed
        assert "\x1b[2;3m✻ Thought" in tmux.screen(escapes=True)  # dimmed (and italic)
        await submit(tmux, "/thoughts")
        await tmux.wait_for(lambda s: "Thoughts are shown." in s and "I should stream it slowly" in s)
        await submit(tmux, "edit the file")
        asking = await tmux.wait_for(lambda s: "Allow?" in s)
        assert "Edit f.txt" in asking
        assert "-hello" in asking and "+bye" in asking  # the diff is shown with the question
        assert "[y] Allow" in asking and "[n] Reject" in asking
        coloured = tmux.screen(escapes=True)
        assert "\x1b[31m-hello" in coloured and "\x1b[32m+bye" in coloured  # red and green diff lines
        assert (tmp_path / "f.txt").read_text() == "hello world\n"  # nothing applied before the answer
        tmux.keys("y")
        done = await tmux.wait_for(lambda s: "Edited." in s and prompt_ready(s))
        assert "✔ Edit f.txt" in done
        assert (tmp_path / "f.txt").read_text() == "bye world\n"
        await submit(tmux, "edit it again")
        await tmux.wait_for(lambda s: "+ciao" in s and "Allow?" in s)
        tmux.keys("n")
        refused = await tmux.wait_for(lambda s: "Left it." in s and prompt_ready(s))
        assert "→ Reject" in refused and "✘ Edit f.txt" in refused
        assert (tmp_path / "f.txt").read_text() == "bye world\n"
        tmux.keys("C-d")
        assert await tmux.exit_status() == 0
    assert check_chat_frames(read_trace(trace)) == []


async def test_slash_lists_the_commands_and_at_completes_a_file(tmp_path: Path) -> None:
    (tmp_path / "notes-for-the-chat.md").write_text("the tangerine is on the shelf\n")
    trace = tmp_path / "trace"
    with tmux_chat(tmp_path, ["--trace", str(trace)], sandbox_env(tmp_path, "echo"), tmp_path) as tmux:
        await tmux.wait_for(prompt_ready)
        tmux.type("/")
        # The agent's commands and the chat's own, with their descriptions. Waited for together: polling can
        # catch the menu half drawn on a busy machine (a wait that ends times out with the screen shown).
        await tmux.wait_for(
            lambda s: all(word in s for word in ("/status", "/help", "/compact", "/thoughts", "List the commands"))
        )
        tmux.keys("C-c")  # clears the line
        await tmux.wait_for(lambda s: "/status" not in s)
        tmux.type("summarise @notes-for")
        await tmux.wait_for(lambda s: "notes-for-the-chat.md" in s)  # offered while typing
        tmux.keys("Tab")
        await tmux.wait_for(lambda s: PROMPT + "summarise @notes-for-the-chat.md" in s)
        tmux.keys("Enter")
        screen = await tmux.wait_for(lambda s: "the tangerine is on the shelf" in s and prompt_ready(s))
        assert "  attached" in screen  # the chat says the file went along
        tmux.keys("C-d")
        assert await tmux.exit_status() == 0
    frames = read_trace(trace)
    assert check_chat_frames(frames) == []
    prompts = [f["params"]["prompt"] for d, f in frames if d == ">" and f.get("method") == "session/prompt"]
    assert prompts == [
        [
            {"type": "text", "text": "summarise @notes-for-the-chat.md"},
            {
                "type": "resource",
                "resource": {
                    "uri": (tmp_path / "notes-for-the-chat.md").as_uri(),
                    "text": "the tangerine is on the shelf\n",
                    "mimeType": "text/markdown",
                },
            },
        ]
    ]


async def test_ctrl_c_cancels_a_reply_and_the_prompt_returns_within_a_second(tmp_path: Path) -> None:
    # the next turn lasts longer than the chat's grace for a cancelled turn (3 s): that timer must not end it
    slow = {"text": " ".join(f"slow{n}" for n in range(1, 13)) + " after", "delay": 0.3}
    model = write_script(tmp_path / "s.json", [{"text": WORDS, "delay": 0.2}, slow])
    trace = tmp_path / "trace"
    with tmux_chat(tmp_path, ["--trace", str(trace)], sandbox_env(tmp_path, model), tmp_path) as tmux:
        await tmux.wait_for(prompt_ready)
        await submit(tmux, "talk")
        await tmux.wait_for(lambda s: "word2" in s)
        tmux.keys("C-c")
        started = time.monotonic()
        screen = await tmux.wait_for(lambda s: "(cancelled)" in s and prompt_ready(s), within=5)
        assert time.monotonic() - started < 3.0  # before the chat's 3 s grace for a cancelled turn ran out
        assert "word40" not in screen
        # the session goes on: the next prompt gets the next step
        await submit(tmux, "again")
        again = await tmux.wait_for(lambda s: "after" in s and prompt_ready(s), within=15)
        assert "(cancelled)" not in again.split(PROMPT + "again", 1)[1]
        # Ctrl+C twice on an empty prompt exits
        tmux.keys("C-c")
        await tmux.wait_for(lambda s: prompt_after(s, "Ctrl+C again to exit"))
        tmux.keys("C-c")
        assert await tmux.exit_status() == 0
    frames = read_trace(trace)
    assert check_chat_frames(frames) == []
    assert [f["method"] for d, f in frames if d == ">" and f.get("method") == "session/cancel"] == ["session/cancel"]


async def test_resume_lists_stored_sessions_and_loads_one_with_its_history(tmp_path: Path) -> None:
    env = sandbox_env(tmp_path, "echo")
    first = run_piped([], "remember the tangerine\n", env, tmp_path)
    assert first.returncode == 0, first.stderr
    with tmux_chat(tmp_path, ["--resume"], env, tmp_path) as tmux:
        picker = await tmux.wait_for(lambda s: "Resume which session?" in s and "remember the tangerine" in s)
        assert "2026" in picker or "20" in picker  # a date beside the title
        tmux.keys("Enter")
        screen = await tmux.wait_for(lambda s: "Resumed remember the tangerine" in s and prompt_ready(s))
        lines = screen.splitlines()
        assert PROMPT + "remember the tangerine" in lines  # the user's turn, replayed
        assert lines.count("remember the tangerine") == 1  # and the echo model's answer
        await submit(tmux, "and the lime")
        await tmux.wait_for(lambda s: s.splitlines().count("and the lime") == 1 and prompt_ready(s))


async def test_the_terminal_view_talks_to_the_sdk_example_agent(tmp_path: Path) -> None:
    with tmux_chat(tmp_path, ["--agent", SDK_ECHO_AGENT], sandbox_env(tmp_path, "echo"), tmp_path) as tmux:
        await tmux.wait_for(lambda s: PROMPT.strip() in s and s.splitlines()[-1].strip() == "SDK echo peer")
        await submit(tmux, "hello sdk agent")
        await tmux.wait_for(lambda s: s.splitlines().count("hello sdk agent") == 1)


async def test_mode_picker_multi_line_input_plan_and_command_output(tmp_path: Path) -> None:
    plan = [{"content": "Look around", "status": "in_progress"}, {"content": "Run the check", "status": "pending"}]
    done = [{**entry, "status": "completed"} for entry in plan]
    steps = [
        {"tool_calls": [{"name": "update_plan", "arguments": {"entries": plan}}]},
        {"tool_calls": [{"name": "run_command", "arguments": {"command": "printf 'alpha\\nbeta\\n'"}}]},
        {"text": "All done.", "tool_calls": [{"name": "update_plan", "arguments": {"entries": done}}]},
        {"text": "Bye."},
    ]
    model = write_script(tmp_path / "s.json", steps)
    trace = tmp_path / "trace"
    env = approved_commands_unconfined(sandbox_env(tmp_path, model))  # the command runs in the chat's terminal
    with tmux_chat(tmp_path, ["--trace", str(trace)], env, tmp_path) as tmux:
        await tmux.wait_for(prompt_ready)
        await submit(tmux, "/mode")
        picker = await tmux.wait_for(lambda s: "Pick the mode:" in s and "Bypass permissions" in s)
        assert "Accept edits" in picker
        tmux.keys("Down", "Down", "Down")
        await tmux.wait_for(
            lambda s: any(line.lstrip().startswith("> ") and "Bypass" in line for line in s.splitlines())
        )
        tmux.keys("Enter")
        await tmux.wait_for(lambda s: "mode: bypass" in s and prompt_ready(s))
        tmux.type("first line")
        tmux.keys("M-Enter")
        tmux.type("second line")
        await tmux.wait_for(lambda s: "  second line" in s)  # the continuation line, not sent yet
        tmux.keys("Enter")
        screen = await tmux.wait_for(lambda s: "Bye." in s and prompt_ready(s))
        assert "$ printf 'alpha\\nbeta\\n'" in screen
        assert "  beta" in screen  # the command's output, in its card
        assert "✔ Look around" in screen and "✔ Run the check" in screen  # the plan, as it ended
    frames = read_trace(trace)
    assert check_chat_frames(frames) == []
    sent = [f for d, f in frames if d == ">" and f.get("method") in ("session/prompt", "session/set_config_option")]
    assert sent[0]["params"]["configId"] == "mode" and sent[0]["params"]["value"] == "bypass"
    assert sent[1]["params"]["prompt"] == [{"type": "text", "text": "first line\nsecond line"}]
    asked = [f["method"] for d, f in frames if d == "<" and f.get("method", "").startswith("terminal/")]
    assert asked[0] == "terminal/create" and "terminal/release" in asked  # the command ran in the chat


async def test_an_agent_that_exits_ends_the_chat_with_its_stderr_and_status_1(tmp_path: Path) -> None:
    agent = f"{sys.executable} -c \"import sys; sys.stderr.write('no key for you' + chr(10))\""
    with tmux_chat(tmp_path, ["--agent", agent], sandbox_env(tmp_path, "echo"), tmp_path) as tmux:
        assert await tmux.exit_status(within=10) == 1
        screen = tmux.screen()
        assert "dsh chat: the agent exited" in screen and "no key for you" in screen
        assert "Traceback" not in screen


async def test_a_turn_answered_with_an_error_is_shown_and_the_chat_goes_on(tmp_path: Path) -> None:
    env = {k: v for k, v in sandbox_env(tmp_path, "openai:gpt-4.1").items() if k != "OPENAI_API_KEY"}
    with tmux_chat(tmp_path, [], env, tmp_path) as tmux:
        await tmux.wait_for(prompt_ready)
        await submit(tmux, "hi")
        screen = await tmux.wait_for(lambda s: "Error: Authentication required" in s and prompt_ready(s))
        assert "OPENAI_API_KEY" in screen
        await submit(tmux, "/status")
        await tmux.wait_for(lambda s: "Model: openai:gpt-4.1" in s and prompt_ready(s))


async def test_the_status_line_shows_context_used_of_the_window_and_the_cost(tmp_path: Path) -> None:
    with serve() as server:
        server.script(Reply(events=oa_text_reply("hello", " there", prompt=1000, completion=10)))
        env = sandbox_env(
            tmp_path, "openai:gpt-4.1", extra={"OPENAI_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": "test"}
        )
        with tmux_chat(tmp_path, [], env, tmp_path, width=120) as tmux:
            await tmux.wait_for(prompt_ready)
            await submit(tmux, "hi")
            screen = await tmux.wait_for(lambda s: "hello there" in s and prompt_ready(s) and "context" in s)
    status = screen.splitlines()[-1]
    # 1,010 tokens in gpt-4.1's built-in window of 1,047,576, and a cost in dollars
    assert re.search(r"gpt-4\.1 · Default · context 0% \(1\.0k/1\.0M\) · \$0\.\d{4}", status), status


# -- issue 43: the peers' habits, as a person sees them -----------------------------------------------------------

ROWS = 5000


def mode_shown(screen: str) -> str:
    """The mode the status line at the bottom shows (its second part: model · mode · …)."""
    parts = screen.splitlines()[-1].split(" · ")
    return parts[1].strip() if len(parts) > 1 else ""


async def test_the_peers_habits_against_dsh(tmp_path: Path) -> None:
    """Soft line breaks in a 5,000-line reply; Esc stops a turn, closes the / menu and a picker; a digit picks at
    once; typing with a picker open goes to the prompt; !cmd; Shift+Tab; the / menu says more entries exist; a
    resumed cancelled turn says so."""
    (tmp_path / "tangerine-file.txt").write_text("x\n")
    rows = "\n".join(f"row {n}" for n in range(1, ROWS + 1))
    slow = {"text": " ".join(f"slow{n}" for n in range(1, 41)), "delay": 0.3}
    model = write_script(tmp_path / "s.json", [{"text": rows}, slow, {"text": "picked up"}, {"text": "seen it"}])
    trace = tmp_path / "trace"
    env = sandbox_env(tmp_path, model)
    with tmux_chat(tmp_path, ["--trace", str(trace)], env, tmp_path, height=40) as tmux:
        await tmux.wait_for(prompt_ready)
        # soft line breaks: every row on a line of its own, the reply as long as it was written
        await submit(tmux, "rows please")
        await tmux.wait_for(lambda s: f"row {ROWS}" in s and prompt_ready(s), within=60)
        history = tmux.history().splitlines()
        assert [line for line in history if re.fullmatch(r"row \d+", line.strip())] == [
            f"row {n}" for n in range(1, ROWS + 1)
        ]
        # Esc stops a running turn
        await submit(tmux, "talk slowly")
        await tmux.wait_for(lambda s: "slow2" in s)
        tmux.keys("Escape")
        stopped = await tmux.wait_for(lambda s: "(cancelled)" in s and prompt_ready(s), within=15)
        assert "slow40" not in stopped
        # the / menu: more entries than rows, and it says so; Esc closes it and keeps what was typed
        tmux.type("/")
        menu = await tmux.wait_for(lambda s: "/status" in s and "more" in s.splitlines()[-1])
        assert re.search(r"↓ \d+ more", menu.splitlines()[-1]), menu
        tmux.keys("Escape")
        await tmux.wait_for(lambda s: "/status" not in s and prompt_ready(s))
        tmux.keys("BSpace")
        # a picker: Esc closes it, a digit picks at once
        mode = mode_shown(await tmux.wait_for(prompt_ready))
        await submit(tmux, "/mode")
        await tmux.wait_for(lambda s: "Pick the mode:" in s and "Bypass" in s)
        tmux.keys("Escape")
        await tmux.wait_for(lambda s: "Pick the mode:" not in s and prompt_ready(s))
        assert mode_shown(tmux.screen()) == mode
        await submit(tmux, "/mode")
        picker = await tmux.wait_for(lambda s: "Pick the mode:" in s and "Bypass" in s)
        third = next(line for line in picker.splitlines() if line.strip().lstrip(">").strip().startswith("3."))
        third_name = third.split("3.", 1)[1].split("(")[0].strip()
        tmux.keys("3")
        await tmux.wait_for(lambda s: "Pick the mode:" not in s and prompt_ready(s) and mode_shown(s) == third_name)
        # typing while a picker is open: the picker closes and the text is a prompt, nothing is picked
        await submit(tmux, "/mode")
        await tmux.wait_for(lambda s: "Pick the mode:" in s)
        tmux.type("hello there")
        await tmux.wait_for(lambda s: PROMPT + "hello there" in s and "Pick the mode:" not in s)
        tmux.keys("Enter")
        await tmux.wait_for(lambda s: "picked up" in s and prompt_ready(s))
        assert mode_shown(tmux.screen()) == third_name
        # Shift+Tab: the next mode
        tmux.keys("BTab")
        await tmux.wait_for(lambda s: prompt_ready(s) and mode_shown(s) not in ("", third_name))
        # !cmd: run by the chat, shown, and sent with the next prompt
        await submit(tmux, "!ls")
        shown = await tmux.wait_for(lambda s: "[exit code: 0]" in s and prompt_ready(s))
        assert "tangerine-file.txt" in shown
        await submit(tmux, "what did I see")
        await tmux.wait_for(lambda s: "seen it" in s and prompt_ready(s))
        tmux.keys("C-d")
        assert await tmux.exit_status(within=20) == 0
    frames = read_trace(trace)
    assert check_chat_frames(frames) == []
    prompts = [f["params"]["prompt"] for d, f in frames if d == ">" and f.get("method") == "session/prompt"]
    assert [p[-1]["text"] for p in prompts] == ["rows please", "talk slowly", "hello there", "what did I see"]
    assert all(len(p) == 1 for p in prompts[:3])
    context = prompts[3][0]["text"]
    assert "$ ls" in context and "tangerine-file.txt" in context and "[exit code: 0]" in context
    set_modes = [f["params"]["value"] for d, f in frames if d == ">" and f.get("method") == "session/set_config_option"]
    assert len(set_modes) == 2  # the digit, then Shift+Tab: Esc and the typed text picked nothing
    # the cancelled turn, resumed, says it was cancelled
    with tmux_chat(tmp_path, ["--resume"], env, tmp_path) as tmux:
        await tmux.wait_for(lambda s: "Resume which session?" in s and "rows please" in s)
        tmux.keys("x")  # not a choice: refused visibly, the picker stays
        await tmux.wait_for(lambda s: "'x' is not a choice here" in s and "Resume which session?" in s)
        tmux.keys("1")
        resumed = await tmux.wait_for(lambda s: "Resumed" in s and prompt_ready(s), within=30)
        lines = tmux.history().splitlines()
        asked = lines.index(PROMPT + "talk slowly")
        assert "(cancelled)" in lines[asked:], resumed
        assert lines.index("(cancelled)", asked) < lines.index(PROMPT + "hello there")


async def test_the_peers_habits_against_the_sdk_example_agent(tmp_path: Path) -> None:
    """The same keys against another agent (the ACP SDK's echo agent, slowed down): soft line breaks, Esc stops a
    turn and closes the / menu, !cmd goes with the next prompt, Shift+Tab with no modes does nothing."""
    (tmp_path / "lime-file.txt").write_text("x\n")
    env = sandbox_env(tmp_path, "echo", extra={"SDK_PEER_DELAY": "0.1"})
    trace = tmp_path / "trace"
    with tmux_chat(tmp_path, ["--agent", SDK_ECHO_AGENT, "--trace", str(trace)], env, tmp_path) as tmux:

        def ready(screen: str) -> bool:  # an empty prompt above the status line, no turn running
            lines = [line for line in screen.splitlines() if line.strip()]
            return len(lines) > 1 and lines[-1].strip() == "SDK echo peer" and lines[-2] == PROMPT.strip()

        await tmux.wait_for(ready)
        tmux.type("alpha")
        tmux.keys("M-Enter")
        tmux.type("beta")
        tmux.keys("M-Enter")
        tmux.type("gamma")
        await tmux.wait_for(lambda s: "  gamma" in s)
        tmux.keys("Enter")
        echoed = await tmux.wait_for(lambda s: s.splitlines().count("gamma") == 1 and ready(s))
        lines = echoed.splitlines()
        at = lines.index("alpha")
        assert lines[at : at + 3] == ["alpha", "beta", "gamma"]  # one line each, as sent
        await submit(tmux, " ".join(f"w{n}" for n in range(1, 26)))
        await tmux.wait_for(lambda s: "w1 w2" in s and "Ctrl+C cancels" in s)
        tmux.keys("Escape")
        stopped = await tmux.wait_for(lambda s: "(cancelled)" in s and ready(s), within=15)
        reply = stopped.split("(cancelled)")[0].splitlines()[-1]
        assert reply.startswith("w1") and "w25" not in reply
        tmux.type("/")
        await tmux.wait_for(lambda s: "/thoughts" in s and "Esc closes" in s)
        tmux.keys("Escape")
        await tmux.wait_for(lambda s: "/thoughts" not in s)
        tmux.keys("BSpace", "BTab")  # no modes: nothing to cycle, nothing sent
        await submit(tmux, "!ls")
        await tmux.wait_for(lambda s: "lime-file.txt" in s and "[exit code: 0]" in s and ready(s))
        await submit(tmux, "and now")
        await tmux.wait_for(lambda s: "and now" in s.splitlines() and ready(s))
        tmux.keys("C-d")
        assert await tmux.exit_status(within=20) == 0
    frames = read_trace(trace)
    assert check_chat_frames(frames) == []
    sent = [f for d, f in frames if d == ">" and f.get("method", "").startswith("session/")]
    assert [f["method"] for f in sent].count("session/set_config_option") == 0
    prompts = [f["params"]["prompt"] for f in sent if f["method"] == "session/prompt"]
    assert "$ ls" in prompts[-1][0]["text"] and "lime-file.txt" in prompts[-1][0]["text"]
    assert prompts[-1][1] == {"type": "text", "text": "and now"}


FLOOD_AGENT = f"{shlex.quote(sys.executable)} {shlex.quote(str(ROOT / 'tests' / 'support' / 'flood_agent.py'))}"


@pytest.mark.parametrize("keys", [["C-c", "C-c"], ["C-d"], ["C-c", "C-d"]])
async def test_the_chat_leaves_during_a_flood_whatever_the_agent_does(tmp_path: Path, keys: list[str]) -> None:
    """Issue 42 item 5: an agent that floods output and ignores session/cancel cannot keep the user in the chat: a
    second Ctrl+C, or Ctrl+D, during the turn leaves it (the exit bound is hang detection, not a latency claim)."""
    with tmux_chat(tmp_path, ["--agent", FLOOD_AGENT], sandbox_env(tmp_path, "echo"), tmp_path) as tmux:
        await tmux.wait_for(lambda s: PROMPT.strip() in s and s.splitlines()[-1].strip() == "flood")
        await submit(tmux, "go")
        # the turn streams (the agent's name "flood" is on the status line from the start: wait for its output)
        await tmux.wait_for(lambda s: "working" in s and re.search(r"flood\d+ flood\d+", s) is not None, within=30)
        for key in keys[:-1]:  # a first Ctrl+C: the turn is being cancelled (the agent ignores it)
            tmux.keys(key)
            await tmux.wait_for(lambda s: "cancelling" in s, within=30)
        tmux.keys(keys[-1])
        assert await tmux.exit_status(within=30) == 0
