"""Skills over the wire: a real ``dsh acp`` driven by the official SDK client, the model a loopback provider whose
captured requests show what the model was told (RFC 0035)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
from acp.schema import AvailableCommandsUpdate

from tests.support.provider_server import Reply, serve
from tests.support.provider_wire import DONE, oa_chunk, oa_finish, oa_text_reply, oa_tool_delta, oa_usage
from tests.support.sdk import DshProcess, run_dsh

WAIT = 30.0


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def skill(folder: Path, name: str, description: str, body: str, extra: str = "") -> Path:
    path = folder / name / "SKILL.md"
    _write(path, f"---\nname: {name}\ndescription: {description}\n{extra}---\n{body}")
    return path


def tool_call(call_id: str, name: str, arguments: dict[str, Any]) -> Reply:
    return Reply(
        events=[
            oa_chunk({"role": "assistant", "content": None}),
            oa_tool_delta(0, json.dumps(arguments), call_id=call_id, name=name),
            oa_finish("tool_calls"),
            oa_usage(9, 4),
            DONE,
        ]
    )


def system_of(body: dict[str, Any]) -> str:
    (system,) = [m["content"] for m in body["messages"] if m["role"] == "system"]
    return str(system)


def tool_results(body: dict[str, Any]) -> dict[str, str]:
    return {m["tool_call_id"]: str(m["content"]) for m in body["messages"] if m["role"] == "tool"}


def env_for(url: str) -> dict[str, str | None]:
    return {"OPENAI_BASE_URL": f"{url}/v1", "OPENAI_API_KEY": "test"}


async def prompt(daemon: DshProcess, session_id: str, text: str) -> str:
    with anyio.fail_after(WAIT):
        response = await daemon.prompt(session_id, text)
    return str(response.stop_reason)


async def talk(tmp_path: Path, replies: list[Reply], *prompts: str) -> tuple[list[dict[str, Any]], str]:
    """Run *prompts* in one session against a provider answering *replies*; the captured request bodies and the
    daemon's stderr."""
    with serve() as server:
        server.script(*replies)
        async with run_dsh(tmp_path, "openai:test-model", env=env_for(server.url)) as daemon:
            with anyio.fail_after(WAIT):
                session_id = await daemon.start()
            for text in prompts:
                assert await prompt(daemon, session_id, text) == "end_turn"
            stderr = daemon.stderr()
        return server.bodies(), stderr


async def announced(daemon: DshProcess, session_id: str) -> dict[str, str]:
    with anyio.fail_after(WAIT):
        await daemon.client.wait_until(
            lambda: any(isinstance(u, AvailableCommandsUpdate) for u in daemon.client.of(session_id))
        )
    last = [u for u in daemon.client.of(session_id) if isinstance(u, AvailableCommandsUpdate)][-1]
    return {c.name: c.description for c in last.available_commands}


async def test_a_project_skill_is_listed_in_the_prompt_and_loaded_on_demand(tmp_path: Path) -> None:
    skill(
        tmp_path / ".agents" / "skills",
        "release-notes",
        "Write release notes from the git log.",
        "Step one: read CHANGES.md.\n",
    )
    _write(tmp_path / ".agents" / "skills" / "release-notes" / "scripts" / "collect.sh", "git log\n")
    replies = [tool_call("call-1", "skill", {"name": "release-notes"}), Reply(events=oa_text_reply("done"))]
    (first, second, third), _ = await talk(
        tmp_path, [*replies, Reply(events=oa_text_reply("again"))], "write the release notes", "once more"
    )
    system = system_of(first)
    assert "# Skills\n" in system
    assert "- release-notes: Write release notes from the git log." in system
    assert "Step one" not in system  # name and description only: the body comes on demand
    assert system_of(second) == system == system_of(third)  # byte-stable for the session
    assert "skill" in [t["function"]["name"] for t in first["tools"]]
    loaded = tool_results(second)["call-1"]
    assert "Step one: read CHANGES.md." in loaded
    assert f'folder="{tmp_path / ".agents" / "skills" / "release-notes"}"' in loaded
    assert "scripts/collect.sh" in loaded


async def test_each_skill_is_a_slash_command_and_skills_lists_them(tmp_path: Path) -> None:
    skill(tmp_path / ".dsh" / "skills", "tidy-imports", "Sort and prune imports.", "Use ruff --select I.\n")
    with serve() as server:
        server.script(Reply(events=oa_text_reply("tidied")))
        async with run_dsh(tmp_path, "openai:test-model", env=env_for(server.url)) as daemon:
            with anyio.fail_after(WAIT):
                session_id = await daemon.start()
            offered = await announced(daemon, session_id)
            assert offered["tidy-imports"] == "Sort and prune imports."
            assert "skills" in offered
            assert await prompt(daemon, session_id, "/tidy-imports src/app.py") == "end_turn"
            before = len(daemon.client.chunk_texts(session_id))
            assert await prompt(daemon, session_id, "/skills") == "end_turn"
            listing = "".join(daemon.client.chunk_texts(session_id)[before:])
        (body,) = server.bodies()
    users = [str(m["content"]) for m in body["messages"] if m["role"] == "user"]
    assert any("Use ruff --select I." in u and "src/app.py" in u for u in users), users
    path = tmp_path / ".dsh" / "skills" / "tidy-imports" / "SKILL.md"
    assert f"- tidy-imports (project: {path}) — Sort and prune imports." in listing


