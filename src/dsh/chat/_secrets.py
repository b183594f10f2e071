"""The chat's secrets: what a command it runs for the agent (``terminal/create``) gets, and the chat's own seal.

Guarantees:

* :func:`command_environment`: the same variables are withheld as when dsh runs the command itself (RFC 0012):
  the provider keys of the built-in providers and of the configuration file's ``providers``, every variable
  holding one of their values, ``DSH_*`` names that look like secrets, and the file's ``secrets.remove``
  patterns (``pass_through`` honoured). The file is the one ``dsh acp`` would read (``--config``, else
  ``DSH_CONFIG``, else the default path); a file that does not load leaves the built-in rules, never fewer.
  The file is read once, at the first command, so start-up never pays for the configuration's models.
* :func:`seal_chat` (issue 34 item 2, RFC 0030): the chat seals its own process as ``dsh acp`` does
  (:func:`dsh.secrets.seal_process`): the withheld values leave its start-up environment block and libc's
  ``environ``, and the process becomes non-dumpable, so a command it runs cannot read a key from
  ``/proc/$PPID/environ`` or the chat's memory. :func:`sealed` does it once, with the configuration file's
  rules, in a worker thread (the policy's imports cost about 100 ms, kept off the first prompt line and off
  the session's start): the client starts it with ``initialize`` and awaits it before every ``session/prompt``
  (before the model can run anything) and before every command it runs itself. Python's ``os.environ`` keeps the values: the agent the chat starts gets them in
  its (explicit) environment, and nothing else does.
"""

from __future__ import annotations

import os
from functools import cache

from dsh.secrets import SecretPolicy

__all__ = ["command_environment", "seal_chat", "sealed"]

_sealed_with: set[int] = set()
_sealing: list[object] = []


def command_environment(config: str | None) -> dict[str, str]:
    """The chat's environment now, minus what the policy withholds (the chat is sealed with it first)."""
    policy = _policy(config)
    seal_chat(policy)
    return policy.child_environment(os.environ)


def seal_chat(policy: SecretPolicy | None = None) -> list[str]:
    """Seal this process with *policy* (default: the built-in rules); once per policy. The problems met, as
    short texts (see :func:`dsh.secrets.seal_process`)."""
    from dsh.secrets import current_policy, seal_process

    policy = policy if policy is not None else current_policy()
    if id(policy) in _sealed_with:
        return []
    _sealed_with.add(id(policy))
    return seal_process(policy)


async def sealed(config: str | None) -> None:
    """Return once this process is sealed with *config*'s policy (the first caller seals, in a worker thread;
    the others wait for it)."""
    import anyio

    from dsh._log import get_logger

    if not _sealing:
        _sealing.append(anyio.Event())
        done = _sealing[0]
        assert isinstance(done, anyio.Event)
        try:
            problems = await anyio.to_thread.run_sync(lambda: seal_chat(_policy(config)))
        finally:
            done.set()
        for problem in problems:
            get_logger("dsh.chat").warning("cannot keep secrets from child processes", problem=problem)
        return
    event = _sealing[0]
    assert isinstance(event, anyio.Event)
    await event.wait()


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
