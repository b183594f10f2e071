"""The shared HTTP behaviour of both providers against a real local server: retries (only before the first
streamed byte), errors that say what to fix, keys that never leak, abort that closes the connection at once,
lazy imports and the plugin's registrations."""

from __future__ import annotations

import itertools
import json
import logging
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from dsh import events as ev
from dsh.errors import LlmError
from dsh.kernel import CancelToken, Context
from dsh.providers._http import parse_retry_after
from dsh.providers._settings import ProviderSettings
from dsh.services.agents import AgentOptions
from dsh.services.llm import GenerateRequest, StreamChunk
from tests.providers._helpers import KEY, anthropic_settings, collect, openai_settings, running, user
from tests.support.provider_server import Event, FakeProvider, Reply
from tests.support.provider_wire import an_text_reply, oa_chunk, oa_text_reply

CLOSE_DEADLINE = 0.1
"""How soon after a cancel the server must see the connection close (seconds)."""


@dataclass(frozen=True)
class Wire:
    name: str
    settings: Callable[..., ProviderSettings]
    path: str
    reply: Callable[..., list[Event]]
    first_events: list[Event]
    """A stream's opening events, with some text (for a stream that then stalls)."""

    @property
    def model(self) -> str:
        return f"{self.name}:test-model"

    def error_body(self, message: str, kind: str = "api_error", code: str | None = None) -> dict[str, Any]:
        if self.name == "anthropic":
            return {"type": "error", "error": {"type": kind, "message": message}}
        error: dict[str, Any] = {"message": message, "type": kind}
        if code is not None:
            error["code"] = code
        return {"error": error}

    def providers(self, url: str, **overrides: Any) -> dict[str, ProviderSettings]:
        return {self.name: self.settings(url, **overrides)}

    def request(self, **fields: Any) -> GenerateRequest:
        return GenerateRequest(model=self.model, messages=[user("hi")], **fields)


OPENAI = Wire(
    "openai",
    openai_settings,
    "/v1/chat/completions",
    oa_text_reply,
    [oa_chunk({"role": "assistant", "content": ""}), oa_chunk({"content": "Thinking slowly"})],
)
ANTHROPIC = Wire(
    "anthropic",
    anthropic_settings,
    "/v1/messages",
    an_text_reply,
    an_text_reply("Thinking slowly")[:4],  # message_start, ping, content_block_start, the delta
)


@pytest.fixture(params=[OPENAI, ANTHROPIC], ids=lambda w: w.name)
def wire(request: pytest.FixtureRequest) -> Wire:
    result: Wire = request.param
    return result


def texts(chunks: list[StreamChunk]) -> str:
    return "".join(c["text"] for c in chunks if c["type"] == "text-delta")


def gaps(server: FakeProvider) -> list[float]:
    times = [r.at for r in server.requests]
    return [b - a for a, b in itertools.pairwise(times)]


async def failing_call(ctx: Context, request: GenerateRequest) -> tuple[list[StreamChunk], LlmError]:
    """Run a call that must fail: the chunks streamed before the failure, and the error."""
    received: list[StreamChunk] = []
    with pytest.raises(LlmError) as caught, anyio.fail_after(10):
        async for chunk in await ctx.llm.stream(request):
            received.append(chunk)  # noqa: PERF401 - keep what came before the failure
    return received, caught.value


def free_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


# -- retries ------------------------------------------------------------------------------------------------------


async def test_429_then_success_waits_what_retry_after_says(server: FakeProvider, wire: Wire) -> None:
    """The backoff alone would wait 2.5-5 s: the 0.2 s measured can only come from ``Retry-After``."""
    server.script(
        Reply(429, body=wire.error_body("slow down", "rate_limit_error"), headers={"Retry-After": "0.2"}),
        Reply(events=wire.reply("ok")),
    )
    async with running(wire.providers(server.url, backoff=5.0)) as ctx:
        chunks = await collect(ctx, wire.request())
    assert texts(chunks) == "ok"
    assert chunks[-1] == {"type": "finish", "reason": {"kind": "stop"}}
    assert len(server.requests) == 2
    assert 0.2 <= gaps(server)[0] < 2.5  # the backoff alone waits 2.5 s at least


