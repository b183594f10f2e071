"""The ``ask_user`` tool: the model asks the user a question (optionally with choices) and waits for the answer.

Guarantees:

* The question goes through the ``user/ask`` waterfall; a front end that can ask (ACP: elicitation, else a
  permission request with the choices as options) answers it. Without one, the model is told at once that nobody
  can answer.
* The tool never hangs past its turn's cancel: a cancelled turn, a dismissed question or a failed request all give
  the model a clear "no answer" result that says why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dsh import events as ev
from dsh.errors import ToolArgsError
from dsh.kernel import plugin
from dsh.questions._types import Answer, Choice, Question

if TYPE_CHECKING:
    from dsh.kernel import Context
    from dsh.services.tools import ToolExecution

__all__ = ["ask", "questions_plugin"]

MAX_CHOICES = 20
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "question": {"type": "string", "description": "The question, short and self-contained."},
        "choices": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Optional answers to pick from (2-20); leave out for a free-text answer.",
        },
    },
    "required": ["question"],
    "additionalProperties": False,
}
DESCRIPTION = (
    "Ask the user a question and wait for the answer. Use it only when the request is critically underspecified "
    "(reasonable readings lead to materially different results and the project cannot tell you which is meant) "
    "or before a destructive or irreversible step; otherwise keep going with a sensible assumption and say so."
)


async def _nobody(question: Question) -> Answer:
    return Answer(reason="no one can answer questions in this session")


async def ask(ctx: Context, question: Question) -> Answer:
    """Ask through ``user/ask`` (the default: nobody to ask)."""
    answer: Answer = await ctx.waterfall(ev.USER_ASK, question, default=_nobody)
    return answer


def _parse(arguments: Any) -> tuple[str, tuple[str, ...]]:
    if not isinstance(arguments, dict):
        raise ToolArgsError("invalid arguments for ask_user: not a JSON object")
    question, choices = arguments.get("question"), arguments.get("choices") or []
    if not isinstance(question, str) or not question.strip():
        raise ToolArgsError("invalid arguments for ask_user: 'question' must be a non-empty string")
    if not isinstance(choices, list) or not all(isinstance(c, str) and c.strip() for c in choices):
        raise ToolArgsError("invalid arguments for ask_user: 'choices' must be a list of non-empty strings")
    if len(choices) > MAX_CHOICES:
        raise ToolArgsError(f"invalid arguments for ask_user: at most {MAX_CHOICES} choices")
    return question.strip(), tuple(dict.fromkeys(c.strip() for c in choices))


def _tool(ctx: Context) -> Any:
    async def ask_user(arguments: Any, execution: ToolExecution) -> str:
        text, choices = _parse(arguments)
        session_id = execution.agent.session.id if execution.agent is not None else ""
        question = Question(
            session_id,
            execution.call_id,
            text,
            tuple(Choice(str(index), label) for index, label in enumerate(choices)),
            signal=execution.signal,
        )
        answer = await ask(ctx, question)
        if answer.choice is not None:
            labels = {choice.id: choice.label for choice in question.choices}
            return f"The user answered: {labels.get(answer.choice, answer.choice)}"
        if answer.text is not None:
            return f"The user answered: {answer.text}"
        return f"No answer: {answer.reason or 'the user did not answer'}. Do not wait for one; continue or stop."

    return ask_user


def _present(arguments: Any, cwd: str) -> Any:
    from dsh.services.tools import ToolCard

    question = arguments.get("question") if isinstance(arguments, dict) else None
    title = f"Question: {question}" if isinstance(question, str) and question.strip() else "Question"
    return ToolCard(title=title[:200], kind="other")


@plugin("questions", inject=("tools",))
def questions_plugin(ctx: Context, config: object) -> None:
    from dsh.services.tools import ToolDefinition

    ctx.tools.register(
        ToolDefinition("ask_user", DESCRIPTION, PARAMETERS, _tool(ctx), meta={"kind": "other", "present": _present})
    )
