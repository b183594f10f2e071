"""A loopback OpenAI-compatible provider per test: it plays the model and records what the model is sent."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.provider_server import FakeProvider, serve


@pytest.fixture
def server() -> Iterator[FakeProvider]:
    with serve() as fake:
        yield fake
