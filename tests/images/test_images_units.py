"""dsh.images and the ACP door for images: formats by their bytes, limits, vision rules, token estimates."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from dsh.frontends.acp._content import prompt_content
from dsh.frontends.acp._rpc import INVALID_PARAMS, RpcError
from dsh.images import (
    MAX_IMAGE_BYTES,
    ImageError,
    check_image,
    decode_base64,
    describe_image,
    image_tokens,
    takes_images,
)
from dsh.images._blocks import TYPICAL_IMAGE_TOKENS
from dsh.images._sniff import sniff
from dsh.images._vision import builtin_vision
from tests.support.images import b64, gif, jpeg, png, webp

SVG = b'<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"></svg>'


@pytest.mark.parametrize(
    ("data", "kind", "size"),
    [
        (png(4, 3), "png", (4, 3)),
        (jpeg(8, 6), "jpeg", (8, 6)),
        (gif(2, 9), "gif", (2, 9)),
        (webp(5, 7), "webp", (5, 7)),
    ],
)
def test_each_accepted_format_is_recognised_with_its_size(data: bytes, kind: str, size: tuple[int, int]) -> None:
    info = sniff(data)
    assert info is not None
    assert (info.format, (info.width, info.height), info.mime_type) == (kind, size, f"image/{kind}")


@pytest.mark.parametrize(
    "data",
    [
        b"just some text that claims to be a png",
        SVG,
        b"\x89PNG\r\n\x1a\n",  # the signature alone: no IHDR
        png()[:20],  # a cut header
        b"\xff\xd8\xff\xe0\x00\x10JFIF",  # a JPEG with no frame header
        b"BM" + b"\x00" * 60,  # BMP: an image, not one providers take
        b"",
    ],
)
def test_near_misses_are_not_images(data: bytes) -> None:
    assert sniff(data) is None
    with pytest.raises(ImageError, match="not a PNG, JPEG, GIF or WebP image"):
        check_image(data, "image/png")


def test_the_size_limit_is_checked_on_the_decoded_bytes() -> None:
    check_image(png(pad=MAX_IMAGE_BYTES))  # exactly the limit passes
    with pytest.raises(ImageError, match=r"over the 20\.0 MB limit"):
        check_image(png(pad=MAX_IMAGE_BYTES + 1))


def test_base64_with_line_breaks_is_accepted_and_made_canonical() -> None:
    data = png(pad=200)
    wrapped = base64.encodebytes(data).decode()  # MIME style: a newline every 76 characters
    raw, canonical = decode_base64(wrapped)
    assert raw == data and canonical == b64(data)
    exact = b64(data)
    assert decode_base64(exact)[1] is exact  # already canonical: the very string is kept
    with pytest.raises(ImageError, match="not valid base64"):
        decode_base64("not*base64!")


def test_the_vision_table_and_the_configuration() -> None:
    assert takes_images("openai:gpt-4.1") and takes_images("openai:gpt-4o-mini") and takes_images("openai:o3")
    assert not takes_images("openai:o3-mini") and not takes_images("openai:gpt-3.5-turbo")
    assert takes_images("anthropic:claude-sonnet-4-5-20250929") and takes_images("anthropic:claude-3-5-haiku")
    assert not takes_images("anthropic:claude-2.1")
    assert not takes_images("deepseek:deepseek-chat") and not takes_images("deepseek:deepseek-reasoner")
    assert takes_images("openai:anthropic/claude-sonnet-4.5")  # OpenRouter's vendor/ prefix
    assert takes_images("echo") and not takes_images("scripted:/tmp/x.yaml")
    assert builtin_vision("ollama:qwen2.5-coder") is None and not takes_images("ollama:qwen2.5-coder")
    # the config file's vision wins, per model, and "*" for the provider's other models
    assert takes_images("ollama:qwen2.5-coder", {"qwen2.5-coder": True})
    assert not takes_images("openai:gpt-4.1", {"gpt-4.1": False})
    assert takes_images("ollama:anything", {"*": True}) and not takes_images("ollama:x", {"*": True, "x": False})


def test_image_tokens_follow_the_providers_rules_of_thumb() -> None:
    assert image_tokens(1024, 1024) == 1399  # Anthropic: 1024*1024/750, above OpenAI's 765
    assert image_tokens(512, 512) == 350  # Anthropic 350, OpenAI 85 + 170 = 255
    assert image_tokens(100, 100) == 255  # tiny: OpenAI's one tile is the larger
    big = image_tokens(8000, 6000)
    assert 1500 <= big <= 1600 and big == image_tokens(4000, 3000)  # scaled down first: size stops mattering
    assert image_tokens(None, None) == TYPICAL_IMAGE_TOKENS


def test_an_image_is_described_without_its_bytes() -> None:
    data = png(800, 600)
    (block,) = prompt_content(
        [{"type": "image", "data": b64(data), "mimeType": "image/png", "uri": "file:///s.png"}], accept_images=True
    )
    assert describe_image(block) == f"PNG image, 800x600, {len(data) / 1024:.0f} KB (file:///s.png)"
    assert "base64" not in describe_image(block)
    assert describe_image({"type": "image", "url": "data:image/gif;base64,R0lG"}) == "GIF image"


# -- the ACP door --------------------------------------------------------------------------------------------


def _refused(blocks: list[Any], **options: Any) -> RpcError:
    with pytest.raises(RpcError) as caught:
        prompt_content(blocks, accept_images=True, **options)
    assert caught.value.code == INVALID_PARAMS
    return caught.value


def test_the_real_type_is_sent_whatever_the_client_declared() -> None:
    (block,) = prompt_content([{"type": "image", "data": b64(jpeg()), "mimeType": "image/png"}], accept_images=True)
    assert block["url"].startswith("data:image/jpeg;base64,") and block.get("mime_type") == "image/jpeg"


@pytest.mark.parametrize(
    ("data", "mime", "words"),
    [
        (b"hello, I am text", "image/png", "not a PNG, JPEG, GIF or WebP image"),
        (SVG, "image/svg+xml", "not a PNG, JPEG, GIF or WebP image"),
        (png(pad=MAX_IMAGE_BYTES + 1), "image/png", "over the 20.0 MB limit"),
    ],
)
def test_what_is_not_an_acceptable_image_is_refused_naming_the_block(data: bytes, mime: str, words: str) -> None:
    error = _refused([{"type": "text", "text": "look"}, {"type": "image", "data": b64(data), "mimeType": mime}])
    assert words in error.message and error.data == {"field": "prompt[1]"}


def test_more_images_than_the_limit_are_refused() -> None:
    image = {"type": "image", "data": b64(png()), "mimeType": "image/png"}
    assert len(prompt_content([image] * 3, accept_images=True, max_images=3)) == 3
    error = _refused([image] * 4, max_images=3)
    assert "at most 3 images" in error.message and error.data == {"field": "prompt[3]"}


def test_a_resource_whose_blob_is_an_image_reaches_the_model_as_an_image() -> None:
    blocks: list[dict[str, Any]] = [
        {"type": "text", "text": "this one"},
        {"type": "resource", "resource": {"uri": "file:///w/mock.webp", "mimeType": "image/webp", "blob": b64(webp())}},
    ]
    _, image = prompt_content(blocks, accept_images=True)
    assert image["type"] == "image" and image["url"] == f"data:image/webp;base64,{b64(webp())}"
    assert image.get("name") == "file:///w/mock.webp"
    svg = {"type": "resource", "resource": {"uri": "file:///w/a.svg", "mimeType": "image/svg+xml", "blob": b64(SVG)}}
    assert "not a PNG" in _refused([svg]).message
    other = {"type": "resource", "resource": {"uri": "file:///w/a.bin", "mimeType": "application/zip", "blob": "AAAA"}}
    assert "binary embedded resources" in _refused([other]).message


def test_wrapped_base64_is_stored_in_its_canonical_spelling() -> None:
    data = png(pad=300)
    block = {"type": "image", "data": base64.encodebytes(data).decode(), "mimeType": "image/png"}
    (image,) = prompt_content([block], accept_images=True)
    assert block["data"] == b64(data)  # what the session stores and replays
    assert image["url"] == f"data:image/png;base64,{b64(data)}"
