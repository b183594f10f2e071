"""Making, describing and removing a session's git worktree (blocking: run these in a worker thread).

Guarantees:

* :func:`create_worktree` makes a new branch (``dsh/<short id>`` or the client's, checked) at ``HEAD`` (or the
  request's base, resolved to a commit) and checks it out in ``<data dir>/worktrees/<repo>-<short id>/`` with
  ``git worktree add``; the record is written only after that succeeded, and a failure after ``worktree add``
  removes the worktree and the branch again. The main tree is never written to: its uncommitted changes stay
  where they are and are not in the worktree (:attr:`Created.main_dirty` counts them, for the caller to say).
  A detached ``HEAD`` is a commit like any other: the branch starts there.
* Before git is asked to make anything, every refusal is a :class:`WorktreeError` naming the cause: git missing,
  not a repository, a bare repository (or a cwd inside ``.git``), a repository without a commit, a branch that
  already exists, an unknown base.
* :func:`remove_worktree` refuses a worktree with uncommitted changes or untracked files (``WORKTREE_DIRTY``, the
  first changes listed) unless *force*; it then removes the worktree (a directory removed by hand is pruned
  from git's list), deletes the branch when no commit on it is missing from every other branch, tag and remote
  branch, and otherwise keeps it and says how many commits are its own; the record goes last.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from dsh.worktrees._git import GitResult, git, git_program
from dsh.worktrees._options import WorktreeError, WorktreeRequest, check_branch
from dsh.worktrees._records import WORKTREES_DIR, Worktree, WorktreeStore

__all__ = [
    "Created",
    "check_clean",
    "Removed",
    "WorktreeState",
    "create_worktree",
    "merge_hint",
    "remove_worktree",
    "short_id",
    "worktree_state",
]


@dataclass(frozen=True, slots=True)
class Created:
    worktree: Worktree
    detached: bool
    """``HEAD`` was detached: the branch starts at its commit."""
    main_dirty: int
    """Changed or untracked files in the main tree, which the worktree does not have."""

    def summary(self) -> str:
        """One paragraph for the person: where the session works and what it does not have."""
        w = self.worktree
        text = f"This session works in a git worktree: {w.path} on branch {w.branch} (from {w.base[:12]})."
        if self.detached:
            text += " HEAD was detached: the branch starts at its commit."
        if self.main_dirty:
            text += (
                f" The main tree has {self.main_dirty} uncommitted change(s); they are not in the worktree"
                " (it starts from the last commit)."
            )
        return text


@dataclass(frozen=True, slots=True)
class Removed:
    worktree_removed: bool
    branch_deleted: bool
    own_commits: int
    """Commits on the branch that no other branch, tag or remote branch has (the branch was kept when > 0)."""
    message: str


@dataclass(frozen=True, slots=True)
class WorktreeState:
    exists: bool
    changes: int
    """Uncommitted changes and untracked files in the worktree (0 when it is gone)."""
    own_commits: int
    branch_exists: bool


def short_id(session_id: str) -> str:
    """The first 8 hexadecimal digits of *session_id* (a uuid): the branch's and directory's suffix."""
    return "".join(ch for ch in session_id.lower() if ch in "0123456789abcdef")[:8] or "session"


def _checked(result: GitResult, what: str, data: dict[str, str] | None = None) -> GitResult:
    if not result.ok:
        raise WorktreeError(f"{what}: {result.reason()}", "GIT_FAILED", data)
    return result


def _changes(directory: str) -> list[str]:
    """``XY path`` entries of ``git status`` in *directory* (renames' second paths left out)."""
    result = git(["status", "--porcelain=v1", "-z", "--untracked-files=normal"], directory)
    _checked(result, f"git status in {directory} failed")
    entries, skip = [], False
    for entry in result.out.split("\0"):
        if skip:
            skip = False
            continue
        if len(entry) > 3:
            entries.append(entry)
            skip = entry[0] in "RC"
    return entries


def _directory_name(repo: str, short: str) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]", "_", os.path.basename(repo.rstrip("/")))[:40].strip("._-") or "repo"
    return f"{name}-{short}"


