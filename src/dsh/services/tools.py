"""The ``tools`` interface service: the registry and the single execution seam.

Guarantees:

* Names are unique; a registration is owned by the calling scope and emits ``tools/change``.
* A tool registered for a session (``register(tool, session=id)``) exists for that session only: ``get`` and
  execution find it only for calls of that session's agent, other sessions never see it, and the tools plugin
  adds its schema to that session's model requests (``agent/request``, after every other listener ran). Its
  name is unique within the session and must not shadow a global tool.
* :meth:`ToolRegistry.schemas` exposes only the model-facing keys (name, description, parameters, strict),
  deep-copied.
* :meth:`ToolRegistry.execute` runs the ``tools/execute`` waterfall, whose innermost default looks the tool up
  and runs it. *Any* exception there (the tool body, an unknown tool, a listener) becomes an error result,
  ``is_error=True`` with text ``Error: <message>`` and ``error={name, code}`` when the error carries a code;
  it never propagates. A listener vetoes a call by returning a result without calling ``next``: that is the
  seam for permission gates, sandboxes and plan mode.
* A tool may split itself in two (``ToolDefinition.prepare``): *prepare* computes what the call would do
  without doing it (resolved paths, the exact diff, the command) and returns a :class:`Prepared` whose
  ``apply`` does exactly that. The policy pipeline (:mod:`dsh.policy`) prepares, decides, asks, then passes
  the :class:`Prepared` down the chain in ``ToolExecution.prepared``; the innermost default runs its
  ``apply``. Without the pipeline, a prepared tool's ``execute`` is prepare followed by apply.
* **The declared pipeline** (RFC 0027): every call runs through named stages in the fixed order of
  :data:`STAGES`, outermost first: ``budget``, ``redact``, ``limits``, ``prepare``, ``decide``, ``ask``,
  ``checkpoint``, ``diagnose``, ``contain``, ``apply``; then the ``tools/execute`` waterfall (whose innermost default runs the
  tool). A package adds a :data:`Step` to a stage with :meth:`ToolRegistry.stage`; a step is a waterfall
  listener ``(execution, next) -> result``: it acts on the way in before calling ``next`` and on the result on
  the way out, so the ``budget`` stage is the last to see a result and ``redact`` the one before it, whatever
  order the plugins were loaded in. Steps of one stage run in registration order and must not depend on it;
  ``budget`` holds one step at most (the output budget runs once per call). A step is removed with the scope
  that added it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeAlias, TypeVar, get_args

from pydantic import BaseModel, ValidationError

from dsh import events as ev
from dsh.errors import ToolArgsError, ToolNotFoundError, error_code, error_message
from dsh.kernel import CancelToken, Disposer, current_scope, plugin
from dsh.services.llm import ContentBlock, ToolSchema
from dsh.services.sessions import copy_json

if TYPE_CHECKING:
    from dsh.kernel import Context, Next
    from dsh.services.agents import Agent
    from dsh.services.llm import GenerateRequest

__all__ = [
    "STAGES",
    "CallDecision",
    "Prepared",
    "Stage",
    "ToolCard",
    "ToolDefinition",
    "ToolExecution",
    "ToolRegistry",
    "ToolResult",
    "ToolStep",
    "define_prepared_tool",
    "define_tool",
    "error_result",
    "tools_plugin",
]

ToolOutput = list[ContentBlock] | str
A = TypeVar("A", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class ToolExecution:
    """One call: ``arguments`` is the parsed JSON (or the raw string when the model sent invalid JSON)."""

    call_id: str
    name: str
    arguments: Any
    agent: Agent | None = None
    signal: CancelToken | None = None
    prepared: Prepared | None = None
    """Set by the ``prepare`` stage (the policy's) once the call was prepared: the stages inside it see what the
    call will do, and the innermost default applies exactly that."""
    decision: CallDecision | None = None
    """Set by the ``decide`` and ``ask`` stages (the policy's) for a call allowed to go on; None when no policy
    decided (no policy loaded, or a call without an agent)."""


@dataclass(frozen=True, slots=True)
class CallDecision:
    """How a call was let through, for the stages inside ``ask`` (``checkpoint``, ``contain``, ``apply``)."""

    asked: bool
    """True: the user was asked and allowed it (``choice`` says how); False: it runs with no question (the mode
    or a rule allowed it)."""
    choice: str | None = None
    """The option the user chose when asked (``allow_once``, ``allow_always``), else None."""
    why: str = ""
    """The decision's reason (the rule or the mode that allowed it, or why it asked)."""


@dataclass(frozen=True, slots=True)
class Prepared:
    """What a call will do, computed before anyone is asked, and the one way to do it (``apply``).

    ``paths``: the absolute paths the call touches (as the user knows them); ``outside``: those of them whose
    real location is outside the session's roots (they need a grant, asked for like any other permission);
    ``diff``: ``(absolute path, old text or None for a new file, new text)`` of a file change; ``command``: a
    shell command to run. ``apply`` must do exactly what was prepared and fail (never do something else) when
    the world changed since: a file edited in between is an error ``CHANGED_SINCE``, not a stale write."""

    apply: Callable[[], Awaitable[ToolOutput]]
    paths: tuple[str, ...] = ()
    outside: tuple[str, ...] = ()
    diff: tuple[str, str | None, str] | None = None
    command: str | None = None
    cwd: str | None = None
    """Where ``command`` runs (absolute)."""


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool call produced. ``content`` goes to the model; ``display`` (lossless JSON) is for people
    (a front end shows it: a diff, an exit code) and is logged with the result, never sent to the model."""

    call_id: str
    content: list[ContentBlock]
    is_error: bool = False
    error: dict[str, str] | None = None
    display: dict[str, Any] | None = None
    spill: str | None = None
    """The absolute path of a file holding the full output when ``content`` was cut to the output budget
    (logged as ``tool/result`` data ``spill``)."""


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """A tool: its schema for the model and ``execute(arguments, execution)``.

    ``meta`` is for front ends and gates: ``kind`` (read, edit, delete, move, search, execute, fetch, think,
    other) says what the tool does, and ``present(arguments, cwd)`` may return a :class:`ToolCard`.
    ``prepare(arguments, execution) -> Prepared``, when set, is the tool's prepare stage (see the module
    docstring); it raises the tool's error for a call that cannot apply, and must not change anything."""

    name: str
    description: str
    parameters: dict[str, Any]
    execute: Callable[[Any, ToolExecution], Awaitable[ToolOutput]]
    strict: bool | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    prepare: Callable[[Any, ToolExecution], Awaitable[Prepared]] | None = None

    def schema(self) -> ToolSchema:
        schema: ToolSchema = {
            "name": self.name,
            "description": self.description,
            "parameters": copy_json(self.parameters),
        }
        if self.strict is not None:
            schema["strict"] = self.strict
        return schema


def _validate(model: type[A], arguments: Any, execution: ToolExecution) -> A:
    try:
        if isinstance(arguments, str | bytes):
            return model.model_validate_json(arguments or "{}")
        return model.model_validate(arguments)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}" for e in exc.errors())
        raise ToolArgsError(f"invalid arguments for {execution.name}: {problems}") from None


