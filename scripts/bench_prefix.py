"""Cache-friendly prefixes, measured: one scripted long turn per wire format against loopback providers.

For each wire format (OpenAI Chat Completions, Anthropic Messages, OpenAI Responses), one prompt becomes a turn
of ``--steps`` tool calls (each result ``--size`` characters) in a ``--window``-token window, against a loopback
model (``tests.support.counting_model``) that counts what it receives and refuses what passes its window. For
each request after the first, the *prefix share* is the part of the previous request's prompt (tools, system,
then the messages in order, as JSON; Anthropic's ``cache_control`` markers left out, they are not prompt text)
that the request repeats byte for byte at its start: what a provider's prompt cache can reuse. Printed per
format: the share (minimum and median) over the steps that did not follow a prune or a compaction, how many steps
did, the tokens sent per step, the compactions and prunes, and for Anthropic whether every request put its four
breakpoints on the system prompt, the last tool and the last two user messages. Halfway through the turn the
session's mode is switched (default → accept-edits, as a mode picker does): the system prompt and the tool list
must stay byte-identical through it (issue 35: the switch reaches the model as a message), and that step's share
is counted like any other.

Run: ``.venv/bin/python scripts/bench_prefix.py [--steps 200] [--size 12000] [--window 32000]``; ``--short`` is the
quick mode the test suite runs (``tests/longturns/test_prefix_share.py``). Exit status 1 when an in-turn step
outside a prune or compaction shares less than 99 %.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: tests.support

WIRES = {"chat": "openai:test-model", "anthropic": "anthropic:test-model", "responses": "oresp:test-model"}
THRESHOLD = 0.99


@dataclass
class Outcome:
    wire: str
    steps: int = 0
    shares: list[float] = field(default_factory=list)
    """The prefix share of every request after the first that did not follow a prune or compaction."""
    changed: int = 0
    """Requests that followed a prune or a compaction (their share is not counted)."""
    tokens: list[int] = field(default_factory=list)
    compactions: int = 0
    prunes: int = 0
    refused: int = 0
    completed: bool = False
    breakpoints_ok: bool | None = None
    switched_at: int | None = None
    """The step at which the mode was switched (its request carries the note)."""
    switch_share: float | None = None
    stable_head: bool = False
    """The system prompt and the tools were byte-identical in every request (the mode switch included)."""

    def ok(self) -> bool:
        return (
            self.completed
            and not self.refused
            and all(share >= THRESHOLD for share in self.shares)
            and self.stable_head
            and self.switched_at is not None
        )


def _head(body: dict[str, Any], wire: str) -> Any:
    """The system prompt of a request (Chat Completions: its system message)."""
    if wire == "responses":
        return body.get("instructions")
    if wire == "anthropic":
        return _strip_markers(body.get("system"))
    return [m for m in body.get("messages") or [] if m.get("role") == "system"]


def _strip_markers(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_markers(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip_markers(v) for v in value]
    return value


def prompt_bytes(body: dict[str, Any], wire: str) -> str:
    """The request's prompt in the order a provider reads it: tools, system, then each message (or input item)."""
    parts: list[Any] = [body.get("tools") or []]
    if wire == "responses":
        parts.append(body.get("instructions") or "")
        parts.extend(body.get("input") or [])
    elif wire == "anthropic":
        parts.append(_strip_markers(body.get("system") or []))
        parts.extend(_strip_markers(body.get("messages") or []))
    else:
        parts.extend(body.get("messages") or [])
    return "".join(json.dumps(part, sort_keys=True) + "\n" for part in parts)


def common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix of *a* and *b* (a binary search over slice comparisons)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def share(previous: str, current: str) -> float:
    return common_prefix(previous, current) / max(1, len(previous))


def breakpoints_ok(body: dict[str, Any]) -> bool:
    """System, last tool and the last two user messages (or all of them, when fewer) carry ``cache_control``."""
    system = body.get("system") or []
    tools = body.get("tools") or []
    users = [m for m in body.get("messages") or [] if m["role"] == "user"]
    marked_users = [m for m in users if any("cache_control" in block for block in m["content"])]
    return (
        bool(system)
        and "cache_control" in system[-1]
        and (not tools or "cache_control" in tools[-1])
        and marked_users == users[-2:]
        and all("cache_control" in m["content"][-1] for m in marked_users)
    )


