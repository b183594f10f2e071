"""The configuration file (issue 6, Config): loading and validation with readable errors, precedence through
``DaemonOptions.resolve`` (flags > environment > file > defaults), ``dsh config check|show`` in a subprocess
(secrets masked, environment variables named, never shown), and the real daemon honouring a file.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from pydantic import SecretStr

from dsh.config import (
    AgentConfig,
    ConfigError,
    DshConfig,
    default_config_path,
    find_config_file,
    load_config,
    offered_models,
    render_config,
    summarize_config,
)
from dsh.frontends.acp import DaemonOptions
from dsh.providers._settings import BUILTIN_PROVIDERS, ProviderSettings
from dsh.settings import SettingError
from tests.support.raw import WAIT, RawDaemon, write_script

CLI_WAIT = 30.0
SECRET = "sk-inline-9f8e7d6c5b4a"
ENV_SECRET = "sk-from-env-1a2b3c4d5e6f"

FULL = """\
# every key the file knows
model: deepseek:deepseek-chat
models:
  - deepseek:deepseek-chat
  - openai:gpt-4o-mini
  - ollama:qwen3
system_prompt: |
  Answer briefly.
data_dir: /srv/dsh/sessions
providers:
  deepseek:
    timeout: 60
    retries: 5
  ollama:
    type: openai
    base_url: http://127.0.0.1:11434/v1
    key_required: false
    headers: {X-Title: dsh}
    context_windows: {qwen3: 32768}
  claude:
    type: anthropic
    api_key_env: MY_CLAUDE_KEY
    connect_timeout: 3.5
    backoff: 0
    max_tokens: 4096
agents:
  - id: helper
    model: openai:gpt-4o-mini
    system_prompt: Help.
  - id: returning
    resume_session_id: returning-session-1
