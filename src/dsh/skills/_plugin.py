"""The ``skills`` plugin: the skills section of the system prompt, the ``skill`` tool, a slash command per skill,
``/skills``, and the ``allowed-tools`` narrowing (RFC 0035).

Guarantees:

* Each session's skills are discovered once, at its first prompt assembly, and kept for the life of the agent (a
  skipped skill file is one ``session/notice`` then, so an editor's user sees it, not only the log):
  the ``skills`` section (order :data:`SKILLS_ORDER`, between the project instructions and the configured
  prompt) lists name and description only and is the same bytes on every step, so the prompt cache holds. It is
  added only when the model is given the ``skill`` tool; ``system_prompt_sections: {skills: false}`` removes it.
  A session without skills is given neither the section nor the ``skill`` tool (its prompt is as before).
* ``skill`` loads one of the session's skills by name: the ``SKILL.md`` is read again through the same safe
  loader (an edit since the session began is seen; a file that no longer passes is an error result), and the
  result gives its body, its folder (other files are read by path relative to it with ``read_file``, scripts run
  with ``run_command`` under the policy like any command) and a short list of its files.
* Every skill is a slash command (``/name args``) in the session's ``available_commands_update``: it sends the
  skill's text and the arguments as the user's prompt. A registered command or a Markdown command of the same
  name shadows it. ``/skills`` lists the session's skills with their source.
* ``allowed-tools``: once a skill that gives it is loaded (tool or command), until the turn ends, a call of a tool
  outside it is refused in the ``limits`` stage before the policy sees it (:mod:`._narrow`); the policy still
  judges every call it lets through, so a skill narrows and never widens.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from dsh import events as ev
from dsh._log import get_logger
from dsh.kernel import plugin
from dsh.skills._config import SkillsConfig
from dsh.skills._discover import Skill, discover_skills, load_skill
from dsh.skills._narrow import Narrowing, permits

if TYPE_CHECKING:
    from dsh.commands import Command, CommandResult, Invocation
    from dsh.kernel import Context, Next
    from dsh.services.agents import Agent
    from dsh.services.system_prompt import PromptAssembly
    from dsh.services.tools import ToolExecution, ToolResult

__all__ = ["SKILLS_ORDER", "SKILL_TOOL", "Skills", "skills_plugin", "skills_text"]

log = get_logger("dsh.skills")
SKILL_TOOL = "skill"
SKILLS_ORDER = 550
"""After the project instructions (500), before the configured prompt: see ``dsh.context``'s order table."""
MAX_LISTED_FILES = 40
DESCRIPTION = (
    "Load a skill (instructions for a particular kind of task, listed in the Skills section) by its name before "
    "you do a task that matches its description. The result is the skill's text and the folder of its other "
    "files: read them with read_file and run its scripts with run_command, by path relative to that folder."
)


class SkillArguments(BaseModel):
    name: str = Field(description="The skill's name, as listed in the Skills section.")


def skills_text(skills: list[Skill]) -> str:
    """The system prompt's skills section: one line per skill, name and description only (empty without skills)."""
    if not skills:
        return ""
    lines = [
        "# Skills",
        "Skills are instructions for particular tasks. When a task matches a skill's description, load it with the "
        "skill tool first and follow it. Available skills:",
    ]
    lines += [f"- {skill.name}: {skill.description}" for skill in skills]
    return "\n".join(lines)


