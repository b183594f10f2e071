"""Secrets stay with dsh (issue #17), end to end through ``dsh acp``: with provider keys in the environment and in
a configuration file, a command the model runs does not see them (an ordinary and a passed-through variable it
does), a command that prints a key gives a tool result, updates, a session file and logs without it, and an
editor terminal gets no ``env`` from us (the editor's environment is the editor's business)."""

from __future__ import annotations

from pathlib import Path

from tests.support.editor import (
    EditorClient,
    FakeTerminal,
    call,
    read_log,
    run_editor,
    text_of,
    tool_results,
    write_script,
)

OPENAI = "sk-openai-e2e-0123456789abcdef"
ANTHROPIC = "sk-ant-e2e-0123456789abcdef"
DEEPSEEK = "sk-deepseek-e2e-0123456789"
MYCO = "myco-configured-key-0123456789"
INLINE = "inline-config-key-0123456789"
OTHER = "other-api-key-0123456789"
DSH_TOKEN = "dsh-token-e2e-0123456789"
WEATHER = "weather-passed-through-0123456789"
SECRETS = {
    "OPENAI_API_KEY": OPENAI,
    "ANTHROPIC_API_KEY": ANTHROPIC,
    "DEEPSEEK_API_KEY": DEEPSEEK,
    "MYCO_KEY": MYCO,  # a configured provider's api_key_env
    "COPY_OF_INLINE": INLINE,  # holds the value of an inline api_key of the file
    "OTHER_API_KEY": OTHER,  # removed by the file's pattern
    "DSH_SERVICE_TOKEN": DSH_TOKEN,  # a DSH_* variable that carries a secret
}
CONFIG = f"""\
providers:
  myco: {{type: openai, base_url: "http://127.0.0.1:9/v1", api_key_env: MYCO_KEY}}
  inline: {{type: anthropic, base_url: "http://127.0.0.1:9", api_key: "{INLINE}"}}
secrets:
  pass_through: [WEATHER_API_KEY]
  remove: ["*_API_KEY"]
"""


def environment(tmp_path: Path) -> dict[str, str]:
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG, encoding="utf-8")
    return {
        **SECRETS,
        "WEATHER_API_KEY": WEATHER,
        "ORDINARY_VARIABLE": "ordinary-value",
        "GITHUB_TOKEN": "ghp-not-ours-0123456789",
        "DSH_CONFIG": str(config),
        "DSH_LOG_LEVEL": "debug",
    }


async def test_commands_see_neither_the_keys_nor_their_values(tmp_path: Path) -> None:
    model = write_script(
        tmp_path / "script.json",
        [call("run_command", "env", command="env"), {"text": "done"}],
    )
    async with run_editor(tmp_path, model, EditorClient(["allow_once"]), env=environment(tmp_path)) as editor:
        session = (await editor.new_session()).session_id
        assert (await editor.prompt(session, "show env")).stop_reason == "end_turn"
        shown = text_of(editor.final(session, "env"))
    lines = shown.splitlines()
    assert "ORDINARY_VARIABLE=ordinary-value" in lines
    assert f"WEATHER_API_KEY={WEATHER}" in lines
    assert "GITHUB_TOKEN=ghp-not-ours-0123456789" in lines  # not ours: tools like gh need it
    assert "DSH_LOG_LEVEL=debug" in lines
    for name, value in SECRETS.items():
        assert value not in shown, name
        assert not any(line.startswith(f"{name}=") for line in lines), name
    (stored,) = tool_results(read_log(tmp_path, session), "env")
    assert "ORDINARY_VARIABLE=ordinary-value" in stored["content"][0]["text"]


async def test_a_printed_key_is_redacted_from_the_result_the_session_file_and_the_logs(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / ".env").write_text(f"OPENAI_API_KEY={OPENAI}\nINLINE={INLINE}\n", encoding="utf-8")
    model = write_script(
        tmp_path / "script.json",
        [call("run_command", "cat", command="cat .env"), call("read_file", "read", path=".env"), {"text": "done"}],
    )
    async with run_editor(
        tmp_path, model, EditorClient(["allow_once", "allow_once"]), env=environment(tmp_path)
    ) as editor:
        session = (await editor.new_session()).session_id
        assert (await editor.prompt(session, "print it")).stop_reason == "end_turn"
        assert text_of(editor.final(session, "cat")) == (
            "OPENAI_API_KEY=[redacted OPENAI_API_KEY]\nINLINE=[redacted providers.inline.api_key]\n[exit code: 0]"
        )
        assert "[redacted OPENAI_API_KEY]" in text_of(editor.final(session, "read"))
    stderr = editor.dsh.stderr()
    wire = bytes(editor.dsh.stdout).decode("utf-8")
    stored = (tmp_path / "dsh-data" / f"{session}.jsonl").read_text(encoding="utf-8")
    (cat,) = tool_results(read_log(tmp_path, session), "cat")
    assert "[redacted OPENAI_API_KEY]" in cat["content"][0]["text"]
    assert '"event": "session created"' in stderr  # logging was on; nothing it said holds a key
    for value in (OPENAI, INLINE):
        assert value not in wire
        assert value not in stored
        assert value not in stderr


async def test_editor_terminals_get_no_env_from_us_and_their_output_is_redacted(tmp_path: Path) -> None:
    model = write_script(tmp_path / "script.json", [call("run_command", "t", command="env"), {"text": "done"}])
    terminal = FakeTerminal(output=f"OPENAI_API_KEY={OPENAI}\n", exit_code=0)
    client = EditorClient(["allow_once"], terminal=terminal)
    async with run_editor(tmp_path, model, client, terminal=True, env=environment(tmp_path)) as editor:
        session = (await editor.new_session()).session_id
        assert (await editor.prompt(session, "env")).stop_reason == "end_turn"
        ((_, create),) = editor.daemon_requests("terminal/create")
        assert "env" not in create["params"]  # dsh adds nothing to the editor's environment
        assert text_of(editor.final(session, "t")) == "OPENAI_API_KEY=[redacted OPENAI_API_KEY]\n[exit code: 0]"
    assert OPENAI not in (tmp_path / "dsh-data" / f"{session}.jsonl").read_text(encoding="utf-8")
