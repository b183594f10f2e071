"""The ``policy`` service and plugin: each session's mode and rules, and the pipeline on ``tools/execute``.

Guarantees:

* ``ctx.policy.session(id)`` is the session's :class:`SessionPolicy`, made on first use with the configured mode
  and the ``permissions:`` rules; front ends switch its ``mode`` (the ACP pickers, ``dsh prompt --mode``) and
  :meth:`Policies.restore` gives a loaded session back the "always" rules of its log. A session's state is
  dropped when its agent is disposed.
* The pipeline (:mod:`._pipeline`) is prepended on ``tools/execute`` when the plugin applies, so it runs outside
  the listeners loaded before it.
* The context plugin's mode section reads each session's mode from here (every front end: the ACP pickers,
  ``dsh exec --mode``).
* A tool whose ``meta["modes"]`` names modes is offered to the model only while its session is in one of them
  (``exit_plan_mode``: plan mode only): it is left out of the prompt assembly (the tools section and the
  request's tools) by a ``system-prompt/assemble`` listener, prepended so that the sections are made from what
  is left.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dsh import events as ev
from dsh.kernel import plugin
from dsh.policy._modes import DEFAULT_MODE, MODE_IDS
from dsh.policy._rules import Rule, SessionPolicy, parse_pattern, rules_from_log

if TYPE_CHECKING:
    from dsh.kernel import Context, Next
    from dsh.services.agents import Agent
    from dsh.services.system_prompt import PromptAssembly

__all__ = ["PolicyConfig", "Policies", "policy_plugin"]

UNATTENDED = (
    "{tool} was not allowed: {why}, and nobody can approve it in this run. It did not run. Continue without it, "
    "or say in your answer what you need the user to allow."
)


@dataclass(frozen=True)
class PolicyConfig:
    """``mode``: new sessions' mode; ``allow`` / ``ask`` / ``deny``: permission patterns (``tool`` or
    ``tool(scope)``, see :mod:`dsh.policy._rules`); ``unattended``: the model's message for a call that would ask
    when nobody can be asked (``{tool}`` and ``{why}`` are filled in; a front end says how to allow it)."""

    mode: str = DEFAULT_MODE
    allow: tuple[str, ...] = ()
    ask: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    unattended: str = UNATTENDED
    reads_anywhere: bool = False
    """Reads and searches outside the session's roots are allowed without asking (``--allow-reads``)."""
    rules: tuple[Rule, ...] = field(default=(), init=False)

    def __post_init__(self) -> None:
        if self.mode not in MODE_IDS:
            raise ValueError(f"unknown mode {self.mode!r}; choose one of {', '.join(sorted(MODE_IDS))}")
        rules = [
            *(parse_pattern(p, "deny") for p in self.deny),
            *(parse_pattern(p, "ask") for p in self.ask),
            *(parse_pattern(p, "allow") for p in self.allow),
        ]
        object.__setattr__(self, "rules", tuple(rules))


class Policies:
    """The ``policy`` service."""

    def __init__(self, config: PolicyConfig) -> None:
        self.config = config
        self._sessions: dict[str, SessionPolicy] = {}
        self._owners: dict[str, str] = {}

    def link(self, child: str, parent: str) -> Callable[[], None]:
        """Make *child* (a sub-agent's session) use *parent*'s policy until the returned unlink is called: the
        same :class:`SessionPolicy` object (the parent's mode and rules, live: a mode switch or an "always"
        answer holds for both), and :meth:`owner` names the parent, so the pipeline asks the user through the
        parent's session. A child can therefore never be allowed more than its parent; there is no second gate."""
        owner = self.owner(parent)
        self._owners[child] = owner

        def unlink() -> None:
            if self._owners.get(child) == owner:
                del self._owners[child]

        return unlink

    def owner(self, session_id: str) -> str:
        """The session whose policy *session_id* uses and through which its calls ask: itself, or its parent."""
        return self._owners.get(session_id, session_id)

    def session(self, session_id: str) -> SessionPolicy:
        session_id = self.owner(session_id)
        state = self._sessions.get(session_id)
        if state is None:
            state = self._sessions[session_id] = SessionPolicy(
                self.config.mode, list(self.config.rules), reads_anywhere=self.config.reads_anywhere
            )
        return state

    def restore(self, session_id: str, events: Iterable[Any]) -> SessionPolicy:
        """Give *session_id* the configured rules plus the "always" rules recorded in *events* (its log)."""
        state = self.session(session_id)
        state.rules = [*self.config.rules, *rules_from_log(events)]
        return state

    def forget(self, session_id: str) -> None:
        """Drop *session_id*'s state; a linked child only loses its link, never its parent's policy."""
        if self._owners.pop(session_id, None) is None:
            self._sessions.pop(session_id, None)


CHANGED_RULES_TITLE = "Permission rules now read with the one glob dialect (RFC 0041)"


def _announce_changed_rules(ctx: Context, rules: Iterable[Rule]) -> None:
    """Say once, when a configured path rule means something else under the one glob dialect: a warning in the
    log at start-up, and a notice on the first turn of the first session (a notice belongs to a session)."""
    from dsh.policy._migration import meaning_changes

    changes = meaning_changes(rules)
    if not changes:
        return
    from dsh._log import get_logger

    get_logger("dsh.policy").warning(CHANGED_RULES_TITLE + ": " + " | ".join(changes))
    told = False

    def turn_started(agent: Agent, turn: int) -> None:
        nonlocal told
        if told:
            return
        told = True
        from dsh.notices import Notice, post_notice

        description = "\n".join(f"- {line}" for line in changes)
        post_notice(
            ctx,
            Notice(agent.session.id, "warning", CHANGED_RULES_TITLE, description, source="policy", fallback="message"),
        )

    ctx.on(ev.AGENT_TURN_START, turn_started)


@plugin("policy", inject=("tools",))
def policy_plugin(ctx: Context, config: PolicyConfig | None) -> None:
    """Provide ``policy`` and add its stages (``prepare``, ``decide``, ``ask``) to the tool call pipeline (see
    :mod:`dsh.policy`)."""
    from dsh.policy._pipeline import Pipeline

    policies = Policies(config or PolicyConfig())
    ctx.provide("policy", policies)
    Pipeline(ctx, policies, policies.config.unattended).install(ctx.tools)

    def disposed(agent: Agent) -> None:
        policies.forget(agent.session.id)

    async def offered(assembly: PromptAssembly, next_: Next[PromptAssembly, PromptAssembly]) -> PromptAssembly:
        agent = assembly.agent
        if agent is not None:
            session_id = agent.session.id
            mode = policies.session(session_id).mode
            kept = []
            for schema in assembly.tools:
                tool = ctx.tools.get(schema["name"], session_id)
                modes = tool.meta.get("modes") if tool is not None else None
                if modes is None or mode in modes:
                    kept.append(schema)
            assembly.tools = kept
        return await next_(assembly)

    ctx.on(ev.AGENT_DISPOSED, disposed)
    ctx.on(ev.SYSTEM_PROMPT_ASSEMBLE, offered, prepend=True)
    _announce_changed_rules(ctx, policies.config.rules)
    context = ctx.get("context")  # loaded before this plugin by load_core
    if context is not None:  # the system prompt's mode section says the session's mode, whatever the front end
        context.mode_provider(lambda session_id: policies.session(session_id).mode)