async def test_500_forever_is_retried_a_bounded_number_of_times_with_growing_waits(
    server: FakeProvider, wire: Wire
) -> None:
    server.script(Reply(500, body=wire.error_body("boom"), repeat=True))
    async with running(wire.providers(server.url, retries=3, backoff=0.04)) as ctx:
        received, error = await failing_call(ctx, wire.request())
    assert received == []
    assert error.code == "HTTP_500"
    assert "boom" in error.message
    assert error.message.startswith(f"{wire.name}: ")
    assert len(server.requests) == 4
    waits = gaps(server)
    for attempt, wait in enumerate(waits):
        assert wait >= 0.04 * 2**attempt / 2, waits  # backoff * 2**attempt, at least half of it (jitter)


async def test_500_forever_through_an_agent_is_an_error_turn_and_the_loop_goes_on(
    server: FakeProvider, wire: Wire
) -> None:
    server.script(Reply(500, body=wire.error_body("boom")), Reply(500, body=wire.error_body("boom")))
    async with running(wire.providers(server.url, retries=1, backoff=0.01)) as ctx:
        agent = ctx.agent_loop.create("a", AgentOptions(model=wire.model))
        agent.send([{"type": "text", "text": "one"}])
        with anyio.fail_after(10):
            await agent.when_idle()
        server.script(Reply(events=wire.reply("fine")))
        agent.send([{"type": "text", "text": "two"}])
        with anyio.fail_after(10):
            await agent.when_idle()
        events = agent.session.events
    reasons = [e.data["reason"] for e in events if e.type == "turn/end"]
    assert reasons[0]["kind"] == "error"
    assert reasons[0]["code"] == "HTTP_500"
    assert "boom" in reasons[0]["message"]
    assert [e.data["code"] for e in events if e.type == "error"] == ["HTTP_500"]
    assert reasons[1] == {"kind": "completed"}
    assert len(server.requests) == 3


async def test_429_forever_ends_rate_limited(server: FakeProvider, wire: Wire) -> None:
    server.script(Reply(429, body=wire.error_body("too many requests", "rate_limit_error"), repeat=True))
    async with running(wire.providers(server.url, retries=1)) as ctx:
        _, error = await failing_call(ctx, wire.request())
    assert error.code == "RATE_LIMITED"
    assert "too many requests" in error.message
    assert len(server.requests) == 2


async def test_a_retry_after_beyond_the_limit_fails_at_once_saying_so(server: FakeProvider, wire: Wire) -> None:
    server.script(Reply(429, body=wire.error_body("quota"), headers={"Retry-After": "3600"}, repeat=True))
    async with running(wire.providers(server.url)) as ctx:
        with anyio.fail_after(2):
            _, error = await failing_call(ctx, wire.request())
    assert error.code == "RATE_LIMITED"
    assert "3600" in error.message
    assert len(server.requests) == 1


async def test_a_disconnect_mid_stream_is_an_error_and_never_retried(server: FakeProvider, wire: Wire) -> None:
    events = wire.reply("one ", "two ", "three")
    server.script(Reply(events=events, disconnect_after=len(events) - 3), Reply(events=wire.reply("again")))
    async with running(wire.providers(server.url)) as ctx:
        received, error = await failing_call(ctx, wire.request())
    assert error.code == "STREAM_INTERRUPTED"
    assert texts(received).startswith("one ")
    assert not any(c["type"] == "finish" for c in received)
    assert len(server.requests) == 1


async def test_a_disconnect_after_some_bytes_but_before_a_whole_event_is_not_retried(
    server: FakeProvider, wire: Wire
) -> None:
    """The line is the first streamed byte, not the first complete event."""
    server.script(Reply(events=[Event(b'data: {"type": "mess')], disconnect_after=1), Reply(events=wire.reply("no")))
    async with running(wire.providers(server.url)) as ctx:
        received, error = await failing_call(ctx, wire.request())
    assert received == []
    assert error.code == "STREAM_INTERRUPTED"
    assert len(server.requests) == 1


async def test_a_disconnect_before_the_first_byte_is_retried(server: FakeProvider, wire: Wire) -> None:
    server.script(Reply(events=wire.reply("lost"), disconnect_after=0), Reply(events=wire.reply("second try")))
    async with running(wire.providers(server.url)) as ctx:
        chunks = await collect(ctx, wire.request())
    assert texts(chunks) == "second try"
    assert len(server.requests) == 2


# -- errors that say what to fix -------------------------------------------------------------------------------------


