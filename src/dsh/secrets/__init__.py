"""Secrets stay with dsh: the environment of the processes it starts for tools, and redaction of tool output.

``child_environment()`` is the environment every process dsh starts for a tool gets (``run_command`` locally,
stdio MCP servers, hooks): the daemon's environment minus the provider keys and other secrets of the current
:class:`SecretPolicy` (see :mod:`dsh.secrets._policy` for the rules). The ``secrets`` plugin (loaded by
:func:`dsh.app.load_core`) provides the policy built from the configuration as the ``secret_policy`` service,
puts it in force around every tool call (:func:`policy_in_force`) and redacts tool results. There is no
process-wide policy: code outside a tool call passes its application's policy (``ctx.get("secret_policy")``)
or gets :func:`default_policy`.

:func:`seal_process` (called once by the daemon after start-up) scrubs the withheld variables from the process's
start-up environment block (what ``/proc/PID/environ`` shows a command) and makes it non-dumpable.

Importing this package imports no pydantic model: :class:`SecretsConfig` and the plugin load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dsh.secrets._policy import (
    SecretPolicy,
    child_environment,
    current_policy,
    default_policy,
    policy_in_force,
    redact_json,
    redact_text,
)
from dsh.secrets._seal import seal_and_adopt, seal_process

if TYPE_CHECKING:
    from dsh.secrets._config import SecretsConfig
    from dsh.secrets._plugin import describe_withheld, policy_for, secrets_plugin

__all__ = [
    "SecretPolicy",
    "SecretsConfig",
    "child_environment",
    "current_policy",
    "default_policy",
    "describe_withheld",
    "policy_for",
    "policy_in_force",
    "redact_json",
    "redact_text",
    "seal_and_adopt",
    "seal_process",
    "secrets_plugin",
]


def __getattr__(name: str) -> Any:
    if name == "SecretsConfig":
        from dsh.secrets._config import SecretsConfig

        return SecretsConfig
    if name in ("secrets_plugin", "policy_for", "describe_withheld"):
        from dsh.secrets import _plugin

        return getattr(_plugin, name)
    raise AttributeError(f"module 'dsh.secrets' has no attribute {name!r}")