class _TypedTool(Generic[A]):
    def __init__(self, model: type[A], fn: Callable[[A, ToolExecution], Awaitable[ToolOutput]]) -> None:
        self._model = model
        self._fn = fn

    async def __call__(self, arguments: Any, execution: ToolExecution) -> ToolOutput:
        return await self._fn(_validate(self._model, arguments, execution), execution)


class _TypedPrepare(Generic[A]):
    def __init__(self, model: type[A], fn: Callable[[A, ToolExecution], Awaitable[Prepared]]) -> None:
        self._model = model
        self._fn = fn

    async def __call__(self, arguments: Any, execution: ToolExecution) -> Prepared:
        return await self._fn(_validate(self._model, arguments, execution), execution)


async def _prepare_and_apply(
    prepare: Callable[[Any, ToolExecution], Awaitable[Prepared]], arguments: Any, execution: ToolExecution
) -> ToolOutput:
    prepared = execution.prepared if execution.prepared is not None else await prepare(arguments, execution)
    return await prepared.apply()


def define_tool(
    name: str,
    description: str,
    arguments: type[A],
    fn: Callable[[A, ToolExecution], Awaitable[ToolOutput]],
    *,
    strict: bool | None = None,
) -> ToolDefinition:
    """A tool whose arguments are validated by the pydantic model *arguments*; its JSON Schema is sent compacted
    (:func:`dsh.services.tool_schema.compact_schema`: no titles, no ``anyOf`` null, closed objects)."""
    from dsh.services.tool_schema import compact_schema

    parameters = compact_schema(arguments.model_json_schema())
    return ToolDefinition(name, description, parameters, _TypedTool(arguments, fn), strict)


