"""``dsh config show --system-prompt [--cwd DIR]``: the system prompt a new editor session in DIR sends.

Computed by the product's own path, never by a second renderer that could drift: the daemon's application
(:func:`._build.load_daemon_plugins`: core plugins with the file's settings, MCP servers, ``DSH_PLUGINS``, the ACP
front end and its tools), an ``initialize``, a ``session/new`` in DIR and one prompt through the front end; the
request the model would receive is taken at the innermost ``llm/stream`` listener (after every plugin rewrote it)
and answered with an empty reply, so no provider is called. Sessions go to a temporary data directory, deleted
after. A model that cannot be served here (its key is missing) is replaced by ``echo``: the system prompt does not
depend on the model.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dsh.frontends.acp._daemon import DaemonOptions
    from dsh.kernel import Next
    from dsh.services.llm import GenerateRequest, StreamChunk
    from dsh.settings import Settings

__all__ = ["preview_request", "show_system_prompt"]


async def _nothing() -> AsyncIterator[StreamChunk]:
    yield {"type": "finish", "reason": {"kind": "stop"}}


async def preview_request(options: DaemonOptions, plugins: list[Any], cwd: str) -> GenerateRequest:
    """The first request a new session in *cwd* sends, as the model would receive it."""
    import tempfile

    from dsh import events as ev
    from dsh.frontends.acp._build import load_daemon_plugins
    from dsh.frontends.acp._frontend import AcpFrontend, AcpOptions
    from dsh.frontends.acp._rpc import RpcError
    from dsh.frontends.acp._wire import InitializeParams, NewSessionParams, PromptParams
    from dsh.kernel import App

    captured: list[GenerateRequest] = []

    async def capture(request: GenerateRequest, next_: Next[GenerateRequest, Any]) -> AsyncIterator[StreamChunk]:
        captured.append(request)
        return _nothing()

    model = options.model
    served = True
    with tempfile.TemporaryDirectory(prefix="dsh-preview-") as data:
        async with App() as app:
            ctx = app.ctx
            acp_options = AcpOptions(lambda frame: None, model=model, system_prompt=options.system_prompt)
            load_daemon_plugins(ctx, replace(options, data_dir=data), plugins, acp_options)
            ctx.on(ev.LLM_STREAM, capture)  # the innermost listener: the request after every rewrite
            frontend: AcpFrontend = ctx.acp
            try:
                await frontend.initialize(InitializeParams.model_validate({"protocolVersion": 1}))
                created = await frontend.new_session(NewSessionParams.model_validate({"cwd": cwd}))
                prompt = {"sessionId": created["sessionId"], "prompt": [{"type": "text", "text": "."}]}
                await frontend.prompt(PromptParams.model_validate(prompt))
            except RpcError:
                if model == "echo":
                    raise
                served = False  # the model cannot be served here (no key): its prompt is echo's
    if not served:
        return await preview_request(replace(options, model="echo"), plugins, cwd)
    if not captured:
        raise RuntimeError("the session sent no model request")
    return captured[0]


def show_system_prompt(settings: Settings, cwd: str | None) -> int:
    """Print the system prompt to stdout; return the exit status."""
    import anyio

    from dsh.frontends.acp._daemon import DaemonOptions, _import_plugin

    directory = os.path.abspath(cwd if cwd is not None else os.getcwd())
    if not os.path.isdir(directory):
        sys.stderr.write(f"dsh: --cwd {directory} is not a directory\n")
        return 1
    options = DaemonOptions.from_settings(settings)
    plugins = [_import_plugin(path) for path in options.plugins]
    request = anyio.run(preview_request, options, plugins, directory)
    sys.stdout.write((request.system or "") + "\n")
    return 0
