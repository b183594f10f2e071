"""Files dsh reads on its own (issue #30 items 1-3): front matter cannot take the daemon down, arguments are
substituted once, command and instruction files stay inside where they belong and are read capped."""

from __future__ import annotations

import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import anyio
import pytest
from acp.schema import AvailableCommandsUpdate

from dsh.commands._markdown import MAX_EXPANDED_CHARS, ExpansionTooLarge, expand, parse_command_file
from dsh.context._instructions import find_instruction_files, load_instructions
from dsh.ownfiles import FileRefused, FrontMatterError, read_inside, split_front_matter
from tests.support.env import sandbox_env
from tests.support.sdk import DshProcess, run_dsh

WAIT = 10.0
KEY = "sk-hostile-files-0123456789abcdefghijklmnop"
ALIAS_BOMB = (
    '---\na: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
    "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
    "f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n"
    "h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\ni: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]\n"
    "description: *i\n---\nboom\n"
)
DEEP = "---\ndescription: " + "[" * 5000 + "]" * 5000 + "\n---\ndeep\n"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _offered(daemon: DshProcess, session_id: str) -> list[str]:
    updates = [u for u in daemon.client.of(session_id) if isinstance(u, AvailableCommandsUpdate)]
    assert updates
    return [c.name for c in updates[-1].available_commands]


# -- item 1: front matter ------------------------------------------------------------------------------------


def test_the_loader_refuses_aliases_depth_and_size_without_building_anything() -> None:
    with pytest.raises(FrontMatterError, match=r"alias|anchor"):
        split_front_matter(ALIAS_BOMB)
    with pytest.raises(FrontMatterError):
        split_front_matter(DEEP)
    with pytest.raises(FrontMatterError, match="nested deeper"):
        split_front_matter("---\ndescription: " + "[" * 50 + "]" * 50 + "\n---\ndeep\n")
    with pytest.raises(FrontMatterError, match="bytes"):
        split_front_matter("---\ndescription: " + "x" * 20_000 + "\n---\nbody")
    with pytest.raises(FrontMatterError, match="bytes"):  # an unclosed block is not scanned to the end
        split_front_matter("---\n" + "a: b\n" * 1_000_000)
    assert split_front_matter("---\ndescription: Greet\ntools: [read_file, grep]\n---\nbody") == (
        {"description": "Greet", "tools": ["read_file", "grep"]},
        "body",
    )
    with pytest.raises(ValueError, match="must be text"):  # a command's values are strings
        parse_command_file("---\ndescription: {a: 1}\n---\nbody")


async def test_bad_front_matter_never_fails_session_new_nor_leaves_a_session_file(tmp_path: Path) -> None:
    _write(tmp_path / ".dsh" / "commands" / "bomb.md", ALIAS_BOMB)
    _write(tmp_path / ".dsh" / "commands" / "good.md", "---\ndescription: fine\n---\ngood $ARGUMENTS")
    _write(tmp_path / "home" / ".config" / "dsh" / "commands" / "deep.md", DEEP)  # the user's: every project
    async with run_dsh(tmp_path) as daemon:
        with anyio.fail_after(WAIT):
            await daemon.initialize()
            first = await daemon.new_session()
        with anyio.fail_after(1.0):
            second = await daemon.new_session()
        with anyio.fail_after(WAIT):
            await daemon.client.wait_until(
                lambda: any(isinstance(u, AvailableCommandsUpdate) for u in daemon.client.of(second))
            )
        offered = _offered(daemon, second)
        assert "good" in offered and "bomb" not in offered and "deep" not in offered
        with anyio.fail_after(WAIT):
            response = await daemon.prompt(second, "/good day")
        assert response.stop_reason == "end_turn"
        stderr = daemon.stderr()
    assert stderr.count("skipped a command file") >= 2
    assert "bomb.md" in stderr and "deep.md" in stderr
    stored = sorted(p.stem for p in (tmp_path / "dsh-data").glob("*.jsonl"))
    assert stored == sorted([first, second])  # no orphan session file


# -- item 2: arguments substituted once ------------------------------------------------------------------------


def test_arguments_are_substituted_once_over_the_template_only() -> None:
    assert expand("Hello $1, all: $ARGUMENTS", "Ada Lovelace") == "Hello Ada, all: Ada Lovelace"
    assert expand("run $ARGUMENTS then $2", "$1 $ARGUMENTS $2") == "run $1 $ARGUMENTS $2 then $ARGUMENTS"
    typed = "$1 " * 7_000  # 21 KB typed; was expanded again into ~150 MB
    assert expand("$ARGUMENTS $1 $2", typed) == f"{typed} $1 $1"


