"""``dsh acp``: the long-running daemon an editor spawns. Owns the process's stdio and its lifetime.

Order of operations, and why:

1. Claim stdout before anything else runs, so nothing but frames can ever reach fd 1.
2. Start the single frame writer and read stdin in a daemon thread. Answer the first frame when it is a plain
   ``initialize`` (:mod:`._boot`: nothing but the standard library and anyio is imported by then), so the
   editor's wait is start-up plus one round trip, not the application's imports.
3. Build the application (core plugins + the ACP front end), then hand every frame, in arrival order, to the
   connection (requests become tasks).
4. On stdin EOF or SIGTERM/SIGINT: stop reading, cancel every turn, answer pending prompts ``cancelled``,
   dispose every agent (closing ``turn/end``\\ s are flushed), drain the writer, exit 0 — bounded so the whole
   shutdown takes well under 2 s.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import sys
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import anyio.abc

from dsh._log import get_logger
from dsh.settings import DEFAULT_MODEL

if TYPE_CHECKING:
    from dsh.config import DshConfig
    from dsh.extra_plugins import ExtraPlugin
    from dsh.frontends.acp._backpressure import FlowControl
    from dsh.frontends.acp._stdio import StdinReader
    from dsh.jsonrpc import Oversized
    from dsh.kernel import Context
    from dsh.recording import Recorder
    from dsh.settings import SettingError, Settings

__all__ = ["DaemonOptions", "FrameSource", "run", "serve_client"]

SHUTDOWN_GRACE = 1.5
WRITER_GRACE = 0.3
HOOKS_GRACE = 5.0
"""How long a closing daemon waits for the hooks still running (``SessionEnd``) before it exits."""
log = get_logger("dsh.acp")


@dataclass(frozen=True)
class DaemonOptions:
    """The daemon's settings; :meth:`resolve` is the one place that reads their environment variables."""

    model: str = DEFAULT_MODEL
    system_prompt: str | None = None
    log_level: str = "warning"
    log_file: str | None = None
    data_dir: str | None = None
    """Where sessions are stored (``--data-dir``, ``DSH_DATA_DIR``, the file's ``data_dir``, else the XDG data
    directory)."""
    plugins: tuple[str, ...] = ()
    """Extra plugins as ``module:attribute`` import paths (``DSH_PLUGINS``, comma-separated)."""
    config: str | None = None
    """The configuration file that was loaded (``--config``, ``DSH_CONFIG`` or the XDG default); None: none."""
    models: tuple[str, ...] = ()
    """The models offered in the editor's model picker (the file's ``models``, with ``model`` first when it is
    not among them); empty means just ``model``."""
    agent_events: bool = False
    """Send every client the ``_dsh/agent/*`` stream (``--agent-events``, ``DSH_AGENT_EVENTS=1``), not only the
    clients that ask for it."""
    model_origin: str = "the default model"
    """Where ``model`` came from (``--model``, ``DSH_MODEL``, the file): how a start-up warning names it."""
    loaded_config: DshConfig | None = field(default=None, repr=False, compare=False)
    """The loaded file itself: its providers and agents go to the core plugins."""
    mcp_timeout: float = 10.0
    """Seconds an MCP server gets to start unless the file gives it its own (``DSH_MCP_TIMEOUT``)."""
    record: str | None = None
    """Record the run to this file, or to a new file in this directory (``--record``, ``DSH_RECORD``; RFC 0020)."""
    replay_models: dict[str, Any] | None = field(default=None, repr=False, compare=False)
    """``dsh replay``'s model (``--replay-models``, the JSON of :func:`dsh.recording.replay_models_plugin`'s
    config): every model call streams the next recorded response."""

    @classmethod
    def resolve(
        cls,
        *,
        model: str | None = None,
        system_prompt: str | None = None,
        log_level: str | None = None,
        log_file: str | None = None,
        data_dir: str | None = None,
        config: str | None = None,
        agent_events: bool | None = None,
        record: str | None = None,
    ) -> DaemonOptions:
        """The daemon's options from :func:`dsh.settings.resolve_settings` (flag > environment > file > default,
        the same resolution as every other command). A bad value or file raises
        :class:`~dsh.settings.SettingError` (one line, exit status 2 or 1): this runs at start-up, before the
        daemon owns stdout, in both entry paths (``dsh._entry`` and the typer command)."""
        from dsh.settings import SPECS, create_data_dir, resolve_settings

        flags = {"model": model, "system_prompt": system_prompt, "log_level": log_level, "log_file": log_file}
        flags |= {"data_dir": data_dir, "agent_events": "1" if agent_events else None, "record": record}
        # The daemon starts whatever the data directory is like (RFC 0009): an editor shows nothing of a process
        # that died at start-up, so the persistence plugin reports an unusable directory on stderr and on every
        # session request instead of the settings check ending the process.
        specs = [replace(spec, check=_daemon_data_dir) if spec.name == "data_dir" else spec for spec in SPECS]
        settings = resolve_settings(flags, config=config, specs=specs)
        create_data_dir(settings, "dsh acp")
        return cls.from_settings(settings)

    @classmethod
    def from_settings(cls, settings: Settings) -> DaemonOptions:
        return cls(
            model=settings.model,
            system_prompt=settings.system_prompt,
            log_level=settings.log_level,
            log_file=settings.log_file,
            data_dir=settings.data_dir if settings.sources["data_dir"] != "default" else None,
            plugins=settings.plugins,
            config=str(settings.config_path) if settings.config_path is not None else None,
            models=settings.models,
            model_origin=settings.origin("model"),
            agent_events=bool(settings.get("agent_events")),
            loaded_config=settings.config,
            mcp_timeout=settings.get("mcp_timeout"),
            record=settings.get("record"),
        )

    def agent_loop_config(self) -> dict[str, Any]:
        """The agent loop's config: the file's agents, each defaulting to this daemon's model and system prompt
        (a configured agent without a model would fail its first step)."""
        specs: list[dict[str, Any]] = []
        for agent in self.loaded_config.agents if self.loaded_config is not None else []:
            spec = agent.model_dump(exclude_none=True)
            spec["model"] = agent.model or self.model
            system_prompt = agent.system_prompt if agent.system_prompt is not None else self.system_prompt
            if system_prompt is not None:
                spec["system_prompt"] = system_prompt
            specs.append(spec)
        return {"agents": specs}


