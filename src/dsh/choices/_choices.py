"""Each session's choices (model, mode, reasoning effort) as core state; front ends render and switch them.

Guarantees:

* One code path per switch, whoever asks (the ACP pickers and commands, leaving plan mode, any front end):
  :meth:`Choices.switch` validates the value (a model against the models the caller offers, a mode against
  :data:`dsh.policy.MODE_IDS`, an effort against the model's levels) and raises :class:`ChoiceError` naming the
  choices otherwise; a change is recorded in the session log as ``config/choice {option, value}``.
* The mode is the policy service's (``SessionChoices.policy``, the object the pipeline decides with): there is
  one mode per session, not a front end's copy.
* A loaded session takes, per option, the last recorded value that is still valid (:meth:`Choices.restore`; a
  model no longer offered falls back to the default).
* The model and the reasoning effort apply from the session's next step on: :meth:`Choices.request_for`, which
  the front end that attached the session (:meth:`Choices.attach`) calls on ``agent/request``, where it sits
  among its other listeners; other sessions keep their agent's options.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from dsh import events as ev
from dsh.errors import DshError
from dsh.kernel import plugin
from dsh.policy import MODE_IDS, SessionPolicy

if TYPE_CHECKING:
    from dsh.kernel import Context
    from dsh.services.agents import Agent
    from dsh.services.llm import GenerateRequest
    from dsh.services.sessions import Session

__all__ = [
    "CHOICE_EVENT",
    "ChoiceError",
    "Choices",
    "SessionChoices",
    "choices_from_log",
    "choices_plugin",
    "current_level",
]

CHOICE_EVENT = "config/choice"
OPTIONS = ("model", "mode", "thought_level")


class ChoiceError(DshError):
    """A value that is not offered; ``option`` says which choice (model, mode, thought_level)."""

    default_code = "INVALID_CHOICE"

    def __init__(self, option: str, message: str) -> None:
        super().__init__(message)
        self.option = option


@dataclass(eq=False)
class SessionChoices:
    """A session's model and reasoning effort; ``policy`` holds its mode (the policy service's own object)."""

    model: str
    thought_level: str | None = None
    """The effort the user picked (None: the model's default), for models that take one."""
    policy: SessionPolicy = field(default_factory=SessionPolicy)

    @property
    def mode(self) -> str:
        return self.policy.mode


def choices_from_log(events: Iterable[Any]) -> dict[str, str]:
    """The last recorded value of each option."""
    found: dict[str, str] = {}
    for event in events:
        if event.type == CHOICE_EVENT:
            option, value = event.data.get("option"), event.data.get("value")
            if isinstance(option, str) and isinstance(value, str):
                found[option] = value
    return found


def current_level(levels: Sequence[str], picked: str | None) -> str | None:
    """The reasoning effort in force: the one picked when the model takes it, else ``medium`` when offered, else
    the first level; None for a model that takes none."""
    if not levels:
        return None
    if picked in levels:
        return picked
    return "medium" if "medium" in levels else levels[0]


class Choices:
    """The ``choices`` service."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._sessions: dict[str, SessionChoices] = {}

    def attach(self, session_id: str, model: str) -> SessionChoices:
        """Give *session_id* choices (its mode: the policy service's when it is loaded); a front end with
        pickers does this when it opens a session."""
        policies = self._ctx.get("policy")
        policy = policies.session(session_id) if policies is not None else SessionPolicy()
        state = self._sessions[session_id] = SessionChoices(model, policy=policy)
        return state

    def get(self, session_id: str) -> SessionChoices | None:
        return self._sessions.get(session_id)

    def detach(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

    def levels(self, state: SessionChoices) -> list[str]:
        return list(self._ctx.llm.thought_levels(state.model))

    def switch(self, session: Session, state: SessionChoices, option: str, value: str, offered: Sequence[str]) -> bool:
        """Switch *option* to *value* (see the module docstring); return whether it changed. *offered*: the
        models the caller offers."""
        if option == "model":
            if value not in offered:
                raise ChoiceError(option, f"model {value!r} is not offered; choose one of {', '.join(offered)}")
            old: str | None = state.model
            state.model = value
        elif option == "mode":
            if value not in MODE_IDS:
                raise ChoiceError(option, f"unknown mode {value!r}; choose one of {', '.join(sorted(MODE_IDS))}")
            old = state.policy.mode
            state.policy.mode = value
        elif option == "thought_level":
            levels = self.levels(state)
            if value not in levels:
                raise ChoiceError(
                    option,
                    f"reasoning effort {value!r} is not offered for {state.model}; choose one of "
                    f"{', '.join(levels) or 'none'}",
                )
            old = state.thought_level
            state.thought_level = value
        else:
            raise ChoiceError(option, f"unknown config option {option!r}")
        if old == value:
            return False
        session.append(CHOICE_EVENT, {"option": option, "value": value})
        return True

    def restore(self, state: SessionChoices, events: Iterable[Any], offered: Sequence[str]) -> None:
        """Take the choices recorded in a loaded session's log."""
        found = choices_from_log(events)
        if found.get("model") in offered:
            state.model = found["model"]
        if found.get("mode") in MODE_IDS:
            state.policy.mode = found["mode"]
        state.thought_level = found.get("thought_level")

    def request_for(self, state: SessionChoices, request: GenerateRequest) -> GenerateRequest:
        """*request* with the session's model and reasoning effort."""
        if request.model != state.model:
            request = replace(request, model=state.model)
        llm = self._ctx.llm
        level = current_level(llm.thought_levels(state.model), state.thought_level)
        if level is not None:
            request = replace(request, extra={**request.extra, **llm.thought_options(state.model, level)})
        return request


@plugin("choices", inject=("llm",))
def choices_plugin(ctx: Context, config: object) -> None:
    """Provide ``choices``; a disposed agent's session forgets its choices."""
    choices = Choices(ctx)
    ctx.provide("choices", choices)

    def disposed(agent: Agent) -> None:
        choices.detach(agent.session.id)

    ctx.on(ev.AGENT_DISPOSED, disposed)
