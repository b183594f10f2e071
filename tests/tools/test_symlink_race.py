"""Writes stay inside the project under races (issue #10, item 4; RFC 0010): the tools open the real path they
checked, never a symlink swapped in afterwards.

Two kinds of test: deterministic ones, where a ``workspace/*`` listener swaps a symlink between the check and the
open (exactly the race window), and the acceptance race, where a thread swaps the link in a loop while the tools
run (0 reads, writes, edits or commands may land outside). ``open_checked`` is tested on its own as well.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from dsh import events as ev
from dsh.kernel import Context, Next
from dsh.tools import CommandResult, ReadRequest, RunRequest, WriteRequest
from dsh.tools._safeopen import PathChangedError, open_checked
from tests.tools.conftest import Call, text

RACE_SECONDS = 1.5
SECRET = "SECRET outside x y\n"


@pytest.fixture
def layout(tmp_path: Path, work: Path) -> tuple[Path, Path, Path]:
    """``work/inside/f.txt`` (inside), ``tmp_path/outside/f.txt`` (outside, holds the secret) and the link
    ``work/link`` → ``inside``."""
    inside = work / "inside"
    inside.mkdir()
    (inside / "f.txt").write_text("inside x\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text(SECRET)
    link = work / "link"
    link.symlink_to("inside")
    return inside, outside, link


def point(link: Path, target: Path | str) -> None:
    """Atomically make *link* point at *target* (a new link renamed over the old one)."""
    fresh = link.with_name(f".{link.name}.{threading.get_ident()}.tmp")
    os.symlink(target, fresh)
    os.replace(fresh, link)


# -- the race window, deterministically ---------------------------------------------------------------------------


async def test_a_link_swapped_before_the_write_opens_cannot_lead_outside(
    core: Context, call: Call, layout: tuple[Path, Path, Path]
) -> None:
    inside, outside, link = layout

    async def swap(request: WriteRequest, next_: Next[WriteRequest, None]) -> None:
        point(link, outside)  # after the check, before the open
        await next_()

    core.on(ev.WORKSPACE_WRITE, swap)
    result = await call("write_file", {"path": "link/new.txt", "content": "hello\n"})
    assert not result.is_error, text(result)
    assert (inside / "new.txt").read_text() == "hello\n"  # what was checked
    assert sorted(p.name for p in outside.iterdir()) == ["f.txt"]


async def test_a_link_swapped_before_the_read_opens_cannot_read_outside(
    core: Context, call: Call, layout: tuple[Path, Path, Path]
) -> None:
    _inside, outside, link = layout

    async def swap(request: ReadRequest, next_: Next[ReadRequest, str]) -> str:
        point(link, outside)
        return await next_()

    core.on(ev.WORKSPACE_READ, swap)
    result = await call("read_file", {"path": "link/f.txt"})
    assert text(result) == "     1\tinside x"


async def test_an_edit_through_a_swapped_link_changes_only_the_checked_file(
    core: Context, call: Call, layout: tuple[Path, Path, Path]
) -> None:
    inside, outside, link = layout

    async def swap(request: ReadRequest, next_: Next[ReadRequest, str]) -> str:
        point(link, outside)
        return await next_()

    assert not (await call("read_file", {"path": "link/f.txt"})).is_error  # read before write
    core.on(ev.WORKSPACE_READ, swap)
    result = await call("edit_file", {"path": "link/f.txt", "old_string": "x", "new_string": "z"})
    assert not result.is_error, text(result)
    assert (inside / "f.txt").read_text() == "inside z\n"
    assert (outside / "f.txt").read_text() == SECRET


async def test_a_command_runs_in_the_checked_directory_whatever_its_cwd_names_now(
    core: Context, call: Call, layout: tuple[Path, Path, Path]
) -> None:
    inside, outside, link = layout

    async def swap(request: RunRequest, next_: Next[RunRequest, CommandResult]) -> CommandResult:
        point(link, outside)
        return await next_()

    core.on(ev.WORKSPACE_RUN, swap)
    result = await call("run_command", {"command": "pwd -P; touch ran", "cwd": "link"})
    assert not result.is_error, text(result)
    assert text(result).splitlines()[0] == str(inside)
    assert (inside / "ran").exists()
    assert sorted(p.name for p in outside.iterdir()) == ["f.txt"]


async def test_a_directory_replaced_by_a_link_after_the_check_fails_the_call(
    core: Context, call: Call, layout: tuple[Path, Path, Path]
) -> None:
    inside, outside, _link = layout

    async def swap(request: WriteRequest, next_: Next[WriteRequest, None]) -> None:
        os.rename(inside, inside.with_name("moved"))
        point(inside, outside)  # the checked real directory is now a link to the outside
        await next_()

    core.on(ev.WORKSPACE_WRITE, swap)
    result = await call("write_file", {"path": "inside/new.txt", "content": "hello\n"})
    assert result.is_error
    assert result.error is not None and result.error["code"] == "PATH_CHANGED"
    assert sorted(p.name for p in outside.iterdir()) == ["f.txt"]


# -- the acceptance race: a thread swaps the link in a loop ---------------------------------------------------


async def test_a_link_swapped_in_a_loop_never_lets_a_tool_outside(call: Call, layout: tuple[Path, Path, Path]) -> None:
    inside, outside, link = layout
    stop = threading.Event()
    swaps = 0

    def swapper() -> None:
        nonlocal swaps
        while not stop.is_set():
            point(link, outside)
            point(link, "inside")
            swaps += 1

    outcomes: dict[str, int] = {"ok": 0, "refused": 0, "other": 0}
    leaked: list[str] = []
    calls: list[tuple[str, dict[str, Any]]] = [
        ("write_file", {"path": "link/w.txt", "content": "written\n"}),
        ("read_file", {"path": "link/f.txt"}),
        ("edit_file", {"path": "link/f.txt", "old_string": "x", "new_string": "y"}),
        ("edit_file", {"path": "link/f.txt", "old_string": "y", "new_string": "x"}),
    ]
    thread = threading.Thread(target=swapper, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + RACE_SECONDS
        index = 0
        while time.monotonic() < deadline:
            name, arguments = calls[index % len(calls)]
            if index % 25 == 24:
                name, arguments = "run_command", {"command": "touch ran-$$", "cwd": "link"}
            index += 1
            result = await call(name, arguments, call_id=f"c{index}")
            if "SECRET" in text(result):
                leaked.append(text(result))
            code = (result.error or {}).get("code") if result.is_error else None
            if not result.is_error:
                outcomes["ok"] += 1
            elif code == "OUTSIDE_ROOTS":
                outcomes["refused"] += 1
            else:
                outcomes["other"] += 1  # NO_MATCH of an edit after a refused one, and the like
    finally:
        stop.set()
        thread.join()
    assert swaps > 10, "the link was hardly swapped: the race was not exercised"
    assert outcomes["ok"] > 0 and outcomes["refused"] > 0, outcomes
    assert leaked == []
    assert sorted(p.name for p in outside.iterdir()) == ["f.txt"], "a tool wrote outside the project"
    assert (outside / "f.txt").read_text() == SECRET
    assert (inside / "w.txt").read_text() == "written\n"


# -- open_checked ---------------------------------------------------------------------------------------------


def test_open_checked_refuses_a_symlink_anywhere_on_the_path(tmp_path: Path) -> None:
    real = tmp_path / "dir"
    real.mkdir()
    (real / "f").write_text("x")
    (tmp_path / "to-dir").symlink_to(real)
    (real / "to-f").symlink_to(real / "f")
    with pytest.raises(PathChangedError):
        open_checked(str(tmp_path / "to-dir" / "f"), os.O_RDONLY)
    with pytest.raises(PathChangedError):
        open_checked(str(real / "to-f"), os.O_RDONLY)
    with pytest.raises(PathChangedError):
        open_checked(str(tmp_path / "to-dir" / "new" / "g"), os.O_WRONLY | os.O_CREAT, create_parents=True)
    assert not (real / "new").exists()
    fd = open_checked(os.path.realpath(real / "f"), os.O_RDONLY)
    try:
        assert os.read(fd, 10) == b"x"
    finally:
        os.close(fd)


def test_open_checked_creates_missing_parents_and_keeps_the_usual_errors(tmp_path: Path) -> None:
    base = os.path.realpath(tmp_path)
    fd = open_checked(os.path.join(base, "a", "b", "c.txt"), os.O_WRONLY | os.O_CREAT, create_parents=True)
    os.close(fd)
    assert (tmp_path / "a" / "b" / "c.txt").exists()
    with pytest.raises(FileNotFoundError):
        open_checked(os.path.join(base, "missing", "x"), os.O_RDONLY)
    (tmp_path / "file").write_text("")
    with pytest.raises(NotADirectoryError):
        open_checked(os.path.join(base, "file", "x"), os.O_RDONLY)
    with pytest.raises(ValueError, match="absolute"):
        open_checked("relative", os.O_RDONLY)


def test_open_checked_opens_directories_and_the_root(tmp_path: Path) -> None:
    for path in ("/", os.path.realpath(tmp_path)):
        fd = open_checked(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            assert os.path.samestat(os.fstat(fd), os.stat(path))
        finally:
            os.close(fd)
