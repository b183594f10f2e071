"""The ``_dsh/agent/*`` stream (issue #16, RFC 0013), with the official ACP Python SDK client and its
extension-notification hook: never sent to a client that did not ask; for one that asked, the exact sequence of
agent events interleaved with ``session/update`` and the prompt's answer, for a text turn, a tool turn, a
max-tokens turn, a failed turn and a cancelled turn; the start-up flag; plugins' own events; and the schema list
kept in step with the event catalogue."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError

from dsh import events as ev
from dsh.agent_stream import META_KEY, SCHEMA
from dsh.agent_stream._wire import NOT_CARRIED, SESSION_EVENT_FORMS
from dsh.kernel import EmitEvent
from tests.support.sdk import DshProcess, run_dsh, write_script

DEADLINE = 15
STEER = {"dsh.dev/steer": {"method": "_dsh/session/steer"}}
"""What every initialize answer advertises (RFC 0036)."""
SCRIPT: list[dict[str, Any]] = [
    {"text": "Hello there"},
    {"tool_calls": [{"name": "nope", "arguments": {"x": 1}, "id": "c1"}]},
    {"text": "ok"},
    {"finish": "max-tokens", "text": "cut"},
    {"error": {"message": "rate limited", "code": "RATE_LIMIT"}},
    {"tool_calls": [{"name": "run_command", "arguments": {"command": "sleep 60"}, "id": "c2"}]},
    {"text": "back"},
]


def wire(dsh: DshProcess, session_id: str, start: int = 0) -> list[Any]:
    """The session's frames from position *start*: ``("update", kind)``, ``(agent event name, fields)`` without
    the ids, ``("answer", result or error)``; message ids of queued sources (fresh uuids) and the numbers of usage
    chunks (estimates) are left out."""
    out: list[Any] = []
    for frame in dsh.frames()[start:]:
        method = frame.get("method")
        if method == "session/update" and frame["params"]["sessionId"] == session_id:
            out.append(("update", frame["params"]["update"]["sessionUpdate"]))
        elif isinstance(method, str) and method.startswith("_dsh/agent/"):
            params = dict(frame["params"])
            assert params.pop("sessionId") == session_id
            assert params.pop("agentId") == session_id  # an ACP session's agent has the session's id
            if params.get("chunk", {}).get("type") == "usage":  # token estimates depend on the prompts' lengths
                params["chunk"] = {"type": "usage"}
            if "source" in params:
                params["source"] = {k: v for k, v in params["source"].items() if k != "message_id"}
            out.append((method.removeprefix("_dsh/agent/"), params))
        elif "id" in frame and "method" not in frame and frame["id"] != 0:
            out.append(("answer", frame.get("result", frame.get("error"))))
    return out


def queued(text: str) -> tuple[str, dict[str, Any]]:
    return ("queued", {"content": [{"type": "text", "text": text}], "source": {"kind": "user"}, "steering": False})


def usage(turn: int, step: int) -> tuple[str, dict[str, Any]]:
    return ("stream-chunk", {"turn": turn, "step": step, "chunk": {"type": "usage"}})


def finish(kind: str, turn: int, step: int) -> tuple[str, dict[str, Any]]:
    return ("stream-chunk", {"turn": turn, "step": step, "chunk": {"type": "finish", "reason": {"kind": kind}}})


def text(value: str, turn: int, step: int) -> tuple[str, dict[str, Any]]:
    return ("stream-chunk", {"turn": turn, "step": step, "chunk": {"type": "text-delta", "text": value}})


def opening(prompt: str, turn: int) -> list[Any]:
    first = [("update", "session_info_update")] if turn == 1 else []
    return [
        queued(prompt),
        ("status", {"status": "running"}),
        *first,
        ("turn-start", {"turn": turn}),
        ("step-start", {"turn": turn, "step": 1}),
    ]


def closing(turn: int, reason: dict[str, Any], answer: Any) -> list[Any]:
    return [("turn-end", {"turn": turn, "reason": reason}), ("answer", answer), ("status", {"status": "idle"})]


async def prompt_and_settle(dsh: DshProcess, session_id: str, prompt: str) -> tuple[Any, list[Any]]:
    """Send *prompt*, wait for its answer and for the agent's ``_dsh/agent/status`` idle; the answer (or the
    error) and the session's wire from the prompt on."""
    start, mark = len(dsh.frames()), dsh.client.agent_events.mark()
    answer: Any
    try:
        answer = await dsh.prompt(session_id, prompt)
    except RequestError as error:
        answer = error
    await dsh.client.agent_events.wait_idle(session_id, mark)
    frames = wire(dsh, session_id, start)
    # idle follows the turn's flush, so it may overtake the answer: compare in a fixed order
    if frames[-2:] == [("status", {"status": "idle"}), frames[-1]] and frames[-1][0] == "answer":
        frames[-2:] = [frames[-1], frames[-2]]
    return answer, frames


