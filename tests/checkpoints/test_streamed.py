"""Checkpoints are streamed and bounded (issue 34 item 5).

* The blob store hashes and copies in chunks and keeps runs of zeros as holes: a sparse file costs the store
  (almost) no blocks, and what it gives back is byte for byte what was stored.
* A file over ``tools.checkpoint_max_file_size`` is not stored: before the call runs the user is asked, told that
  ``/rewind`` will not restore it; a rejection means the call does not run; an acceptance runs it and ``/rewind``
  then says the file's earlier content was not kept, and rewinds nothing.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from dsh.plugins.persistence import BlobStore
from tests.context.test_sections import write_config
from tests.support.editor import Editor, EditorClient, call, read_log, run_editor, tool_results, write_script

MIB = 1 << 20


def test_a_sparse_file_stays_sparse_in_the_blob_store_and_comes_back_whole(tmp_path: Path) -> None:
    sparse = tmp_path / "sparse.img"
    with sparse.open("wb") as file:
        file.truncate(96 * MIB)
        file.seek(40 * MIB + 17)
        file.write(b"a few real bytes in the middle")
    store = BlobStore(tmp_path / "blobs")
    with sparse.open("rb") as source:
        digest, size = store.put_file("s1.checkpoints", source)
    assert size == 96 * MIB
    hasher = hashlib.sha256()
    with sparse.open("rb") as source:
        while chunk := source.read(MIB):
            hasher.update(chunk)
    assert digest == hasher.hexdigest()
    stored = tmp_path / "blobs" / "objects" / digest[:2] / digest
    assert stored.stat().st_size == 96 * MIB
    assert stored.stat().st_blocks * 512 <= 2 * MIB  # one real chunk at most, not 96 MiB
    with store.open(digest) as back, sparse.open("rb") as source:
        while chunk := source.read(MIB):
            assert back.read(MIB) == chunk
    assert store.owned("s1.checkpoints") == [digest]
    assert not [name for name in os.listdir(tmp_path / "blobs" / "objects") if name.startswith(".incoming-")]


def script(tmp_path: Path) -> str:
    return write_script(
        tmp_path / "script.json",
        [
            call("delete_file", "d1", path="big.bin"),
            {"text": "tried"},
            call("delete_file", "d2", path="big.bin"),
            {"text": "done"},
        ],
    )


def said(editor: Editor, session: str, since: int) -> str:
    updates = editor.updates(session)[since:]
    return "".join(u["content"].get("text", "") for u in updates if u.get("sessionUpdate") == "agent_message_chunk")


async def test_a_file_over_the_limit_asks_first_and_is_then_not_restorable(tmp_path: Path) -> None:
    write_config(tmp_path, "tools: {checkpoint_max_file_size: 1MiB}\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / "big.bin").write_bytes(os.urandom(2 * MIB))
    client = EditorClient(["reject_once", "allow_once"])
    async with run_editor(tmp_path, script(tmp_path), client, project=project) as editor:
        session = (await editor.new_session()).session_id
        await editor.conn.set_session_mode(session_id=session, mode_id="bypass")
        assert (await editor.prompt(session, "turn one")).stop_reason == "end_turn"
        (asked,) = client.permissions()
        assert asked["toolCall"]["toolCallId"] == "d1"
        assert (project / "big.bin").exists()  # rejected: not run
        assert (await editor.prompt(session, "turn two")).stop_reason == "end_turn"
        assert len(client.permissions()) == 2
        assert not (project / "big.bin").exists()
        mark = len(editor.updates(session))
        assert (await editor.prompt(session, "/rewind 1")).stop_reason == "end_turn"
        reply = said(editor, session, mark)
        assert "Nothing was rewound" in reply and "over the checkpoint limit" in reply, reply
    events = read_log(tmp_path, session)
    (refusal,) = tool_results(events, "d1")
    text = refusal["content"][0]["text"]
    assert "over the checkpoint limit (1 MiB)" in text and "/rewind could not restore it" in text
    (checkpoint,) = [e for e in events if e["type"] == "checkpoint/file"]
    assert checkpoint["data"]["unrestorable"] is True and checkpoint["data"]["digest"] is None
    assert not (tmp_path / "dsh-data" / "blobs" / "owners" / f"{session}.checkpoints").exists()
