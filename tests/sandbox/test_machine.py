"""The machine's confinement: CI (a Linux machine like the developers', root) must have the whole sandbox, so the
over-the-wire tests that skip without Landlock cannot silently skip there; the simulation hooks behave."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from dsh.sandbox import support
from dsh.sandbox._support import SIMULATE_ENV
from tests.support.env import ROOT


@pytest.mark.skipif(os.environ.get("CI") != "true", reason="CI (CI=true) must have the sandbox; a developer may not")
def test_ci_has_landlock_and_user_namespaces() -> None:
    machine = support()
    assert sys.platform.startswith("linux")
    assert machine.available, machine.why
    assert machine.abi >= 4, machine.abi
    assert machine.namespaces, machine.why


@pytest.mark.parametrize(
    ("simulate", "expected"),
    [
        ("unavailable", "unavailable (simulated by DSH_SANDBOX_SIMULATE=unavailable)"),
        ("no-namespaces", "no namespaces (simulated by DSH_SANDBOX_SIMULATE=no-namespaces)"),
    ],
)
def test_the_simulation_is_said_by_config_show(simulate: str, expected: str, tmp_path: object) -> None:
    if simulate == "no-namespaces" and not support().available:
        pytest.skip("no Landlock here: nothing to take the namespaces from")
    env = {**os.environ, SIMULATE_ENV: simulate, "XDG_CONFIG_HOME": str(tmp_path), "HOME": str(tmp_path)}
    env.pop("DSH_CONFIG", None)
    shown = subprocess.run(
        [sys.executable, "-m", "dsh", "config", "show"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    lines = [line for line in shown.splitlines() if line.startswith("# sandbox ")]
    assert len(lines) == 1, shown
    assert expected in lines[0]
