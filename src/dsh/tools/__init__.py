"""The built-in coding tools and the workspace seam they stand on.

* ``builtin_tools_plugin`` (loaded by :func:`dsh.app.load_core`; ``dsh.services.tools.tools_plugin`` is the registry) provides the
  ``workspace`` service and registers ``read_file``, ``write_file``, ``edit_file``, ``list_files``, ``grep`` and
  ``run_command``; see :mod:`dsh.tools._builtin` for what each guarantees
  (one module per tool beside it).
* The workspace seam: the tools read, write and run only through ``ctx.workspace``, whose three operations are
  the waterfalls ``workspace/read`` (:class:`ReadRequest` → ``str``), ``workspace/write`` (:class:`WriteRequest`
  → ``None``) and ``workspace/run`` (:class:`RunRequest` → :class:`CommandResult`). A front end overrides them
  with ``ctx.on(events.WORKSPACE_READ, listener)`` where ``listener(request, next)``; the innermost defaults
  are local (:func:`read_local`, :func:`write_local`, :func:`run_local`).
* The pieces other packages use (RFC 0018): :func:`plan_edits` (the pure edit matcher), :class:`BackgroundCommands`
  (the ``background_commands`` service); the output budget and the read ledger are the plugin's own
  (``_budget``, ``_ledger``).
* Paths: :func:`open_checked` (open a checked real path without following any symlink) and :func:`resolve_path` and the grant convention (``workspace.grants``, an :class:`OutsideGrants`; see :mod:`dsh.tools._paths`):
  a path outside the session's roots is refused unless a gate granted it for that one call.

Importing this package is cheap: no pydantic, no child process; the tools themselves load when the plugin
applies.
"""

from dsh.tools._background import BackgroundCommand, BackgroundCommands
from dsh.tools._edits import Edit, EditPlan, plan_edits
from dsh.tools._errors import OutsideRootsError, ToolError
from dsh.tools._paths import OutsideGrants, ResolvedPath, is_within, resolve_path
from dsh.tools._plugin import builtin_tools_plugin
from dsh.tools._process import CommandResult, run_process
from dsh.tools._safeopen import PathChangedError, open_checked
from dsh.tools._workspace import (
    ReadRequest,
    RunRequest,
    Workspace,
    WriteRequest,
    read_local,
    run_local,
    write_local,
)

__all__ = [
    "BackgroundCommand",
    "BackgroundCommands",
    "CommandResult",
    "Edit",
    "EditPlan",
    "OutsideGrants",
    "OutsideRootsError",
    "PathChangedError",
    "ReadRequest",
    "ResolvedPath",
    "RunRequest",
    "ToolError",
    "Workspace",
    "WriteRequest",
    "builtin_tools_plugin",
    "is_within",
    "open_checked",
    "plan_edits",
    "read_local",
    "resolve_path",
    "run_local",
    "run_process",
    "write_local",
]