"""


def write(directory: Path, text: str, name: str = "config.yaml") -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def config_error(directory: Path, text: str) -> ConfigError:
    path = write(directory, text)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    error = caught.value
    assert error.path == path
    assert str(path) in error.message
    assert str(error) == error.message
    assert error.code == "INVALID_CONFIG"
    return error


# -- loading ------------------------------------------------------------------------------------------------


def test_full_config_loads_every_key(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, FULL))
    assert config.model == "deepseek:deepseek-chat"
    assert config.models == ["deepseek:deepseek-chat", "openai:gpt-4o-mini", "ollama:qwen3"]
    assert config.system_prompt == "Answer briefly.\n"
    assert config.data_dir == "/srv/dsh/sessions"
    assert set(config.providers) == {"deepseek", "ollama", "claude"}
    ollama = config.providers["ollama"]
    assert (ollama.type, ollama.base_url, ollama.key_required) == ("openai", "http://127.0.0.1:11434/v1", False)
    assert ollama.headers == {"X-Title": "dsh"}
    assert ollama.context_windows == {"qwen3": 32768}
    claude = config.providers["claude"]
    assert (claude.type, claude.api_key_env, claude.connect_timeout, claude.backoff, claude.max_tokens) == (
        "anthropic",
        "MY_CLAUDE_KEY",
        3.5,
        0.0,
        4096,
    )
    assert claude.api_key is None
    assert [agent.model_dump() for agent in config.agents] == [
        {"id": "helper", "model": "openai:gpt-4o-mini", "system_prompt": "Help.", "resume_session_id": None},
        {"id": "returning", "model": None, "system_prompt": None, "resume_session_id": "returning-session-1"},
    ]


def test_full_config_round_trips_through_yaml(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, FULL))
    dumped = config.model_dump(mode="json")
    again = load_config(write(tmp_path, yaml.safe_dump(dumped, sort_keys=False), "again.yaml"))
    assert again == config
    assert again.model_dump(mode="json") == dumped


def test_a_builtin_provider_keeps_the_builtin_values_of_the_keys_it_does_not_give(tmp_path: Path) -> None:
    deepseek = load_config(write(tmp_path, FULL)).providers["deepseek"]
    builtin = BUILTIN_PROVIDERS["deepseek"]
    assert (deepseek.timeout, deepseek.retries) == (60.0, 5)
    assert deepseek.base_url == builtin.base_url == "https://api.deepseek.com"
    assert deepseek.api_key_env == "DEEPSEEK_API_KEY"
    assert deepseek.context_windows == builtin.context_windows
    # a key given explicitly, even null, replaces the built-in's value
    cleared = load_config(write(tmp_path, "providers: {openai: {base_url_env: null}}")).providers["openai"]
    assert cleared.base_url_env is None
    assert cleared.api_key_env == "OPENAI_API_KEY"


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n", "---\n"])
def test_an_empty_file_is_the_empty_configuration(tmp_path: Path, text: str) -> None:
    assert load_config(write(tmp_path, text)) == DshConfig()


def test_data_dir_expands_home_and_is_relative_to_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert load_config(write(tmp_path, "data_dir: ~/dsh-data")).data_dir == str(tmp_path / "home" / "dsh-data")
    nested = tmp_path / "etc" / "dsh"
    nested.mkdir(parents=True)
    (tmp_path / "home").mkdir()
    monkeypatch.chdir(tmp_path / "home")  # relative to the file, not to the working directory
    assert load_config(write(nested, "data_dir: ../sessions")).data_dir == str(tmp_path / "etc" / "sessions")


def test_the_file_agents_have_the_keys_of_the_loops_configured_agents() -> None:
    from dsh.loop._plugin import ConfiguredAgent

    assert list(AgentConfig.model_fields) == list(ConfiguredAgent.model_fields)


def test_importing_dsh_config_imports_no_yaml_and_builds_no_config_model() -> None:
    code = (
        "import sys, dsh.config\n"
        "assert 'yaml' not in sys.modules, 'yaml imported'\n"
        "assert not dsh.config.DshConfig.__pydantic_complete__, 'DshConfig built at import'\n"
        "assert not dsh.config.AgentConfig.__pydantic_complete__, 'AgentConfig built at import'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=CLI_WAIT)


# -- errors -------------------------------------------------------------------------------------------------


def test_an_unknown_key_is_an_error_with_its_line_and_a_suggestion(tmp_path: Path) -> None:
    error = config_error(tmp_path, "model: echo\nmodle: echo\n")
    assert error.problems == ("line 2: modle: unknown key (did you mean 'model'?)",)
    assert f"invalid configuration in {tmp_path / 'config.yaml'}: line 2: modle: unknown key" in error.message


def test_an_unknown_nested_key_names_its_dotted_location(tmp_path: Path) -> None:
    error = config_error(
        tmp_path,
        """\
        providers:
          ollama:
            type: openai
            base_urll: http://localhost
        agents:
          - id: a
            prompt: hi
            colour: blue
        """,
    )
    assert error.problems == (
        "line 4: providers.ollama.base_urll: unknown key (did you mean 'base_url'?)",
        "line 7: agents[0].prompt: unknown key (did you mean 'system_prompt'?)",
        "line 8: agents[0].colour: unknown key (known keys: id, model, system_prompt, resume_session_id)",
    )


def test_a_wrong_type_names_the_location_and_the_kind_of_value(tmp_path: Path) -> None:
    error = config_error(tmp_path, "models: deepseek:deepseek-chat\nproviders: {openai: {retries: many}}\n")
    assert error.problems == (
        "line 1: models: Input should be a valid list (got a string)",
        "line 2: providers.openai.retries: Input should be a valid integer, unable to parse string as an integer",
    )


def test_a_negative_timeout_is_an_error_at_its_line(tmp_path: Path) -> None:
    error = config_error(
        tmp_path,
        """\
        model: deepseek:deepseek-chat
        providers:
          deepseek:
            timeout: -5
        """,
    )
    assert error.problems == ("line 4: providers.deepseek.timeout: Input should be greater than 0",)
    assert "providers.deepseek.timeout: Input should be greater than 0" in error.message


def test_every_problem_is_reported_at_once_in_file_order(tmp_path: Path) -> None:
    error = config_error(
        tmp_path,
        """\
        agents:
          - model: echo
        providers:
          x:
            type: opnai
            retries: 11
        model: ""
        """,
    )
    assert error.problems == (
        "line 2: agents[0].id: required key is missing",
        "line 5: providers.x.type: Input should be 'openai' or 'anthropic' (got 'opnai')",
        "line 6: providers.x.retries: Input should be less than or equal to 10",
        "line 7: model: String should have at least 1 character",
    )
    assert error.message.splitlines()[0] == f"invalid configuration in {tmp_path / 'config.yaml'}:"
    assert error.message.splitlines()[1:] == [f"  {problem}" for problem in error.problems]


def test_bad_yaml_gives_line_and_column(tmp_path: Path) -> None:
    error = config_error(tmp_path, "model: echo\nproviders:\n  openai: {timeout: 3\n")
    assert len(error.problems) == 1
    assert error.message.startswith(f"invalid YAML in {tmp_path / 'config.yaml'}: line 4, column 1:")
    error = config_error(tmp_path, "model: echo\n  bad: indentation\n")
    assert error.problems == ("line 2, column 6: mapping values are not allowed here",)


def test_a_key_given_twice_is_an_error(tmp_path: Path) -> None:
    error = config_error(tmp_path, "model: a\nsystem_prompt: x\nmodel: b\n")
    assert error.problems[0].startswith("line 3, column 1: the key 'model' is given twice")


@pytest.mark.parametrize(
    ("text", "kind"), [("- echo\n", "a list"), ("echo\n", "a string"), ("42\n", "a number")], ids=str
)
def test_the_top_level_must_be_a_mapping(tmp_path: Path, text: str, kind: str) -> None:
    error = config_error(tmp_path, text)
    assert error.problems == (f"the top level must be a mapping of settings (key: value), got {kind}",)


def test_a_missing_explicit_file_is_an_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "dsh.yaml"
    with pytest.raises(ConfigError) as caught:
        load_config(missing)
    assert caught.value.message == f"cannot read configuration file {missing}: the file does not exist"


def test_a_directory_or_binary_file_is_a_readable_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cannot read configuration file .*"):
        load_config(tmp_path)
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"model: \xff\xfe\n")
    with pytest.raises(ConfigError, match=r"not UTF-8 text"):
        load_config(binary)


def test_provider_names_and_agent_ids_are_checked(tmp_path: Path) -> None:
    error = config_error(tmp_path, "providers:\n  'my:openai': {}\n")
    assert error.problems == (
        "line 1: providers: provider name 'my:openai' must be non-empty, without ':' or surrounding spaces",
    )
    error = config_error(tmp_path, "agents:\n  - id: a\n  - id: a\n")
    assert error.problems == ("line 1: agents: agent id 'a' is used twice",)


def test_an_error_never_quotes_a_value_that_may_be_secret(tmp_path: Path) -> None:
    error = config_error(
        tmp_path,
        f"""\
        providers:
          openai:
            headers: "Authorization: Bearer {SECRET}"
            api_key: [{SECRET}]
        """,
    )
    assert SECRET not in error.message
    assert error.problems == (
        "line 3: providers.openai.headers: Input should be a valid dictionary (got a string)",
        "line 4: providers.openai.api_key: Input should be a valid string (got a list)",
    )


# -- where the file is --------------------------------------------------------------------------------------


def test_default_config_path_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert default_config_path() == tmp_path / "xdg" / "dsh" / "config.yaml"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_config_path() == tmp_path / "home" / ".config" / "dsh" / "config.yaml"


def test_find_config_file_uses_the_default_only_when_it_exists(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert find_config_file(None) is None
    assert find_config_file("") is None
    explicit = tmp_path / "missing.yaml"
    assert find_config_file(str(explicit)) == explicit  # loading it reports it
    (tmp_path / "dsh").mkdir()
    default = write(tmp_path / "dsh", "model: echo\n")
    assert find_config_file(None) == default
    assert find_config_file(str(explicit)) == explicit


# -- precedence through DaemonOptions.resolve ---------------------------------------------------------------


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No ``DSH_*`` variable, and an empty XDG config home (so no real user file is ever read); returns it."""
    for name in list(os.environ):
        if name.startswith("DSH_"):
            monkeypatch.delenv(name)
    home = tmp_path / "xdg-config"
    home.mkdir()
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    return home


