"""Shared checks of the spend tests: the session log balanced, budgets in the configuration file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.provider_server import Reply
from tests.support.provider_wire import DONE, oa_chunk, oa_finish, oa_tool_delta, oa_usage


def write_config(workdir: Path, text: str) -> None:
    """The daemon's configuration file (``$XDG_CONFIG_HOME/dsh/config.yaml`` of :func:`tests.support.env.sandbox_env`)."""
    config = workdir / "home" / ".config" / "dsh"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.yaml").write_text(text)


def assert_balanced(events: list[dict[str, Any]]) -> None:
    """Every turn/start has its turn/end, every step/start its step/end, every tool/call its tool/result."""
    open_turn: int | None = None
    open_step = False
    calls: set[str] = set()
    for event in events:
        kind, data = event["type"], event["data"]
        if kind == "turn/start":
            assert open_turn is None, f"turn {data['turn']} started inside turn {open_turn}"
            open_turn = data["turn"]
        elif kind == "turn/end":
            assert open_turn == data["turn"] and not open_step and not calls, (open_turn, open_step, calls)
            open_turn = None
        elif kind == "step/start":
            assert open_turn is not None and not open_step
            open_step = True
        elif kind == "step/end":
            assert open_step
            open_step = False
        elif kind == "tool/call":
            calls.add(data["call_id"])
        elif kind == "tool/result":
            calls.discard(data["call_id"])
    assert open_turn is None and not open_step and not calls


def text_chunks(updates: list[dict[str, Any]]) -> str:
    return "".join(u["content"].get("text", "") for u in updates if u.get("sessionUpdate") == "agent_message_chunk")


def tool_reply(call_id: str, name: str, arguments: dict[str, Any], prompt: int, completion: int) -> Reply:
    """A loopback provider's reply (OpenAI format) that calls one tool and reports *prompt* / *completion* tokens."""
    return Reply(
        events=[
            oa_chunk({"role": "assistant", "content": None}),
            oa_tool_delta(0, json.dumps(arguments), call_id=call_id, name=name),
            oa_finish("tool_calls"),
            oa_usage(prompt, completion),
            DONE,
        ]
    )
