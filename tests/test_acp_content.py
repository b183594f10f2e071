"""ACP prompt content → model content blocks: what is accepted, how it is rendered, and what is -32602."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh.frontends.acp._content import prompt_content
from dsh.frontends.acp._rpc import INVALID_PARAMS, RpcError
from tests.support.images import b64, jpeg, png


def rejected(blocks: list[Any], *, accept_images: bool = False) -> RpcError:
    with pytest.raises(RpcError) as caught:
        prompt_content(blocks, accept_images=accept_images)
    assert caught.value.code == INVALID_PARAMS
    assert caught.value.message
    return caught.value


# -- accepted ------------------------------------------------------------------------------------------------


def test_text_blocks_become_text_blocks_in_order() -> None:
    blocks: list[dict[str, Any]] = [
        {"type": "text", "text": "fix "},
        {"type": "text", "text": "the test", "annotations": {"priority": 1}},
    ]
    assert prompt_content(blocks, accept_images=False) == [
        {"type": "text", "text": "fix "},
        {"type": "text", "text": "the test"},
    ]


def test_a_resource_link_is_rendered_into_the_text() -> None:
    blocks: list[dict[str, Any]] = [
        {"type": "text", "text": "look at"},
        {
            "type": "resource_link",
            "uri": "file:///home/u/p/main.py",
            "name": "main.py",
            "mimeType": "text/x-python",
            "size": 120,
        },
    ]
    assert prompt_content(blocks, accept_images=False) == [
        {"type": "text", "text": "look at"},
        {"type": "text", "text": '\n[resource_link name="main.py" uri="file:///home/u/p/main.py"]\n'},
    ]


def test_a_resource_link_rendering_quotes_its_name_and_uri() -> None:
    (block,) = prompt_content(
        [{"type": "resource_link", "uri": 'file:///a "b"]', "name": 'x"]\n[evil'}], accept_images=False
    )
    assert block == {"type": "text", "text": '\n[resource_link name="x\\"]\\n[evil" uri="file:///a \\"b\\"]"]\n'}


def test_a_resource_link_alone_is_a_prompt() -> None:
    (block,) = prompt_content([{"type": "resource_link", "uri": "file:///a", "name": "a"}], accept_images=False)
    assert block["type"] == "text"
    assert "file:///a" in block["text"]


def test_an_embedded_text_resource_is_rendered_with_its_uri() -> None:
    blocks: list[dict[str, Any]] = [
        {"type": "text", "text": "explain"},
        {
            "type": "resource",
            "resource": {"uri": "file:///a/b.txt", "text": "line 1\nline 2", "mimeType": "text/plain"},
        },
    ]
    assert prompt_content(blocks, accept_images=False) == [
        {"type": "text", "text": "explain"},
        {"type": "text", "text": '\n<resource uri="file:///a/b.txt">\nline 1\nline 2\n</resource>\n'},
    ]


def test_an_image_is_passed_as_a_data_url_when_the_model_accepts_images() -> None:
    data = b64(png(4, 3))
    blocks = [{"type": "image", "data": data, "mimeType": "image/png"}, {"type": "text", "text": "what?"}]
    assert prompt_content(blocks, accept_images=True) == [
        {
            "type": "image",
            "url": f"data:image/png;base64,{data}",
            "mime_type": "image/png",
            "width": 4,
            "height": 3,
            "size": len(png(4, 3)),
        },
        {"type": "text", "text": "what?"},
    ]


def test_an_image_alone_is_a_prompt_when_images_are_accepted() -> None:
    blocks = [{"type": "image", "data": b64(jpeg()), "mimeType": "image/jpeg"}]
    (block,) = prompt_content(blocks, accept_images=True)
    assert block["type"] == "image" and block["url"] == f"data:image/jpeg;base64,{b64(jpeg())}"


def test_unknown_fields_and_meta_are_ignored() -> None:
    blocks = [{"type": "text", "text": "hi", "_meta": {"x": 1}, "futureField": [1]}]
    assert prompt_content(blocks, accept_images=False) == [{"type": "text", "text": "hi"}]


# -- rejected --------------------------------------------------------------------------------------------------


def test_an_image_is_rejected_when_the_model_does_not_accept_images() -> None:
    error = rejected([{"type": "text", "text": "what?"}, {"type": "image", "data": "AAAA", "mimeType": "image/png"}])
    assert "image" in error.message
    assert error.data == {"field": "prompt[1]"}


def test_the_refusal_names_the_model_that_does_not_take_images() -> None:
    image = {"type": "image", "data": b64(png()), "mimeType": "image/png"}
    with pytest.raises(RpcError) as caught:
        prompt_content([image], accept_images=False, model="local:text-only")
    assert caught.value.code == INVALID_PARAMS
    assert "'local:text-only' does not take images" in caught.value.message
    assert caught.value.data == {"field": "prompt[0]", "model": "local:text-only"}


def test_a_binary_embedded_resource_is_rejected() -> None:
    blob = {"type": "resource", "resource": {"uri": "file:///a.bin", "blob": "AAAA", "mimeType": "application/x"}}
    error = rejected([{"type": "text", "text": "see"}, blob])
    assert "binary" in error.message
    assert error.data == {"field": "prompt[1]"}


@pytest.mark.parametrize(
    "block",
    [
        {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
        {"type": "video"},
        {"type": "tool-call", "id": "x"},
        {"text": "no type"},
        {"type": None, "text": "x"},
        {"type": 5},
        "text",
        5,
        None,
        ["text"],
    ],
    ids=["audio", "video", "internal-type", "no-type", "null-type", "int-type", "string", "int", "null", "list"],
)
def test_unknown_block_types_are_rejected(block: Any) -> None:
    error = rejected([{"type": "text", "text": "hi"}, block])
    assert error.data == {"field": "prompt[1]"}


@pytest.mark.parametrize(
    "blocks",
    [
        [],
        [{"type": "text", "text": ""}],
        [{"type": "text", "text": "   \n\t "}],
        [{"type": "text", "text": " "}, {"type": "text", "text": "\n"}],
    ],
    ids=["no-blocks", "empty-text", "whitespace", "whitespace-blocks"],
)
def test_an_empty_or_whitespace_prompt_is_rejected(blocks: list[Any]) -> None:
    error = rejected(blocks)
    assert "empty" in error.message
    assert error.data == {"field": "prompt"}


def test_a_whitespace_prompt_is_rejected_even_when_images_are_accepted() -> None:
    rejected([{"type": "text", "text": "  "}], accept_images=True)


@pytest.mark.parametrize(
    ("block", "location"),
    [
        ({"type": "text"}, ("text",)),
        ({"type": "text", "text": 5}, ("text",)),
        ({"type": "text", "text": None}, ("text",)),
        ({"type": "resource_link", "name": "a"}, ("uri",)),
        ({"type": "resource_link", "uri": "file:///a"}, ("name",)),
        ({"type": "resource", "resource": {"text": "x"}}, ("resource", "uri")),
        ({"type": "resource"}, ("resource",)),
        ({"type": "resource", "resource": "file:///a"}, ("resource",)),
        ({"type": "image", "data": "AAAA"}, ("mimeType",)),
        ({"type": "image", "mimeType": "image/png"}, ("data",)),
    ],
    ids=[
        "text-missing",
        "text-int",
        "text-null",
        "link-no-uri",
        "link-no-name",
        "resource-no-uri",
        "resource-missing",
        "resource-string",
        "image-no-mime",
        "image-no-data",
    ],
)
def test_validation_errors_are_32602_with_the_field_errors(block: dict[str, Any], location: tuple[str, ...]) -> None:
    error = rejected([{"type": "text", "text": "hi"}, block], accept_images=True)
    assert isinstance(error.data, list)
    assert error.data
    locations = [tuple(item["loc"]) for item in error.data]
    assert ("prompt", 1, *location) in locations  # the field, inside the block that failed
    for item in error.data:
        assert "input" not in item  # the client's data (maybe megabytes of base64) is not echoed back
        assert "url" not in item


# -- properties ------------------------------------------------------------------------------------------------

visible = st.text(min_size=1).filter(lambda s: s.strip() != "")
blank = st.text(alphabet=st.sampled_from([chr(c) for c in range(0x3001) if chr(c).isspace()]))
"""Text that ``str.strip`` empties, drawn from the whitespace characters themselves (filtering arbitrary text for
it took hypothesis seconds of rejected examples)."""


@given(st.lists(st.text(), min_size=1, max_size=5).filter(lambda parts: any(p.strip() for p in parts)))
def test_any_prompt_with_visible_text_is_accepted_verbatim(parts: list[str]) -> None:
    blocks = [{"type": "text", "text": part} for part in parts]
    assert prompt_content(blocks, accept_images=False) == blocks


@given(st.lists(blank, max_size=5), st.booleans())
def test_any_prompt_without_visible_text_is_rejected(parts: list[str], accept_images: bool) -> None:
    with pytest.raises(RpcError) as caught:
        prompt_content([{"type": "text", "text": part} for part in parts], accept_images=accept_images)
    assert caught.value.code == INVALID_PARAMS


@given(visible, st.text(), st.text())
def test_embedded_resources_keep_their_text_exactly(text: str, uri: str, body: str) -> None:
    blocks: list[dict[str, Any]] = [
        {"type": "text", "text": text},
        {"type": "resource", "resource": {"uri": uri, "text": body}},
    ]
    out = prompt_content(blocks, accept_images=False)
    assert out[0] == {"type": "text", "text": text}
    assert out[1]["type"] == "text"
    assert body in out[1]["text"]
