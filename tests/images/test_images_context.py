"""Context accounting and compaction with images: tokens from pixel size, summaries by description."""

from __future__ import annotations

from typing import Any

from dsh.context._compaction import CompactionPlan, transcript
from dsh.frontends.acp._content import prompt_content
from tests.support.images import b64, png


def _image(width: int, height: int) -> dict[str, Any]:
    (block,) = prompt_content(
        [{"type": "image", "data": b64(png(width, height)), "mimeType": "image/png"}], accept_images=True
    )
    return dict(block)


def test_a_compaction_transcript_describes_images_and_holds_no_bytes() -> None:
    image = _image(320, 200)
    result = {"type": "tool-result", "tool_call_id": "c", "content": [_image(16, 16)], "is_error": False}
    plan = CompactionPlan(
        upto=3,
        previous=None,
        messages=[
            {"role": "user", "content": [{"type": "text", "text": "why is this red?"}, image]},  # type: ignore[list-item]
            {"role": "user", "content": [result]},  # type: ignore[list-item]
        ],
    )
    text = transcript(plan)
    assert "[user sent an image: PNG image, 320x200" in text
    assert "[tool result] [image: PNG image, 16x16" in text
    assert "base64" not in text and b64(png(320, 200))[:40] not in text


def test_a_tool_cards_content_shows_the_image_the_model_got() -> None:
    from acp.schema import SessionNotification

    from dsh.frontends.acp._projection import project
    from dsh.services.sessions import SessionEvent

    image = _image(20, 10)
    data = {"call_id": "c1", "content": [{"type": "text", "text": "shot.png"}, image], "is_error": False}
    (update,) = project(SessionEvent("tool/result", 3, 1.0, data))
    assert update["content"] == [
        {"type": "content", "content": {"type": "text", "text": "shot.png"}},
        {"type": "content", "content": {"type": "image", "data": b64(png(20, 10)), "mimeType": "image/png"}},
    ]
    checked = SessionNotification.model_validate({"sessionId": "s", "update": update})  # the SDK's schema takes it
    assert checked.update.model_dump(mode="json", by_alias=True, exclude_unset=True) == update


def test_dsh_sessions_shows_images_by_description_or_as_stored_apart() -> None:
    from dsh.frontends.sessions_cli import content_text

    assert content_text([_image(30, 20)]).startswith("[image: PNG image, 30x20, ")
    stored = {"type": "image", "url": "dsh-blob:image/jpeg;sha256," + "a" * 64}
    assert content_text([stored]) == "[image: image/jpeg, stored apart]"


def test_a_model_without_vision_gets_each_image_as_a_note_and_nothing_else_changes() -> None:
    from dsh.images import without_images

    image = _image(16, 9)
    text_only: list[Any] = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert without_images(text_only, "m:x") is None  # nothing to change: the request is passed as it is
    result = {"type": "tool-result", "tool_call_id": "c", "content": [{"type": "text", "text": "a.png:"}, image]}
    messages: list[Any] = [*text_only, {"role": "user", "content": [result]}, {"role": "user", "content": [image]}]
    out = without_images(messages, "deepseek:deepseek-chat")
    assert out is not None and out[0] is messages[0]  # untouched messages are shared, not copied
    note = (
        "[image: PNG image, 16x9, " + f"{image['size']} bytes; not shown: deepseek:deepseek-chat does not take images]"
    )
    assert out[1]["content"][0]["content"] == [{"type": "text", "text": "a.png:"}, {"type": "text", "text": note}]
    assert out[2]["content"] == [{"type": "text", "text": note}]
    assert messages[2]["content"] == [image]  # the session's own messages are never changed


def test_an_image_counts_its_pixel_size_not_its_base64() -> None:
    from dsh.images import image_tokens
    from dsh.images._blocks import TYPICAL_IMAGE_TOKENS
    from dsh.services.llm import content_chars
    from dsh.services.llm._estimate import CHARS_PER_TOKEN

    small, large = _image(64, 64), _image(1024, 1024)
    assert content_chars([small]) == image_tokens(64, 64) * CHARS_PER_TOKEN
    assert content_chars([large]) == image_tokens(1024, 1024) * CHARS_PER_TOKEN > content_chars([small])
    result = {"type": "tool-result", "tool_call_id": "c", "content": [large], "is_error": False}
    assert content_chars([result]) == content_chars([large])  # an image a tool returned counts the same
    unknown = {"type": "image", "url": "https://example.com/a.png"}
    assert content_chars([unknown]) == TYPICAL_IMAGE_TOKENS * CHARS_PER_TOKEN
