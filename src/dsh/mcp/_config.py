"""Where MCP servers come from: the ``mcp_servers`` section of the configuration file and the ACP ``mcpServers``
of ``session/new`` / ``load`` / ``resume``, both turned into one plain :class:`ServerSpec`.

Nothing here imports the MCP SDK. An ACP entry that cannot be understood never fails the session: it becomes a
spec with ``problem`` set, and the server fails visibly (its failure card) like one that does not start.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["DEFAULT_TIMEOUT", "McpServerConfig", "ServerSpec", "merge_servers", "specs_from_acp", "specs_from_config"]

DEFAULT_TIMEOUT = 10.0
"""Seconds a server gets to start and answer ``initialize`` and ``tools/list`` (``DSH_MCP_TIMEOUT`` overrides)."""

Transport = Literal["stdio", "http", "sse"]


class McpServerConfig(BaseModel):
    """One server of the configuration file's ``mcp_servers`` section (keyed by its name): the ACP shapes, with
    ``env`` and ``headers`` as mappings. ``type`` defaults to ``stdio`` (``command`` required) and is ``http`` or
    ``sse`` for a URL."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    type: Transport = "stdio"
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    timeout: float | None = Field(default=None, gt=0)
    """Seconds this server gets to start (default :data:`DEFAULT_TIMEOUT`)."""

    def model_post_init(self, _context: Any) -> None:
        if self.type == "stdio" and not self.command:
            raise ValueError("a stdio server needs a command")
        if self.type != "stdio" and not self.url:
            raise ValueError(f"an {self.type} server needs a url")


@dataclass(frozen=True)
class ServerSpec:
    """One server to connect, whatever its source. ``problem``: why it cannot even be tried (reported as its
    failure)."""

    name: str
    transport: Transport = "stdio"
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float = DEFAULT_TIMEOUT
    source: Literal["editor", "config"] = "editor"
    problem: str | None = None


def _pairs(value: Any, what: str) -> dict[str, str]:
    """ACP ``[{name, value}]`` lists (``env``, ``headers``) as a mapping."""
    if value is None:
        return {}
    if not isinstance(value, list):
        raise ValueError(f"{what} must be a list of {{name, value}}")
    pairs: dict[str, str] = {}
    for item in value:
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("name"), str)
            or not isinstance(item.get("value"), str)
        ):
            raise ValueError(f"{what} must be a list of {{name, value}} strings")
        pairs[item["name"]] = item["value"]
    return pairs


def _spec_from_acp(entry: Any, index: int, timeout: float) -> ServerSpec:
    name = entry.get("name") if isinstance(entry, dict) else None
    label = name if isinstance(name, str) and name else f"#{index + 1}"
    try:
        if not isinstance(entry, dict):
            raise ValueError("an MCP server must be an object")
        if not isinstance(name, str) or not name:
            raise ValueError("name is missing")
        kind = entry.get("type", "stdio")
        if kind in ("http", "sse"):
            url = entry.get("url")
            if not isinstance(url, str) or not url:
                raise ValueError("url is missing")
            return ServerSpec(label, kind, url=url, headers=_pairs(entry.get("headers"), "headers"), timeout=timeout)
        if kind != "stdio":
            raise ValueError(f"transport {kind!r} is not supported")
        command = entry.get("command")
        args = entry.get("args") or []
        if not isinstance(command, str) or not command:
            raise ValueError("command is missing")
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ValueError("args must be a list of strings")
        return ServerSpec(
            label, "stdio", command=command, args=tuple(args), env=_pairs(entry.get("env"), "env"), timeout=timeout
        )
    except ValueError as exc:
        return ServerSpec(label, problem=f"invalid server entry: {exc}", timeout=timeout)


def specs_from_acp(entries: Iterable[Any], timeout: float = DEFAULT_TIMEOUT) -> list[ServerSpec]:
    """The ACP ``mcpServers`` as specs, in order; a later entry with the same name replaces an earlier one."""
    specs: dict[str, ServerSpec] = {}
    for index, entry in enumerate(entries):
        spec = _spec_from_acp(entry, index, timeout)
        specs[spec.name] = spec
    return list(specs.values())


def specs_from_config(servers: Mapping[str, McpServerConfig], timeout: float = DEFAULT_TIMEOUT) -> list[ServerSpec]:
    return [
        ServerSpec(
            name,
            server.type,
            command=server.command or "",
            args=tuple(server.args),
            env=dict(server.env),
            cwd=server.cwd,
            url=server.url or "",
            headers=dict(server.headers),
            timeout=server.timeout or timeout,
            source="config",
        )
        for name, server in servers.items()
    ]


def merge_servers(configured: Iterable[ServerSpec], given: Iterable[ServerSpec]) -> list[ServerSpec]:
    """The configuration file's servers, then the editor's; an editor-given server of the same name wins."""
    merged = {spec.name: spec for spec in configured}
    for spec in given:
        merged.pop(spec.name, None)
        merged[spec.name] = spec
    return list(merged.values())
