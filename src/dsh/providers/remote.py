"""The ``remote_providers`` plugin: real models over HTTP, one ``<name>:*`` adapter per configured provider.

Its config is the configured providers (``dict[str, ProviderSettings]``, or ``None``), merged over the built-ins
(``openai``, ``deepseek``, ``anthropic``) with :func:`~dsh.providers._settings.merge_providers`.

Guarantees:

* Loading costs no network and no heavy import: importing this module, and applying the plugin, never imports
  httpx (it is imported on the first model call); no key is read and no connection is made until then.
* Every merged provider serves ``<name>:<model>`` with the adapter of its ``type`` (``openai`` → Chat
  Completions, or the Responses API for the models :func:`~dsh.providers._settings.wire_format` gives it;
  ``anthropic`` → Messages), and every configured context window is published with
  ``set_model_info("<name>:<model>", ModelInfo(context_window=…, price=…))`` (with its configured ``prices``). All of it is owned by the plugin's scope.
* Each provider has its own HTTP client, made on its first call and closed when the plugin is disposed.
* Which of a provider's models take images is its ``vision`` setting over dsh's built-in table
  (``register_vision``, :func:`dsh.images.takes_images`).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING

from pydantic import ConfigDict, RootModel

from dsh.kernel import plugin
from dsh.providers._settings import ProviderSettings, merge_providers

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from dsh.kernel import Context
    from dsh.providers._http import HttpProvider
    from dsh.services.llm import Adapter, GenerateRequest, StreamChunk

__all__ = ["RemoteProvidersConfig", "remote_providers_plugin"]


class RemoteProvidersConfig(RootModel[dict[str, ProviderSettings] | None]):
    """The plugin's config: provider name → settings (``None`` or ``{}``: the built-ins only)."""

    model_config = ConfigDict(defer_build=True)


def _openai_wires(name: str, http: HttpProvider) -> Adapter:
    """The ``openai``-type adapter: each request goes to Chat Completions or the Responses API, by its model."""
    from dsh.providers.openai import openai_adapter
    from dsh.providers.openai_responses import responses_adapter, wire_format
    from dsh.services.llm import model_name

    chat, responses = openai_adapter(http), responses_adapter(http)

    def adapter(request: GenerateRequest) -> AsyncIterator[StreamChunk]:
        if wire_format(name, http.settings, model_name(request.model)) == "responses":
            return responses(request)
        return chat(request)

    return adapter


@plugin("remote_providers", inject=("llm",), config=RemoteProvidersConfig)
def remote_providers_plugin(ctx: Context, config: RemoteProvidersConfig) -> None:
    from dsh.providers._http import HttpProvider
    from dsh.providers._reasoning import ReasoningSupport
    from dsh.providers.anthropic import anthropic_adapter
    from dsh.services.llm import ModelInfo, Price

    for name, settings in merge_providers(config.root).items():
        http = HttpProvider(name, settings)
        ctx.effect(http.aclose)
        adapter = anthropic_adapter(http) if settings.type == "anthropic" else _openai_wires(name, http)
        ctx.llm.register_adapter([f"{name}:*"], adapter)
        ctx.llm.register_vision(name, partial(_takes_images, name, settings.vision))
        ctx.llm.register_credential_check(name, http.missing_key)
        ctx.llm.register_reasoning(name, ReasoningSupport(settings, name))
        for model in {*settings.context_windows, *settings.prices}:
            price = settings.prices.get(model)
            ctx.llm.set_model_info(
                f"{name}:{model}",
                ModelInfo(
                    context_window=settings.context_windows.get(model),
                    price=Price(price.input, price.output, price.cache_read, price.cache_write) if price else None,
                ),
            )


def _takes_images(provider: str, configured: Mapping[str, bool], model: str) -> bool:
    from dsh.images import takes_images

    return takes_images(f"{provider}:{model}", configured)