async def test_without_asking_no_dsh_frame_in_a_whole_session(tmp_path: Path) -> None:
    model = write_script(tmp_path / "script.json", SCRIPT)
    with anyio.fail_after(DEADLINE):
        async with run_dsh(tmp_path, model) as dsh:
            initialized = await dsh.initialize()
            assert initialized.agent_capabilities is not None
            assert initialized.agent_capabilities.field_meta == STEER  # only the steering request (RFC 0036)
            session_id = await dsh.new_session()
            await dsh.conn.set_session_mode(session_id=session_id, mode_id="bypass")
            for prompt in ("text", "tool", "max tokens"):
                await dsh.prompt(session_id, prompt)
            with pytest.raises(RequestError):
                await dsh.prompt(session_id, "fails")
            async with anyio.create_task_group() as group:
                group.start_soon(dsh.prompt, session_id, "cancel me")
                await dsh.client.wait_until(
                    lambda: any(u.session_update == "tool_call" for _, u in dsh.client.updates[-3:])
                )
                await dsh.conn.cancel(session_id=session_id)
            assert (await dsh.prompt(session_id, "again")).stop_reason == "end_turn"
    methods = [frame.get("method") for frame in dsh.frames()]
    assert "session/update" in methods
    assert not [m for m in methods if isinstance(m, str) and m.startswith("_")]
    assert dsh.client.agent_events.received == []