LAYERS = ("flag", "env", "file", "default")


@pytest.mark.parametrize("top", LAYERS)
@pytest.mark.parametrize(
    ("option", "flag_name", "variable", "key", "default"),
    [
        ("model", "model", "DSH_MODEL", "model", "echo"),
        ("system_prompt", "system_prompt", "DSH_SYSTEM_PROMPT", "system_prompt", None),
        ("data_dir", "data_dir", "DSH_DATA_DIR", "data_dir", None),
    ],
)
def test_precedence_is_flag_then_env_then_file_then_default(
    clean_env: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    top: str,
    option: str,
    flag_name: str,
    variable: str,
    key: str,
    default: str | None,
) -> None:
    """Every layer from *top* down is set; the value of *top* wins."""
    values = {"flag": "/from/flag", "env": "/from/env", "file": "/from/file"}
    present = LAYERS[LAYERS.index(top) :]
    kwargs: dict[str, Any] = {}
    if "flag" in present:
        kwargs[flag_name] = values["flag"]
    if "env" in present:
        monkeypatch.setenv(variable, values["env"])
    if "file" in present:
        kwargs["config"] = str(write(tmp_path, f"{key}: {values['file']}\n"))
    options = DaemonOptions.resolve(**kwargs)
    assert getattr(options, option) == values.get(top, default)


