"""One settings resolution for every command: flag > environment > configuration file > default.

Every command (``dsh acp``, ``dsh prompt``, ``dsh sessions …``, ``dsh config …``, and the ones plugins add)
calls :func:`resolve_settings` with the flags it was given and gets one :class:`Settings`; nothing else reads a
``DSH_*`` variable or decides which file to load. A setting is a row of :data:`SPECS` (its flag, its variable,
its key in the file, its default, how its text is checked); a helper that adds a setting adds a row, a helper that
adds a section to the file adds a sub-model to :class:`dsh.config.DshConfig` and reads it from
:attr:`Settings.config`.

Guarantees:

* Precedence is the same for every setting and every command: a non-empty flag, else a non-empty variable, else
  the file's key, else the default. Empty values count as unset.
* Every bad value fails *here*, before a command does anything, with a :class:`SettingError` whose message is
  one line naming the setting, where the value came from (``--log-level``, ``DSH_LOG_LEVEL`` or the file) and
  how to fix it. A value that cannot be a value of the setting (``--log-level loud``) is a usage error (exit
  status 2); a file that cannot be used (an unreadable or invalid configuration, a log file in a missing
  directory) is a runtime error (exit status 1). :func:`exit_on_error` turns both into that line on stderr and
  the status, never a traceback.
* Importing this module imports nothing heavy; resolving without a configuration file parses no YAML and
  builds no pydantic model (the bare ``dsh acp`` start-up path runs it).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from dsh.errors import RUNTIME, DshError, SettingError

if TYPE_CHECKING:
    from dsh.config import DshConfig

__all__ = [
    "DEFAULT_MODEL",
    "LOG_LEVELS",
    "SPECS",
    "SettingError",
    "SettingSpec",
    "Settings",
    "create_data_dir",
    "create_missing_dir",
    "default_config_path",
    "default_data_dir",
    "exit_on_error",
    "fail",
    "resolve_settings",
]

DEFAULT_MODEL = "echo"
"""The offline default: the model when neither a flag, ``DSH_MODEL`` nor the config file names one (a setting's
default, so it lives with the settings; :mod:`dsh.app` re-exports it)."""

LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


@dataclass(frozen=True)
class SettingSpec:
    """One setting: where it can come from and how its text is checked.

    ``check(value, source)`` returns the value to use or raises :class:`SettingError`; *source* is how the
    message names where the value came from (``--log-level``, ``DSH_LOG_LEVEL=…``, ``config key `model```)."""

    name: str
    flag: str | None = None
    env: str | None = None
    key: str | None = None
    """The key of the configuration file's top level (an attribute of :class:`~dsh.config.DshConfig`)."""
    default: Callable[[], Any] = lambda: None
    check: Callable[[Any, str], Any] | None = None


def default_config_path() -> Path:
    """``$XDG_CONFIG_HOME/dsh/config.yaml``, else ``~/.config/dsh/config.yaml`` (whether or not it exists)."""
    from dsh.ownfiles import user_config_dir

    return user_config_dir() / "config.yaml"


