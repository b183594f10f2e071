"""The ``checkpoints`` plugin: a checkpoint before every file change a tool makes, and ``/rewind``.

Guarantees:

* **Taken in the pipeline, before apply.** The ``checkpoint`` stage (inside the policy's ``ask``) sees
  only calls that were prepared and allowed (``execution.prepared``); for a tool of an editing kind (edit,
  delete, move) it stores each path's state before the call runs, at most once per path and turn
  (``checkpoint/file``, bytes in the blob store), and after a call that succeeded what the call left there
  (``checkpoint/after``). A refused call or a prepare that failed changes nothing and is not checkpointed.
* **Blobs are shared by content** (:class:`dsh.plugins.persistence.BlobStore`) under the owner
  ``<session id>.checkpoints``; deleting the session releases that owner, deleting the bytes nobody else holds.
* **Not tracked**: what shell commands change (``run_command``), files an editor holds but that dsh never
  changed. ``/rewind`` says so. After a command, each file dsh had changed that the command left different is
  noted (``checkpoint/command``; ``/rewind`` lists it under its turn) and counts as what dsh left there.
* **/rewind N** is all or nothing about files changed by someone else: when a file is no longer what dsh left
  there it is named and nothing is rewound (neither files nor conversation) unless ``--force``; otherwise every
  file changed in turns N and later is put back as it was before turn N, then ``context/rewind`` takes those
  turns out of the model's view (the log keeps them). A restore that fails is named; the others stand.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio

from dsh import events as ev
from dsh._log import get_logger
from dsh.checkpoints._files import MemoryBlobs, capture, capture_local, restore, state_of
from dsh.checkpoints._log import (
    CHECKPOINT_AFTER,
    CHECKPOINT_COMMAND,
    CHECKPOINT_FILE,
    REWIND_EVENT,
    FileState,
    last_written,
    turns,
)
from dsh.kernel import plugin

if TYPE_CHECKING:
    from dsh.checkpoints._files import Blobs
    from dsh.commands import CommandResult, Invocation
    from dsh.kernel import Context, Next
    from dsh.services.tools import ToolExecution, ToolResult

__all__ = ["EDIT_KINDS", "OWNER_SUFFIX", "Checkpoints", "checkpoints_plugin", "owner_of"]

EDIT_KINDS = frozenset({"edit", "delete", "move"})
OWNER_SUFFIX = ".checkpoints"
NOT_TRACKED = "Files changed by commands (run_command) are not restored."
PROMPT_WORDS = 8

log = get_logger("dsh.checkpoints")


def owner_of(session_id: str) -> str:
    """The blob owner holding a session's checkpoints (released with the session)."""
    return session_id + OWNER_SUFFIX


def _state_data(state: FileState) -> dict[str, Any]:
    return {"existed": state.existed, "digest": state.digest, "mode": state.mode}


def _first_words(text: str) -> str:
    words = text.split()
    return " ".join(words[:PROMPT_WORDS]) + (" …" if len(words) > PROMPT_WORDS else "")


