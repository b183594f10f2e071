"""The chat without a terminal: one prompt per input line, plain text out. For scripts and tests.

Guarantees: stdout carries the agent's replies only (each turn's text, ending with a newline); tool calls,
permission decisions and errors go to stderr as one line each; no ANSI escapes anywhere. Nobody can answer a
permission request, so each is rejected once (``--yes``: allowed once) and stderr says which. Blank lines are
skipped. A prompt the agent answers with an error (a missing key, say) is one ``[error]`` line on stderr and
the next line is still sent. The exit status is 0 when every prompt ended (whatever its stop reason) and no
permission request was rejected, 1 when one was answered with an error, a permission request was rejected (the
work asked for was not all done: ``dsh exec`` says the same with 1) or the agent failed.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

import anyio

from dsh.chat._client import AcpClient
from dsh.chat._commands import parse_local
from dsh.chat._mentions import prompt_blocks
from dsh.chat._rpc import RpcError, describe
from dsh.chat._sanitize import sanitize
from dsh.chat._terminals import Terminal

__all__ = ["PipedView"]

FINAL = ("completed", "failed")


class PipedView:
    def __init__(self, *, allow: bool, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.allow = allow
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self._titles: dict[str, str] = {}
        self._at_line_start = True
        self._message_id: object = None
        self.rejected = 0
        """Permission requests rejected (nobody to ask): any makes the exit status 1."""

    def on_update(self, update: dict[str, Any]) -> None:
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk":
            content = update.get("content")
            if isinstance(content, dict) and content.get("type") == "text":
                text = sanitize(str(content.get("text", "")))
                if update.get("messageId") != self._message_id:
                    self._message_id = update.get("messageId")
                    self.end_turn()  # a new message starts on a new line
                if text:
                    self.out.write(text)
                    self.out.flush()
                    self._at_line_start = text.endswith("\n")
        elif kind in ("tool_call", "tool_call_update"):
            self.end_turn()
            call_id = str(update.get("toolCallId"))
            if isinstance(update.get("title"), str):
                self._titles[call_id] = sanitize(update["title"], one_line=True)
            status = update.get("status")
            if status in FINAL:
                self.err.write(f"[tool] {self._titles.get(call_id, sanitize(call_id, one_line=True))}: {status}\n")
                self.err.flush()

    async def ask_permission(self, tool_call: dict[str, Any], options: list[dict[str, Any]]) -> str | None:
        wanted = ("allow_once", "allow_always") if self.allow else ("reject_once", "reject_always")
        title = tool_call.get("title") or self._titles.get(str(tool_call.get("toolCallId")), "a tool call")
        title = sanitize(str(title), one_line=True)
        for kind in wanted:
            for option in options:
                if option.get("kind") == kind:
                    verb = "allowed" if self.allow else "rejected (no terminal to ask; --yes allows)"
                    self.rejected += 0 if self.allow else 1
                    self.err.write(f"[permission] {title}: {verb}\n")
                    self.err.flush()
                    return str(option["optionId"])
        return None

    def on_terminal(self, terminal: Terminal) -> None:
        return None

    def end_turn(self) -> None:
        if not self._at_line_start:
            self.out.write("\n")
            self.out.flush()
            self._at_line_start = True

    async def run(self, client: AcpClient, resume: bool) -> int:
        await client.initialize()
        if resume:
            self.err.write("dsh chat: --resume needs a terminal to pick a session\n")
            return 2
        await client.new_session()
        status = 0
        while True:
            # abandoned on cancel: a signal must not wait for the next line of a pipe that may never come
            line = await anyio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
            if not line:
                break
            text = line.rstrip("\r\n")
            if not text.strip():
                continue
            local = parse_local(text, client.state)
            if local is not None:
                if local.name == "quit":
                    break
                self._local(client, local.name, local.argument)
                if local.name in ("model", "mode") and local.argument:
                    await client.set_option(local.name, local.argument)
                    self.out.write(f"{local.name}: {sanitize(str(client.state.current(local.name)), one_line=True)}\n")
                continue
            blocks = prompt_blocks(text, client.cwd, embed=client.can("promptCapabilities", "embeddedContext"))
            try:
                reason = await client.prompt(blocks)
            except RpcError as error:  # this prompt failed; the next line may still work
                self.end_turn()
                self.err.write(f"[error] {sanitize(describe(error), one_line=True)}\n")
                self.err.flush()
                status = 1
                continue
            self.end_turn()
            if reason != "end_turn":
                self.err.write(f"[stop] {sanitize(reason, one_line=True)}\n")
        return 1 if self.rejected else status

    def _local(self, client: AcpClient, name: str, argument: str) -> None:
        if name in ("model", "mode") and not argument:
            current = client.state.current(name)
            for value, label, _ in client.state.choices(name):
                mark = "*" if value == current else " "
                line = f"{mark} {value}" + (f" ({label})" if label != value else "")
                self.out.write(sanitize(line, one_line=True) + "\n")
        elif name == "thoughts":
            self.err.write("dsh chat: thoughts are not shown without a terminal\n")
        self.out.flush()
