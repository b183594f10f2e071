"""``additionalDirectories`` (ACP, stable since 2026-06): extra roots of a session on new / load / resume.

Each directory becomes a root of the session's workspace (``ctx.workspace.add_root``): the tools read and write
there as freely as in the cwd, without a permission prompt for being outside it. The roots last as long as the
session is open here (removed on ``session/close``); a load or resume gives the roots of that request, nothing
is stored with the session. A path that is not absolute is ``invalid_params`` (the spec requires absolute paths);
a directory that does not exist is accepted (the tools report it when they use it).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from dsh.frontends.acp._rpc import INVALID_PARAMS, RpcError

__all__ = ["add_session_roots"]


def add_session_roots(workspace: Any, session_id: str, directories: Sequence[str]) -> Callable[[], None]:
    """Add *directories* as roots of *session_id*; return the remover of all of them. Raises ``invalid_params``
    (and adds nothing) when one is not absolute."""
    for directory in directories:
        if not isinstance(directory, str) or not os.path.isabs(directory):
            raise RpcError(
                INVALID_PARAMS,
                f"additionalDirectories must hold absolute paths, got {directory!r}",
                {"field": "additionalDirectories"},
            )
    if workspace is None or not directories:
        return lambda: None
    removers = [workspace.add_root(session_id, directory) for directory in dict.fromkeys(directories)]

    def remove() -> None:
        for remover in removers:
            remover()

    return remove