_AGENT_EVENTS_KEY = "dsh.dev/agentEvents"
_MCP_TRANSPORTS = {"http": True, "sse": True}
"""What the MCP plugin the daemon loads advertises (``dsh.mcp`` manager's ``transports``); checked against the
front end's answer once built, like :func:`_announced`."""


def _announced(options: DaemonOptions) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """What the daemon's own ``initialize`` hooks announce for a first ``initialize``, without importing them:
    the agent events stream (:class:`dsh.agent_stream.AgentStream`) is on when forced or when the client asks.
    The daemon checks this against the front end's own answer once it is built (an error is logged if they
    differ), and a test compares both answers."""

    def announce(client_capabilities: dict[str, Any]) -> dict[str, Any]:
        meta = client_capabilities.get("_meta")
        asked = isinstance(meta, dict) and meta.get(_AGENT_EVENTS_KEY) is True
        return {_AGENT_EVENTS_KEY: True} if options.agent_events or asked else {}

    return announce


def _default_takes_images(options: DaemonOptions) -> bool:
    """Whether the default model takes images, by the rule the ``llm`` service follows once built (the provider's
    configured ``vision``, then dsh's table), without building it; checked against the front end's answer."""
    from dsh.images import takes_images

    provider = options.model.split(":", 1)[0] if ":" in options.model else None
    configured = options.loaded_config.providers.get(provider) if options.loaded_config and provider else None
    return takes_images(options.model, configured.vision if configured is not None else None)


