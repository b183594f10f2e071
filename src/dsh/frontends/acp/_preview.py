"""``dsh config show --system-prompt [--cwd DIR]``: the system prompt a new editor session in DIR sends.

Computed by the product itself, never by a second renderer or a second plugin list that could drift: the command
starts the real daemon (``python -m dsh acp``, this environment and configuration, sessions in a temporary
directory deleted after), speaks ACP to it over its stdin and stdout (``initialize``, ``session/new`` in DIR, one
``session/prompt``), and the daemon's one extra plugin, :func:`capture_plugin` (added to ``DSH_PLUGINS``),
answers that prompt's model call with the system prompt of the request as the model would receive it (after every
plugin rewrote it: sections, front-end and MCP tools) instead of calling a provider. A model that cannot be served
here (its key is missing) is replaced by ``echo``: the system prompt does not depend on the model.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dsh.kernel import Context, Next
    from dsh.services.llm import GenerateRequest, StreamChunk
    from dsh.settings import Settings

__all__ = ["CAPTURE_PLUGIN", "PreviewError", "capture_plugin", "preview_system_prompt", "show_system_prompt"]

CAPTURE_PLUGIN = "dsh.frontends.acp._preview:capture_plugin"
WAIT = 120.0
"""Seconds the whole preview may take (MCP servers may be starting, each bounded by its own timeout)."""


class PreviewError(Exception):
    """The daemon did not produce the preview; the message says what it answered."""


def capture_plugin(ctx: Context, config: object) -> None:
    """Loaded into the previewing daemon only: every model call streams back its request's system prompt."""
    from dsh import events as ev

    async def capture(request: GenerateRequest, next_: Next[GenerateRequest, Any]) -> AsyncIterator[StreamChunk]:
        return _system_of(request)

    ctx.on(ev.LLM_STREAM, capture)


async def _system_of(request: GenerateRequest) -> AsyncIterator[StreamChunk]:
    yield {"type": "text-delta", "text": request.system or ""}
    yield {"type": "finish", "reason": {"kind": "stop"}}


def _frame(message_id: int, method: str, params: dict[str, Any]) -> bytes:
    return (json.dumps({"jsonrpc": "2.0", "id": message_id, "method": method, "params": params}) + "\n").encode()


def _tail(log: Path) -> str:
    """The last lines the daemon wrote on stderr, indented (what it said about why)."""
    try:
        said = log.read_text(errors="replace").strip().splitlines()[-3:]
    except OSError:
        return ""
    return "".join(f"\n  {line}" for line in said)


async def _ask(env: dict[str, str], cwd: str, log: Path, client: dict[str, Any] | None = None) -> str:
    """One daemon run (its stderr to *log*): the agent's answer to a prompt (the captured system prompt);
    *client*: the ``systemPrompt`` the session is opened with (RFC 0033)."""
    import anyio

    from dsh.jsonrpc import Oversized, read_lines

    requests: list[tuple[str, dict[str, Any]]] = [
        ("initialize", {"protocolVersion": 1, "clientCapabilities": {}}),
        ("session/new", {"cwd": cwd, "mcpServers": []} | ({"systemPrompt": client} if client else {})),
    ]
    text: list[str] = []
    with log.open("ab") as stderr:
        process = await anyio.open_process([sys.executable, "-m", "dsh", "acp"], env=env, cwd=cwd, stderr=stderr)
    async with process:
        assert process.stdin is not None and process.stdout is not None
        lines = read_lines(process.stdout)
        session_id: str | None = None
        for number, (method, params) in enumerate([*requests, ("session/prompt", {})], start=1):
            if method == "session/prompt":
                params = {"sessionId": session_id, "prompt": [{"type": "text", "text": "."}]}
            await process.stdin.send(_frame(number, method, params))
            while True:
                line = await anext(lines, None)
                if line is None:
                    raise PreviewError(f"the daemon stopped before answering {method}" + _tail(log))
                if isinstance(line, Oversized) or not line.strip():
                    continue  # a line over the cap is a session/update the preview does not need
                message = json.loads(line)
                if message.get("id") == number and "method" not in message:
                    break
                update = (message.get("params") or {}).get("update") or {}
                if message.get("method") == "session/update" and update.get("sessionUpdate") == "agent_message_chunk":
                    text.append(str((update.get("content") or {}).get("text") or ""))
            if "error" in message:
                raise PreviewError(f"{method}: {(message['error'] or {}).get('message')}" + _tail(log))
            if method == "session/new":
                session_id = message["result"]["sessionId"]
        await process.stdin.aclose()
        await process.wait()
    return "".join(text)


async def preview_system_prompt(settings: Settings, cwd: str, client: dict[str, Any] | None = None) -> str:
    """The system prompt of the first request of a new session in *cwd* (opened with the client system prompt
    *client*, when given), as the model would receive it."""
    import tempfile

    import anyio

    with tempfile.TemporaryDirectory(prefix="dsh-preview-") as data:
        env = dict(os.environ)
        env["DSH_DATA_DIR"] = data
        env["DSH_PLUGINS"] = ",".join([*settings.plugins, CAPTURE_PLUGIN])
        if settings.config_path is not None:
            env["DSH_CONFIG"] = str(settings.config_path)
        with anyio.fail_after(WAIT):
            log = Path(data) / "daemon.log"
            try:
                system = await _ask(env, cwd, log, client)
            except PreviewError:
                if settings.model == "echo":
                    raise
                env["DSH_MODEL"] = "echo"  # the model cannot be served here (no key): its prompt is echo's
                system = await _ask(env, cwd, log, client)
            _relay(log)
            return system


def _relay(log: Path) -> None:
    """What the daemon logged while it built the prompt (a skipped instructions file, a server that failed)
    goes to our stderr: the user asked what a session would see, and those lines say why it differs."""
    try:
        said = log.read_text(errors="replace")
    except OSError:
        return
    if said:
        sys.stderr.write(said if said.endswith("\n") else said + "\n")


def show_system_prompt(
    settings: Settings, cwd: str | None, client_prompt: str | None = None, client_mode: str = "append"
) -> int:
    """Print the system prompt to stdout (with an editor's *client_prompt* in *client_mode*); return the exit
    status."""
    import anyio

    directory = os.path.abspath(cwd if cwd is not None else os.getcwd())
    if not os.path.isdir(directory):
        sys.stderr.write(f"dsh: --cwd {directory} is not a directory\n")
        return 1
    try:
        client = {"mode": client_mode, "content": [{"type": "text", "text": client_prompt}]} if client_prompt else None
        system = anyio.run(preview_system_prompt, settings, directory, client)
    except (PreviewError, TimeoutError, OSError, ValueError) as error:
        sys.stderr.write(f"dsh: cannot show the system prompt: {error}\n")
        return 1
    sys.stdout.write(system + "\n")
    return 0
