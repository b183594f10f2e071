"""``dsh exec --worktree``, ``worktrees: {mode: always}`` and ``dsh sessions list/show/rm`` of worktree sessions
(real processes, real git).

* ``dsh exec --worktree`` runs the task in a new worktree (the edit lands there, the main tree is untouched) and
  says where on stderr (a ``{"type": "worktree"}`` line with ``--json``); ``--worktree`` with ``--ephemeral`` or
  ``--session`` is a usage error (2); outside a repository the run does not start (1) and says why.
* ``mode: always`` gives every run in a repository a worktree; outside one the run goes on in place and says so.
* ``dsh sessions list`` shows the branch and the directory the session was started in (``--cwd`` finds it there);
  ``dsh sessions show`` says how to merge; ``dsh sessions rm`` refuses uncommitted changes, ``--force`` removes
  the worktree and the branch (no commits of its own).
* ``dsh sessions prune`` removes clean worktrees with their sessions and keeps sessions whose worktree has
  uncommitted changes; ``dsh sessions fork`` of a worktree session works in the source's start directory;
  ``dsh exec --session`` continues in the worktree, and says so when it was removed by hand.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.env import sandbox_env
from tests.support.headless import exec_run
from tests.worktrees.repo import call, configure, git, make_repo, present, script


def _dsh(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dsh", *args],
        env=sandbox_env(tmp_path, "echo"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _editing(tmp_path: Path, name: str = "edit.json") -> str:
    return script(
        tmp_path / name,
        [
            call("read_file", "r", path="shared.txt"),
            call("write_file", "w", path="shared.txt", content="from exec\n"),
            {"text": "edited"},
        ],
    )


def test_exec_worktree_then_sessions_list_show_and_rm(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    run = exec_run(tmp_path, "--worktree", "--allow-edits", "--json", "edit it", model=_editing(tmp_path), cwd=repo)
    assert run.code == 0, run.stderr
    notes = [line for line in run.lines if line["type"] == "worktree"]
    assert len(notes) == 1
    session, branch, path = run.lines[-1]["sessionId"], notes[0]["branch"], Path(notes[0]["path"])
    assert branch == f"dsh/{session.replace('-', '')[:8]}" and notes[0]["sessionId"] == session
    assert f"git -C {repo} merge {branch}" in notes[0]["message"]
    assert (path / "shared.txt").read_text(encoding="utf-8") == "from exec\n"
    assert (repo / "shared.txt").read_text(encoding="utf-8") == "base\n"

    listed = _dsh(tmp_path, "sessions", "list", "--cwd", str(repo))
    assert listed.returncode == 0, listed.stderr
    (line,) = [line for line in listed.stdout.splitlines() if session in line]
    assert f"[{branch}] " in line and str(repo) in line and str(path) not in line

    shown = _dsh(tmp_path, "sessions", "show", session)
    assert shown.returncode == 0, shown.stderr
    assert f"Worktree: {path} (branch {branch}" in shown.stdout
    assert "1 uncommitted change(s) in the worktree" in shown.stdout
    assert f"git -C {repo} merge {branch}" in shown.stdout

    refused = _dsh(tmp_path, "sessions", "rm", session)
    assert refused.returncode == 1
    assert "uncommitted change(s)" in refused.stderr and "--force" in refused.stderr
    assert present(path) and present(tmp_path / "dsh-data" / f"{session}.jsonl")

    forced = _dsh(tmp_path, "sessions", "rm", "--force", session)
    assert forced.returncode == 0, forced.stderr
    assert f"Removed the worktree {path} and its branch {branch} (no commits of its own)." in forced.stdout
    assert not present(path) and not present(tmp_path / "dsh-data" / f"{session}.jsonl")
    assert git(repo, "branch", "--format=%(refname:short)").split() == ["main"]


def test_exec_worktree_usage_and_refusals(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    for extra in (["--ephemeral"], ["--session", "00000000-0000-4000-8000-000000000000"]):
        run = exec_run(tmp_path, "--worktree", *extra, "task", cwd=repo)
        assert run.code == 2 and "--worktree" in run.stderr
    plain = tmp_path / "plain"
    plain.mkdir()
    run = exec_run(tmp_path, "--worktree", "task", cwd=plain)
    assert run.code == 1
    assert "--worktree:" in run.stderr and "is not in a git repository" in run.stderr


def test_mode_always_gives_every_run_in_a_repository_a_worktree(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    configure(tmp_path, "worktrees:\n  mode: always\n")
    run = exec_run(tmp_path, "--allow-edits", "edit it", model=_editing(tmp_path), cwd=repo)
    assert run.code == 0, run.stderr
    assert "This session works in a git worktree" in run.stderr
    assert (repo / "shared.txt").read_text(encoding="utf-8") == "base\n"
    (record,) = (tmp_path / "dsh-data" / "worktrees").glob("*.json")
    worktree = json.loads(record.read_text(encoding="utf-8"))
    assert (Path(worktree["path"]) / "shared.txt").read_text(encoding="utf-8") == "from exec\n"

    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "shared.txt").write_text("plain\n", encoding="utf-8")
    run = exec_run(tmp_path, "--allow-edits", "edit it", model=_editing(tmp_path, "again.json"), cwd=plain)
    assert run.code == 0, run.stderr
    assert "worktrees: always, but no worktree for this session" in run.stderr
    assert (plain / "shared.txt").read_text(encoding="utf-8") == "from exec\n"


def test_prune_removes_clean_worktrees_with_their_sessions_and_keeps_dirty_ones(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    clean = exec_run(tmp_path, "--worktree", "--json", "say hi", cwd=repo)
    dirty = exec_run(tmp_path, "--worktree", "--allow-edits", "--json", "edit", model=_editing(tmp_path), cwd=repo)
    assert clean.code == 0 and dirty.code == 0, clean.stderr + dirty.stderr
    (clean_note,) = [line for line in clean.lines if line["type"] == "worktree"]
    (dirty_note,) = [line for line in dirty.lines if line["type"] == "worktree"]
    pruned = _dsh(tmp_path, "sessions", "prune", "--older-than", "0s")
    assert pruned.returncode == 0, pruned.stderr
    assert "kept 1 whose git worktree has uncommitted changes" in pruned.stdout
    assert not present(clean_note["path"]) and present(dirty_note["path"])
    assert git(repo, "branch", "--format=%(refname:short)").split() == sorted([dirty_note["branch"], "main"])
    assert present(tmp_path / "dsh-data" / f"{dirty.lines[-1]['sessionId']}.jsonl")


def test_a_fork_of_a_worktree_session_works_in_the_directory_the_source_was_started_in(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    run = exec_run(tmp_path, "--worktree", "--json", "say hi", cwd=repo)
    assert run.code == 0, run.stderr
    source = run.lines[-1]["sessionId"]
    forked = _dsh(tmp_path, "sessions", "fork", source)
    assert forked.returncode == 0, forked.stderr
    new_id = forked.stdout.strip()
    header = json.loads((tmp_path / "dsh-data" / f"{new_id}.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert header["cwd"] == str(repo) and header["parent_session"] == source


def test_exec_session_of_a_worktree_removed_by_hand_says_so(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    run = exec_run(tmp_path, "--worktree", "--json", "say hi", cwd=repo)
    assert run.code == 0, run.stderr
    (note,) = [line for line in run.lines if line["type"] == "worktree"]
    again = exec_run(tmp_path, "--session", note["sessionId"], "again", cwd=repo)
    assert again.code == 0, again.stderr  # continued in its worktree
    shutil.rmtree(note["path"])
    gone = exec_run(tmp_path, "--session", note["sessionId"], "again", cwd=repo)
    assert gone.code == 1
    assert "was removed by hand" in gone.stderr and f"worktree add {note['path']} {note['branch']}" in gone.stderr