def test_an_expansion_over_the_limit_is_refused_before_it_is_built() -> None:
    tracemalloc.start()
    try:
        with pytest.raises(ExpansionTooLarge, match="more than"):
            expand("$ARGUMENTS" * 100, "x" * (MAX_EXPANDED_CHARS // 50))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < MAX_EXPANDED_CHARS * 2  # never the 8x-the-limit text it would have been


async def test_an_oversized_expansion_answers_a_visible_error(tmp_path: Path) -> None:
    _write(tmp_path / ".dsh" / "commands" / "many.md", "$ARGUMENTS" * 200)
    async with run_dsh(tmp_path) as daemon:
        with anyio.fail_after(WAIT):
            session_id = await daemon.start()
            response = await daemon.prompt(session_id, "/many " + "y" * 30_000)
        assert response.stop_reason == "end_turn"
        assert "/many failed: the expanded prompt would be more than" in daemon.client.text(session_id)
    assert (tmp_path / "dsh-data" / f"{session_id}.jsonl").stat().st_size < 200_000


# -- item 3: contained, capped reads ---------------------------------------------------------------------------


def test_read_inside_refuses_what_is_not_a_regular_file_inside_its_root(tmp_path: Path) -> None:
    root, outside = tmp_path / "project", tmp_path / "outside"
    root.mkdir(), outside.mkdir()
    (outside / "secret.md").write_text("outside secret")
    (root / "ok.md").write_text("fine")
    (root / "linked.md").symlink_to(root / "ok.md")
    (root / "out.md").symlink_to(outside / "secret.md")
    (root / "environ.md").symlink_to("/proc/self/environ")
    os.mkfifo(root / "fifo.md")
    assert read_inside(root / "linked.md", [root], 100).data == b"fine"
    for name in ("out.md", "environ.md"):
        with pytest.raises(FileRefused, match="outside"):
            read_inside(root / name, [root], 100)
    with pytest.raises(FileRefused, match="not a regular file"):
        read_inside(root / "fifo.md", [root], 100)  # and it did not block on the FIFO


async def test_command_files_symlinked_out_of_the_project_are_not_read(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outside = tmp_path_factory.mktemp("outside")
    (outside / "private.md").write_text("PRIVATE-OUTSIDE-TEXT", encoding="utf-8")
    commands = tmp_path / ".dsh" / "commands"
    commands.mkdir(parents=True)
    (commands / "environ.md").symlink_to("/proc/self/environ")
    (commands / "private.md").symlink_to(outside / "private.md")
    (commands / "inside.md").symlink_to(tmp_path / "inside.txt")
    (tmp_path / "inside.txt").write_text("inside $ARGUMENTS", encoding="utf-8")
    async with run_dsh(tmp_path, env={"OPENAI_API_KEY": KEY}) as daemon:
        with anyio.fail_after(WAIT):
            session_id = await daemon.start()
            await daemon.client.wait_until(
                lambda: any(isinstance(u, AvailableCommandsUpdate) for u in daemon.client.of(session_id))
            )
            offered = _offered(daemon, session_id)
            assert "inside" in offered and "environ" not in offered and "private" not in offered
            for text in ("/environ", "/private", "/inside ok"):
                await daemon.prompt(session_id, text)
        shown = daemon.client.text(session_id)
        stderr = daemon.stderr()
    assert "inside ok" in shown
    assert KEY not in shown and "PRIVATE-OUTSIDE-TEXT" not in shown
    stored = (tmp_path / "dsh-data" / f"{session_id}.jsonl").read_text(encoding="utf-8")
    assert KEY not in stored and "PRIVATE-OUTSIDE-TEXT" not in stored
    assert "environ.md" in stderr and "private.md" in stderr


def _system_prompt(home: Path, cwd: Path, extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = sandbox_env(home, "echo", extra=extra)
    return subprocess.run(
        [sys.executable, "-m", "dsh", "config", "show", "--system-prompt", "--cwd", str(cwd)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=str(cwd),
    )


@pytest.mark.parametrize("target", ["environ", "outside", "user-environ"])
def test_instructions_symlinked_out_of_place_are_not_read(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, target: str
) -> None:
    outside = tmp_path_factory.mktemp("outside")
    (outside / "notes.md").write_text("PRIVATE-OUTSIDE-TEXT", encoding="utf-8")
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    (project / "sub").mkdir()
    (project / "sub" / "AGENTS.md").write_text("Sub rules stay.", encoding="utf-8")
    link = {"environ": project / "AGENTS.md", "outside": project / "AGENTS.md"}.get(
        target, tmp_path / "home" / ".config" / "dsh" / "AGENTS.md"
    )
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside / "notes.md" if target == "outside" else Path("/proc/self/environ"))
    done = _system_prompt(tmp_path, project / "sub", {"OPENAI_API_KEY": KEY})
    assert done.returncode == 0, done.stderr
    assert "Sub rules stay." in done.stdout
    assert KEY not in done.stdout and "PRIVATE-OUTSIDE-TEXT" not in done.stdout
    assert "skipped an instructions file" in done.stderr


def test_a_huge_agents_md_is_read_only_as_far_as_the_cap_needs(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    huge = project / "AGENTS.md"
    with huge.open("wb") as file:
        file.write(b"Rule one.\n" * 10)
        file.truncate(1 << 30)  # 1 GiB, sparse: NULs after the first line
    files = find_instruction_files(str(project), None, config_dir=tmp_path / "no-config")
    tracemalloc.start()
    try:
        instructions = load_instructions(files, 32_000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024 * 1024, peak
    assert instructions.text.count("Rule one.") == 10
    assert instructions.truncated == (str(huge),)
    assert "[truncated: the rest of its 1073741824 bytes of this file left out" in instructions.text
    assert len(instructions.text) < 32_000 + 1_000
