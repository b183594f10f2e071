"""JSON-RPC 2.0 error codes and the one error type both ends of dsh raise and send.

Guarantees: :class:`RpcError` carries exactly what goes on the wire (``code``, ``message``, optional ``data``);
:meth:`RpcError.to_json` never adds a ``data`` key that was not given. :func:`too_large` is the one wording of
an oversized line, whoever reports it (the daemon, the chat, ``dsh bridge``).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "REQUEST_CANCELLED",
    "RESOURCE_NOT_FOUND",
    "RpcError",
    "too_large",
]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
REQUEST_CANCELLED = -32800
RESOURCE_NOT_FOUND = -32002


class RpcError(Exception):
    """A JSON-RPC error: raised to answer a request with it, or for the error answer the other end sent."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_json(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


def too_large(size: int, limit: int) -> RpcError:
    """The error for a line of *size* bytes over *limit* (invalid request: it was never read, only counted)."""
    return RpcError(INVALID_REQUEST, f"message of {size} bytes is too large (the limit is {limit} bytes)")
