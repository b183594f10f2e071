"""Assemble the default application: the five interface services, the offline models and the loop.

Front ends (the ACP daemon, the one-shot CLI, tests, benchmarks) all start from :func:`load_core` so that they
run the same plugin graph; each adds its own plugins on top.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from dsh.background import BackgroundConfig
    from dsh.config import DshConfig, ToolsConfig
    from dsh.context import ContextConfig
    from dsh.hooks import HooksConfig
    from dsh.kernel import Context
    from dsh.lsp import LspConfig
    from dsh.policy import PolicyConfig
    from dsh.providers import ProviderSettings
    from dsh.sandbox import SandboxConfig
    from dsh.secrets import SecretsConfig
    from dsh.skills import SkillsConfig
    from dsh.spend import SpendConfig
    from dsh.worktrees import WorktreesConfig

from dsh.settings import DEFAULT_MODEL

__all__ = ["DEFAULT_MODEL", "load_core", "load_product"]


def load_core(
    ctx: Context,
    *,
    agent_loop: dict[str, Any] | None = None,
    scripts: dict[str, Any] | None = None,
    data_dir: str | Path | None = None,
    builtin_tools: bool = True,
    providers: dict[str, ProviderSettings] | None = None,
    context: ContextConfig | dict[str, Any] | Literal[False] | None = None,
    secrets: SecretsConfig | None = None,
    tools: ToolsConfig | None = None,
    policy: PolicyConfig | Literal[False] | None = None,
    subagent_model: str | None = None,
    sandbox: SandboxConfig | None = None,
    lsp: LspConfig | None = None,
    skills: SkillsConfig | None = None,
    budget: SpendConfig | None = None,
    hooks: HooksConfig | None = None,
    hooks_source: str = "user",
    background: BackgroundConfig | None = None,
    worktrees: WorktreesConfig | None = None,
) -> None:
    """Load the interface services, the ``commands`` service with the built-in commands, the ``echo`` and ``scripted`` models, the remote providers (the built-ins,
    with *providers* merged over them) and the agent loop into *ctx*; with *data_dir*, also the JSONL session
    persistence (sessions become durable and resumable). ``builtin_tools=False`` leaves out the coding tools
    (for tests of the loop alone). *context* configures the ``context`` plugin (system prompt sections, context
    accounting, compaction; :mod:`dsh.context`); ``context=False`` leaves it out (tests of the loop alone: no
    built-in section at all). The ``secrets`` plugin (*providers* and the file's *secrets* section) decides
    what the processes started for tools do not see and redacts tool results. *policy* configures the tool call
    pipeline and the permission policy (:mod:`dsh.policy`; default: ``default`` mode, no rules, nobody to ask, so
    a call that would ask is refused); ``policy=False`` leaves it out (tests of the tools and the loop alone:
    calls run unattended, as a direct ``ctx.tools.execute`` would). *subagent_model* is the sub-agents' default
    model (:mod:`dsh.subagents`; None: the parent's). *sandbox* is the file's ``sandbox`` section (:mod:`dsh.sandbox`:
    at which level commands run; the ``sandbox`` plugin is always loaded). *lsp* is the file's ``lsp`` section
    (:mod:`dsh.lsp`: the ``diagnose`` stage; loaded unless ``enabled: false``; None: not loaded, as in tests of
    the core alone; :func:`load_product` always passes one, ``auto`` by default, ``DSH_LSP`` applied). *budget* is
    the file's ``budget`` section (:mod:`dsh.spend`: the spend budgets; the plugin is always loaded, so ``/budget``
    works without it). *hooks* is the file's ``hooks`` section (:mod:`dsh.hooks`, whose file *hooks_source* names;
    loaded with the policy: a project's hooks are found even when the file configures none).
    *background* is the file's ``background`` section (:mod:`dsh.background`: ended background commands told to
    the model, wake-up turns).
    *worktrees* is the file's ``worktrees`` section (:mod:`dsh.worktrees`: the ``worktrees`` service, which needs
    *data_dir*, and ``/worktree``).

    Application order does not matter: each plugin applies once the services it injects exist, and the
    packages that wrap a tool call (sub-agent limits, the policy, checkpoints, the reaper, secret redaction, the
    output budget) each join a named stage of the tool pipeline, whose order is declared once
    (:data:`dsh.services.tools.STAGES`), not produced by this call order. Disposal is the reverse of this call
    order, so persistence is loaded first and goes last.
    """
    from dsh.commands import builtin_commands_plugin, commands_plugin
    from dsh.context import context_plugin
    from dsh.loop import agent_loop_plugin
    from dsh.providers.echo import echo_plugin
    from dsh.providers.remote import remote_providers_plugin
    from dsh.providers.scripted import scripted_plugin
    from dsh.reaper import reaper_plugin
    from dsh.secrets import secrets_plugin
    from dsh.services.agents import agents_plugin
    from dsh.services.llm import llm_plugin
    from dsh.services.sessions import sessions_plugin
    from dsh.services.system_prompt import system_prompt_plugin
    from dsh.services.tools import tools_plugin
    from dsh.tools import builtin_tools_plugin

    if data_dir is not None:
        from dsh.plugins.persistence import jsonl_persistence_plugin

        ctx.plugin(jsonl_persistence_plugin, data_dir)
    ctx.plugin(agent_loop_plugin, agent_loop or {})
    ctx.plugin(echo_plugin)
    ctx.plugin(scripted_plugin, {"scripts": scripts or {}})
    ctx.plugin(remote_providers_plugin, providers)
    ctx.plugin(secrets_plugin, {"providers": providers, "secrets": secrets})
    ctx.plugin(reaper_plugin)
    from dsh.sandbox import sandbox_plugin

    ctx.plugin(sandbox_plugin, {"config": sandbox, "data_dir": str(data_dir) if data_dir is not None else None})
    ctx.plugin(tools_plugin)
    ctx.plugin(llm_plugin)
    ctx.plugin(agents_plugin)
    ctx.plugin(sessions_plugin)
    ctx.plugin(system_prompt_plugin)
    if context is not False:
        ctx.plugin(context_plugin, context)
    if policy is not False:
        from dsh.policy import policy_plugin

        ctx.plugin(policy_plugin, policy)
    from dsh.choices import choices_plugin

    ctx.plugin(choices_plugin)
    ctx.plugin(commands_plugin)
    ctx.plugin(builtin_commands_plugin)
    from dsh.spend import spend_plugin

    ctx.plugin(spend_plugin, budget)
    if builtin_tools:
        from dsh.plans import plans_plugin
        from dsh.questions import questions_plugin

        ctx.plugin(
            builtin_tools_plugin,
            {
                "data_dir": str(data_dir) if data_dir is not None else None,
                "fetch_private": bool(tools and tools.fetch_private),
            },
        )
        ctx.plugin(plans_plugin)
        ctx.plugin(questions_plugin)
        from dsh.subagents import SubagentsConfig, subagents_plugin

        ctx.plugin(subagents_plugin, SubagentsConfig(model=subagent_model))
        from dsh.skills import skills_plugin

        ctx.plugin(skills_plugin, skills)  # the skills section, the skill tool, /name and /skills (RFC 0035)
        from dsh.checkpoints import checkpoints_plugin

        ctx.plugin(
            checkpoints_plugin, {"max_file_size": int(tools.checkpoint_max_file_size)} if tools is not None else None
        )
        from dsh.background import background_plugin

        ctx.plugin(background_plugin, background)
    from dsh.sandbox import sandbox_command_plugin

    ctx.plugin(sandbox_command_plugin)
    from dsh.worktrees import worktrees_plugin

    ctx.plugin(worktrees_plugin, {"config": worktrees, "data_dir": str(data_dir) if data_dir is not None else None})
    if lsp is not None and lsp.active:
        from dsh.lsp import lsp_plugin

        ctx.plugin(lsp_plugin, lsp)
    if policy is not False:  # after the policy: its PreToolUse step follows the policy's in the decide stage
        from dsh.hooks import HooksConfig, HooksOptions, hooks_plugin

        data = str(data_dir) if data_dir is not None else None
        ctx.plugin(hooks_plugin, HooksOptions(hooks or HooksConfig(), hooks_source, data))


def load_product(
    ctx: Context,
    config: DshConfig | None,
    *,
    data_dir: str | Path | None,
    policy: PolicyConfig,
    mcp_timeout: float,
    agent_loop: dict[str, Any] | None = None,
) -> None:
    """The product as the configuration file *config* describes it, the one assembly every front end uses: the core
    (:func:`load_core`) with the file's providers, context, secrets, sandbox, tools and sub-agent sections, the
    front end's *policy* and *data_dir* (None: nothing stored), then the MCP servers of the file
    (``mcp_servers``; *mcp_timeout*: seconds a server gets to start when it does not say)."""
    import os

    from dsh.context import context_from_file
    from dsh.lsp import from_environment as lsp_settings
    from dsh.mcp import McpOptions, mcp_plugin

    load_core(
        ctx,
        data_dir=data_dir,
        agent_loop=agent_loop,
        providers=config.providers if config is not None else None,
        context=context_from_file(config),
        secrets=config.secrets if config is not None else None,
        sandbox=config.sandbox if config is not None else None,
        tools=config.tools if config is not None else None,
        policy=policy,
        subagent_model=config.subagent_model if config is not None else None,
        lsp=lsp_settings(config.lsp if config is not None else None, os.environ),
        skills=config.skills if config is not None else None,
        budget=config.budget if config is not None else None,
        hooks=config.hooks if config is not None else None,
        background=config.background if config is not None else None,
        worktrees=config.worktrees if config is not None else None,
    )
    ctx.plugin(mcp_plugin, McpOptions(config.mcp_servers if config is not None else {}, mcp_timeout))
