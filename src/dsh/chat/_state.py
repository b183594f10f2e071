"""What the chat knows about its session, kept from the agent's answers and ``session/update`` notifications.

Pure data, no I/O: the view reads it (status line, completion, pickers), the client writes it. Every list the
agent sends as a full snapshot (commands, config options, plan) replaces the previous one, as ACP says.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["SessionState", "Usage"]


@dataclass
class Usage:
    used: int
    size: int
    cost: float | None = None
    currency: str | None = None


@dataclass
class SessionState:
    session_id: str | None = None
    title: str | None = None
    commands: list[dict[str, Any]] = field(default_factory=list)
    """``availableCommands`` entries: ``name`` (no slash), ``description``, ``input.hint``."""
    config_options: list[dict[str, Any]] = field(default_factory=list)
    modes: dict[str, Any] | None = None
    """The legacy ``SessionModeState`` (agents without config options)."""
    usage: Usage | None = None
    plan: list[dict[str, Any]] = field(default_factory=list)

    def apply_setup(self, result: Any) -> None:
        """The ``configOptions`` and ``modes`` of a ``session/new``, ``load`` or ``set_config_option`` answer."""
        if not isinstance(result, dict):
            return
        if isinstance(result.get("configOptions"), list):
            self.config_options = [o for o in result["configOptions"] if isinstance(o, dict)]
        if isinstance(result.get("modes"), dict):
            self.modes = result["modes"]

    def apply(self, update: dict[str, Any]) -> None:
        kind = update.get("sessionUpdate")
        if kind == "available_commands_update" and isinstance(update.get("availableCommands"), list):
            self.commands = [c for c in update["availableCommands"] if isinstance(c, dict) and "name" in c]
        elif kind == "config_option_update":
            self.apply_setup(update)
        elif kind == "current_mode_update" and self.modes is not None:
            self.modes = {**self.modes, "currentModeId": update.get("currentModeId")}
        elif kind == "usage_update":
            raw_cost = update.get("cost")
            cost: dict[str, Any] = raw_cost if isinstance(raw_cost, dict) else {}
            try:
                self.usage = Usage(
                    int(update.get("used", 0)),
                    int(update.get("size", 0)),
                    float(cost["amount"]) if cost.get("amount") is not None else None,
                    cost.get("currency"),
                )
            except (TypeError, ValueError):
                pass
        elif kind == "plan" and isinstance(update.get("entries"), list):
            self.plan = [e for e in update["entries"] if isinstance(e, dict)]
        elif kind == "session_info_update" and "title" in update:
            self.title = update["title"] if isinstance(update["title"], str) else None

    def option(self, category: str) -> dict[str, Any] | None:
        """The first config option of *category* (``model``, ``mode``), or None."""
        for option in self.config_options:
            if option.get("category") == category or option.get("id") == category:
                return option
        return None

    def choices(self, category: str) -> list[tuple[str, str, str]]:
        """``(value, name, description)`` of a select option, groups flattened; legacy modes for ``mode``."""
        option = self.option(category)
        if option is None:
            if category == "mode" and self.modes is not None:
                return [
                    (str(m["id"]), str(m.get("name", m["id"])), str(m.get("description") or ""))
                    for m in self.modes.get("availableModes", [])
                    if isinstance(m, dict) and "id" in m
                ]
            return []
        out: list[tuple[str, str, str]] = []
        for entry in option.get("options", []):
            if not isinstance(entry, dict):
                continue
            inner = entry.get("options") if "group" in entry else [entry]
            out.extend(
                (str(item["value"]), str(item.get("name", item["value"])), item.get("description") or "")
                for item in (inner if isinstance(inner, list) else [])
                if isinstance(item, dict) and "value" in item
            )
        return out

    def current(self, category: str) -> str | None:
        option = self.option(category)
        if option is not None:
            value = option.get("currentValue")
            return str(value) if value is not None else None
        if category == "mode" and self.modes is not None:
            value = self.modes.get("currentModeId")
            return str(value) if value is not None else None
        return None

    def status_line(self) -> str:
        """``model · mode · context 12% (1.2k/128k) · $0.0031``: the parts the agent has told us, sanitised
        (:func:`dsh.chat._sanitize.sanitize`, one line): ready to draw."""
        from dsh.chat._sanitize import sanitize

        parts: list[str] = []
        for category in ("model", "mode"):
            value = self.current(category)
            if value is not None:
                names = {v: n for v, n, _ in self.choices(category)}
                parts.append(names.get(value, value) if category == "mode" else value)
        if self.usage is not None and self.usage.size > 0:
            share = 100 * self.usage.used / self.usage.size
            parts.append(f"context {share:.0f}% ({_short(self.usage.used)}/{_short(self.usage.size)})")
        if self.usage is not None and self.usage.cost is not None:
            symbol = "$" if self.usage.currency in (None, "USD") else f"{self.usage.currency} "
            parts.append(f"{symbol}{self.usage.cost:.4f}")
        return sanitize(" · ".join(parts), one_line=True)


def _short(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    if n >= 1000:
        return f"{n / 1000:.1f}k"
    return str(n)
