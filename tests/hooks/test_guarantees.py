"""What a hook can never do, and the trust of a project's hooks, over the wire (``dsh exec --json`` and a real
``dsh acp`` with the official SDK client; the model a loopback provider)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import yaml

from tests.hooks.corpus_runner import KEY, AnsweringClient, tool_call, tool_result
from tests.support.env import sandbox_env
from tests.support.headless import exec_run
from tests.support.provider_server import Reply, serve
from tests.support.provider_wire import oa_text_reply
from tests.support.sdk import connected_daemon

WAIT = 60.0
ALLOW = 'printf \'%s\' \'{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}}\'\n'


def _script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/bash\n" + body, encoding="utf-8")
    path.chmod(0o755)
    return path


def _user_config(tmp_path: Path, config: dict[str, Any]) -> None:
    folder = tmp_path / "home" / ".config" / "dsh"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")


def _hooks(event: str, matcher: str, command: str, **extra: Any) -> dict[str, Any]:
    return {event: [{"matcher": matcher, "hooks": [{"type": "command", "command": command, **extra}]}]}


def _env(url: str, **more: str) -> dict[str, str | None]:
    return {"OPENAI_BASE_URL": f"{url}/v1", "OPENAI_API_KEY": KEY, **more}


def _exec(tmp_path: Path, replies: list[Reply], *args: str, env: dict[str, str] | None = None) -> tuple[Any, list[Any]]:
    with serve() as server:
        server.script(*replies)
        run = exec_run(
            tmp_path,
            "--json",
            *args,
            "do it",
            model="openai:test-model",
            env=_env(server.url, **(env or {})),
            deadline=90,
        )
        return run, server.bodies()


# -- an allow never overrides a deny rule, plan mode or the sandbox --------------------------------------------


def test_a_hooks_allow_does_not_override_a_deny_rule(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("hello-notes\n")
    ran = tmp_path / "ran"
    hook = _script(tmp_path / "allow.sh", f"touch {ran}\n" + ALLOW)
    _user_config(
        tmp_path, {"hooks": _hooks("PreToolUse", "*", str(hook)), "permissions": {"deny": ["run_command(cat *)"]}}
    )
    run, bodies = _exec(
        tmp_path, [tool_call("c1", "run_command", {"command": "cat notes.txt"}), Reply(events=oa_text_reply("ok"))]
    )
    result = tool_result(bodies)
    assert result is not None and "hello-notes" not in result, result
    assert not ran.exists()  # a refused call never reaches the hook
    assert run.code == 1


def test_a_hooks_allow_does_not_override_plan_mode(tmp_path: Path) -> None:
    hook = _script(tmp_path / "allow.sh", ALLOW)
    _user_config(tmp_path, {"hooks": _hooks("PreToolUse", "*", str(hook))})
    replies = [tool_call("c1", "write_file", {"path": "out.txt", "content": "x"}), Reply(events=oa_text_reply("ok"))]
    _run, bodies = _exec(tmp_path, replies, "--mode", "plan")
    assert not (tmp_path / "project" / "out.txt").exists()
    assert "plan" in (tool_result(bodies) or "").lower()


def test_a_hooks_allow_does_not_override_the_sandbox(tmp_path: Path) -> None:
    """Without an OS sandbox every command asks first (RFC 0028); a hook's allow does not skip that question."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("hello-notes\n")
    hook = _script(tmp_path / "allow.sh", ALLOW)
    _user_config(tmp_path, {"hooks": _hooks("PreToolUse", "Bash", str(hook))})
    replies = [tool_call("c1", "run_command", {"command": "cat notes.txt"}), Reply(events=oa_text_reply("ok"))]
    run, bodies = _exec(tmp_path, replies, env={"DSH_SANDBOX_SIMULATE": "unavailable"})
    result = tool_result(bodies)
    assert result is not None and "hello-notes" not in result, result
    assert any(line["type"] == "hook/run" and line.get("decision") == "allow" for line in run.lines)


# -- project hooks and trust --------------------------------------------------------------------------------


