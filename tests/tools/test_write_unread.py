"""write_file over a file the model has not read asks for a read first, binary files included, and never says
"Created" for a file that existed (issue 34 item 6)."""

from __future__ import annotations

from pathlib import Path

from tests.tools.conftest import Call, text

BLOB = b"\x00\x01\x02binary\xff" * 100  # 1000 bytes


async def test_writing_over_an_unread_binary_file_asks_for_a_read_first(call: Call, work: Path) -> None:
    (work / "data.bin").write_bytes(BLOB)
    result = await call("write_file", {"path": "data.bin", "content": "text now\n"})
    assert result.is_error and result.error is not None and result.error["code"] == "NOT_READ"
    assert "data.bin exists, 1000 bytes, binary (application/octet-stream): read it or delete it first" in text(result)
    assert (work / "data.bin").read_bytes() == BLOB


async def test_after_a_read_the_binary_file_is_overwritten_and_the_answer_says_so(call: Call, work: Path) -> None:
    (work / "data.bin").write_bytes(BLOB)
    refused = await call("read_file", {"path": "data.bin"})
    assert refused.is_error and "binary file" in text(refused)
    result = await call("write_file", {"path": "data.bin", "content": "text now\n"}, call_id="c2")
    assert not result.is_error, text(result)
    assert text(result).startswith("Overwrote data.bin")
    assert (work / "data.bin").read_text() == "text now\n"


async def test_an_unread_text_file_is_not_overwritten_and_a_new_file_is_created(call: Call, work: Path) -> None:
    (work / "notes.txt").write_text("keep me\n")
    refused = await call("write_file", {"path": "notes.txt", "content": "gone\n"})
    assert refused.is_error and refused.error is not None and refused.error["code"] == "NOT_READ"
    assert (work / "notes.txt").read_text() == "keep me\n"
    created = await call("write_file", {"path": "new.txt", "content": "fresh\n"}, call_id="c2")
    assert text(created).startswith("Created new.txt")
