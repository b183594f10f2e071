"""The configuration file: one YAML file for the default model, the models offered in the editor's model picker,
the providers, the agents started with the daemon, the system prompt and the data directory.

Which file (:func:`find_config_file`): ``--config``, else ``DSH_CONFIG``, else
``$XDG_CONFIG_HOME/dsh/config.yaml`` (``~/.config/dsh/config.yaml``) when that file exists; no file at all is
not an error (every setting has a default). The daemon reads it in exactly one place,
``DaemonOptions.resolve``, where flags and ``DSH_*`` variables override what it says.

Guarantees:

* An unknown key at any level is an error, never a silently ignored typo.
* Every failure to load is a :class:`ConfigError` whose message names the file and, for each problem, its line,
  its dotted location and what is wrong (``line 7: providers.deepseek.timeout: Input should be greater than
  0``); YAML syntax errors give line and column. Messages never quote a configured value (it may be a secret),
  only its kind (``got a list``).
* :func:`render_config` masks every inline ``api_key``, every secret-looking header value and a password in a
  ``base_url`` as ``***``; environment variables appear by name only, their values are never read for it.
* Importing this module imports no YAML parser and builds none of its models (both happen on the first load);
  with no file, ``DaemonOptions.resolve`` does neither.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, ByteSize, ConfigDict, Field, field_validator

from dsh._text import did_you_mean
from dsh.background import BackgroundConfig
from dsh.context import CompactionConfig, SectionOverrides
from dsh.errors import DshError
from dsh.hooks import HooksConfig
from dsh.images.config import ImagesConfig
from dsh.lsp import LspConfig
from dsh.mcp import McpServerConfig
from dsh.policy import PermissionsConfig
from dsh.providers import ProviderSettings
from dsh.sandbox import SandboxConfig
from dsh.secrets import SecretsConfig
from dsh.settings import DEFAULT_MODEL, default_config_path
from dsh.skills import SkillsConfig
from dsh.spend import SpendConfig
from dsh.worktrees import WorktreesConfig

if TYPE_CHECKING:
    import yaml
    from pydantic_core import ErrorDetails

__all__ = [
    "AgentConfig",
    "ConfigError",
    "DshConfig",
    "default_config_path",
    "find_config_file",
    "load_config",
    "offered_models",
    "render_config",
    "summarize_config",
]

MASK = "***"
OVERRIDING_VARIABLES = {"model": "DSH_MODEL", "system_prompt": "DSH_SYSTEM_PROMPT", "data_dir": "DSH_DATA_DIR"}
"""The variables ``dsh acp`` lets override a key of the file (``show`` names the ones that are set)."""
_SECRET_HEADER_WORDS = ("auth", "key", "token", "secret", "password", "cookie", "session", "signature", "credential")

_SECRET_KEY_WORDS = ("api_key", "apikey", "token", "secret", "password", "credential", "authorization")
"""Keys of a section whose value ``show`` masks (narrower than headers: ``resume_session_id`` is not a secret)."""

NonEmpty = Annotated[str, Field(min_length=1)]


class AgentConfig(BaseModel):
    """An agent the loop starts with the daemon: the keys of the loop's ``ConfiguredAgent``, checked here so that
    a mistake is reported with the file's other problems instead of failing the daemon's start."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    id: NonEmpty
    model: NonEmpty | None = None
    """Default: the daemon's model."""
    system_prompt: str | None = None
    """Default: the daemon's system prompt."""
    resume_session_id: NonEmpty | None = None


class ToolsConfig(BaseModel):
    """The built-in tools' settings (``tools:`` in the file; RFC 0018)."""

    model_config = ConfigDict(extra="forbid")

    fetch_private: bool = False
    """Let ``fetch_url`` reach private, loopback and link-local addresses (off: a model told a URL must not reach
    the user's router, a cloud metadata endpoint or a local service)."""
    checkpoint_max_file_size: ByteSize = Field(default=ByteSize(64 << 20), ge=0)
    """Files larger than this (bytes, or ``64MiB``, ``1GB``) are not checkpointed: a tool call changing one asks
    first, saying ``/rewind`` will not restore it (dsh.checkpoints)."""


