"""Questions to the user over ACP (the ``user/ask`` seam), and ``exit_plan_mode``.

Guarantees:

* A question goes out as ``elicitation/create`` (form mode, one ``answer`` field; an enum when there are choices)
  when the client advertised form elicitation, else as ``session/request_permission`` whose options are the
  choices. A free-text question to a client without elicitation is not sent: the model is told to ask in its reply.
* A question never outlives its turn: the turn's cancel withdraws the request (``$/cancel_request``) and the answer
  is "no answer". A declined, dismissed or failed request is "no answer" too, with the reason.
* ``exit_plan_mode`` (offered in every mode, it acts in plan mode only) shows the plan and asks which mode to switch to; the chosen mode is set
  exactly as the mode picker sets it (``current_mode_update`` and ``config_option_update`` go out); "stay"
  keeps plan mode. The plan is logged first (``plan/document``): a client with plan operations gets it as one
  Markdown ``plan_update`` before the question, and the question then names the plan (``_meta.dsh.planId``)
  instead of repeating it, so the plan is rendered once (RFC 0033); any other client sees it in the question.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dsh._log import get_logger
from dsh.frontends.acp._rpc import RpcError
from dsh.policy import MODES
from dsh.questions import Answer, Choice, Question, ask

if TYPE_CHECKING:
    from dsh.frontends.acp._ports import FrontendPort
    from dsh.kernel import CancelToken, Context, Next
    from dsh.services.tools import ToolDefinition, ToolExecution

__all__ = ["QuestionDesk", "exit_plan_mode_tool"]

log = get_logger("dsh.acp")
STAY = "stay"


class QuestionDesk:
    def __init__(self, frontend: FrontendPort) -> None:
        self._frontend = frontend

    def _elicitation(self) -> bool:
        elicitation = self._frontend.client_capabilities.get("elicitation")
        return isinstance(elicitation, dict) and isinstance(elicitation.get("form"), dict)

    async def ask(self, question: Question, next_: Next[Question, Answer]) -> Answer:
        """``user/ask``: answer the questions of this front end's sessions; others go down the chain."""
        record = self._frontend.session_record(question.session_id)
        if record is None:
            return await next_()
        if self._elicitation() and question.purpose == "question":
            answer = await self._elicit(question)
        elif question.choices:
            answer = await self._permission(question)
        else:
            return Answer(reason="this editor cannot take a free-text answer; ask the question in your reply")
        if question.purpose == "switch_mode" and answer.choice not in (None, STAY):
            try:
                self._frontend.pickers.switch_mode(record, answer.choice)
            except RpcError as exc:
                return Answer(reason=exc.message)
            self._frontend.pickers.announce(record)
        return answer

    async def _elicit(self, question: Question) -> Answer:
        field: dict[str, Any] = {"type": "string", "title": "Answer"}
        if question.choices:
            field["enum"] = [choice.label for choice in question.choices]
        params = {
            "sessionId": question.session_id,
            "toolCallId": question.call_id,
            "mode": "form",
            "message": question.text,
            "requestedSchema": {"type": "object", "properties": {"answer": field}, "required": ["answer"]},
        }
        result = await self._request("elicitation/create", params, question.signal)
        if result is _WITHDRAWN:
            return Answer(reason="the question was withdrawn (the turn was cancelled)")
        if result is None:
            return Answer(reason="the editor answered null")
        if isinstance(result, Answer):
            return result
        action = result.get("action") if isinstance(result, dict) else None
        if action != "accept":
            return Answer(reason=f"the user {'declined' if action == 'decline' else 'dismissed'} the question")
        content = result.get("content")
        value = content.get("answer") if isinstance(content, dict) else None
        if not isinstance(value, str):
            return Answer(reason="the editor sent no answer")
        for choice in question.choices:
            if choice.label == value:
                return Answer(choice=choice.id)
        return Answer(text=value)

    async def _permission(self, question: Question) -> Answer:
        switching = question.purpose == "switch_mode"
        options = [
            {"optionId": choice.id, "name": choice.label, "kind": "reject_once" if choice.id == STAY else "allow_once"}
            for choice in question.choices
        ]
        tool_call: dict[str, Any] = {
            "toolCallId": question.call_id,
            "title": question.text if len(question.text) <= 200 else question.text[:199] + "…",
            "kind": "switch_mode" if switching else "other",
            "status": "pending",
        }
        if switching and self._frontend.features.plan:  # links the question to the plan it is about
            from dsh.plans import PLAN_MODE_PLAN

            tool_call["_meta"] = {"dsh": {"planId": PLAN_MODE_PLAN}}
        params = {"sessionId": question.session_id, "toolCall": tool_call, "options": options}
        result = await self._request("session/request_permission", params, question.signal)
        if result is _WITHDRAWN:
            return Answer(reason="the question was withdrawn (the turn was cancelled)")
        if result is None:
            return Answer(reason="the editor answered null")
        if isinstance(result, Answer):
            return result
        outcome = result.get("outcome") if isinstance(result, dict) else None
        if not isinstance(outcome, dict) or outcome.get("outcome") != "selected":
            return Answer(reason="the user dismissed the question")
        choice = outcome.get("optionId")
        if choice not in {c.id for c in question.choices}:
            return Answer(reason=f"the editor answered with an unknown option {choice!r}")
        return Answer(choice=str(choice))

    async def _request(self, method: str, params: dict[str, Any], signal: CancelToken | None) -> Any:
        """The client's answer (None when it answered ``null``); :data:`_WITHDRAWN` when the turn was cancelled
        first (and the client did not answer within the grace); an :class:`Answer` when the request failed."""
        try:
            answered, answer = await self._frontend.connection.request_until(method, params, signal)
        except RpcError as exc:
            log.warning("question failed", method=method, error=exc.message)
            return Answer(reason=f"the editor could not ask: {exc.message}")
        return _WITHDRAWN if not answered or (signal is not None and signal.aborted) else answer


