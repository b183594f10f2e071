"""The HTTP side of the remote providers: one lazily made client per provider, retries, SSE, abort, errors.

Both wire formats (:mod:`dsh.providers.openai`, :mod:`dsh.providers.anthropic`) call :meth:`HttpProvider.open`,
which returns an :class:`SseStream` of server-sent events, then read it with :meth:`SseStream.next`.

Guarantees:

* **Cheap start-up.** httpx and httpx-sse are imported inside the functions that run on the first model call;
  importing this module imports neither.
* **One client per provider.** :class:`HttpProvider` makes its ``httpx.AsyncClient`` on the first call (connect
  timeout ``connect_timeout``, read timeout ``timeout``) and reuses it; :meth:`HttpProvider.aclose` closes it (the
  plugin does so when it is disposed). Nothing is shared between providers or between applications.
* **Settings are read at call time.** The key (``api_key``, else the variable named by ``api_key_env``) and the
  base URL (the variable named by ``base_url_env`` when set, else ``base_url``, else the type's default: its
  variable ``OPENAI_BASE_URL``/``ANTHROPIC_BASE_URL`` when set, else the public API) are read for every call, so a
  changed environment needs no restart. A missing required key fails before any connection is made, with
  ``LlmError`` code ``MISSING_API_KEY`` naming the variable to set.
* **Retries only before the first streamed byte.** 429, 5xx and connection errors (refused, reset, timed out,
  closed before the body started) are retried at most ``retries`` times, waiting ``backoff * 2**attempt`` halved
  plus up to as much random jitter, or exactly what ``Retry-After`` says (delta-seconds or an HTTP date) when the
  server says it (up to :data:`MAX_RETRY_AFTER`; a longer wait is not taken and the error is returned at once).
  Once a byte of the response body has arrived, a failure is an error, never a retry: nothing the model said is
  ever repeated or lost silently.
* **Errors say what to fix.** Every failure is an ``LlmError`` naming the provider: other 4xx carry the provider's
  own message (``UNKNOWN_MODEL`` when the provider says the model does not exist, else ``HTTP_<status>``); an
  unreachable server (refused, DNS, connect timeout) is ``PROVIDER_UNREACHABLE`` naming the base URL; 429 after the
  retries is ``RATE_LIMITED``; a broken stream is ``STREAM_INTERRUPTED``; a stalled one ``TIMEOUT``.
* **Keys never leak.** Keys are sent only in request headers; they are never logged (nothing here logs headers or
  bodies), and any occurrence of the key in a message built from a provider's answer is masked as ``***``.
* **Abort at once.** The request's ``signal`` cancels whatever is awaited (connecting, a retry wait, the next
  event) through a callback; the response is then closed, which closes the connection (an unfinished HTTP/1.1
  response is never returned to the pool), so the server sees the hang-up at once. An aborted call reports
  ``None``/``aborted`` and raises nothing.
"""

from __future__ import annotations

import json
import os
import random
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

import anyio

from dsh._log import get_logger
from dsh.errors import LlmError
from dsh.providers._settings import address_problem

if TYPE_CHECKING:
    import httpx
    from httpx_sse import ServerSentEvent

    from dsh.kernel import CancelToken
    from dsh.providers._settings import ProviderSettings

__all__ = [
    "MAX_RETRY_AFTER",
    "TYPE_BASE_URLS",
    "Endpoint",
    "HttpProvider",
    "SseEvent",
    "SseStream",
    "mask",
    "parse_retry_after",
]

