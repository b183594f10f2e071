"""The ``scripted:<path>`` model: a reproducible model for tests, plugin authors and bug reports.

The script is a YAML or JSON list of steps; each model call consumes the next one (see
``rfcs/0003-scripted-model.md`` for the format). ``<path>`` is a file path, or the name of a script given
inline in the plugin's config (``scripts: {name: [steps…]}``). Steps are validated when the script is loaded,
so a typo is an error that names the step, not a silent default.

Every call streams, in this order: reasoning (word pieces), text (word pieces), one ``tool-call-delta`` per tool
call, ``usage``, ``finish``. ``delay`` sleeps between chunks; ``hang`` streams nothing until the request is
aborted; ``error`` makes the stream raise. An exhausted script raises ``LlmError`` code ``SCRIPT_EXHAUSTED``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dsh.errors import DshError, LlmError
from dsh.kernel import plugin
from dsh.providers._words import rough_tokens, words
from dsh.services.llm import GenerateRequest, StreamChunk, Usage

if TYPE_CHECKING:
    from dsh.kernel import Context

__all__ = ["ScriptStep", "ScriptedModels", "scripted_plugin"]


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


class ScriptedModelError(DshError):
    """Raised by a step with ``error``: carries the step's message and code."""


class _Script:
    def __init__(self, name: str, steps: list[ScriptStep]) -> None:
        self.name = name
        self.steps = steps
        self.cursor = 0


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


def _read_file(path: str) -> list[ScriptStep]:
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


class ScriptedModels:
    """The adapter behind ``scripted:*``: one cursor per script, shared by every agent using it."""

    def __init__(self, inline: dict[str, list[Any]] | None = None) -> None:
        self._scripts: dict[str, _Script] = {
            name: _Script(name, load_steps(steps, name)) for name, steps in (inline or {}).items()
        }

    def add(self, name: str, steps: list[Any]) -> None:
        """Register (or replace) an inline script reachable as ``scripted:<name>``."""
        self._scripts[name] = _Script(name, load_steps(steps, name))

    def remaining(self, name: str) -> int:
        script = self._scripts[name]
        return len(script.steps) - script.cursor

    def _script(self, name: str) -> _Script:
        script = self._scripts.get(name)
        if script is None:
            script = self._scripts[name] = _Script(name, _read_file(name))
        return script

    def __call__(self, request: GenerateRequest) -> AsyncIterator[StreamChunk]:
        return self._stream(request)

    async def _stream(self, request: GenerateRequest) -> AsyncIterator[StreamChunk]:
        name = request.model.split(":", 1)[1] if ":" in request.model else request.model
        script = self._script(name)
        if script.cursor >= len(script.steps):
            raise LlmError(
                f"scripted model {name}: script exhausted after {len(script.steps)} steps", "SCRIPT_EXHAUSTED"
            )
        step = script.steps[script.cursor]
        script.cursor += 1
        step_number = script.cursor
        signal = request.signal

        async def pause() -> None:
            if step.delay:
                with anyio.move_on_after(step.delay):
                    if signal is not None:
                        await signal.wait()
                    else:
                        await anyio.sleep_forever()

        if step.hang:
            if signal is None:
                await anyio.sleep_forever()
            else:
                await signal.wait()
            yield {"type": "finish", "reason": {"kind": "aborted"}}
            return
        count = 0
        for kind, text in (("reasoning-delta", step.reasoning), ("text-delta", step.text)):
            for piece in words(text or ""):
                if count:
                    await pause()
                count += 1
                yield {"type": kind, "text": piece}  # type: ignore[misc]
        for index, call in enumerate(step.tool_calls):
            if count:
                await pause()
            count += 1
            arguments = call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)
            call_id = call.id or f"call_{step_number}_{index + 1}"
            yield {"type": "tool-call-delta", "id": call_id, "name": call.name, "arguments_delta": arguments}
        if step.error is not None:
            error = ScriptError(message=step.error) if isinstance(step.error, str) else step.error
            raise ScriptedModelError(error.message, error.code)
        usage: Usage = {"input_tokens": rough_tokens(request.messages, request.system), "output_tokens": count}
        if step.usage is not None:
            usage = step.usage  # type: ignore[assignment]
        yield {"type": "usage", "usage": usage}
        finish = step.finish or ("tool-calls" if step.tool_calls else "stop")
        if finish == "error":
            yield {
                "type": "finish",
                "reason": {"kind": "error", "message": "scripted finish error", "code": "SCRIPTED"},
            }
        else:
            yield {"type": "finish", "reason": {"kind": finish}}


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid")
    scripts: dict[str, list[Any]] = Field(default_factory=dict)


@plugin("scripted", inject=("llm",), config=_Config)
def scripted_plugin(ctx: Context, config: _Config) -> None:
    models = ScriptedModels(config.scripts)
    ctx.provide("scripted_models", models)
    ctx.llm.register_adapter(["scripted:*"], models)
