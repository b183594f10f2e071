"""Request-rewriter isolation after issue #12's sharing change: the model messages a request carries are
derived once and shared by every request of the session, so the loop must still guarantee that an
``agent/request`` rewriter which mutates the request can change neither the log nor the next request.
"""

from __future__ import annotations

import copy
from typing import Any

import anyio

from dsh import events as ev
from dsh.kernel import Context
from dsh.loop._agent import ReactLoopAgent
from dsh.services.agents import AgentOptions
from dsh.services.llm import ContentBlock, GenerateRequest, Message


def text(value: str) -> list[ContentBlock]:
    return [{"type": "text", "text": value}]


async def prompt(agent: ReactLoopAgent, value: str) -> None:
    agent.send(text(value))
    with anyio.fail_after(5):
        await agent.when_idle()


def _attempt(mutate: Any) -> str:
    try:
        mutate()
    except TypeError:
        return "refused"
    return "done"


async def test_a_rewriter_that_mutates_the_request_changes_neither_the_log_nor_the_next_request(
    core: Context,
) -> None:
    seen: list[list[Message]] = []  # deep copies of what each model call received, after every rewriter
    outcomes: list[list[str]] = []

    async def vandal(agent: Any, turn: int, step: int, request: GenerateRequest, next: Any) -> GenerateRequest:
        messages = request.messages
        outcomes.append(
            [
                _attempt(lambda: messages[0]["content"][0].__setitem__("text", "VANDALISED")),  # type: ignore[typeddict-item]
                _attempt(lambda: messages[0]["content"].append({"type": "text", "text": "EXTRA"})),
                _attempt(lambda: messages[-1].__setitem__("role", "assistant")),
                _attempt(lambda: messages[-1]["content"].clear()),
                _attempt(lambda: messages.append({"role": "user", "content": text("ONLY IN THIS REQUEST")})),
            ]
        )
        return await next(request)

    async def observe(agent: Any, turn: int, step: int, request: GenerateRequest, next: Any) -> GenerateRequest:
        seen.append(copy.deepcopy(request.messages))
        return await next(request)

    core.on(ev.AGENT_REQUEST, vandal)
    core.on(ev.AGENT_REQUEST, observe)
    agent: ReactLoopAgent = core.agent_loop.create("a", AgentOptions(model="echo"))
    await prompt(agent, "first")
    log_after_first = copy.deepcopy([event.to_json() for event in agent.session.events])
    await prompt(agent, "second")

    # Every mutation of a shared message is refused; the request's own list may change (that is its own).
    assert outcomes == [["refused", "refused", "refused", "refused", "done"]] * 2
    # The log holds what was said, untouched by the rewriter.
    assert [event.to_json() for event in agent.session.events][: len(log_after_first)] == log_after_first
    user = [e.data["content"] for e in agent.session.events if e.type == "user/message"]
    assistant = [e.data["content"] for e in agent.session.events if e.type == "assistant/message"]
    assert user == [text("first"), text("second")]
    answer = text("ONLY IN THIS REQUEST")  # echo answers the last user message of the request it got
    assert assistant == [answer, answer]
    # The next request is derived from the log alone: the first request's extra message is not in it.
    only_here: Message = {"role": "user", "content": text("ONLY IN THIS REQUEST")}
    assert seen[0] == [{"role": "user", "content": text("first")}, only_here]
    assert seen[1] == [
        {"role": "user", "content": text("first")},
        {"role": "assistant", "content": answer},
        {"role": "user", "content": text("second")},
        only_here,
    ]
    assert agent.session.derive_messages() == [*seen[1][:-1], {"role": "assistant", "content": answer}]
