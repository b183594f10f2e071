"""A session's choices are core state (issue #21 item 3): one switch for every front end, validated, recorded in
the session log, restored on load, the mode shared with the policy service."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from dsh.choices import ChoiceError, Choices
from dsh.choices._choices import CHOICE_EVENT
from dsh.kernel import Context


@dataclass
class Event:
    type: str
    data: dict[str, Any]


@dataclass
class FakeSession:
    log: list[Event] = field(default_factory=list)

    def append(self, kind: str, data: dict[str, Any]) -> None:
        self.log.append(Event(kind, data))


async def test_switches_are_validated_recorded_and_restored(core: Context) -> None:
    from dsh.policy import PolicyConfig, policy_plugin

    core.plugin(policy_plugin, PolicyConfig())
    choices: Choices = core.choices
    state = choices.attach("s1", "echo")
    assert state.policy is core.policy.session("s1")  # one mode per session: the pipeline's
    session = FakeSession()
    assert choices.switch(session, state, "mode", "plan", ["echo"])  # type: ignore[arg-type]
    assert core.policy.session("s1").mode == "plan"
    assert not choices.switch(session, state, "mode", "plan", ["echo"])  # type: ignore[arg-type]  # unchanged
    with pytest.raises(ChoiceError, match="unknown mode 'yolo'"):
        choices.switch(session, state, "mode", "yolo", ["echo"])  # type: ignore[arg-type]
    with pytest.raises(ChoiceError, match="model 'gpt' is not offered; choose one of echo, scripted"):
        choices.switch(session, state, "model", "gpt", ["echo", "scripted"])  # type: ignore[arg-type]
    with pytest.raises(ChoiceError, match="reasoning effort 'high' is not offered for echo"):
        choices.switch(session, state, "thought_level", "high", ["echo"])  # type: ignore[arg-type]
    assert choices.switch(session, state, "model", "scripted", ["echo", "scripted"])  # type: ignore[arg-type]
    assert [(e.type, e.data) for e in session.log] == [
        (CHOICE_EVENT, {"option": "mode", "value": "plan"}),
        (CHOICE_EVENT, {"option": "model", "value": "scripted"}),
    ]
    again = choices.attach("s2", "echo")
    choices.restore(again, session.log, ["echo"])  # scripted is no longer offered: the default stays
    assert (again.model, again.mode) == ("echo", "plan")