def default_data_dir() -> str:
    """``$XDG_DATA_HOME/dsh/sessions``, else ``~/.local/share/dsh/sessions``."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return str(Path(base) / "dsh" / "sessions")


def _check_log_level(value: str, source: str) -> str:
    level = value.strip().lower()
    if level == "warn":
        level = "warning"
    if level not in LOG_LEVELS:
        raise SettingError(f"{source}: {value!r} is not a log level; use one of {', '.join(LOG_LEVELS)}")
    return level


def _check_log_file(value: str, source: str) -> str:
    path = Path(value).expanduser()
    if path.is_dir():
        raise SettingError(f"{source}: {path} is a directory; give a file to append logs to", RUNTIME)
    parent = path.parent
    if not parent.is_dir():
        raise SettingError(
            f"{source}: the directory {parent} does not exist; create it or choose another log file", RUNTIME
        )
    return str(path)


def _check_model(value: str, source: str) -> str:
    """A model name is ``name`` (``echo``) or ``provider:model`` with both parts given: ``openai:`` names no
    model and would only fail at the first prompt, so it is refused here (exit status 2)."""
    provider, colon, model = value.partition(":")
    if not value.strip() or value != value.strip() or (colon and not (provider.strip() and model.strip())):
        raise SettingError(f"{source}: {value!r} is not a model name; use provider:model, e.g. openai:gpt-4.1")
    return value


def _check_plugins(value: str, source: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in str(value).split(",") if part.strip())


def _check_seconds(value: str, source: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds > 0 or seconds == float("inf"):
        raise SettingError(f"{source}: {value!r} is not a number of seconds; give a positive number, e.g. 10")
    return seconds


def _check_switch(value: str, source: str) -> bool:
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise SettingError(f"{source}: {value!r} is not on or off; use 1 or 0")


def _check_dir(value: str, source: str) -> str:
    path = Path(value).expanduser()
    if path.exists() and not path.is_dir():
        raise SettingError(f"{source}: {path} is not a directory; give the directory sessions are stored in", RUNTIME)
    return str(path)


def _check_record(value: str, source: str) -> str:
    """A recording goes to a file (created or truncated) or, for an existing directory, to a new file in it."""
    path = Path(value).expanduser()
    parent = path if path.is_dir() else path.parent
    if not parent.is_dir():
        raise SettingError(f"{source}: the directory {parent} does not exist; create it or record elsewhere", RUNTIME)
    return str(path)


SPECS: list[SettingSpec] = [
    SettingSpec("model", "--model", "DSH_MODEL", "model", lambda: DEFAULT_MODEL, _check_model),
    SettingSpec("system_prompt", "--system", "DSH_SYSTEM_PROMPT", "system_prompt"),
    SettingSpec("data_dir", "--data-dir", "DSH_DATA_DIR", "data_dir", default_data_dir, _check_dir),
    SettingSpec("log_level", "--log-level", "DSH_LOG_LEVEL", None, lambda: "warning", _check_log_level),
    SettingSpec("log_file", "--log-file", "DSH_LOG_FILE", None, check=_check_log_file),
    SettingSpec("plugins", None, "DSH_PLUGINS", None, tuple, _check_plugins),
    SettingSpec("mcp_timeout", None, "DSH_MCP_TIMEOUT", None, lambda: 10.0, _check_seconds),
    SettingSpec("agent_events", "--agent-events", "DSH_AGENT_EVENTS", None, lambda: False, _check_switch),
    SettingSpec("record", "--record", "DSH_RECORD", None, check=_check_record),
]
"""Every setting a flag, a variable or the file's top level can give; add a row to add one."""


@dataclass(frozen=True)
class Settings:
    """The resolved settings of one command. ``values`` holds every row of :data:`SPECS` by name (the common
    ones are properties); ``sources`` says where each came from (``flag``, ``env``, ``file`` or ``default``)."""

    values: Mapping[str, Any]
    sources: Mapping[str, str]
    config_path: Path | None = None
    """The configuration file that was loaded (``--config``, ``DSH_CONFIG`` or the XDG default); None: none."""
    config: DshConfig | None = field(default=None, repr=False, compare=False)
    """The loaded file itself (None without one): sections other helpers add are read from here."""

    def get(self, name: str) -> Any:
        return self.values[name]

    def origin(self, name: str) -> str:
        """Where the value of *name* came from, as a message names it: ``--model``, ``DSH_MODEL``, ```model` in
        FILE`` or ``the default``."""
        spec = next((spec for spec in SPECS if spec.name == name), None)
        source = self.sources.get(name, "default")
        if spec is None or source == "default":
            return f"the default {name}"
        if source == "flag":
            return spec.flag or name
        if source == "env":
            return spec.env or name
        return f"`{spec.key}` in {self.config_path}"

    @property
    def model(self) -> str:
        return str(self.values["model"])

    @property
    def system_prompt(self) -> str | None:
        value = self.values["system_prompt"]
        return None if value is None else str(value)

    @property
    def data_dir(self) -> str:
        return str(self.values["data_dir"])

    @property
    def log_level(self) -> str:
        return str(self.values["log_level"])

    @property
    def log_file(self) -> str | None:
        value = self.values["log_file"]
        return None if value is None else str(value)

    @property
    def plugins(self) -> tuple[str, ...]:
        return tuple(self.values["plugins"])

    @property
    def models(self) -> tuple[str, ...]:
        """The models offered in the editor's picker: the file's ``models`` without repeats, with ``model`` first
        when it is not among them."""
        configured = tuple(dict.fromkeys(self.config.models)) if self.config is not None else ()
        return configured if self.model in configured else (self.model, *configured)