def define_prepared_tool(
    name: str,
    description: str,
    arguments: type[A],
    prepare: Callable[[A, ToolExecution], Awaitable[Prepared]],
    *,
    strict: bool | None = None,
) -> ToolDefinition:
    """A tool in two stages: *prepare* (validated arguments → :class:`Prepared`) and the ``apply`` it returns.
    Its ``execute`` prepares then applies, so the tool works the same without the policy pipeline."""
    typed = _TypedPrepare(arguments, prepare)

    async def execute(raw: Any, execution: ToolExecution) -> ToolOutput:
        return await _prepare_and_apply(typed, raw, execution)

    from dsh.services.tool_schema import compact_schema

    parameters = compact_schema(arguments.model_json_schema())
    return ToolDefinition(name, description, parameters, execute, strict, prepare=typed)


@dataclass(frozen=True, slots=True)
class ToolCard:
    """How a tool call presents itself before it runs: a title (``Read src/app.py``), a kind, the locations it
    touches (absolute paths, 1-based lines) and, for edits, the change it is about to make."""

    title: str
    kind: str = "other"
    locations: tuple[tuple[str, int | None], ...] = ()
    diff: tuple[str, str | None, str] | None = None
    """``(absolute path, old text or None for a new file, new text)``."""


def _as_content(output: ToolOutput) -> list[ContentBlock]:
    if isinstance(output, str):
        return [{"type": "text", "text": output}]
    return list(output)


def error_result(call_id: str, error: BaseException) -> ToolResult:
    code = error_code(error)
    return ToolResult(
        call_id=call_id,
        content=[{"type": "text", "text": f"Error: {error_message(error)}"}],
        is_error=True,
        error={"name": type(error).__name__, "code": code} if code is not None else None,
    )


Stage: TypeAlias = Literal[
    "budget", "redact", "limits", "prepare", "decide", "ask", "checkpoint", "diagnose", "contain", "apply"
]
"""A named stage of the tool call pipeline."""

STAGES: tuple[Stage, ...] = get_args(Stage)
"""The stages, outermost first (see the module docstring and RFC 0027):

* ``budget``: the output budget, the last to see a result (one step: the tools' budget, spilling the whole).
* ``redact``: secret values out of every result (whatever refused, failed or ran inside it).
* ``limits``: refusals that need no decision (a sub-agent's type).
* ``prepare``: what the call will do (``ToolExecution.prepared``); a call that cannot apply ends here.
* ``decide``: the permission policy's verdict; a refused call ends here.
* ``ask``: the user, when the verdict asks; an allowed call is granted its outside paths and logged as running
  (``ToolExecution.decision`` says whether anyone was asked).
* ``checkpoint``: what an edit or a command is about to change, kept for ``/rewind``.
* ``diagnose``: after an edit, the language server's new diagnostics appended to the result (RFC 0037).
* ``contain``: around running: the processes the call starts (tagged with its session; confinement).
* ``apply``: the innermost: the result's ``is_error``/``display`` channel, then the ``tools/execute`` waterfall.
"""

ToolStep: TypeAlias = "Callable[[ToolExecution, Next[ToolExecution, ToolResult]], Awaitable[ToolResult]]"
"""A stage's step: a ``tools/execute`` listener, ``(execution, next) -> result``."""

_SINGLE: frozenset[Stage] = frozenset({"budget"})


