"""The one module that knows jsonrpcserver: inbound dispatch of requests and notifications.

jsonrpcserver was chosen by our user; it is frozen upstream (5.0.9) and its ``Result`` type will change in
6.0, so it stays behind this adapter. What we take from it: method lookup, the ``Result`` → response mapping
and the spec's notification rules. What we do not: its JSON parsing and schema validation (the connection
classifies frames itself, and jsonschema validation costs ~90 µs per message for nothing), its params binding
(each method takes ``**params`` and validates them with a pydantic model), and its exception handling (which
would send ``str(exc)`` to the editor: ours logs the traceback and answers a short -32603).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from dsh._log import get_logger
from dsh.frontends.acp._rpc import INTERNAL_ERROR, METHOD_NOT_FOUND, RpcError

__all__ = ["Handler", "MethodTable", "make_dispatch", "public_error"]

M = TypeVar("M", bound=BaseModel)
Handler = Callable[[Any], Awaitable[Any]]
MethodTable = dict[str, tuple[type[BaseModel], Handler]]
log = get_logger("dsh.acp")


def _adapt(method: str, model: type[BaseModel], handler: Handler) -> Callable[..., Awaitable[Any]]:
    from jsonrpcserver import Error, InvalidParams, Success

    async def call(**params: Any) -> Any:
        try:
            parsed = model.model_validate(params)
        except ValidationError as exc:
            return InvalidParams(exc.errors(include_url=False, include_context=False, include_input=False))
        try:
            result = await handler(parsed)
        except RpcError as exc:
            return Error(exc.code, exc.message, exc.data) if exc.data is not None else Error(exc.code, exc.message)
        except Exception as exc:  # cancellation is a BaseException and passes through
            public = public_error(exc)
            if public is not None:
                return Error(public.code, public.message, public.data)
            log.exception("request handler failed", method=method)
            if isinstance(exc, OSError):  # a full disk, an I/O error: named (ENOSPC, EIO), never a bare class name
                from dsh.errors import os_error_text

                return Error(INTERNAL_ERROR, f"Internal error: {os_error_text(exc)}")
            return Error(INTERNAL_ERROR, f"Internal error ({type(exc).__name__})")
        return Success(result if result is not None else {})

    return call


def public_error(error: BaseException) -> RpcError | None:
    """The -32603 for an error whose message is meant for the client (``public = True``: it names what failed
    and what to change, e.g. a data directory that cannot hold sessions); None for any other error."""
    if getattr(error, "public", False) is not True:
        return None
    data = getattr(error, "rpc_data", None)
    return RpcError(INTERNAL_ERROR, str(getattr(error, "message", error)), data() if callable(data) else None)


def make_dispatch(table: MethodTable) -> Callable[[dict[str, Any]], Awaitable[dict[str, Any] | None]]:
    """A dispatch function for :class:`~dsh.frontends.acp._rpc.Connection` over *table*."""
    from jsonrpcserver import async_dispatch_to_serializable

    methods = {name: _adapt(name, model, handler) for name, (model, handler) in table.items()}

    def identity(value: Any) -> Any:
        return value

    async def dispatch(call: dict[str, Any]) -> dict[str, Any] | None:
        response: Any = await async_dispatch_to_serializable(
            call, methods=methods, deserializer=identity, validator=identity
        )
        if not isinstance(response, dict):
            return None
        error = response.get("error")
        if isinstance(error, dict) and error.get("code") == METHOD_NOT_FOUND:
            error["message"] = f"Method not found: {call['method']}"
            error["data"] = {"method": call["method"]}
        return response

    return dispatch
