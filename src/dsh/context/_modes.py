"""Mode lookup for the mode section: where a session's mode comes from (a front end with modes registers a
provider); the first provider that knows the session answers."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from dsh.kernel import Disposer, current_scope

if TYPE_CHECKING:
    from dsh.kernel import Context

__all__ = ["ModeLookup", "ModeProvider"]

ModeProvider = Callable[[str], "str | None"]


class ModeLookup:
    """The registered mode providers, each removed with the scope that registered it."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._providers: list[ModeProvider] = []

    def mode_provider(self, provider: ModeProvider) -> Disposer:
        """Tell the mode section where a session's mode comes from (a front end with modes registers one)."""
        self._providers.append(provider)

        def remove() -> None:
            if provider in self._providers:
                self._providers.remove(provider)

        return (current_scope() or self._ctx.scope).effect(remove)

    def mode_of(self, session_id: str) -> str | None:
        for provider in self._providers:
            mode = provider(session_id)
            if mode is not None:
                return mode
        return None