def test_the_file_is_flag_then_dsh_config_then_the_xdg_default(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert DaemonOptions.resolve().config is None
    (clean_env / "dsh").mkdir()
    default = write(clean_env / "dsh", "model: from-default\n")
    options = DaemonOptions.resolve()
    assert (options.config, options.model) == (str(default), "from-default")
    from_env = write(tmp_path, "model: from-env\n", "env.yaml")
    monkeypatch.setenv("DSH_CONFIG", str(from_env))
    options = DaemonOptions.resolve()
    assert (options.config, options.model) == (str(from_env), "from-env")
    from_flag = write(tmp_path, "model: from-flag\n", "flag.yaml")
    options = DaemonOptions.resolve(config=str(from_flag))
    assert (options.config, options.model) == (str(from_flag), "from-flag")


def test_resolve_without_a_file_uses_the_defaults(clean_env: Path) -> None:
    options = DaemonOptions.resolve()
    assert (options.model, options.system_prompt, options.data_dir, options.config) == ("echo", None, None, None)
    assert options.models == ("echo",)
    assert options.loaded_config is None
    assert options.agent_loop_config() == {"agents": []}


def test_resolve_offers_the_files_models_with_the_default_first_when_missing(clean_env: Path, tmp_path: Path) -> None:
    path = write(tmp_path, "model: b\nmodels: [a, b, a, c]\n")
    assert DaemonOptions.resolve(config=str(path)).models == ("a", "b", "c")
    assert DaemonOptions.resolve(config=str(path), model="echo").models == ("echo", "a", "b", "c")
    assert DaemonOptions.resolve(config=str(write(tmp_path, "model: x\n", "only.yaml"))).models == ("x",)
    assert offered_models("m", []) == ("m",)


def test_configured_agents_default_to_the_daemons_model_and_prompt(clean_env: Path, tmp_path: Path) -> None:
    options = DaemonOptions.resolve(config=str(write(tmp_path, FULL)), system_prompt="Be kind.")
    assert options.loaded_config is not None
    assert options.loaded_config.providers["ollama"].base_url == "http://127.0.0.1:11434/v1"
    assert options.agent_loop_config() == {
        "agents": [
            {"id": "helper", "model": "openai:gpt-4o-mini", "system_prompt": "Help."},
            {
                "id": "returning",
                "model": "deepseek:deepseek-chat",
                "system_prompt": "Be kind.",
                "resume_session_id": "returning-session-1",
            },
        ]
    }
    from dsh.loop._plugin import AgentLoopConfig

    AgentLoopConfig.model_validate(options.agent_loop_config())  # what load_core hands the loop is valid for it


def test_a_file_that_does_not_load_ends_resolve_with_its_message(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Issue #11: resolve raises the one-line SettingError (status 1); the entry points turn it into stderr + exit.
    with pytest.raises(SettingError) as caught:
        DaemonOptions.resolve(config=str(tmp_path / "missing.yaml"))
    assert caught.value.message == (
        f"cannot read configuration file {tmp_path / 'missing.yaml'}: the file does not exist"
    )
    assert caught.value.exit_code == 1
    monkeypatch.setenv("DSH_CONFIG", str(write(tmp_path, "providers: {deepseek: {timeout: 0}}\n")))
    with pytest.raises(SettingError) as caught:
        DaemonOptions.resolve()
    assert "line 1: providers.deepseek.timeout: Input should be greater than 0" in caught.value.message
    assert "\n" not in caught.value.message


def test_resolve_without_a_file_imports_no_yaml(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from dsh.frontends.acp import DaemonOptions\n"
        "options = DaemonOptions.resolve()\n"
        "assert options.config is None, options\n"
        "assert 'yaml' not in sys.modules, 'yaml imported'\n"
        "import dsh.config\n"
        "assert not dsh.config.DshConfig.__pydantic_complete__, 'DshConfig built'\n"
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith("DSH_")}
    env["XDG_CONFIG_HOME"] = str(tmp_path)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=CLI_WAIT, env=env)


# -- rendering (the pure functions behind check and show) ---------------------------------------------------


def test_render_config_is_a_valid_configuration_with_the_builtins_merged(tmp_path: Path) -> None:
    path = write(tmp_path, FULL)
    config = load_config(path)
    rendered = render_config(config, source=path, env={})
    assert rendered.startswith(f"# dsh configuration: {path}\n")
    again = load_config(write(tmp_path, rendered, "rendered.yaml"))
    assert again.model == config.model
    assert again.models == config.models
    assert set(again.providers) == {"openai", "deepseek", "anthropic", "ollama", "claude"}
    assert again.providers["deepseek"] == config.providers["deepseek"]
    assert again.providers["anthropic"] == BUILTIN_PROVIDERS["anthropic"]
    assert again.agents == config.agents


def test_render_config_masks_secrets_and_names_overriding_variables() -> None:
    config = DshConfig(
        providers={
            "p": ProviderSettings(
                api_key=SecretStr(SECRET),
                base_url=f"https://user:{SECRET}@example.com/v1",
                headers={"Authorization": f"Bearer {SECRET}", "X-Api-Key": SECRET, "X-Title": "dsh"},
            )
        }
    )
    rendered = render_config(config, source=None, env={"DSH_MODEL": "m", "DSH_DATA_DIR": ""})
    assert SECRET not in rendered
    data = yaml.safe_load(rendered)
    provider = data["providers"]["p"]
    assert provider["api_key"] == "***"
    assert provider["base_url"] == "https://user:***@example.com/v1"
    assert provider["headers"] == {"Authorization": "***", "X-Api-Key": "***", "X-Title": "dsh"}
    assert "# DSH_MODEL is set and overrides `model` for `dsh acp`" in rendered
    assert "DSH_DATA_DIR" not in rendered  # empty counts as unset
    assert data["model"] == "echo"
    assert data["models"] == ["echo"]


def test_summary_is_one_line(tmp_path: Path) -> None:
    summary = summarize_config(load_config(write(tmp_path, FULL)))
    assert "\n" not in summary
    assert summary == (
        "model deepseek:deepseek-chat; 3 models offered; providers configured: deepseek, ollama, claude; "
        "2 agents; data dir /srv/dsh/sessions"
    )
    assert summarize_config(DshConfig()) == (
        "model echo (default); 1 model offered; providers configured: none (built-ins only); 0 agents; data dir default"
    )


# -- dsh config check / show (subprocess) -------------------------------------------------------------------


def cli_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("DSH_")}
    env.pop("PYTHONWARNINGS", None)
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg-config")
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg-data")
    env.update(extra)
    return env


