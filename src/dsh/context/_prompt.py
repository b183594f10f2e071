"""The built-in system prompt sections: each session's snapshot (environment, git summary, project
instructions), the sections rendered from it, the ``system_prompt_sections`` overrides, and the record of which
instruction files the prompt uses.

Guarantees: nothing here runs a subprocess or touches the network on the per-step path (the git summary is
computed once per session, off that path); the rendered sections are a pure function of (tools given to the
model, the session snapshot, the config), so the system prompt is byte-identical for the whole life of a
session: what can change mid-session (the mode, the date) reaches the model as a message (:mod:`._notes`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import anyio

from dsh._log import get_logger
from dsh.context._config import ContextConfig
from dsh.context._environment import snapshot
from dsh.context._gitstatus import GIT_DEADLINE, git_summary
from dsh.context._instructions import find_instruction_files, load_instructions
from dsh.context._modes import ModeLookup
from dsh.context._sections import IDENTITY, ORDER, tools_text
from dsh.context._state import INSTRUCTIONS_EVENT, SessionContext, SessionStates
from dsh.services.system_prompt import PromptAssembly, PromptSection

if TYPE_CHECKING:
    from dsh.kernel import Context, Next
    from dsh.services.agents import Agent
    from dsh.services.llm import GenerateRequest, ToolSchema

__all__ = ["PromptSections"]

log = get_logger("dsh.context")
EXTRA_ORDER = 900
"""Where a configured section whose name no plugin registered goes (after the built-in ones)."""
TOOLS_TEXTS = 64
"""Tool lists whose rendered section is kept (a handful per process: the global set, each session's MCP set)."""


class PromptSections:
    """The built-in sections and the per-session snapshot they are rendered from."""

    def __init__(self, ctx: Context, config: ContextConfig, sessions: SessionStates, modes: ModeLookup) -> None:
        self._ctx = ctx
        self.config = config
        self._sessions = sessions
        self._modes = modes
        self._tools_texts: dict[tuple[tuple[str, str], ...], str] = {}

    def open_session(self, session_id: str, cwd: str | None, roots: tuple[str, ...] = ()) -> SessionContext:
        """Snapshot the environment and project instructions of a session in *cwd* (start, resume, load)."""
        state = SessionContext(session_id)
        if cwd is not None:
            environment = snapshot(cwd, roots)
            files = find_instruction_files(cwd, environment.git.root if environment.git else None)
            state.environment = environment
            state.instructions = load_instructions(files, self.config.instructions_cap)
        self._sessions[session_id] = state
        return state

    def start_git(self, state: SessionContext) -> None:
        """Compute the environment's git summary in the background (the first assembly waits a bounded time)."""
        if state.environment is not None and state.environment.git is not None:
            state.git_ready = anyio.Event()
            self._ctx.spawn(self._load_git, state, state.environment.git.root, name=f"git-summary:{state.session_id}")

    async def _load_git(self, state: SessionContext, root: str) -> None:
        """The environment's git summary, computed once (two short git commands), off the per-step path."""
        ready = state.git_ready
        try:
            summary = await git_summary(root)
            if state.git_ready is ready:  # not given up meanwhile: the section must not change once sent
                state.git_summary = summary
        except Exception:
            log.warning("git summary failed", session_id=state.session_id)
        finally:
            if ready is not None:
                ready.set()

    async def _await_git(self, state: SessionContext) -> None:
        ready = state.git_ready
        if ready is None or ready.is_set():
            return
        with anyio.move_on_after(GIT_DEADLINE + 1.0):
            await ready.wait()
        if not ready.is_set():
            state.git_ready = None  # given up: the summary stays out for the whole session

    def _tools_section(self, tools: list[ToolSchema]) -> str:
        """The tools section for *tools* (cached per tool list: the same list renders the same bytes)."""
        key = tuple((tool["name"], tool.get("description", "")) for tool in tools)
        text = self._tools_texts.get(key)
        if text is None:
            if len(self._tools_texts) >= TOOLS_TEXTS:
                self._tools_texts.clear()
            text = self._tools_texts[key] = tools_text(tools)
        return text

    def with_session_tools(self, state: SessionContext, request: GenerateRequest) -> GenerateRequest:
        """The step's system prompt with its tools section listing every tool the request carries: tools
        registered for the session alone (MCP servers') are added on ``agent/request``, after the prompt was
        rendered from the global ones, and the model should find them in the section like the built-in ones.
        The section is replaced in place (same position, so the prefix before it is unchanged); a section that
        the configuration replaced or removed is left as it is."""
        before = state.tools_section
        if not before or not request.tools or not request.system:
            return request
        after = self._tools_section(request.tools)
        if after == before or before not in request.system:
            return request
        return replace(request, system=request.system.replace(before, after, 1))

    def builtin_sections(self, assembly: PromptAssembly) -> list[PromptSection]:
        """The built-in sections for *assembly* (its tools, its agent's session)."""
        sections = [PromptSection("identity", ORDER["identity"], IDENTITY)]
        tools = self._tools_section(assembly.tools)
        sections.append(PromptSection("tools", ORDER["tools"], tools))
        agent = assembly.agent
        state = self._sessions.get(agent.session.id) if agent is not None else None
        if state is not None:
            state.tools_section = tools
        if state is not None and state.environment is not None:
            sections.append(
                PromptSection("environment", ORDER["environment"], state.environment.render(state.git_summary))
            )
            if state.instructions.text:
                sections.append(PromptSection("instructions", ORDER["instructions"], state.instructions.text))
        return sections

    def apply_overrides(self, sections: list[PromptSection]) -> list[PromptSection]:
        """``system_prompt_sections``: ``false`` removes a section, a string replaces its text."""
        overrides = self.config.sections
        if not overrides:
            return sections
        out: list[PromptSection] = []
        seen: set[str] = set()
        for section in sections:
            seen.add(section.name)
            override = overrides.get(section.name)
            if override is False:
                continue
            if isinstance(override, str):
                section = PromptSection(section.name, section.order, override)
            out.append(section)
        for name, override in overrides.items():
            if name not in seen and isinstance(override, str):
                out.append(PromptSection(name, EXTRA_ORDER, override))
        return out

    async def on_assemble(
        self, assembly: PromptAssembly, next_: Next[PromptAssembly, PromptAssembly]
    ) -> PromptAssembly:
        """``system-prompt/assemble``: the built-in sections join the registered ones, then the overrides."""
        agent = assembly.agent
        state = self._sessions.get(agent.session.id) if agent is not None else None
        if state is not None:
            await self._await_git(state)
        assembly.sections = assembly.sections + self.builtin_sections(assembly)
        result = await next_(assembly)
        result.sections = sorted(self.apply_overrides(result.sections), key=lambda s: s.order)
        return result

    def record_instructions(self, agent: Agent, state: SessionContext | None) -> None:
        """Record which instruction files this session's prompt uses (once, and again when they change)."""
        if state is not None and state.environment is not None:
            files = list(state.instructions.files)
            if state.recorded_files != files and (files or state.recorded_files is not None):
                state.recorded_files = files
                agent.session.append(
                    INSTRUCTIONS_EVENT, {"files": files, "truncated": list(state.instructions.truncated)}
                )
