"""Everything that follows a session's cwd follows its worktree, over the wire (``dsh acp``, SDK client, real git).

* Checkpoints: ``/rewind`` puts the worktree's file back; the main tree (with a different, uncommitted content at
  the same path) is untouched by the edit and by the rewind.
* The language server of an edit runs in the worktree, not in the main tree.
* A session opened in a subdirectory of the repository works in the same subdirectory of its worktree.
* Two worktree sessions of one repository can be created at the same moment.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.support.durable import Daemon, run_daemon
from tests.worktrees.repo import call, configure, git, make_repo, present, script, worktree_meta


async def _new(daemon: Daemon, cwd: Path) -> tuple[str, dict[str, object]]:
    result = await daemon.request(
        "session/new", {"cwd": str(cwd), "mcpServers": [], "_meta": {"dsh": {"worktree": True}}}
    )
    return result["sessionId"], worktree_meta(result)


async def test_rewind_restores_the_worktree_and_leaves_the_main_tree_alone(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "shared.txt").write_text("main tree, uncommitted\n", encoding="utf-8")
    model = script(
        tmp_path / "s.json",
        [
            call("read_file", "r", path="shared.txt"),
            call("write_file", "w", path="shared.txt", content="agent\n"),
            {"text": "edited"},
        ],
    )
    configure(tmp_path, "permissions:\n  mode: accept-edits\n")
    async with run_daemon(tmp_path, tmp_path / "data", model=model) as daemon:
        await daemon.initialize()
        session, meta = await _new(daemon, repo)
        worktree = Path(str(meta["path"]))
        await daemon.prompt(session, "edit")
        assert (worktree / "shared.txt").read_text(encoding="utf-8") == "agent\n"
        await daemon.prompt(session, "/rewind 1")
        assert (worktree / "shared.txt").read_text(encoding="utf-8") == "base\n"
    assert (repo / "shared.txt").read_text(encoding="utf-8") == "main tree, uncommitted\n"


async def test_a_subdirectory_maps_into_the_worktree_and_two_sessions_start_at_once(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "pkg").mkdir()
    (repo / "pkg" / "mod.txt").write_text("pkg\n", encoding="utf-8")
    git(repo, "add", "pkg")
    git(repo, "commit", "-qm", "pkg")
    model = script(tmp_path / "s.json", [call("write_file", "w", path="here.txt", content="x\n"), {"text": "done"}])
    configure(tmp_path, "permissions:\n  mode: accept-edits\n")
    async with run_daemon(tmp_path, tmp_path / "data", model=model) as daemon:
        await daemon.initialize()
        made: list[tuple[str, dict[str, object]]] = []

        async def new() -> None:
            made.append(await _new(daemon, repo / "pkg"))

        async with anyio.create_task_group() as group:
            group.start_soon(new)
            group.start_soon(new)
        (session, meta), (_, other) = made
        assert meta["branch"] != other["branch"] and meta["path"] != other["path"]
        await daemon.prompt(session, "write")
    assert (Path(str(meta["path"])) / "pkg" / "here.txt").read_text(encoding="utf-8") == "x\n"
    assert not present(repo / "pkg" / "here.txt") and not present(repo / "here.txt")
    listed = git(repo, "worktree", "list", "--porcelain")
    assert str(meta["path"]) in listed and str(other["path"]) in listed


async def test_the_language_server_runs_in_the_worktree(tmp_path: Path) -> None:
    pytest.importorskip("pylsp")
    from tests.lsp.test_diagnostics_wire import gone, lsp_env, servers_in

    repo = make_repo(tmp_path / "repo")
    model = script(tmp_path / "s.json", [call("write_file", "w", path="mod.py", content="x = 1\n"), {"text": "done"}])
    async with run_daemon(tmp_path, tmp_path / "data", model=model, env=lsp_env(tmp_path)) as daemon:
        await daemon.initialize()
        session, meta = await _new(daemon, repo)
        await daemon.request("session/set_mode", {"sessionId": session, "modeId": "accept-edits"})
        await daemon.prompt(session, "write")
        worktree = Path(str(meta["path"]))
        assert servers_in(worktree), "the edit of a Python file should have started pylsp in the worktree"
        assert not servers_in(repo)
        await daemon.close_session(session)
        await gone(worktree)