def dsh(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dsh", *args],
        capture_output=True,
        text=True,
        timeout=CLI_WAIT,
        env=cli_env(tmp_path, **env),
        check=False,
    )


def test_config_check_ok(tmp_path: Path) -> None:
    path = write(tmp_path, FULL)
    result = dsh(tmp_path, "config", "check", "--config", str(path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"ok: {path}", summarize_config(load_config(path))]
    assert result.stderr == ""


def test_config_check_reads_dsh_config_and_the_default(tmp_path: Path) -> None:
    path = write(tmp_path, "model: echo\n")
    result = dsh(tmp_path, "config", "check", DSH_CONFIG=str(path))
    assert (result.returncode, result.stdout.splitlines()[0]) == (0, f"ok: {path}")
    result = dsh(tmp_path, "config", "check")
    default = tmp_path / "xdg-config" / "dsh" / "config.yaml"
    assert result.returncode == 0
    assert result.stdout == f"no configuration file: {default} does not exist (the defaults apply)\n"
    default.parent.mkdir(parents=True)
    default.write_text("model: echo\n", encoding="utf-8")
    result = dsh(tmp_path, "config", "check")
    assert (result.returncode, result.stdout.splitlines()[0]) == (0, f"ok: {default}")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("modle: echo\n", "line 1: modle: unknown key (did you mean 'model'?)"),
        (
            "providers: {deepseek: {timeout: -1}}\n",
            "line 1: providers.deepseek.timeout: Input should be greater than 0",
        ),
        ("model: echo\n  x: y\n", "line 2, column 4: mapping values are not allowed here"),
    ],
    ids=["unknown-key", "negative-timeout", "bad-yaml"],
)
def test_config_check_reports_problems_and_exits_1(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path, text)
    result = dsh(tmp_path, "config", "check", "--config", str(path))
    assert result.returncode == 1
    assert result.stdout == ""
    assert str(path) in result.stderr
    assert expected in result.stderr
    assert "Traceback" not in result.stderr