class Checkpoints:
    def __init__(self, ctx: Context, blobs: Blobs) -> None:
        self._ctx = ctx
        self._blobs = blobs
        self._taken: dict[str, set[tuple[int, str]]] = {}
        self._written: dict[str, dict[str, FileState]] = {}
        """Per session: what dsh last left at each file it changed (built from the log on first use)."""

    def forget(self, session: Any) -> None:
        self._taken.pop(session.id, None)
        self._written.pop(session.id, None)

    def _written_of(self, session: Any) -> dict[str, FileState]:
        written = self._written.get(session.id)
        if written is None:
            written = self._written[session.id] = last_written(session.events_without_chunks())
        return written

    def _left(self, session: Any, path: str, state: FileState) -> None:
        """Record what dsh left at *path* (``checkpoint/after``)."""
        session.append(CHECKPOINT_AFTER, {"path": path, **_state_data(state)})
        self._written_of(session)[path] = state

    async def _note_commands(self, execution: ToolExecution, session: Any) -> None:
        """After a command: note each file dsh had changed that the command left different (never restored)."""
        written = self._written_of(session)
        if not written:
            return
        opened = session.last("turn/start")
        turn = opened.seq if opened is not None else -1
        for path, last in list(written.items()):
            now, _ = await capture_local(path)
            if now.same_content(last):
                continue
            session.append(
                CHECKPOINT_COMMAND, {"turn": turn, "path": path, "call_id": execution.call_id, **_state_data(now)}
            )
            written[path] = now

    # -- taking checkpoints ----------------------------------------------------------------------------------

    async def execute(self, execution: ToolExecution, next_: Next[ToolExecution, ToolResult]) -> ToolResult:
        """The ``checkpoint`` stage (inside ``ask``: allowed calls only): checkpoint, run, record what was left."""
        prepared, agent = execution.prepared, execution.agent
        if prepared is None or agent is None or not (prepared.paths or prepared.command):
            return await next_()
        session = agent.session
        tool = self._ctx.tools.get(execution.name, session.id)
        if tool is not None and tool.meta.get("kind") == "execute" and prepared.command is not None:
            result = await next_()
            await self._note_commands(execution, session)
            return result
        if tool is None or tool.meta.get("kind") not in EDIT_KINDS:
            return await next_()
        # An edit's prepare read the file's text (through the editor when it serves files) and computed the new
        # text: both come with the call, so a checkpoint costs no extra request to the editor.
        diff = prepared.diff if tool.meta.get("kind") == "edit" else None
        opened = session.last("turn/start")
        turn = opened.seq if opened is not None else -1
        taken = self._taken.setdefault(session.id, set())
        for path in prepared.paths:
            if (turn, path) in taken:
                continue
            state, data = await capture_local(path)
            if diff is not None and diff[0] == path and diff[1] is not None:
                data = diff[1].encode("utf-8")
                state = state_of(data, state.mode)
            if data is not None:
                await anyio.to_thread.run_sync(self._blobs.put, owner_of(session.id), data)
            session.append(CHECKPOINT_FILE, {"turn": turn, "path": path, **_state_data(state)})
            taken.add((turn, path))
        result = await next_()
        if not result.is_error:
            for path in prepared.paths:
                state, _data = await capture_local(path)
                if diff is not None and diff[0] == path:
                    state = state_of(diff[2].encode("utf-8"), state.mode)
                self._left(session, path, state)
        return result

    # -- /rewind ---------------------------------------------------------------------------------------------

    async def command(self, invocation: Invocation) -> CommandResult:
        from dsh.commands import CommandResult

        args = invocation.argv
        force = "--force" in args
        rest = [arg for arg in args if arg != "--force"]
        session = invocation.agent.session
        listed = turns(session.events_without_chunks())
        if not rest:
            return CommandResult(text=self._listing(listed))
        if len(rest) != 1 or not rest[0].isdigit() or not 1 <= int(rest[0]) <= len(listed):
            span = f"1 to {len(listed)}" if listed else "none yet"
            return CommandResult(
                text=f"/rewind takes a turn number ({span}), optionally --force: `/rewind 2`. "
                "Without an argument it lists the turns. Nothing was rewound."
            )
        number = int(rest[0])
        return CommandResult(text=await self.rewind(invocation.agent, number, force=force, listed=listed))

    def _listing(self, listed: list[Any]) -> str:
        if not listed:
            return "No turns to rewind yet."
        lines = ["Turns (rewind with /rewind N: files and conversation go back to before turn N):"]
        for turn in listed:
            files = ", ".join(sorted(turn.files)) if turn.files else "no files changed"
            if turn.by_commands:
                files += f"; changed by commands (not restored): {', '.join(turn.by_commands)}"
            lines.append(f"{turn.number}. {_first_words(turn.prompt) or '(no text)'} — {files}")
        lines.append(NOT_TRACKED)
        return "\n".join(lines)

    async def rewind(self, agent: Any, number: int, *, force: bool, listed: list[Any]) -> str:
        """Rewind *agent*'s session to before turn *number* (see the module docstring); the text to show."""
        from dsh.services.tools import ToolExecution

        session = agent.session
        target = listed[number - 1]
        before: dict[str, FileState] = {}
        for turn in listed[number - 1 :]:
            for path, state in turn.files.items():
                before.setdefault(path, state)
        written = self._written_of(session)
        workspace = self._ctx.get("workspace")
        execution = ToolExecution(f"rewind-{session.seq}", "rewind", {}, agent=agent)
        todo: list[tuple[str, FileState]] = []
        changed: list[str] = []
        for path, state in sorted(before.items()):
            now, _ = await capture(workspace, execution, path)
            if now.same_content(state):
                continue
            last = written.get(path)
            if last is None or not now.same_content(last):
                changed.append(path)
            todo.append((path, state))
        if changed and not force:
            names = "\n".join(f"- {path}" for path in changed)
            return (
                f"Nothing was rewound: these files changed since dsh last wrote them (by hand, a command or another "
                f"program):\n{names}\nRun /rewind {number} --force to overwrite them too."
            )
        restored: list[str] = []
        failed: list[str] = []
        for path, state in todo:
            try:
                data = (
                    await anyio.to_thread.run_sync(self._blobs.get, state.digest)
                    if state.existed and state.digest
                    else None
                )
                await restore(workspace, execution, path, state, data)
            except Exception as exc:
                log.warning("cannot restore a file", path=path, error=str(exc)[:200])
                failed.append(f"{path} ({exc})")
                continue
            now, _ = await capture(workspace, execution, path)
            self._left(session, path, now)
            restored.append(path)
        session.append(REWIND_EVENT, {"to": target.seq, "turn": number, "restored": restored, "forced": force})
        await self._ctx.parallel(ev.SESSION_FLUSH, session)
        self._taken.pop(session.id, None)
        lines = [f"Rewound to before turn {number}: the model no longer sees turns {number} and later."]
        lines.append("Files restored: " + (", ".join(restored) if restored else "none"))
        if force and changed:
            lines.append("Overwritten although changed since dsh wrote them: " + ", ".join(changed))
        if failed:
            lines.append("Could not restore: " + "; ".join(failed))
        lines.append(NOT_TRACKED)
        return "\n".join(lines)


def _blob_store(ctx: Context) -> Blobs:
    persistence = ctx.get("session_persistence")
    blobs = getattr(persistence, "blobs", None)
    return blobs if blobs is not None else MemoryBlobs()


@plugin("checkpoints", inject=("tools", "commands"))
def checkpoints_plugin(ctx: Context, config: object) -> None:
    """Checkpoint file changes in the tool pipeline's ``checkpoint`` stage and register ``/rewind`` (see the
    module docstring)."""
    checkpoints = Checkpoints(ctx, _blob_store(ctx))
    ctx.tools.stage("checkpoint", checkpoints.execute)
    ctx.on(ev.SESSION_DISPOSED, checkpoints.forget)
    ctx.commands.register(
        "rewind",
        "List the turns, or undo turn N and later: files and conversation (--force overwrites files changed since)",
        checkpoints.command,
        "[N] [--force]",
    )
    ctx.provide("checkpoints", checkpoints)
