"""Model providers: each module is a plugin that registers ``llm`` adapters.

Importing this package is cheap: the provider settings load on first access.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dsh.providers._settings import (
        BUILTIN_PROVIDERS,
        ModelPrice,
        ProviderSettings,
        address_problem,
        merge_providers,
    )

__all__ = ["BUILTIN_PROVIDERS", "ModelPrice", "ProviderSettings", "address_problem", "merge_providers"]

_SETTINGS = frozenset({"BUILTIN_PROVIDERS", "ModelPrice", "ProviderSettings", "address_problem", "merge_providers"})


def __getattr__(name: str) -> Any:
    if name in _SETTINGS:
        return getattr(importlib.import_module("dsh.providers._settings"), name)
    raise AttributeError(f"module 'dsh.providers' has no attribute {name!r}")
