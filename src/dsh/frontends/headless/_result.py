"""What a headless run observed, and the result object that ends ``dsh exec --json``.

:class:`RunTracker` listens to the loop's events of one agent and keeps what the result reports: the final
text (the text of the turn's last step), usage summed over every model call of the run, the files a tool changed
(paths of successful results whose display carries a diff), the calls the policy refused, the turn's end reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dsh.events import TurnEndReason
    from dsh.services.llm import StreamChunk

__all__ = ["EXIT_BUDGET", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "RunTracker", "stop_reason"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_BUDGET = 3
"""A spend budget stopped the run (``--max-cost``, ``--max-tokens`` or the configuration's ``budget``)."""
EXIT_INTERRUPTED = 130
USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens")


def stop_reason(reason: TurnEndReason | None, *, limited: str | None, interrupted: bool) -> str:
    """ACP's stop reasons (``end_turn``, ``max_tokens``, ``max_turn_requests``, ``cancelled``) plus ``error``,
    ``timeout`` and ``budget`` (a spend budget stopped the turn): the words a script already knows from editors."""
    if interrupted:
        return "cancelled"
    if limited in ("timeout", "budget"):
        return limited
    if limited == "max-steps":
        return "max_turn_requests"
    if reason is None:
        return "error"
    kind = reason["kind"]
    if kind == "completed":
        return "end_turn"
    if kind == "max-tokens":
        return "max_tokens"
    if kind in ("aborted", "disposed", "interrupted"):
        return "cancelled"
    return "error"


@dataclass
class RunTracker:
    session_id: str
    turn: int | None = None
    """The run's turn: the last one its agent started."""
    reason: TurnEndReason | None = None
    step_text: list[str] = field(default_factory=list)
    final_text: str = ""
    usage: dict[str, int] = field(default_factory=dict)
    steps: int = 0
    files: list[str] = field(default_factory=list)
    denied: list[dict[str, str]] = field(default_factory=list)
    current_tool: str | None = None
    names: dict[str, str] = field(default_factory=dict)
    """call id → tool name."""

    def turn_started(self, turn: int) -> None:
        """A turn of the run's agent began: the result describes the last one (usage, files and refusals add
        up over all of them)."""
        self.turn = turn
        self.reason = None
        self.steps = 0
        self.final_text = ""

    def step_started(self) -> None:
        self.steps += 1
        self.step_text = []

    def chunk(self, chunk: StreamChunk) -> None:
        if chunk["type"] == "text-delta":
            self.step_text.append(chunk["text"])
        elif chunk["type"] == "usage":
            for key in USAGE_KEYS:
                value = chunk["usage"].get(key)
                if isinstance(value, int):
                    self.usage[key] = self.usage.get(key, 0) + value

    def step_ended(self) -> None:
        text = "".join(self.step_text)
        if text.strip():
            self.final_text = text

    def tool_call(self, data: dict[str, Any]) -> None:
        self.names[data["call_id"]] = data["name"]
        self.current_tool = data["name"]

    def tool_result(self, data: dict[str, Any]) -> None:
        self.current_tool = None
        name = self.names.get(data["call_id"], "a tool")
        from dsh.policy import refusal_of

        refusal = refusal_of("tool/result", data)
        if refusal is not None:
            self.denied.append({"tool": name, "callId": data["call_id"], "reason": refusal.strip()})
            return
        display = data.get("display")
        diff = display.get("diff") if isinstance(display, dict) else None
        path = diff.get("path") if isinstance(diff, dict) else None
        if not data.get("is_error") and isinstance(path, str) and path not in self.files:
            self.files.append(path)

    def result(
        self,
        *,
        limited: str | None,
        interrupted: bool,
        cost: float | None,
        error: dict[str, Any] | None = None,
        budget: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The ``result`` object (the last line of ``--json``); *budget*: the ``spend/stop`` that stopped the turn
        (``budget``, ``limit``, ``spent``, ``message``), reported instead of the error it ended the turn with."""
        stop = stop_reason(self.reason, limited=limited, interrupted=interrupted)
        result: dict[str, Any] = {
            "type": "result",
            "stopReason": stop,
            "text": self.final_text,
            "usage": self.usage,
            "cost": cost,
            "sessionId": self.session_id,
            "filesChanged": self.files,
            "denied": self.denied,
            "steps": self.steps,
        }
        if budget is not None:
            result["budget"] = budget
        elif error is None and self.reason is not None and self.reason["kind"] == "error":
            error = {"message": self.reason.get("message", "the turn failed")}
            if self.reason.get("code"):
                error["code"] = self.reason["code"]
        if error is not None:
            result["error"] = error
        return result


def exit_code(result: dict[str, Any]) -> int:
    """0 when the run did what was asked (``end_turn`` and nothing refused), 130 when interrupted, 3 when a spend
    budget stopped it, else 1."""
    if result["stopReason"] == "cancelled":
        return EXIT_INTERRUPTED
    if result["stopReason"] == "budget":
        return EXIT_BUDGET
    if result["stopReason"] == "end_turn" and not result["denied"] and "error" not in result:
        return EXIT_OK
    return EXIT_FAILED


def failure_line(result: dict[str, Any]) -> str | None:
    """One line for stderr saying why the run did not succeed (None when it did)."""
    stop = result["stopReason"]
    if stop == "budget" and isinstance(result.get("budget"), dict):
        return str(result["budget"].get("message") or "a spend budget stopped the run")
    if "error" in result:
        code = result["error"].get("code")
        return f"the run failed: {result['error']['message']}" + (f" ({code})" if code else "")
    if result["denied"]:
        first = result["denied"][0]
        more = f" (and {len(result['denied']) - 1} more)" if len(result["denied"]) > 1 else ""
        return f"refused {first['tool']}{more}: {first['reason']}"
    if stop == "end_turn":
        return None
    return {
        "cancelled": "interrupted: the turn was cancelled (the session is kept; continue it with --session)",
        "timeout": "the run reached its --timeout and was cancelled",
        "max_turn_requests": "the run reached its --max-steps; the model was not called again",
        "max_tokens": "the model's reply was cut at its output limit",
    }.get(stop, f"the run ended: {stop}")