_WITHDRAWN: Any = object()
"""What :meth:`_request` returns when the turn was cancelled before the editor answered (a ``null`` answer is
not that: it is no answer, and the model is told so)."""


PLAN_EXIT_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"plan": {"type": "string", "description": "The plan to carry out, in Markdown."}},
    "required": ["plan"],
    "additionalProperties": False,
}


def exit_plan_mode_tool(ctx: Context, frontend: FrontendPort) -> ToolDefinition:
    """``exit_plan_mode``: present the plan and ask the user which mode to switch to (plan mode only)."""
    from dsh.services.tools import ToolCard, ToolDefinition

    async def run(arguments: Any, execution: ToolExecution) -> str:
        plan = arguments.get("plan") if isinstance(arguments, dict) else None
        if not isinstance(plan, str) or not plan.strip():
            from dsh.errors import ToolArgsError

            raise ToolArgsError("invalid arguments for exit_plan_mode: 'plan' must be a non-empty string")
        agent = execution.agent
        record = frontend.session_record(agent.session.id) if agent is not None else None
        if record is None or record.policy.mode != "plan":
            return "Plan mode is not on; carry on."
        choices = tuple(Choice(mode.id, f"Yes, switch to {mode.name}") for mode in MODES if mode.id != "plan")
        from dsh.plans import PLAN_DOCUMENT_EVENT, PLAN_MODE_PLAN

        record.handle.agent.session.append(PLAN_DOCUMENT_EVENT, {"plan_id": PLAN_MODE_PLAN, "content": plan.strip()})
        shown = frontend.features.plan  # the plan went out as a plan_update: the question does not repeat it
        question = Question(
            record.id,
            execution.call_id,
            "Ready to code? The plan is shown above."
            if shown
            else "Ready to code? Here is the plan:\n\n" + plan.strip(),
            (*choices, Choice(STAY, "No, keep planning")),
            purpose="switch_mode",
            signal=execution.signal,
        )
        answer = await ask(ctx, question)
        if answer.choice is None:
            return f"Still in plan mode: {answer.reason or 'no answer'}. Do not make changes."
        if answer.choice == STAY:
            return "The user wants to keep planning: stay in plan mode, refine the plan, do not make changes."
        return f"The user approved the plan; the mode is now {answer.choice}. Carry out the plan."

    def present(arguments: Any, cwd: str) -> Any:
        return ToolCard(title="Ready to code?", kind="switch_mode")

    return ToolDefinition(
        "exit_plan_mode",
        "In plan mode only: present your finished plan to the user and ask to leave plan mode and start.",
        PLAN_EXIT_PARAMETERS,
        run,
        # offered in every mode (it answers "not on" outside plan mode): a tool list that changed with the mode
        # would make each mode switch pay the whole cached prompt again (issue 35)
        meta={"kind": "switch_mode", "present": present},
    )
