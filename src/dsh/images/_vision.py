"""Which models take image input: the built-in table, and the rule that puts configuration first.

Pure and standard-library only: the daemon answers the first ``initialize`` (``promptCapabilities.image``,
per its default model) before the application exists, with this very function.

The rule, for ``provider:model``: the provider's ``vision`` setting for that model name (or its ``"*"``) when the config file
gives one; else the offline default ``echo`` takes images (it echoes their description, so the whole image path works
without a key; the ``scripted`` test models do not);
else the longest prefix of the model's name in :data:`BUILTIN_VISION` (an OpenRouter-style ``vendor/`` part
is skipped: ``anthropic/claude-sonnet-4.5`` is a Claude model wherever it is served); else no.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["BUILTIN_VISION", "OFFLINE_VISION", "builtin_vision", "takes_images"]

BUILTIN_VISION: dict[str, bool] = {
    # OpenAI: every GPT-4o/4.1/5 and o-series model but the text-only minis of o1 and o3
    "gpt-5": True,
    "gpt-4.1": True,
    "gpt-4.5": True,
    "gpt-4o": True,
    "chatgpt-4o": True,
    "gpt-4-turbo": True,
    "gpt-4-vision": True,
    "gpt-4": False,
    "gpt-3.5": False,
    "o1": True,
    "o1-mini": False,
    "o1-preview": False,
    "o3": True,
    "o3-mini": False,
    "o4-mini": True,
    "codex-mini": True,
    # Anthropic: every Claude 3 and later model
    "claude-": True,
    "claude-2": False,
    "claude-instant": False,
    # DeepSeek's API models read text only
    "deepseek-": False,
    # well-known open vision models (Ollama, vLLM, OpenRouter names)
    "gemini-": True,
    "gemma3": True,
    "llava": True,
    "bakllava": True,
    "llama3.2-vision": True,
    "llama-3.2-11b-vision": True,
    "llama-3.2-90b-vision": True,
    "llama-4": True,
    "pixtral": True,
    "qwen2.5-vl": True,
    "qwen2-vl": True,
    "qwen-vl": True,
    "minicpm-v": True,
}
"""Model-name prefixes and whether those models take images (the longest matching prefix decides)."""

OFFLINE_VISION: frozenset[str] = frozenset({"echo"})
"""Offline models (bare names or providers) that take images."""


def builtin_vision(model: str) -> bool | None:
    """What the built-in rule says of *model* (``provider:model`` or a bare name); None when it does not know."""
    provider, _, name = model.partition(":")
    if provider in OFFLINE_VISION:
        return True
    name = (name or provider).rsplit("/", 1)[-1].lower()
    best = max((key for key in BUILTIN_VISION if name.startswith(key)), key=len, default=None)
    return BUILTIN_VISION[best] if best is not None else None


def takes_images(model: str, configured: Mapping[str, bool] | None = None) -> bool:
    """Whether *model* takes image input: *configured* (its provider's ``vision`` setting, by model name without
    the provider; ``"*"`` for the provider's other models) first, then :func:`builtin_vision`, else False."""
    name = model.split(":", 1)[1] if ":" in model else model
    if configured:
        if name in configured:
            return bool(configured[name])
        if "*" in configured:
            return bool(configured["*"])
    return bool(builtin_vision(model))