def run(options: DaemonOptions) -> int:
    """Run the daemon until the editor hangs up; return the process exit code."""
    from dsh.frontends.acp._stdio import claim_stdout

    if os.isatty(0):
        sys.stderr.write("dsh acp: waiting for ACP messages on stdin (editors spawn this command; Ctrl-D quits)\n")
    from dsh._log import open_log
    from dsh.settings import SettingError, exit_on_error, fail

    with ExitStack() as stack:
        with exit_on_error():  # a log file that cannot be opened: one line, before stdout is claimed
            stack.enter_context(open_log(options.log_level, options.log_file))
        protocol_fd = claim_stdout()
        plugins: list[ExtraPlugin] = []
        if options.plugins:  # the bare start-up imports nothing it does not use
            from dsh.extra_plugins import import_plugins

            with exit_on_error():  # a bad DSH_PLUGINS entry: one line, status 2
                plugins = import_plugins(options.plugins)  # after the claim: imports may print
        try:
            return anyio.run(_serve, protocol_fd, options, plugins)
        except KeyboardInterrupt:
            return 0
        except SettingError as error:
            fail(error.message, error.exit_code)
        except BaseExceptionGroup as group:  # a plugin's set-up failed while the application was built
            matched, _ = group.split(SettingError)
            if matched is None:
                raise
            first = _first_leaf(matched)
            fail(first.message, first.exit_code)


def _first_leaf(group: BaseExceptionGroup[SettingError]) -> SettingError:
    inner = group.exceptions[0]
    return _first_leaf(inner) if isinstance(inner, BaseExceptionGroup) else inner


def _daemon_data_dir(value: str, source: str) -> str:
    return str(Path(value).expanduser())


def _report_storage(persistence: object) -> None:
    """One stderr line when the data directory cannot hold sessions. The daemon still serves (``initialize``
    works; every session call answers an error naming the directory and the setting), so an editor shows it."""
    problem = getattr(persistence, "unavailable", None)
    if isinstance(problem, str):
        sys.stderr.write(f"dsh acp: {problem}\n")
        sys.stderr.flush()


async def _watch_signals(stop: anyio.Event) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            stop.set()
            return


class _Frames:
    """Frames from stdin, one chunk's worth at a time (cancel-safe: its state is in the framer and the reader)."""

    def __init__(self, reader: StdinReader, recorder: Recorder | None = None) -> None:
        from dsh.jsonrpc import LineFramer

        self._reader = reader
        self._framer = LineFramer()
        self._recorder = recorder
        self.ended = False

    async def next(self) -> list[bytes | Oversized]:
        """The frames completed by the next chunk of input (possibly none); at the end, the last frame if any,
        and :attr:`ended` is set."""
        try:
            chunk = await self._reader.__anext__()
        except StopAsyncIteration:
            self.ended = True
            frames = self._framer.close()
        else:
            frames = self._framer.feed(chunk)
        if self._recorder is not None:
            for frame in frames:
                self._recorder.frame("in", frame if isinstance(frame, bytes) else b'"oversized frame"')
            if self.ended:
                self._recorder.eof()
        return frames


async def _first_frames(frames: _Frames, stop: anyio.Event) -> list[bytes | Oversized]:
    """Wait for the first frames (or the end of input, or a signal: then none)."""
    batch: list[bytes | Oversized] = []
    async with anyio.create_task_group() as group:

        async def on_stop() -> None:
            await stop.wait()
            group.cancel_scope.cancel()

        group.start_soon(on_stop)
        while not batch and not frames.ended:
            batch = await frames.next()
        group.cancel_scope.cancel()
    return batch


async def _serve(protocol_fd: int, options: DaemonOptions, plugins: list[ExtraPlugin]) -> int:
    """Answer the first ``initialize`` (:mod:`._boot`, standard library only), then build the application and
    serve everything else, in arrival order."""
    from dsh.frontends.acp._auth import auth_methods
    from dsh.frontends.acp._boot import fast_initialize
    from dsh.frontends.acp._stdio import FrameWriter, StdinReader

    writer = FrameWriter(protocol_fd)
    recorder = _recorder(options)
    send = recorder.outgoing(writer.send) if recorder is not None else writer.send
    stop = anyio.Event()
    async with anyio.create_task_group() as root:
        root.start_soon(writer.run, name="acp-writer")
        root.start_soon(_watch_signals, stop, name="acp-signals")
        reader = StdinReader(0)
        reader.start()
        frames = _Frames(reader, recorder)
        early = await _first_frames(frames, stop)
        initialized: dict[str, Any] | None = None
        boot_answer: bytes | None = None
        if early and isinstance(early[0], bytes) and not plugins:  # extra plugins' initialize hooks are unknown
            answered = fast_initialize(  # the daemon always stores sessions and always loads the MCP plugin
                early[0],
                durable=True,
                mcp=_MCP_TRANSPORTS,
                announce=_announced(options),
                auth=auth_methods,
                image=_default_takes_images(options),
            )
            if answered is not None:
                boot_answer, initialized = answered
                send(boot_answer)
                early = early[1:]
        if not stop.is_set():
            await _serve_app(writer, send, frames, early, (initialized, boot_answer), stop, options, plugins, recorder)
        writer.close()
        with anyio.move_on_after(WRITER_GRACE, shield=True):
            await writer.drained()
        root.cancel_scope.cancel()
    if recorder is not None:
        recorder.close()
    sys.stderr.flush()
    return 0


