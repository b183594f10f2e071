"""The session's pickers: the model, the mode and the reasoning effort a user chooses, and where they go.

Guarantees:

* One code path per switch, whoever asks (``session/set_config_option``, ``session/set_model``,
  ``session/set_mode``, ``/model``, ``/mode``, leaving plan mode): validated against what is offered (-32602
  naming the choices otherwise), recorded in the session log when the value changes (``config/choice``
  ``{option, value}``), and, for modes, announced with ``current_mode_update``.
* A loaded or resumed session takes, per option, the last recorded value that is still valid (a model no longer
  offered falls back to the default).
* The model and the reasoning effort apply from the session's next step (:meth:`Pickers.request_for`, on
  ``agent/request``); the effort reaches the provider through ``GenerateRequest.extra``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from dsh._log import get_logger
from dsh.frontends.acp._rpc import INVALID_PARAMS, RpcError
from dsh.policy import MODE_IDS, MODES

if TYPE_CHECKING:
    from dsh.frontends.acp._session import AcpSession
    from dsh.kernel import Context
    from dsh.services.llm import GenerateRequest
    from dsh.services.sessions import SessionEvent

__all__ = ["CHOICE_EVENT", "Pickers", "choices_from_log", "current_level"]

CHOICE_EVENT = "config/choice"
log = get_logger("dsh.acp")


def choices_from_log(events: Iterable[SessionEvent]) -> dict[str, str]:
    """The last recorded value of each option."""
    choices: dict[str, str] = {}
    for event in events:
        if event.type == CHOICE_EVENT:
            option, value = event.data.get("option"), event.data.get("value")
            if isinstance(option, str) and isinstance(value, str):
                choices[option] = value
    return choices


def mode_state(current: str) -> dict[str, Any]:
    """ACP ``SessionModeState``, rendered from the core's modes table."""
    return {
        "currentModeId": current,
        "availableModes": [{"id": mode.id, "name": mode.name, "description": mode.description} for mode in MODES],
    }


def current_level(levels: Sequence[str], picked: str | None) -> str | None:
    """The reasoning effort in force: the one picked when the model takes it, else ``medium`` when offered, else
    the first level; None for a model that takes none."""
    if not levels:
        return None
    if picked in levels:
        return picked
    return "medium" if "medium" in levels else levels[0]


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
        if model not in self._offered:
            raise RpcError(
                INVALID_PARAMS,
                f"model {model!r} is not offered; choose one of {', '.join(self._offered)}",
                {"field": "value"},
            )
        self._record(record, "model", record.model, model)
        record.model = model
        log.info("model switched", session_id=record.id, model=model)

    def switch_mode(self, record: AcpSession, mode: str) -> None:
        if mode not in MODE_IDS:
            raise RpcError(
                INVALID_PARAMS,
                f"unknown mode {mode!r}; choose one of {', '.join(sorted(MODE_IDS))}",
                {"field": "modeId"},
            )
        self._record(record, "mode", record.policy.mode, mode)
        record.policy.mode = mode
        self._send(record.id, {"sessionUpdate": "current_mode_update", "currentModeId": mode})

    def switch_thought_level(self, record: AcpSession, level: str) -> None:
        levels = self._ctx.llm.thought_levels(record.model)
        if level not in levels:
            raise RpcError(
                INVALID_PARAMS,
                f"reasoning effort {level!r} is not offered for {record.model}; choose one of "
                f"{', '.join(levels) or 'none'}",
                {"field": "value"},
            )
        self._record(record, "thought_level", record.thought_level, level)
        record.thought_level = level

    def announce(self, record: AcpSession) -> None:
        """Tell the client the configuration changed outside a picker (a command or a question switched it)."""
        self._send(record.id, {"sessionUpdate": "config_option_update", "configOptions": self.config_options(record)})

    @staticmethod
    def _record(record: AcpSession, option: str, old: str | None, new: str) -> None:
        if old != new:
            record.handle.agent.session.append(CHOICE_EVENT, {"option": option, "value": new})

    # -- restoring and applying ---------------------------------------------------------------------------------

    def restore(self, record: AcpSession, events: Iterable[SessionEvent]) -> None:
        """Take the choices recorded in a loaded session's log."""
        choices = choices_from_log(events)
        if choices.get("model") in self._offered:
            record.model = choices["model"]
        if choices.get("mode") in MODE_IDS:
            record.policy.mode = choices["mode"]
        record.thought_level = choices.get("thought_level")

    def request_for(self, record: AcpSession, request: GenerateRequest) -> GenerateRequest:
        """*request* with the session's model and reasoning effort."""
        if request.model != record.model:
            request = replace(request, model=record.model)
        level = current_level(self._ctx.llm.thought_levels(record.model), record.thought_level)
        if level is not None:
            request = replace(request, extra={**request.extra, **self._ctx.llm.thought_options(record.model, level)})
        return request
