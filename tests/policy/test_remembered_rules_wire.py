"""Remembered rules mean what the user saw, over the wire (issue #33 item 3): the official SDK client against
``dsh acp`` with the scripted model.

* "Always allow `cat`" is never offered for ``cat a > b``; "Always allow `sed`", given for ``sed -n p a``, does not
  cover ``sed -n p a > ../outside/authorized_keys``, which asks (and, declined, writes nothing).
* "Always allow write_file in `src/`" does not cover a symlink inside ``src/`` that points out of it.
* The request for a command with control characters shows it escaped, whole, and offers no "always".
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.editor import EditorClient, call, read_log, run_editor, write_script


def _options(request: dict[str, object]) -> list[str]:
    return [option["name"] for option in request["options"]]  # type: ignore[attr-defined,index]


async def test_an_always_allowed_prefix_never_covers_a_redirected_write(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "secret").mkdir()
    (project / "a").write_text("ssh-ed25519 AAAA attacker\n", encoding="utf-8")
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(project / "secret", project / "src" / "link")
    model = write_script(
        tmp_path / "script.json",
        [
            call("run_command", "r1", command="cat a > b"),
            call("run_command", "r2", command="sed -n p a"),
            call("run_command", "r3", command="sed -n p a > ../outside/authorized_keys"),
            call("run_command", "r4", command="sed -n 1p a"),
            call("write_file", "w1", path="src/new.py", content="x = 1\n"),
            call("write_file", "w2", path="src/other.py", content="y = 1\n"),
            call("write_file", "w3", path="src/link/key", content="planted\n"),
            call("run_command", "r5", command="cat a\x1b[1A\x1b[2K; sort -o ../outside/x a"),
            {"text": "done"},
        ],
    )
    answers = ["reject_once", "allow_always", "reject_once", "allow_always", "reject_once", "reject_once"]
    client = EditorClient(answers)
    async with run_editor(tmp_path, model, client, project=project) as editor:
        session = (await editor.new_session()).session_id
        assert (await editor.prompt(session, "go")).stop_reason == "end_turn"
    asked = {request["toolCall"]["toolCallId"]: request for request in client.permissions()}
    assert list(asked) == ["r1", "r2", "r3", "w1", "w3", "r5"]  # r4 and w2 were covered by the "always" answers
    assert _options(asked["r1"]) == ["Allow", "Reject"]  # nothing honest to remember for a redirected write
    assert _options(asked["r2"])[1] == "Always allow `sed`"
    assert _options(asked["r3"]) == ["Allow", "Reject"]
    assert _options(asked["w1"])[1] == "Always allow write_file in `src/`"
    assert not (outside / "authorized_keys").exists() and not (project / "b").exists()
    assert not (project / "secret" / "key").exists()
    assert (project / "src" / "other.py").read_text(encoding="utf-8") == "y = 1\n"
    shown = asked["r5"]["toolCall"]
    assert "\x1b" not in shown["title"] and "\\x1b[1A\\x1b[2K" in shown["title"]
    (content,) = shown["content"]
    assert "\\x1b[2K; sort -o ../outside/x a" in content["content"]["text"]
    assert _options(asked["r5"]) == ["Allow", "Reject"]
    rules = [e["data"] for e in read_log(tmp_path, session) if e["type"] == "permission/rule"]
    assert rules == [
        {"tool": "run_command", "decision": "allow", "scope": "sed"},
        {"tool": "write_file", "decision": "allow", "scope": str(project / "src")},
    ]
