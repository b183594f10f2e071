"""Issue #11: the wheel, installed (not editable) into a fresh virtualenv, runs ``dsh-agent acp`` the way the ACP
registry's CI does: a sandboxed ``HOME``, a minimal environment, ``initialize`` answered (with an auth method),
a session created, and nothing on stdout but JSON-RPC frames.

Kept fast: ``pip wheel --no-deps`` without build isolation (hatchling is a dev dependency), a venv without pip
(pip installs into it with ``--python``), and the dependencies seeded from this venv's site-packages by a
``.pth`` line instead of being downloaded. The ``.pth`` adds the directory only (its own ``.pth`` files, among
them the editable install's, are not processed), and the test checks that ``dsh`` is imported from the wheel.
"""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import anyio
import pytest

from tests.support.package_index import build_wheel

ROOT = Path(__file__).resolve().parents[2]
WAIT = 120


def run(*argv: str | Path, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=WAIT, check=False, **kwargs)  # type: ignore[call-overload,no-any-return]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fresh venv's bin directory, with the wheel installed; the time each step took is printed."""
    work = tmp_path_factory.mktemp("wheel")
    timings: dict[str, float] = {}
    started = time.perf_counter()
    wheel = build_wheel(work / "dist")
    timings["build"] = time.perf_counter() - started
    started = time.perf_counter()
    venv = work / "venv"
    made = run(sys.executable, "-m", "venv", "--without-pip", venv)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    site = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
    Path(site, "seeded_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    done = run(sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", "--no-index", wheel)
    assert done.returncode == 0, done.stderr
    timings["venv+install"] = time.perf_counter() - started
    print(f"wheel test: build {timings['build']:.1f} s, venv + install {timings['venv+install']:.1f} s")
    return venv / "bin"


def registry_env(home: Path) -> dict[str, str]:
    """What the registry's CI gives an agent: a fresh HOME and little else."""
    home.mkdir(exist_ok=True)
    return {"HOME": str(home), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


def test_dsh_is_imported_from_the_wheel_not_the_source_tree(installed: Path, tmp_path: Path) -> None:
    shown = run(installed / "python", "-c", "import dsh; print(dsh.__file__)", env=registry_env(tmp_path / "home"))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip().startswith(str(installed.parent)), shown.stdout
    assert (installed / "dsh").is_file() and (installed / "dsh-agent").is_file()
    version = run(installed / "dsh-agent", "--version", env=registry_env(tmp_path / "home"))
    assert version.returncode == 0 and version.stdout.startswith("dsh "), version


async def test_dsh_agent_acp_answers_initialize_and_creates_a_session(installed: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    frames = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}},
        {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": str(tmp_path), "mcpServers": []}},
    ]
    started = time.perf_counter()
    async with await anyio.open_process(
        [str(installed / "dsh-agent"), "acp"], env=registry_env(home), cwd=str(tmp_path)
    ) as process:
        assert process.stdin is not None and process.stdout is not None
        received = b""
        answers: dict[int, dict[str, object]] = {}
        with anyio.fail_after(WAIT):
            for frame in frames:
                await process.stdin.send(json.dumps(frame).encode() + b"\n")
                while frame["id"] not in answers:
                    chunk = await process.stdout.receive()
                    received += chunk
                    for line in received.split(b"\n")[:-1]:
                        message = json.loads(line)  # every line on stdout is JSON
                        if "id" in message:
                            answers[message["id"]] = message
            await process.stdin.aclose()
            async for chunk in process.stdout:
                received += chunk
            code = await process.wait()
    elapsed = time.perf_counter() - started
    print(f"wheel test: initialize + session/new + exit {elapsed:.2f} s")
    assert code == 0
    lines = received.split(b"\n")
    assert lines[-1] == b""
    for line in lines[:-1]:
        assert json.loads(line)["jsonrpc"] == "2.0"
    init = answers[0]["result"]
    assert isinstance(init, dict) and init["protocolVersion"] == 1
    assert [m.get("type", "agent") for m in init["authMethods"]] == ["agent"]
    session = answers[1]["result"]
    assert isinstance(session, dict) and session["sessionId"]
