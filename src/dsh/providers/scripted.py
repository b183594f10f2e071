"""The ``scripted:<path>`` model: a reproducible model for tests, plugin authors and bug reports.

The script is a YAML or JSON list of steps; each model call consumes the next one (the format is in
the README, "The scripted model's format"). ``<path>`` is a file path, or the name of a script given
inline in the plugin's config (``scripts: {name: [steps…]}``). Steps are validated when the script is loaded,
so a typo is an error that names the step, not a silent default.

Every call streams, in this order: reasoning (word pieces), text (word pieces), one ``tool-call-delta`` per tool
call, ``usage``, ``finish``. ``delay`` sleeps between chunks; ``hang`` streams nothing until the request is
aborted; ``error`` makes the stream raise. An exhausted script raises ``LlmError`` code ``SCRIPT_EXHAUSTED``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import anyio
from pydantic import BaseModel, ConfigDict, Field

from dsh.errors import DshError, LlmError
from dsh.kernel import plugin
from dsh.providers._words import RequestCounter, words
from dsh.services.llm import GenerateRequest, StreamChunk, Usage, model_name

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from dsh.kernel import CancelToken, Context
    from dsh.providers._script_format import ScriptStep


def load_steps(raw: Any, origin: str) -> list[ScriptStep]:
    from dsh.providers._script_format import load_steps as load

    return load(raw, origin)


__all__ = ["ScriptedModels", "load_steps", "scripted_plugin"]


class ScriptedModelError(DshError):
    """Raised by a step with ``error``: carries the step's message and code."""


class _Script:
    def __init__(self, name: str, steps: list[ScriptStep]) -> None:
        self.name = name
        self.steps = steps
        self.cursor = 0


class ScriptedModels:
    """The adapter behind ``scripted:*``: one cursor per script, shared by every agent using it."""

    def __init__(self, inline: dict[str, list[Any]] | None = None) -> None:
        self._count = RequestCounter()
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
            from dsh.providers._script_format import read_script_file

            script = self._scripts[name] = _Script(name, read_script_file(name))
        return script

    def __call__(self, request: GenerateRequest) -> AsyncIterator[StreamChunk]:
        return self._stream(request)

    async def _stream(self, request: GenerateRequest) -> AsyncIterator[StreamChunk]:
        name = model_name(request.model)
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

        if step.chunks is not None:
            async for chunk in _verbatim(step, signal, pause):
                yield chunk
            return
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
            if isinstance(step.error, str):
                raise ScriptedModelError(step.error)
            raise ScriptedModelError(step.error.message, step.error.code)
        usage: Usage = {
            "input_tokens": self._count(request),
            "output_tokens": count,
        }
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


async def _verbatim(
    step: ScriptStep, signal: CancelToken | None, pause: Callable[[], Awaitable[None]]
) -> AsyncIterator[StreamChunk]:
    """A recorded response: its chunks as they came; with ``on_abort``, then nothing until the request is aborted
    (the recording was cut there by a cancel), then the chunks that came after the abort; then its error."""
    for index, chunk in enumerate(step.chunks or ()):
        if index:
            await pause()
        yield chunk  # type: ignore[misc]
    if step.on_abort is not None:
        if signal is None:
            await anyio.sleep_forever()
        else:
            await signal.wait()
        for chunk in step.on_abort:
            yield chunk  # type: ignore[misc]
    if step.error is not None:
        if isinstance(step.error, str):
            raise ScriptedModelError(step.error)
        raise ScriptedModelError(step.error.message, step.error.code)


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid")
    scripts: dict[str, list[Any]] = Field(default_factory=dict)


@plugin("scripted", inject=("llm",), config=_Config)
def scripted_plugin(ctx: Context, config: _Config) -> None:
    models = ScriptedModels(config.scripts)
    ctx.provide("scripted_models", models)
    ctx.llm.register_adapter(["scripted:*"], models)