def test_config_check_of_a_missing_file_exits_1(tmp_path: Path) -> None:
    result = dsh(tmp_path, "config", "check", "--config", str(tmp_path / "nope.yaml"))
    assert result.returncode == 1
    assert result.stderr == f"dsh: cannot read configuration file {tmp_path / 'nope.yaml'}: the file does not exist\n"


def test_config_show_masks_inline_keys_and_names_env_keys_without_their_values(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        f"""\
        model: deepseek:deepseek-chat
        providers:
          deepseek:
            api_key: {SECRET}
          corp:
            type: openai
            base_url: https://llm.example.com/v1
            api_key_env: CORP_LLM_KEY
            headers: {{Authorization: Bearer {SECRET}}}
        """,
    )
    result = dsh(
        tmp_path,
        "config",
        "show",
        "--config",
        str(path),
        CORP_LLM_KEY=ENV_SECRET,
        OPENAI_API_KEY=ENV_SECRET,
        DEEPSEEK_API_KEY=ENV_SECRET,
        ANTHROPIC_API_KEY=ENV_SECRET,
    )
    assert result.returncode == 0, result.stderr
    output = result.stdout + result.stderr
    assert SECRET not in output
    assert ENV_SECRET not in output
    data = yaml.safe_load(result.stdout)
    assert data["model"] == "deepseek:deepseek-chat"
    assert data["providers"]["deepseek"]["api_key"] == "***"
    assert data["providers"]["deepseek"]["api_key_env"] == "DEEPSEEK_API_KEY"
    assert data["providers"]["corp"]["api_key_env"] == "CORP_LLM_KEY"
    assert data["providers"]["corp"]["api_key"] is None
    assert data["providers"]["corp"]["headers"] == {"Authorization": "***"}
    assert data["providers"]["openai"]["api_key_env"] == "OPENAI_API_KEY"
    assert data["providers"]["anthropic"]["api_key_env"] == "ANTHROPIC_API_KEY"


def test_config_show_of_a_broken_file_exits_1(tmp_path: Path) -> None:
    path = write(tmp_path, f"providers: {{openai: {{api_key: {SECRET}, timeout: 0}}}}\n")
    result = dsh(tmp_path, "config", "show", "--config", str(path))
    assert result.returncode == 1
    assert result.stdout == ""
    assert "providers.openai.timeout: Input should be greater than 0" in result.stderr
    assert SECRET not in result.stderr


# -- the daemon honours the file -----------------------------------------------------------------------------


