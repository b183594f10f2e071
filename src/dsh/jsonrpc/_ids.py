"""Reading which request a JSON-RPC answer answers from its ends, without parsing it (it may be too long or too
deep to parse).

Used for an answer that was too long to keep (:class:`~dsh.jsonrpc.Oversized`) or too deep to handle: the request
of ours it answers fails at once instead of waiting forever. (A request's own id is never taken from a line that
was not read whole: its error goes out with ``id: null``.)

Guarantees: only a top-level ``id`` is ever read (a key named ``id`` inside ``params`` or ``result`` is not),
only from the first or last 512 bytes given; an id is an integer of at most 18 digits or a short string without
escapes; anything else is None (then the error goes out with ``id: null``, as JSON-RPC says).
"""

from __future__ import annotations

import re

__all__ = ["answer_id"]

_ID = rb'(-?\d{1,18}|"[^"\\]{0,200}")'
# Patterns, not compiled objects: ``re`` compiles each on first use (an oversized line), not on the daemon's boot path.
_HEAD_ID = rb'\A\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*' + _ID + rb'\s*(,\s*"(\w+)")?'
_TAIL_ID = rb',\s*"id"\s*:\s*' + _ID + rb"\s*\}\s*\Z"
_HEAD_METHOD = rb'\A\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?(?:"id"\s*:\s*[^,]{1,210},\s*)?"method"'


def _value(raw: bytes) -> int | str:
    return raw[1:-1].decode("utf-8", "replace") if raw.startswith(b'"') else int(raw)


def answer_id(head: bytes, tail: bytes = b"") -> int | str | None:
    """The id of the request a JSON-RPC line answers, read from its first or last bytes without parsing it:
    ``{"jsonrpc": "2.0", "id": 7, "result": …`` or ``… "id": 7}``. None for a request or notification (a
    ``method`` key first) or when no id can be read."""
    if re.match(_HEAD_METHOD, head[:512]):
        return None
    found = re.match(_HEAD_ID, head[:512])
    if found is not None and found.group(3) in (None, b"result", b"error"):
        return _value(found.group(1))
    found = re.search(_TAIL_ID, (tail or head)[-512:])
    return None if found is None else _value(found.group(1))
