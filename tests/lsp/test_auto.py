"""Diagnostics for everyone (RFC 0037): ``enabled: auto`` by default, servers only for roots that look like a
project of their language, started in the background by a read so that the edit finds them warm, and an edit that
never waits for a cold server longer than ``start_wait``; ``DSH_LSP`` and ``enabled: false``."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import anyio
import pytest

from dsh.app import load_core
from dsh.kernel import App
from dsh.lsp import LspConfig, from_environment
from dsh.lsp._manager import LspManager

FAKE = str(Path(__file__).with_name("fake_server.py"))


def fake(mode: str, *args: str, **settings: object) -> LspManager:
    command = [sys.executable, FAKE, mode, *args]
    servers = {"fake": {"command": command, "languages": ["python"]}}
    return LspManager(LspConfig.model_validate({"timeout": 30, "servers": servers, **settings}))


def test_auto_serves_only_roots_that_look_like_a_project_of_the_language(tmp_path: Path) -> None:
    loose, project, nested = tmp_path / "loose", tmp_path / "project", tmp_path / "project" / "src"
    nested.mkdir(parents=True)
    loose.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    auto = fake("silent")
    assert auto.config.enabled == "auto"
    assert not auto.wants(str(loose / "mod.py"), str(loose))
    assert auto.wants(str(project / "mod.py"), str(project))
    assert auto.wants(str(nested / "mod.py"), str(nested))  # a marker in a parent counts
    assert not auto.wants(str(project / "notes.txt"), str(project))  # no language
    (loose / "Cargo.toml").write_text("[package]\n")  # a marker of another language does not count
    assert not fake("silent").wants(str(loose / "mod.py"), str(loose))
    (loose / ".git").mkdir()  # a repository is a Python project for this purpose
    assert fake("silent").wants(str(loose / "mod.py"), str(loose))
    everywhere = fake("silent", enabled=True)
    assert everywhere.wants(str(tmp_path / "mod.py"), str(tmp_path))


def test_dsh_lsp_overrides_the_file_and_empty_leaves_it() -> None:
    on = LspConfig(enabled=True)
    assert from_environment(on, {"DSH_LSP": "off"}).enabled is False
    assert from_environment(None, {"DSH_LSP": "on"}).enabled is True
    assert from_environment(on, {"DSH_LSP": "auto"}).enabled == "auto"
    assert from_environment(on, {"DSH_LSP": ""}).enabled is True
    assert from_environment(None, {}).enabled == "auto"
    assert LspConfig.model_validate({"enabled": "off"}).enabled is False  # a quoted word, as a bare one


async def _tools(lsp: LspConfig) -> list[str]:
    async with App() as app:
        load_core(app.ctx, lsp=lsp)
        return [schema["name"] for schema in app.ctx.tools.schemas()]


async def test_enabled_false_loads_nothing_and_auto_the_tool() -> None:
    assert "diagnostics" in await _tools(LspConfig())
    assert "diagnostics" not in await _tools(LspConfig(enabled=False))


async def test_a_cold_server_is_waited_for_only_start_wait_and_the_next_edit_has_it(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    lsp = fake("gated", str(gate), enabled=True, start_wait=0.05)
    path = str(tmp_path / "mod.py")
    try:
        with anyio.fail_after(60):  # hang detection; the bound under test is start_wait, not asserted as a time
            first = await lsp.after_edit([(path, "", "x = 1\n")], str(tmp_path), "s1")
            assert first.notes == ["(diagnostics: fake is still starting)"] and not first.checked
            gate.touch()  # the server answers initialize now
            await asyncio.gather(*lsp._starting.values())
            second = await lsp.after_edit([(path, "x = 1\n", "x = 2\n")], str(tmp_path), "s1")
            assert second.checked == [(path, "fake")] and second.notes == []
    finally:
        await lsp.aclose()


async def test_a_read_warms_the_server_so_the_edit_waits_for_no_start(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    lsp = fake("gated", str(gate), enabled=True, start_wait=0)
    path = str(tmp_path / "mod.py")
    try:
        with anyio.fail_after(60):
            lsp.warm(path, str(tmp_path), "s1")
            assert lsp._starting, "a read starts the server in the background"
            gate.touch()
            await asyncio.gather(*lsp._starting.values())
            report = await lsp.after_edit([(path, "x = 1\n", "x = 2\n")], str(tmp_path), "s1")
            assert report.checked == [(path, "fake")] and report.notes == []
        (server,) = lsp.servers.values()
        assert lsp.release("s1") == [server.pid]  # the reader's session owns it like an editor's
        await server.stop()  # reaped here: released, the manager no longer waits for it
    finally:
        await lsp.aclose()


async def test_a_failed_warm_up_is_said_once_by_the_next_edit(tmp_path: Path) -> None:
    lsp = fake("crash", enabled=True)
    path = str(tmp_path / "mod.py")
    try:
        with anyio.fail_after(60):
            lsp.warm(path, str(tmp_path), "s1")
            await asyncio.gather(*lsp._starting.values(), return_exceptions=True)
            first = await lsp.after_edit([(path, "", "x = 1\n")], str(tmp_path), "s1")
            (note,) = first.notes  # why it failed (a reader that saw it exit, a write that found the pipe closed)
            assert note.startswith("(language server fake failed to start: ") and note.endswith(")")
            second = await lsp.after_edit([(path, "x = 1\n", "x = 2\n")], str(tmp_path), "s1")
            assert second.notes == [] and not second.checked
    finally:
        await lsp.aclose()


@pytest.mark.parametrize("entry", ["relative", "absolute"])
def test_servers_are_found_on_absolute_path_entries_only(
    entry: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relative ``PATH`` entry resolves against the daemon's directory, which may be the workspace the model
    writes: a program found there would be a program dsh runs without asking."""
    from dsh.lsp._manager import _which

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    program = bin_dir / "dsh-test-lsp-server"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", "bin" if entry == "relative" else str(bin_dir))
    found = _which("dsh-test-lsp-server")
    assert found == (None if entry == "relative" else str(program))