async def test_a_refused_connection_names_the_base_url_after_the_retries(wire: Wire) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    settings = wire.settings(url, retries=1)
    async with running({wire.name: settings}) as ctx:
        _, error = await failing_call(ctx, wire.request())
    assert error.code == "PROVIDER_UNREACHABLE"
    assert str(settings.base_url) in error.message
    assert "2 attempts" in error.message


async def test_an_unknown_model_carries_the_providers_message(server: FakeProvider, wire: Wire) -> None:
    if wire.name == "anthropic":
        body = wire.error_body("model: claude-nope", "not_found_error")
    else:
        body = wire.error_body("The model `nope` does not exist", "invalid_request_error", "model_not_found")
    server.script(Reply(404, body=body))
    async with running(wire.providers(server.url)) as ctx:
        _, error = await failing_call(ctx, wire.request())
    assert error.code == "UNKNOWN_MODEL"
    assert ("claude-nope" if wire.name == "anthropic" else "The model `nope` does not exist") in error.message
    assert len(server.requests) == 1


async def test_a_404_that_is_not_about_a_model_points_at_the_base_url(server: FakeProvider, wire: Wire) -> None:
    server.script(Reply(404, body={"detail": "Not Found"}))
    async with running(wire.providers(server.url)) as ctx:
        _, error = await failing_call(ctx, wire.request())
    assert error.code == "HTTP_404"
    assert "Not Found" in error.message
    assert "base_url" in error.message


async def test_a_400_is_not_retried_and_carries_the_providers_message(server: FakeProvider, wire: Wire) -> None:
    server.script(Reply(400, body=wire.error_body("messages: field required", "invalid_request_error")))
    async with running(wire.providers(server.url)) as ctx:
        _, error = await failing_call(ctx, wire.request())
    assert error.code == "HTTP_400"
    assert "messages: field required" in error.message
    assert len(server.requests) == 1


async def test_a_non_stream_answer_is_a_clear_error(server: FakeProvider, wire: Wire) -> None:
    server.script(Reply(200, body="<html>captive portal</html>"))
    async with running(wire.providers(server.url)) as ctx:
        _, error = await failing_call(ctx, wire.request())
    assert error.code == "BAD_RESPONSE"
    assert "captive portal" in error.message