class DshConfig(BaseModel):
    """The configuration file's contents. Every key is optional; an unknown key is an error."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    model: NonEmpty | None = None
    """Default model of new sessions (``provider:model``); ``--model`` and ``DSH_MODEL`` override it."""
    models: list[NonEmpty] = Field(default_factory=list)
    """The models offered in the editor's model picker (default: just the default model)."""
    system_prompt: str | None = None
    """Extra system prompt of new sessions; ``--system`` and ``DSH_SYSTEM_PROMPT`` override it."""
    data_dir: NonEmpty | None = None
    """Session storage; ``~`` is expanded and a relative path is relative to the configuration file."""
    providers: dict[str, ProviderSettings] = Field(default_factory=dict)
    """Providers by name (the part before ``:`` in a model), added to the built-in ones. One named like a built-in
    (``openai``, ``deepseek``, ``anthropic``) keeps the built-in's value of every key it does not give, so
    ``deepseek: {timeout: 60}`` still has DeepSeek's base URL and ``DEEPSEEK_API_KEY``."""
    agents: list[AgentConfig] = Field(default_factory=list)
    """Agents started with the daemon (the agent loop's ``agents``)."""
    system_prompt_sections: SectionOverrides = Field(default_factory=dict)
    """Built-in system prompt sections by name: ``false`` removes one, a string replaces its text (dsh.context)."""
    compaction: CompactionConfig = Field(default_factory=CompactionConfig)
    """When and how older history is summarised (dsh.context)."""
    images: ImagesConfig = Field(default_factory=ImagesConfig)
    """Image input limits (see :mod:`dsh.images`)."""
    mcp_servers: dict[str, McpServerConfig] = Field(default_factory=dict)
    """MCP servers of every session, by name (:mod:`dsh.mcp`); an editor-given server of the same name wins."""
    secrets: SecretsConfig = Field(default_factory=SecretsConfig)
    """What the processes dsh starts for tools do not see (see :mod:`dsh.secrets`)."""
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    """At which level approved commands run and whether they reach the network (see :mod:`dsh.sandbox`)."""
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    """The built-in tools' settings (:mod:`dsh.tools`)."""
    permissions: PermissionsConfig = Field(default_factory=PermissionsConfig)
    """New sessions' mode and the allow / ask / deny patterns of tool calls (see :mod:`dsh.policy`)."""
    background: BackgroundConfig = Field(default_factory=BackgroundConfig)
    """Background commands (:mod:`dsh.background`): ``wake: true`` starts a turn when one of an idle session ends."""
    lsp: LspConfig = Field(default_factory=LspConfig)
    """Language servers and the diagnostics appended to edits (:mod:`dsh.lsp`; off unless ``enabled: true``)."""
    skills: SkillsConfig = Field(default_factory=SkillsConfig)
    """Where skills are looked for (:mod:`dsh.skills`): ``claude: true`` also reads ``.claude/skills/``."""
    budget: SpendConfig = Field(default_factory=SpendConfig)
    """Spend budgets in US dollars and tokens, per turn and per session, and when to warn (:mod:`dsh.spend`)."""
    hooks: HooksConfig = Field(default_factory=HooksConfig)
    """Commands run at dsh's events, in Claude Code's schema (:mod:`dsh.hooks`); ``import: [claude]`` also reads a
    project's ``.claude/settings.json`` hooks (a project's hooks run once the user approved them)."""
    worktrees: WorktreesConfig = Field(default_factory=WorktreesConfig)
    """Whether new sessions work in a git worktree of their own (:mod:`dsh.worktrees`; ``mode: off`` by default)."""
    subagent_model: NonEmpty | None = None
    """The model of sub-agents (``task``) whose type names none (default: the parent's; :mod:`dsh.subagents`)."""

    @field_validator("data_dir")
    @classmethod
    def _expand_home(cls, value: str | None) -> str | None:
        return os.path.expanduser(value) if value is not None else None

    @field_validator("providers")
    @classmethod
    def _over_builtins(cls, value: dict[str, ProviderSettings]) -> dict[str, ProviderSettings]:
        from dsh.providers import BUILTIN_PROVIDERS, address_problem

        for name, settings in value.items():
            if not name or ":" in name or name != name.strip():
                raise ValueError(f"provider name {name!r} must be non-empty, without ':' or surrounding spaces")
            problem = address_problem(name, settings)
            if problem is not None:  # its key would go to another provider's address
                raise ValueError(problem)
        overlaid: dict[str, ProviderSettings] = {}
        for name, settings in value.items():
            builtin = BUILTIN_PROVIDERS.get(name)
            if builtin is not None:  # only the keys given replace the built-in's values
                given = {key: getattr(settings, key) for key in settings.model_fields_set}
                settings = builtin.model_copy(update=given)
            overlaid[name] = settings
        return overlaid

    @field_validator("agents")
    @classmethod
    def _unique_agent_ids(cls, value: list[AgentConfig]) -> list[AgentConfig]:
        seen: set[str] = set()
        for agent in value:
            if agent.id in seen:
                raise ValueError(f"agent id {agent.id!r} is used twice")
            seen.add(agent.id)
        return value


