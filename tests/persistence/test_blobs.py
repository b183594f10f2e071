"""The content-addressed blob store and the log's image references (units: no daemon)."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

import pytest

from dsh.plugins.persistence import BlobStore
from dsh.plugins.persistence._images import externalize, internalize, mentions_images
from dsh.services.sessions import dumps_json
from tests.support.images import b64, png


def objects(store: BlobStore) -> list[Path]:
    return sorted(p for p in (store.root / "objects").rglob("*") if p.is_file())


def test_the_same_bytes_are_stored_once_whoever_puts_them(tmp_path: Path) -> None:
    store = BlobStore(tmp_path / "blobs")
    data = png(seed=1)
    digest = store.put("s1", data)
    assert digest == hashlib.sha256(data).hexdigest()
    assert store.put("s1", data) == digest and store.put("s2", data) == digest
    assert [p.read_bytes() for p in objects(store)] == [data]
    assert store.owned("s1") == [digest] == store.owned("s2")
    assert store.get(digest) == data and store.size_of("s1") == len(data)


def test_release_deletes_only_what_no_other_owner_holds(tmp_path: Path) -> None:
    store = BlobStore(tmp_path / "blobs")
    shared, mine = png(seed=1), png(seed=2)
    store.put("a", shared)
    store.put("b", shared)
    own = store.put("a", mine)
    assert store.release("a") == 1  # only the one b does not hold
    assert not store.has(own) and store.get(hashlib.sha256(shared).hexdigest()) == shared
    assert store.owned("a") == [] and not (store.root / "owners" / "a").exists()
    assert store.release("b") == 1 and objects(store) == []
    assert store.release("never-seen") == 0


@pytest.mark.parametrize("owner", ["../x", "a/b", "", "..", "x" * 201])
def test_owners_and_digests_cannot_name_paths(tmp_path: Path, owner: str) -> None:
    store = BlobStore(tmp_path / "blobs")
    with pytest.raises(ValueError):
        store.put(owner, b"x")
    with pytest.raises(ValueError):
        store.get("../" + "0" * 61)


def test_references_replace_the_base64_and_load_back_exactly(tmp_path: Path) -> None:
    store = BlobStore(tmp_path / "blobs")
    data = png(seed=3)
    encoded = b64(data)
    event: dict[str, Any] = {
        "content": [{"type": "text", "text": "look"}, {"type": "image", "url": f"data:image/png;base64,{encoded}"}],
        "source": {
            "kind": "user",
            "shown": [
                {"type": "image", "mimeType": "image/png", "data": encoded},
                {"type": "resource", "resource": {"uri": "file:///a.png", "blob": encoded}},
            ],
        },
    }
    assert mentions_images(dumps_json(event))
    stored = externalize(event, lambda raw: store.put("s", raw))
    line = dumps_json(stored)
    assert encoded[:32].encode() not in line and b"base64," not in line  # no image data in the line
    assert line.count(f"sha256,{hashlib.sha256(data).hexdigest()}".encode()) == 3
    assert event["content"][1]["url"].startswith("data:")  # the live event is untouched
    loaded = dumps_json(stored)
    from dsh.services.sessions import parse_json

    again = parse_json(loaded)
    internalize(again, lambda digest: base64.b64encode(store.get(digest)).decode())
    assert dumps_json(again) == dumps_json(event)


def test_what_is_not_canonical_base64_stays_inline_and_nothing_else_is_touched(tmp_path: Path) -> None:
    store = BlobStore(tmp_path / "blobs")
    odd = {"type": "image", "url": "data:image/png;base64,iVBORw0KGgo"}  # unpadded: kept as it is
    text = {"type": "text", "text": '"type":"image" data:image/png;base64,AAAA'}
    value = [odd, text, {"type": "image", "url": "https://example.com/a.png"}]
    assert externalize(value, lambda raw: store.put("s", raw)) is value
    assert objects(store) == []


def test_a_lost_blob_becomes_a_note_never_an_empty_image() -> None:
    stored: dict[str, Any] = {
        "content": [{"type": "image", "url": "dsh-blob:image/png;sha256," + "0" * 64, "width": 4}],
        "shown": [{"type": "resource", "resource": {"uri": "file:///a.png", "blob": "dsh-blob:sha256," + "0" * 64}}],
    }
    internalize(stored, lambda digest: None)
    assert stored["content"] == [{"type": "text", "text": "[image no longer stored: sha256 000000000000]"}]
    assert stored["shown"][0]["resource"] == {
        "uri": "file:///a.png",
        "text": "[image no longer stored: sha256 000000000000]",
    }


async def test_a_sessions_size_counts_its_images_once(tmp_path: Path) -> None:
    from dsh.plugins.persistence import JsonlPersistence
    from dsh.services.sessions import Session, SessionHeader

    persistence = JsonlPersistence(tmp_path / "data")
    session = Session(SessionHeader(id="s1", created_at=1.0))
    persistence.on_created(session)
    data = png(pad=4000)
    image = {"type": "image", "url": f"data:image/png;base64,{b64(data)}"}
    for _ in range(2):
        persistence.on_event(session, session.append("user/message", {"content": [image], "source": {"kind": "user"}}))
    await persistence.on_flush(session)
    file_size = persistence.path_of("s1").stat().st_size
    assert file_size < 1000  # references only
    assert persistence.size_of("s1") == file_size + len(data)
    await persistence.delete("s1")
    assert persistence.size_of("s1") == 0
    persistence.close_all()
