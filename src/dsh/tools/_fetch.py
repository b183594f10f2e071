"""``fetch_url``: an HTTP(S) GET of a page, as Markdown, for documentation the user or the project points to.

Guarantees:

* Only ``http`` and ``https``; at most :data:`MAX_REDIRECTS` redirects, each hop checked like the first; at most
  :data:`MAX_BYTES` of body (more is cut and the result says so); :data:`TIMEOUT` seconds in all.
* Private, loopback, link-local, multicast and reserved addresses are refused (the host is resolved and every
  address it resolves to must be public) unless the configuration allows them (``tools.fetch_private: true``):
  a model must not be able to reach the user's router, a cloud metadata endpoint or a service on localhost
  by being told a URL. Known limit: the request resolves the name again, so a DNS answer that changes between
  the check and the request (rebinding) is not caught.
* HTML is converted to Markdown by :mod:`markdownify` (scripts, styles and navigation dropped) in a separate
  process (:mod:`dsh.tools._htmlworker`, issue 34): never in the daemon, at most :data:`CONVERT_SOFT` seconds
  and :data:`CONVERT_MEMORY_MIB` MiB for the Markdown (and only for pages up to :data:`MARKDOWN_MAX_CHARS`),
  else the page's plain text with a note saying why; the
  process is killed at :data:`CONVERT_TIMEOUT` seconds and at once when the call is cancelled. Other text
  types (plain text, Markdown, JSON, XML, CSV) come as they are; anything else is refused with its type and
  size. The result is budgeted like any other (the full text spilled to a file when it is long).
* Compressed bodies (``gzip``, ``deflate``: the only encodings asked for) are decoded here in steps of at most
  :data:`DECODE_STEP` bytes, and no more than :data:`MAX_BYTES` decoded bytes are kept: a small page that
  inflates to gigabytes costs no more than a 5 MB one. Another encoding is refused.
* Every failure says what to do next; a deadline is "timed out after N s: …", never a bare exception name.
* No cookies, no credentials, no proxy settings from the environment are used (``trust_env=False``): the
  request carries nothing of the user's.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

from dsh.tools._errors import ToolError

__all__ = ["MAX_BYTES", "FetchOutcome", "domain_of", "fetch_domain", "fetch_markdown"]

MAX_BYTES = 5 * 1024 * 1024
MAX_REDIRECTS = 5
TIMEOUT = 30.0
"""Seconds for the download (every hop); the conversion has its own deadline."""
CONVERT_SOFT = 10.0
CONVERT_TIMEOUT = 30.0
CONVERT_MEMORY_MIB = 1536
MARKDOWN_MAX_CHARS = 1 << 20
"""A larger page is given as plain text at once: Markdown conversion grows faster than the page (5 MB took
over 120 s), so it could never finish in time."""
DECODE_STEP = 256 * 1024
USER_AGENT = "dsh-fetch/1 (+https://github.com/; a coding agent reading documentation)"

_TEXT_TYPES = (
    "text/",
    "application/json",
    "application/xml",
    "application/xhtml+xml",
    "application/javascript",
    "application/x-yaml",
    "application/yaml",
    "application/toml",
)


@dataclass(frozen=True, slots=True)
class FetchOutcome:
    url: str
    """The final URL (after redirects)."""
    status: int
    content_type: str
    text: str
    cut: bool


def domain_of(url: str) -> str:
    """The host of *url*, lower-case (what a per-domain permission is about); empty when there is none."""
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""


def fetch_domain(arguments: Any) -> str | None:
    """The host a ``fetch_url`` call asks about (``meta["domain"]``: what a per-domain permission decides
    on), or None when the arguments name none."""
    url = arguments.get("url") if isinstance(arguments, dict) else None
    return (domain_of(url) or None) if isinstance(url, str) else None


def _check_url(url: str) -> str:
    try:
        parts = urlsplit(url)
    except ValueError:
        raise ToolError(f"not a valid URL: {url!r}", "BAD_URL") from None
    if parts.scheme not in ("http", "https"):
        raise ToolError(f"only http and https URLs can be fetched, not {parts.scheme or 'a relative URL'!r}", "BAD_URL")
    if not parts.hostname:
        raise ToolError(f"the URL {url!r} has no host", "BAD_URL")
    if parts.username or parts.password:
        raise ToolError("URLs with credentials in them are not fetched", "BAD_URL")
    return parts.hostname


def _public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not (
        ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
        or not ip.is_global
    )


async def _check_host(host: str, port: int, allow_private: bool) -> None:
    import socket

    import anyio

    if allow_private:
        return
    try:
        infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise ToolError(f"cannot resolve {host}: {exc}", "FETCH_FAILED") from None
    addresses = {str(info[4][0]) for info in infos}
    private = sorted(address for address in addresses if not _public(address))
    if private:
        raise ToolError(
            f"{host} resolves to a private or local address ({', '.join(private)}): fetch_url reaches only the "
            "public internet (the configuration can allow private addresses: tools.fetch_private)",
            "PRIVATE_ADDRESS",
        )


def _to_markdown(html: str) -> str:
    from markdownify import markdownify

    text: str = markdownify(html, heading_style="ATX", strip=["script", "style", "noscript", "iframe", "svg"])
    lines = [line.rstrip() for line in text.splitlines()]
    out: list[str] = []
    for line in lines:  # collapse runs of blank lines
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip()


def _strip_chrome(html: str) -> str:
    """The page without what is never content (scripts, styles, navigation, headers and footers)."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    for tag in soup(["script", "style", "noscript", "template", "nav", "footer", "iframe", "svg", "form"]):
        tag.decompose()
    main = soup.find("main") or soup.find("article") or soup.body or soup
    title = soup.title.string.strip() if soup.title and soup.title.string else ""
    body = str(main)
    return f"<h1>{title}</h1>{body}" if title and title not in main.get_text()[:200] else body


