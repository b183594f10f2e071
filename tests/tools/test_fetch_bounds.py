"""fetch_url cannot hold the daemon (issue 34 item 4): the HTML conversion runs in a worker process under a
deadline and a memory cap with a plain-text fallback, compressed bodies are decoded with a bound on the decoded
size, a cancelled fetch kills its worker at once, and every failure says what to do."""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import anyio
import pytest

from dsh.tools import _fetch
from dsh.tools._errors import ToolError
from dsh.tools._fetch import MAX_BYTES, fetch_markdown
from tests.support.provider_server import FakeProvider, Reply, serve

HTML = {"Content-Type": "text/html; charset=utf-8"}


@pytest.fixture
def server() -> Iterator[FakeProvider]:
    with serve() as fake:
        yield fake


def workers() -> list[int]:
    """The html worker processes that are children of this test process."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes()
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if b"dsh.tools._htmlworker" in argv and int(ppid) == os.getpid() and state != "Z":
            found.append(int(pid))
    return found


async def test_a_small_page_is_markdown_without_a_note(server: FakeProvider) -> None:
    server.script(Reply(body="<html><body><h1>Title</h1><p>Some <b>bold</b> text</p></body></html>", headers=HTML))
    with anyio.fail_after(60):
        outcome = await fetch_markdown(f"{server.url}/p", allow_private=True)
    assert "# Title" in outcome.text and "**bold**" in outcome.text
    assert "plain text" not in outcome.text


async def test_html_nested_too_deeply_comes_back_as_plain_text_with_a_note(server: FakeProvider) -> None:
    deep = "<div>" * 2000 + "deep words" + "</div>" * 2000
    server.script(Reply(body=f"<html><body>{deep}</body></html>", headers=HTML))
    with anyio.fail_after(60):
        outcome = await fetch_markdown(f"{server.url}/deep", allow_private=True)
    assert outcome.text.startswith("[it is nested too deeply to convert to Markdown: this is the page's plain text]")
    assert "deep words" in outcome.text
    assert "maximum recursion" not in outcome.text


async def test_a_conversion_past_its_soft_deadline_falls_back_to_plain_text(
    server: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_fetch, "CONVERT_SOFT", 0.2)
    monkeypatch.setattr(_fetch, "MARKDOWN_MAX_CHARS", 1 << 30)
    page = "<html><body>" + "<p><b>w</b> <i>x</i></p>" * 60_000 + "<p>the end</p></body></html>"
    server.script(Reply(body=page, headers=HTML))
    with anyio.fail_after(60):
        outcome = await fetch_markdown(f"{server.url}/big", allow_private=True)
    assert outcome.text.startswith("[converting it to Markdown took over 0 s: this is the page's plain text]")
    assert outcome.text.rstrip().endswith("the end")


async def test_a_page_over_the_markdown_size_is_its_plain_text_with_a_note(server: FakeProvider) -> None:
    page = "<html><body><script>var x = 1;</script>" + "<p>w &amp; x</p>" * 100_000 + "<p>the end</p></body></html>"
    server.script(Reply(body=page, headers=HTML))
    with anyio.fail_after(60):
        outcome = await fetch_markdown(f"{server.url}/big", allow_private=True)
    assert outcome.text.startswith(
        "[the page is over 1 MB, too large to convert to Markdown in time: this is the page's plain text]"
    )
    assert "w & x\n\nw & x" in outcome.text and outcome.text.endswith("the end")
    assert "var x" not in outcome.text


async def test_a_conversion_past_its_hard_deadline_is_killed_and_the_error_says_what_to_do(
    server: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_fetch, "CONVERT_SOFT", 600.0)
    monkeypatch.setattr(_fetch, "CONVERT_TIMEOUT", 0.5)
    monkeypatch.setattr(_fetch, "MARKDOWN_MAX_CHARS", 1 << 30)
    page = "<html><body>" + "<p><b>w</b> <i>x</i></p>" * 60_000 + "</body></html>"
    server.script(Reply(body=page, headers=HTML))
    with anyio.fail_after(60), pytest.raises(ToolError) as caught:
        await fetch_markdown(f"{server.url}/big", allow_private=True)
    assert caught.value.code == "FETCH_TIMEOUT"
    assert "timed out after 0 s: the page is too large or too complex to convert; try a smaller page" in str(
        caught.value
    )
    assert workers() == []


async def test_a_cancelled_fetch_kills_its_worker_at_once(
    server: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_fetch, "CONVERT_SOFT", 600.0)
    page = "<html><body>" + "<p><b>w</b> <i>x</i></p>" * 100_000 + "</body></html>"
    server.script(Reply(body=page, headers=HTML))
    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            group.start_soon(partial(fetch_markdown, f"{server.url}/big", allow_private=True))
            while not workers():  # noqa: ASYNC110 - polling /proc: no event says a process started
                await anyio.sleep(0.01)
            group.cancel_scope.cancel()
    assert workers() == []  # killed and reaped before the cancelled call returned


async def test_a_gzip_bomb_is_decoded_only_up_to_the_size_cap(server: FakeProvider) -> None:
    bomb = gzip.compress(b"a" * (64 * 1024 * 1024), compresslevel=1)  # 64 MiB of text in under 1 MB
    server.script(Reply(body=bomb, headers={"Content-Type": "text/plain", "Content-Encoding": "gzip"}))
    with anyio.fail_after(60):
        outcome = await fetch_markdown(f"{server.url}/bomb", allow_private=True)
    assert outcome.cut and len(outcome.text) == MAX_BYTES


async def test_an_unknown_encoding_is_refused_with_what_to_do(server: FakeProvider) -> None:
    server.script(Reply(body=b"\x00\x01", headers={"Content-Type": "text/plain", "Content-Encoding": "zstd"}))
    with anyio.fail_after(60), pytest.raises(ToolError) as caught:
        await fetch_markdown(f"{server.url}/z", allow_private=True)
    assert "zstd-encoded, which fetch_url does not decode" in str(caught.value)


async def test_a_slow_server_times_out_with_a_message_that_says_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_fetch, "TIMEOUT", 0.5)
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)

    async def silent(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            await anyio.sleep(30)  # accepts and never answers

    async with listener, anyio.create_task_group() as group:
        group.start_soon(listener.serve, silent)
        with anyio.fail_after(30), pytest.raises(ToolError) as caught:
            await fetch_markdown(f"http://127.0.0.1:{port}/slow", allow_private=True)
        group.cancel_scope.cancel()
    assert caught.value.code == "FETCH_TIMEOUT"
    assert "timed out after 0 s: the server is slow or the page is very large; try again later" in str(caught.value)
    assert "TimeoutError" not in str(caught.value)
