"""The ``checkpoints`` plugin: a checkpoint before every file change a tool makes, ``/rewind`` and its undo.

Guarantees:

* **Taken in the pipeline, before apply.** The ``checkpoint`` stage (inside the policy's ``ask``) sees
  only calls that were prepared and allowed (``execution.prepared``); for a tool of an editing kind (edit,
  delete, move) it stores each path's state before the call runs, at most once per path and turn
  (``checkpoint/file``, bytes in the blob store, read and hashed in chunks), and after a call that succeeded what
  the call left there (``checkpoint/after``). A refused call or a prepare that failed changes nothing and is not
  checkpointed.
* **Bounded.** A file over the size limit (``max_file_size``, default 64 MiB) is not stored: before the call
  runs the user is asked, told that the file will not be restorable; without a yes the call does not run.
  Memory while checkpointing stays bounded by one chunk, and runs of zeros take no space in the store.
* **Large edits stored small.** A result's ``display.diff`` over 64 KiB of text is replaced by the changed region
  with three lines of context (:mod:`._excerpt`): the session log and the editor's frame no longer carry the
  whole file twice; the whole texts are in the checkpoint store, which is what ``/rewind`` uses.
* **Blobs are shared by content** (:class:`dsh.plugins.persistence.BlobStore`) under the owner
  ``<session id>.checkpoints``; deleting the session releases that owner, deleting the bytes nobody else holds.
* **Not tracked**: what shell commands change (``run_command``), files an editor holds but that dsh never
  changed. ``/rewind`` says so. After a command, each file dsh had changed that the command left different is
  noted (``checkpoint/command``; ``/rewind`` lists it under its turn) and counts as what dsh left there.
* **/rewind N** is all or nothing: when a file is no longer what dsh left there it is named and nothing is
  rewound (neither files nor conversation) unless ``--force``; a file that is now a symbolic link or outside the
  session's directories is named and nothing is rewound, ``--force`` or not. Otherwise what is there now is
  checkpointed first (so ``/rewind --undo`` can put it back), every file is restored atomically
  (:func:`._files.restore_files`: copies beside the targets, then renames), and only then is
  ``context/rewind`` appended and flushed. A failure names the file and why, changes no file on this disk, does
  not rewind the conversation, and leaves ``/rewind N`` able to try again.
* **/rewind --undo** puts back the files as they were just before the last rewind (same checks, same atomic
  restore) and appends ``checkpoint/undo``; the conversation stays rewound (the log keeps those turns).
"""

from __future__ import annotations

import dataclasses
import os
import stat
from typing import TYPE_CHECKING, Any

import anyio

from dsh import events as ev
from dsh._log import get_logger
from dsh.checkpoints._excerpt import shrink_diff
from dsh.checkpoints._files import (
    MemoryBlobs,
    RestoreOutcome,
    Target,
    capture,
    checkpoint_local,
    restore_files,
    size_local,
    state_local,
    state_of,
    target_of,
)
from dsh.checkpoints._log import (
    CHECKPOINT_AFTER,
    CHECKPOINT_COMMAND,
    CHECKPOINT_FILE,
    REWIND_EVENT,
    UNDO_EVENT,
    FileState,
    last_undoable,
    last_written,
    turns,
)
from dsh.kernel import plugin

if TYPE_CHECKING:
    from dsh.checkpoints._files import Blobs
    from dsh.commands import CommandResult, Invocation
    from dsh.kernel import Context, Next
    from dsh.services.tools import ToolExecution, ToolResult

__all__ = ["DEFAULT_MAX_FILE_SIZE", "EDIT_KINDS", "OWNER_SUFFIX", "Checkpoints", "checkpoints_plugin", "owner_of"]

