"""Running one hook: the JSON on stdin, the command under the sandbox, its answer read as Claude Code documents it.

Guarantees of :func:`run_hook`:

* The command runs through :func:`dsh.tools.run_process`: its own process group, the child environment of
  :mod:`dsh.secrets` (no provider keys), confined at the sandbox level of the session's approved commands
  (:meth:`dsh.sandbox.Sandbox.approved_level`; ``off`` where the machine has no sandbox, as approved commands
  run there), killed with its group at its timeout or when *signal* aborts (the turn is cancelled).
* stdout and stderr are each capped at :data:`OUTPUT_LIMIT` bytes and redacted (:func:`dsh.secrets.redact_text`)
  before anything reads them: no key a hook prints reaches the model, the log or the user's screen.
* It never raises (except cancellation of the calling task): a hook that cannot start, crashes, times out or
  answers JSON that is not an object is an :class:`Answer` with ``problem`` set and no decision.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dsh.hooks._sources import Hook

if TYPE_CHECKING:
    from dsh.kernel import CancelToken

__all__ = ["OUTPUT_LIMIT", "Answer", "run_hook"]

OUTPUT_LIMIT = 16 * 1024
"""Bytes of stdout, and of stderr, read from a hook (the rest is drained and dropped)."""
_LINE = 160


@dataclass(slots=True)
class Answer:
    """What one hook said. ``decision``: ``allow``/``deny``/``ask`` (``PreToolUse``); ``block`` and ``reason``:
    exit 2 or ``decision: block`` (``reason`` is then what the model or the user is told); ``context``:
    ``additionalContext`` (or, for the events that take it, plain stdout); ``problem``: why the hook gave no
    answer (a crash, a timeout, an exit status other than 0 and 2, unreadable JSON)."""

    hook: Hook
    exit_code: int | None = None
    decision: str | None = None
    reason: str = ""
    block: bool = False
    context: str = ""
    system_message: str = ""
    problem: str | None = None
    truncated: bool = False
    ms: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        """One short line for people: what ran and what it said."""
        command = " ".join(self.hook.command.split())
        if len(command) > 60:
            command = command[:59] + "…"
        said = self.problem or (
            f"blocked: {self.reason}"
            if self.block
            else f"{self.decision}" + (f": {self.reason}" if self.reason else "")
            if self.decision
            else "added context"
            if self.context
            else "ok"
        )
        said = " ".join(said.split())
        if len(said) > _LINE:
            said = said[: _LINE - 1] + "…"
        return f"hook {self.hook.event} `{command}`: {said} ({self.ms:.0f} ms)"


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


async def run_hook(
    hook: Hook,
    payload: dict[str, Any],
    *,
    cwd: str,
    project_dir: str,
    signal: CancelToken | None,
    contain: Any = None,
) -> Answer:
    """Run *hook* with *payload* as its stdin in *cwd* (see the module docstring). *contain*: a context manager
    factory that confines the spawn (the sandbox's), or None to run unconfined."""
    import contextlib
    import shlex

    from dsh.secrets import redact_text
    from dsh.tools import run_process

    started = time.perf_counter()
    answer = Answer(hook)
    data = json.dumps(payload, ensure_ascii=False, default=str).encode("utf-8")
    where = shlex.quote(project_dir)  # the variables set in the hook's own shell: no extra exec for env(1)
    script = f"export CLAUDE_PROJECT_DIR={where} DSH_PROJECT_DIR={where}\n{hook.command}"
    try:
        with contain() if contain is not None else contextlib.nullcontext():
            result = await run_process(
                script,
                cwd=cwd,
                timeout=hook.timeout,
                output_limit=OUTPUT_LIMIT,
                signal=signal,
                keep="head",
                stdin=data,
                stderr_limit=OUTPUT_LIMIT,
            )
    except Exception as exc:  # could not start (a vanished directory): no answer
        answer.problem = f"could not run: {exc}"
        answer.ms = (time.perf_counter() - started) * 1000
        return answer
    answer.ms = (time.perf_counter() - started) * 1000
    stdout = redact_text(result.output)
    stderr = redact_text(result.stderr or "")
    answer.exit_code = result.exit_code
    answer.truncated = result.truncated
    if result.cancelled:
        answer.problem = "cancelled"
        return answer
    if result.timed_out:
        answer.problem = f"timed out after {hook.timeout:g} s (killed)"
        return answer
    if result.exit_code is None:
        answer.problem = f"crashed ({result.signal or 'killed'})" + (f": {_first_line(stderr)}" if stderr else "")
        return answer
    if result.exit_code == 2:
        answer.block = True
        answer.reason = stderr.strip()[:OUTPUT_LIMIT] or "a hook blocked it (exit 2, nothing on stderr)"
        return answer
    if result.exit_code != 0:
        first = _first_line(stderr) or _first_line(stdout)
        answer.problem = f"failed (exit {result.exit_code})" + (f": {first}" if first else "")
        return answer
    _read_stdout(answer, stdout, result.truncated)
    return answer


def _read_stdout(answer: Answer, stdout: str, truncated: bool) -> None:
    """Exit 0: a JSON object is the hook's answer; other text is context for the events that take it."""
    text = stdout.strip()
    if not text.startswith("{"):
        if answer.hook.event in ("UserPromptSubmit", "SessionStart") and text:
            answer.context = text
        return
    try:
        value = json.loads(text)
    except ValueError:
        answer.problem = (
            "its output was cut at 16 KiB and is not JSON any more" if truncated else "printed JSON that does not parse"
        )
        return
    if not isinstance(value, dict):
        answer.problem = "printed JSON that is not an object"
        return
    answer.details = value
    specific = value.get("hookSpecificOutput")
    specific = specific if isinstance(specific, dict) else {}
    decision = specific.get("permissionDecision")
    if decision in ("allow", "deny", "ask"):
        answer.decision = str(decision)
        answer.reason = str(specific.get("permissionDecisionReason") or "")
    legacy = value.get("decision")
    if answer.decision is None and answer.hook.event == "PreToolUse" and legacy in ("approve", "block"):
        answer.decision = "allow" if legacy == "approve" else "deny"
        answer.reason = str(value.get("reason") or "")
    elif legacy == "block" and answer.hook.event != "PreToolUse":
        answer.block = True
        answer.reason = str(value.get("reason") or "a hook blocked it")
    context = specific.get("additionalContext")
    if isinstance(context, str) and context.strip():
        answer.context = context
    message = value.get("systemMessage")
    if isinstance(message, str):
        answer.system_message = message
