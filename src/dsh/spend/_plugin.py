"""The ``spend`` plugin: budgets in dollars and tokens, checked once per step, enforced at step boundaries.

Seams (none of them per chunk): ``session/event`` (``usage``, ``subagent/usage``, ``turn/start`` and this package's
own events; never called for text chunks), ``agent/request`` (the model of the step; no model call starts once a
budget is reached), the tool pipeline's ``limits`` stage (no tool call starts once a budget is reached: it is
answered with an error result, so the log stays balanced), ``agent/turn-continuation`` (a listener: the turn
does not go on once a budget is reached; the warnings are said here), ``agent/created`` / ``agent/disposed``.

Guarantees:

* A sub-agent's session (its header names ``parent_session``) has no ledger of its own: its steps are checked
  against its parent's, and its usage reaches the parent's through the ``subagent/usage`` events the sub-agents
  plugin copies into the parent's log.
* When a budget stops a turn, the session's log gets one ``spend/stop`` event (turn, budget, limit, spent and the
  message saying how to raise it) before the turn's ``turn/end``; a turn that ends without it was not stopped by a
  budget. When the budget is already reached as a turn starts (a session budget), the first step's model call is
  refused with :data:`BUDGET_CODE` after that event: the turn ends with that error, no model was called.
* Each warning (``warn_at`` of a budget) and each "cannot be enforced" (a dollar budget, a model without a price)
  is said once per session: a ``session/notice`` (fallback: a visible message), remembered in the log as
  ``spend/said`` so a resumed session does not say it again.
* ``/budget`` settings are stored in the log (``spend/limits``) and hold after a resume; limits given by
  :meth:`Spend.limit_run` (``dsh exec --max-cost``) hold for this process only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from dsh import events as ev
from dsh._log import get_logger
from dsh.errors import DshError
from dsh.kernel import plugin
from dsh.notices import Notice, post_notice
from dsh.services.sessions import ignores_text_chunks
from dsh.spend._config import BUDGETS, SpendConfig
from dsh.spend._ledger import Ledger, Reached, format_amount, raise_hint

if TYPE_CHECKING:
    from dsh.kernel import Context, Next
    from dsh.services.agents import Agent
    from dsh.services.llm import GenerateRequest, Price, Usage
    from dsh.services.sessions import Session, SessionEvent
    from dsh.services.tools import ToolExecution, ToolResult

__all__ = [
    "BUDGET_CODE",
    "LIMITS_EVENT",
    "SAID_EVENT",
    "STOP_EVENT",
    "Spend",
    "spend_plugin",
    "stop_message",
]

log = get_logger("dsh.spend")

STOP_EVENT = "spend/stop"
LIMITS_EVENT = "spend/limits"
SAID_EVENT = "spend/said"
BUDGET_CODE = "BUDGET_REACHED"
"""The error code of a model call refused because a budget is reached, and of the tool calls refused so."""
_USAGE_EVENT = "subagent/usage"  # dsh.subagents.USAGE_EVENT: the sub-agents plugin need not be loaded
_SOURCE = "budgets"


def stop_message(reached: Reached) -> str:
    """What the user is told when *reached* stops a turn: which budget, how much, how to raise it."""
    name = reached.budget
    scope = "turn" if name.startswith("turn_") else "session"
    return (
        f"Stopped: the {scope} budget of {format_amount(name, reached.limit)} was reached "
        f"({format_amount(name, reached.spent)} spent). Raise it with {raise_hint(name, reached.limit)}."
    )


def _unpriced_notice(session_id: str, model: str) -> Notice:
    return Notice(
        session_id,
        "warning",
        f"The cost budget cannot be enforced for {model}: its price is unknown",
        "Token budgets still hold. Give its price in the configuration file "
        "(providers.<name>.prices.<model>: {input, output}, US dollars per million tokens).",
        _SOURCE,
        "message",
    )


class Spend:
    """``ctx.spend``: each top-level session's ledger, and the budget checks (see the module docstring)."""

    def __init__(self, ctx: Context, config: SpendConfig) -> None:
        self._ctx = ctx
        self._config = config
        self._ledgers: dict[str, Ledger] = {}
        self._parents: dict[str, str] = {}
        """Sub-agent session → its parent session."""
        self._sessions: dict[str, Session] = {}

    # -- ledgers ----------------------------------------------------------------------------------------

    def ledger(self, session_id: str) -> Ledger | None:
        """The ledger *session_id*'s spend counts against (its parent's for a sub-agent)."""
        return self._ledgers.get(self._parents.get(session_id, session_id))

    def _root(self, session_id: str) -> str:
        return self._parents.get(session_id, session_id)

    def on_agent_created(self, agent: Agent) -> None:
        session = agent.session
        parent = session.header.parent_session
        if parent is not None:
            self._parents[session.id] = parent
            return
        if session.id in self._ledgers:
            return
        self._sessions[session.id] = session
        ledger = self._ledgers[session.id] = Ledger(defaults=self._config.limits(), warn_at=self._config.warn_at)
        ledger.model = agent.options.model
        for event in session.events_without_chunks():  # once, at open: never on the per-step path
            self._account(ledger, event)

    def on_agent_disposed(self, agent: Agent) -> None:
        self._ledgers.pop(agent.session.id, None)
        self._sessions.pop(agent.session.id, None)
        self._parents.pop(agent.session.id, None)

    def _price(self, model: str) -> Price | None:
        context = self._ctx.get("context")
        if context is not None:
            price: Price | None = context.price(model)
            return price
        from dsh.services.llm import builtin_price

        return self._ctx.llm.model_info(model).price or builtin_price(model)

    def _account(self, ledger: Ledger, event: SessionEvent) -> None:
        kind, data = event.type, event.data
        if kind == "usage":
            model = ledger.model
            ledger.add(cast("Usage", data.get("usage") or {}), self._price(model) if model else None, model)
        elif kind == _USAGE_EVENT:
            model = data.get("model") if isinstance(data.get("model"), str) else ledger.model
            ledger.add(cast("Usage", data.get("usage") or {}), self._price(model) if model else None, model)
        elif kind == "turn/start":
            turn = data.get("turn")
            ledger.start_turn(turn if isinstance(turn, int) else 0)
        elif kind == LIMITS_EVENT:
            limits = data.get("limits")
            if isinstance(limits, dict):
                for name, value in limits.items():
                    if name in (*BUDGETS, "warn_at") and (value is None or isinstance(value, int | float)):
                        ledger.set_override(name, value)
        elif kind == SAID_EVENT:
            what = data.get("what")
            if isinstance(what, str):
                ledger.said.add(what)
        elif kind == STOP_EVENT:
            turn = data.get("turn")
            ledger.stopped = turn if isinstance(turn, int) else None

    @ignores_text_chunks
    def on_session_event(self, session: Session, event: SessionEvent) -> None:
        """``session/event``: O(1) for every event; only usage, turn starts and this package's events count."""
        ledger = self._ledgers.get(session.id)
        if ledger is not None and event.type in _COUNTED:
            self._account(ledger, event)

    # -- what front ends ask ----------------------------------------------------------------------------

    def figures(self, session_id: str) -> dict[str, dict[str, float]]:
        """``{budget: {limit, spent}}`` of the budgets in force for *session_id* (empty: none set or unknown)."""
        ledger = self.ledger(session_id)
        return ledger.figures() if ledger is not None else {}

    def describe(self, session_id: str) -> str:
        """One line for ``/status``."""
        ledger = self.ledger(session_id)
        return ledger.describe() if ledger is not None else "unknown"

    def set_limit(self, session: Session, budget: str, value: float | None) -> None:
        """``/budget NAME VALUE``: store the setting in *session*'s log (None: no limit for that budget). Raises
        ``ValueError`` for an unknown budget or a value that is not positive (``warn_at``: in (0, 1])."""
        if budget not in (*BUDGETS, "warn_at"):
            raise ValueError(f"unknown budget {budget!r}: one of {', '.join((*BUDGETS, 'warn_at'))}")
        if value is not None and (value <= 0 or (budget == "warn_at" and value > 1)):
            raise ValueError(f"{budget} must be {'in (0, 1]' if budget == 'warn_at' else 'positive'}")
        if value is not None and budget.endswith("_tokens"):
            value = int(value)
        session.append(LIMITS_EVENT, {"limits": {budget: value}})

    def limit_run(self, session_id: str, limits: dict[str, float]) -> None:
        """Limits of this process only for *session_id* (``dsh exec --max-cost``): never stored in its log."""
        ledger = self.ledger(session_id)
        if ledger is not None:
            ledger.set_run(limits)

    # -- the checks -------------------------------------------------------------------------------------

    def _say(self, agent: Agent, ledger: Ledger) -> None:
        """Warnings and "cannot be enforced", each once per session (a notice, remembered in the log)."""
        root = self._root(agent.session.id)
        session = self._sessions.get(root)
        limits = ledger.limits()
        said: list[tuple[str, Notice]] = []
        if "turn_usd" in limits or "session_usd" in limits:
            said.extend(
                (f"unpriced:{model}", _unpriced_notice(root, model))
                for model in ledger.unpriced
                if f"unpriced:{model}" not in ledger.said
            )
        for warning in ledger.to_warn():
            name = warning.budget
            scope = "turn" if name.startswith("turn_") else "session"
            said.append(
                (
                    f"warn:{name}",
                    Notice(
                        root,
                        "warning",
                        f"{int(warning.spent / warning.limit * 100)} % of the {scope} budget spent: "
                        f"{format_amount(name, warning.spent)} of {format_amount(name, warning.limit)}",
                        f"The turn stops at the limit. Raise it with {raise_hint(name, warning.limit)}.",
                        _SOURCE,
                        "message",
                    ),
                )
            )
        for what, notice in said:
            ledger.said.add(what)
            if session is not None:
                session.append(SAID_EVENT, {"what": what})
            post_notice(self._ctx, notice)

    def _stop(self, agent: Agent, turn: int, ledger: Ledger, reached: Reached) -> None:
        if ledger.stopped == turn and agent.session.id == self._root(agent.session.id):
            return
        data = {"turn": turn, **reached.to_json(), "message": stop_message(reached)}
        agent.session.append(STOP_EVENT, data)
        if agent.session.id == self._root(agent.session.id):
            ledger.stopped = turn
        log.info("budget reached", session_id=agent.session.id, turn=turn, budget=reached.budget)

    async def on_request(
        self,
        agent: Agent,
        turn: int,
        step: int,
        request: GenerateRequest,
        next_: Next[GenerateRequest, GenerateRequest],
    ) -> GenerateRequest:
        """``agent/request``: no model call once a budget is reached (the turn ends with :data:`BUDGET_CODE`)."""
        ledger = self.ledger(agent.session.id)
        if ledger is not None:
            reached = ledger.reached()
            if reached is not None:
                self._stop(agent, turn, ledger, reached)
                raise DshError(stop_message(reached), BUDGET_CODE)
        request = await next_(request)
        if ledger is not None and agent.session.id in self._ledgers:
            ledger.model = request.model
        return request

    async def gate(self, execution: ToolExecution, next_: Next[ToolExecution, ToolResult]) -> ToolResult:
        """The ``limits`` stage: a call made once a budget is reached is answered, not run."""
        agent = execution.agent
        ledger = self.ledger(agent.session.id) if agent is not None else None
        reached = ledger.reached() if ledger is not None else None
        if reached is None:
            return await next_(execution)
        from dsh.services.tools import ToolResult

        text = f"Not run: {stop_message(reached).removeprefix('Stopped: ')}"
        return ToolResult(
            execution.call_id,
            [{"type": "text", "text": text}],
            is_error=True,
            error={"name": "BudgetReached", "code": BUDGET_CODE},
        )

    async def on_continuation(self, agent: Agent, turn: int, default: bool, next_: Next[bool, bool]) -> bool:
        """``agent/turn-continuation`` (a listener: it never decides that a turn goes on): say the warnings, and
        end the turn once a budget is reached."""
        decision = await next_(default)
        ledger = self.ledger(agent.session.id)
        if ledger is None or not ledger.limits():  # no budget set: nothing to say or stop
            return decision
        self._say(agent, ledger)
        reached = ledger.reached()
        if reached is None or not decision:
            return decision
        self._stop(agent, turn, ledger, reached)
        return False


