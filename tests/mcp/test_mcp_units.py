"""The MCP plugin's pure parts: names, result mapping, where servers come from, tool kinds, the permission
policy for tools that ask, and the tools service's session-scoped registrations."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import ValidationError

from dsh.config import DshConfig
from dsh.mcp._config import McpServerConfig, merge_servers, specs_from_acp, specs_from_config
from dsh.mcp._manager import tool_kind
from dsh.mcp._names import MAX_NAME, tool_name, unique_names
from dsh.mcp._results import map_result
from dsh.policy import CallFacts, Rule, SessionPolicy
from mcp import types
from tests.support.images import b64, png

SAFE = re.compile(r"^[A-Za-z0-9_-]+$")


def test_names_are_namespaced_sanitised_and_short() -> None:
    assert tool_name("github", "create_issue") == "mcp__github__create_issue"
    assert tool_name("my server", "a.b/c") == "mcp__my_server__a_b_c"
    long_a, long_b = tool_name("s", "x" * 80 + "a"), tool_name("s", "x" * 80 + "b")
    assert len(long_a) == MAX_NAME and len(long_b) == MAX_NAME
    assert long_a != long_b  # the hash of the full name keeps cut names apart
    assert SAFE.match(long_a) and SAFE.match(tool_name("ü ser", "тул"))


def test_unique_names_resolve_sanitising_collisions() -> None:
    names = unique_names("s", ["a.b", "a_b"])
    assert names["a.b"] == "mcp__s__a_b"
    assert names["a_b"] != names["a.b"] and SAFE.match(names["a_b"]) and len(names["a_b"]) <= MAX_NAME
    assert unique_names("s", ["t"], taken={"mcp__s__t"})["t"] != "mcp__s__t"


def result(content: list[Any], *, structured: Any = None, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=content, structuredContent=structured, isError=is_error)


def test_results_map_text_images_resources_and_structured_content() -> None:
    image = types.ImageContent(type="image", data=b64(png(3, 2)), mimeType="image/png")
    assert map_result(result([image]), images=True) == (
        [
            {
                "type": "image",
                "url": f"data:image/png;base64,{b64(png(3, 2))}",
                "mime_type": "image/png",
                "width": 3,
                "height": 2,
                "size": len(png(3, 2)),
            }
        ],
        False,
    )
    ((note,), _) = map_result(result([image]), images=False)
    assert note["type"] == "text" and "image/png" in note["text"] and "omitted" in note["text"]
    # what is no acceptable image is a note saying why, never an image block (checked by its bytes)
    for data, words in (("AAAA", "not a PNG, JPEG, GIF or WebP image"), ("%%%", "not valid base64")):
        bad = types.ImageContent(type="image", data=data, mimeType="image/png")
        ((note,), _) = map_result(result([bad]), images=True)
        assert note["type"] == "text" and words in note["text"] and note["text"].startswith("[image omitted:")
    embedded = types.EmbeddedResource(
        type="resource", resource=types.TextResourceContents(uri="file:///a.txt", text="inside", mimeType="text/plain")
    )
    assert map_result(result([embedded]), images=False)[0] == [{"type": "text", "text": "file:///a.txt\ninside"}]
    assert map_result(result([], structured={"n": 1}), images=False)[0] == [{"type": "text", "text": '{"n": 1}'}]
    text = types.TextContent(type="text", text="3")
    assert map_result(result([text], structured={"result": 3}), images=False)[0] == [{"type": "text", "text": "3"}]
    assert map_result(result([text], is_error=True), images=False)[1] is True
    assert map_result(result([]), images=False)[0][0]["text"]  # never silently empty


def test_servers_from_acp_and_config_and_the_editor_wins() -> None:
    given = specs_from_acp(
        [
            {"name": "gh", "command": "/bin/gh-mcp", "args": ["serve"], "env": [{"name": "T", "value": "1"}]},
            {"type": "http", "name": "docs", "url": "http://127.0.0.1:1/mcp", "headers": [{"name": "A", "value": "b"}]},
            {"type": "sse", "name": "old", "url": "http://127.0.0.1:1/sse", "headers": []},
            {"name": "broken"},
            {"type": "acp", "name": "weird", "id": "x"},
        ],
        timeout=3.0,
    )
    by_name = {spec.name: spec for spec in given}
    assert by_name["gh"].command == "/bin/gh-mcp" and by_name["gh"].env == {"T": "1"} and by_name["gh"].timeout == 3.0
    assert by_name["docs"].transport == "http" and by_name["docs"].headers == {"A": "b"}
    assert by_name["old"].transport == "sse"
    assert by_name["broken"].problem == "invalid server entry: command is missing"
    assert by_name["weird"].problem is not None and "not supported" in by_name["weird"].problem
    config = DshConfig.model_validate(
        {"mcp_servers": {"gh": {"command": "old-gh"}, "local": {"command": "x", "timeout": 2}}}
    )
    configured = specs_from_config(config.mcp_servers)
    merged = {spec.name: spec for spec in merge_servers(configured, given)}
    assert merged["gh"].command == "/bin/gh-mcp" and merged["gh"].source == "editor"
    assert merged["local"].source == "config" and merged["local"].timeout == 2


def test_the_config_section_rejects_what_cannot_work() -> None:
    with pytest.raises(ValidationError):
        McpServerConfig.model_validate({"type": "stdio"})
    with pytest.raises(ValidationError):
        McpServerConfig.model_validate({"type": "http"})
    with pytest.raises(ValidationError):
        DshConfig.model_validate({"mcp_servers": {"x": {"command": "a", "typo": 1}}})


def test_kinds_follow_the_annotations() -> None:
    assert tool_kind(types.ToolAnnotations(readOnlyHint=True)) == "read"
    # issue #29: destructiveHint means "may overwrite", not "removes": only a tool named for removing is delete
    assert tool_kind(types.ToolAnnotations(destructiveHint=True)) == "edit"
    assert tool_kind(types.ToolAnnotations(readOnlyHint=False, destructiveHint=False)) == "edit"
    assert tool_kind(None) == "other" and tool_kind(types.ToolAnnotations()) == "other"


@pytest.mark.parametrize(
    ("name", "annotations", "kind"),
    [
        # the reference filesystem server's annotations (@modelcontextprotocol/server-filesystem)
        ("write_file", {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True}, "edit"),
        ("edit_file", {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False}, "edit"),
        ("create_directory", {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True}, "edit"),
        ("move_file", {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False}, "move"),
        ("read_text_file", {"readOnlyHint": True}, "read"),
        ("list_directory", {"readOnlyHint": True}, "read"),
        # tools that remove, whatever the naming style
        ("delete_file", {"readOnlyHint": False, "destructiveHint": True}, "delete"),
        ("removeLabel", {"destructiveHint": True}, "delete"),
        ("git-rm", None, "delete"),
        ("deleteIssue", {}, "delete"),
        # a read-only tool is read even when its name mentions removing; an unknown tool is other
        ("find_deleted_files", {"readOnlyHint": True}, "read"),
        ("get_weather", None, "other"),
        ("get_weather", {}, "other"),
        ("fetch_page", {"openWorldHint": True}, "other"),
    ],
)
def test_kinds_from_annotations_and_names(name: str, annotations: dict[str, bool] | None, kind: str) -> None:
    given = types.ToolAnnotations(**annotations) if annotations is not None else None
    assert tool_kind(given, name) == kind


@pytest.mark.parametrize(
    ("mode", "read_only", "expected"),
    [
        ("default", False, "ask"),
        ("accept-edits", False, "ask"),
        ("plan", False, "refuse"),
        ("bypass", False, "allow"),
        ("default", True, "allow"),
        ("plan", True, "allow"),
    ],
)
def test_a_tool_that_asks_is_gated_like_a_command(mode: str, read_only: bool, expected: str) -> None:
    kind = "read" if read_only else "edit"
    facts = CallFacts("mcp__s__t", kind, "/project", asks=not read_only)
    assert SessionPolicy(mode=mode).decide(facts).verdict == expected


def test_always_allow_holds_for_a_tool_that_asks() -> None:
    facts = CallFacts("mcp__s__t", "other", "/project", asks=True)
    policy = SessionPolicy(rules=[Rule("mcp__s__t", None, "allow")])
    assert policy.decide(facts).verdict == "allow"
    assert SessionPolicy(mode="plan", rules=[Rule("mcp__s__t", None, "allow")]).decide(facts).verdict == "refuse"


def test_config_show_lists_mcp_servers_with_their_secrets_masked() -> None:
    from dsh.config import render_config

    config = DshConfig.model_validate(
        {
            "mcp_servers": {
                "gh": {"command": "gh-mcp", "env": {"GITHUB_TOKEN": "ghp_secretvalue"}},
                "docs": {
                    "type": "http",
                    "url": "https://u:pw@example.com/mcp",
                    "headers": {"Authorization": "Bearer t0k", "X-Team": "a"},
                },
            }
        }
    )
    shown = render_config(config, source=None, env={})
    assert "ghp_secretvalue" not in shown and "t0k" not in shown and ":pw@" not in shown
    assert "GITHUB_TOKEN: '***'" in shown and "X-Team: a" in shown and "command: gh-mcp" in shown
    reloaded = DshConfig.model_validate(__import__("yaml").safe_load(shown))
    assert set(reloaded.mcp_servers) == {"gh", "docs"}


def test_the_mcp_timeout_setting_resolves_through_the_settings_table() -> None:
    from dsh.settings import SettingError, resolve_settings

    assert resolve_settings(env={}).get("mcp_timeout") == 10.0
    assert resolve_settings(env={"DSH_MCP_TIMEOUT": "2.5"}).get("mcp_timeout") == 2.5
    for bad in ("soon", "0", "-1", "inf"):
        with pytest.raises(SettingError, match="DSH_MCP_TIMEOUT"):
            resolve_settings(env={"DSH_MCP_TIMEOUT": bad})
