"""Restores are atomic and honest, and write only where the tools may (issue 42 item 1, issue 33 item 4), over the
wire on a real daemon driven by the SDK client, with a scripted model.

* A kill -9 aimed inside a restore (after the first chunk of a 50 MB file is on disk): the file is exactly what it
  was before the rewind, the log has no ``context/rewind``, and after a restart ``/rewind 1`` restores it whole
  (no "changed by hand").
* A full project disk (a real 8 MiB tmpfs when this machine lets root mount one; and a fault-injecting stand-in at
  the chunk seam, which runs everywhere): the rewind names the file, says ENOSPC and how much was needed, changes
  nothing, records nothing; once there is room, ``/rewind 1`` succeeds.
* ``/rewind`` never writes through a symbolic link: a file that is now a link to an outside file, or a directory
  that is now a link out of the project, is named and nothing is written, ``--force`` included.
* A rewind can be undone: ``/rewind --undo`` puts back what the rewind replaced.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import stat
from pathlib import Path

import anyio
import pytest
from acp import text_block

from tests.checkpoints.restore_faults import DISK_FULL, PAUSE
from tests.support.durable import Daemon, read_session, run_daemon
from tests.support.editor import call
from tests.support.env import write_script
from tests.support.small_disk import fill, small_disk

SMALL = "small\n"


def said(daemon: Daemon, mark: int, session: str) -> str:
    return "".join(
        u["content"].get("text", "")
        for u in daemon.updates_in(mark, session_id=session)
        if u.get("sessionUpdate") == "agent_message_chunk"
    )


async def command(daemon: Daemon, session: str, text: str) -> str:
    await daemon.client.settled()
    mark = daemon.mark()
    response = await daemon.prompt(session, text)
    assert response.stop_reason == "end_turn"
    await daemon.client.settled()
    return said(daemon, mark, session)


def types_of(data_dir: Path, session: str) -> list[str]:
    return [event["type"] for event in read_session(data_dir, session)[1]]


def big_text(size: int) -> bytes:
    line = b"0123456789abcdef" * 4 + b"\n"
    return (line * (size // len(line) + 1))[:size]


def delete_then_create(tmp_path: Path, name: str) -> str:
    """Turn 1 deletes *name* (its bytes go to the checkpoint), turn 2 creates it small: ``/rewind 1`` must put the
    big original back over the small file."""
    return write_script(
        tmp_path / "script.json",
        [
            call("delete_file", "d1", path=name),
            {"text": "deleted"},
            call("write_file", "w2", path=name, content=SMALL),
            {"text": "created"},
        ],
    )


async def two_turns(daemon: Daemon, project: Path) -> str:
    session = await daemon.start(project)
    await daemon.conn.set_session_mode(session_id=session, mode_id="bypass")
    assert (await daemon.prompt(session, "turn one")).stop_reason == "end_turn"
    assert (await daemon.prompt(session, "turn two")).stop_reason == "end_turn"
    return session


def leftovers(directory: Path) -> list[str]:
    return sorted(name for name in os.listdir(directory) if ".dsh-restore-" in name)


async def test_kill_9_inside_a_restore_leaves_the_file_whole_and_the_rewind_unrecorded(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    original = big_text(50 * 1000 * 1000)
    (project / "big.txt").write_bytes(original)
    model = delete_then_create(tmp_path, "big.txt")
    fifo = tmp_path / "restore.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    data = tmp_path / "data"
    try:
        async with run_daemon(
            tmp_path, data, model=model, plugins=[PAUSE], env={"DSH_TEST_RESTORE_FIFO": str(fifo)}
        ) as daemon:
            session = await two_turns(daemon, project)
            assert (project / "big.txt").read_text() == SMALL
            with anyio.fail_after(60):
                async with anyio.create_task_group() as group:

                    async def rewind() -> None:
                        with contextlib.suppress(Exception):  # the connection dies with the daemon
                            await daemon.conn.prompt(session_id=session, prompt=[text_block("/rewind 1")])

                    group.start_soon(rewind)
                    await anyio.wait_readable(reader)  # the first chunk is in the temporary copy
                    assert os.read(reader, 10) == b"!"
                    copies = leftovers(project)
                    assert len(copies) == 1 and (project / copies[0]).stat().st_size > 0
                    daemon.kill()
                    await daemon.wait_killed()
                    group.cancel_scope.cancel()
    finally:
        os.close(reader)
    assert (project / "big.txt").read_bytes() == SMALL.encode()  # exactly before: never a prefix
    assert "context/rewind" not in types_of(data, session)

    async with run_daemon(tmp_path, data, model=model) as daemon:
        await daemon.initialize()
        await daemon.load(session, project)
        reply = await command(daemon, session, "/rewind 1")
        assert "Rewound to before turn 1" in reply, reply
    assert (project / "big.txt").read_bytes() == original
    assert leftovers(project) == []  # the copy the killed restore left was removed
    assert types_of(data, session).count("context/rewind") == 1


async def check_disk_full_rewind(daemon: Daemon, session: str, project: Path, original: bytes, data: Path) -> str:
    reply = await command(daemon, session, "/rewind 1")
    assert "Nothing was rewound: could not restore " + str(project / "big.txt") in reply, reply
    assert "(ENOSPC)" in reply and "needs 5.0 MiB" in reply, reply
    assert "/rewind 1 can try again" in reply
    assert (project / "big.txt").read_bytes() == SMALL.encode()  # exactly before
    assert leftovers(project) == []
    assert "context/rewind" not in types_of(data, session)
    listing = await command(daemon, session, "/rewind")
    assert "2. turn two" in listing  # both turns still there: the rewind can be tried again
    return reply


async def test_a_full_project_disk_restores_nothing_and_records_nothing(tmp_path: Path) -> None:
    with small_disk(tmp_path / "project", "8m") as mounted:
        if not mounted:
            pytest.skip("cannot mount a tmpfs here (not root, or no CAP_SYS_ADMIN): the fault-injecting test covers it")
        project = tmp_path / "project"
        original = big_text(5 * 1024 * 1024)
        (project / "big.txt").write_bytes(original)
        model = delete_then_create(tmp_path, "big.txt")
        data = tmp_path / "data"
        async with run_daemon(tmp_path, data, model=model, allow_errors=True) as daemon:
            session = await two_turns(daemon, project)
            filler = fill(project)
            await check_disk_full_rewind(daemon, session, project, original, data)
            filler.unlink()
            reply = await command(daemon, session, "/rewind 1")
            assert "Rewound to before turn 1" in reply, reply
        assert (project / "big.txt").read_bytes() == original
        assert types_of(data, session).count("context/rewind") == 1


async def test_a_disk_full_fault_mid_copy_restores_nothing_and_records_nothing(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    original = bytes(range(256)) * (5 * 1024 * 1024 // 256)  # not UTF-8: the local byte path
    (project / "big.txt").write_bytes(original)
    model = delete_then_create(tmp_path, "big.txt")
    data = tmp_path / "data"
    flag = tmp_path / "disk-full"
    flag.touch()
    async with run_daemon(
        tmp_path, data, model=model, plugins=[DISK_FULL], env={"DSH_TEST_DISK_FULL": str(flag)}, allow_errors=True
    ) as daemon:
        session = await two_turns(daemon, project)
        await check_disk_full_rewind(daemon, session, project, original, data)
        flag.unlink()
        reply = await command(daemon, session, "/rewind 1")
        assert "Rewound to before turn 1" in reply, reply
    assert (project / "big.txt").read_bytes() == original


def edit_script(tmp_path: Path) -> str:
    return write_script(
        tmp_path / "script.json",
        [
            call("read_file", "r1", path="a.txt"),
            call("edit_file", "e1", path="a.txt", old_string="v0", new_string="v1"),
            call("write_file", "w1", path="sub/b.txt", content="new b\n"),
            {"text": "done"},
        ],
    )


async def test_rewind_never_writes_through_a_symbolic_link_force_included(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "a.txt").write_text("a = v0\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "authorized_keys"
    secret.write_text("theirs\n")
    secret.chmod(0o600)
    (outside / "b.txt").write_text("outside b\n")
    data = tmp_path / "data"
    async with run_daemon(tmp_path, data, model=edit_script(tmp_path)) as daemon:
        session = await daemon.start(project)
        await daemon.conn.set_session_mode(session_id=session, mode_id="bypass")
        assert (await daemon.prompt(session, "turn one")).stop_reason == "end_turn"
        assert (project / "a.txt").read_text() == "a = v1\n"
        assert (project / "sub" / "b.txt").read_text() == "new b\n"
        (project / "a.txt").unlink()
        (project / "a.txt").symlink_to(secret)  # the file is now a link out of the project
        shutil.rmtree(project / "sub")
        (project / "sub").symlink_to(outside)  # the directory is now a link out of the project
        for forced in ("", " --force"):
            reply = await command(daemon, session, "/rewind 1" + forced)
            assert "Nothing was rewound" in reply, reply
            assert f"{project / 'a.txt'}: it is now a symbolic link" in reply
            assert f"{project / 'sub' / 'b.txt'}: its real location {outside / 'b.txt'} is outside" in reply
            assert secret.read_text() == "theirs\n" and stat.S_IMODE(secret.stat().st_mode) == 0o600
            assert (outside / "b.txt").read_text() == "outside b\n"  # a rewind would have removed it
            assert (project / "a.txt").is_symlink()
    assert "context/rewind" not in types_of(data, session)


async def test_a_rewind_is_checkpointed_first_and_can_be_undone(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "a.txt").write_text("a = v0\n")
    (project / "a.txt").chmod(0o640)
    data = tmp_path / "data"
    async with run_daemon(tmp_path, data, model=edit_script(tmp_path)) as daemon:
        session = await daemon.start(project)
        await daemon.conn.set_session_mode(session_id=session, mode_id="bypass")
        assert (await daemon.prompt(session, "turn one")).stop_reason == "end_turn"
        reply = await command(daemon, session, "/rewind 1")
        assert "Rewound to before turn 1" in reply and "/rewind --undo" in reply, reply
        assert (project / "a.txt").read_text() == "a = v0\n"
        assert stat.S_IMODE((project / "a.txt").stat().st_mode) == 0o640  # the mode, set on the descriptor
        assert not (project / "sub" / "b.txt").exists()
        listing = await command(daemon, session, "/rewind")
        assert "/rewind --undo puts those files back" in listing
        reply = await command(daemon, session, "/rewind --undo")
        assert "Undid the rewind to before turn 1" in reply, reply
        assert (project / "a.txt").read_text() == "a = v1\n"
        assert (project / "sub" / "b.txt").read_text() == "new b\n"
        assert "No rewind to undo" in await command(daemon, session, "/rewind --undo")
    assert types_of(data, session).count("checkpoint/undo") == 1


def test_a_link_swapped_in_after_the_check_is_refused_at_the_write(tmp_path: Path) -> None:
    """The race the check cannot see: the directory becomes a link between ``target_of`` and the copy."""
    from dsh.checkpoints._files import Target, _stage, describe_error
    from dsh.checkpoints._log import FileState

    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    target = Target(str(project / "sub" / "x"), str(project / "sub" / "x"), FileState(True, "0" * 64, 0o644))
    (project / "sub").rmdir()
    (project / "sub").symlink_to(outside)
    with pytest.raises(OSError) as caught:
        _stage(target, io.BytesIO(b"data"))
    assert "symbolic link" in describe_error(caught.value)
    assert os.listdir(outside) == []
