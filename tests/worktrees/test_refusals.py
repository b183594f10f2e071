"""What ``session/new`` with ``_meta.dsh.worktree`` does where a worktree cannot be made, and with hostile input
(over the wire: ``dsh acp``, the official SDK client, real git).

* Not a git repository, a bare repository, a repository without a commit, git missing, a branch that exists: a
  -32602 error whose ``data.reason`` names the cause; no session, no worktree, no branch is left behind.
* A detached HEAD: the worktree's branch starts at HEAD's commit (said in the answer). A dirty main tree: the
  worktree starts from the last commit, the main tree's changes stay where they are (counted in the answer).
* A branch name or base from the client cannot become an option of git or a path (``--upload-pack=…``, ``..``,
  a leading ``-``), unknown keys such as ``path`` are refused, git runs without the provider keys and without the
  daemon's ``GIT_DIR``, and no hook of the repository runs; what git prints never reaches the protocol's stdout.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError

from tests.support.durable import Daemon, run_daemon
from tests.worktrees.repo import git, make_repo, present, worktree_meta


async def _new(daemon: Daemon, cwd: Path, worktree: Any) -> dict[str, Any]:
    params = {"cwd": str(cwd), "mcpServers": [], "_meta": {"dsh": {"worktree": worktree}}}
    result: dict[str, Any] = await daemon.request("session/new", params)
    return result


async def _refused(daemon: Daemon, cwd: Path, worktree: Any) -> dict[str, Any]:
    with pytest.raises(RequestError) as caught:
        await _new(daemon, cwd, worktree)
    assert caught.value.code == -32602, caught.value
    data: dict[str, Any] = caught.value.data
    data["message"] = str(caught.value)
    return data


def _nothing_made(data_dir: Path) -> bool:
    worktrees = data_dir / "worktrees"
    return not present(worktrees) or not os.listdir(worktrees)


async def test_where_no_worktree_can_be_made_the_error_says_why(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    bare = tmp_path / "bare.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    empty = make_repo(tmp_path / "empty", commit=False)
    repo = make_repo(tmp_path / "repo")
    data = tmp_path / "data"
    async with run_daemon(tmp_path, data) as daemon:
        await daemon.initialize()
        refused = await _refused(daemon, plain, True)
        assert refused["reason"] == "NOT_A_REPOSITORY" and "is not in a git repository" in refused["message"]
        refused = await _refused(daemon, bare, True)
        assert refused["reason"] == "BARE_REPOSITORY" and "bare repository" in refused["message"]
        refused = await _refused(daemon, repo / ".git", True)
        assert refused["reason"] == "BARE_REPOSITORY"
        refused = await _refused(daemon, empty, True)
        assert refused["reason"] == "NO_COMMIT" and "no commit yet" in refused["message"]
        refused = await _refused(daemon, repo, {"branch": "main"})
        assert refused["reason"] == "BRANCH_EXISTS" and "branch main already exists" in refused["message"]
        refused = await _refused(daemon, repo, {"base": "no-such-thing"})
        assert refused["reason"] == "WORKTREE_REQUEST"
        assert (await daemon.request("session/list", {}))["sessions"] == []
    assert _nothing_made(data)
    assert git(repo, "branch", "--format=%(refname:short)").split() == ["main"]


async def test_without_git_the_error_says_git_is_missing(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    empty_path = tmp_path / "no-git-here"
    empty_path.mkdir()
    async with run_daemon(tmp_path, tmp_path / "data", env={"PATH": str(empty_path)}) as daemon:
        await daemon.initialize()
        refused = await _refused(daemon, repo, True)
        assert refused["reason"] == "GIT_MISSING" and "git is not installed" in refused["message"]
        plain = await _new(daemon, repo, False)  # a session without a worktree still works
        await daemon.prompt(plain["sessionId"], "hello")


async def test_a_detached_head_and_a_dirty_main_tree(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    first = git(repo, "rev-parse", "HEAD").strip()
    (repo / "shared.txt").write_text("second\n", encoding="utf-8")
    git(repo, "commit", "-q", "-am", "second")
    git(repo, "checkout", "-q", "--detach", first)
    (repo / "shared.txt").write_text("uncommitted\n", encoding="utf-8")
    (repo / "new.txt").write_text("untracked\n", encoding="utf-8")
    async with run_daemon(tmp_path, tmp_path / "data") as daemon:
        await daemon.initialize()
        meta = worktree_meta(await _new(daemon, repo, True))
    assert meta["base"] == first and meta["detached"] is True
    assert "HEAD was detached" in meta["message"]
    assert meta["mainTreeChanges"] == 2 and "2 uncommitted change(s)" in meta["message"]
    assert (Path(meta["path"]) / "shared.txt").read_text(encoding="utf-8") == "base\n"
    assert not present(Path(meta["path"]) / "new.txt")
    assert (repo / "shared.txt").read_text(encoding="utf-8") == "uncommitted\n"
    assert git(repo, "rev-parse", "HEAD").strip() == first  # the main tree's HEAD did not move
    assert git(repo, "rev-parse", meta["branch"]).strip() == first


HOSTILE = [
    {"branch": "--upload-pack=touch /tmp/pwned"},
    {"branch": "-b"},
    {"branch": "HEAD"},
    {"branch": "../../escape"},
    {"branch": "a..b"},
    {"branch": "ok/../x"},
    {"branch": ".hidden"},
    {"branch": "x.lock"},
    {"branch": "x/"},
    {"branch": "a b"},
    {"branch": "x@{1}"},
    {"branch": "é"},
    {"branch": "x" * 101},
    {"branch": 7},
    {"base": "--output=/tmp/pwned"},
    {"base": "-"},
    {"base": "main..HEAD"},
    {"path": "/tmp/elsewhere"},
    {"path": "../x", "branch": "fine"},
    "yes",
    ["branch"],
]


async def test_hostile_requests_are_refused_before_git_sees_them(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    hook = repo / ".git" / "hooks" / "post-checkout"
    marker = tmp_path / "hook-ran"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n", encoding="utf-8")
    hook.chmod(0o755)
    fake = tmp_path / "bin"  # a git that records its environment, then is the real git
    fake.mkdir()
    dumps = tmp_path / "env-dumps"
    dumps.mkdir()
    real = git(tmp_path, "--exec-path").strip()
    (fake / "git").write_text(f'#!/bin/sh\nenv > {dumps}/env.$$\nexec {real}/git "$@"\n')
    (fake / "git").chmod(0o755)
    env = {
        "PATH": f"{fake}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "OPENAI_API_KEY": "sk-worktree-test-secret-0123456789",
        "GIT_DIR": str(tmp_path / "not-this-repository"),
    }
    async with run_daemon(tmp_path, tmp_path / "data", env=env) as daemon:
        await daemon.initialize()
        for request in HOSTILE:
            refused = await _refused(daemon, repo, request)
            assert refused["reason"] == "WORKTREE_REQUEST", (request, refused)
        made = worktree_meta(await _new(daemon, repo, {"branch": "feature/fine-1.2", "base": "main"}))
        assert made["branch"] == "feature/fine-1.2"
    assert not present("/tmp/pwned")
    assert not present(marker)  # no hook of the repository ran
    assert git(repo, "branch", "--format=%(refname:short)").split() == ["feature/fine-1.2", "main"]
    environments = [path.read_text(encoding="utf-8") for path in dumps.iterdir()]
    assert environments  # git ran through the recording wrapper
    for environment in environments:
        assert "sk-worktree-test-secret" not in environment
        assert "GIT_DIR=" not in environment
        assert "GIT_TERMINAL_PROMPT=0" in environment
        assert "core.hooksPath" in environment


async def test_what_git_prints_never_reaches_the_protocol(tmp_path: Path) -> None:
    from tests.support.sdk import run_dsh

    repo = make_repo(tmp_path / "repo")
    fake = tmp_path / "bin"  # a git whose `worktree` commands print a line that is not JSON, then the real git
    fake.mkdir()
    real = git(tmp_path, "--exec-path").strip()
    script_text = f'#!/bin/sh\ncase "$1" in worktree) echo NOT-JSON-FROM-GIT;; esac\nexec {real}/git "$@"\n'
    (fake / "git").write_text(script_text)
    (fake / "git").chmod(0o755)
    env = {"PATH": f"{fake}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    async with run_dsh(tmp_path, env=env) as daemon:  # on exit: every byte of stdout must be a valid frame
        await daemon.initialize()
        params = {"cwd": str(repo), "mcpServers": [], "_meta": {"dsh": {"worktree": True}}}
        made = worktree_meta(await daemon.conn._conn.send_request("session/new", params))
        assert present(made["path"])  # `git worktree add` ran (and printed)
    assert b"NOT-JSON" not in bytes(daemon.stdout)
