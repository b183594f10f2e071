"""A long session kept inside a small context window by compaction: the echo model, a window of 20,000 tokens and
a scripted summariser (an adapter that always answers the same summary). It checks that no turn fails and that
no request the model received passed the window (the echo model reports its prompt size), and prints the time
per turn around turn 100 and at the end.

Run: ``.venv/bin/python scripts/stress_compaction.py [--turns 2000] [--window 20000]``; ``--short`` is the quick
mode the test suite runs (``tests/context/test_long_session.py``). Exit status 1 when a check fails.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import anyio

SUMMARY = "Summary: the user sent numbered filler messages and the model echoed each one back."


@dataclass
class Outcome:
    turns: int = 0
    failed: list[object] = field(default_factory=list)
    compactions: int = 0
    max_prompt: int = 0
    window: int = 0
    per_turn: dict[int, float] = field(default_factory=dict)
    """Turn number → seconds per turn, averaged over the 20 turns ending there."""

    def ok(self) -> bool:
        return not self.failed and self.compactions > 0 and self.max_prompt <= self.window


async def run_session(turns: int, window: int, marks: tuple[int, ...] = (100,)) -> Outcome:
    from dsh import events as ev
    from dsh.app import load_core
    from dsh.context import ContextConfig
    from dsh.kernel import App
    from dsh.services.agents import Agent, AgentOptions
    from dsh.services.llm import GenerateRequest, ModelInfo, StreamChunk
    from dsh.services.sessions import Session, SessionEvent

    async def summariser(request: GenerateRequest) -> AsyncIterator[StreamChunk]:
        yield {"type": "text-delta", "text": SUMMARY}
        yield {"type": "usage", "usage": {"input_tokens": 100, "output_tokens": 20}}
        yield {"type": "finish", "reason": {"kind": "stop"}}

    outcome = Outcome(window=window)
    filler = "lorem ipsum dolor sit amet " * 4
    with tempfile.TemporaryDirectory() as cwd:
        async with App() as app:
            ctx = app.ctx
            load_core(ctx, context=ContextConfig.model_validate({"compaction": {"model": "summariser"}}))
            ctx.llm.register_adapter(["summariser"], summariser)
            ctx.llm.set_model_info("echo", ModelInfo(context_window=window))

            def on_event(session: Session, event: SessionEvent) -> None:
                if event.type == "usage":
                    usage = event.data["usage"]
                    outcome.max_prompt = max(outcome.max_prompt, usage.get("input_tokens", 0))
                elif event.type == "context/compaction":
                    outcome.compactions += 1

            def on_turn_end(agent: Agent, turn: int, reason: object) -> None:
                if not isinstance(reason, dict) or reason.get("kind") != "completed":
                    outcome.failed.append((turn, reason))

            ctx.on(ev.SESSION_EVENT, on_event)
            ctx.on(ev.AGENT_TURN_END, on_turn_end)
            handle = await ctx.agents.create(
                agent_id="long", session_id="long", meta={"cwd": cwd}, agent_options=AgentOptions(model="echo")
            )
            agent = handle.agent
            started = time.perf_counter()
            window_start = {mark - 20: 0.0 for mark in (*marks, turns)}
            for number in range(1, turns + 1):
                if number - 1 in window_start:
                    window_start[number - 1] = time.perf_counter()
                agent.send([{"type": "text", "text": f"turn {number}: {filler}"}])
                await agent.when_idle()
                outcome.turns = number
                if number in marks or number == turns:
                    begun = window_start.get(number - 20)
                    if begun is not None:
                        outcome.per_turn[number] = (time.perf_counter() - begun) / 20
            del started
            await handle.dispose()
    return outcome


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--window", type=int, default=20_000)
    parser.add_argument("--short", action="store_true", help="300 turns, window 8,000 (the test suite's mode)")
    args = parser.parse_args()
    turns, window = (300, 8_000) if args.short else (args.turns, args.window)
    outcome = anyio.run(run_session, turns, window)
    for mark, seconds in sorted(outcome.per_turn.items()):
        sys.stdout.write(f"turn {mark:>5}: {seconds * 1e3:.2f} ms/turn\n")
    sys.stdout.write(
        f"{outcome.turns} turns, window {window}: {outcome.compactions} compactions, largest prompt "
        f"{outcome.max_prompt} tokens, failed turns {len(outcome.failed)}\n"
    )
    return 0 if outcome.ok() else 1


if __name__ == "__main__":
    sys.exit(main())
