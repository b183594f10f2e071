"""The scripted model's file format: step models (pydantic) and loading, imported on first use.

Kept apart from :mod:`dsh.providers.scripted` so that registering the model at start-up does not build these
models; a daemon that never runs a script never pays for them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from dsh.errors import LlmError

__all__ = ["ScriptError", "ScriptStep", "ScriptToolCall", "load_steps", "read_script_file"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, defer_build=True)


class ScriptToolCall(_Strict):
    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    id: str | None = None


class ScriptError(_Strict):
    message: str
    code: str | None = None


class ScriptStep(_Strict):
    text: str | None = None
    reasoning: str | None = None
    tool_calls: list[ScriptToolCall] = Field(default_factory=list)
    finish: Literal["stop", "tool-calls", "max-tokens", "error"] | None = None
    error: ScriptError | str | None = None
    delay: float = Field(default=0.0, ge=0.0)
    hang: bool = False
    usage: dict[str, int] | None = None
    chunks: list[dict[str, Any]] | None = None
    """Stream these chunks verbatim (a recorded response, :mod:`dsh.recording`): nothing is made up around them."""
    on_abort: list[dict[str, Any]] | None = None
    """With ``chunks``: after them, wait until the request is aborted, then stream these verbatim."""

    @model_validator(mode="after")
    def _verbatim_alone(self) -> ScriptStep:
        made_up = (self.text, self.reasoning, self.finish, self.usage)
        if self.chunks is None:
            if self.on_abort is not None:
                raise ValueError("on_abort needs chunks")
            return self
        if any(value is not None for value in made_up) or self.tool_calls or self.hang:
            raise ValueError("a step with chunks takes only on_abort, error and delay besides")
        return self


def load_steps(raw: Any, origin: str) -> list[ScriptStep]:
    if not isinstance(raw, list):
        raise LlmError(f"scripted model {origin}: the script must be a list of steps", "BAD_SCRIPT")
    steps: list[ScriptStep] = []
    for index, item in enumerate(raw):
        try:
            steps.append(ScriptStep.model_validate(item))
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'step'}: {e['msg']}" for e in exc.errors())
            raise LlmError(f"scripted model {origin}: step {index + 1}: {problems}", "BAD_SCRIPT") from None
    return steps


def read_script_file(path: str) -> list[ScriptStep]:
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise LlmError(f"scripted model: cannot read {path}: {exc.strerror}", "BAD_SCRIPT") from None
    try:
        if file.suffix == ".json":
            raw = json.loads(text)
        else:
            import yaml

            raw = yaml.safe_load(text)
    except ValueError as exc:  # json.JSONDecodeError
        raise LlmError(f"scripted model: {path} is not valid JSON: {exc}", "BAD_SCRIPT") from None
    except Exception as exc:  # yaml.YAMLError
        raise LlmError(f"scripted model: {path} is not valid YAML: {exc}", "BAD_SCRIPT") from None
    return load_steps(raw, path)