class ToolRegistry:
    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._tools: dict[str, ToolDefinition] = {}
        self._session_tools: dict[str, dict[str, ToolDefinition]] = {}
        self._stages: dict[Stage, list[ToolStep]] = {name: [] for name in STAGES}
        self._chain: tuple[ToolStep, ...] = ()

    # -- the pipeline's stages --------------------------------------------------------------------------

    def stage(self, stage: Stage, step: ToolStep) -> Disposer:
        """Add *step* to *stage* (see :data:`STAGES`); removed with the calling scope. Raises ``ValueError`` for
        an unknown stage, or a second step in ``budget``."""
        steps = self._stages.get(stage)
        if steps is None:
            raise ValueError(f"unknown tool pipeline stage {stage!r}; the stages are {', '.join(STAGES)}")
        if stage in _SINGLE and steps:
            raise ValueError(f"the {stage!r} stage already has its step (it runs once per call)")
        steps.append(step)
        self._chain = tuple(s for name in STAGES for s in self._stages[name])

        def remove() -> None:
            if step in steps:
                steps.remove(step)
                self._chain = tuple(s for name in STAGES for s in self._stages[name])

        return (current_scope() or self._ctx.scope).effect(remove)

    def stages(self) -> list[tuple[Stage, ToolStep]]:
        """Every step with its stage, in the order a call meets them (outermost first)."""
        return [(name, step) for name in STAGES for step in self._stages[name]]

    def register(self, tool: ToolDefinition, *, session: str | None = None) -> Disposer:
        """Register *tool* globally, or for *session* only (see the module docstring)."""
        if session is not None:
            return self._register_for(session, tool)
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        self._ctx.emit(ev.TOOLS_CHANGE)

        def remove() -> None:
            if self._tools.get(tool.name) is tool:
                del self._tools[tool.name]
                self._ctx.emit(ev.TOOLS_CHANGE)

        return (current_scope() or self._ctx.scope).effect(remove)

    def _register_for(self, session: str, tool: ToolDefinition) -> Disposer:
        tools = self._session_tools.setdefault(session, {})
        if tool.name in tools or tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is already registered")
        tools[tool.name] = tool

        async def remove() -> None:
            if tools.get(tool.name) is tool:
                del tools[tool.name]
                if not tools and self._session_tools.get(session) is tools:
                    del self._session_tools[session]

        return remove

    def get(self, name: str, session: str | None = None) -> ToolDefinition | None:
        """The global tool *name*, else (with *session*) that session's own."""
        tool = self._tools.get(name)
        if tool is None and session is not None:
            tools = self._session_tools.get(session)
            tool = tools.get(name) if tools is not None else None
        return tool

    def session_schemas(self, session: str) -> list[ToolSchema]:
        """The schemas of the tools registered for *session* only."""
        return [tool.schema() for tool in self._session_tools.get(session, {}).values()]

    def all(self) -> list[ToolDefinition]:
        return [*self._tools.values()]

    def schemas(self) -> list[ToolSchema]:
        return [tool.schema() for tool in self._tools.values()]

    async def execute(self, execution: ToolExecution) -> ToolResult:
        """Run one call through the stages and then ``tools/execute``; never raises (except cancellation)."""
        try:
            return await self._step(self._chain, 0, execution)
        except Exception as exc:
            return error_result(execution.call_id, exc)

    def _step(self, chain: tuple[ToolStep, ...], index: int, execution: ToolExecution) -> Awaitable[ToolResult]:
        if index == len(chain):
            return self._ctx.waterfall(ev.TOOLS_EXECUTE, execution, default=self._run)

        def next_(rewritten: ToolExecution | None = None, /) -> Awaitable[ToolResult]:
            return self._step(chain, index + 1, execution if rewritten is None else rewritten)

        return chain[index](execution, next_)

    async def _run(self, execution: ToolExecution) -> ToolResult:
        agent = execution.agent
        tool = self.get(execution.name, agent.session.id if agent is not None else None)
        if tool is None:
            raise ToolNotFoundError(f"unknown tool {execution.name!r}")
        if execution.prepared is not None:
            output = await execution.prepared.apply()
        else:
            output = await tool.execute(execution.arguments, execution)
        return ToolResult(call_id=execution.call_id, content=_as_content(output))


@plugin("tools", inject=("system_prompt",))
def tools_plugin(ctx: Context, config: object) -> None:
    """Provide ``tools``; its schemas flow into every prompt assembly."""
    registry = ToolRegistry(ctx)
    ctx.provide("tools", registry)
    ctx.system_prompt.tools(registry.schemas)

    async def session_tools(
        agent: Agent, turn: int, step: int, request: GenerateRequest, next_: Next[GenerateRequest, GenerateRequest]
    ) -> GenerateRequest:
        request = await next_(request)  # after the others: a listener may wait for tools to appear
        extra = registry.session_schemas(agent.session.id)
        if not extra:
            return request
        return replace(request, tools=[*(request.tools or []), *extra])

    ctx.on(ev.AGENT_REQUEST, session_tools, prepend=True)