@pytest.mark.parametrize(
    ("provider", "variable"), [("deepseek", "DEEPSEEK_API_KEY"), ("anthropic", "ANTHROPIC_API_KEY")]
)
async def test_a_missing_key_names_the_variable_to_set(
    provider: str, variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The built-ins, unconfigured: the error comes before any connection (their public URLs are never tried)."""
    monkeypatch.delenv(variable, raising=False)
    async with running(None) as ctx:
        _, error = await failing_call(ctx, GenerateRequest(model=f"{provider}:some-model", messages=[user("hi")]))
        agent = ctx.agent_loop.create("a", AgentOptions(model=f"{provider}:some-model"))
        agent.send([{"type": "text", "text": "hi"}])
        with anyio.fail_after(5):
            await agent.when_idle()
        reasons = [e.data["reason"] for e in agent.session.events if e.type == "turn/end"]
    assert error.code == "MISSING_API_KEY"
    assert f"set {variable}" in error.message
    assert reasons == [{"kind": "error", "message": error.message, "code": "MISSING_API_KEY"}]


async def test_key_and_base_url_are_read_from_the_environment_at_call_time(
    server: FakeProvider, wire: Wire, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DSH_TEST_KEY", raising=False)
    monkeypatch.delenv("DSH_TEST_BASE_URL", raising=False)
    settings = wire.settings(
        f"http://127.0.0.1:{free_port()}",
        api_key=None,
        api_key_env="DSH_TEST_KEY",
        base_url_env="DSH_TEST_BASE_URL",
        retries=0,
    )
    server.script(Reply(events=wire.reply("ok")))
    async with running({wire.name: settings}) as ctx:
        _, error = await failing_call(ctx, wire.request())
        assert error.code == "MISSING_API_KEY"
        assert "set DSH_TEST_KEY" in error.message
        monkeypatch.setenv("DSH_TEST_KEY", "sk-from-env")
        monkeypatch.setenv("DSH_TEST_BASE_URL", server.url + ("/v1" if wire.name == "openai" else ""))
        chunks = await collect(ctx, wire.request())
    assert texts(chunks) == "ok"
    headers = server.requests[0].headers
    assert server.requests[0].path == wire.path
    if wire.name == "openai":
        assert headers["authorization"] == "Bearer sk-from-env"
    else:
        assert headers["x-api-key"] == "sk-from-env"


async def test_a_provider_without_base_url_uses_its_types_variable(
    server: FakeProvider, wire: Wire, monkeypatch: pytest.MonkeyPatch
) -> None:
    variable = "OPENAI_BASE_URL" if wire.name == "openai" else "ANTHROPIC_BASE_URL"
    monkeypatch.setenv(variable, server.url + ("/v1" if wire.name == "openai" else ""))
    server.script(Reply(events=wire.reply("ok")))
    settings = ProviderSettings(type=wire.name, api_key=KEY)  # type: ignore[arg-type]
    async with running({"mine": settings}) as ctx:
        chunks = await collect(ctx, GenerateRequest(model="mine:m", messages=[user("hi")]))
    assert texts(chunks) == "ok"
    assert server.requests[0].path == wire.path


async def test_the_key_never_appears_in_logs_or_errors(
    server: FakeProvider, wire: Wire, caplog: pytest.LogCaptureFixture
) -> None:
    """A retried call (which logs) and a 401 whose message echoes the key, with every logger at DEBUG."""
    caplog.set_level(logging.DEBUG)
    server.script(
        Reply(503, body=wire.error_body("busy")),
        Reply(events=wire.reply("ok")),
        Reply(401, body=wire.error_body(f"Incorrect API key provided: {KEY}", "authentication_error")),
    )
    with capture_logs() as logs:
        async with running(wire.providers(server.url)) as ctx:
            await collect(ctx, wire.request())
            _, error = await failing_call(ctx, wire.request())
    assert any(entry["event"] == "model request failed, retrying" for entry in logs), "the capture saw nothing"
    assert KEY not in json.dumps(logs, default=str)
    assert KEY not in caplog.text
    assert error.code == "HTTP_401"
    assert KEY not in error.message
    assert "Incorrect API key provided: ***" in error.message
    assert error.message.endswith(f"; check providers.{wire.name}.api_key")  # the inline key it sent (issue 43)


# -- abort ----------------------------------------------------------------------------------------------------------


async def test_a_slow_stream_cancelled_through_the_agent_closes_the_connection_at_once(
    server: FakeProvider, wire: Wire
) -> None:
    server.script(Reply(events=wire.first_events, hang=True))
    async with running(wire.providers(server.url)) as ctx:
        streaming = anyio.Event()

        def on_chunk(agent: object, turn: int, step: int, chunk: StreamChunk) -> None:
            if chunk["type"] == "text-delta":
                streaming.set()

        ctx.on(ev.AGENT_STREAM_CHUNK, on_chunk)
        agent = ctx.agent_loop.create("a", AgentOptions(model=wire.model))
        agent.send([{"type": "text", "text": "go slowly"}])
        with anyio.fail_after(5):
            await streaming.wait()
        cancelled_at = time.monotonic()
        agent.cancel()
        closed_at = await server.wait_closed(server.requests[0].connection)
        with anyio.fail_after(5):
            await agent.when_idle()
        reasons = [e.data["reason"] for e in agent.session.events if e.type == "turn/end"]
    assert closed_at - cancelled_at < CLOSE_DEADLINE
    assert reasons == [{"kind": "aborted", "reason": "cancelled"}]
    assert len(server.requests) == 1


async def test_aborting_the_signal_ends_a_direct_stream_with_aborted_and_closes_the_connection(
    server: FakeProvider, wire: Wire
) -> None:
    """Without the loop's own cancel scope around it: the adapter's signal callback alone does it."""
    server.script(Reply(events=wire.first_events, hang=True))
    signal = CancelToken()
    received: list[StreamChunk] = []
    aborted_at = 0.0
    async with running(wire.providers(server.url)) as ctx:
        with anyio.fail_after(5):
            async for chunk in await ctx.llm.stream(wire.request(signal=signal)):
                received.append(chunk)
                if chunk["type"] == "text-delta" and not signal.aborted:
                    aborted_at = time.monotonic()
                    signal.abort("user")
        closed_at = await server.wait_closed(server.requests[0].connection)
    assert closed_at - aborted_at < CLOSE_DEADLINE
    assert received == [
        {"type": "text-delta", "text": "Thinking slowly"},
        {"type": "finish", "reason": {"kind": "aborted"}},
    ]


async def test_aborting_during_a_retry_wait_ends_at_once(server: FakeProvider, wire: Wire) -> None:
    server.script(Reply(503, body=wire.error_body("busy"), headers={"Retry-After": "30"}))
    signal = CancelToken()
    received: list[StreamChunk] = []
    async with running(wire.providers(server.url)) as ctx:

        async def call() -> None:
            received.extend(await collect(ctx, wire.request(signal=signal)))

        with anyio.fail_after(5):
            async with anyio.create_task_group() as group:
                group.start_soon(call)
                await server.wait_requests(1)
                signal.abort()
    assert received == [{"type": "finish", "reason": {"kind": "aborted"}}]
    assert len(server.requests) == 1


async def test_an_already_aborted_signal_makes_no_request(server: FakeProvider, wire: Wire) -> None:
    signal = CancelToken()
    signal.abort()
    async with running(wire.providers(server.url)) as ctx:
        chunks = await collect(ctx, wire.request(signal=signal))
    assert chunks == [{"type": "finish", "reason": {"kind": "aborted"}}]
    assert server.requests == []


async def test_disposing_the_plugin_closes_the_client_and_its_connections(server: FakeProvider, wire: Wire) -> None:
    server.script(Reply(events=wire.reply("ok")))
    async with running(wire.providers(server.url)) as ctx:
        await collect(ctx, wire.request())
        assert server.closed_at(server.requests[0].connection) is None, "kept alive while the plugin lives"
    await server.wait_closed(server.requests[0].connection, within=2)


# -- plugin registrations, lazy import, Retry-After parsing ---------------------------------------------------------


async def test_the_plugin_serves_every_provider_and_publishes_context_windows(server: FakeProvider) -> None:
    providers = {
        "local": openai_settings(server.url, context_windows={"llama3:8b": 8192}),
        "claude": anthropic_settings(server.url, context_windows={"claude-test": 200_000}),
    }
    async with running(providers) as ctx:
        assert {"openai:*", "deepseek:*", "anthropic:*", "local:*", "claude:*"} <= set(ctx.llm.models())
        assert ctx.llm.model_info("local:llama3:8b").context_window == 8192
        assert ctx.llm.model_info("claude:claude-test").context_window == 200_000
        assert ctx.llm.model_info("deepseek:deepseek-chat").context_window == 128_000
        server.script(Reply(events=an_text_reply("from claude")))
        chunks = await collect(ctx, GenerateRequest(model="claude:claude-test", messages=[user("hi")]))
    assert texts(chunks) == "from claude"
    assert server.requests[0].path == "/v1/messages"


def test_httpx_is_imported_on_the_first_model_call_not_before() -> None:
    code = f"""
import sys
import anyio
import dsh.providers.remote
assert "httpx" not in sys.modules, "import"

async def main():
    from dsh.app import load_core
    from dsh.kernel import App
    from dsh.services.llm import GenerateRequest
    from dsh.providers._settings import ProviderSettings
    providers = {{"x": ProviderSettings(base_url="http://127.0.0.1:{free_port()}", retries=0, key_required=False)}}
    async with App() as app:
        load_core(app.ctx, providers=providers)
        assert "httpx" not in sys.modules, "load_core"
        try:
            async for _ in await app.ctx.llm.stream(GenerateRequest(model="x:m", messages=[])):
                pass
        except Exception as exc:
            print(getattr(exc, "code", exc))
        print("httpx" in sys.modules, "httpx_sse" in sys.modules)

anyio.run(main)
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["PROVIDER_UNREACHABLE", "True True"]


def test_retry_after_accepts_seconds_and_http_dates() -> None:
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC).timestamp()
    later = format_datetime(datetime(2025, 1, 1, 12, 0, 10, tzinfo=UTC), usegmt=True)
    earlier = format_datetime(datetime(2025, 1, 1, 11, 0, 0, tzinfo=UTC), usegmt=True)
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after(" 0.25 ") == 0.25
    assert parse_retry_after(later, now=now) == 10.0
    assert parse_retry_after(earlier, now=now) == 0.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None
    assert parse_retry_after("-3") == 0.0
