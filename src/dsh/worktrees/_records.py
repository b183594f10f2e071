"""The worktree of a session, as stored next to the sessions: ``<data dir>/worktrees/<session id>.json``.

Guarantees: a record is written whole (a temporary file renamed over it) and only after its worktree exists; a
record that cannot be read is treated as absent and logged, never an exception of a listing; a session id reaches a
file name only through :func:`dsh.services.sessions.check_session_id`.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from dsh._log import get_logger
from dsh.services.sessions import check_session_id

__all__ = ["WORKTREES_DIR", "Worktree", "WorktreeStore"]

WORKTREES_DIR = "worktrees"
"""Under the data directory: the checkouts (``<repo>-<short id>/``) and the records (``<session id>.json``)."""

log = get_logger("dsh.worktrees")


@dataclass(frozen=True, slots=True)
class Worktree:
    """``repo``: the top of the main working tree (where the branch is merged); ``origin``: the cwd the session was
    opened with; ``path``: the worktree's top; ``cwd``: the session's cwd in it (``origin``'s place in the tree);
    ``branch``: its branch; ``base``: the commit it started from."""

    session_id: str
    repo: str
    origin: str
    path: str
    cwd: str
    branch: str
    base: str
    created_at: float


class WorktreeStore:
    """The records of one data directory."""

    def __init__(self, data_dir: str | Path) -> None:
        self.root = Path(data_dir) / WORKTREES_DIR

    def _file(self, session_id: str) -> Path:
        return self.root / f"{check_session_id(session_id)}.json"

    def get(self, session_id: str) -> Worktree | None:
        try:
            path = self._file(session_id)
        except ValueError:
            return None
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            return Worktree(**{key: raw[key] for key in Worktree.__dataclass_fields__})
        except (FileNotFoundError, NotADirectoryError):
            return None
        except (OSError, ValueError, KeyError, TypeError):
            log.warning("unreadable worktree record", path=str(path))
            return None

    def all(self) -> dict[str, Worktree]:
        """Every readable record, by session id."""
        try:
            names = os.listdir(self.root)
        except OSError:
            return {}
        found = {}
        for name in names:
            if name.endswith(".json") and not name.startswith("."):
                record = self.get(name.removesuffix(".json"))
                if record is not None:
                    found[record.session_id] = record
        return found

    def save(self, record: Worktree) -> None:
        path = self._file(record.session_id)
        self.root.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.tmp")
        temporary.write_text(json.dumps(asdict(record), indent=1), encoding="utf-8")
        os.replace(temporary, path)

    def drop(self, session_id: str) -> None:
        try:
            self._file(session_id).unlink()
        except FileNotFoundError:
            pass