_COUNTED = frozenset({"usage", _USAGE_EVENT, "turn/start", LIMITS_EVENT, SAID_EVENT, STOP_EVENT})


@plugin("spend", inject=("agents", "tools", "llm"), config=SpendConfig)
def spend_plugin(ctx: Context, config: SpendConfig) -> None:
    """Provide ``ctx.spend`` and enforce the budgets (see the module docstring); ``/budget`` when commands exist."""
    spend = Spend(ctx, config)
    ctx.on(ev.AGENT_CREATED, spend.on_agent_created)
    ctx.on(ev.AGENT_DISPOSED, spend.on_agent_disposed)
    ctx.on(ev.SESSION_EVENT, spend.on_session_event)
    ctx.on(ev.AGENT_REQUEST, spend.on_request)
    # outermost: whatever an inner listener decides (a Stop hook that blocks the stop), a reached budget ends the turn
    ctx.on(ev.AGENT_TURN_CONTINUATION, spend.on_continuation, prepend=True)
    ctx.tools.stage("limits", spend.gate)
    ctx.provide("spend", spend)
    ctx.plugin(_budget_command, spend)


def _parse_value(budget: str, raw: str) -> float | None:
    if raw.lower() in ("off", "none", "unset"):
        return None
    text = raw.removeprefix("$").replace(",", "").replace("_", "")
    if text.endswith("%") and budget == "warn_at":
        return float(text[:-1]) / 100
    return float(text)


