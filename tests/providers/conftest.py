"""Fixtures for the remote provider tests: a fake provider server per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.provider_server import FakeProvider, serve


@pytest.fixture
def server() -> Iterator[FakeProvider]:
    """A fresh fake provider on 127.0.0.1 (stopped after the test)."""
    with serve() as fake:
        yield fake
