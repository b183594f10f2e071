"""Images from tools: a read_file of a JPEG in the project and an MCP image result reach the next request at
loopback OpenAI and Anthropic servers, in each provider's format, with the exact bytes; the ACP tool card shows
the image."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import anyio
from acp.schema import EnvVariable, McpServerStdio

from dsh.providers.openai import to_openai_messages
from tests.support.editor import EditorClient, run_editor
from tests.support.images import b64, jpeg, png
from tests.support.mcp_servers import PNG, stdio_server
from tests.support.provider_server import Reply, serve
from tests.support.provider_wire import (
    DONE,
    an_end,
    an_start,
    an_text_reply,
    an_tool,
    oa_chunk,
    oa_finish,
    oa_text_reply,
    oa_tool_delta,
    oa_usage,
)

WAIT = 40


def test_chat_completions_sends_tool_images_in_one_user_message_after_the_run_of_tool_messages() -> None:
    image = {
        "type": "image",
        "url": f"data:image/png;base64,{b64(png(6, 4))}",
        "mime_type": "image/png",
        "width": 6,
        "height": 4,
    }
    calls = [{"type": "tool-call", "id": i, "name": "x", "arguments": "{}"} for i in "abc"]

    def result(call_id: str, *content: Any) -> Any:
        return {
            "role": "user",
            "content": [{"type": "tool-result", "tool_call_id": call_id, "content": list(content), "is_error": False}],
        }

    messages: list[Any] = [
        {"role": "assistant", "content": calls},
        result("a", {"type": "text", "text": "here"}, image),  # each tool result is a message of its own
        result("b", {"type": "text", "text": "plain"}),
        result("c", image, image),
        {"role": "assistant", "content": [{"type": "text", "text": "seen"}]},
        {"role": "user", "content": [{"type": "text", "text": "more?"}]},
    ]
    out = to_openai_messages(messages, None)
    assert [m["role"] for m in out] == ["assistant", "tool", "tool", "tool", "user", "assistant", "user"]
    assert out[1]["content"] == "here\n[image: PNG image, 6x4; attached in the next user message]"
    assert out[2]["content"] == "plain"
    part = {"type": "image_url", "image_url": {"url": image["url"]}}
    assert out[4]["content"] == [
        {"type": "text", "text": "Images returned by tool call a:"},
        part,
        {"type": "text", "text": "Images returned by tool call c:"},
        part,
        part,
    ]
    assert out[6] == {"role": "user", "content": "more?"}
    # the user's own next words join the images' message when no assistant message comes between
    joined = to_openai_messages([*messages[:4], {"role": "user", "content": [{"type": "text", "text": "and?"}]}], None)
    assert joined[-1]["content"][-1] == {"type": "text", "text": "and?"} and len(joined) == 5


def _config(tmp_path: Path, url: str) -> dict[str, str]:
    path = tmp_path / "config.yaml"
    path.write_text(
        f"""
model: oai:gpt-4o
models: [ant:claude-sonnet-4-5]
providers:
  oai: {{type: openai, base_url: "{url}/v1", key_required: false}}
  ant: {{type: anthropic, base_url: "{url}", api_key: test-key}}
""",
        encoding="utf-8",
    )
    return {"DSH_CONFIG": str(path), "DSH_MCP_TIMEOUT": "30"}


def _stdio(directory: Path) -> McpServerStdio:
    entry = stdio_server(str(directory), "main")
    return McpServerStdio(
        name=entry["name"], command=entry["command"], args=entry["args"], env=[EnvVariable(**e) for e in entry["env"]]
    )


async def test_read_file_and_mcp_images_reach_openai_and_anthropic_and_the_card_shows_them(tmp_path: Path) -> None:
    served = tmp_path / "served"
    served.mkdir()
    (tmp_path / "project").mkdir()
    photo = jpeg(16, 12, pad=700)
    (tmp_path / "project" / "mock.jpg").write_bytes(photo)
    read = '{"path": "mock.jpg"}'
    with serve() as server:
        server.script(
            Reply(
                events=[
                    oa_chunk({"role": "assistant", "content": None}),
                    oa_tool_delta(0, "{}", "call_1", "mcp__main__image"),
                    oa_tool_delta(1, read, "call_r", "read_file"),
                    oa_finish("tool_calls"),
                    oa_usage(10, 2),
                    DONE,
                ]
            ),
            Reply(events=oa_text_reply("A dot.")),
            Reply(
                events=[
                    an_start(),
                    *an_tool(0, "toolu_2", "mcp__main__image", ["{}"]),
                    *an_tool(1, "toolu_r", "read_file", [read]),
                    *an_end("tool_use"),
                ]
            ),
            Reply(events=an_text_reply("Still a dot.")),
        )
        client = EditorClient(["allow_always"])
        async with run_editor(tmp_path, "oai:gpt-4o", client, env=_config(tmp_path, server.url)) as editor:
            with anyio.fail_after(WAIT):
                session = (
                    await editor.conn.new_session(cwd=str(editor.project), mcp_servers=[_stdio(served)])
                ).session_id
                assert (await editor.prompt(session, "take a screenshot")).stop_reason == "end_turn"
                await editor.conn.set_config_option(
                    config_id="model", session_id=session, value="ant:claude-sonnet-4-5"
                )
                assert (await editor.prompt(session, "again")).stop_reason == "end_turn"
                card = editor.final(session, "call_1")
        requests = server.requests
    assert len(requests) == 4
    # OpenAI: each tool message names its image, one user message right after carries them, each labelled
    messages = requests[1].body["messages"]
    mcp_tool, file_tool, user = messages[-3:]
    assert mcp_tool["tool_call_id"] == "call_1" and "[image: PNG image, 1x1" in mcp_tool["content"]
    assert file_tool["tool_call_id"] == "call_r" and file_tool["content"].startswith("mock.jpg: JPEG image, 16x12")
    labels = [p["text"] for p in user["content"] if p["type"] == "text"]
    assert labels == ["Images returned by tool call call_1:", "Images returned by tool call call_r:"]
    sent = [_bytes(p["image_url"]["url"]) for p in user["content"] if p["type"] == "image_url"]
    assert sent == [("image/png", PNG), ("image/jpeg", photo)]
    # Anthropic: image blocks inside the tool_results, all four calls' (the history is resent)
    results = [
        b
        for m in requests[3].body["messages"]
        if m["role"] == "user"
        for b in m["content"]
        if b["type"] == "tool_result"
    ]
    assert [r["tool_use_id"] for r in results] == ["call_1", "call_r", "toolu_2", "toolu_r"]
    images = [
        (b["source"]["media_type"], base64.b64decode(b["source"]["data"]))
        for r in results
        for b in r["content"]
        if b["type"] == "image"
    ]
    assert images == [("image/png", PNG), ("image/jpeg", photo)] * 2
    # the editor's card shows the image as content
    shown = [c["content"] for c in card.get("content") or [] if c["content"]["type"] == "image"]
    assert shown == [{"type": "image", "data": base64.b64encode(PNG).decode(), "mimeType": "image/png"}], json.dumps(
        card
    )[:500]


def _bytes(url: str) -> tuple[str, bytes]:
    head, _, data = url.partition(",")
    assert head.endswith(";base64")
    return head[len("data:") : -len(";base64")], base64.b64decode(data, validate=True)