DEFAULT_MAX_FILE_SIZE = 64 << 20
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
    def __init__(self, ctx: Context, blobs: Blobs, *, max_file_size: int = DEFAULT_MAX_FILE_SIZE) -> None:
        self._ctx = ctx
        self._blobs = blobs
        self._max_file_size = max_file_size
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

    async def _restore(
        self, execution: ToolExecution, session: Any, targets: list[Target], todo: list[tuple[str, FileState]]
    ) -> RestoreOutcome:
        """Restore the *targets* named in *todo* (all or nothing, :func:`._files.restore_files`), record what each
        restored file now is, and on a failure flush the session so what was recorded is on disk."""
        wanted = {path for path, _ in todo}
        outcome = await restore_files(self._ctx, execution, self._blobs, [t for t in targets if t.path in wanted])
        for done in outcome.restored:
            self._left(session, done.path, done.state)
        if outcome.failure is not None:
            await self._ctx.parallel(ev.SESSION_FLUSH, session)
        return outcome

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
            now = await anyio.to_thread.run_sync(state_local, path)
            if now.same_content(last):
                continue
            session.append(
                CHECKPOINT_COMMAND, {"turn": turn, "path": path, "call_id": execution.call_id, **_state_data(now)}
            )
            written[path] = now

    async def _accept_unrestorable(self, execution: ToolExecution, kind: str, big: list[tuple[str, int]]) -> bool:
        """Ask whether the call may run although *big* files will not be restorable (over the size limit)."""
        from dsh.policy import ALLOW_ONCE, REJECT_ONCE, Approval, ApprovalOption, approve

        agent = execution.agent
        assert agent is not None
        policies = self._ctx.get("policy")
        session_id = policies.owner(agent.session.id) if policies is not None else agent.session.id
        names = ", ".join(f"{path} ({size / (1 << 20):.0f} MiB)" for path, size in big)
        approval = Approval(
            session_id=session_id,
            call_id=execution.call_id,
            tool=execution.name,
            kind=kind,
            arguments=execution.arguments,
            options=(ApprovalOption(ALLOW_ONCE, "Run it anyway"), ApprovalOption(REJECT_ONCE, "Reject")),
            locations=tuple(path for path, _ in big),
            reason=f"/rewind will not be able to restore {names}: over the checkpoint limit of "
            f"{self._max_file_size >> 20} MiB",
            signal=execution.signal,
        )
        verdict = await approve(self._ctx, approval)
        return verdict.choice == ALLOW_ONCE

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
        kind = tool.meta.get("kind") if tool is not None else None
        if kind not in EDIT_KINDS:
            return await next_()
        # An edit's prepare read the file's text (through the editor when it serves files) and computed the new
        # text: both come with the call, so a checkpoint costs no extra request to the editor.
        diff = prepared.diff if kind == "edit" else None
        opened = session.last("turn/start")
        turn = opened.seq if opened is not None else -1
        taken = self._taken.setdefault(session.id, set())
        owner = owner_of(session.id)
        pending = [path for path in prepared.paths if (turn, path) not in taken]
        big: list[tuple[str, int]] = []
        for path in pending:
            size = await anyio.to_thread.run_sync(size_local, path)
            if size is not None and size > self._max_file_size:
                big.append((path, size))
        if big and not await self._accept_unrestorable(execution, str(kind), big):
            from dsh.policy import REFUSED_CODE
            from dsh.services.tools import ToolResult

            message = (
                f"Not run: {', '.join(path for path, _ in big)} is over the checkpoint limit "
                f"({self._max_file_size >> 20} MiB), so /rewind could not restore it, and the user did not accept "
                "that. Change it with a command the user approves, or ask the user."
            )
            return ToolResult(
                execution.call_id,
                [{"type": "text", "text": message}],
                is_error=True,
                error={"name": "PermissionDenied", "code": REFUSED_CODE},
            )
        unrestorable = {path for path, _ in big}
        for path in pending:
            if diff is not None and diff[0] == path and diff[1] is not None:
                data = diff[1].encode("utf-8")
                state = state_of(data, await anyio.to_thread.run_sync(_mode_of, path))
                await anyio.to_thread.run_sync(self._blobs.put, owner, data)
            elif path in unrestorable:
                state = FileState(True, None, None)  # existed, bytes not kept: not restorable
            else:
                state = await anyio.to_thread.run_sync(checkpoint_local, path, self._blobs, owner)
            data_of = {"turn": turn, "path": path, **_state_data(state)}
            if path in unrestorable:
                data_of["unrestorable"] = True
            session.append(CHECKPOINT_FILE, data_of)
            taken.add((turn, path))
        result = await next_()
        if not result.is_error:
            for path in prepared.paths:
                if diff is not None and diff[0] == path:
                    local_mode = await anyio.to_thread.run_sync(_mode_of, path)
                    state = state_of(diff[2].encode("utf-8"), local_mode)
                else:
                    state = await anyio.to_thread.run_sync(state_local, path)
                self._left(session, path, state)
        return result

    async def shrink(self, execution: ToolExecution, next_: Next[ToolExecution, ToolResult]) -> ToolResult:
        """The ``checkpoint`` stage, after :meth:`execute` (so outside ``apply``, which attaches ``display``): a large edit's
        diff is logged and shown as its changed region (:func:`._excerpt.shrink_diff`)."""
        result = await next_()
        display = result.display
        if display is None or "diff" not in display:
            return result
        shrunk = await anyio.to_thread.run_sync(shrink_diff, display)
        return result if shrunk is display else dataclasses.replace(result, display=shrunk)

    # -- /rewind ---------------------------------------------------------------------------------------------

    async def command(self, invocation: Invocation) -> CommandResult:
        from dsh.commands import CommandResult

        args = invocation.argv
        force = "--force" in args
        undo = "--undo" in args
        rest = [arg for arg in args if arg not in ("--force", "--undo")]
        session = invocation.agent.session
        if undo and not rest:
            return CommandResult(text=await self.undo(invocation.agent, force=force))
        events = session.events_without_chunks()
        listed = turns(events)
        if not rest and not undo:
            return CommandResult(text=self._listing(listed, last_undoable(events)))
        if undo or len(rest) != 1 or not rest[0].isdigit() or not 1 <= int(rest[0]) <= len(listed):
            span = f"1 to {len(listed)}" if listed else "none yet"
            return CommandResult(
                text=f"/rewind takes a turn number ({span}), optionally --force: `/rewind 2`; `/rewind --undo` "
                "puts back the files the last rewind replaced. Without an argument it lists the turns. "
                "Nothing was rewound."
            )
        number = int(rest[0])
        return CommandResult(text=await self.rewind(invocation.agent, number, force=force, listed=listed))

    def _listing(self, listed: list[Any], undoable: Any) -> str:
        lines: list[str] = []
        if not listed:
            lines.append("No turns to rewind yet.")
        else:
            lines.append("Turns (rewind with /rewind N: files and conversation go back to before turn N):")
            for turn in listed:
                files = ", ".join(sorted(turn.files)) if turn.files else "no files changed"
                if turn.by_commands:
                    files += f"; changed by commands (not restored): {', '.join(turn.by_commands)}"
                lines.append(f"{turn.number}. {_first_words(turn.prompt) or '(no text)'} — {files}")
        if undoable is not None:
            names = ", ".join(entry["path"] for entry in undoable.data.get("undo") or ()) or "no files"
            lines.append(
                f"The last rewind (to before turn {undoable.data.get('turn')}) replaced: {names}. "
                "/rewind --undo puts those files back as they were (the conversation stays rewound)."
            )
        lines.append(NOT_TRACKED)
        return "\n".join(lines)

    def _targets(self, execution: Any, wanted: list[tuple[str, FileState]]) -> tuple[list[Target], list[str]]:
        """The targets to write, and a line per path that may not be written (a link now, outside the roots)."""
        workspace = self._ctx.get("workspace")
        targets: list[Target] = []
        refused: list[str] = []
        for path, state in wanted:
            target = target_of(workspace, execution, path, state)
            if isinstance(target, str):
                refused.append(f"- {path}: {target}")
            else:
                targets.append(target)
        return targets, refused

    async def _changes(
        self, execution: Any, session: Any, wanted: dict[str, FileState], reference: dict[str, FileState]
    ) -> tuple[list[tuple[str, FileState]], list[str], dict[str, tuple[FileState, bytes | None]]]:
        """Which of *wanted* differ from what is there now (to do), which of those are no longer what
        *reference* says dsh left (changed), and what each is now."""
        workspace = self._ctx.get("workspace")
        todo: list[tuple[str, FileState]] = []
        changed: list[str] = []
        nows: dict[str, tuple[FileState, bytes | None]] = {}
        for path, state in sorted(wanted.items()):
            now, data = await capture(workspace, execution, path)
            if now.same_content(state):
                continue
            nows[path] = (now, data)
            last = reference.get(path)
            if last is None or not now.same_content(last):
                changed.append(path)
            todo.append((path, state))
        return todo, changed, nows

    async def _keep_now(self, session: Any, nows: dict[str, tuple[FileState, bytes | None]]) -> list[dict[str, Any]]:
        """Checkpoint what is there now (what a restore is about to replace), for ``/rewind --undo``."""
        owner = owner_of(session.id)
        kept: list[dict[str, Any]] = []
        for path, (now, data) in nows.items():
            state = now
            if now.existed:
                if data is not None:
                    await anyio.to_thread.run_sync(self._blobs.put, owner, data)
                else:
                    state = await anyio.to_thread.run_sync(checkpoint_local, path, self._blobs, owner)
            kept.append({"path": path, **_state_data(state)})
        return kept

    async def rewind(self, agent: Any, number: int, *, force: bool, listed: list[Any]) -> str:
        """Rewind *agent*'s session to before turn *number* (see the module docstring); the text to show."""
        from dsh.services.tools import ToolExecution

        session = agent.session
        target = listed[number - 1]
        before: dict[str, FileState] = {}
        for turn in listed[number - 1 :]:
            for path, state in turn.files.items():
                before.setdefault(path, state)
        execution = ToolExecution(f"rewind-{session.seq}", "rewind", {}, agent=agent)
        lost = [path for path, state in sorted(before.items()) if state.existed and not state.digest]
        if lost:
            names = "\n".join(f"- {path}" for path in lost)
            return (
                f"Nothing was rewound: these files were over the checkpoint limit when they were changed, so their "
                f"earlier content was not kept:\n{names}"
            )
        targets, refusals = self._targets(execution, sorted(before.items()))
        if refusals:
            return "Nothing was rewound: dsh will not write these files (--force does not change that):\n" + "\n".join(
                refusals
            )
        todo, changed, nows = await self._changes(execution, session, before, self._written_of(session))
        if changed and not force:
            names = "\n".join(f"- {path}" for path in changed)
            return (
                f"Nothing was rewound: these files changed since dsh last wrote them (by hand, a command or another "
                f"program):\n{names}\nRun /rewind {number} --force to overwrite them too."
            )
        undo = await self._keep_now(session, nows)
        outcome = await self._restore(execution, session, targets, todo)
        if outcome.failure is not None:
            path, why = outcome.failure
            log.warning("cannot restore a file", path=path, error=why[:200])
            lines = [f"Nothing was rewound: could not restore {path}: {why}."]
            if outcome.restored:
                lines.append("Already written through the editor: " + ", ".join(t.path for t in outcome.restored))
            else:
                lines.append("No file was changed.")
            lines.append(f"The conversation was not rewound; /rewind {number} can try again.")
            return "\n".join(lines)
        restored = [done.path for done in outcome.restored]
        session.append(
            REWIND_EVENT,
            {"to": target.seq, "turn": number, "restored": restored, "forced": force, "undo": undo},
        )
        await self._ctx.parallel(ev.SESSION_FLUSH, session)
        self._taken.pop(session.id, None)
        lines = [f"Rewound to before turn {number}: the model no longer sees turns {number} and later."]
        lines.append("Files restored: " + (", ".join(restored) if restored else "none"))
        if force and changed:
            lines.append("Overwritten although changed since dsh wrote them: " + ", ".join(changed))
        if undo:
            lines.append("/rewind --undo puts back the files as they were just before this rewind.")
        lines.append(NOT_TRACKED)
        return "\n".join(lines)

    async def undo(self, agent: Any, *, force: bool) -> str:
        """Put back the files the last rewind replaced (see the module docstring); the text to show."""
        from dsh.services.tools import ToolExecution

        session = agent.session
        last = last_undoable(session.events_without_chunks())
        if last is None:
            return "No rewind to undo."
        wanted = {entry["path"]: FileState.of(entry) for entry in last.data.get("undo") or ()}
        execution = ToolExecution(f"rewind-undo-{session.seq}", "rewind", {}, agent=agent)
        targets, refusals = self._targets(execution, sorted(wanted.items()))
        if refusals:
            return "Nothing was undone: dsh will not write these files:\n" + "\n".join(refusals)
        todo, changed, _nows = await self._changes(execution, session, wanted, self._written_of(session))
        if changed and not force:
            names = "\n".join(f"- {path}" for path in changed)
            return (
                f"Nothing was undone: these files changed since the rewind wrote them:\n{names}\n"
                "Run /rewind --undo --force to overwrite them too."
            )
        outcome = await self._restore(execution, session, targets, todo)
        if outcome.failure is not None:
            path, why = outcome.failure
            return f"Nothing was undone: could not restore {path}: {why}. /rewind --undo can try again."
        restored = [done.path for done in outcome.restored]
        session.append(UNDO_EVENT, {"rewind": last.seq, "restored": restored, "forced": force})
        await self._ctx.parallel(ev.SESSION_FLUSH, session)
        return (
            f"Undid the rewind to before turn {last.data.get('turn')}: files put back: "
            f"{', '.join(restored) if restored else 'none'}. The conversation stays rewound."
        )


