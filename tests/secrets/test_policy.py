"""The secrets policy: which variables the processes dsh starts do not see, and which values are redacted."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import SecretStr

from dsh.config import DshConfig, load_config, render_config
from dsh.providers._settings import ProviderSettings
from dsh.secrets import (
    SecretPolicy,
    SecretsConfig,
    child_environment,
    current_policy,
    policy_for,
    policy_in_force,
    redact_text,
)
from dsh.secrets._policy import MIN_SECRET_LENGTH

OPENAI = "sk-openai-0123456789abcdef"
ANTHROPIC = "sk-ant-0123456789abcdef"
INLINE = "inline-key-0123456789"
ENV = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/home/u",
    "OPENAI_API_KEY": OPENAI,
    "ANTHROPIC_API_KEY": ANTHROPIC,
    "GITHUB_TOKEN": "ghp_github_token_value",
    "AWS_SECRET_ACCESS_KEY": "aws-secret-value-123",
    "DSH_MODEL": "openai:gpt-4o",
    "DSH_SERVICE_TOKEN": "dsh-token-value-123",
    "DSH_API_KEY": "dsh-api-key-value-123",
    "DSH_CONFIG": "/home/u/dsh.yaml",
    "COPY_OF_KEY": OPENAI,
    "FLAG": "1",
}


def test_default_policy_withholds_the_builtin_provider_keys_and_secret_dsh_variables_only() -> None:
    policy = SecretPolicy.build()
    assert policy.key_variables == {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "DEEPSEEK_API_KEY"}
    assert policy.withheld(ENV) == [
        "ANTHROPIC_API_KEY",
        "COPY_OF_KEY",  # holds a provider's key under another name
        "DSH_API_KEY",
        "DSH_SERVICE_TOKEN",
        "OPENAI_API_KEY",
    ]
    child = policy.child_environment(ENV)
    # generic spellings dsh does not use itself stay: tools like gh need them
    assert child["GITHUB_TOKEN"] == ENV["GITHUB_TOKEN"]
    assert child["AWS_SECRET_ACCESS_KEY"] == ENV["AWS_SECRET_ACCESS_KEY"]
    assert child["DSH_MODEL"] == "openai:gpt-4o"
    assert child["DSH_CONFIG"] == "/home/u/dsh.yaml"
    assert child["FLAG"] == "1"
    assert set(child) == set(ENV) - set(policy.withheld(ENV))


def test_configured_providers_add_their_key_variables_and_inline_secrets() -> None:
    providers = {
        "myco": ProviderSettings(api_key_env="MYCO_KEY"),
        "inline": ProviderSettings(
            api_key=SecretStr(INLINE), headers={"X-Auth": "header-secret-9876", "X-Title": "dsh"}
        ),
    }
    policy = SecretPolicy.build(providers)
    env = {
        **ENV,
        "MYCO_KEY": "myco-key-0123456789",
        "SAME_AS_INLINE": INLINE,
        "SAME_AS_HEADER": "header-secret-9876",
        "TITLE": "dsh",
    }
    assert {"MYCO_KEY", "SAME_AS_INLINE", "SAME_AS_HEADER"} <= set(policy.withheld(env))
    assert "TITLE" not in policy.withheld(env)
    assert "OPENAI_API_KEY" in policy.withheld(env)  # the built-ins stay known


def test_pass_through_wins_and_remove_adds_names_and_patterns() -> None:
    policy = policy_for(
        None, SecretsConfig(pass_through=["OPENAI_API_KEY", "WEATHER_API_KEY"], remove=["*_API_KEY", "GITHUB_TOKEN"])
    )
    env = {
        **ENV,
        "WEATHER_API_KEY": "weather-0123456789",
        "OTHER_API_KEY": "other-0123456789",
        "lower_api_key": "x" * 20,
    }
    withheld = policy.withheld(env)
    assert "OPENAI_API_KEY" not in withheld
    assert "WEATHER_API_KEY" not in withheld
    assert {"OTHER_API_KEY", "GITHUB_TOKEN", "ANTHROPIC_API_KEY", "DSH_API_KEY"} <= set(withheld)
    assert "lower_api_key" not in withheld  # patterns are case-sensitive
    # a passed-through provider key is still a secret dsh holds: a copy of it elsewhere is withheld and redacted
    assert "COPY_OF_KEY" in withheld
    assert OPENAI in dict(policy.secret_values(env))


def test_short_values_are_neither_matched_nor_redacted() -> None:
    short = "k" * (MIN_SECRET_LENGTH - 1)
    policy = SecretPolicy.build()
    env = {"OPENAI_API_KEY": short, "OTHER": short}
    assert policy.withheld(env) == ["OPENAI_API_KEY"]  # by name, still
    assert policy.secret_values(env) == ()
    assert policy.redactor(env)(f"a {short} b") == f"a {short} b"


def test_redaction_replaces_every_secret_value_by_its_name_longest_first() -> None:
    policy = policy_for({"inline": ProviderSettings(api_key=SecretStr(INLINE))}, SecretsConfig(remove=["AWS_*"]))
    env = {**ENV, "LONGER": OPENAI + "-suffix"}
    redact = policy.redactor(env)
    text = f"{OPENAI} / {ANTHROPIC} / {INLINE} / {ENV['AWS_SECRET_ACCESS_KEY']} / {ENV['DSH_SERVICE_TOKEN']} / {ENV['GITHUB_TOKEN']}"
    assert redact(text) == (
        "[redacted OPENAI_API_KEY] / [redacted ANTHROPIC_API_KEY] / [redacted providers.inline.api_key] / "
        "[redacted AWS_SECRET_ACCESS_KEY] / [redacted DSH_SERVICE_TOKEN] / ghp_github_token_value"
    )


def test_child_environment_reads_the_environment_at_call_time_under_the_policy_in_force(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI)
    monkeypatch.setenv("ORDINARY_VARIABLE", "ordinary")
    monkeypatch.setenv("LATER_SECRET", "later-secret-0123")
    assert "OPENAI_API_KEY" not in child_environment()
    assert child_environment()["ORDINARY_VARIABLE"] == "ordinary"
    assert child_environment()["LATER_SECRET"] == "later-secret-0123"
    policy = policy_for(None, SecretsConfig(remove=["LATER_*"], pass_through=["OPENAI_API_KEY"]))
    with policy_in_force(policy):
        assert "LATER_SECRET" not in child_environment()
        assert child_environment()["OPENAI_API_KEY"] == OPENAI
        assert redact_text("x later-secret-0123 y") == "x [redacted LATER_SECRET] y"
    assert current_policy() == SecretPolicy.build()
    assert "LATER_SECRET" not in child_environment(policy)  # or passed explicitly
    assert redact_text("x later-secret-0123 y", policy) == "x [redacted LATER_SECRET] y"
    assert child_environment()["LATER_SECRET"] == "later-secret-0123"


def test_the_config_file_section_loads_and_rejects_unknown_keys(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("secrets:\n  pass_through: [GH_TOKEN]\n  remove: ['*_API_KEY']\n", encoding="utf-8")
    config = load_config(path)
    assert config.secrets == SecretsConfig(pass_through=["GH_TOKEN"], remove=["*_API_KEY"])
    path.write_text("secrets:\n  passthrough: [GH_TOKEN]\n", encoding="utf-8")
    from dsh.config import ConfigError

    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert "line 2: secrets.passthrough: unknown key (did you mean 'pass_through'?)" in error.value.message


def test_config_show_lists_what_commands_will_not_see_by_name_never_by_value() -> None:
    config = DshConfig(
        providers={"inline": ProviderSettings(api_key=SecretStr(INLINE), base_url="https://llm.example.com/v1")},
        secrets=SecretsConfig(pass_through=["GITHUB_TOKEN"], remove=["AWS_*"]),
    )
    env = {**ENV, "SAME_AS_INLINE": INLINE}
    rendered = render_config(config, source=None, env=env)
    for name, value in env.items():
        if len(value) >= MIN_SECRET_LENGTH and value not in ("/usr/bin:/bin", "openai:gpt-4o", "/home/u/dsh.yaml"):
            assert value not in rendered, name
    assert (
        "# commands dsh runs will not see: ANTHROPIC_API_KEY, AWS_SECRET_ACCESS_KEY, COPY_OF_KEY, DSH_API_KEY, "
        "DSH_SERVICE_TOKEN, OPENAI_API_KEY, SAME_AS_INLINE\n"
    ) in rendered
    assert "# passed through anyway: GITHUB_TOKEN\n" in rendered
    assert "secrets.remove AWS_*" in rendered
    data = yaml.safe_load(rendered)
    assert data["secrets"] == {"pass_through": ["GITHUB_TOKEN"], "remove": ["AWS_*"], "redact_prompts": True}
    assert "# commands dsh runs will not see: nothing set now" in render_config(None, source=None, env={"PATH": "/bin"})


def test_dsh_config_show_names_what_commands_will_not_see(tmp_path: Path) -> None:
    """The command itself (not only the renderer): names in comments, never a value."""
    import subprocess
    import sys

    config = tmp_path / "config.yaml"
    config.write_text("secrets:\n  pass_through: [WEATHER_API_KEY]\n  remove: ['*_API_KEY']\n", encoding="utf-8")
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "OPENAI_API_KEY": OPENAI,
        "WEATHER_API_KEY": "weather-0123456789",
        "OTHER_API_KEY": "other-0123456789",
        "ORDINARY": "ordinary-value-123",
    }
    shown = subprocess.run(
        [sys.executable, "-m", "dsh", "config", "show", "--config", str(config)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "# commands dsh runs will not see: OPENAI_API_KEY, OTHER_API_KEY\n" in shown
    assert "# passed through anyway: WEATHER_API_KEY\n" in shown
    for value in (OPENAI, "weather-0123456789", "other-0123456789"):
        assert value not in shown
