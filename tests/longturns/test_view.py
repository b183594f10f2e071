"""The view a session derives under ``context/prune`` and a compaction that cuts inside a turn (``keep``): the
same live and from a reloaded log, calls never separated from their results; and the pruning plan's stubs."""

from __future__ import annotations

from typing import Any

from dsh.context._pruning import plan_prune, stub_text
from dsh.services.sessions import Session, SessionEvent, SessionHeader


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def build() -> Session:
    session = Session(SessionHeader(id="s", created_at=0.0))
    session.append("turn/start", {"turn": 1})
    session.append("user/message", {"content": [_text("fix it")]})  # seq 1
    for step in (1, 2, 3):
        session.append("step/start", {"turn": 1, "step": step})
        call = {"type": "tool-call", "id": f"c{step}", "name": "read_file", "arguments": f'{{"path": "f{step}"}}'}
        session.append("assistant/message", {"turn": 1, "step": step, "content": [call]})
        session.append("tool/result", {"call_id": f"c{step}", "content": [_text("x" * 4000)], "is_error": False})
        session.append("step/end", {"turn": 1, "step": step})
    return session


def reloaded(session: Session) -> Session:
    return Session(session.header, [SessionEvent.from_json(e.to_json()) for e in session.events])


def test_a_prune_stubs_the_named_results_live_and_after_a_reload() -> None:
    session = build()
    results = [seq for seq, m in session.view() if m["content"][0]["type"] == "tool-result"]
    plan = plan_prune(session.view(), protect=1000, minimum=100, pruned=set(), spills={results[0]: "/tmp/out.txt"})
    assert plan is not None
    assert [r["seq"] for r in plan.results] == results[:2]  # the newest result (1,000 tokens) is protected
    assert plan.results[0]["stub"] == stub_text("read_file", '{"path": "f1"}', 4000, results[0], "/tmp/out.txt")
    assert "the full output is in /tmp/out.txt" in plan.results[0]["stub"]
    assert f"the session log keeps the full output (event {results[1]})" in plan.results[1]["stub"]
    session.append("context/prune", {"results": plan.results})
    live = session.derive_messages()
    stubbed = [m for m in live if m["content"][0]["type"] == "tool-result"]
    assert [m["content"][0]["tool_call_id"] for m in stubbed] == ["c1", "c2", "c3"]  # calls keep their results
    assert [m["content"][0]["content"][0]["text"] for m in stubbed[:2]] == [r["stub"] for r in plan.results]
    assert stubbed[2]["content"][0]["content"] == [_text("x" * 4000)]
    assert reloaded(session).derive_messages() == live
    # already pruned results are not planned again
    again = plan_prune(session.view(), protect=1000, minimum=1, pruned=set(results[:2]), spills={})
    assert again is None


def test_a_compaction_inside_the_turn_keeps_the_request_and_the_recent_steps() -> None:
    session = build()
    step_starts = [e.seq for e in session.events if e.type == "step/start"]
    session.append("context/compaction", {"summary": "read f1 and f2", "upto": step_starts[2], "keep": [1]})
    live = session.derive_messages()
    assert [m["role"] for m in live] == ["user", "user", "assistant", "user"]
    assert "read f1 and f2" in live[0]["content"][0]["text"]
    assert live[1]["content"] == [_text("fix it")]
    assert live[2]["content"][0]["id"] == "c3" and live[3]["content"][0]["tool_call_id"] == "c3"
    assert reloaded(session).derive_messages() == live


def test_the_offline_models_count_is_the_one_estimate_of_what_they_are_sent() -> None:
    """The echo and scripted models count each message once (by identity) yet report exactly ``estimate_request``
    of every request, before and after a prune replaced messages in the view."""
    from dsh.providers._words import RequestCounter
    from dsh.services.llm import GenerateRequest, estimate_request

    session = build()
    counter = RequestCounter()
    tools: Any = [{"name": "read_file", "description": "Read.", "parameters": {"type": "object"}}]

    def check() -> None:
        request = GenerateRequest(model="echo", messages=session.derive_messages(), system="You are dsh.", tools=tools)
        assert counter(request) == estimate_request(request.messages, request.system, request.tools)

    check()
    results = [seq for seq, m in session.view() if m["content"][0]["type"] == "tool-result"]
    session.append("context/prune", {"results": [{"seq": results[0], "stub": "[pruned]"}]})
    check()
    session.append("user/message", {"content": [_text("more")]})
    check()
