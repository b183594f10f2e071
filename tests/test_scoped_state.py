"""Two applications in one process share nothing (RFC 0027 §4d): the outside-root grants, the spill roots, the
secret policy and the reaper's hand-outs are state of services on each application's context, and disposing an
application clears its own while the other keeps its."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from dsh.app import load_core
from dsh.kernel import App, Context
from dsh.secrets import SecretsConfig
from dsh.services.tools import ToolExecution, ToolResult
from tests.tools.conftest import FakeAgent

SECRET_A = "only-a-secret-0123456789"


def text(result: ToolResult) -> str:
    return "".join(block["text"] for block in result.content if block["type"] == "text")


async def execute(ctx: Context, name: str, arguments: object, agent: FakeAgent, call_id: str = "c1") -> ToolResult:
    with anyio.fail_after(30):  # hang detection only
        result: ToolResult = await ctx.tools.execute(ToolExecution(call_id, name, arguments, agent))  # type: ignore[arg-type]
    return result


def code(result: ToolResult) -> str | None:
    return (result.error or {}).get("code") if result.is_error else None


async def test_two_applications_in_one_process_share_no_grants_spill_roots_policy_or_hand_outs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ONLY_A_SECRET", SECRET_A)
    outside = tmp_path / "outside.txt"
    outside.write_text("outside the sessions' directories\n")
    work_a, work_b = tmp_path / "work-a", tmp_path / "work-b"
    work_a.mkdir()
    work_b.mkdir()
    agent_a, agent_b = FakeAgent.at(work_a, "session-x"), FakeAgent.at(work_b, "session-x")  # one session id in both
    async with App() as app_a:
        a = app_a.ctx
        load_core(a, data_dir=tmp_path / "data-a", secrets=SecretsConfig(remove=["ONLY_A_*"]), policy=False)
        async with App() as app_b:
            b = app_b.ctx
            load_core(b, data_dir=tmp_path / "data-b", policy=False)
            ws_a, ws_b = a.get("workspace"), b.get("workspace")
            assert ws_a is not None and ws_b is not None

            # grants: one given in A lets A's call out, not B's call with the same session and call id
            granted = ToolExecution("g1", "read_file", {}, agent_a)  # type: ignore[arg-type]
            ws_a.grants.grant(granted, str(outside))
            assert not ws_b.grants.is_granted(ToolExecution("g1", "read_file", {}, agent_b), str(outside))  # type: ignore[arg-type]
            refused = await execute(b, "read_file", {"path": str(outside)}, agent_b, "g1")
            assert code(refused) == "OUTSIDE_ROOTS"
            allowed = await execute(a, "read_file", {"path": str(outside)}, agent_a, "g1")
            assert not allowed.is_error and "outside the sessions'" in text(allowed)
            ws_a.grants.grant(ToolExecution("never-ran", "read_file", {}, agent_a), str(outside))  # type: ignore[arg-type]

            # spill roots: A's spilled output is readable by A's tools only
            spill_a = (tmp_path / "data-a" / "tool-output").resolve()
            assert str(spill_a) in ws_a.spill_roots() and str(spill_a) not in ws_b.spill_roots()
            spilled = spill_a / "session-x" / "c0.txt"
            spilled.parent.mkdir(parents=True, exist_ok=True)
            spilled.write_text("the whole output\n")
            assert not (await execute(a, "read_file", {"path": str(spilled)}, agent_a)).is_error
            assert code(await execute(b, "read_file", {"path": str(spilled)}, agent_b)) == "OUTSIDE_ROOTS"

            # the secret policy: A withholds ONLY_A_* from its commands, B does not
            policy_a, policy_b = a.get("secret_policy"), b.get("secret_policy")
            assert policy_a is not None and policy_b is not None and policy_a is not policy_b
            env_a = text(await execute(a, "run_command", {"command": "env"}, agent_a))
            env_b = text(await execute(b, "run_command", {"command": "env"}, agent_b))
            assert "ONLY_A_SECRET" not in env_a
            assert f"ONLY_A_SECRET={SECRET_A}" in env_b

            # the reaper's hand-outs: both ran a command for "session-x"; each remembers only its own
            tags_a, tags_b = a.get("reaper"), b.get("reaper")
            assert tags_a is not None and tags_b is not None and tags_a is not tags_b
            assert tags_a.handed_out("session-x") and tags_b.handed_out("session-x")
            tags_b.end("session-x")  # B ends its own session's processes (none is left running)
            assert not tags_b.handed_out("session-x")
            assert tags_a.handed_out("session-x"), "ending B's session ended A's hand-out"
            ws_b.grants.grant(ToolExecution("b-pending", "read_file", {}, agent_b), str(outside))  # type: ignore[arg-type]
            await execute(b, "run_command", {"command": "true"}, agent_b)
            assert tags_b.handed_out("session-x")

        # B disposed: its state is gone, A's is all there
        assert len(ws_b.grants) == 0 and ws_b.spill_roots() == ()
        assert b.get("secret_policy") is None and b.get("reaper") is None
        assert not tags_b.handed_out("session-x")
        assert len(ws_a.grants) == 1 and ws_a.spill_roots() == (str(spill_a),)
        assert a.get("secret_policy") is policy_a
        assert tags_a.handed_out("session-x")
        assert not (await execute(a, "read_file", {"path": str(spilled)}, agent_a)).is_error
    assert len(ws_a.grants) == 0 and ws_a.spill_roots() == ()
    assert a.get("secret_policy") is None
    assert not tags_a.handed_out("session-x")
