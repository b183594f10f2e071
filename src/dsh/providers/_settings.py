"""Settings of remote model providers, shared by the provider plugins and the configuration file.

A provider is a name (the part before ``:`` in ``name:model``) and a wire type: ``openai`` (Chat Completions,
also DeepSeek, vLLM, Ollama, llama.cpp, LM Studio, OpenRouter) or ``anthropic`` (Messages). Three providers
are built in and need no configuration beyond their key: ``openai``, ``deepseek`` and ``anthropic``; a
configuration file can change them or add more (``ollama: {type: openai, base_url: ...}``).

Keys are read from the environment variable named by ``api_key_env`` (or given in ``api_key``) at call time;
they are ``SecretStr`` so they never show in a ``repr``, a log or ``dsh config show``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

__all__ = ["BUILTIN_PROVIDERS", "ModelPrice", "ProviderSettings", "address_problem", "merge_providers"]


class ModelPrice(BaseModel):
    """US dollars per million tokens."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_read: float | None = Field(default=None, ge=0)
    cache_write: float | None = Field(default=None, ge=0)


class ProviderSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    type: Literal["openai", "anthropic"] = "openai"
    base_url: str | None = None
    """Default per type: ``OPENAI_BASE_URL`` or the public API for openai, ``ANTHROPIC_BASE_URL`` or the public
    API for anthropic."""
    base_url_env: str | None = None
    """An environment variable that overrides ``base_url`` when set (``OPENAI_BASE_URL`` for ``openai``)."""
    api_key_env: str | None = None
    api_key: SecretStr | None = None
    key_required: bool = True
    """False for local servers that take no key (a missing key is then not an error)."""
    headers: dict[str, str] = Field(default_factory=dict)
    timeout: float = Field(default=120.0, gt=0)
    """Seconds to wait for the next byte of a response (the stream's read timeout)."""
    connect_timeout: float = Field(default=10.0, gt=0)
    retries: int = Field(default=3, ge=0, le=10)
    """Retries of a request that failed before its first streamed byte (429, 5xx, connection errors)."""
    backoff: float = Field(default=0.5, ge=0)
    """First retry delay in seconds; doubled each retry, with jitter; ``Retry-After`` wins when given."""
    max_tokens: int | None = None
    context_windows: dict[str, int] = Field(default_factory=dict)
    """Context window in tokens per model name (without the provider prefix); over dsh's built-in table."""
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    """Price per model name (without the provider prefix), over dsh's built-in table (``cost`` in usage)."""
    wire_format: Literal["chat-completions", "responses"] | None = None
    """``openai`` type only: the wire format of this provider's models (``chat-completions`` or ``responses``);
    default: the Responses API for OpenAI's reasoning families (``o1``, ``o3``, ``o4``, ``gpt-5``) on the built-in
    ``openai`` provider, Chat Completions everywhere else (:func:`dsh.providers.openai_responses.wire_format`)."""
    wire_formats: dict[str, Literal["chat-completions", "responses"]] = Field(default_factory=dict)
    """The wire format per model name (without the provider prefix), over ``wire_format``."""
    thought_levels: dict[str, list[str]] = Field(default_factory=dict)
    """Reasoning-effort levels per model name (without the provider prefix), overriding the built-in table of
    :mod:`dsh.providers._reasoning`; an empty list: no reasoning-effort picker for that model."""
    vision: dict[str, bool] = Field(default_factory=dict)
    """Whether a model takes image input, per model name (without the provider prefix; ``"*"``: the provider's
    other models), over dsh's built-in table (:mod:`dsh.images`)."""


BUILTIN_PROVIDERS: dict[str, ProviderSettings] = {
    "openai": ProviderSettings(
        type="openai",
        base_url="https://api.openai.com/v1",
        base_url_env="OPENAI_BASE_URL",
        api_key_env="OPENAI_API_KEY",
        key_required=False,  # local OpenAI-compatible servers (OPENAI_BASE_URL) often take none
    ),
    "deepseek": ProviderSettings(
        type="openai",
        base_url="https://api.deepseek.com",
        api_key_env="DEEPSEEK_API_KEY",
        context_windows={"deepseek-chat": 128_000, "deepseek-reasoner": 128_000},
    ),
    "anthropic": ProviderSettings(
        type="anthropic",
        base_url="https://api.anthropic.com",
        base_url_env="ANTHROPIC_BASE_URL",
        api_key_env="ANTHROPIC_API_KEY",
        max_tokens=8192,
    ),
}


def merge_providers(configured: dict[str, ProviderSettings] | None) -> dict[str, ProviderSettings]:
    """The built-in providers, with configured ones replacing or adding to them (by name)."""
    merged = dict(BUILTIN_PROVIDERS)
    merged.update(configured or {})
    return merged


def address_problem(
    name: str, settings: ProviderSettings | None, *, hint: str = "give its base_url (or its type)"
) -> str | None:
    """Why *name* cannot be called: a provider that is not built in and has no ``base_url`` of its own would
    otherwise be sent, with its key, to the default address of a type it did not choose (``--provider antropic``
    to OpenAI's). None when the user said where it is: a built-in name, a ``base_url``, or an explicit ``type``
    (``claude: {type: anthropic}`` names Anthropic's API: its variable, else its public address). *hint* says
    how to give an address.

    This is the one rule the configuration file, ``dsh setup`` and the HTTP transport share: a key only ever
    goes to the address the user gave or to the named provider's own."""
    from dsh._text import did_you_mean

    if name in BUILTIN_PROVIDERS or (
        settings is not None and (settings.base_url or "type" in settings.model_fields_set)
    ):
        return None
    return (
        f"provider {name!r} is not a built-in provider{did_you_mean(name, BUILTIN_PROVIDERS)} and has no "
        f"base_url; {hint} or use one of {', '.join(BUILTIN_PROVIDERS)}"
    )