def _recorder(options: DaemonOptions) -> Recorder | None:
    """The run's recorder when ``--record`` / ``DSH_RECORD`` asks for one; it redacts with the policy of the
    configuration's providers and ``secrets`` section (what ``dsh config show`` lists as withheld)."""
    if options.record is None:
        return None
    from dsh.recording import Recorder
    from dsh.secrets import policy_for

    loaded = options.loaded_config
    policy = policy_for(loaded.providers if loaded else None, loaded.secrets if loaded else None)
    data_dir = options.data_dir or _default_data_dir()
    try:
        values = [value for value, _ in policy.secret_values(os.environ)]
        plain = all(
            value.isascii() and value.isprintable() and '"' not in value and "\\" not in value for value in values
        )
        recorder = Recorder(options.record, policy.redactor(), data_dir=data_dir, secrets_are_plain=plain)
    except OSError as exc:
        sys.stderr.write(f"dsh acp: cannot record to {options.record}: {exc.strerror}; not recording\n")
        return None
    recorder.header(
        model=options.model,
        models=list(options.models),
        cwd=os.getcwd(),
        dataDir=data_dir,
        agentEvents=options.agent_events,
        python=sys.executable,
    )
    return recorder


def _default_data_dir() -> str:
    from dsh.plugins.persistence import default_data_dir

    return str(default_data_dir())


GC_THRESHOLDS = (20_000, 20, 10)
"""Young-generation size and the two older ratios (CPython's defaults: 700, 10, 10). See :func:`_tune_gc`."""


def _tune_gc() -> None:
    """Make the cyclic collector cost what a streaming daemon can afford (RFC 0007).

    Every streamed chunk is a session event that lives until its step is saved: with CPython's default
    threshold a 200k-word reply set off hundreds of collections, each scanning the events still held, about a
    microsecond per chunk (measured). What the application built at start-up (modules, plugins, services) is
    moved out of the collector's sight (``gc.freeze``: it is never garbage), and the young generation is made
    larger so a collection runs once per many chunks. Reference counting still frees everything that is not in
    a cycle at once; memory held by cyclic garbage grows by at most the young generation's size."""
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def _seal_secrets(ctx: Context) -> None:
    """Once the policy is installed: provider keys leave the start-up environment block and the process becomes
    non-dumpable (:func:`dsh.secrets.seal_process`), so a command the model runs cannot read them from
    ``/proc/$PPID``; and the daemon becomes its descendants' subreaper (:func:`dsh.reaper.become_subreaper`).
    A platform that does not allow either is one warning, never a failed start."""
    from dsh.secrets import seal_and_adopt

    seal_and_adopt(lambda message, problem: log.warning(message, problem=problem), "dsh", ctx.get("secret_policy"))


class FrameSource(Protocol):
    """Where a connection's frames come from (stdin's :class:`_Frames`, a WebSocket's messages in ``dsh serve``)."""

    ended: bool
    """Set once the client's input has ended (after :meth:`next` returned the last frames)."""

    async def next(self) -> list[bytes | Oversized]:
        """The next frames (possibly none); at the end, the last ones, with :attr:`ended` set."""
        ...


async def serve_client(
    flow: FlowControl,
    send: Callable[[bytes], None],
    frames: FrameSource,
    stop: anyio.Event,
    options: DaemonOptions,
    plugins: list[ExtraPlugin],
    *,
    process_wide: bool = False,
) -> None:
    """Serve one ACP client on its own application, exactly as ``dsh acp`` serves its stdio client (the same
    front end, policy and shutdown), until its input ends or *stop* is set. *send* is its one ordered writer and
    *flow* that writer's back-pressure. Used by ``dsh serve`` for each WebSocket connection; the process-wide
    steps of the daemon (tuning the collector, sealing secrets, the subreaper) run once the application is built
    when *process_wide* is set: the caller sets it for its first client only."""
    await _serve_app(flow, send, frames, [], (None, None), stop, options, plugins, process_wide=process_wide)