def _files(directory: Path) -> list[str]:
    """Up to :data:`MAX_LISTED_FILES` files of the skill's folder (relative, no hidden ones, no symlinks followed)."""
    out: list[str] = []
    for top, dirs, files in os.walk(directory, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.startswith(".") or (top == str(directory) and name == "SKILL.md"):
                continue
            out.append(os.path.relpath(os.path.join(top, name), directory))
            if len(out) >= MAX_LISTED_FILES:
                return out
    return out


class Skills:
    """Each session's skills and the narrowings of its current turn."""

    def __init__(self, ctx: Context, config: SkillsConfig) -> None:
        self._ctx = ctx
        self.config = config
        self._sessions: dict[str, list[Skill]] = {}
        self._narrowed: dict[str, list[Narrowing]] = {}

    def find(self, cwd: str | None) -> list[Skill]:
        """The skills a session in *cwd* would offer now (fresh from disk)."""
        if not self.config.enabled:
            return []
        return discover_skills(cwd, claude=self.config.claude)

    def of(self, agent: Agent) -> list[Skill]:
        """The session's skills, discovered at its first use and kept for the agent's life."""
        found = self._sessions.get(agent.session.id)
        if found is None:
            session_id = agent.session.id

            def skipped(path: Path, reason: str) -> None:  # the session's user sees it: one notice (and its log line)
                from dsh.notices import Notice, post_notice

                title = f"skipped a skill: {path} ({reason})"
                post_notice(self._ctx, Notice(session_id, "warning", title, source="skills"))

            cwd = agent.session.header.cwd
            enabled = self.config.enabled
            found = discover_skills(cwd, claude=self.config.claude, skipped=skipped) if enabled else []
            self._sessions[session_id] = found
        return found

    def forget(self, agent: Agent) -> None:
        self._sessions.pop(agent.session.id, None)
        self._narrowed.pop(agent.session.id, None)

    def end_turn(self, agent: Agent) -> None:
        self._narrowed.pop(agent.session.id, None)

    def narrowings(self, session_id: str) -> list[Narrowing]:
        return self._narrowed.get(session_id, [])

    def loaded(self, session_id: str, skill: Skill) -> None:
        """*skill* is being followed in this turn: its ``allowed-tools`` (if any) now narrow the calls."""
        if skill.allowed_tools is not None:
            self._narrowed.setdefault(session_id, []).append(skill.allowed_tools)

    def text(self, skill: Skill, session_id: str) -> str:
        """What the model is given for *skill* (read again through the safe loader)."""
        fresh, body = load_skill(skill.path, skill.root, skill.name, skill.origin, skill.source)
        self.loaded(session_id, fresh)
        head = [f'<skill name="{fresh.name}" folder="{fresh.directory}">']
        files = _files(fresh.directory)
        if files:
            head.append("Files of this skill (paths relative to its folder): " + ", ".join(files))
        if fresh.allowed_tools is not None:
            head.append("While you follow this skill you may call only: " + ", ".join(fresh.allowed_tools))
        return "\n".join(head) + "\n\n" + body.strip() + "\n</skill>"


def _refused(execution: ToolExecution, why: str) -> ToolResult:
    from dsh.services.tools import ToolResult

    return ToolResult(
        execution.call_id, [{"type": "text", "text": f"Error: {why}"}], is_error=True, error={"code": "SKILL_SCOPE"}
    )


@plugin("skills", inject=("tools", "commands"))
def skills_plugin(ctx: Context, config: SkillsConfig | None) -> None:
    from dsh.commands import Command, CommandResult
    from dsh.errors import ToolArgsError
    from dsh.services.system_prompt import PromptSection
    from dsh.services.tools import ToolCard, define_tool

    skills = Skills(ctx, config or SkillsConfig())
    ctx.provide("skills", skills)
    if not skills.config.enabled:
        return

    async def load(arguments: SkillArguments, execution: ToolExecution) -> str:
        agent = execution.agent
        offered = skills.of(agent) if agent is not None else skills.find(os.getcwd())
        skill = next((s for s in offered if s.name == arguments.name), None)
        if skill is None:
            names = ", ".join(s.name for s in offered) or "none"
            raise ToolArgsError(f"no skill named {arguments.name[:64]!r}; the skills here: {names}")
        return skills.text(skill, agent.session.id if agent is not None else "")

    def present(arguments: Any, cwd: str) -> ToolCard:
        name = arguments.get("name") if isinstance(arguments, dict) else None
        return ToolCard(title=f"Skill: {name or '?'}", kind="read")

    tool = define_tool(SKILL_TOOL, DESCRIPTION, SkillArguments, load)
    ctx.tools.register(replace(tool, meta={"kind": "read", "present": present, "concurrency_safe": True}))

    async def section(assembly: PromptAssembly, next_: Next[PromptAssembly, PromptAssembly]) -> PromptAssembly:
        # Outside the context plugin's listener (prepended after it), so the tools section it renders never lists
        # a ``skill`` tool the session does not get: a session without skills pays nothing for them.
        agent = assembly.agent
        added = False
        if agent is not None and any(schema["name"] == SKILL_TOOL for schema in assembly.tools):
            text = skills_text(skills.of(agent))
            if text:
                assembly.sections = [*assembly.sections, PromptSection("skills", SKILLS_ORDER, text)]
                added = True
            else:
                assembly.tools = [schema for schema in assembly.tools if schema["name"] != SKILL_TOOL]
        result = await next_(assembly)
        if added and not any(schema["name"] == SKILL_TOOL for schema in result.tools):  # a sub-agent without it
            result.sections = [section for section in result.sections if section.name != "skills"]
        return result

    async def narrow(execution: ToolExecution, next_: Next[ToolExecution, ToolResult]) -> ToolResult:
        agent = execution.agent
        narrowings = skills.narrowings(agent.session.id) if agent is not None else []
        if narrowings and not permits(narrowings, execution.name, execution.arguments):
            return _refused(
                execution,
                f"{execution.name} is not among the tools the skill you are following allows "
                f"({'; '.join(', '.join(n) for n in narrowings)})",
            )
        return await next_()

    def command(skill: Skill) -> Command:
        async def run(invocation: Invocation) -> CommandResult:
            text = skills.text(skill, invocation.agent.session.id)
            if invocation.args:
                text += f"\n\nFollow this skill for: {invocation.args}"
            return CommandResult(prompt=[{"type": "text", "text": text}])

        return Command(
            skill.name, skill.description, run, "[what to do]", origin="skill", meta={"path": str(skill.path)}
        )

    def source(cwd: str | None) -> list[Command]:
        return [command(skill) for skill in skills.find(cwd)]

    async def listing(invocation: Invocation) -> CommandResult:
        found = skills.find(invocation.controls.cwd)
        if not found:
            return CommandResult(text="No skills (looked in .dsh/skills, .agents/skills and the user's skills folder).")
        lines = [f"Skills ({len(found)}):"]
        lines += [f"- {s.name} ({s.origin}: {s.path}) — {s.description}" for s in found]
        return CommandResult(text="\n".join(lines))

    ctx.on(ev.SYSTEM_PROMPT_ASSEMBLE, section, prepend=True)
    ctx.on(ev.AGENT_DISPOSED, skills.forget)
    ctx.on(ev.AGENT_TURN_END, lambda agent, turn, reason: skills.end_turn(agent))
    ctx.tools.stage("limits", narrow)
    ctx.commands.add_source(source)
    ctx.commands.register("skills", "List the skills of this session with where they come from", listing)
