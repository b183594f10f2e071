"""Structured logging, lazily imported and never on stdout.

``import structlog`` costs about 120 ms here (it pulls in rich when rich is installed), and most modules only
log on rare paths, so :func:`get_logger` returns a proxy that imports structlog on the first call that logs.
structlog's unconfigured default prints to *stdout*, which belongs to the protocol; the first logger to be
used therefore installs :func:`configure_logging`'s stderr set-up unless the process already configured one.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

__all__ = ["configure_logging", "get_logger"]

_LEVELS = {"debug": 10, "info": 20, "warning": 30, "warn": 30, "error": 40, "critical": 50}


def configure_logging(level: str = "warning", file: TextIO | None = None) -> None:
    """Send JSON log lines to *file* (stderr by default) at *level* and above; stdlib logging follows."""
    import logging

    import structlog

    numeric = _LEVELS.get(level.lower())
    if numeric is None:
        raise ValueError(f"unknown log level {level!r}; use one of {', '.join(_LEVELS)}")
    stream = file if file is not None else sys.stderr
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        cache_logger_on_first_use=False,  # capture_logs() in tests must see every logger
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        processors=[*shared, structlog.processors.dict_tracebacks, structlog.processors.JSONRenderer()],
        logger_factory=structlog.WriteLoggerFactory(file=stream),
    )
    handler = logging.StreamHandler(stream)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.JSONRenderer(),
            ],
        )
    )
    logging.basicConfig(handlers=[handler], level=max(numeric, logging.WARNING), force=True)


class _LazyLogger:
    __slots__ = ("_logger", "_name")

    def __init__(self, name: str) -> None:
        self._name = name
        self._logger: Any = None

    def __getattr__(self, method: str) -> Any:
        if self._logger is None:
            import structlog

            if not structlog.is_configured():
                configure_logging()
            self._logger = structlog.get_logger(logger_name=self._name)  # a lazy proxy: follows later configure()
        return getattr(self._logger, method)


def get_logger(name: str) -> Any:
    """A structlog logger for *name*, imported on first use."""
    return _LazyLogger(name)