def html_to_markdown(html: str) -> str:
    """The page as Markdown (chrome stripped). CPU- and memory-heavy on large pages: the daemon runs it only
    in :mod:`dsh.tools._htmlworker`."""
    return _to_markdown(_strip_chrome(html))


class _Decoder:
    """``Content-Encoding`` undone in bounded steps (see the module docstring)."""

    def __init__(self, encoding: str) -> None:
        import zlib

        encoding = encoding.strip().lower()
        if encoding in ("", "identity"):
            self._inflate = None
        elif encoding in ("gzip", "x-gzip", "deflate"):
            self._inflate = zlib.decompressobj(47 if encoding != "deflate" else 15)
        else:
            raise ToolError(
                f"the server sent the page {encoding}-encoded, which fetch_url does not decode (it asks for gzip "
                "or deflate): try another URL for the same content",
                "FETCH_FAILED",
            )

    def feed(self, data: bytes, room: int) -> bytes:
        """At most *room* decoded bytes of *data* (what does not fit is dropped: the body is cut there)."""
        if self._inflate is None:
            return data[:room]
        out = bytearray()
        pending = data
        while pending and len(out) < room:
            step = self._inflate.decompress(pending, min(DECODE_STEP, room - len(out)))
            out += step
            pending = self._inflate.unconsumed_tail
            if not step and not pending:
                break
        return bytes(out)


async def _convert(raw: str, url: str) -> tuple[str, str]:
    """The page as Markdown, or its plain text and a note saying why (see the module docstring)."""
    import orjson

    from dsh.tools._offload import WorkerFailed, run_worker

    try:
        out = await run_worker(
            "dsh.tools._htmlworker",
            raw.encode("utf-8", "surrogatepass"),
            timeout=CONVERT_TIMEOUT,
            arguments=(str(CONVERT_SOFT), str(CONVERT_MEMORY_MIB), str(MARKDOWN_MAX_CHARS)),
        )
        result = orjson.loads(out)
    except WorkerFailed as exc:
        if exc.timed_out:
            raise ToolError(
                f"converting {url} timed out after {CONVERT_TIMEOUT:.0f} s: the page is too large or too complex "
                "to convert; try a smaller page (a single section, a raw or print version) or a plain-text URL",
                "FETCH_TIMEOUT",
            ) from None
        raise ToolError(
            f"converting {url} failed ({exc}); try a smaller page or a plain-text version", "FETCH_FAILED"
        ) from None
    except orjson.JSONDecodeError:
        raise ToolError(
            f"converting {url} failed: the converter gave no answer; try a smaller page", "FETCH_FAILED"
        ) from None
    return str(result.get("text", "")), str(result.get("note", ""))