class ConfigError(DshError):
    """A configuration file that cannot be used. ``message`` is complete and readable on its own: it names the
    file and every problem found; ``problems`` holds the problem lines, ``path`` the file."""

    default_code = "INVALID_CONFIG"

    def __init__(self, path: Path, problems: Sequence[str], *, heading: str = "invalid configuration in") -> None:
        self.path = path
        self.problems = tuple(problems)
        if len(self.problems) == 1:
            message = f"{heading} {path}: {self.problems[0]}"
        else:
            message = f"{heading} {path}:\n" + "\n".join(f"  {problem}" for problem in self.problems)
        super().__init__(message)

    def __str__(self) -> str:
        return self.message


# -- finding and loading -------------------------------------------------------------------------------------


def find_config_file(explicit: str | Path | None) -> Path | None:
    """The file to load: *explicit* (``--config``, else ``DSH_CONFIG``, chosen by the caller; returned even when
    missing, so that loading it reports it), else :func:`default_config_path` only if it is a file, else None.
    Reads nothing but the default path's existence; a default path that is a dangling symlink raises
    :class:`ConfigError` naming it (the user meant a file to be there: ignoring it would drop its settings
    without a word)."""
    if explicit is not None and str(explicit) != "":
        return Path(explicit).expanduser()
    default = default_config_path()
    if default.is_symlink() and not default.exists():
        raise ConfigError(default, [_dangling(default)], heading="cannot read configuration file")
    return default if default.is_file() else None


def _dangling(path: Path) -> str:
    return f"it is a symlink to {os.readlink(path)}, which does not exist; fix or remove the link"


def load_config(path: str | Path) -> DshConfig:
    """Read and validate the YAML file at *path*; an empty file (or only comments) is the empty configuration.

    Raises :class:`ConfigError` for a missing or unreadable file, invalid YAML (with line and column), a top
    level that is not a mapping, a key given twice, and every validation problem at once (each with its line
    and dotted location). A relative ``data_dir`` is made absolute against the file's directory.
    """
    file = Path(path).expanduser()
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(file, ["the file does not exist"], heading="cannot read configuration file") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            file, [f"not UTF-8 text (byte {exc.start})"], heading="cannot read configuration file"
        ) from None
    except OSError as exc:
        raise ConfigError(file, [exc.strerror or str(exc)], heading="cannot read configuration file") from None
    data = _parse_yaml(text, file)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(file, [f"the top level must be a mapping of settings (key: value), got {_kind(data)}"])
    from pydantic import ValidationError

    try:
        config = DshConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(file, _problems(exc.errors(), text)) from None
    if config.data_dir is not None and not os.path.isabs(config.data_dir):
        absolute = os.path.normpath(os.path.join(os.path.abspath(file.parent), config.data_dir))
        config = config.model_copy(update={"data_dir": absolute})
    return config


@cache
def _loader() -> type[yaml.SafeLoader]:
    """``yaml.SafeLoader`` that rejects a key given twice in one mapping (PyYAML silently keeps the last)."""
    import yaml

    class StrictLoader(yaml.SafeLoader):
        def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=deep)
                try:
                    duplicate = key in seen
                    seen.add(key)
                except TypeError:  # an unhashable key: the base class reports it
                    continue
                if duplicate:
                    raise yaml.constructor.ConstructorError(
                        "while reading a mapping",
                        node.start_mark,
                        f"the key {key!r} is given twice",
                        key_node.start_mark,
                    )
            return super().construct_mapping(node, deep=deep)

    return StrictLoader


