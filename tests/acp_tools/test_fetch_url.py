"""fetch_url over the wire: a page from a loopback server (private addresses allowed by the test's config)
comes back as Markdown, budgeted; without that setting a loopback URL is refused before any request; the
user is asked before a fetch in default mode."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.context.test_sections import write_config
from tests.support.editor import EditorClient, call, read_log, run_editor, tool_results, write_script
from tests.support.provider_server import FakeProvider, Reply

PAGE = """<!doctype html><html><head><title>Widget docs</title><script>var tracking = 1;</script>
<style>body { color: red }</style></head><body><nav>Home | About</nav><main>
<h1>Widgets</h1><p>A <b>widget</b> turns <a href="/gears">gears</a>.</p><ul><li>one</li><li>two</li></ul>
<pre><code>widget.turn()</code></pre></main><footer>(c) nobody</footer></body></html>"""


def _text(result: dict[str, Any]) -> str:
    return "".join(block.get("text", "") for block in result["content"])


async def test_a_page_comes_back_as_markdown_and_the_user_is_asked(server: FakeProvider, tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    write_config(tmp_path, "tools: {fetch_private: true}\n")
    server.script(
        Reply(body=PAGE, headers={"Content-Type": "text/html; charset=utf-8"}),
        Reply(body="x" * 100_000, headers={"Content-Type": "text/plain"}),
    )
    steps = [
        call("fetch_url", "page", url=f"{server.url}/docs/widgets"),
        call("fetch_url", "long", url=f"{server.url}/big.txt"),
        call("fetch_url", "bad", url="ftp://example.com/x"),
        {"text": "done"},
    ]
    model = write_script(tmp_path / "script.json", steps)
    client = EditorClient(["allow_once", "allow_once", "allow_once"])
    async with run_editor(tmp_path, model, client) as editor:
        session = (await editor.new_session()).session_id
        assert (await editor.prompt(session, "read the docs")).stop_reason == "end_turn"
    assert [p["toolCall"]["toolCallId"] for p in client.permissions()] == ["page", "long", "bad"]
    events = read_log(tmp_path, session)
    (page,) = tool_results(events, "page")
    body = _text(page)
    assert not page["is_error"], body
    assert body.startswith(f"Fetched {server.url}/docs/widgets (HTTP 200, text/html)")
    assert "# Widgets" in body and "**widget**" in body and "[gears](/gears)" in body and "* one" in body
    assert "widget.turn()" in body
    assert "tracking" not in body and "color: red" not in body and "Home | About" not in body
    (long,) = tool_results(events, "long")
    assert len(_text(long)) < 31_000 and long["spill"] is not None  # budgeted, the whole page in the spill
    (bad,) = tool_results(events, "bad")
    assert bad["is_error"] and bad["error"]["code"] == "BAD_URL"
    assert [r.path for r in server.requests] == ["/docs/widgets", "/big.txt"]


async def test_private_addresses_are_refused_by_default(server: FakeProvider, tmp_path: Path) -> None:
    steps = [call("fetch_url", "local", url=f"{server.url}/secret"), {"text": "done"}]
    model = write_script(tmp_path / "script.json", steps)
    async with run_editor(tmp_path, model, EditorClient([])) as editor:
        session = (await editor.new_session()).session_id
        await editor.conn.set_session_mode(session_id=session, mode_id="bypass")
        assert (await editor.prompt(session, "fetch")).stop_reason == "end_turn"
    (local,) = tool_results(read_log(tmp_path, session), "local")
    assert local["is_error"] and local["error"]["code"] == "PRIVATE_ADDRESS"
    assert "127.0.0.1" in _text(local)
    assert server.requests == []


async def test_an_always_answer_covers_one_domain(server: FakeProvider, tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    write_config(tmp_path, "tools: {fetch_private: true}\n")
    page = Reply(body="plain page\n", headers={"Content-Type": "text/plain"}, repeat=True)
    server.script(page)
    port = server.url.rsplit(":", 1)[1]
    steps = [
        call("fetch_url", "first", url=f"http://127.0.0.1:{port}/a"),
        call("fetch_url", "same", url=f"http://127.0.0.1:{port}/b"),
        call("fetch_url", "other", url=f"http://localhost:{port}/c"),
        {"text": "done"},
    ]
    model = write_script(tmp_path / "script.json", steps)
    client = EditorClient(["allow_always", "reject_once"])
    async with run_editor(tmp_path, model, client) as editor:
        session = (await editor.new_session()).session_id
        assert (await editor.prompt(session, "fetch")).stop_reason == "end_turn"
    asked = client.permissions()
    assert [p["toolCall"]["toolCallId"] for p in asked] == ["first", "other"]  # "same" was covered
    labels = [option["name"] for option in asked[0]["options"]]
    assert "Always allow fetch_url for `127.0.0.1`" in labels
    events = read_log(tmp_path, session)
    assert not tool_results(events, "same")[0]["is_error"]
    (other,) = tool_results(events, "other")
    assert other["is_error"] and other["error"]["code"] == "PERMISSION_DENIED"
    assert [r.path for r in server.requests] == ["/a", "/b"]