def _project_hook(project: Path, marker: Path, *, claude: bool = False) -> Path:
    script = _script(project / "tools" / "hook.sh", f"echo ran >> {marker}\n")
    if claude:
        settings = {"hooks": _hooks("PreToolUse", "Bash", str(script))}
        (project / ".claude").mkdir(exist_ok=True)
        path = project / ".claude" / "settings.json"
        path.write_text(json.dumps(settings))
    else:
        (project / ".dsh").mkdir(exist_ok=True)
        path = project / ".dsh" / "settings.yaml"
        path.write_text(yaml.safe_dump({"hooks": _hooks("UserPromptSubmit", "", str(script))}))
    return script


def test_exec_skips_an_untrusted_projects_hooks_with_one_line(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    marker = tmp_path / "marker"
    _project_hook(project, marker)
    run, bodies = _exec(tmp_path, [Reply(events=oa_text_reply("ok"))])
    assert not marker.exists()
    skipped = [line for line in run.lines if line["type"] == "notice" and "project hook" in line["message"]]
    assert len(skipped) == 1, run.lines
    assert "skipped 1 project hook(s)" in skipped[0]["message"]
    assert run.code == 0 and len(bodies) == 1


async def _acp_prompt(
    tmp_path: Path, client: AnsweringClient, replies: list[Reply], prompts: list[str], env: dict[str, str] | None = None
) -> tuple[list[Any], str, list[str]]:
    with serve() as server:
        server.script(*replies)
        environment = sandbox_env(tmp_path, "openai:test-model")
        environment.update({k: v for k, v in _env(server.url, **(env or {})).items() if v is not None})
        async with connected_daemon(environment, client, tmp_path, tmp_path / "dsh.stderr.log") as daemon:
            with anyio.fail_after(WAIT):
                session_id = await daemon.start()
                for text in prompts:
                    await daemon.prompt(session_id, text)
            stderr = daemon.stderr()
            texts = client.chunk_texts(session_id)
        assert daemon.exit_code == 0, stderr[-2000:]
        return server.bodies(), stderr, texts


async def test_a_projects_hooks_ask_once_listing_each_command_and_are_remembered(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    script = _project_hook(tmp_path, marker)
    declined = AnsweringClient("reject_once")
    await _acp_prompt(tmp_path, declined, [Reply(events=oa_text_reply("ok"))] * 2, ["one", "two"])
    assert not marker.exists()
    assert len(declined.permissions) == 1  # asked once for the session, not at every prompt
    shown = json.dumps(declined.permissions[0])
    assert str(script) in shown and "UserPromptSubmit" in shown

    trusting = AnsweringClient("allow_always")
    await _acp_prompt(tmp_path, trusting, [Reply(events=oa_text_reply("ok"))], ["one"])
    assert marker.read_text().count("ran") == 1 and len(trusting.permissions) == 1

    again = AnsweringClient("reject_once")  # remembered: a new daemon does not ask, the hook runs
    await _acp_prompt(tmp_path, again, [Reply(events=oa_text_reply("ok"))], ["one"])
    assert marker.read_text().count("ran") == 2 and again.permissions == []

    settings = tmp_path / ".dsh" / "settings.yaml"  # a changed hook asks again
    settings.write_text(settings.read_text().replace("hook.sh", "hook.sh --changed"))
    changed = AnsweringClient("reject_once")
    await _acp_prompt(tmp_path, changed, [Reply(events=oa_text_reply("ok"))], ["one"])
    assert len(changed.permissions) == 1 and marker.read_text().count("ran") == 2


async def test_claude_settings_are_read_only_when_imported_and_map_claudes_tool_names(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    _project_hook(tmp_path, marker, claude=True)
    (tmp_path / "notes.txt").write_text("hello-notes\n")
    replies = [tool_call("c1", "run_command", {"command": "cat notes.txt"}), Reply(events=oa_text_reply("ok"))]
    client = AnsweringClient("allow_once")
    await _acp_prompt(tmp_path, client, replies, ["go"])
    assert not marker.exists() and client.permissions == []  # not imported: not read, nobody asked

    _user_config(tmp_path, {"hooks": {"import": ["claude"]}})
    client = AnsweringClient("allow_once")
    await _acp_prompt(tmp_path, client, replies, ["go"])
    assert marker.read_text().count("ran") == 1  # the Bash matcher took run_command
    assert len(client.permissions) == 1


# -- running: cancel, PreCompact -------------------------------------------------------------------------------


async def test_cancel_during_a_running_hook_kills_it(tmp_path: Path) -> None:
    pid_file = tmp_path / "hook.pid"
    hook = _script(tmp_path / "slow.sh", f"echo $$ > {pid_file}\nsleep 120\n")
    _user_config(tmp_path, {"hooks": _hooks("PreToolUse", "*", str(hook), timeout=300)})
    (tmp_path / "notes.txt").write_text("hello-notes\n")
    client = AnsweringClient()
    with serve() as server:
        server.script(tool_call("c1", "run_command", {"command": "cat notes.txt"}), Reply(events=oa_text_reply("ok")))
        environment = sandbox_env(tmp_path, "openai:test-model")
        environment.update({k: v for k, v in _env(server.url).items() if v is not None})
        async with connected_daemon(environment, client, tmp_path, tmp_path / "dsh.stderr.log") as daemon:
            with anyio.fail_after(WAIT):
                session_id = await daemon.start()
                async with anyio.create_task_group() as group:
                    outcome: list[str] = []

                    async def prompt() -> None:
                        response = await daemon.prompt(session_id, "go")
                        outcome.append(str(response.stop_reason))

                    group.start_soon(prompt)
                    while not pid_file.exists() or not pid_file.read_text().strip():  # noqa: ASYNC110
                        await anyio.sleep(0.05)  # polling a file the hook writes: no event crosses processes
                    pid = int(pid_file.read_text())
                    await daemon.conn.cancel(session_id=session_id)
                assert outcome == ["cancelled"]
                while _alive(pid):  # noqa: ASYNC110
                    await anyio.sleep(0.05)  # bounded by fail_after: the hook's group was killed
    assert daemon.exit_code == 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


async def test_precompact_runs_before_a_compaction(tmp_path: Path) -> None:
    seen = tmp_path / "precompact.json"
    hook = _script(tmp_path / "pre.sh", f"cat > {seen}\n")
    _user_config(tmp_path, {"hooks": _hooks("PreCompact", "manual", str(hook))})
    replies = [
        Reply(events=oa_text_reply("ok")),
        Reply(events=oa_text_reply("a summary")),
        Reply(events=oa_text_reply("ok")),
    ]
    await _acp_prompt(tmp_path, AnsweringClient(), replies, ["hello there", "/compact keep the names"])
    data = json.loads(seen.read_text())
    assert data["hook_event_name"] == "PreCompact" and data["trigger"] == "manual"
    assert data["custom_instructions"] == "keep the names"


def test_config_show_lists_hooks_with_their_source(tmp_path: Path) -> None:
    import subprocess
    import sys

    project = tmp_path / "project"
    project.mkdir()
    script = _project_hook(project, tmp_path / "marker")
    _user_config(tmp_path, {"hooks": _hooks("PreToolUse", "Bash", "ruff check")})
    env = sandbox_env(tmp_path, "echo")
    done = subprocess.run(
        [sys.executable, "-m", "dsh", "config", "show", "--hooks", "--cwd", str(project)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    config = tmp_path / "home" / ".config" / "dsh" / "config.yaml"
    assert lines[0] == f"PreToolUse\tBash\truff check\t60s\tuser\t{config}"
    assert lines[1] == f"UserPromptSubmit\t*\t{script}\t60s\tproject\t{project / '.dsh' / 'settings.yaml'}"
    shown = subprocess.run(
        [sys.executable, "-m", "dsh", "config", "show"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "hooks:" in shown.stdout and "ruff check" in shown.stdout
