"""Structured logging: on stderr (or a file), never on stdout, and never paid for until used. A terminal gets
human-readable lines (structlog's console renderer); anything else (a file, a pipe, an editor's log) gets JSON lines.

``import structlog`` costs about 120 ms here (it pulls in rich when rich is installed), and a healthy daemon
logs nothing at the default level, so:

* :func:`configure_logging` only records the level and destination and sets up the standard library's
  ``logging`` (for third-party loggers) with a small JSON formatter; it does not import structlog.
* :func:`get_logger` returns a proxy that imports and configures structlog on the first call that logs.
* structlog's unconfigured default prints to *stdout*, which belongs to the protocol: the proxy always
  installs our configuration first unless the process configured structlog itself (tests do).
* :func:`bind_context` adds keys (``session_id``, ``turn``) to every log line of the current task and the
  tasks it starts, through a ``ContextVar``: cheap enough for the loop to call on every turn.
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any, TextIO

__all__ = ["bind_context", "configure_logging", "get_logger", "open_log"]

_LEVELS = {"debug": 10, "info": 20, "warning": 30, "warn": 30, "error": 40, "critical": 50}
_settings: dict[str, Any] = {"level": 30, "file": None}
_applied = False
_context: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar("dsh_log_context", default={})  # noqa: B039 - never mutated, only replaced


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "event": record.getMessage(),
            "level": record.levelname.lower(),
            "logger": record.name,
            **_context.get(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def configure_logging(level: str = "warning", file: TextIO | None = None) -> None:
    """Log at *level* and above to *file* (stderr by default): readable lines on a terminal, JSON lines
    otherwise; stdlib logging follows."""
    global _applied
    numeric = _LEVELS.get(level.lower())
    if numeric is None:
        raise ValueError(f"unknown log level {level!r}; use one of {', '.join(_LEVELS)}")
    _settings["level"] = numeric
    _settings["file"] = file
    _applied = False
    stream = file if file is not None else sys.stderr
    handler = logging.StreamHandler(stream)
    if _is_terminal(stream):
        handler.setFormatter(logging.Formatter("%(asctime)s [%(levelname)-8s] %(message)s [%(name)s]", "%H:%M:%S"))
    else:
        handler.setFormatter(_JsonFormatter())
    logging.basicConfig(handlers=[handler], level=max(numeric, logging.WARNING), force=True)
    if "structlog" in sys.modules:
        _apply()


def _merge_context(logger: Any, method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for key, value in _context.get().items():
        event.setdefault(key, value)
    return event


def _apply() -> None:
    global _applied
    import structlog
    import structlog.tracebacks

    stream = _settings["file"] or sys.stderr
    processors: list[Any] = [_merge_context, structlog.processors.add_log_level]
    if _is_terminal(stream):
        processors += [
            structlog.processors.TimeStamper(fmt="%H:%M:%S", utc=False),
            # plain tracebacks: rich's default shows local variables (prompts, file contents, secrets)
            structlog.dev.ConsoleRenderer(colors=True, exception_formatter=structlog.dev.plain_traceback),
        ]
    else:
        processors += [
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            # Tracebacks without local variables, at every level: locals hold prompts, file contents and secrets.
            structlog.processors.ExceptionRenderer(
                structlog.tracebacks.ExceptionDictTransformer(show_locals=False, use_rich=False)
            ),
            structlog.processors.JSONRenderer(),
        ]
    structlog.configure(
        cache_logger_on_first_use=False,  # capture_logs() in tests must see every logger
        wrapper_class=structlog.make_filtering_bound_logger(_settings["level"]),
        processors=processors,
        logger_factory=structlog.WriteLoggerFactory(file=stream),
    )
    _applied = True


@contextmanager
def open_log(level: str, path: str | None) -> Iterator[None]:
    """Log at *level* to the file at *path* (appended; None: stderr) inside the block. A file that cannot be
    opened is a :class:`~dsh.errors.SettingError` (one line, status 1) naming the setting."""
    stream: TextIO | None = None
    if path is not None:
        try:
            stream = open(path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 - closed below
        except OSError as exc:
            from dsh.errors import SettingError

            reason = exc.strerror or type(exc).__name__
            raise SettingError(f"--log-file / DSH_LOG_FILE: cannot open {path}: {reason}", 1) from None
    try:
        configure_logging(level, stream)
        yield
    finally:
        if stream is not None:
            stream.close()


@contextmanager
def bind_context(**values: Any) -> Iterator[None]:
    """Add *values* to every log line written by this task (and tasks it starts) inside the block."""
    token = _context.set({**_context.get(), **values})
    try:
        yield
    finally:
        _context.reset(token)


def _discard(*args: Any, **kwargs: Any) -> None:
    return None


class _LazyLogger:
    __slots__ = ("_logger", "_name")

    def __init__(self, name: str) -> None:
        self._name = name
        self._logger: Any = None

    def __getattr__(self, method: str) -> Any:
        if self._logger is None and "structlog" not in sys.modules and _LEVELS.get(method, 100) < _settings["level"]:
            return _discard  # below the level and structlog never loaded: do not load it for nothing
        if self._logger is None:
            import structlog

            if not _applied and not structlog.is_configured():
                _apply()
            self._logger = structlog.get_logger(logger_name=self._name)  # a lazy proxy: follows later configure()
        return getattr(self._logger, method)


def get_logger(name: str) -> Any:
    """A structlog logger for *name*, imported on first use."""
    return _LazyLogger(name)
