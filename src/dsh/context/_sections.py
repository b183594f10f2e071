"""The built-in system prompt sections: their names, their order and their texts.

Order (lower first; a plugin's own section picks a number between them):

| order | name           | what                                                               | changes when        |
|-------|----------------|--------------------------------------------------------------------|---------------------|
| 100   | identity       | what dsh is, how a careful coding agent works                     | never               |
| 200   | tools          | guidance generated from the tools the model is given               | the tool set        |
| 300   | mode           | the session's mode and what it allows                              | ``session/set_mode``|
| 400   | environment    | cwd, roots, OS, shell, date, git repository and branch             | resume / load       |
| 500   | instructions   | AGENTS.md / CLAUDE.md, repository root → cwd, plus the user's file | resume / load       |

The configured ``system_prompt`` (``--system``, ``DSH_SYSTEM_PROMPT``) is appended after all of them by the loop.
Every text here is a pure function of its inputs: the same inputs give the same bytes (prompt caches hit).
"""

from __future__ import annotations

from collections.abc import Sequence

from dsh.policy import MODES
from dsh.services.llm import ToolSchema

__all__ = ["IDENTITY", "MODE_TEXTS", "ORDER", "mode_text", "tools_text"]

ORDER = {"identity": 100, "tools": 200, "mode": 300, "environment": 400, "instructions": 500}

IDENTITY = """\
You are dsh, a coding agent working in the user's project through the tools you are given. You act on real files and run real commands, so work like a careful senior engineer:

- Read before you edit: look at the code, its tests and the project's conventions before changing anything; do not guess what a file contains.
- Make small, exact edits that do what was asked and nothing more; keep the project's style; do not reformat or rewrite unrelated code.
- Check your work: run the project's own tests, linters and type checks where they exist, and fix what you broke.
- Say what you did: when you finish, state briefly what changed, what you checked and anything left undone or uncertain.
- Ask when blocked: if the request is ambiguous, a step would be destructive or irreversible, or you lack access, ask the user instead of guessing.
- Be concise; never invent results, file contents or command output."""

MODE_TEXTS: dict[str, str] = {mode.id: mode.prompt for mode in MODES}
"""The model-facing text of each mode, from the one modes table (:data:`dsh.policy.MODES`)."""


def mode_text(mode: str) -> str:
    """The mode section for *mode* (an unknown mode is named as it is)."""
    body = MODE_TEXTS.get(mode, f"{mode}.")
    return f"# Mode\nThe session is in {body}"


def _first_sentence(text: str) -> str:
    line = " ".join(text.strip().split())
    for end in (". ", "; "):
        cut = line.find(end)
        if cut != -1:
            return line[: cut + 1]
    return line


def tools_text(tools: Sequence[ToolSchema]) -> str:
    """Guidance generated from the tool schemas the model is given (empty when it has none)."""
    if not tools:
        return ""
    lines = [
        "# Tools",
        "Use the tools to inspect and change the project; call several independent read-only tools in one step "
        "when you can. Use paths relative to the working directory. A tool result that starts with `Error:` "
        "failed: read the message and adjust instead of repeating the same call. The tools available now:",
    ]
    for tool in tools:
        description = _first_sentence(tool.get("description", ""))
        lines.append(f"- {tool['name']}: {description}" if description else f"- {tool['name']}")
    return "\n".join(lines)