@plugin("spend.command", inject=("commands",))
def _budget_command(ctx: Context, spend: Spend) -> None:
    """``/budget``: show the session's budgets and spend; ``/budget NAME VALUE`` sets one (``off`` removes it)."""
    from dsh.commands import CommandResult, Invocation

    async def budget(invocation: Invocation) -> CommandResult:
        session = invocation.agent.session
        argv = invocation.argv
        if len(argv) == 2:
            name = argv[0]
            try:
                value = _parse_value(name, argv[1])
                spend.set_limit(session, name, value)
            except ValueError as error:
                return CommandResult(text=f"{error}. Usage: /budget [NAME VALUE|off]")
            shown = "off" if value is None else format_amount(name, value) if name != "warn_at" else f"{value:g}"
            return CommandResult(text=f"Budget {name} set to {shown}.\nBudgets: {spend.describe(session.id)}")
        if argv:
            return CommandResult(
                text=f"Usage: /budget [NAME VALUE|off], NAME one of {', '.join((*BUDGETS, 'warn_at'))}"
            )
        ledger = spend.ledger(session.id)
        lines = [f"Budgets: {spend.describe(session.id)}"]
        if ledger is not None:
            lines.append(
                f"Spent: this turn {format_amount('turn_usd', ledger.turn_usd)}, "
                f"{format_amount('turn_tokens', ledger.turn_tokens)}; this session "
                f"{format_amount('session_usd', ledger.session_usd)}, "
                f"{format_amount('session_tokens', ledger.session_tokens)}"
            )
            lines.append(f"Warning at {ledger.warn_fraction():.0%} of a budget.")
            if ledger.unpriced:
                lines.append(f"No price known for {', '.join(ledger.unpriced)}: dollar figures leave its calls out.")
        lines.append(
            "Set one with /budget NAME VALUE (turn_usd, session_usd, turn_tokens, session_tokens, warn_at); off removes it."
        )
        return CommandResult(text="\n".join(lines))

    ctx.commands.register("budget", "Show the session's spend budgets, or set one", budget, "[name value]")
