"""Errors that carry a machine-readable ``code`` as well as a message for people.

The loop copies ``code`` into ``error`` session events and ``turn/end`` reasons, the tool registry into
``tool/result.error``, and the ACP front end into JSON-RPC error data, so a code is part of the contract.
"""

from __future__ import annotations

import errno as _errno

__all__ = [
    "RUNTIME",
    "USAGE",
    "DshError",
    "LlmError",
    "SettingError",
    "ToolArgsError",
    "ToolNotFoundError",
    "as_exception",
    "error_code",
    "error_message",
    "is_control_flow",
    "os_error_text",
]


class DshError(Exception):
    """Base of dsh's own errors: ``message`` for people, ``code`` (upper snake case) for programs."""

    default_code: str | None = None

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code if code is not None else self.default_code


USAGE = 2
"""Exit status of a usage error: a flag or variable whose value cannot be a value of its setting."""
RUNTIME = 1
"""Exit status of a runtime error: a file that cannot be used, a command that failed."""


class SettingError(DshError):
    """A setting that cannot be used. ``message`` is one line that names the setting and how to fix it;
    ``exit_code`` is 2 for a usage error and 1 for a runtime one."""

    default_code = "INVALID_SETTING"

    def __init__(self, message: str, exit_code: int = USAGE) -> None:
        super().__init__(" ".join(message.split("\n")))
        self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message


class LlmError(DshError):
    """A model could not be called: no adapter (``NO_ADAPTER``), a duplicate one, a failed stream."""


class ToolNotFoundError(DshError):
    default_code = "UNKNOWN_TOOL"


class ToolArgsError(DshError):
    default_code = "INVALID_ARGUMENTS"


def error_code(error: BaseException) -> str | None:
    """The string ``code`` an error carries, if any (ours or a third party's ``code`` attribute)."""
    code = getattr(error, "code", None)
    return code if isinstance(code, str) else None


def os_error_text(error: OSError) -> str:
    """An operating-system error for people, its errno named: ``No space left on device (ENOSPC): /data/x``
    (a full disk, ``EIO``, a quota, a read-only file system are then recognisable in every message)."""
    name = _errno.errorcode.get(error.errno) if isinstance(error.errno, int) else None
    if name is None:
        return str(error) or type(error).__name__
    text = f"{error.strerror or str(error)} ({name})"
    where = [str(path) for path in (error.filename, error.filename2) if path is not None]
    return f"{text}: {' -> '.join(where)}" if where else text


def error_message(error: BaseException) -> str:
    """A one-line message for *error*; never empty. An :class:`OSError` names its errno (:func:`os_error_text`)."""
    message = getattr(error, "message", None)
    if not isinstance(message, str) or not message:
        if isinstance(error, OSError):
            return os_error_text(error)
        message = str(error) or type(error).__name__
    return message


def is_control_flow(error: BaseException) -> bool:
    """Cancellation, interpreter exit and generator close: never contained, always re-raised."""
    import anyio

    return isinstance(error, KeyboardInterrupt | SystemExit | GeneratorExit | anyio.get_cancelled_exc_class())


def as_exception(error: BaseException) -> Exception:
    """*error* itself when it is an ``Exception``; otherwise a ``DshError`` (code ``UNKNOWN``) caused by it."""
    if isinstance(error, Exception):
        return error
    wrapped = DshError(str(error) or type(error).__name__, "UNKNOWN")
    wrapped.__cause__ = error
    return wrapped
