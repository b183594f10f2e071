"""Image storage end to end (real daemons over one data directory, the official SDK client, the echo model):
the log holds references, the bytes are stored once beside it, a restart's ``session/load`` replays the image
blocks byte for byte, and deleting the session deletes its images."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import anyio
from acp import image_block, text_block
from acp.helpers import embedded_blob_resource, resource_block

from tests.support.durable import WAIT, run_daemon, session_path
from tests.support.images import b64, jpeg, png


def stored_objects(data_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in (data_dir / "blobs" / "objects").rglob("*") if p.is_file()}


async def test_images_are_stored_once_referenced_from_the_log_replayed_exactly_and_deleted_with_the_session(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    screenshot, mock = png(40, 30, seed=5), jpeg(12, 9, pad=500)
    first = [text_block("why is the button red?"), image_block(b64(screenshot), "image/png")]
    second = [
        text_block("and the same screenshot again, with a mock"),
        image_block(b64(screenshot), "image/png"),
        resource_block(embedded_blob_resource("file:///w/mock.jpg", b64(mock), mime_type="image/jpeg")),
    ]
    async with run_daemon(tmp_path, data_dir) as dsh:
        session_id = await dsh.start()
        with anyio.fail_after(WAIT):
            for prompt in (first, second):
                assert (await dsh.conn.prompt(session_id=session_id, prompt=prompt)).stop_reason == "end_turn"
        echoed = [u for u in dsh.updates_in(0, session_id=session_id) if u["sessionUpdate"] == "agent_message_chunk"]
        assert "[image: PNG image, 40x30" in "".join(u["content"]["text"] for u in echoed)  # echo saw the image
    log = session_path(data_dir, session_id).read_bytes()
    for data in (screenshot, mock):
        assert b64(data)[:24].encode() not in log  # no base64 of either image in the session file
    assert b"base64," not in log and log.count(b"dsh-blob:") >= 5
    objects = stored_objects(data_dir)
    assert objects == {hashlib.sha256(d).hexdigest(): d for d in (screenshot, mock)}  # each stored once

    async with run_daemon(tmp_path, data_dir, name="second") as dsh:
        await dsh.initialize()
        mark = dsh.mark()
        await dsh.load(session_id)
        replayed = [
            u["content"]
            for u in dsh.updates_in(mark, session_id=session_id)
            if u["sessionUpdate"] == "user_message_chunk"
        ]
        sent: list[dict[str, Any]] = [b.model_dump(by_alias=True, exclude_none=True) for b in first + second]
        assert replayed == sent  # byte for byte what the client sent
        await dsh.delete(session_id)
    assert not session_path(data_dir, session_id).exists()
    assert stored_objects(data_dir) == {}
    assert not (data_dir / "blobs" / "owners" / session_id).exists()