def create_worktree(data_dir: str | Path, session_id: str, cwd: str, request: WorktreeRequest) -> Created:
    """Make the worktree of a new session opened in *cwd* (see the module's guarantees)."""
    git_program()
    if not os.path.isdir(cwd):
        raise WorktreeError(f"{cwd} is not a directory", "NOT_A_REPOSITORY", {"cwd": cwd})
    probe = git(["rev-parse", "--is-bare-repository", "--is-inside-work-tree"], cwd)
    if not probe.ok:
        raise WorktreeError(
            f"{cwd} is not in a git repository: a worktree session needs one (run `git init` and commit, or open "
            "the session without a worktree)",
            "NOT_A_REPOSITORY",
            {"cwd": cwd},
        )
    bare, inside = ([*probe.out.split(), "", ""])[:2]
    if bare == "true" or inside != "true":
        raise WorktreeError(
            f"{cwd} is a bare repository or a git directory: there is no working tree to branch from (open the "
            "session in a clone's working tree)",
            "BARE_REPOSITORY",
            {"cwd": cwd},
        )
    top = _checked(git(["rev-parse", "--show-toplevel"], cwd), f"cannot find the top of {cwd}").out.strip()
    base_name = request.base or "HEAD"
    resolved = git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{base_name}^{{commit}}"], top)
    if not resolved.ok:
        if request.base is None:
            raise WorktreeError(
                f"the repository {top} has no commit yet: commit once, then a worktree can branch from it",
                "NO_COMMIT",
                {"repo": top},
            )
        raise WorktreeError(
            f"worktree base {request.base!r} is not a commit of {top}", "WORKTREE_REQUEST", {"repo": top}
        )
    base = resolved.out.strip()
    detached = not git(["symbolic-ref", "--quiet", "HEAD"], top).ok
    short = short_id(session_id)
    branch = check_branch(request.branch) if request.branch is not None else f"dsh/{short}"
    if not git(["check-ref-format", "--branch", branch], top).ok:  # never starts with "-": checked above
        raise WorktreeError(f"worktree branch {branch!r} is not a valid branch name", "WORKTREE_REQUEST")
    if git(["show-ref", "--verify", "--quiet", f"refs/heads/{branch}"], top).ok:
        raise WorktreeError(
            f"branch {branch} already exists in {top}: name another branch", "BRANCH_EXISTS", {"branch": branch}
        )
    main_dirty = len(_changes(top))
    parent = Path(data_dir) / WORKTREES_DIR
    parent.mkdir(parents=True, exist_ok=True)
    path = str(parent / _directory_name(top, short))
    if os.path.lexists(path):
        raise WorktreeError(f"{path} already exists: remove it or delete the session that made it", "GIT_FAILED")
    _checked(
        git(["worktree", "add", "--quiet", "--no-track", "-b", branch, "--", path, base], top),
        f"git worktree add failed in {top}",
        {"repo": top},
    )
    try:
        relative = os.path.relpath(os.path.realpath(cwd), os.path.realpath(top))
        session_cwd = path if relative == "." else os.path.join(path, relative)
        os.makedirs(session_cwd, exist_ok=True)  # a directory git does not track (empty, ignored) is made
        record = Worktree(session_id, top, cwd, path, session_cwd, branch, base, time.time())
        WorktreeStore(data_dir).save(record)
    except BaseException:
        git(["worktree", "remove", "--force", "--", path], top)
        git(["update-ref", "-d", f"refs/heads/{branch}", base], top)
        raise
    return Created(record, detached, main_dirty)


def _own_commits(record: Worktree) -> tuple[str | None, int]:
    """The branch's tip (None: no such branch) and how many of its commits no other ref has."""
    tip = git(["rev-parse", "--verify", "--quiet", f"refs/heads/{record.branch}"], record.repo)
    if not tip.ok:
        return None, 0
    sha = tip.out.strip()
    count = git(
        ["rev-list", "--count", sha, "--not", f"--exclude={record.branch}", "--branches", "--tags", "--remotes"],
        record.repo,
    )
    return sha, int(count.out.strip() or 0) if count.ok else 1


