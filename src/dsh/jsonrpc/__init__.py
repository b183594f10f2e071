"""One JSON-RPC 2.0 line peer's parts, below every end of dsh that speaks it: newline framing with one cap
(:data:`MAX_LINE`), the error codes and :class:`RpcError`, the one report of an oversized line
(:class:`Oversized`, :func:`too_large`), reading which request an answer answers from its ends, and lines from an anyio byte stream.

Standard library only at import (the daemon answers ``initialize`` with it, RFC 0008); anyio is imported by
:func:`read_lines` when it runs. See ``README.md``.
"""

from dsh.jsonrpc._errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    REQUEST_CANCELLED,
    RESOURCE_NOT_FOUND,
    RpcError,
    too_large,
)
from dsh.jsonrpc._ids import answer_id
from dsh.jsonrpc._lines import HEAD, MAX_LINE, TAIL, LineFramer, Oversized
from dsh.jsonrpc._stream import read_lines

__all__ = [
    "HEAD",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "MAX_LINE",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "REQUEST_CANCELLED",
    "RESOURCE_NOT_FOUND",
    "TAIL",
    "LineFramer",
    "Oversized",
    "RpcError",
    "answer_id",
    "read_lines",
    "too_large",
]
