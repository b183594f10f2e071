"""The hook corpus (``tests/hooks/corpus/<case>/case.yaml``: the event, matcher, timeout, the hook's script, the
scenario the model plays and the expected outcome), played over the wire: a real ``dsh acp`` with the official SDK
client, and ``dsh exec --json``; the model is a loopback provider whose captured requests show what it was told."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.support.provider_server import Reply
from tests.support.provider_wire import DONE, oa_chunk, oa_finish, oa_text_reply, oa_tool_delta, oa_usage
from tests.support.sdk import RecordingClient

CORPUS = Path(__file__).parent / "corpus"
KEY = "sk-proj-" + "Q7v" * 14
"""A real key-shaped provider key, set for the daemon (the loopback provider takes any)."""


@dataclass
class Case:
    name: str
    event: str
    script: str
    scenario: str
    expect: dict[str, Any]
    matcher: str = ""
    timeout: float | None = None


def cases() -> list[Case]:
    out = []
    for path in sorted(CORPUS.glob("*/case.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        out.append(
            Case(
                path.parent.name,
                data["event"],
                data["script"],
                data["scenario"],
                data["expect"],
                str(data.get("matcher", "")),
                data.get("timeout"),
            )
        )
    return out


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


def replies(scenario: str) -> list[Reply]:
    if scenario == "command":
        return [tool_call("c1", "run_command", {"command": "cat notes.txt"}), Reply(events=oa_text_reply("done"))]
    if scenario == "write":
        return [
            tool_call("c1", "write_file", {"path": "out.txt", "content": "written"}),
            Reply(events=oa_text_reply("done")),
        ]
    if scenario == "subagent":  # the parent starts a sub-agent, which answers; then the parent answers
        job = {"description": "look around", "prompt": "say child done"}
        return [
            tool_call("c1", "task", job),
            Reply(events=oa_text_reply("child done")),
            Reply(events=oa_text_reply("done")),
        ]
    if scenario == "read_missing":
        return [tool_call("c1", "read_file", {"path": "missing.txt"}), Reply(events=oa_text_reply("done"))]
    if scenario == "stop":
        return [Reply(events=oa_text_reply("first")), Reply(events=oa_text_reply("second"))]
    return [Reply(events=oa_text_reply("done"))]


def install(case: Case, project: Path, config_dir: Path, outside: Path) -> None:
    """The user's config with the case's hook, the hook script, the project's files."""
    script = project / "hooks" / f"{case.name}.sh"
    script.parent.mkdir(parents=True, exist_ok=True)
    text = case.script.replace("$OUTSIDE", str(outside)).replace("$KEY_LITERAL", KEY)
    script.write_text("#!/bin/bash\n" + text, encoding="utf-8")
    script.chmod(0o755)
    hook: dict[str, Any] = {"type": "command", "command": str(script)}
    if case.timeout is not None:
        hook["timeout"] = case.timeout
    config = {"hooks": {case.event: [{"matcher": case.matcher, "hooks": [hook]}]}}
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    (project / "notes.txt").write_text("hello-notes\n", encoding="utf-8")


def tool_result(bodies: list[dict[str, Any]], call_id: str = "c1") -> str | None:
    for body in bodies:
        for message in body["messages"]:
            if message["role"] == "tool" and message.get("tool_call_id") == call_id:
                return str(message["content"])
    return None


def hook_contexts(body: dict[str, Any]) -> list[str]:
    out = []
    for message in body["messages"]:
        content = message.get("content")
        text = content if isinstance(content, str) else json.dumps(content)
        if '<context source="hook">' in text:
            out.append(text)
    return out


@dataclass
class Seen:
    """What one run showed: the captured requests, the lines (exec) or updates (acp), files."""

    bodies: list[dict[str, Any]]
    lines: list[str] = field(default_factory=list)
    """Each hook run's line as the user sees it (exec: hook/run; acp: the card, or a message for a failure)."""
    problems: list[str] = field(default_factory=list)
    """Warnings shown (exec: notice lines; acp: messages)."""
    output: str = ""
    """Everything the user and the logs got (stdout, stderr), for the key check."""
    error: str = ""
    asked: bool = False