def resolve_settings(
    flags: Mapping[str, Any] | None = None,
    *,
    config: str | None = None,
    env: Mapping[str, str] | None = None,
    specs: list[SettingSpec] | None = None,
) -> Settings:
    """Resolve every setting of :data:`SPECS`: ``flags[name]`` (the command's flags; absent or empty: unset),
    else the variable, else the file's key, else the default; each value passes its spec's check.

    The file is *config* (``--config``), else ``DSH_CONFIG``, else ``$XDG_CONFIG_HOME/dsh/config.yaml`` when it
    exists. Raises :class:`SettingError` (one line, with its exit status) for any bad value or file.
    """
    flags = flags or {}
    env = os.environ if env is None else env
    path = _config_file(config, env)
    loaded: DshConfig | None = None
    if path is not None:
        from dsh.config import ConfigError, load_config

        try:
            loaded = load_config(path)
        except ConfigError as error:
            raise SettingError(error.message, RUNTIME) from None
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for spec in SPECS if specs is None else specs:
        value: Any = flags.get(spec.name)
        if value not in (None, ""):
            where, source = "flag", spec.flag or spec.name
        elif spec.env is not None and env.get(spec.env):
            value = env[spec.env]
            where, source = "env", spec.env
        elif spec.key is not None and loaded is not None and getattr(loaded, spec.key, None) is not None:
            value = getattr(loaded, spec.key)
            where, source = "file", f"`{spec.key}` in {path}"
        else:
            values[spec.name], sources[spec.name] = spec.default(), "default"
            continue
        values[spec.name] = spec.check(value, source) if spec.check is not None else value
        sources[spec.name] = where
    return Settings(values=values, sources=sources, config_path=path, config=loaded)


def _config_file(explicit: str | None, env: Mapping[str, str]) -> Path | None:
    chosen = explicit or env.get("DSH_CONFIG") or None
    if chosen:
        return Path(chosen).expanduser()
    default = default_config_path()
    if default.is_symlink() and not default.exists():
        from dsh.config import ConfigError, find_config_file  # rare: the configuration module only then

        try:
            find_config_file(None)
        except ConfigError as error:
            raise SettingError(error.message, RUNTIME) from None
    return default if default.is_file() else None


def create_missing_dir(path: str | Path, origin: str, command: str) -> bool:
    """Create the data directory *path* when it does not exist (parents too) and say so in one line on stderr
    (``COMMAND: created the data directory PATH (ORIGIN); it did not exist``): scripts rely on the creation, and
    the line makes a typo visible. True when it created it; an existing path, or one that cannot be created, is
    left to the persistence plugin (which reports what is wrong with it)."""
    target = Path(path).expanduser()
    if target.exists() or target.is_symlink():
        return False
    try:
        target.mkdir(parents=True)
    except OSError:
        return False
    sys.stderr.write(f"{command}: created the data directory {target} ({origin}); it did not exist\n")
    sys.stderr.flush()
    return True


def create_data_dir(settings: Settings, command: str) -> bool:
    """:func:`create_missing_dir` for a data directory the user named (a flag, a variable, the file); the default
    one is created quietly when first used."""
    if settings.sources.get("data_dir", "default") == "default":
        return False
    return create_missing_dir(settings.data_dir, settings.origin("data_dir"), command)


def fail(message: str, exit_code: int = RUNTIME) -> NoReturn:
    """Write ``dsh: <message>`` as one line on stderr and exit with *exit_code* (no traceback)."""
    sys.stderr.write("dsh: " + " ".join(str(message).split("\n")) + "\n")
    sys.stderr.flush()
    raise SystemExit(exit_code)


@contextmanager
def exit_on_error() -> Iterator[None]:
    """Turn a :class:`SettingError` or any other :class:`~dsh.errors.DshError` escaping a command into one line
    on stderr and its exit status (2 for usage errors, 1 otherwise)."""
    try:
        yield
    except SettingError as error:
        fail(error.message, error.exit_code)
    except DshError as error:
        fail(error.message, RUNTIME)