async def _serve_app(
    writer: FlowControl,
    send: Callable[[bytes], None],
    frames: FrameSource,
    early: list[bytes | Oversized],
    boot: tuple[dict[str, Any] | None, bytes | None],
    stop: anyio.Event,
    options: DaemonOptions,
    plugins: list[ExtraPlugin],
    recorder: Recorder | None = None,
    *,
    process_wide: bool = True,
) -> None:
    """Build the application, then serve *early* and every later frame until EOF or a signal; shut down."""
    from dsh.app import load_product
    from dsh.frontends.acp._frontend import AcpFrontend, AcpOptions, acp_plugin
    from dsh.frontends.acp._wire import InitializeParams
    from dsh.images import DEFAULT_MAX_PER_PROMPT
    from dsh.kernel import App
    from dsh.plugins.persistence import default_data_dir
    from dsh.policy import policy_config

    async with App() as app:
        ctx = app.ctx
        loaded = options.loaded_config
        load_product(
            ctx,
            loaded,
            data_dir=options.data_dir or default_data_dir(),
            agent_loop=options.agent_loop_config(),
            policy=policy_config(loaded.permissions if loaded is not None else None),
            mcp_timeout=options.mcp_timeout,
        )
        _report_storage(ctx.get("session_persistence"))
        from dsh.plugins.memory import memory_plugin

        ctx.plugin(memory_plugin)  # closed sessions' cyclic garbage is collected (RFC 0031)
        if plugins:
            from dsh.extra_plugins import apply_plugins

            apply_plugins(ctx, plugins)
        problem = ctx.llm.unserved(options.model)
        if problem is not None:  # reported now, answered at session/new; the daemon keeps serving
            sys.stderr.write(f"dsh: {options.model_origin}: {problem}; session/new will answer this error\n")
            sys.stderr.flush()
        acp_options = AcpOptions(
            send,
            model=options.model,
            system_prompt=options.system_prompt,
            models=options.models or (options.model,),
            flow=writer,
            max_images=loaded.images.max_per_prompt if loaded is not None else DEFAULT_MAX_PER_PROMPT,
        )
        ctx.plugin(acp_plugin, acp_options)
        from dsh.agent_stream import agent_stream_plugin

        ctx.plugin(agent_stream_plugin, {"forced": options.agent_events})
        if options.replay_models is not None:  # last, where the recorder was: the innermost llm/stream listener
            from dsh.recording import replay_models_plugin

            ctx.plugin(replay_models_plugin, options.replay_models)
        if recorder is not None:  # last: its llm/stream listener is the innermost, next to the adapters
            from dsh.recording import recording_plugin

            ctx.plugin(recording_plugin, recorder)
        frontend: AcpFrontend = ctx.acp
        connection = frontend.connection
        if process_wide:
            _tune_gc()
            _seal_secrets(ctx)
        initialized, boot_answer = boot
        if initialized is not None:  # answered at boot: the front end records what initialize records
            result = await frontend.initialize(InitializeParams.model_validate(initialized))
            if boot_answer is None or json.loads(boot_answer).get("result") != result:
                log.error("the boot answer to initialize differs from the front end's", front_end=result)

        async with anyio.create_task_group() as handlers:

            async def read() -> None:
                batch = early
                while True:
                    for frame in batch:
                        await connection.receive(frame, handlers)
                    if frames.ended:
                        break
                    batch = await frames.next()
                stop.set()

            handlers.start_soon(read, name="acp-reader")
            await stop.wait()
            log.info("shutting down")
            with anyio.move_on_after(SHUTDOWN_GRACE, shield=True):
                await frontend.shutdown()
            hooks = ctx.get("hooks")
            if hooks is not None:  # the SessionEnd hooks of the sessions just closed (dsh.hooks), bounded
                with anyio.CancelScope(shield=True):
                    await hooks.settle(HOOKS_GRACE)
            handlers.cancel_scope.cancel()
        connection.close()