MAX_RETRY_AFTER = 60.0
"""The longest ``Retry-After`` honoured, in seconds: a longer one fails the call at once with the server's wait."""
TYPE_BASE_URLS: dict[str, tuple[str, str]] = {
    "openai": ("OPENAI_BASE_URL", "https://api.openai.com/v1"),
    "anthropic": ("ANTHROPIC_BASE_URL", "https://api.anthropic.com"),
}
"""Per wire type, for a provider configured without ``base_url``: the variable that sets it, and the public API."""
_ERROR_BODY_LIMIT = 64 * 1024
_T = TypeVar("_T")
log = get_logger("dsh.providers")


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where one call goes and with which key (resolved from the settings and the environment at call time)."""

    base_url: str
    api_key: str | None


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One server-sent event: its ``event`` field (``message`` when absent) and its ``data``."""

    event: str
    data: str


def mask(text: str, secret: str | None) -> str:
    """*text* with every occurrence of *secret* replaced by ``***``."""
    return text.replace(secret, "***") if secret else text


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` value (delta-seconds, also fractional, or an HTTP date); ``None``
    when absent or unreadable. A date in the past means no wait (0)."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        from email.utils import parsedate_to_datetime

        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if seconds != seconds:  # NaN
        return None
    return max(0.0, seconds)


def _provider_message(body: str) -> tuple[str, str | None]:
    """The human message and the machine code (or type) in a provider's error body, whatever its dialect."""
    try:
        parsed: Any = json.loads(body)
    except ValueError:
        return body.strip()[:500], None
    error = parsed.get("error", parsed) if isinstance(parsed, dict) else parsed
    if isinstance(error, str):
        return error, None
    if isinstance(error, dict):
        message = error.get("message") or error.get("detail") or error.get("msg")
        code = error.get("code") or error.get("type")
        if isinstance(message, str) and message:
            return message, code if isinstance(code, str) else None
    return body.strip()[:500], None


_MODEL_MISSING = re.compile(r"model.*(not[ _-]?found|does not exist|unknown|not available|no such)", re.I | re.S)


def _is_unknown_model(status: int, message: str, code: str | None) -> bool:
    if code in ("model_not_found", "ModelNotFound"):
        return True
    if status == 404 and code == "not_found_error" and message.lower().startswith("model"):
        return True
    return status in (400, 404) and bool(_MODEL_MISSING.search(message))


class SseStream:
    """An open event stream. :meth:`next` returns events until the end (``None``); after an abort it returns
    ``None`` and :attr:`aborted` is true. :meth:`aclose` is idempotent and safe in a cancelled scope."""

    def __init__(
        self,
        provider: HttpProvider,
        response: httpx.Response,
        events: AsyncIterator[ServerSentEvent],
        first: SseEvent | None,
        signal: CancelToken | None,
        key: str | None,
    ) -> None:
        self._provider = provider
        self._response = response
        self._events = events
        self._pending = first
        self._signal = signal
        self._key = key
        self._done = first is None
        self.aborted = False

    async def next(self) -> SseEvent | None:
        """The next event; ``None`` at the end of the body or once aborted. A broken stream raises ``LlmError``."""
        import httpx

        if self._pending is not None:
            event, self._pending = self._pending, None
            return event
        if self._done or self.aborted:
            return None
        try:
            outcome = await _abortable(self._signal, self._events.__anext__)
        except StopAsyncIteration:
            self._done = True
            return None
        except httpx.ReadTimeout:
            self._done = True
            raise self._provider.error(
                f"no data for {self._provider.settings.timeout:g} s in the middle of the answer; the server stalled",
                "TIMEOUT",
                self._key,
            ) from None
        except httpx.HTTPError as exc:
            self._done = True
            raise self._provider.error(
                f"the connection broke in the middle of the answer ({_describe(exc)})", "STREAM_INTERRUPTED", self._key
            ) from None
        if isinstance(outcome, _Aborted):
            self.aborted = True
            await self.aclose()
            return None
        return SseEvent(outcome.event or "message", outcome.data)

    async def drain(self, limit: float = 0.2) -> None:
        """Read (and drop) the rest of the body for at most *limit* seconds, so that a finished answer leaves its
        connection reusable (an unfinished response is closed, not pooled). Never raises; abortable."""
        with anyio.move_on_after(limit):
            try:
                while await self.next() is not None:
                    pass
            except LlmError:
                pass

    async def aclose(self) -> None:
        self._done = True
        with anyio.CancelScope(shield=True):
            close = getattr(self._events, "aclose", None)
            try:
                if close is not None:
                    await close()
            except Exception:
                pass
            await self._response.aclose()


class _Aborted:
    pass


_ABORTED = _Aborted()


async def _abortable(signal: CancelToken | None, fn: Callable[[], Awaitable[_T]]) -> _T | _Aborted:
    """Await ``fn()``, cancelled at once when *signal* is aborted (then, or already): returns ``_ABORTED``.

    The cancel scope never spans a ``yield`` of the caller: it is entered and left within this call.
    """
    if signal is None:
        return await fn()
    if signal.aborted:
        return _ABORTED
    with anyio.CancelScope() as scope:
        remove = signal.add_callback(lambda _reason: scope.cancel())
        try:
            result = await fn()
        finally:
            remove()
    if scope.cancelled_caught or signal.aborted:
        return _ABORTED
    return result


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


KEYED_HOSTS = frozenset({"api.openai.com", "api.anthropic.com", "api.deepseek.com"})
"""Public APIs that always need a key, whatever ``key_required`` says."""


class HttpProvider:
    """The transport of one provider (one ``name``, one :class:`ProviderSettings`)."""

    def __init__(self, name: str, settings: ProviderSettings) -> None:
        self.name = name
        self.settings = settings
        self._client: httpx.AsyncClient | None = None

    # -- settings read at call time -------------------------------------------------------------------------

    def _base_url_env(self) -> str | None:
        """The variable that can set the base URL: ``base_url_env``, else the type's own when no ``base_url``."""
        settings = self.settings
        if settings.base_url_env:
            return settings.base_url_env
        return None if settings.base_url else TYPE_BASE_URLS[settings.type][0]

    def endpoint(self) -> Endpoint:
        """The base URL and key for a call now; ``LlmError`` ``MISSING_API_KEY`` when a required key is missing.

        Base URL: the variable named by ``base_url_env`` when set, else ``base_url``; without ``base_url``, the
        type's default (:data:`TYPE_BASE_URLS`: its variable when set, else the public API), for a built-in
        provider only: any other without a ``base_url`` is ``LlmError`` ``BAD_BASE_URL`` and no request is made
        (:func:`~dsh.providers._settings.address_problem`)."""
        settings = self.settings
        problem = address_problem(self.name, settings)
        if problem is not None:  # never another provider's address (the type's variable or public API)
            raise LlmError(f"{self.name}: {problem}", "BAD_BASE_URL")
        env = self._base_url_env()
        base_url = (os.environ.get(env) if env else None) or settings.base_url or TYPE_BASE_URLS[settings.type][1]
        key: str | None = None
        if settings.api_key is not None:
            key = settings.api_key.get_secret_value() or None
        elif settings.api_key_env:
            key = os.environ.get(settings.api_key_env) or None
        if key is None and settings.key_required:
            where = settings.api_key_env or "api_key in the provider's configuration"
            raise LlmError(f"{self.name}: no API key: set {where}", "MISSING_API_KEY")
        return Endpoint(base_url.rstrip("/"), key)

    def missing_key(self) -> str | None:
        """What to set when a required key is missing now (the variable, or ``api_key``); None when none is. A
        provider that takes no key (``key_required: false``, for local servers) still needs one for a public API
        (:data:`KEYED_HOSTS`)."""
        where = self.settings.api_key_env or f"providers.{self.name}.api_key"
        try:
            endpoint = self.endpoint()
        except LlmError as error:
            if error.code == "MISSING_API_KEY":
                return where
            raise
        if endpoint.api_key is None and urlsplit(endpoint.base_url).hostname in KEYED_HOSTS:
            return where
        return None

    def _base_url_hint(self) -> str:
        env = self._base_url_env()
        return f"base_url (or {env})" if env else "base_url"

    def error(self, message: str, code: str, key: str | None) -> LlmError:
        """An ``LlmError`` for this provider, with *key* masked out of the message."""
        return LlmError(mask(f"{self.name}: {message}", key), code)

    # -- the client -----------------------------------------------------------------------------------------

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            import httpx

            settings = self.settings
            self._client = httpx.AsyncClient(timeout=httpx.Timeout(settings.timeout, connect=settings.connect_timeout))
        return self._client

    async def aclose(self) -> None:
        """Close the client (and its connections); the next call makes a new one."""
        client, self._client = self._client, None
        if client is not None:
            with anyio.CancelScope(shield=True):
                await client.aclose()

    # -- one call -------------------------------------------------------------------------------------------

    def _delay(self, attempt: int) -> float:
        full: float = self.settings.backoff * (2**attempt)
        return full / 2 + random.uniform(0, full / 2)

    async def open(
        self,
        endpoint: Endpoint,
        path: str,
        headers: dict[str, str],
        body: dict[str, Any],
        signal: CancelToken | None,
    ) -> SseStream | None:
        """POST *body* (JSON) to ``base_url + path`` and return its open event stream, with retries as in the
        module docstring; ``None`` when *signal* aborted the call first."""
        content = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        outcome = await _abortable(signal, lambda: self._open(endpoint, path, headers, content, signal))
        if isinstance(outcome, _Aborted):
            return None
        if signal is not None and signal.aborted:
            await outcome.aclose()
            return None
        return outcome

    async def _open(
        self, endpoint: Endpoint, path: str, headers: dict[str, str], content: bytes, signal: CancelToken | None
    ) -> SseStream:
        import httpx
        from httpx_sse import EventSource, SSEError

        client = self._http()
        key = endpoint.api_key
        url = endpoint.base_url + path
        all_headers = {
            "content-type": "application/json",
            "accept": "text/event-stream",
            **headers,
            **self.settings.headers,
        }
        attempt = 0
        while True:
            response: httpx.Response | None = None
            try:
                request = client.build_request("POST", url, headers=all_headers, content=content)
                response = await client.send(request, stream=True)
                if response.is_success:
                    events = EventSource(response).aiter_sse()
                    try:
                        first = await events.__anext__()
                    except StopAsyncIteration:
                        return SseStream(self, response, events, None, signal, key)
                    return SseStream(
                        self, response, events, SseEvent(first.event or "message", first.data), signal, key
                    )
                status = response.status_code
                text = await _read_error_body(response)
                retry_after = parse_retry_after(response.headers.get("retry-after"))
                await response.aclose()
                retryable = status == 429 or status >= 500
                if not retryable or attempt >= self.settings.retries:
                    raise self._status_error(status, text, endpoint)
                if retry_after is not None and retry_after > MAX_RETRY_AFTER:
                    raise self._status_error(status, text, endpoint, retry_after)
                delay = retry_after if retry_after is not None else self._delay(attempt)
                log.warning(
                    "model request failed, retrying",
                    provider=self.name,
                    status=status,
                    attempt=attempt + 1,
                    delay=round(delay, 3),
                )
            except SSEError:
                assert response is not None
                text = await _read_error_body(response)
                await response.aclose()
                kind = response.headers.get("content-type", "no content type")
                raise self.error(
                    f"expected an event stream from {url}, got {kind}: {_provider_message(text)[0][:300]}; "
                    f"check the {self._base_url_hint()}",
                    "BAD_RESPONSE",
                    key,
                ) from None
            except (httpx.UnsupportedProtocol, httpx.InvalidURL, httpx.LocalProtocolError) as exc:
                if response is not None:
                    await response.aclose()
                raise self.error(
                    f"bad base URL {endpoint.base_url!r} ({_describe(exc)}); check the {self._base_url_hint()}",
                    "BAD_BASE_URL",
                    key,
                ) from None
            except httpx.TransportError as exc:
                started = response is not None and response.num_bytes_downloaded > 0
                if response is not None:
                    await response.aclose()
                if started:
                    raise self.error(
                        f"the connection broke in the middle of the answer ({_describe(exc)})",
                        "STREAM_INTERRUPTED",
                        key,
                    ) from None
                if attempt >= self.settings.retries:
                    raise self._transport_error(exc, endpoint) from None
                delay = self._delay(attempt)
                log.warning(
                    "model request failed, retrying",
                    provider=self.name,
                    error=type(exc).__name__,
                    attempt=attempt + 1,
                    delay=round(delay, 3),
                )
            except BaseException:
                if response is not None:
                    await _close_quietly(response)
                raise
            await anyio.sleep(delay)
            attempt += 1

    def _transport_error(self, exc: Exception, endpoint: Endpoint) -> LlmError:
        import httpx

        tries = self.settings.retries + 1
        after = f" after {tries} attempts" if tries > 1 else ""
        if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
            return self.error(
                f"cannot reach {endpoint.base_url}{after} ({_describe(exc)}); check the {self._base_url_hint()} "
                "and that the server is running",
                "PROVIDER_UNREACHABLE",
                endpoint.api_key,
            )
        if isinstance(exc, httpx.TimeoutException):
            return self.error(
                f"{endpoint.base_url} did not answer within {self.settings.timeout:g} s{after}",
                "TIMEOUT",
                endpoint.api_key,
            )
        return self.error(
            f"the connection to {endpoint.base_url} failed{after} ({_describe(exc)})",
            "CONNECTION_FAILED",
            endpoint.api_key,
        )

    def _status_error(self, status: int, body: str, endpoint: Endpoint, retry_after: float | None = None) -> LlmError:
        message, code = _provider_message(body)
        said = f": {message}" if message else ""
        key = endpoint.api_key
        if _is_unknown_model(status, message, code):
            return self.error(f"unknown model (HTTP {status}){said}", "UNKNOWN_MODEL", key)
        if status == 413 or code == "context_length_exceeded" or "prompt is too long" in message.lower():
            return self.error(
                f"the request does not fit the model's context window (HTTP {status}){said}",
                "CONTEXT_WINDOW_EXCEEDED",
                key,
            )
        if status == 429:
            wait = f"; the server asks to retry after {retry_after:g} s" if retry_after is not None else ""
            return self.error(f"rate limited (HTTP 429){said}{wait}", "RATE_LIMITED", key)
        hint = ""
        if status in (401, 403):
            # the key that was sent: an inline api_key wins over the variable
            inline = self.settings.api_key is not None
            where = f"providers.{self.name}.api_key" if inline else self.settings.api_key_env or "api_key"
            hint = f"; check {where}"
        elif status == 404:
            hint = f"; check the {self._base_url_hint()} ({endpoint.base_url}) and the model name"
        elif status >= 500:
            tries = self.settings.retries + 1
            hint = f" (after {tries} attempts)" if tries > 1 else ""
        return self.error(f"HTTP {status}{said}{hint}", f"HTTP_{status}", key)


async def _read_error_body(response: httpx.Response) -> str:
    """At most :data:`_ERROR_BODY_LIMIT` bytes of an error body, decoded leniently (empty when it breaks)."""
    import httpx

    parts: list[bytes] = []
    size = 0
    try:
        async for part in response.aiter_bytes():
            parts.append(part)
            size += len(part)
            if size >= _ERROR_BODY_LIMIT:
                break
    except httpx.HTTPError:
        pass
    return b"".join(parts)[:_ERROR_BODY_LIMIT].decode("utf-8", errors="replace")


async def _close_quietly(response: httpx.Response) -> None:
    with anyio.CancelScope(shield=True):
        try:
            await response.aclose()
        except Exception:
            pass
