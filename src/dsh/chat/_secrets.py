"""The environment of a command the chat runs for the agent (``terminal/create``).

Guarantee: the same variables are withheld as when dsh runs the command itself (RFC 0012): the provider keys
of the built-in providers and of the configuration file's ``providers``, every variable holding one of their
values, ``DSH_*`` names that look like secrets, and the file's ``secrets.remove`` patterns (``pass_through``
honoured). The file is the one ``dsh acp`` would read (``--config``, else ``DSH_CONFIG``, else the default
path); a file that does not load leaves the built-in rules, never fewer. The file is read once, at the first
command, so start-up never pays for the configuration's models.
"""

from __future__ import annotations

import os
from functools import cache

from dsh.secrets import SecretPolicy

__all__ = ["command_environment"]


def command_environment(config: str | None) -> dict[str, str]:
    """The chat's environment now, minus what the policy withholds."""
    return _policy(config).child_environment(os.environ)


@cache
def _policy(config: str | None) -> SecretPolicy:
    from dsh.config import ConfigError, find_config_file, load_config
    from dsh.secrets import current_policy, policy_for

    try:
        path = find_config_file(config or os.environ.get("DSH_CONFIG") or None)
        if path is None:
            return current_policy()
        loaded = load_config(path)
    except ConfigError:
        return current_policy()
    return policy_for(loaded.providers, loaded.secrets)