async def test_a_project_skill_shadows_a_user_skill_of_the_same_name(tmp_path: Path) -> None:
    user = tmp_path / "home" / ".config" / "dsh" / "skills"
    skill(user, "deploy", "The user's deploy.", "user body\n")
    skill(user, "mine", "Only the user's.", "mine\n")
    skill(tmp_path / ".agents" / "skills", "deploy", "The project's deploy.", "project body\n")
    with serve() as server:
        server.script(tool_call("call-1", "skill", {"name": "deploy"}), Reply(events=oa_text_reply("ok")))
        async with run_dsh(tmp_path, "openai:test-model", env=env_for(server.url)) as daemon:
            with anyio.fail_after(WAIT):
                session_id = await daemon.start()
            offered = await announced(daemon, session_id)
            assert offered["deploy"] == "The project's deploy." and offered["mine"] == "Only the user's."
            assert await prompt(daemon, session_id, "deploy it") == "end_turn"
        first, second = server.bodies()
    system = system_of(first)
    assert "- deploy: The project's deploy." in system and "The user's deploy." not in system
    assert "- mine: Only the user's." in system
    assert "project body" in tool_results(second)["call-1"]


async def test_malformed_and_hostile_skill_files_are_skipped_with_one_line_each(tmp_path: Path) -> None:
    folder = tmp_path / ".agents" / "skills"
    skill(folder, "fine", "A fine skill.", "fine\n")
    broken = folder / "unclosed" / "SKILL.md"
    _write(broken, "---\nname: unclosed\ndescription: never closed\n")
    bomb = folder / "bomb" / "SKILL.md"
    _write(bomb, "---\nname: bomb\ndescription: &a [x, x]\nb: [*a, *a]\n---\nbody\n")
    outside = tmp_path.parent / f"{tmp_path.name}-secret.md"
    _write(outside, "---\nname: leak\ndescription: leaked\n---\nsecret\n")
    leak = folder / "leak" / "SKILL.md"
    leak.parent.mkdir(parents=True)
    leak.symlink_to(outside)
    wrong = skill(folder, "wrong", "Name differs.", "x\n")
    wrong.write_text("---\nname: other\ndescription: Name differs.\n---\nx\n", encoding="utf-8")
    huge = skill(folder, "huge", "Too big.", "x" * (300 * 1024))
    (body,), stderr = await talk(tmp_path, [Reply(events=oa_text_reply("ok"))], "hello")
    system = system_of(body)
    assert "- fine: A fine skill." in system
    for name in ("unclosed", "bomb", "leak", "other", "huge", "secret", "leaked"):
        assert f"- {name}:" not in system
    for path in (broken, bomb, leak, wrong, huge):
        lines = [line for line in stderr.splitlines() if "skipped a skill" in line and str(path) in line]
        # one line per discovery: exactly one session notice (its first prompt), a log line per command-list build
        assert sum('"event": "notice"' in line for line in lines) == 1, (path, stderr[-2000:])
        assert sum('"event": "skipped a skill"' in line for line in lines) >= 1
    assert "Traceback" not in stderr


async def test_allowed_tools_narrow_the_calls_while_the_skill_is_followed(tmp_path: Path) -> None:
    skill(
        tmp_path / ".agents" / "skills",
        "read-only-review",
        "Review without changing anything.",
        "Only read.\n",
        extra="allowed-tools: Read Grep\n",
    )
    _write(tmp_path / "notes.txt", "hello\n")
    replies = [
        tool_call("call-1", "skill", {"name": "read-only-review"}),
        tool_call("call-2", "write_file", {"path": "out.txt", "content": "x"}),
        tool_call("call-3", "read_file", {"path": "notes.txt"}),
        Reply(events=oa_text_reply("reviewed")),
        tool_call("call-4", "list_files", {"path": "."}),
        Reply(events=oa_text_reply("listed")),
    ]
    bodies, _ = await talk(tmp_path, replies, "review it", "list the files")
    results = tool_results(bodies[3])
    assert "While you follow this skill you may call only: Read, Grep" in results["call-1"]
    assert results["call-2"].startswith("Error: write_file is not among the tools the skill")
    assert not (tmp_path / "out.txt").exists()
    assert "hello" in results["call-3"]
    # the next turn is not narrowed any more
    assert not tool_results(bodies[5])["call-4"].startswith("Error")


async def test_a_session_without_skills_gets_neither_the_section_nor_the_tool(tmp_path: Path) -> None:
    (body,), _ = await talk(tmp_path, [Reply(events=oa_text_reply("ok"))], "hello")
    assert "skill" not in [t["function"]["name"] for t in body["tools"]]
    assert "# Skills" not in system_of(body) and "- skill:" not in system_of(body)
