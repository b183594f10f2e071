"""Hook runs are visible where the client looks: a ``notice`` update (source ``hooks``) for a client that shows
notices; the JSON on stdin and the per-hook timeout as Claude Code documents them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.support.acp_schema import modern_client


def _is_notice(message: dict[str, Any]) -> bool:
    return message.get("method") == "session/update" and message["params"]["update"].get("sessionUpdate") == "notice"


async def test_hook_runs_and_failures_are_notices_for_a_client_that_shows_notices(tmp_path: Path) -> None:
    config = tmp_path / "config" / "dsh"
    config.mkdir(parents=True)
    hooks = {
        "UserPromptSubmit": [
            {"hooks": [{"type": "command", "command": "echo 'The build is red.'"}]},
            {"hooks": [{"type": "command", "command": "echo 'jq: not found' >&2; exit 1"}]},
        ]
    }
    (config / "config.yaml").write_text(yaml.safe_dump({"hooks": hooks}))
    async with modern_client(tmp_path, "echo", env={"XDG_CONFIG_HOME": str(tmp_path / "config")}) as (client, _):
        session = await client.new_session(tmp_path)
        response = await client.prompt(session, "hello")
        assert response["result"]["stopReason"] == "end_turn"
        notices = [u for u in client.updates(session) if u["sessionUpdate"] == "notice"]
    by_severity = {n["severity"]: n for n in notices}
    assert len(notices) == 2, notices
    assert by_severity["info"]["title"].startswith("hook UserPromptSubmit `echo 'The build is red.'`: added context")
    assert by_severity["warning"]["title"].startswith("hook UserPromptSubmit `echo 'jq: not found' >&2; exit 1`")
    assert "failed (exit 1): jq: not found" in by_severity["warning"]["title"]
    assert all(n["_meta"] == {"dsh": {"source": "hooks"}} for n in notices)


def test_the_default_timeout_is_60_seconds_and_each_hook_may_set_its_own() -> None:
    from dsh.hooks import HooksConfig

    config = HooksConfig.model_validate(
        {"Stop": [{"hooks": [{"type": "command", "command": "a"}, {"type": "command", "command": "b", "timeout": 5}]}]}
    )
    assert [h.timeout for h in config.Stop[0].hooks] == [60.0, 5.0]
