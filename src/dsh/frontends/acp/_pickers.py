"""The session's pickers: how the ACP client sees and switches a session's model, mode and reasoning effort.

The state and the switching are core (:mod:`dsh.choices`: validated, recorded as ``config/choice``, restored on
load, applied to each step); this module renders them (``configOptions``, ``modes``, the legacy ``models``
state), offers the models of the daemon's configuration, answers a refused value with -32602 naming the choices,
and announces a mode switch with ``current_mode_update``. Every path (``session/set_config_option``,
``session/set_model``, ``session/set_mode``, ``/model``, ``/mode``, leaving plan mode) goes through here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from dsh._log import get_logger
from dsh.choices import ChoiceError, Choices, current_level
from dsh.frontends.acp._rpc import INVALID_PARAMS, RpcError
from dsh.policy import MODES

if TYPE_CHECKING:
    from dsh.frontends.acp._session import AcpSession
    from dsh.kernel import Context
    from dsh.services.llm import GenerateRequest
    from dsh.services.sessions import SessionEvent

__all__ = ["Pickers", "mode_state"]

log = get_logger("dsh.acp")


def mode_state(current: str) -> dict[str, Any]:
    """ACP ``SessionModeState``, rendered from the core's modes table."""
    return {
        "currentModeId": current,
        "availableModes": [{"id": mode.id, "name": mode.name, "description": mode.description} for mode in MODES],
    }


class Pickers:
    def __init__(
        self, ctx: Context, default_model: str, models: Sequence[str], send: Callable[[str, dict[str, Any]], None]
    ) -> None:
        self._ctx = ctx
        self._offered = list(dict.fromkeys((default_model, *models)))
        self._send = send

    # -- what is offered --------------------------------------------------------------------------------------

    def offered_models(self) -> list[str]:
        return list(self._offered)

    def model_name(self, model: str) -> str:
        return self._ctx.llm.model_info(model).name or model

    def _model_choice(self, model: str, key: str) -> dict[str, Any]:
        """One model in a picker; a model that takes images says so in its description (RFC 0022)."""
        choice: dict[str, Any] = {key: model, "name": self.model_name(model)}
        if self._ctx.llm.takes_images(model):
            choice["description"] = "sees images"
        return choice

    def config_options(self, record: AcpSession) -> list[dict[str, Any]]:
        """Every configuration option of the session, in priority order, each with its current value."""
        options: list[dict[str, Any]] = [
            {
                "id": "model",
                "name": "Model",
                "category": "model",
                "type": "select",
                "currentValue": record.model,
                "options": [self._model_choice(m, "value") for m in self._offered],
            },
            {
                "id": "mode",
                "name": "Mode",
                "category": "mode",
                "type": "select",
                "currentValue": record.policy.mode,
                "options": [{"value": m.id, "name": m.name, "description": m.description} for m in MODES],
            },
        ]
        levels = self._ctx.llm.thought_levels(record.model)
        level = current_level(levels, record.thought_level)
        if level is not None:
            options.append(
                {
                    "id": "thought_level",
                    "name": "Reasoning effort",
                    "category": "thought_level",
                    "type": "select",
                    "currentValue": level,
                    "options": [{"value": value, "name": value.capitalize()} for value in levels],
                }
            )
        return options

    def session_state(self, record: AcpSession) -> dict[str, Any]:
        """What new/load/resume answer besides the id: config options, and the legacy ``models`` state that
        older clients still read (newer ones ignore it)."""
        return {
            "configOptions": self.config_options(record),
            "modes": mode_state(record.policy.mode),
            "models": {
                "currentModelId": record.model,
                "availableModels": [self._model_choice(m, "modelId") for m in self._offered],
            },
        }

    # -- switching --------------------------------------------------------------------------------------------

    def set(self, record: AcpSession, option: str, value: Any) -> None:
        """``session/set_config_option``."""
        if option not in ("model", "mode", "thought_level"):
            raise RpcError(INVALID_PARAMS, f"unknown config option {option!r}", {"field": "configId"})
        if not isinstance(value, str):
            raise RpcError(INVALID_PARAMS, f"the {option} option takes a string value", {"field": "value"})
        if option == "model":
            self.switch_model(record, value)
        elif option == "mode":
            self.switch_mode(record, value)
        else:
            self.switch_thought_level(record, value)

    def switch_model(self, record: AcpSession, model: str) -> None:
        if self._switch(record, "model", model, "value"):
            log.info("model switched", session_id=record.id, model=model)

    def switch_mode(self, record: AcpSession, mode: str) -> None:
        self._switch(record, "mode", mode, "modeId")
        self._send(record.id, {"sessionUpdate": "current_mode_update", "currentModeId": mode})

    def switch_thought_level(self, record: AcpSession, level: str) -> None:
        self._switch(record, "thought_level", level, "value")

    def _switch(self, record: AcpSession, option: str, value: str, field: str) -> bool:
        """The core's switch (validated, recorded in the session log), its refusal as ``invalid_params``."""
        try:
            return self._choices().switch(record.handle.agent.session, record.choices, option, value, self._offered)
        except ChoiceError as exc:
            raise RpcError(INVALID_PARAMS, exc.message, {"field": field}) from None

    def _choices(self) -> Choices:
        choices = self._ctx.get("choices")
        return choices if choices is not None else Choices(self._ctx)

    def announce(self, record: AcpSession) -> None:
        """Tell the client the configuration changed outside a picker (a command or a question switched it)."""
        self._send(record.id, {"sessionUpdate": "config_option_update", "configOptions": self.config_options(record)})

    # -- restoring and applying ---------------------------------------------------------------------------------

    def restore(self, record: AcpSession, events: Iterable[SessionEvent]) -> None:
        """Take the choices recorded in a loaded session's log."""
        self._choices().restore(record.choices, events, self._offered)

    def request_for(self, record: AcpSession, request: GenerateRequest) -> GenerateRequest:
        """*request* with the session's model and reasoning effort."""
        return self._choices().request_for(record.choices, request)
