"""The OpenAI Responses API and images: a tool result's images travel in its function_call_output."""

from __future__ import annotations

from tests.support.images import b64, png


def test_the_responses_api_gets_a_tool_results_images_in_its_output() -> None:
    from dsh.providers.openai_responses import to_input

    image = {"type": "image", "url": f"data:image/png;base64,{b64(png(3, 3))}", "width": 3, "height": 3}
    result = {
        "type": "tool-result",
        "tool_call_id": "c1",
        "content": [{"type": "text", "text": "shot.png:"}, image],
        "is_error": False,
    }
    plain = {
        "type": "tool-result",
        "tool_call_id": "c2",
        "content": [{"type": "text", "text": "ok"}],
        "is_error": False,
    }
    items = to_input([{"role": "user", "content": [result, plain]}])  # type: ignore[list-item]
    assert items == [
        {
            "type": "function_call_output",
            "call_id": "c1",
            "output": [
                {"type": "input_text", "text": "shot.png:"},
                {"type": "input_image", "image_url": image["url"]},
            ],
        },
        {"type": "function_call_output", "call_id": "c2", "output": "ok"},
    ]
