"""The built-in coding tools assembled: read_file, write_file, edit_file, list_files, glob, grep, run_command
(one module per tool: ``_read``, ``_write``, ``_edit``, ``_list``, ``_glob``, ``_grep``, ``_commands``, each
with its argument model, body and card; shared checks in ``_host``, the result channel in ``_common``),
delete_file (``_delete``) and the extra tools (``_extra_tools``).

Guarantees:

* Every file read and write and every command goes through the ``workspace`` service (so a front end can route
  them to the editor); only the listing and searching of directory trees (``list_files``, ``grep``) look at
  the local disk directly, and ``grep`` runs ripgrep under the same rules as any command.
* Relative paths resolve against the session's cwd. A path whose real location is outside the session's roots
  is refused with an error the model can act on (code ``OUTSIDE_ROOTS``) unless a gate called
  ``workspace.grants`` for this call (:class:`dsh.tools.OutsideGrants`). The tools never ask for permission themselves.
* The path is resolved once: reads, writes, edits and a command's ``cwd`` use the real path that was checked,
  opened without following symlinks, so a symlink swapped in after the check cannot lead outside (the call
  fails with ``PATH_CHANGED`` instead; RFC 0010).
* Each tool's ``meta`` has ``kind`` (read, edit, search, execute), ``present(arguments, cwd) -> ToolCard | None``
  (title, absolute locations, the diff an edit is about to make) and ``paths(arguments, cwd) ->
  list[ResolvedPath]`` (what the call would touch, with ``inside`` computed against ``[cwd]``). Presenters are
  cheap, synchronous, never raise (invalid arguments give None) and depend on the arguments alone, never on
  the files, so a replay shows the cards the live session showed.
* ``write_file``, ``edit_file`` and ``run_command`` are prepared tools (``ToolDefinition.prepare``, see
  :mod:`dsh.services.tools`): prepare resolves the paths, checks the read ledger, reads the file and computes
  the exact change with the edit matcher (an edit that cannot apply fails there, before anyone is asked), and
  apply writes exactly that change, after checking that the file is still what prepare read (else
  ``CHANGED_SINCE``, nothing written). An outside path is reported by prepare (``Prepared.outside``) and
  refused by apply unless granted.
* A failure is an error result (``is_error``; ``error.code`` one of ``OUTSIDE_ROOTS``, ``NOT_FOUND``,
  ``IS_DIRECTORY``, ``NOT_TEXT``, ``NO_MATCH``, ``AMBIGUOUS_MATCH``, ``NO_CHANGE``, ``BAD_PATTERN``,
  ``BAD_CWD``, ``PATH_CHANGED``). ``run_command`` is an error when the command exits non-zero, is killed, times out or is
  cancelled, and still returns its output. Results carry ``display`` for people: ``{"diff": {path, old_text,
  new_text}}`` for writes and edits (``old_text`` None for a new file), ``{exit_code, signal, timed_out,
  cancelled, truncated, terminal_id?}`` for commands. A tool body returns only text: ``is_error`` and
  ``display`` reach the :class:`ToolResult` through this plugin's ``apply`` stage step (a context
  variable per call), so they are set on results of ``ctx.tools.execute`` and absent when a definition's
  ``execute`` is called directly.
* Output for the model is bounded: :data:`READ_MAX_LINES` lines / :data:`READ_MAX_CHARS` characters per read
  (with the offset to continue from), :data:`LIST_MAX_ENTRIES` entries, :data:`GREP_MAX_MATCHES` matches,
  :data:`COMMAND_OUTPUT_LIMIT` bytes of command output (the tail), each cut announced in the text.
"""

from __future__ import annotations

import dataclasses

from dsh.services.tools import ToolDefinition
from dsh.tools._background import BackgroundCommands
from dsh.tools._catalogue import ASKS, CONCURRENT
from dsh.tools._commands import (
    COMMAND_OUTPUT_LIMIT,
    COMMAND_TIMEOUT_DEFAULT,
    COMMAND_TIMEOUT_MAX,
    run_command_spec,
)
from dsh.tools._common import Spec, card_path, finish_call
from dsh.tools._delete import delete_file_spec
from dsh.tools._edit import edit_file_spec
from dsh.tools._extra_tools import extra_tools
from dsh.tools._filetext import READ_LINE_WIDTH
from dsh.tools._glob import GLOB_MAX_FILES, glob_spec
from dsh.tools._grep import GREP_MAX_FILES, GREP_MAX_MATCHES, grep_spec
from dsh.tools._host import ToolHost
from dsh.tools._ledger import ReadLedger
from dsh.tools._list import LIST_MAX_ENTRIES, list_files_spec
from dsh.tools._notebook_edit import notebook_edit_spec
from dsh.tools._read import READ_MAX_CHARS, READ_MAX_LINES, read_file_spec
from dsh.tools._workspace import Workspace
from dsh.tools._write import write_file_spec

__all__ = [
    "BUILTIN_TOOL_NAMES",
    "COMMAND_OUTPUT_LIMIT",
    "COMMAND_TIMEOUT_DEFAULT",
    "COMMAND_TIMEOUT_MAX",
    "GLOB_MAX_FILES",
    "GREP_MAX_FILES",
    "GREP_MAX_MATCHES",
    "LIST_MAX_ENTRIES",
    "READ_LINE_WIDTH",
    "READ_MAX_CHARS",
    "READ_MAX_LINES",
    "build_tools",
    "finish_call",
]

BUILTIN_TOOL_NAMES = (
    "read_file",
    "write_file",
    "edit_file",
    "notebook_edit",
    "list_files",
    "glob",
    "grep",
    "run_command",
    "command_output",
    "command_wait",
    "command_kill",
    "fetch_url",
)


def build_tools(
    workspace: Workspace,
    ledger: ReadLedger | None = None,
    background: BackgroundCommands | None = None,
    *,
    fetch_private: bool = False,
    spill_root: str | None = None,
) -> list[ToolDefinition]:
    """The tool definitions over *workspace* (the sessions' read *ledger*: a fresh one when None; the
    *background* commands registry: background commands are refused without one), each with ``meta`` {kind,
    present, paths, concurrency_safe}. *fetch_private*: ``fetch_url`` may reach private addresses."""
    host = ToolHost(workspace, ledger if ledger is not None else ReadLedger(), background, spill_root)
    specs: list[Spec] = [
        read_file_spec(host),
        write_file_spec(host),
        edit_file_spec(host),
        notebook_edit_spec(host),
        list_files_spec(host),
        glob_spec(host),
        grep_spec(host),
        run_command_spec(host),
        delete_file_spec(host, host.cwd, card_path),
        *extra_tools(background, fetch_private=fetch_private),
    ]
    return [
        dataclasses.replace(
            tool,
            meta={
                **tool.meta,  # a tool's own keys (fetch_url's ``domain``)
                "kind": kind,
                "present": present,
                "paths": paths,
                "concurrency_safe": tool.name in CONCURRENT,
                "asks": tool.name in ASKS,
            },
        )
        for tool, kind, present, paths in specs
    ]
