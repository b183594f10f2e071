"""The ``llm`` interface service: adapters keyed by model name, and the ``llm/stream`` seam.

Model names are spelled ``provider:model`` (``openai:gpt-4.1``, ``scripted:/path/to.yaml``) or a bare name
(``echo``). An adapter registers exact names, or a whole provider with ``"<provider>:*"``; exact names win.

Guarantees: a duplicate name is rejected (``LlmError`` code ``DUPLICATE_ADAPTER``); a request for a model no
adapter serves fails with ``LlmError`` code ``NO_ADAPTER`` naming the model and the ones available; every call
goes through the ``llm/stream`` waterfall, so a plugin can replay, record or reroute model traffic; an adapter
never gets an image block for a model that does not take images (:meth:`LlmService.takes_images`): each becomes
a note with the image's description (:func:`dsh.images.without_images`; RFC 0022).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from dsh import events as ev
from dsh.errors import LlmError
from dsh.kernel import Disposer, current_scope, plugin
from dsh.services.llm._assembler import BlockAssembler, GenerateResult
from dsh.services.llm._types import Adapter, GenerateRequest, StreamChunk, Usage

if TYPE_CHECKING:
    from dsh.kernel import Context

__all__ = ["LlmService", "ModelInfo", "Price", "ReasoningSupport", "llm_plugin", "model_name"]


@dataclass(frozen=True, slots=True)
class Price:
    """US dollars per million tokens: prompt tokens not read from a cache, output tokens, and (when the provider
    prices them apart) prompt tokens read from / written to its prompt cache."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None

    def cost(self, usage: Usage) -> float:
        """What one call with *usage* cost (``input_tokens`` counts every prompt token, cached ones included)."""
        total_in = int(usage.get("input_tokens") or 0)
        read = int(usage.get("cache_read_tokens") or 0)
        write = int(usage.get("cache_write_tokens") or 0)
        plain = max(total_in - read - write, 0)
        dollars = plain * self.input + int(usage.get("output_tokens") or 0) * self.output
        dollars += read * (self.cache_read if self.cache_read is not None else self.input)
        dollars += write * (self.cache_write if self.cache_write is not None else self.input)
        return dollars / 1_000_000


class ReasoningSupport(Protocol):
    """A provider's reasoning-effort support: the levels a model takes and the request options of a level."""

    def levels(self, model: str) -> tuple[str, ...]: ...
    def extra(self, model: str, level: str) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What front ends may show about a model: a display name, the context window in tokens, its price."""

    name: str | None = None
    context_window: int | None = None
    price: Price | None = None
    images: bool | None = None
    """Whether the model takes image blocks; None: its provider's rule decides (see :meth:`LlmService.takes_images`)."""


def model_name(model: str) -> str:
    """The model's own name, without its provider: ``openai:gpt-4.1`` → ``gpt-4.1``; ``echo`` → ``echo``."""
    return model.split(":", 1)[1] if ":" in model else model


