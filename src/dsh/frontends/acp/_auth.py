"""Authentication as the current ACP spec has it, for an agent whose credentials are provider keys.

dsh signs in to nothing: a model's provider key comes from the environment or the configuration file. What the
spec's authentication gives an editor is a way to *get* that key set up and a precise error when it is missing:

* ``initialize`` offers the agent method :data:`AGENT_METHOD_ID` always (the ACP registry requires one method
  of type ``agent`` or ``terminal``), and the terminal method :data:`TERMINAL_METHOD_ID` only when the client
  advertised ``clientCapabilities.auth.terminal``: the client then runs our own command with ``args``
  (``setup``: the interactive ``dsh setup``) in a terminal and reconnects; it never calls ``authenticate`` for it.
* ``authenticate`` with the agent method checks that the default model's provider has its key: ``{}`` when it
  has (or needs none), the auth-required error (-32000) saying what to set otherwise. It also undoes ``logout``.
* ``logout`` (advertised as ``agentCapabilities.auth.logout``) makes this connection forget that it was
  authenticated: until the next successful ``authenticate``, a prompt to a model that needs a key answers -32000.
  It deletes no key (they belong to the user's environment and file).
* A prompt whose model needs a key that is missing answers -32000 with a message naming the variable to set and
  ``dsh setup`` (:meth:`AuthState.check_prompt`), before the turn starts.

Not here: storing keys (``dsh setup`` writes the configuration file), OAuth or any browser flow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # imported where used: auth_methods runs at boot, before the JSON-RPC layer is imported
    from dsh.frontends.acp._rpc import RpcError

__all__ = ["AGENT_METHOD_ID", "AUTH_REQUIRED", "TERMINAL_METHOD_ID", "AuthState", "auth_methods"]

AGENT_METHOD_ID = "dsh-local"
TERMINAL_METHOD_ID = "dsh-setup"
AUTH_REQUIRED = -32000


def _supports_terminal_auth(client_capabilities: dict[str, Any]) -> bool:
    auth = client_capabilities.get("auth")
    return isinstance(auth, dict) and auth.get("terminal") is True


def auth_methods(client_capabilities: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``authMethods`` of ``initialize``: the agent method, and the terminal one when the client runs it."""
    methods: list[dict[str, Any]] = []
    if _supports_terminal_auth(client_capabilities):
        methods.append(
            {
                "type": "terminal",
                "id": TERMINAL_METHOD_ID,
                "name": "Set up dsh",
                "description": "Choose a provider, enter its API key and a default model (runs `dsh setup`).",
                "args": ["setup"],
                "env": {},
            }
        )
    methods.append(
        {
            "id": AGENT_METHOD_ID,
            "name": "Use configured keys",
            "description": (
                "dsh uses provider keys from the environment or its configuration file; "
                "run `dsh setup` in a terminal to set one up."
            ),
        }
    )
    return methods


def auth_required(model: str, missing: str) -> RpcError:
    from dsh.frontends.acp._rpc import RpcError

    return RpcError(
        AUTH_REQUIRED,
        f"Authentication required: model {model} needs an API key: set {missing} "
        "(or run `dsh setup` in a terminal), then restart the agent",
        {"model": model, "missing": missing},
    )


class Credentials(Protocol):
    """What the llm service knows about keys (:class:`~dsh.services.llm.LlmService`)."""

    def missing_credentials(self, model: str) -> str | None: ...

    def uses_credentials(self, model: str) -> bool: ...


class AuthState:
    """One connection's authentication state, over the llm service's credential checks."""

    def __init__(self, credentials: Credentials) -> None:
        self._credentials = credentials
        self.logged_out = False

    def _missing(self, model: str) -> str | None:
        return self._credentials.missing_credentials(model)

    def authenticate(self, method_id: str, model: str) -> dict[str, Any]:
        from dsh.frontends.acp._rpc import INVALID_PARAMS, RpcError

        if method_id == TERMINAL_METHOD_ID:
            raise RpcError(
                INVALID_PARAMS,
                f"{TERMINAL_METHOD_ID!r} is a terminal method: run the agent with its args in a terminal instead",
            )
        if method_id != AGENT_METHOD_ID:
            raise RpcError(INVALID_PARAMS, f"unknown authentication method {method_id!r}; use {AGENT_METHOD_ID!r}")
        missing = self._missing(model)
        if missing is not None:
            raise auth_required(model, missing)
        self.logged_out = False
        return {}

    def logout(self) -> dict[str, Any]:
        self.logged_out = True
        return {}

    def check_prompt(self, model: str) -> None:
        """Raise the auth-required error when *model* needs a key that is missing (or this connection logged out
        and the model needs a key at all)."""
        from dsh.frontends.acp._rpc import RpcError

        missing = self._missing(model)
        if missing is not None:
            raise auth_required(model, missing)
        if self.logged_out and self._credentials.uses_credentials(model):
            raise RpcError(
                AUTH_REQUIRED,
                f"Authentication required: logged out; call authenticate with {AGENT_METHOD_ID!r} to use {model}",
                {"model": model},
            )
