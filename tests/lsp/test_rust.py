"""A third real server where the machine has one: ``rust-analyzer``, found by the default configuration for a Cargo
project, reports a syntax error an edit introduced. Not on CI (no Rust toolchain there), and a rustup proxy without
the component does not run: the test then skips, saying why."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import anyio
import pytest

from dsh.lsp import LspConfig
from dsh.lsp._manager import LspManager


def _runs() -> str | None:
    """Why rust-analyzer cannot be used here, or None when it runs."""
    program = shutil.which("rust-analyzer")
    if program is None:
        return "rust-analyzer is not on PATH"
    try:
        probe = subprocess.run([program, "--version"], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"rust-analyzer does not run: {exc}"
    if probe.returncode != 0:
        first = (probe.stderr or probe.stdout).decode(errors="replace").strip().splitlines()[:1]
        return f"rust-analyzer does not run here: {first[0] if first else probe.returncode}"
    return None


async def test_rust_analyzer_reports_a_syntax_error_in_a_cargo_project(tmp_path: Path) -> None:
    why = await anyio.to_thread.run_sync(_runs)  # probed when the test runs, not when the suite is collected
    if why is not None:
        pytest.skip(why)
    (tmp_path / "Cargo.toml").write_text('[package]\nname = "demo"\nversion = "0.1.0"\nedition = "2021"\n')
    (tmp_path / "src").mkdir()
    path = tmp_path / "src" / "main.rs"
    good = 'fn main() {\n    println!("hi");\n}\n'
    path.write_text(good)
    lsp = LspManager(LspConfig.model_validate({"timeout": 120, "start_wait": 120}))  # auto, found on PATH
    try:
        with anyio.fail_after(180):  # a cold rust-analyzer loads the project first
            report = await lsp.after_edit([(str(path), good, "fn main() {\n    let x = ;\n}\n")], str(tmp_path), "s1")
    finally:
        await lsp.aclose()
    assert report.checked == [(str(path), "rust-analyzer")], report.notes
    assert [d.line for d in report.new if d.severity == 1] and all(d.path == str(path) for d in report.new)
