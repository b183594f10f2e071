"""Fuzzing the daemon's stdin with hypothesis: random bytes lines and random JSON shapes.

For every line sent, a reference model says what the daemon owes: nothing (a notification, a response to a
request we never made, a blank line), one error with ``id: null`` (not JSON, not a request object), or exactly
one response echoing the request's id. After each example's lines a sentinel ``initialize`` is sent; reading
continues until the sentinel and everything owed has arrived, and any other line fails the example. Then the
daemon must still run a session on ``echo`` to ``end_turn``. Every stdout line is checked as it is read
(:func:`tests.support.raw.check_frame`).

One daemon serves all examples of a test function; a daemon that an example left in doubt (a failure) is
replaced before the next example.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.support.raw import WAIT, DaemonPool, RawDaemon, compact, strict_loads

PARSE_ERROR = -32700
INVALID_REQUEST = -32600

FUZZ = settings(
    max_examples=25,
    deadline=None,
    database=None,
    # No shrinking: a failed example leaves its daemon in doubt, so every shrink step would need a new daemon
    # (~0.25 s each, enough to hit the 60 s test timeout). Examples are at most six short lines: readable as is.
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# -- strategies ---------------------------------------------------------------------------------------------

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)  # NaN/Infinity are not JSON (see test_raw_protocol)
    | st.text(max_size=12)
)
json_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
methods = st.sampled_from(
    [
        "initialize",
        "authenticate",
        "session/new",
        "session/prompt",
        "session/cancel",
        "session/load",
        "session/list",
        "$/cancel_request",
        "_zed.dev/x",
        "nope",
        "",
        "\u0000",
        "session/prompt\n",
    ]
) | st.text(max_size=16)
plausible_params = st.fixed_dictionaries(
    {},
    optional={
        "protocolVersion": st.sampled_from([1, 2, 0, -1, "1", "2024-11-05", 1.5, None]) | json_values,
        "cwd": st.sampled_from(["/", "/tmp", "relative", "", "/nonexistent/dir"]) | json_values,
        "sessionId": st.sampled_from(["", "nope", str(uuid.UUID(int=0))]) | json_values,
        "prompt": st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "type": st.sampled_from(["text", "image", "audio", "resource", "resource_link", "x"]),
                    "text": st.text(max_size=20) | json_values,
                    "uri": st.text(max_size=10),
                    "data": st.text(max_size=10),
                    "mimeType": st.text(max_size=10),
                },
            )
            | json_values,
            max_size=3,
        )
        | json_values,
        "methodId": st.sampled_from(["dsh-local", "other", ""]) | json_values,
        "mcpServers": st.just([]) | json_values,
        "requestId": st.integers(min_value=-2, max_value=2000) | json_values,
        "clientCapabilities": json_values,
        "_meta": json_values,
    },
)
messages = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0", "2", 2.0, None]) | json_values,
        "id": st.integers(min_value=-(2**63), max_value=2**63 - 1) | st.text(max_size=10) | json_values,
        "method": methods | json_values,
        "params": plausible_params | json_values,
        "result": json_values,
        "error": json_values,
    },
)
"""Dicts with the JSON-RPC keys, each present or not, drawn from plausible and hostile values."""


@st.composite
def json_lines(draw: st.DrawFn) -> bytes:
    """One JSON text (a message-like dict most of the time, any JSON value otherwise), in varied spellings."""
    value = draw(messages | json_values)
    ascii_only = draw(st.booleans())
    spaced = draw(st.booleans())
    text = json.dumps(
        value, ensure_ascii=ascii_only, separators=(", ", ": ") if spaced else (",", ":"), allow_nan=False
    )
    padding = draw(st.sampled_from(["", " ", "\t", "\r", " \r"]))
    line = (padding.lstrip("\r") + text + padding).encode("utf-8")
    assert b"\n" not in line  # json.dumps escapes every newline inside strings
    return line


byte_lines = st.binary(max_size=64).map(lambda raw: raw.replace(b"\n", b""))
"""Random bytes with every newline removed: one line each, never split into two frames by accident."""

# -- the reference model ------------------------------------------------------------------------------------


@dataclass
class Owed:
    """What the daemon owes for one line: ``kind`` is ``"none"``, ``"blank"`` (nothing, or a parse error),
    ``"null"`` (one error with ``id: null`` whose code is in ``codes``) or ``"id"`` (one response with ``key``)."""

    kind: str
    codes: tuple[int, ...] = ()
    key: str = ""


def owed_for_value(value: Any) -> Owed:
    if not isinstance(value, dict):
        return Owed("null", (INVALID_REQUEST,))
    if "method" in value:
        return Owed("id", key=compact(value["id"])) if "id" in value else Owed("none")
    if "id" in value and ("result" in value or "error" in value):
        return Owed("none")  # a response to a request the daemon never made: dropped
    return Owed("null", (INVALID_REQUEST,))


def owed_for_line(line: bytes) -> Owed:
    if not line.strip():
        return Owed("blank", (PARSE_ERROR,))
    try:
        value = strict_loads(line.decode("utf-8"))
    except (ValueError, RecursionError):
        # Not UTF-8 or not JSON: a parse error (or -32600 where the daemon's decoder is more lenient).
        return Owed("null", (PARSE_ERROR, INVALID_REQUEST))
    return owed_for_value(value)


async def settle(daemon: RawDaemon, lines: list[bytes]) -> None:
    """After *lines* were sent: send a sentinel request, read until it and everything owed for *lines* arrived.

    Requests run as tasks, so their answers may come in any order; error answers to malformed lines come in line
    order, before anything sent after them. Any line that nobody owed fails the example.
    """
    owed = [owed_for_line(line) for line in lines]
    sentinel = f"sentinel-{uuid.uuid4()}"
    await daemon.send({"jsonrpc": "2.0", "id": sentinel, "method": "initialize", "params": {"protocolVersion": 1}})
    sentinel_seen = False
    while not sentinel_seen or any(o.kind in ("null", "id") for o in owed):
        message = await daemon.read()
        if "method" in message:
            assert message["method"] == "session/update", f"unexpected request or notification {message!r:.300}"
            continue
        if message["id"] == sentinel:
            assert "result" in message, f"the sentinel initialize failed: {message!r:.300}"
            sentinel_seen = True
            continue
        # An error with id null may answer a malformed line or a request whose id is null: try the malformed
        # lines first (a request with id null may be answered with any code, so it can take whatever is left).
        key = compact(message["id"])
        code = message["error"]["code"] if "error" in message else None
        candidates = [o for o in owed if o.kind == "null" and code in o.codes] if message["id"] is None else []
        candidates += [o for o in owed if o.kind == "id" and o.key == key]
        candidates += [o for o in owed if o.kind == "blank" and code in o.codes] if message["id"] is None else []
        match = candidates[0] if candidates else None
        assert match is not None, f"a line nobody owed: {message!r:.300}\nsent: {lines!r:.1000}"
        owed.remove(match)


async def still_serves_a_session(daemon: RawDaemon) -> None:
    session_id = await daemon.new_session()
    response, updates = await daemon.prompt(session_id, "still alive after the fuzz")
    assert response["result"] == {"stopReason": "end_turn"}, response
    text = "".join(u["content"]["text"] for u in updates if u.get("sessionUpdate") == "agent_message_chunk")
    assert text == "still alive after the fuzz"


@pytest.fixture
async def pool(tmp_path: Path) -> AsyncIterator[DaemonPool]:
    daemons = DaemonPool(tmp_path)
    try:
        yield daemons
    finally:
        await daemons.aclose()


async def _run_example(pool: DaemonPool, lines: list[bytes], chunk: int | None = None) -> None:
    """Send *lines* (whole, or as one byte stream cut every *chunk* bytes), settle, then run a session."""
    daemon = await pool.borrow()
    try:
        with anyio.fail_after(WAIT):
            if chunk is None:
                for line in lines:
                    await daemon.send_line(line)
            else:
                data = b"".join(line + b"\n" for line in lines)
                for start in range(0, len(data), chunk):
                    await daemon.send_bytes(data[start : start + chunk])
            await settle(daemon, lines)
            await still_serves_a_session(daemon)
    except BaseException:
        await pool.aclose()  # a daemon in doubt is not reused: the next example (or shrink step) gets a new one
        raise


# -- tests --------------------------------------------------------------------------------------------------


@FUZZ
@given(lines=st.lists(byte_lines, min_size=1, max_size=6))
async def test_random_bytes_are_answered_or_ignored(pool: DaemonPool, lines: list[bytes]) -> None:
    await _run_example(pool, lines)


@FUZZ
@given(lines=st.lists(json_lines(), min_size=1, max_size=6))
async def test_random_json_shapes_are_answered_or_ignored(pool: DaemonPool, lines: list[bytes]) -> None:
    await _run_example(pool, lines)


@FUZZ
@given(lines=st.lists(json_lines() | byte_lines, min_size=1, max_size=6), chunk=st.integers(1, 64))
async def test_random_lines_written_in_random_pieces(pool: DaemonPool, lines: list[bytes], chunk: int) -> None:
    """The same kinds of lines, written to the pipe in pieces of *chunk* bytes that ignore line boundaries."""
    await _run_example(pool, lines, chunk)
