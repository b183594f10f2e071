"""Commands that run without a question run at ``read-only``, over the wire (``dsh acp`` and the SDK client).

The policy's verdict is forced to "no question" (``DSH_SANDBOX_TEST_FORCE_NO_ASK=1``) for commands that write, read
outside the roots or connect: the sandbox alone must stop them. A command the parser finds read-only runs without
the hook too (``ls``), and still cannot write.
"""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import anyio
import pytest

from dsh.sandbox import FORCE_NO_ASK_ENV, support
from dsh.sandbox._sandbox import BLOCKED_READ_ONLY
from tests.support.editor import EditorClient, call, run_editor, text_of, write_script

pytestmark = pytest.mark.skipif(not support().available, reason="this machine offers no Landlock")

FORCED = {FORCE_NO_ASK_ENV: "1"}


async def run(
    tmp_path: Path, command: str, *, env: dict[str, str] | None = None, answers: list[str] | None = None
) -> tuple[str, list[dict]]:  # type: ignore[type-arg]
    """Run *command* through ``run_command`` in one prompt; the tool's final text and the permission requests."""
    model = write_script(tmp_path / "script.json", [call("run_command", "c1", command=command), {"text": "done"}])
    client = EditorClient(answers or [])
    async with run_editor(tmp_path, model, client, env=env) as editor:
        session = (await editor.new_session()).session_id
        await editor.prompt(session, "run it")
        final = editor.final(session, "c1")
    return text_of(final), client.permissions()


async def test_a_forced_no_ask_write_in_the_roots_is_stopped_by_the_sandbox(tmp_path: Path) -> None:
    text, asked = await run(tmp_path, "echo pwned > written.txt; echo done-writing", env=FORCED)
    assert asked == []
    assert not (tmp_path / "project" / "written.txt").exists()
    assert BLOCKED_READ_ONLY in text
    assert "done-writing" in text  # the shell ran: the write alone failed


async def test_a_command_the_parser_finds_read_only_runs_without_a_question(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "a.txt").write_text("inside\n", encoding="utf-8")
    text, asked = await run(tmp_path, "cat a.txt")
    assert asked == []
    assert "inside" in text
    assert "blocked" not in text


async def test_a_read_only_command_writes_only_to_its_private_temporary_directory(tmp_path: Path) -> None:
    text, asked = await run(tmp_path, 'touch "$TMPDIR/scratch" && echo scratch-ok; echo "tmp=$TMPDIR"', env=FORCED)
    assert asked == []
    assert "scratch-ok" in text
    tmp = Path(text.split("tmp=", 1)[1].split()[0])
    assert tmp.parent == tmp_path / "dsh-data" / "sandbox-tmp"  # under the data directory, one per session
    assert not await anyio.Path(tmp).exists()  # removed with the session (the daemon has exited)


async def test_a_forced_no_ask_read_outside_the_roots_fails(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOP-SECRET-VALUE\n", encoding="utf-8")
    home_ssh = tmp_path / "home" / ".ssh"
    home_ssh.mkdir(parents=True)
    (home_ssh / "id_rsa").write_text("PRIVATE-KEY-VALUE\n", encoding="utf-8")
    text, asked = await run(tmp_path, f"cat {outside / 'secret.txt'}; cat ~/.ssh/id_rsa; cat /etc/shadow", env=FORCED)
    assert asked == []
    assert "TOP-SECRET-VALUE" not in text
    assert "PRIVATE-KEY-VALUE" not in text
    assert text.count("Permission denied") >= 3


async def test_the_provider_key_is_unreachable_through_the_environment_and_proc(tmp_path: Path) -> None:
    key = "sk-test-" + "q7" * 20
    command = "env; for f in /proc/[0-9]*/environ; do cat $f; done; cat /proc/$PPID/environ; echo end-of-probe"
    text, asked = await run(tmp_path, command, env={**FORCED, "OPENAI_API_KEY": key})
    assert asked == []
    assert "end-of-probe" in text
    assert key not in text and key[-16:] not in text
    assert "redacted" not in text  # redaction is the second line of defence: the key never reached the output


async def test_a_forced_no_ask_command_cannot_connect_to_a_loopback_server(tmp_path: Path) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    server.settimeout(30)
    accepted: list[object] = []

    def accept() -> None:
        try:
            accepted.append(server.accept())
        except OSError:
            pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        command = f"(exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected) 2>&1; echo probe-done"
        text, asked = await run(tmp_path, command, env=FORCED)
    finally:
        server.close()
        thread.join(timeout=30)
    assert asked == []
    assert "probe-done" in text
    assert "connected" not in text.replace("probe-done", "")
    assert accepted == []


async def test_the_hook_as_a_plugin_forces_the_verdict_too(tmp_path: Path) -> None:
    env = {"DSH_PLUGINS": "tests.support.sandbox_hooks:force_read_only"}
    text, asked = await run(tmp_path, "echo pwned > written.txt", env=env)
    assert asked == []
    assert not (tmp_path / "project" / "written.txt").exists()
    assert BLOCKED_READ_ONLY in text


async def test_a_forced_no_ask_command_cannot_signal_the_daemon(tmp_path: Path) -> None:
    if support().abi < 6:
        pytest.skip("signal scoping needs Landlock ABI 6")
    text, asked = await run(tmp_path, "kill -0 $PPID && echo can-signal || echo cannot-signal", env=FORCED)
    assert asked == []
    assert "cannot-signal" in text
