"""Fixtures for the long-turn tests: a fake provider server per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.provider_server import FakeProvider, serve


@pytest.fixture
def server() -> Iterator[FakeProvider]:
    with serve() as fake:
        yield fake
