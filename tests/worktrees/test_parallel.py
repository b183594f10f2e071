"""Two sessions in worktrees of one repository, over the wire (``dsh acp``, the official SDK client, real git).

* ``session/new`` with ``_meta.dsh.worktree: true`` makes a worktree on branch ``dsh/<short id>`` from HEAD under
  the data directory; the answer says where.
* Both sessions edit the same path with different content, their turns running at the same time: each worktree
  holds its own change, the main tree is untouched.
* ``session/list`` (filtered by the repository's directory) shows each session's branch; closing keeps the worktree;
  ``session/load`` from the repository's directory reopens the session in its worktree.
* ``session/delete`` refuses a worktree with uncommitted changes unless ``_meta.dsh.force``; it then removes the
  worktree and the branch (no commits of its own); a branch with a commit of its own is kept and the answer says so.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from acp import RequestError

from tests.support.durable import WAIT, run_daemon
from tests.worktrees.repo import call, configure, git, make_repo, present, script, worktree_meta


def _models(tmp_path: Path) -> tuple[str, str]:
    a = script(
        tmp_path / "a.json",
        [
            call("read_file", "r0", path="shared.txt"),
            call("write_file", "wa", path="shared.txt", content="from A\n"),
            {"text": "A done"},
            call("read_file", "ra", path="shared.txt"),
            {"text": "A read"},
        ],
    )
    b = script(
        tmp_path / "b.json",
        [
            call("read_file", "r1", path="shared.txt"),
            call("write_file", "wb", path="shared.txt", content="from B\n"),
            {"text": "B done"},
        ],
    )
    return a, b


async def test_two_worktree_sessions_edit_one_path_in_parallel_and_delete_cleans_up(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    data = tmp_path / "data"
    a, b = _models(tmp_path)
    configure(tmp_path, f"permissions:\n  mode: accept-edits\nmodels: ['{a}', '{b}']\n")
    async with run_daemon(tmp_path, data, model=a) as daemon:
        await daemon.initialize()
        new = {"cwd": str(repo), "mcpServers": [], "_meta": {"dsh": {"worktree": True}}}
        first = await daemon.request("session/new", new)
        second = await daemon.request("session/new", new)
        one, two = first["sessionId"], second["sessionId"]
        await daemon.request("session/set_config_option", {"sessionId": two, "configId": "model", "value": b})
        w1, w2 = worktree_meta(first), worktree_meta(second)
        assert w1["branch"] == f"dsh/{one.replace('-', '')[:8]}" and w2["branch"] == f"dsh/{two.replace('-', '')[:8]}"
        for meta in (w1, w2):
            assert Path(meta["path"]).parent == data / "worktrees"
            assert Path(meta["repo"]) == repo
            assert meta["base"] == git(repo, "rev-parse", "HEAD").strip()
            assert f"on branch {meta['branch']}" in meta["message"]

        async with anyio.create_task_group() as group:  # both turns at once
            group.start_soon(daemon.prompt, one, "edit")
            group.start_soon(daemon.prompt, two, "edit")

        assert (Path(w1["path"]) / "shared.txt").read_text(encoding="utf-8") == "from A\n"
        assert (Path(w2["path"]) / "shared.txt").read_text(encoding="utf-8") == "from B\n"
        assert (repo / "shared.txt").read_text(encoding="utf-8") == "base\n"
        assert git(repo, "status", "--porcelain") == ""
        assert git(w1["path"], "status", "--porcelain") == " M shared.txt\n"
        assert git(repo, "branch", "--list", "--format=%(refname:short)", "dsh/*").split() == sorted(
            [w1["branch"], w2["branch"]]
        )

        listed = await daemon.request("session/list", {"cwd": str(repo)})
        entries = {entry["sessionId"]: entry for entry in listed["sessions"]}
        assert set(entries) == {one, two}
        for sid, meta in ((one, w1), (two, w2)):
            assert entries[sid]["cwd"] == str(repo)
            assert entries[sid]["title"].startswith(f"[{meta['branch']}] ")
            assert entries[sid]["_meta"]["dsh"]["worktree"] == {"branch": meta["branch"], "path": meta["path"]}

        await daemon.close_session(one)
        assert present(w1["path"])  # closing keeps it
        await daemon.load(one, repo)  # reopened from the repository's directory: it works in its worktree
        await daemon.prompt(one, "read it")
        results = [
            u for sid, u in daemon.client.updates if sid == one and u.get("toolCallId") == "ra" and u.get("status")
        ]
        assert "from A" in str(results[-1])

        with pytest.raises(RequestError) as refused:
            await daemon.delete(one)
        assert refused.value.data["reason"] == "WORKTREE_DIRTY"
        assert refused.value.data["changes"] == ["shared.txt"]
        assert present(w1["path"]) and present(data / f"{one}.jsonl")

        deleted = await daemon.request("session/delete", {"sessionId": one, "_meta": {"dsh": {"force": True}}})
        assert worktree_meta(deleted)["branchDeleted"] is True
        assert not present(w1["path"])
        assert not present(data / f"{one}.jsonl")
        assert git(repo, "branch", "--list", "--format=%(refname:short)", w1["branch"]) == ""
        assert w1["path"] not in git(repo, "worktree", "list")

        git(w2["path"], "commit", "-q", "-am", "B's work")  # the user commits the agent's work
        with anyio.fail_after(WAIT):
            deleted = await daemon.delete(two)
        kept = worktree_meta(deleted)
        assert kept["branchDeleted"] is False
        assert f"kept the branch {w2['branch']}: 1 commit(s) of its own" in kept["message"]
        assert not present(w2["path"])
        assert git(repo, "log", "-1", "--format=%s", w2["branch"]).strip() == "B's work"
        assert (repo / "shared.txt").read_text(encoding="utf-8") == "base\n"
