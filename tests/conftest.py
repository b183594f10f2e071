"""Shared fixtures. The anyio backend is pinned to asyncio (jsonrpcserver is asyncio-only)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from dsh.kernel import App, Context

if TYPE_CHECKING:
    from tests.support.provider_server import FakeProvider


@pytest.fixture(scope="session")
def anyio_backend() -> tuple[str, dict[str, Any]]:
    return ("asyncio", {"debug": True})


@pytest.fixture(scope="session", autouse=True)
def _isolated_data_dirs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """No test, and no daemon a test spawns, ever writes sessions into the real home directory or reads the
    developer's own configuration."""
    root = tmp_path_factory.mktemp("dsh-data")
    names = ("DSH_DATA_DIR", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "DSH_CONFIG", "DSH_MODEL", "DSH_PLUGINS", "DSH_LSP")
    saved = {name: os.environ.get(name) for name in names}
    os.environ["DSH_DATA_DIR"] = str(root / "sessions")
    os.environ["XDG_DATA_HOME"] = str(root / "xdg")
    os.environ["XDG_CONFIG_HOME"] = str(root / "xdg-config")  # never the developer's own config.yaml
    os.environ["DSH_LSP"] = "off"  # language servers only in the tests of them (tests/lsp), RFC 0037
    for name in ("DSH_CONFIG", "DSH_MODEL", "DSH_PLUGINS"):
        os.environ.pop(name, None)
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture
async def app() -> AsyncIterator[App]:
    """A running, empty application (no plugins loaded)."""
    async with App() as application:
        yield application


@pytest.fixture
async def ctx(app: App, request: pytest.FixtureRequest) -> AsyncIterator[Context]:
    """The running application with the test module's ``PLUGINS`` (a tuple of plugins) loaded, in order."""
    for one in getattr(request.module, "PLUGINS", ()):
        app.ctx.plugin(one)
    yield app.ctx


@pytest.fixture
def server() -> Iterator[FakeProvider]:
    """A fresh loopback fake provider (OpenAI- and Anthropic-compatible, also a plain web server) on 127.0.0.1,
    stopped after the test."""
    from tests.support.provider_server import serve

    with serve() as fake:
        yield fake


@pytest.fixture
async def core() -> AsyncIterator[Context]:
    """A running application with the five services, echo, scripted and the loop loaded (not the context plugin:
    the loop's own tests see no built-in system prompt section; not the policy pipeline: the tools' and the
    loop's own tests run calls unattended, and ``tests/policy`` loads it where it is the subject)."""
    from dsh.app import load_core

    async with App() as application:
        load_core(application.ctx, context=False, policy=False)
        yield application.ctx


class Recorder:
    """Collects ``(event name, args)`` pairs from any number of events, in dispatch order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def listener(self, name: str) -> Callable[..., None]:
        def record(*args: Any) -> None:
            self.calls.append((name, args))

        return record

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()
