"""The plugin that loads the built-in tools; declared apart so that ``import dsh.tools`` stays light.

Start-up registers the tools from :mod:`dsh.tools._catalogue` (plain data: names, kinds, descriptions, argument
schemas) and provides the ``workspace`` service; the tool bodies, pydantic argument models included, are
imported the first time any tool is called, presented or checked. The registered definitions behave exactly
like the real ones (a test compares them), they only load late.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from dsh import events as ev
from dsh.kernel import plugin

if TYPE_CHECKING:
    from dsh.kernel import Context, Next
    from dsh.services.tools import ToolDefinition, ToolExecution, ToolResult
    from dsh.tools._background import BackgroundCommands
    from dsh.tools._ledger import ReadLedger
    from dsh.tools._workspace import Workspace

__all__ = ["PREPARED", "builtin_tools_plugin"]

PREPARED = frozenset({"write_file", "edit_file", "notebook_edit", "run_command", "delete_file"})
"""The built-in tools with a prepare stage (a test checks this against the real definitions)."""


class _LazyTools:
    """The real tool definitions, built on first use over the plugin's workspace."""

    def __init__(
        self,
        workspace: Workspace,
        ledger: ReadLedger,
        background: BackgroundCommands,
        fetch_private: bool,
        spill_root: str,
    ) -> None:
        self._spill_root = spill_root
        self._workspace = workspace
        self._ledger = ledger
        self._background = background
        self._fetch_private = fetch_private
        self._real: dict[str, ToolDefinition] | None = None

    def get(self, name: str) -> ToolDefinition:
        if self._real is None:
            from dsh.tools._builtin import build_tools

            self._real = {
                tool.name: tool
                for tool in build_tools(
                    self._workspace,
                    self._ledger,
                    self._background,
                    fetch_private=self._fetch_private,
                    spill_root=self._spill_root,
                )
            }
        return self._real[name]

    def execute(self, name: str) -> Any:
        async def execute(arguments: Any, execution: ToolExecution) -> Any:
            return await self.get(name).execute(arguments, execution)

        return execute

    def prepare(self, name: str) -> Any:
        async def prepare(arguments: Any, execution: ToolExecution) -> Any:
            real = self.get(name).prepare
            assert real is not None
            return await real(arguments, execution)

        return prepare

    def meta(self, name: str, key: str) -> Any:
        def call(arguments: Any, cwd: str) -> Any:
            return self.get(name).meta[key](arguments, cwd)

        return call


def _finisher(workspace: Workspace) -> Callable[[ToolExecution, Next[ToolExecution, ToolResult]], Any]:
    """The ``apply`` stage over *workspace*'s grants (revoked when each call ends)."""

    async def finish(execution: ToolExecution, next_: Next[ToolExecution, ToolResult]) -> ToolResult:
        from dsh.tools._builtin import finish_call

        return await finish_call(execution, next_, workspace.grants)

    return finish


@plugin("builtin_tools", inject=("tools",))
def builtin_tools_plugin(ctx: Context, config: Mapping[str, Any] | None) -> None:
    """Provide the ``workspace`` and ``background_commands`` services and register the built-in tools (see
    :mod:`dsh.tools`). *config*: ``data_dir`` (where spills go: beside durable sessions) and ``fetch_private``
    (``fetch_url`` may reach private and loopback addresses). Everything is owned by this plugin's scope:
    disposing it withdraws the services, removes the tools and stops every background command."""
    from dsh.services.tools import ToolDefinition
    from dsh.tools._background import BackgroundCommands
    from dsh.tools._budget import budget_step, default_spill_root
    from dsh.tools._catalogue import ASKS, CATALOGUE, CONCURRENT
    from dsh.tools._ledger import ReadLedger
    from dsh.tools._workspace import Workspace

    options = dict(config or {})
    workspace = Workspace(ctx)
    ctx.provide("workspace", workspace)
    ctx.effect(workspace.clear)  # this application's grants and spill roots end with the plugin
    ctx.tools.stage("apply", _finisher(workspace))
    spill_root, temporary = default_spill_root(options.get("data_dir"))
    remove_spill_root = workspace.add_spill_root(spill_root)

    def drop_spills() -> None:
        remove_spill_root()
        if temporary:
            import shutil

            shutil.rmtree(spill_root, ignore_errors=True)

    ctx.effect(drop_spills)
    # The output budget is the pipeline's ``budget`` stage: outside ``redact`` whatever the load order, so what
    # is spilled is redacted too; it runs once per call.
    ctx.tools.stage("budget", budget_step(spill_root))
    ledger = ReadLedger()
    background = BackgroundCommands(ctx)
    ctx.provide("background_commands", background)
    ctx.effect(background.kill_all)

    def session_disposed(session: Any) -> None:
        ledger.forget(session.id)
        if background.list(session.id):
            ctx.spawn(background.kill_session, session.id, name=f"background-kill:{session.id}")

    ctx.on(ev.SESSION_DISPOSED, session_disposed)
    lazy = _LazyTools(workspace, ledger, background, bool(options.get("fetch_private", False)), spill_root)
    for spec in CATALOGUE:
        meta = {
            "kind": spec.kind,
            "present": lazy.meta(spec.name, "present"),
            "paths": lazy.meta(spec.name, "paths"),
            "concurrency_safe": spec.name in CONCURRENT,
            "asks": spec.name in ASKS,
        }
        if spec.name == "fetch_url":
            from dsh.tools._fetch import fetch_domain

            meta["domain"] = fetch_domain
        prepare = lazy.prepare(spec.name) if spec.name in PREPARED else None
        ctx.tools.register(
            ToolDefinition(
                spec.name, spec.description, spec.parameters, lazy.execute(spec.name), meta=meta, prepare=prepare
            )
        )