class LlmService:
    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._adapters: dict[str, Adapter] = {}
        self._info: dict[str, ModelInfo] = {}
        self._credentials: dict[str, Callable[[], str | None]] = {}
        self._reasoning: dict[str, ReasoningSupport] = {}
        self._vision: dict[str, Callable[[str], bool]] = {}

    def register_adapter(self, models: list[str], adapter: Adapter) -> Disposer:
        """Serve *models* with *adapter* (owned by the calling scope); emits ``llm/adapter-change``."""
        taken = [m for m in models if m in self._adapters]
        if taken:
            raise LlmError(f"an adapter for {', '.join(taken)} is already registered", "DUPLICATE_ADAPTER")
        for model in models:
            self._adapters[model] = adapter
        self._ctx.emit(ev.LLM_ADAPTER_CHANGE)

        def remove() -> None:
            for model in models:
                if self._adapters.get(model) is adapter:
                    del self._adapters[model]
            self._ctx.emit(ev.LLM_ADAPTER_CHANGE)

        return (current_scope() or self._ctx.scope).effect(remove)

    def models(self) -> list[str]:
        return list(self._adapters)

    def set_model_info(self, model: str, info: ModelInfo) -> Disposer:
        """Describe *model* (owned by the calling scope; a later description replaces an earlier one)."""
        self._info[model] = info

        def remove() -> None:
            if self._info.get(model) is info:
                del self._info[model]

        return (current_scope() or self._ctx.scope).effect(remove)

    def model_info(self, model: str) -> ModelInfo:
        """What is known about *model* (an empty description when nothing is)."""
        return self._info.get(model) or ModelInfo()

    def providers(self) -> list[str]:
        """The names that can start a model: ``echo`` for an adapter of ``echo``, ``openai`` for ``openai:*``."""
        return sorted({name.split(":", 1)[0] for name in self._adapters})

    def unserved(self, model: str) -> str | None:
        """None when an adapter serves *model*; otherwise a one-line reason naming the available providers."""
        if self._adapters.get(model) is not None:
            return None
        if ":" in model and self._adapters.get(model.split(":", 1)[0] + ":*") is not None:
            return None
        from dsh._text import did_you_mean

        provider = model.split(":", 1)[0]
        hint = did_you_mean(provider, self.providers())
        if ":" not in model:  # a bare model name (`gpt-4.1`): the provider that serves it, when one is known to
            hint = did_you_mean(model, [f"{name}:{model}" for name in self._claimants(model)]) or hint
        return (
            f"no provider serves model {model!r}: no provider {provider!r}{hint}; "
            f"available providers: {', '.join(self.providers()) or 'none'} (name a model as provider:model)"
        )

    def _claimants(self, name: str) -> list[str]:
        """The providers (with a ``provider:*`` adapter) known to serve a model called *name*: configured for it
        (a described ``provider:name``) or, for the built-in providers, in their table of well-known models."""
        from dsh.services.llm._models import builtin_price, builtin_window  # only on this error path

        out = []
        for provider in self.providers():
            model = f"{provider}:{name}"
            if self._adapters.get(f"{provider}:*") is None:
                continue
            if model in self._info or builtin_window(model) is not None or builtin_price(model) is not None:
                out.append(provider)
        return out

    def register_credential_check(self, provider: str, check: Callable[[], str | None]) -> Disposer:
        """*check()* says what is missing to call *provider*'s models (None: nothing), e.g. "set OPENAI_API_KEY";
        owned by the calling scope."""
        self._credentials[provider] = check

        def remove() -> None:
            if self._credentials.get(provider) is check:
                del self._credentials[provider]

        return (current_scope() or self._ctx.scope).effect(remove)

    def uses_credentials(self, model: str) -> bool:
        """Whether *model*'s provider has a credential check (a key it may need), whatever its state now."""
        return ":" in model and model.split(":", 1)[0] in self._credentials

    def register_reasoning(self, provider: str, support: ReasoningSupport) -> Disposer:
        """Say which of *provider*'s models take a reasoning effort, and how (owned by the calling scope)."""
        self._reasoning[provider] = support

        def remove() -> None:
            if self._reasoning.get(provider) is support:
                del self._reasoning[provider]

        return (current_scope() or self._ctx.scope).effect(remove)

    def register_vision(self, provider: str, check: Callable[[str], bool]) -> Disposer:
        """Say which of *provider*'s models take images: *check(model name without the provider)* (owned by the
        calling scope)."""
        self._vision[provider] = check

        def remove() -> None:
            if self._vision.get(provider) is check:
                del self._vision[provider]

        return (current_scope() or self._ctx.scope).effect(remove)

    def takes_images(self, model: str) -> bool:
        """Whether *model* takes image input: its :class:`ModelInfo` when that says, else its provider's rule
        (:meth:`register_vision`), else dsh's built-in table (:func:`dsh.images.takes_images`)."""
        info = self._info.get(model)
        if info is not None and info.images is not None:
            return info.images
        check = self._vision.get(model.split(":", 1)[0]) if ":" in model else None
        if check is not None:
            return check(model_name(model))
        from dsh.images import takes_images

        return takes_images(model)

    def thought_levels(self, model: str) -> tuple[str, ...]:
        """The reasoning-effort levels *model* takes, lowest first (empty: none)."""
        support = self._reasoning.get(model.split(":", 1)[0]) if ":" in model else None
        return support.levels(model_name(model)) if support is not None else ()

    def thought_options(self, model: str, level: str) -> dict[str, Any]:
        """The request options (``GenerateRequest.extra``) that ask *model* for *level*."""
        support = self._reasoning.get(model.split(":", 1)[0]) if ":" in model else None
        if support is None or level not in support.levels(model_name(model)):
            return {}
        return support.extra(model_name(model), level)

    def missing_credentials(self, model: str) -> str | None:
        """What is missing to call *model* (its provider's credential check), None when nothing is known missing."""
        check = self._credentials.get(model.split(":", 1)[0]) if ":" in model else None
        return check() if check is not None else None

    def resolve(self, model: str) -> Adapter:
        adapter = self._adapters.get(model)
        if adapter is None and ":" in model:
            adapter = self._adapters.get(model.split(":", 1)[0] + ":*")
        if adapter is None:
            available = ", ".join(sorted(self._adapters)) or "none"
            raise LlmError(f"no adapter serves model {model!r} (available: {available})", "NO_ADAPTER")
        return adapter

    async def _open(self, request: GenerateRequest) -> AsyncIterator[StreamChunk]:
        adapter = self.resolve(request.model)
        if not self.takes_images(request.model):  # after every llm/stream listener: they see the request as made
            from dsh.images import without_images

            messages = without_images(request.messages, request.model)
            if messages is not None:
                request = replace(request, messages=messages)
        return adapter(request)

    async def stream(self, request: GenerateRequest) -> AsyncIterator[StreamChunk]:
        """Open a chunk stream for *request* through the ``llm/stream`` waterfall."""
        return await self._ctx.waterfall(ev.LLM_STREAM, request, default=self._open)

    async def generate(self, request: GenerateRequest) -> GenerateResult:
        """Run a whole call and assemble it (for plugins that need a one-shot answer)."""
        assembler = BlockAssembler()
        async for chunk in await self.stream(request):
            assembler.feed(chunk)
        return assembler.result()


@plugin("llm")
def llm_plugin(ctx: Context, config: object) -> None:
    ctx.provide("llm", LlmService(ctx))