async def fetch_markdown(url: str, *, allow_private: bool = False) -> FetchOutcome:
    """GET *url* as the module docstring says; raises :class:`ToolError` (``BAD_URL``, ``PRIVATE_ADDRESS``,
    ``FETCH_FAILED``, ``FETCH_TIMEOUT``, ``NOT_TEXT``) with a message the model can act on."""
    import anyio

    try:
        with anyio.fail_after(TIMEOUT):
            current, status, content_type, body, cut, encoding = await _download(url, allow_private)
    except TimeoutError:
        raise ToolError(
            f"fetching {url} timed out after {TIMEOUT:.0f} s: the server is slow or the page is very large; try "
            "again later, a smaller page, or another source for the same content",
            "FETCH_TIMEOUT",
        ) from None
    size = len(body)
    if content_type and not content_type.startswith(_TEXT_TYPES):
        raise ToolError(
            f"{current} is {content_type} ({size} bytes), not a text page: fetch_url reads only HTML and text",
            "NOT_TEXT",
        )
    try:
        raw = body.decode(encoding, errors="replace")
    except LookupError:
        raw = body.decode("utf-8", errors="replace")
    is_html = content_type in ("text/html", "application/xhtml+xml") or (
        not content_type and raw.lstrip()[:15].lower().startswith(("<!doctype html", "<html"))
    )
    if is_html:
        text, note = await _convert(raw, current)
        if note:
            text = f"[{note}: this is the page's plain text]\n\n{text}"
    else:
        text = raw
    return FetchOutcome(current, status, content_type or "unknown", text, cut)


async def _download(url: str, allow_private: bool) -> tuple[str, int, str, bytes, bool, str]:
    """``(final url, status, content type, body, cut, charset)``: redirects followed and checked, the body
    decoded (``Content-Encoding``) and cut at :data:`MAX_BYTES`."""
    import httpx

    current = url
    headers = {"User-Agent": USER_AGENT, "Accept-Encoding": "gzip, deflate"}
    async with httpx.AsyncClient(
        follow_redirects=False, trust_env=False, timeout=httpx.Timeout(TIMEOUT), headers=headers
    ) as client:
        for _hop in range(MAX_REDIRECTS + 1):
            host = _check_url(current)
            parts = urlsplit(current)
            await _check_host(host, parts.port or (443 if parts.scheme == "https" else 80), allow_private)
            try:
                async with client.stream("GET", current) as response:
                    if response.is_redirect and "location" in response.headers:
                        current = urljoin(current, response.headers["location"])
                        continue
                    content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
                    decoder = _Decoder(response.headers.get("content-encoding", ""))
                    body = bytearray()
                    cut = False
                    async for chunk in response.aiter_raw():
                        body += decoder.feed(chunk, MAX_BYTES + 1 - len(body))
                        if len(body) > MAX_BYTES:
                            del body[MAX_BYTES:]
                            cut = True
                            break
                    return current, response.status_code, content_type, bytes(body), cut, response.encoding or "utf-8"
            except httpx.HTTPError as exc:
                raise ToolError(
                    f"fetching {current} failed: {exc or type(exc).__name__}; check the URL, or try again later",
                    "FETCH_FAILED",
                ) from None
    raise ToolError(f"{url} redirects more than {MAX_REDIRECTS} times", "FETCH_FAILED")
