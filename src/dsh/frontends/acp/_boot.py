"""``initialize`` answered before the application exists: the start-up fast path (issue #12 item 4).

An editor spawns ``dsh acp`` and waits for the answer to ``initialize`` before it shows anything. Building the
application (pydantic models, jsonrpcserver and its jsonschema, the loop, providers, tools, persistence) costs
most of the start-up; none of it is needed to answer ``initialize``. So the daemon answers the first frame here
when it is a plain ``initialize``, with only the standard library imported, and builds the application after.

Guarantees:

* The answer is :func:`initialize_result`, the very function :meth:`AcpFrontend.initialize` answers with: a
  later ``initialize`` (served by the front end) gets the same result, and the front end still sees these params
  (the daemon hands them over once it is built, so whatever ``initialize`` records, it records).
* Only a frame that the full stack would certainly answer the same way takes this path: strict UTF-8 JSON with
  no number that is not an integer, an object with ``"jsonrpc": "2.0"``, ``"method": "initialize"``, a string or
  integer id, and params with an integer ``protocolVersion`` and, if present, object-valued
  ``clientCapabilities``, ``clientInfo`` and ``_meta`` (and none of their snake_case spellings). Anything else
  (a malformed frame, odd params, another method) is left to the full stack, in order, once it is built.
* What ``initialize`` answers must be computable from the daemon's options alone: whether sessions are durable,
  whether the default model takes images (:func:`dsh.images.takes_images` with its provider's configured
  ``vision``, the rule the ``llm`` service follows), and what the application's ``initialize`` hooks will announce (the daemon passes that rule as *announce*; it
  turns the fast path off when extra plugins, whose hooks it cannot know, are loaded). Once built, the daemon
  has the front end answer the same params and logs an error if that answer differs from the boot answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from dsh import __version__

__all__ = ["PROTOCOL_VERSION", "STEER_META", "fast_initialize", "initialize_result"]

PROTOCOL_VERSION = 1
STEER_META = {"dsh.dev/steer": {"method": "_dsh/session/steer"}}
"""What every ``initialize`` answer carries in ``agentCapabilities._meta``: the extension request that steers a
running turn (:mod:`dsh.frontends.acp._steer`, RFC 0036)."""


def initialize_result(
    *,
    durable: bool,
    mcp: dict[str, bool] | None = None,
    meta: dict[str, Any] | None = None,
    auth_methods: list[dict[str, Any]] | None = None,
    image: bool = False,
    modern: bool = False,
) -> dict[str, Any]:
    """The result of ``initialize`` (*durable*: sessions are stored, so they can be loaded, listed, resumed;
    *mcp*: the MCP transports beyond stdio, none by default; *meta*: the ``agentCapabilities._meta`` entries
    plugins announce, after :data:`STEER_META`, which is always there; *image*: the default model takes images; *modern*: the client reads
    schema 1.22+ fields, so the client system prompt and ``session/set_title`` are advertised, RFC 0033)."""
    capabilities: dict[str, Any] = {
        "loadSession": durable,
        "promptCapabilities": {"image": image, "audio": False, "embeddedContext": True},
        "mcpCapabilities": mcp if mcp is not None else {"http": False, "sse": False},
        "sessionCapabilities": ({"list": {}, "resume": {}, "close": {}, "delete": {}, "fork": {}} if durable else {})
        | {"additionalDirectories": {}},
        "auth": {"logout": {}},
    }
    if modern:
        capabilities["sessionCapabilities"] |= {"systemPrompt": {"mode": {"override": {}}}, "title": {}}
    capabilities["_meta"] = {**STEER_META, **(meta or {})}
    return {
        "protocolVersion": PROTOCOL_VERSION,  # the only version we speak, whatever was asked (spec rule)
        "agentCapabilities": capabilities,
        "authMethods": auth_methods if auth_methods is not None else [],
        "agentInfo": {"name": "dsh", "title": "dsh", "version": __version__},
    }


class _NotPlain(ValueError):
    pass


def _refuse(_: str) -> Any:
    raise _NotPlain


_DECODER = json.JSONDecoder(parse_float=_refuse, parse_constant=_refuse)
_SNAKE = ("protocol_version", "client_capabilities", "client_info")


Announce = Callable[[dict[str, Any]], dict[str, Any]]
"""What the application's ``initialize`` hooks will announce in ``agentCapabilities._meta`` for these client
capabilities (see :meth:`AcpFrontend.add_capability_hook`), computed without the application."""


def fast_initialize(
    frame: bytes,
    *,
    durable: bool,
    mcp: dict[str, bool] | None = None,
    announce: Announce | None = None,
    auth: Callable[[dict[str, Any]], list[dict[str, Any]]] | None = None,
    image: bool = False,
) -> tuple[bytes, dict[str, Any]] | None:
    """The response frame to *frame* and its params, when *frame* is a plain ``initialize``; else None."""
    try:
        message = _DECODER.decode(frame.decode("utf-8"))
    except (ValueError, RecursionError):  # _NotPlain, JSONDecodeError and UnicodeDecodeError are ValueErrors
        return None
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or message.get("method") != "initialize":
        return None
    request_id = message.get("id")
    params = message.get("params")
    if type(request_id) not in (int, str) or type(params) is not dict:
        return None
    if type(params.get("protocolVersion")) is not int or any(key in params for key in _SNAKE):
        return None
    for key in ("clientCapabilities", "clientInfo", "_meta"):
        if key in params and params[key] is not None and type(params[key]) is not dict:
            return None
    if "clientCapabilities" in params and params["clientCapabilities"] is None:
        return None  # the model's default is {}, None is not accepted for it: let the full stack say so
    capabilities = params.get("clientCapabilities") or {}
    meta = announce(capabilities) if announce is not None else None
    methods = auth(capabilities) if auth is not None else None
    from dsh.frontends.acp._features import ClientFeatures  # standard library only

    modern = ClientFeatures.of(capabilities).modern
    result = initialize_result(durable=durable, mcp=mcp, meta=meta, auth_methods=methods, image=image, modern=modern)
    response = {"jsonrpc": "2.0", "result": result, "id": request_id}
    return json.dumps(response, separators=(",", ":"), allow_nan=False).encode(), params