def worktree_state(record: Worktree) -> WorktreeState:
    """Whether the worktree is still there, its uncommitted changes, its branch's own commits."""
    exists = os.path.isdir(record.path)
    changes = len(_changes(record.path)) if exists else 0
    if os.path.isdir(record.repo):
        tip, own = _own_commits(record)
    else:
        tip, own = None, 0
    return WorktreeState(exists, changes, own, tip is not None)


def merge_hint(record: Worktree, state: WorktreeState) -> str:
    """What ``dsh sessions show`` and ``/worktree`` tell: where the work is and the commands that merge it."""
    path, repo, branch = shlex.quote(record.path), shlex.quote(record.repo), shlex.quote(record.branch)
    lines = [f"Worktree: {record.path} (branch {record.branch}, from {record.base[:12]} of {record.repo})"]
    if not state.exists:
        lines.append(
            f"The worktree directory was removed by hand; the branch {'is still there' if state.branch_exists else 'is gone too'}."
        )
    if state.changes:
        lines.append(f"{state.changes} uncommitted change(s) in the worktree: commit them first:")
        lines.append(f"  git -C {path} add -A && git -C {path} commit -m 'Work of dsh session {record.session_id[:8]}'")
    if state.branch_exists:
        lines.append(f"{state.own_commits} commit(s) of its own on {record.branch}. To merge them:")
        lines.append(f"  git -C {repo} merge {branch}")
    lines.append(
        "Deleting the session removes the worktree, and the branch unless it has commits of its own "
        "(uncommitted changes: delete refuses without --force)."
    )
    return "\n".join(lines)


def check_clean(record: Worktree) -> None:
    """Raise ``WORKTREE_DIRTY`` when the worktree has uncommitted changes or untracked files (a worktree that is
    gone, or whose repository is gone, is clean: there is nothing of it left to lose)."""
    if not os.path.isdir(record.path) or not os.path.isdir(record.repo):
        return
    changes = _changes(record.path)
    if changes:
        path = shlex.quote(record.path)
        raise WorktreeError(
            f"the worktree {record.path} has {len(changes)} uncommitted change(s) (e.g. {changes[0][3:]}): "
            f"commit them (`git -C {path} add -A && git -C {path} commit`) or delete with force "
            "(`dsh sessions rm --force`, ACP `_meta.dsh.force`) to discard them",
            "WORKTREE_DIRTY",
            {"path": record.path, "branch": record.branch, "changes": [c[3:] for c in changes[:20]]},
        )


def remove_worktree(data_dir: str | Path, record: Worktree, *, force: bool = False) -> Removed:
    """Remove the session's worktree and, when it has no commits of its own, its branch (module guarantees)."""
    git_program()
    store = WorktreeStore(data_dir)
    if not os.path.isdir(record.repo):  # the repository itself is gone: only our directory is left to remove
        if os.path.isdir(record.path):
            shutil.rmtree(record.path, ignore_errors=True)
        store.drop(record.session_id)
        return Removed(True, False, 0, f"The repository {record.repo} is gone; removed the worktree {record.path}.")
    removed = False
    if os.path.isdir(record.path):
        if not force:
            check_clean(record)
        result = git(["worktree", "remove", "--force", "--", record.path], record.repo)
        if not result.ok:  # not a worktree of that repository any more: our directory all the same
            shutil.rmtree(record.path, ignore_errors=True)
        removed = True
    git(["worktree", "prune"], record.repo)
    tip, own = _own_commits(record)
    if tip is None:
        message = f"Removed the worktree {record.path}; the branch {record.branch} was already gone."
        deleted = False
    elif own == 0:
        _checked(git(["update-ref", "-d", f"refs/heads/{record.branch}", tip], record.repo), "cannot delete the branch")
        message = f"Removed the worktree {record.path} and its branch {record.branch} (no commits of its own)."
        deleted = True
    else:
        message = (
            f"Removed the worktree {record.path}; kept the branch {record.branch}: {own} commit(s) of its own "
            f"(merge: git -C {shlex.quote(record.repo)} merge {record.branch}; drop: git -C {shlex.quote(record.repo)} "
            f"branch -D {record.branch})."
        )
        deleted = False
    store.drop(record.session_id)
    return Removed(removed, deleted, own, message)