async def test_asked_the_stream_interleaves_with_updates_and_answers_in_loop_order(tmp_path: Path) -> None:
    model = write_script(tmp_path / "script.json", SCRIPT)
    with anyio.fail_after(DEADLINE):
        async with run_dsh(tmp_path, model, agent_events=True) as dsh:
            initialized = await dsh.initialize()
            assert initialized.agent_capabilities is not None
            assert initialized.agent_capabilities.field_meta == {**STEER, META_KEY: True}
            start = len(dsh.frames())
            session_id = await dsh.new_session()
            assert wire(dsh, session_id, start)[0] == ("created", {})
            await dsh.conn.set_session_mode(session_id=session_id, mode_id="bypass")

            answer, frames = await prompt_and_settle(dsh, session_id, "text")
            assert answer.stop_reason == "end_turn"
            assert frames == [
                *opening("text", 1),
                ("update", "agent_message_chunk"),
                text("Hello ", 1, 1),
                ("update", "agent_message_chunk"),
                text("there", 1, 1),
                usage(1, 1),
                finish("stop", 1, 1),
                ("step-end", {"turn": 1, "step": 1}),
                *closing(1, {"kind": "completed"}, {"stopReason": "end_turn"}),
            ]

            answer, frames = await prompt_and_settle(dsh, session_id, "tool")
            assert answer.stop_reason == "end_turn"
            call_chunk = {"type": "tool-call-delta", "id": "c1", "name": "nope", "arguments_delta": '{"x": 1}'}
            assert frames == [
                *opening("tool", 2),
                ("stream-chunk", {"turn": 2, "step": 1, "chunk": call_chunk}),
                usage(2, 1),
                finish("tool-calls", 2, 1),
                ("update", "tool_call"),
                ("tool-call", {"turn": 2, "step": 1, "callId": "c1", "name": "nope", "arguments": '{"x": 1}'}),
                ("update", "tool_call_update"),  # issue #11: in_progress (the permission gate let it run)
                ("update", "tool_call_update"),
                (
                    "tool-result",
                    {
                        "turn": 2,
                        "step": 1,
                        "callId": "c1",
                        "isError": True,
                        "content": [{"type": "text", "text": "Error: unknown tool 'nope'"}],
                        "error": {"name": "ToolNotFoundError", "code": "UNKNOWN_TOOL"},
                    },
                ),
                ("step-end", {"turn": 2, "step": 1}),
                ("step-start", {"turn": 2, "step": 2}),
                ("update", "agent_message_chunk"),
                text("ok", 2, 2),
                usage(2, 2),
                finish("stop", 2, 2),
                ("step-end", {"turn": 2, "step": 2}),
                *closing(2, {"kind": "completed"}, {"stopReason": "end_turn"}),
            ]

            answer, frames = await prompt_and_settle(dsh, session_id, "max tokens")
            assert answer.stop_reason == "max_tokens"
            assert frames == [
                *opening("max tokens", 3),
                ("update", "agent_message_chunk"),
                text("cut", 3, 1),
                usage(3, 1),
                finish("max-tokens", 3, 1),
                ("step-end", {"turn": 3, "step": 1}),
                *closing(3, {"kind": "max-tokens"}, {"stopReason": "max_tokens"}),
            ]

            answer, frames = await prompt_and_settle(dsh, session_id, "fails")
            assert isinstance(answer, RequestError) and answer.code == -32603
            failed = {"kind": "error", "message": "rate limited", "code": "RATE_LIMIT"}
            assert frames == [
                *opening("fails", 4),
                ("step-end", {"turn": 4, "step": 1}),
                ("error", {"turn": 4, "step": 1, "error": {"message": "rate limited", "code": "RATE_LIMIT"}}),
                *closing(4, failed, {"code": -32603, "message": "turn failed: rate limited"}),
            ]

            start, mark = len(dsh.frames()), dsh.client.agent_events.mark()
            async with anyio.create_task_group() as group:
                group.start_soon(dsh.prompt, session_id, "cancel me")
                await dsh.client.agent_events.wait_for(session_id, "tool-call", mark, callId="c2")
                await dsh.client.wait_until(  # issue #11: the command runs once its card is in_progress
                    lambda: any(
                        getattr(u, "tool_call_id", None) == "c2" and getattr(u, "status", None) == "in_progress"
                        for _, u in dsh.client.updates
                    )
                )
                await dsh.conn.cancel(session_id=session_id)
            await dsh.client.agent_events.wait_idle(session_id, mark)
            frames = wire(dsh, session_id, start)
            if frames[-2:] == [("status", {"status": "idle"}), frames[-1]] and frames[-1][0] == "answer":
                frames[-2:] = [frames[-1], frames[-2]]
            call_chunk = {
                "type": "tool-call-delta",
                "id": "c2",
                "name": "run_command",
                "arguments_delta": '{"command": "sleep 60"}',
            }
            result = [e for e in frames if e[0] == "tool-result"]
            assert len(result) == 1 and result[0][1]["isError"] is True
            assert frames == [
                *opening("cancel me", 5),
                ("stream-chunk", {"turn": 5, "step": 1, "chunk": call_chunk}),
                usage(5, 1),
                finish("tool-calls", 5, 1),
                ("update", "tool_call"),
                (
                    "tool-call",
                    {
                        "turn": 5,
                        "step": 1,
                        "callId": "c2",
                        "name": "run_command",
                        "arguments": '{"command": "sleep 60"}',
                    },
                ),
                ("update", "tool_call_update"),  # in_progress
                ("update", "tool_call_update"),
                result[0],
                ("step-end", {"turn": 5, "step": 1}),
                *closing(5, {"kind": "aborted", "reason": "session/cancel"}, {"stopReason": "cancelled"}),
            ]

            answer, frames = await prompt_and_settle(dsh, session_id, "again")
            assert answer.stop_reason == "end_turn"
            assert frames[-3:] == closing(6, {"kind": "completed"}, {"stopReason": "end_turn"})
    # every frame went through the SDK's extension hook too, in the same order
    hooked = [(m, p) for m, p in dsh.client.agent_events.received]
    raw = [(f["method"][1:], f["params"]) for f in dsh.frames() if str(f.get("method")).startswith("_dsh/")]
    assert sorted(json.dumps(h, sort_keys=True) for h in hooked) == sorted(json.dumps(r, sort_keys=True) for r in raw)
    assert ("dsh/agent/disposed", {"sessionId": session_id, "agentId": session_id}) in hooked  # at shutdown


