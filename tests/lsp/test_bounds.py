"""A language server that hangs, crashes, stays silent or floods never holds an edit's diagnostics past the bound,
never raises into the edit, and is one note; servers are killed with their process group (issue 39)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest

from dsh.lsp import LspConfig
from dsh.lsp._manager import LspManager

FAKE = str(Path(__file__).with_name("fake_server.py"))


def manager(mode: str, bound: float = 1.0) -> LspManager:
    return LspManager(
        LspConfig.model_validate(
            {
                "enabled": True,
                "timeout": bound,
                "servers": {"fake": {"command": [sys.executable, FAKE, mode], "languages": ["python"]}},
            }
        )
    )


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


async def dead(pid: int) -> None:
    with anyio.fail_after(30):  # hang detection
        while alive(pid):  # noqa: ASYNC110 - another process: no event to wait on, so poll, bounded
            await anyio.sleep(0.02)


@pytest.mark.parametrize("mode", ["hang", "crash", "silent", "flood"])
async def test_a_bad_server_is_a_note_within_the_bound(mode: str, tmp_path: Path) -> None:
    lsp = manager(mode)
    path = str(tmp_path / "mod.py")
    try:
        for _ in range(2):  # the second edit too (a failed server is not retried for ever)
            with anyio.fail_after(30):  # hang detection: the bound is 1 s
                report = await lsp.after_edit([(path, "", "x = 1\n")], str(tmp_path), "s1")
            assert report.new == []
            if mode != "crash" or _ == 0:
                assert len(report.notes) == 1, report.notes
    finally:
        pids = [server.pid for server in lsp.servers.values()]
        await lsp.aclose()
    for pid in pids:
        await dead(pid)


async def test_release_kills_the_server_when_its_last_session_ends(tmp_path: Path) -> None:
    lsp = manager("silent", bound=0.5)
    path = str(tmp_path / "mod.py")
    with anyio.fail_after(30):
        await lsp.after_edit([(path, "", "x = 1\n")], str(tmp_path), "s1")
        await lsp.after_edit([(path, "x = 1\n", "x = 2\n")], str(tmp_path), "s2")
    (server,) = lsp.servers.values()
    assert lsp.release("s1") == [] and alive(server.pid)
    assert lsp.release("s2") == [server.pid]
    await server.stop()
    await dead(server.pid)
    assert os.getpgid(os.getpid()) != server.pid  # the server had its own group: killpg never hit the runner


async def test_other_files_new_diagnostics_are_listed_briefly(tmp_path: Path) -> None:
    lsp = manager("cascade", bound=30)
    path = str(tmp_path / "mod.py")
    try:
        with anyio.fail_after(60):
            report = await lsp.after_edit([(path, "x = 1\n", "x = 2\n")], str(tmp_path), "s1")
            assert report.new == [] and report.notes == []
            assert [(Path(d.path).name, d.line, d.message) for d in report.others] == [
                ("other.py", 5, "broken by version 2")
            ]
            assert "New diagnostics in other files:\n  other.py:5: broken by version 2 (fake)" in report.render(
                str(tmp_path)
            )
            again = await lsp.after_edit([(path, None, "x = 3\n")], str(tmp_path), "s1")
            assert [d.message for d in again.others] == ["broken by version 3"]  # a new message: new again
    finally:
        await lsp.aclose()


async def test_an_idle_server_is_stopped_and_the_next_edit_starts_it_again(tmp_path: Path) -> None:
    lsp = manager("cascade", bound=30)
    path = str(tmp_path / "mod.py")
    try:
        with anyio.fail_after(60):
            await lsp.after_edit([(path, "", "x = 1\n")], str(tmp_path), "s1")
            (first,) = lsp.servers.values()
            assert lsp.sweep(first.last_used + lsp.config.idle - 1) == []  # used within idle: kept
            assert lsp.sweep(first.last_used + lsp.config.idle + 1) == [first.pid]
            await first.stop()
            assert not alive(first.pid) and lsp.servers == {}
            report = await lsp.after_edit([(path, "x = 1\n", "x = 2\n")], str(tmp_path), "s1")
            assert report.checked and report.notes == []
            (second,) = lsp.servers.values()
            assert second.pid != first.pid
    finally:
        await lsp.aclose()