def _parse_yaml(text: str, file: Path) -> Any:
    import yaml

    try:
        return yaml.load(text, Loader=_loader())  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        context = getattr(exc, "context", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        detail = f"{problem} ({context})" if context else problem
        raise ConfigError(file, [f"{where}{detail}"], heading="invalid YAML in") from None


def _problems(errors: Iterable[ErrorDetails], text: str) -> list[str]:
    """One line per validation error, in the order of the file: ``line N: dotted.location: what is wrong``."""
    root = _compose(text)
    located: list[tuple[int, str]] = []
    for error in errors:
        loc = tuple(part for part in error["loc"] if part != "[key]")
        line = _line_of(root, loc)
        prefix = f"line {line}: " if line is not None else ""
        located.append((line or 0, f"{prefix}{_dotted(loc)}: {_describe(error, loc)}"))
    return [problem for _, problem in sorted(located, key=lambda item: item[0])]


def _describe(error: ErrorDetails, loc: tuple[int | str, ...]) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        return "unknown key" + _suggestion(loc)
    if kind == "missing":
        return "required key is missing"
    message = error["msg"].removeprefix("Value error, ")
    if kind == "literal_error" and isinstance(error["input"], str) and len(error["input"]) <= 40:
        return f"{message} (got {error['input']!r})"  # an enumerated choice such as a provider type: no secret
    if kind.endswith("_type"):
        return f"{message} (got {_kind(error['input'])})"
    return message


def _suggestion(loc: tuple[int | str, ...]) -> str:
    known: list[str] = []
    if len(loc) == 1:
        known = list(DshConfig.model_fields)
    elif len(loc) == 3 and loc[0] == "providers":
        known = list(ProviderSettings.model_fields)
    elif len(loc) == 3 and loc[0] == "agents":
        known = list(AgentConfig.model_fields)
    elif len(loc) == 2 and loc[0] == "secrets":
        known = list(SecretsConfig.model_fields)
    if not known:
        return ""
    return did_you_mean(str(loc[-1]), known) or f" (known keys: {', '.join(known)})"


def _kind(value: Any) -> str:
    """What a value is, without the value itself (it may be a secret)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"a {type(value).__name__}"


def _dotted(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def _compose(text: str) -> yaml.Node | None:
    import yaml

    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:  # pragma: no cover - the text was parsed once already
        return None


def _line_of(root: yaml.Node | None, loc: tuple[int | str, ...]) -> int | None:
    """The 1-based line of the deepest node of the file on the path *loc* (a missing key: its parent's line)."""
    import yaml

    if root is None:
        return None
    node: yaml.Node = root
    line: int = node.start_mark.line
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            entry = next(
                ((k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == str(part)), None
            )
            if entry is None:
                break
            line = entry[0].start_mark.line
            node = entry[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line
        else:
            break
    return line + 1


# -- what the daemon makes of it -----------------------------------------------------------------------------


def offered_models(default: str, configured: Iterable[str]) -> tuple[str, ...]:
    """The models for the editor's picker: *configured* in order without repeats, and *default* first when it
    is not among them (the picker's current value is always one of its options)."""
    models = tuple(dict.fromkeys(configured))
    return models if default in models else (default, *models)


def _default_data_dir() -> str:
    """The XDG data directory (what ``default_data_dir`` gives when ``DSH_DATA_DIR`` is unset)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return str(Path(base) / "dsh" / "sessions")


# -- show and check --------------------------------------------------------------------------------------------


def render_config(
    config: DshConfig | None, *, source: Path | None, env: Mapping[str, str], config_origin: str | None = None
) -> str:
    """The effective configuration as YAML, generated from :class:`DshConfig`'s fields (every section and key,
    with its value or default, in the model's order; a comment before each says where it came from), the
    built-in providers merged with the configured ones, and the models offered. The output is itself a valid
    configuration file (the file's values: a ``DSH_MODEL``, ``DSH_SYSTEM_PROMPT`` or ``DSH_DATA_DIR`` that
    overrides one is named in its comment); *config_origin* says how *source* was chosen (``--config``,
    ``DSH_CONFIG``).

    Secrets never appear: an inline ``api_key`` is ``***``, so is every header whose name looks secret
    (authorization, key, token, cookie, …) and the password of a ``base_url``; keys taken from the environment
    are shown as the variable's name (``api_key_env``). Of *env* only the presence of the ``DSH_*`` variables
    that override the file, and the names of the variables commands will not see (:mod:`dsh.secrets`), are used
    (in comments); a value is never shown.
    """
    import yaml

    from dsh.providers import merge_providers

    config = config if config is not None else DshConfig()
    model = config.model or DEFAULT_MODEL
    shown: dict[str, Any] = {  # the keys whose effective value is more than the file's (or masked)
        "model": model,
        "models": list(offered_models(model, config.models)),
        "system_prompt": config.system_prompt,
        "data_dir": config.data_dir or _default_data_dir(),
        "providers": {name: _masked(settings) for name, settings in merge_providers(config.providers).items()},
        "mcp_servers": {name: _masked_server(server) for name, server in config.mcp_servers.items()},
        "agents": [agent.model_dump(mode="json") for agent in config.agents],
    }
    dumped = config.model_dump(mode="json")
    where = str(source) if source is not None else "no configuration file (defaults)"
    lines = [
        f"# dsh configuration: {where}" + (f" (from {config_origin})" if config_origin and source else ""),
        f"# secrets are shown as {MASK}; keys from environment variables by the variable's name only",
        "# every key of every section is shown with its value; a comment before each section says where it came",
        "# from (default, file, environment) and the default of each key the file sets",
    ]
    lines += [
        f"# {variable} is set and overrides `{key}` for `dsh acp`"
        for key, variable in OVERRIDING_VARIABLES.items()
        if env.get(variable)
    ]
    from dsh.secrets import describe_withheld

    lines += describe_withheld(config.providers, config.secrets, env)
    from dsh.sandbox import Sandbox

    lines.append(f"# {Sandbox(config.sandbox).describe()}")
    body: list[str] = []
    for name in DshConfig.model_fields:  # generated from the model: a section added later shows up here
        value = shown[name] if name in shown else _mask_secret_keys(dumped[name])
        body.append(_origin_comment(config, name, env))
        body.append(yaml.safe_dump({name: value}, sort_keys=False, allow_unicode=True, width=1000).rstrip("\n"))
    return "\n".join(lines + body) + "\n"


def _origin_comment(config: DshConfig, name: str, env: Mapping[str, str]) -> str:
    """``# compaction: file (threshold; default 0.8)``: where a top-level key's value comes from and, for a section,
    which of its keys the file sets and their defaults."""
    variable = OVERRIDING_VARIABLES.get(name)
    if variable is not None and env.get(variable):
        return f"# {name}: environment ({variable} overrides the {'file' if name in config.model_fields_set else 'default'})"
    if name not in config.model_fields_set:
        return f"# {name}: default"
    section = getattr(config, name)
    if not isinstance(section, BaseModel):
        return f"# {name}: file"
    defaults = type(section)()
    given = [
        f"{key} (default {_short(getattr(defaults, key))})"
        for key in type(section).model_fields
        if key in section.model_fields_set
    ]
    return f"# {name}: file" + (f": {', '.join(given)}; the rest default" if given else "")


def _short(value: Any) -> str:
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "…"


def _mask_secret_keys(value: Any) -> Any:
    """A section's dumped value with every key that names a secret (``api_key``, ``token``, ``password``, …)
    shown as ``***`` when set: a section added later never prints a secret by accident."""
    if isinstance(value, dict):
        return {
            key: MASK
            if item not in (None, "", [], {}) and any(word in str(key).lower() for word in _SECRET_KEY_WORDS)
            else _mask_secret_keys(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_mask_secret_keys(item) for item in value]
    return value


def _masked(settings: ProviderSettings) -> dict[str, Any]:
    dumped = settings.model_dump(mode="json")
    dumped["api_key"] = MASK if settings.api_key is not None else None
    dumped["headers"] = {
        name: MASK if any(word in name.lower() for word in _SECRET_HEADER_WORDS) else value
        for name, value in settings.headers.items()
    }
    if settings.base_url is not None:
        dumped["base_url"] = _mask_url_password(settings.base_url)
    return dumped


def _masked_server(server: McpServerConfig) -> dict[str, Any]:
    """An MCP server as ``show`` prints it: every ``env`` value masked (servers take their tokens there), secret
    headers masked like a provider's, a URL's password masked."""
    dumped = server.model_dump(mode="json", exclude_defaults=True)
    if server.env:
        dumped["env"] = dict.fromkeys(server.env, MASK)
    if server.headers:
        dumped["headers"] = {
            name: MASK if any(word in name.lower() for word in _SECRET_HEADER_WORDS) else value
            for name, value in server.headers.items()
        }
    if server.url is not None:
        dumped["url"] = _mask_url_password(server.url)
    return dumped


def _mask_url_password(url: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        host = parts.netloc.rpartition("@")[2]
        return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:{MASK}@{host}"))
    except ValueError:
        return MASK


def summarize_config(config: DshConfig) -> str:
    """One line: default model, models offered, configured providers and agents, data directory."""
    model = config.model or f"{DEFAULT_MODEL} (default)"
    offered = len(offered_models(config.model or DEFAULT_MODEL, config.models))
    providers = ", ".join(config.providers) or "none (built-ins only)"
    agents = len(config.agents)
    return (
        f"model {model}; {offered} model{'s' if offered != 1 else ''} offered; providers configured: {providers}; "
        f"{agents} agent{'s' if agents != 1 else ''}; data dir {config.data_dir or 'default'}"
    )
