"""Tools never block on what is not a regular file (issue 34 item 4): a FIFO, a device or a socket is refused at
once with a message saying what it is, by read_file, write_file and edit_file; grep skips it; and 45 FIFO reads
at once leave the daemon's own worker threads free."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from dsh.tools._regular import NotRegularFileError, open_regular
from tests.tools.conftest import Call, text


async def test_read_file_of_a_fifo_is_refused_at_once(call: Call, work: Path) -> None:
    os.mkfifo(work / "pipe")
    result = await call("read_file", {"path": "pipe"})
    assert result.is_error and result.error is not None
    assert result.error["code"] == "NOT_REGULAR_FILE"
    assert "pipe is a FIFO (named pipe), not a regular file" in text(result)


async def test_a_socket_is_refused_and_a_device_named_for_what_it_is(call: Call, work: Path) -> None:
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(work / "sock"))
    try:
        result = await call("read_file", {"path": "sock"})
    finally:
        sock.close()
    assert result.is_error and "sock is a socket, not a regular file" in text(result)
    with pytest.raises(NotRegularFileError, match="is a character device, not a regular file"):
        open_regular("/dev/zero")  # outside any session's roots: the door itself


async def test_write_and_edit_over_a_fifo_are_refused_and_nothing_blocks(call: Call, work: Path) -> None:
    os.mkfifo(work / "pipe")
    written = await call("write_file", {"path": "pipe", "content": "x\n"})
    edited = await call("edit_file", {"path": "pipe", "old_string": "a", "new_string": "b"})
    assert written.is_error and "FIFO (named pipe), not a regular file" in text(written)
    assert edited.is_error and "FIFO (named pipe), not a regular file" in text(edited)


async def test_grep_skips_a_fifo_in_the_tree(call: Call, work: Path) -> None:
    os.mkfifo(work / "pipe")
    (work / "a.txt").write_text("needle\n")
    result = await call("grep", {"pattern": "needle"})
    assert not result.is_error and "a.txt" in text(result)


async def test_45_fifo_reads_at_once_leave_the_daemons_threads_free(call: Call, work: Path) -> None:
    for n in range(45):
        os.mkfifo(work / f"pipe{n}")
    results = []

    async def read(n: int) -> None:
        results.append(await call("read_file", {"path": f"pipe{n}"}, call_id=f"c{n}"))

    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            for n in range(45):
                group.start_soon(read, n)
            assert await anyio.to_thread.run_sync(lambda: "free") == "free"  # the default limiter is not used up
    assert len(results) == 45 and all(r.is_error for r in results)
    assert anyio.to_thread.current_default_thread_limiter().borrowed_tokens == 0