def check(case: Case, seen: Seen, project: Path, outside: Path, front: str) -> None:
    expect = case.expect
    where = f"{case.name} ({front})"
    result = tool_result(seen.bodies)
    wanted = expect.get(f"{front}_result", expect.get("result"))
    if wanted is not None:
        assert result is not None and wanted in result, (where, result)
    if "ran" in expect:  # an asking hook: the editor's user allows (acp), nobody can (exec)
        expected = True if front == "acp" and expect.get("acp_asked") else expect["ran"]
        assert (result is not None and "hello-notes" in result) == expected, (where, result)
    if "wrote" in expect:
        assert (project / "out.txt").exists() == expect["wrote"], where
    if "context" in expect:
        contexts = [c for body in seen.bodies for c in hook_contexts(body)]
        assert any(expect["context"] in c for c in contexts), (where, contexts[:2])
        if "context_max" in expect:
            assert all(len(c) <= expect["context_max"] for c in contexts), (where, [len(c) for c in contexts])
    if "requests" in expect:
        assert len(seen.bodies) == expect["requests"], (where, len(seen.bodies))
    if "error" in expect:
        assert expect["error"] in seen.error, (where, seen.error[-500:])
    if "line" in expect and (front == "exec" or case.event in ("PreToolUse", "PostToolUse") or expect.get("problem")):
        assert any(expect["line"] in line for line in seen.lines + seen.problems), (where, seen.lines, seen.problems)
    if expect.get("problem"):
        assert any(expect["line"] in p for p in seen.problems), (where, seen.problems)
    if "stdin" in expect:
        stdin = json.loads((project / "stdin.json").read_text(encoding="utf-8"))
        assert stdin["tool_name"] == expect["stdin"]["tool_name"], stdin
        assert stdin["hook_event_name"] == expect["stdin"]["hook_event_name"], stdin
        assert stdin["tool_input"]["command"] == expect["stdin"]["command"], stdin
        assert stdin["cwd"] == str(project), stdin
    if "diff" in expect:
        stdin = json.loads((project / "stdin.json").read_text(encoding="utf-8"))
        diff = stdin["tool_input"]["dsh"]["diff"]
        assert diff["path"] == str(project / expect["diff"]["path"]), diff
        assert (diff["old_text"], diff["new_text"]) == (expect["diff"]["old_text"], expect["diff"]["new_text"]), diff
        assert stdin["tool_name"] == "Write" and stdin["tool_input"]["file_path"] == diff["path"], stdin
    if "file" in expect:
        assert (project / expect["file"]).exists(), (where, "the hook wrote no file", seen.lines, seen.output[-3000:])
        text = (project / expect["file"]).read_text(encoding="utf-8")
        assert expect["file_has"] in text, (where, text[:500])
    if "no_file" in expect:
        assert not (project / expect["no_file"]).exists(), where
    if "outside_written" in expect:
        assert outside.exists() == expect["outside_written"], where
    if expect.get("no_key"):
        everything = json.dumps(seen.bodies) + seen.output
        assert KEY not in everything, where
    if front == "acp" and "acp_asked" in expect:
        assert seen.asked == expect["acp_asked"], where


class AnsweringClient(RecordingClient):
    """Answers every permission request with the option of kind *answer* (recording each request's params)."""

    def __init__(self, answer: str = "allow_once") -> None:
        super().__init__()
        self.answer = answer
        self.permissions: list[dict[str, Any]] = []

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        from acp.schema import AllowedOutcome, RequestPermissionResponse

        options = kwargs.get("options") or args[0]
        tool_call = kwargs.get("tool_call")
        self.permissions.append({"tool_call": tool_call.model_dump() if tool_call is not None else None})
        chosen = next(o for o in options if o.kind == self.answer)
        return RequestPermissionResponse(outcome=AllowedOutcome(option_id=chosen.option_id, outcome="selected"))