async def test_the_start_up_flag_turns_the_stream_on_for_every_client(tmp_path: Path) -> None:
    model = write_script(tmp_path / "script.json", [{"text": "Hi"}])
    plugin = "tests.acp.agent_note_plugin:plugin"
    with anyio.fail_after(DEADLINE):
        async with run_dsh(tmp_path, model, env={"DSH_AGENT_EVENTS": "1", "DSH_PLUGINS": plugin}) as dsh:
            initialized = await dsh.initialize()  # does not ask
            assert initialized.agent_capabilities is not None
            assert initialized.agent_capabilities.field_meta == {**STEER, META_KEY: True}
            session_id = await dsh.new_session()
            mark = dsh.client.agent_events.mark()
            assert (await dsh.prompt(session_id, "hi")).stop_reason == "end_turn"
            await dsh.client.agent_events.wait_idle(session_id, mark)
            names = [name for name, _ in wire(dsh, session_id)]
    # a plugin's own JSON event is carried, in emission order: the plugin emits it from its turn-start listener,
    # which runs before the stream's; the non-JSON one is not carried
    assert names[names.index("turn-start") - 1] == "note"
    (note,) = [params for name, params in wire(dsh, session_id) if name == "note"]
    assert note == {"args": [1, {"note": "turn 1 started", "tags": ["a", 1, None]}]}
    assert "opaque" not in names


def test_the_schema_lists_every_agent_event_of_the_catalogue_and_nothing_else() -> None:
    """An ``agent/*`` event added to :mod:`dsh.events` without a wire form (or a reason for none) fails here, and
    so does a wire form without an event; the RFC's table is the same list."""
    catalogue = {spec.name for spec in ev.ALL if spec.name.startswith("agent/")}
    emitted = {spec.name for spec in ev.ALL if spec.name.startswith("agent/") and isinstance(spec, EmitEvent)}
    carried = set(SCHEMA) - set(SESSION_EVENT_FORMS.values())
    assert carried == emitted
    assert set(NOT_CARRIED) == catalogue - emitted
    assert not set(NOT_CARRIED) & set(SCHEMA)
    from dsh.agent_stream._wire import ENCODERS

    assert set(ENCODERS) == emitted
    rfc = (Path(__file__).resolve().parents[2] / "rfcs" / "0013-agent-events.md").read_text(encoding="utf-8")
    documented = {line.split("`")[1] for line in rfc.splitlines() if line.startswith("| `_dsh/agent/")}
    assert documented == {f"_dsh/{name}" for name in SCHEMA}
    for name, fields in SCHEMA.items():
        row = next(line for line in rfc.splitlines() if line.startswith(f"| `_dsh/{name}`"))
        for field_name in fields:
            assert f"`{field_name}`" in row, (name, field_name)


def test_the_switch_resolves_from_the_flag_or_the_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dsh.frontends.acp import DaemonOptions
    from dsh.settings import SettingError, resolve_settings

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv("DSH_CONFIG", raising=False)
    monkeypatch.delenv("DSH_AGENT_EVENTS", raising=False)
    assert DaemonOptions.resolve().agent_events is False
    assert DaemonOptions.resolve(agent_events=True).agent_events is True
    for text, expected in (("1", True), ("on", True), ("0", False), ("false", False)):
        assert resolve_settings(env={"DSH_AGENT_EVENTS": text}).get("agent_events") is expected
    with pytest.raises(SettingError) as error:
        resolve_settings(env={"DSH_AGENT_EVENTS": "maybe"})
    assert "DSH_AGENT_EVENTS" in error.value.message
