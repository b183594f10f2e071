"""A worktree session's life beyond the first turn, over the wire (``dsh acp``, the official SDK client, real git).

* The sandbox's writable roots are the worktree: an approved command writes there, not in the main tree, and not
  in git's directories (a commit by the agent's command fails; RFC 0040 "Commits").
* ``/worktree`` shows the worktree and how to merge it (and, in a session without one, how to start one).
* A worktree removed by hand: ``session/load`` says so (-32002, ``WORKTREE_REMOVED``, the branch still there and
  how to bring the worktree back); deleting the session then cleans up the record and the branch.
* ``worktrees: {mode: ask}``: a session that says nothing gets none and the answer offers one; ``true`` still works.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError

from dsh.sandbox import support
from tests.support.durable import Daemon, run_daemon
from tests.worktrees.repo import call, configure, git, make_repo, present, script, worktree_meta

WORKTREE = {"dsh": {"worktree": True}}


async def _new(daemon: Daemon, cwd: Path, meta: Any = WORKTREE) -> tuple[str, dict[str, Any]]:
    result = await daemon.request("session/new", {"cwd": str(cwd), "mcpServers": [], "_meta": meta})
    return result["sessionId"], worktree_meta(result)


def _said(daemon: Daemon, session: str) -> str:
    return "".join(
        str((u.get("content") or {}).get("text", ""))
        for sid, u in daemon.client.updates
        if sid == session and u.get("sessionUpdate") == "agent_message_chunk"
    )


def _tool_text(daemon: Daemon, session: str, call_id: str) -> str:
    return " ".join(str(u) for sid, u in daemon.client.updates if sid == session and u.get("toolCallId") == call_id)


@pytest.mark.skipif(not support().available, reason="this machine offers no Landlock")
async def test_commands_write_in_the_worktree_and_not_in_the_main_tree(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    command = (
        f"echo inside > made.txt; echo outside > {repo / 'escaped.txt'}; "
        "git add made.txt && git -c user.name=a -c user.email=a@b commit -qm agent; echo finished"
    )
    model = script(tmp_path / "s.json", [call("run_command", "c1", command=command), {"text": "done"}])
    configure(tmp_path, "permissions:\n  mode: bypass\n")
    async with run_daemon(tmp_path, tmp_path / "data", model=model) as daemon:
        await daemon.initialize()
        session, meta = await _new(daemon, repo)
        await daemon.prompt(session, "run it")
        text = _tool_text(daemon, session, "c1")
    assert (Path(meta["path"]) / "made.txt").read_text(encoding="utf-8") == "inside\n"
    assert not present(repo / "escaped.txt") and not present(repo / "made.txt")
    assert "finished" in text
    assert git(repo, "log", "-1", "--format=%s", meta["branch"]).strip() == "base"  # git's directories: read-only


async def test_worktree_command_and_a_worktree_removed_by_hand(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    data = tmp_path / "data"
    async with run_daemon(tmp_path, data) as daemon:
        await daemon.initialize()
        session, meta = await _new(daemon, repo)
        plain, _ = await _new(daemon, repo, None)
        await daemon.prompt(session, "/worktree")
        await daemon.prompt(plain, "/worktree")
        shown = _said(daemon, session)
        assert f"Worktree: {meta['path']} (branch {meta['branch']}" in shown
        assert f"git -C {repo} merge {meta['branch']}" in shown
        assert "This session works in the main tree" in _said(daemon, plain)
        await daemon.prompt(session, "hello")  # the session has events: it is listed and loadable
        await daemon.close_session(session)

        shutil.rmtree(meta["path"])  # by hand
        with pytest.raises(RequestError) as refused:
            await daemon.load(session, repo)
        assert refused.value.code == -32002
        assert refused.value.data["reason"] == "WORKTREE_REMOVED" and refused.value.data["branchExists"] is True
        assert "was removed by hand" in str(refused.value)
        assert f"worktree add {meta['path']} {meta['branch']}" in str(refused.value)

        deleted = await daemon.delete(session)
        assert worktree_meta(deleted)["branchDeleted"] is True
    assert git(repo, "branch", "--format=%(refname:short)").split() == ["main"]
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert not present(data / "worktrees" / f"{session}.json")


async def test_mode_ask_offers_a_worktree_and_explicit_requests_still_get_one(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    configure(tmp_path, "worktrees:\n  mode: ask\n")
    async with run_daemon(tmp_path, tmp_path / "data") as daemon:
        await daemon.initialize()
        _, offered = await _new(daemon, repo, None)
        assert set(offered) == {"message"} and "_meta.dsh.worktree: true" in offered["message"]
        _, made = await _new(daemon, repo)
        assert made["branch"].startswith("dsh/") and present(made["path"])
        _, refused = await _new(daemon, repo, {"dsh": {"worktree": False}})
        assert refused == {}
