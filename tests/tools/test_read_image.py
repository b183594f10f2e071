"""read_file of an image (RFC 0022): the image itself, checked by its bytes; anything else that is not text is
refused saying why. (A model without vision gets the description instead: tests/images.)"""

from __future__ import annotations

import base64
import os
from pathlib import Path

from tests.support.images import jpeg, png
from tests.tools.conftest import Call, text


async def test_an_image_file_comes_back_as_the_image_with_its_description(call: Call, work: Path) -> None:
    data = jpeg(8, 6, pad=300)
    (work / "ui").mkdir()
    (work / "ui" / "mock.jpg").write_bytes(data)
    result = await call("read_file", {"path": "ui/mock.jpg"})
    assert not result.is_error
    note, image = result.content
    assert note == {"type": "text", "text": f"ui/mock.jpg: JPEG image, 8x6, {len(data)} bytes"}
    assert image["type"] == "image" and image.get("name") == "ui/mock.jpg"
    head, _, encoded = image["url"].partition(",")
    assert head == "data:image/jpeg;base64" and base64.b64decode(encoded) == data
    assert (image.get("width"), image.get("height"), image.get("size")) == (8, 6, len(data))


async def test_what_only_looks_like_an_image_is_refused_saying_why(call: Call, work: Path) -> None:
    (work / "fake.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 100)  # the signature, no header
    fake = await call("read_file", {"path": "fake.png"})
    assert fake.error is not None and fake.error["code"] == "NOT_AN_IMAGE"
    assert "fake.png (image/png, 108 bytes) is not text" in text(fake) and "not a PNG, JPEG, GIF or WebP" in text(fake)
    (work / "old.bmp").write_bytes(b"BM" + b"\0" * 60)
    bmp = await call("read_file", {"path": "old.bmp"})
    assert bmp.error is not None and "not a PNG, JPEG, GIF or WebP" in text(bmp)
    big = work / "huge.png"
    big.write_bytes(png())
    os.truncate(big, 21 * 1024 * 1024)  # sparse: a 21 MB "PNG" that costs nothing to make
    huge = await call("read_file", {"path": "huge.png"})
    assert huge.error is not None and huge.error["code"] == "NOT_AN_IMAGE" and "over the 20 MB limit" in text(huge)
