"""The ``system_prompt`` interface service: ordered sections plus tool schemas, assembled per model call.

Guarantees: :meth:`SystemPrompt.assemble` returns sections sorted by ``order`` (ties keep registration order),
with callable texts evaluated at assembly time, and tool schemas deep-copied so a listener of the
``system-prompt/assemble`` waterfall may rewrite the assembly without touching the registry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from dsh import events as ev
from dsh.kernel import Disposer, current_scope, plugin
from dsh.services.llm import ToolSchema
from dsh.services.sessions import copy_json

if TYPE_CHECKING:
    from dsh.kernel import Context
    from dsh.services.agents import Agent

__all__ = ["PromptAssembly", "PromptSection", "SystemPrompt", "render_prompt", "system_prompt_plugin"]


@dataclass(frozen=True, slots=True)
class PromptSection:
    name: str
    order: int
    text: str


@dataclass(slots=True)
class PromptAssembly:
    """What a model call is told besides the conversation. ``agent`` is the agent the assembly is for (None when
    assembled outside an agent): ``system-prompt/assemble`` listeners use it for per-session sections (the
    session's mode, its working directory)."""

    sections: list[PromptSection] = field(default_factory=list)
    tools: list[ToolSchema] = field(default_factory=list)
    agent: Agent | None = field(default=None, compare=False, repr=False)


def render_prompt(assembly: PromptAssembly) -> str:
    """The non-empty section texts joined by a blank line."""
    return "\n\n".join(section.text for section in assembly.sections if section.text)


@dataclass(slots=True)
class _Section:
    name: str
    order: int
    text: str | Callable[[], str]


class SystemPrompt:
    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._sections: list[_Section] = []
        self._providers: list[Callable[[], list[ToolSchema]]] = []

    def section(self, name: str, order: int, text: str | Callable[[], str]) -> Disposer:
        """Add a section (owned by the calling scope); emits ``system-prompt/change``."""
        entry = _Section(name, order, text)
        self._sections.append(entry)
        self._ctx.emit(ev.SYSTEM_PROMPT_CHANGE)

        def remove() -> None:
            if entry in self._sections:
                self._sections.remove(entry)
                self._ctx.emit(ev.SYSTEM_PROMPT_CHANGE)

        return (current_scope() or self._ctx.scope).effect(remove)

    def tools(self, provider: Callable[[], list[ToolSchema]]) -> Disposer:
        """Add a tool-schema contributor (the tool registry registers one)."""
        self._providers.append(provider)

        def remove() -> None:
            if provider in self._providers:
                self._providers.remove(provider)

        return (current_scope() or self._ctx.scope).effect(remove)

    async def assemble(self, agent: Agent | None = None) -> PromptAssembly:
        """The sections and tool schemas for one model call of *agent* (through ``system-prompt/assemble``)."""
        sections = sorted(self._sections, key=lambda s: s.order)
        assembly = PromptAssembly(
            sections=[PromptSection(s.name, s.order, s.text() if callable(s.text) else s.text) for s in sections],
            tools=[cast(ToolSchema, copy_json(schema)) for provider in self._providers for schema in provider()],
            agent=agent,
        )

        async def identity(value: PromptAssembly) -> PromptAssembly:
            return value

        return await self._ctx.waterfall(ev.SYSTEM_PROMPT_ASSEMBLE, assembly, default=identity)


@plugin("system_prompt")
def system_prompt_plugin(ctx: Context, config: object) -> None:
    ctx.provide("system_prompt", SystemPrompt(ctx))
