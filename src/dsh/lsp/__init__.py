"""Language servers run by dsh, and the diagnostics an edit caused (RFC 0037).

* :func:`lsp_plugin` joins the tool pipeline's ``diagnose`` stage (inside ``checkpoint``, outside ``contain``):
  after an allowed ``edit_file``, ``edits``, ``write_file``, ``delete_file`` or ``notebook_edit`` of a file whose
  language has a server, it tells the server the file's text before and after and appends to the result only
  the diagnostics that are new (errors by default), with line numbers, the message, the file and the server.
* The wait is bounded (``lsp.timeout``, default 2 s, server start-up included); a server that fails, hangs or
  floods is one line in the result and the log, never a failed edit.
* Servers start in the background when the model reads a file of their language (else with the first edit; an
  edit waits at most ``start_wait`` for one still starting), one per root and language, shared by the sessions on
  that root, in their own process group at the sandbox level of approved commands, without provider keys; killed
  when the last session using them is disposed, when the daemon exits, and by the reaper's watchdog after a
  ``kill -9`` of the daemon.
* On by default (``enabled: auto``: roots that look like a project of the language); ``enabled: false`` or
  ``DSH_LSP=off`` loads nothing. Importing this package starts nothing and imports only pydantic models.
"""

from dsh.lsp._config import LspConfig, from_environment
from dsh.lsp._plugin import lsp_plugin

__all__ = [
    "LspConfig",
    "from_environment",
    "lsp_plugin",
]
