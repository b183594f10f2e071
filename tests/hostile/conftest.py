"""The context tests' loopback provider fixture, for the compaction summary check here."""

from tests.context.conftest import server

__all__ = ["server"]
