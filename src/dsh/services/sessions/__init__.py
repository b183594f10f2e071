"""The ``sessions`` interface service: append-only event logs and the store of live ones."""

from dsh.services.sessions._json import NotJsonError, copy_json
from dsh.services.sessions._persistence import LoadedSession, SessionPersistence
from dsh.services.sessions._session import Session, SessionEvent, SessionHeader
from dsh.services.sessions._store import SessionStore, sessions_plugin

__all__ = [
    "LoadedSession",
    "NotJsonError",
    "SessionPersistence",
    "Session",
    "SessionEvent",
    "SessionHeader",
    "SessionStore",
    "copy_json",
    "sessions_plugin",
]