@asynccontextmanager
async def daemon(tmp_path: Path, args: Sequence[str], **env: str) -> AsyncIterator[RawDaemon]:
    """``python -m dsh acp ARGS`` over pipes, sessions in a fresh directory, no user configuration."""
    run = uuid.uuid4().hex[:8]
    data_dir = tmp_path / f"data-{run}"
    stderr_path = tmp_path / f"stderr-{run}.log"
    environment = cli_env(tmp_path, DSH_DATA_DIR=str(data_dir), **env)
    with stderr_path.open("wb") as stderr:
        process = await anyio.open_process(
            [sys.executable, "-m", "dsh", "acp", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=environment,
        )
    raw = RawDaemon(process, stderr_path)
    try:
        yield raw
    finally:
        with anyio.CancelScope(shield=True):
            with suppress(Exception):
                await raw.close_stdin()
            with anyio.move_on_after(3):
                await process.wait()
            if process.returncode is None:
                with suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
            await process.aclose()


async def answer(raw: RawDaemon, prompt: str) -> tuple[str, dict[str, Any]]:
    """initialize, session/new, one prompt: the agent's text and session/new's result."""
    with anyio.fail_after(WAIT):
        await raw.initialize()
        created = await raw.request("session/new", {"cwd": os.getcwd(), "mcpServers": []})
        assert "result" in created, f"session/new failed: {created!r:.300}; stderr: {raw.stderr_text()}"
        response, updates = await raw.prompt(created["result"]["sessionId"], prompt)
    assert response.get("result", {}).get("stopReason") == "end_turn", f"{response!r:.300}"
    text = "".join(u["content"]["text"] for u in updates if u.get("sessionUpdate") == "agent_message_chunk")
    return text, created["result"]


def scripted_config(tmp_path: Path) -> tuple[Path, str]:
    model = write_script(tmp_path, [{"text": "the scripted answer from the file's model"}])
    return write(tmp_path, f"model: {model}\nmodels: [echo]\n", "daemon.yaml"), model


async def test_daemon_uses_the_model_of_a_config_flag(tmp_path: Path) -> None:
    path, model = scripted_config(tmp_path)
    async with daemon(tmp_path, ["--config", str(path)]) as raw:
        text, created = await answer(raw, "hello daemon")
    assert text == "the scripted answer from the file's model"
    offered = [m["modelId"] for m in created["models"]["availableModels"]]
    assert offered == [model, "echo"]  # the file's models reach the editor's picker, the default first


async def test_bare_dsh_acp_uses_the_model_of_dsh_config(tmp_path: Path) -> None:
    path, _ = scripted_config(tmp_path)
    async with daemon(tmp_path, [], DSH_CONFIG=str(path)) as raw:
        text, _ = await answer(raw, "hello daemon")
    assert text == "the scripted answer from the file's model"


async def test_bare_dsh_acp_uses_the_xdg_default_file(tmp_path: Path) -> None:
    path, _ = scripted_config(tmp_path)
    default = tmp_path / "xdg-config" / "dsh" / "config.yaml"
    default.parent.mkdir(parents=True)
    default.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    async with daemon(tmp_path, []) as raw:
        text, _ = await answer(raw, "hello daemon")
    assert text == "the scripted answer from the file's model"


@pytest.mark.parametrize("how", ["flag", "env"])
async def test_model_on_the_command_line_or_env_overrides_the_file(tmp_path: Path, how: str) -> None:
    path, _ = scripted_config(tmp_path)
    if how == "flag":
        context = daemon(tmp_path, ["--config", str(path), "--model", "echo"])
    else:
        context = daemon(tmp_path, [], DSH_CONFIG=str(path), DSH_MODEL="echo")
    async with context as raw:
        text, _ = await answer(raw, "echo me back")
    assert text == "echo me back"


@pytest.mark.parametrize("bare", [True, False], ids=["bare", "typer"])
async def test_daemon_with_a_broken_file_exits_1_with_a_readable_message(tmp_path: Path, bare: bool) -> None:
    path = write(tmp_path, "model: echo\nmodels: {}\n")
    args = [] if bare else ["--config", str(path)]
    async with daemon(tmp_path, args, DSH_CONFIG=str(path)) as raw:
        with anyio.fail_after(WAIT):
            code = await raw.process.wait()
            rest = await raw.read_until_eof()
    assert (code, rest) == (1, [])
    assert raw.stderr_text() == (
        f"dsh: invalid configuration in {path}: line 2: models: Input should be a valid list (got a mapping)\n"
    )


async def test_daemon_serves_the_files_providers(tmp_path: Path) -> None:
    """A provider only the file defines serves its models: the turn reaches its base URL (nothing listens there,
    so the turn fails naming it; without the file's providers it would fail for want of a ``myprov`` adapter)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    path = write(
        tmp_path,
        f"""\
        model: myprov:some-model
        providers:
          myprov: {{type: openai, base_url: "http://127.0.0.1:{port}/v1", key_required: false, retries: 0}}
        """,
    )
    async with daemon(tmp_path, ["--config", str(path)]) as raw:
        with anyio.fail_after(WAIT):
            await raw.initialize()
            session_id = await raw.new_session()
            response, _ = await raw.prompt(session_id, "hello")
    message = response["error"]["message"]
    assert f"127.0.0.1:{port}" in message and "myprov" in message, message
