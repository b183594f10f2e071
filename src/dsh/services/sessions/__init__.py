"""The ``sessions`` interface service: append-only event logs and the store of live ones."""

from dsh.services.sessions._json import NotJsonError, copy_json, dumps_json, parse_json
from dsh.services.sessions._persistence import LoadedSession, SessionInfo, SessionPersistence
from dsh.services.sessions._session import (
    COMPACTION_EVENT,
    PRUNE_EVENT,
    ChunkEvent,
    Session,
    SessionEvent,
    SessionHeader,
    chunk_where,
    summary_message,
    title_from_content,
)
from dsh.services.sessions._store import SessionStore, check_session_id, ignores_text_chunks, sessions_plugin

__all__ = [
    "COMPACTION_EVENT",
    "PRUNE_EVENT",
    "ChunkEvent",
    "LoadedSession",
    "NotJsonError",
    "SessionPersistence",
    "Session",
    "SessionEvent",
    "SessionHeader",
    "SessionInfo",
    "SessionStore",
    "check_session_id",
    "chunk_where",
    "copy_json",
    "dumps_json",
    "ignores_text_chunks",
    "parse_json",
    "sessions_plugin",
    "summary_message",
    "title_from_content",
]