def _mode_of(path: str) -> int | None:
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return None


def _blob_store(ctx: Context) -> Blobs:
    persistence = ctx.get("session_persistence")
    blobs = getattr(persistence, "blobs", None)
    return blobs if blobs is not None else MemoryBlobs()


@plugin("checkpoints", inject=("tools", "commands"))
def checkpoints_plugin(ctx: Context, config: object) -> None:
    """Checkpoint file changes in the tool pipeline's ``checkpoint`` stage and register ``/rewind`` (see the
    module docstring). *config*: ``{"max_file_size": bytes}`` (default :data:`DEFAULT_MAX_FILE_SIZE`), or None."""
    limit = DEFAULT_MAX_FILE_SIZE
    if isinstance(config, dict) and isinstance(config.get("max_file_size"), int):
        limit = config["max_file_size"]
    checkpoints = Checkpoints(ctx, _blob_store(ctx), max_file_size=limit)
    ctx.tools.stage("checkpoint", checkpoints.execute)
    ctx.tools.stage("checkpoint", checkpoints.shrink)  # inside execute: sees apply's display
    ctx.on(ev.SESSION_DISPOSED, checkpoints.forget)
    ctx.commands.register(
        "rewind",
        "List the turns, or undo turn N and later: files and conversation (--force overwrites files changed since;"
        " --undo puts back the files the last rewind replaced)",
        checkpoints.command,
        "[N] [--force] | --undo",
    )
    ctx.provide("checkpoints", checkpoints)
