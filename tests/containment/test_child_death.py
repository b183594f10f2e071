"""The parent-death signal and the checked working directory, at the ``run_process`` level, for both ways of
setting them (RFC 0010): ``setpriv --pdeathsig`` with ``/proc/self/fd/N`` as the cwd (the default where they
exist), and the fallback ``preexec_fn`` (``prctl`` and ``fchdir``). The command asks the kernel for its own
parent-death signal (``PR_GET_PDEATHSIG``) and prints its working directory."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from dsh.tools import _process

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")

PROBE = [
    sys.executable,
    "-c",
    "import ctypes, os; s = ctypes.c_int(); ctypes.CDLL(None).prctl(2, ctypes.byref(s), 0, 0, 0); "
    "print(s.value, os.getcwd())",
]


@pytest.mark.parametrize("mode", ["setpriv", "preexec_fn"])
async def test_the_command_dies_with_us_and_runs_in_the_checked_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    if mode == "preexec_fn":
        monkeypatch.setattr(_process, "_setpriv", None)
        monkeypatch.setattr(_process, "_setpriv_probed", True)
        monkeypatch.setattr(_process, "_proc_fd", lambda fd: None)
    elif await _process._death_wrapper() is None:
        pytest.skip("util-linux setpriv with --pdeathsig is not installed")
    checked = tmp_path / "checked"
    checked.mkdir()
    fd = os.open(checked, os.O_RDONLY | os.O_DIRECTORY)
    try:
        result = await _process.run_process(PROBE, cwd=str(tmp_path), timeout=30, output_limit=10_000, cwd_fd=fd)
    finally:
        os.close(fd)
    assert result.exit_code == 0, result.output
    assert result.output.split() == ["9", str(checked.resolve())]