async def run(wire: str, steps: int, size: int, window: int) -> Outcome:
    from tests.support.bulk_tool import plugin as bulk_plugin
    from tests.support.counting_model import CountingModel
    from tests.support.provider_server import serve

    from dsh import events as ev
    from dsh.app import load_core
    from dsh.kernel import App
    from dsh.providers._settings import ProviderSettings
    from dsh.services.agents import AgentOptions

    outcome = Outcome(wire)
    model = CountingModel(window, factor=1.2, calls=steps - 1, size=size, wire=wire)
    with serve() as server, tempfile.TemporaryDirectory() as tmp:
        server.respond(model)
        common: dict[str, Any] = {"api_key": "k", "retries": 0, "context_windows": {"test-model": window}}
        providers = {
            "openai": ProviderSettings.model_validate({**common, "base_url": f"{server.url}/v1"}),
            "anthropic": ProviderSettings.model_validate({**common, "type": "anthropic", "base_url": server.url}),
            "oresp": ProviderSettings.model_validate(
                {**common, "base_url": f"{server.url}/v1", "wire_format": "responses"}
            ),
        }
        async with App() as app:
            load_core(app.ctx, providers=providers, data_dir=Path(tmp) / "data")
            app.ctx.plugin(bulk_plugin)
            half = max(2, steps // 2)

            async def switch_mode(agent: Any, turn: int, step: int, request: Any, next_: Any) -> Any:
                if step == half:  # what a mode picker does to the session's policy, mid-turn
                    app.ctx.policy.session(agent.session.id).mode = "accept-edits"
                    outcome.switched_at = step
                return await next_(request)

            app.ctx.on(ev.AGENT_REQUEST, switch_mode)
            handle = await app.ctx.agents.create(
                agent_id="long", session_id="long", meta={"cwd": tmp}, agent_options=AgentOptions(model=WIRES[wire])
            )
            handle.agent.send([{"type": "text", "text": "Call bulk until you are done."}])
            with anyio.fail_after(max(60, steps)):
                await handle.agent.when_idle()
            session = handle.agent.session
            end = session.last("turn/end")
            outcome.completed = end is not None and end.data["reason"] == {"kind": "completed"}
            changed_steps: set[int] = set()
            step = 0
            for event in session.events:
                if event.type == "step/start":
                    step = event.data["step"]
                elif event.type in ("context/prune", "context/compaction"):
                    changed_steps.add(step)
                    if event.type == "context/prune":
                        outcome.prunes += 1
                    else:
                        outcome.compactions += 1
            await handle.dispose()
    outcome.steps = len(model.bodies)
    outcome.tokens = list(model.counts)
    outcome.refused = len(model.refused)
    rendered = [prompt_bytes(body, wire) for body in model.bodies]
    for index in range(1, len(rendered)):
        if index + 1 in changed_steps:  # request index i is step i + 1
            outcome.changed += 1
            continue
        outcome.shares.append(share(rendered[index - 1], rendered[index]))
        if outcome.switched_at == index + 1:
            outcome.switch_share = outcome.shares[-1]
    heads = {
        json.dumps([_head(body, wire), _strip_markers(body.get("tools") or [])], sort_keys=True)
        for body in model.bodies
    }
    outcome.stable_head = len(heads) == 1
    if wire == "anthropic":
        outcome.breakpoints_ok = all(breakpoints_ok(body) for body in model.bodies)
    return outcome


def report(outcome: Outcome) -> str:
    shares = outcome.shares or [0.0]
    line = (
        f"{outcome.wire:10} steps {outcome.steps:4}  prefix share min {min(shares):7.2%} median "
        f"{statistics.median(shares):7.2%} ({len(outcome.shares)} steps; {outcome.changed} after a prune or "
        f"compaction)  tokens/step mean {statistics.mean(outcome.tokens or [0]):8.0f} max {max(outcome.tokens or [0]):6}"
        f"  compactions {outcome.compactions:3}  prunes {outcome.prunes:3}  refused {outcome.refused}"
    )
    if outcome.breakpoints_ok is not None:
        line += f"  breakpoints {'ok' if outcome.breakpoints_ok else 'WRONG'}"
    switch = f"{outcome.switch_share:.2%}" if outcome.switch_share is not None else "not measured"
    line += f"  mode switch at step {outcome.switched_at}: share {switch}, system+tools {'identical' if outcome.stable_head else 'CHANGED'}"
    return line + ("" if outcome.completed else "  TURN FAILED")


async def main_async(steps: int, size: int, window: int) -> int:
    failed = False
    for wire in WIRES:
        outcome = await run(wire, steps, size, window)
        print(report(outcome))
        failed = failed or not outcome.ok() or outcome.breakpoints_ok is False
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--size", type=int, default=12_000, help="characters per tool result")
    parser.add_argument("--window", type=int, default=32_000)
    parser.add_argument("--short", action="store_true", help="30 steps of 4,000 characters in a 16,000 window")
    args = parser.parse_args()
    if args.short:
        args.steps, args.size, args.window = 30, 4_000, 16_000
    return anyio.run(main_async, args.steps, args.size, args.window)


if __name__ == "__main__":
    sys.exit(main())
