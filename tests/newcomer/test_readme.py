"""Issue #29 item 4: the README says only what holds.

The tool list comes from the code (``scripts/readme_tools.py``), ``dsh sessions list`` after ``make demo`` says
what it hid, the ``uvx`` form is marked as what works once published, CI's addition (ripgrep) is named, and every
link works where the package index shows the README (absolute, to files that exist).
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import anyio
import pytest

from tests.support.env import ROOT, sandbox_env

WAIT = 60
REPOSITORY = "https://github.com/dsh-agent/dsh"


def readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


def readme_tools() -> ModuleType:
    spec = importlib.util.spec_from_file_location("readme_tools", ROOT / "scripts" / "readme_tools.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_lists_exactly_the_tools_the_model_gets() -> None:
    tools = readme_tools()
    names = [name for name, _ in tools.model_tools()]
    assert len(names) >= 6 and "read_file" in names and "run_command" in names  # the code's list is real
    assert tools.readme_names(readme()) == names, "run `python scripts/readme_tools.py --write` to update the README"


def test_no_count_of_tools_in_prose() -> None:
    numbers = r"(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
    assert not re.search(rf"\b{numbers} (?:built-in |coding )?tools\b", readme(), re.I)


def test_the_first_screen_and_the_package_form_say_what_works_today() -> None:
    section = readme().split("## Use it from an editor", 1)[1].split("\n## ", 1)[0]
    assert "not published yet" in section and "once a release" in section
    assert "pipx install ." in section and "uvx --from ./dist/dsh_agent-" in section


def test_ci_s_addition_is_named() -> None:
    line = next(line for line in readme().splitlines() if line.startswith("- `make test`"))
    assert ".ci/run" in line and "ripgrep" in line


def test_every_link_is_absolute_and_every_repository_link_names_a_file_that_exists() -> None:
    links = re.findall(r"\]\(([^)\s]+)\)", readme())
    assert links
    relative = [link for link in links if not link.startswith(("https://", "http://", "#"))]
    assert relative == [], f"PyPI shows the README without the repository: write {REPOSITORY}/blob/main/<path>"
    for link in links:
        if link.startswith(f"{REPOSITORY}/blob/main/"):
            path = link.removeprefix(f"{REPOSITORY}/blob/main/").split("#", 1)[0]
            assert (ROOT / path).is_file(), link


@pytest.mark.skipif(not (Path(sys.executable).parent / "dsh").exists(), reason="needs the dsh console script")
async def test_sessions_list_after_make_demo_says_what_it_hid(tmp_path: Path) -> None:
    bin_dir = Path(sys.executable).parent
    env = sandbox_env(tmp_path, "echo")
    data = Path(env["DSH_DATA_DIR"])
    with anyio.fail_after(WAIT):
        # the Makefile's own demo target, with this interpreter's bin directory and no install step
        demo = await anyio.run_process(
            ["make", "-s", "-o", f"{bin_dir}/dsh", "demo", f"BIN={bin_dir}"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        assert demo.returncode == 0, demo.stderr
        listed = await anyio.run_process([sys.executable, "-m", "dsh", "sessions", "list"], env=env, check=False)
        every = await anyio.run_process(
            [sys.executable, "-m", "dsh", "sessions", "list", "--all"], env=env, check=False
        )
    (created,) = [path async for path in anyio.Path(data).glob("*.jsonl")]
    said = f"No sessions in {data} (1 empty session hidden; --all shows it).\n"
    assert (listed.returncode, listed.stdout.decode()) == (0, said), listed.stderr
    assert every.returncode == 0 and every.stdout.decode().startswith(created.stem), every.stdout
    assert every.stdout.decode().rstrip().endswith("(empty)")
    assert "1 empty session hidden; --all shows it" in readme()
