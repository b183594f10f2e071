"""Every case of the hook corpus over the wire: ``dsh exec --json`` and a real ``dsh acp`` with the official SDK
client (see :mod:`tests.hooks.corpus_runner`)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from tests.hooks.corpus_runner import KEY, AnsweringClient, Case, Seen, cases, check, install, replies
from tests.support.env import sandbox_env
from tests.support.headless import exec_run
from tests.support.provider_server import serve
from tests.support.sdk import connected_daemon

WAIT = 60.0
CASES = cases()
PROMPT = "please do it"


def _env(url: str, outside: Path) -> dict[str, str | None]:
    return {"OPENAI_BASE_URL": f"{url}/v1", "OPENAI_API_KEY": KEY, "OUTSIDE": str(outside)}


def test_the_corpus_covers_every_event_and_answer() -> None:
    from dsh.hooks._config import EVENTS

    events = {case.event for case in CASES}
    assert events | {"PreCompact"} == set(EVENTS)  # PreCompact: tests/hooks/test_acp_hooks.py (a /compact)
    kinds = " ".join(case.name for case in CASES)
    for kind in ("allow", "deny", "ask", "exit2", "context", "timeout", "crash", "huge", "key"):
        assert kind in kinds, kind


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_exec(case: Case, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    outside = tmp_path.parent / f"{tmp_path.name}-outside.txt"
    install(case, project, tmp_path / "home" / ".config" / "dsh", outside)
    with serve() as server:
        server.script(*replies(case.scenario))
        run = exec_run(
            tmp_path, "--json", PROMPT, model="openai:test-model", env=_env(server.url, outside), deadline=90
        )
        bodies = server.bodies()
    lines = run.lines
    seen = Seen(
        bodies,
        lines=[str(line.get("line")) for line in lines if line["type"] == "hook/run"],
        problems=[str(line["message"]) for line in lines if line["type"] == "notice" and line["severity"] != "info"],
        output=run.stdout + run.stderr,
        error=json.dumps(lines[-1]) if lines else run.stderr,
    )
    assert lines and lines[-1]["type"] == "result", run.stderr[-2000:]
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    check(case, seen, project, outside, "exec")
    if "exec_code" in case.expect:
        assert run.code == case.expect["exec_code"], (run.code, run.stderr[-1500:])


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
async def test_acp(case: Case, tmp_path: Path) -> None:
    project = tmp_path
    outside = tmp_path.parent / f"{tmp_path.name}-outside.txt"
    install(case, project, tmp_path / "home" / ".config" / "dsh", outside)
    client = AnsweringClient()
    with serve() as server:
        server.script(*replies(case.scenario))
        environment = sandbox_env(tmp_path, "openai:test-model")
        environment.update({k: v for k, v in _env(server.url, outside).items() if v is not None})
        error = ""
        async with connected_daemon(environment, client, tmp_path, tmp_path / "dsh.stderr.log") as daemon:
            with anyio.fail_after(WAIT):
                session_id = await daemon.start()
                try:
                    response = await daemon.prompt(session_id, PROMPT)
                    error = str(response.stop_reason)
                except Exception as exc:  # a blocked prompt ends the turn with an error
                    error = str(exc)
            stderr = daemon.stderr()
        bodies = server.bodies()
    assert daemon.exit_code == 0, stderr[-2000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    texts = client.chunk_texts(session_id)
    cards: list[str] = []
    for _sid, update in client.updates:
        for item in getattr(update, "content", None) or []:
            inner = getattr(item, "content", None)
            if getattr(update, "session_update", "") == "tool_call_update" and hasattr(inner, "text"):
                cards.append(inner.text)
    seen = Seen(
        bodies,
        lines=cards,
        problems=texts,
        output=stderr + "".join(texts) + json.dumps([u.model_dump() for _s, u in client.updates], default=str),
        error=error + stderr,
        asked=bool(client.permissions),
    )
    check(case, seen, project, outside, "acp")
