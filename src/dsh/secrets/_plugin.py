"""The ``secrets`` plugin: installs the application's :class:`~dsh.secrets.SecretPolicy` and redacts tool results.

Guarantees while it is loaded:

* The policy built from this plugin's providers and ``secrets`` section is the ``secret_policy`` service
  (withdrawn when the plugin's scope is disposed) and the :func:`dsh.secrets.current_policy` of every tool call
  of this application (:func:`dsh.secrets.policy_in_force` around the pipeline's inner stages), so
  :func:`dsh.secrets.child_environment` in a command, a background command or a language server started by a
  call uses it.
* Every tool result leaves the tool pipeline with the secret values of the policy replaced by
  ``[redacted NAME]`` in its content text, its error and its display (the ``redact`` stage wraps every stage but
  ``budget``, whatever the load order: what the model, the session file, the spill file and the editor get is
  redacted). An exception of an inner stage or tool becomes the usual error result first, then is redacted.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from dsh.kernel import plugin
from dsh.secrets._policy import SecretPolicy, policy_in_force, redact_json

if TYPE_CHECKING:
    from dsh.kernel import Context, Next
    from dsh.providers import ProviderSettings
    from dsh.secrets._config import SecretsConfig
    from dsh.services.tools import ToolExecution, ToolResult

__all__ = ["describe_withheld", "policy_for", "redact_result", "secrets_plugin"]


def policy_for(providers: dict[str, ProviderSettings] | None, config: SecretsConfig | None) -> SecretPolicy:
    """The policy of *providers* (merged over the built-ins) and the file's ``secrets`` section."""
    return SecretPolicy.build(
        providers,
        remove=config.remove if config is not None else (),
        pass_through=config.pass_through if config is not None else (),
        redact_prompts=config.redact_prompts if config is not None else True,
    )


class _EnvRedactor:
    """The policy's redactor for ``os.environ`` as it is now, built again only when the environment changed
    (building it walks every variable: tens of microseconds per tool call otherwise). The environment is compared
    by its raw mapping, a C-level dict comparison; where the interpreter keeps none, it is built every time."""

    __slots__ = ("_env", "_policy", "_redact")

    def __init__(self, policy: SecretPolicy) -> None:
        self._policy = policy
        self._env: dict[Any, Any] | None = None
        self._redact: Callable[[str], str] | None = None

    def __call__(self) -> Callable[[str], str]:
        data = getattr(os.environ, "_data", None)
        if not isinstance(data, dict):
            return self._policy.redactor()
        if self._redact is None or data != self._env:
            self._env = dict(data)
            self._redact = self._policy.redactor()
        return self._redact


def redact_result(result: ToolResult, policy: SecretPolicy, redact: Callable[[str], str] | None = None) -> ToolResult:
    """*result* with every secret value replaced; the same object when it holds none. *redact*: the policy's
    redactor for the environment now, when the caller keeps one."""
    if redact is None:
        redact = policy.redactor()
    content: Any = redact_json(result.content, redact)
    error = redact_json(result.error, redact) if result.error is not None else None
    display = redact_json(result.display, redact) if result.display is not None else None
    if content == result.content and error == result.error and display == result.display:
        return result
    return replace(result, content=content, error=error, display=display)


@plugin("secrets", inject=("tools",))
def secrets_plugin(ctx: Context, config: dict[str, Any] | None) -> None:
    """*config*: ``{"providers": dict[str, ProviderSettings] | None, "secrets": SecretsConfig | None}``."""
    config = config or {}
    policy = policy_for(config.get("providers"), config.get("secrets"))
    redactor = _EnvRedactor(policy)

    async def redacting(execution: ToolExecution, next_: Next[ToolExecution, ToolResult]) -> ToolResult:
        from dsh.services.tools import error_result

        try:
            with policy_in_force(policy):
                result = await next_()
        except Exception as exc:  # the registry would turn it into this same result, unredacted
            result = error_result(execution.call_id, exc)
        return redact_result(result, policy, redactor())

    ctx.tools.stage("redact", redacting)
    ctx.provide("secret_policy", policy)  # last: providing applies plugins waiting for it, before this set-up's end


def describe_withheld(
    providers: dict[str, ProviderSettings] | None, config: SecretsConfig | None, env: Mapping[str, str]
) -> list[str]:
    """Comment lines for ``dsh config show``: the variables of *env* that commands will not see, and the rules
    (names and patterns only, never a value)."""
    policy = policy_for(providers, config)
    hidden = policy.withheld(env)
    lines = [f"# commands dsh runs will not see: {', '.join(hidden) if hidden else 'nothing set now'}"]
    rules = [f"provider keys {', '.join(sorted(policy.key_variables))}", "DSH_* names with KEY, TOKEN, SECRET, …"]
    if policy.remove:
        rules.append(f"secrets.remove {', '.join(policy.remove)}")
    lines.append(f"# (whenever set: {'; '.join(rules)}; any variable holding a provider's key)")
    if policy.pass_through:
        lines.append(f"# passed through anyway: {', '.join(sorted(policy.pass_through))}")
    return lines
