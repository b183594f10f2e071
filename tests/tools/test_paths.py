"""Paths: resolution against the session's directory, escapes refused, and the one-call grant convention."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from dsh import events as ev
from dsh.kernel import Context, Next
from dsh.services.tools import ToolExecution, ToolResult
from dsh.tools import OutsideGrants, ResolvedPath, resolve_path
from dsh.tools._paths import MAX_GRANTED_CALLS
from tests.tools.conftest import Call, FakeAgent, text

# -- resolve_path ---------------------------------------------------------------------------------------------


def test_relative_paths_resolve_against_cwd(work: Path) -> None:
    resolved = resolve_path("src/app.py", str(work), [str(work)])
    assert resolved == ResolvedPath(str(work / "src" / "app.py"), True, str(work.resolve() / "src" / "app.py"))


def test_dot_dot_is_normalised_and_can_leave_the_root(work: Path) -> None:
    assert resolve_path("a/../b.txt", str(work), [str(work)]).path == str(work / "b.txt")
    escaped = resolve_path("../x", str(work), [str(work)])
    assert escaped.path == str(work.parent / "x")
    assert escaped.inside is False


def test_absolute_paths_elsewhere_are_outside(work: Path) -> None:
    assert resolve_path("/etc/passwd", str(work), [str(work)]) == ResolvedPath(
        "/etc/passwd", False, os.path.realpath("/etc/passwd")
    )
    assert resolve_path(str(work / "f"), str(work), [str(work)]).inside is True


def test_the_root_itself_is_inside_but_a_sibling_with_a_common_prefix_is_not(work: Path) -> None:
    assert resolve_path(".", str(work), [str(work)]).inside is True
    (work.parent / "work2").mkdir()
    assert resolve_path("../work2/f", str(work), [str(work)]).inside is False


def test_a_symlink_pointing_out_of_the_root_is_outside(work: Path, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("secret")
    (work / "link.txt").symlink_to(tmp_path / "secret.txt")
    (tmp_path / "elsewhere").mkdir()
    (work / "linkdir").symlink_to(tmp_path / "elsewhere")
    link = resolve_path("link.txt", str(work), [str(work)])
    assert link.path == str(work / "link.txt")  # the name the editor knows
    assert link.real == str((tmp_path / "secret.txt").resolve())
    assert link.inside is False
    assert resolve_path("linkdir/new.txt", str(work), [str(work)]).inside is False


def test_a_symlink_that_stays_inside_is_inside(work: Path) -> None:
    (work / "real.txt").write_text("x")
    (work / "alias.txt").symlink_to(work / "real.txt")
    assert resolve_path("alias.txt", str(work), [str(work)]).inside is True


def test_a_session_directory_reached_through_a_symlink_contains_its_files(tmp_path: Path, work: Path) -> None:
    (tmp_path / "via").symlink_to(work)
    resolved = resolve_path("f.txt", str(tmp_path / "via"), [str(tmp_path / "via")])
    assert resolved.path == str(tmp_path / "via" / "f.txt")
    assert resolved.inside is True


def test_any_root_counts(work: Path, tmp_path: Path) -> None:
    extra = tmp_path / "extra"
    extra.mkdir()
    assert resolve_path(str(extra / "f"), str(work), [str(work), str(extra)]).inside is True
    assert resolve_path(str(extra / "f"), str(work), [str(work)]).inside is False


# -- tools refuse escapes -------------------------------------------------------------------------------------


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "secret.txt"
    path.write_text("top secret\n")
    return path


async def test_dot_dot_escape_is_refused_with_a_message_the_model_can_act_on(
    call: Call, secret: Path, work: Path
) -> None:
    result = await call("read_file", {"path": "../secret.txt"})
    assert result.is_error
    assert result.error == {"name": "OutsideRootsError", "code": "OUTSIDE_ROOTS"}
    message = text(result)
    assert f"path '../secret.txt' ({secret}) is outside the session's directory {work}" in message
    assert "top secret" not in message


async def test_absolute_paths_elsewhere_are_refused(call: Call) -> None:
    result = await call("read_file", {"path": "/etc/passwd"})
    assert result.is_error
    assert result.error is not None and result.error["code"] == "OUTSIDE_ROOTS"
    assert "root:" not in text(result)


async def test_a_symlink_inside_pointing_outside_is_refused(call: Call, secret: Path, work: Path) -> None:
    (work / "innocent.txt").symlink_to(secret)
    for name, arguments in [
        ("read_file", {"path": "innocent.txt"}),
        ("write_file", {"path": "innocent.txt", "content": "overwritten"}),
        ("edit_file", {"path": "innocent.txt", "old_string": "top", "new_string": "bottom"}),
    ]:
        result = await call(name, arguments)
        assert result.error is not None and result.error["code"] == "OUTSIDE_ROOTS", name
    assert await anyio.Path(secret).read_text() == "top secret\n"


async def test_every_tool_refuses_outside_paths(call: Call, tmp_path: Path, work: Path) -> None:
    for name, arguments in [
        ("write_file", {"path": "../new.txt", "content": "x"}),
        ("edit_file", {"path": "/etc/hosts", "old_string": "a", "new_string": "b"}),
        ("list_files", {"path": ".."}),
        ("grep", {"pattern": "secret", "path": ".."}),
        ("run_command", {"command": "touch ran", "cwd": ".."}),
    ]:
        result = await call(name, arguments)
        assert result.error is not None and result.error["code"] == "OUTSIDE_ROOTS", name
    assert not (tmp_path / "new.txt").exists()
    assert not (tmp_path / "ran").exists()


# -- grants ---------------------------------------------------------------------------------------------------


def _grants(core: Context) -> OutsideGrants:
    workspace = core.get("workspace")
    assert workspace is not None
    return workspace.grants


def _gate(core: Context, granted: list[str]) -> None:
    """A permission gate as the ACP front end writes one: grant the card's outside paths, then run."""

    async def gate(execution: ToolExecution, next_: Next[ToolExecution, ToolResult]) -> ToolResult:
        if execution.call_id in granted:
            tool = core.tools.get(execution.name)
            assert tool is not None
            card = tool.meta["present"](execution.arguments, execution.agent.session.header.cwd)  # type: ignore[union-attr]
            grants = _grants(core)
            for path, _line in card.locations:
                grants.grant(execution, path)
        return await next_()

    core.on(ev.TOOLS_EXECUTE, gate, prepend=True)


async def test_a_grant_allows_exactly_one_call(core: Context, call: Call, secret: Path) -> None:
    _gate(core, granted=["granted"])
    allowed = await call("read_file", {"path": "../secret.txt"}, call_id="granted")
    assert not allowed.is_error
    assert "top secret" in text(allowed)

    other = await call("read_file", {"path": "../secret.txt"}, call_id="other")
    assert other.error is not None and other.error["code"] == "OUTSIDE_ROOTS"


async def test_a_grant_ends_with_its_call(core: Context, call: Call, agent: FakeAgent, secret: Path) -> None:
    grants = _grants(core)
    execution = ToolExecution("c9", "read_file", {"path": str(secret)}, agent)  # type: ignore[arg-type]
    grants.grant(execution, str(secret))
    assert grants.is_granted(execution, str(secret))
    assert not (await call("read_file", {"path": str(secret)}, call_id="c9")).is_error
    assert not grants.is_granted(execution, str(secret))  # revoked when the call ended
    again = await call("read_file", {"path": str(secret)}, call_id="c9")
    assert again.error is not None and again.error["code"] == "OUTSIDE_ROOTS"


async def test_a_grant_is_revoked_even_when_the_call_fails(
    core: Context, call: Call, agent: FakeAgent, tmp_path: Path
) -> None:
    grants = _grants(core)
    missing = tmp_path / "missing.txt"
    execution = ToolExecution("c1", "read_file", {}, agent)  # type: ignore[arg-type]
    grants.grant(execution, str(missing))
    result = await call("read_file", {"path": str(missing)}, call_id="c1")
    assert result.error is not None and result.error["code"] == "NOT_FOUND"
    assert not grants.is_granted(execution, str(missing))


async def test_a_granted_directory_covers_what_is_below_it(core: Context, call: Call, tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "mod.py").write_text("VALUE = 1\n")
    _gate(core, granted=["list"])
    listed = await call("list_files", {"path": "../lib"}, call_id="list")
    assert not listed.is_error
    assert text(listed) == f"{tmp_path / 'lib' / 'mod.py'}"


async def test_grants_are_per_session(agent: FakeAgent, secret: Path, work: Path) -> None:
    grants = OutsideGrants()
    mine = ToolExecution("c1", "read_file", {}, agent)  # type: ignore[arg-type]
    theirs = ToolExecution("c1", "read_file", {}, FakeAgent.at(work, "session-2"))  # type: ignore[arg-type]
    grants.grant(mine, str(secret))
    assert grants.is_granted(mine, str(secret))
    assert not grants.is_granted(theirs, str(secret))
    assert not grants.is_granted(mine, str(secret.parent / "other.txt"))
    grants.revoke(mine)
    grants.revoke(mine)
    assert not grants.is_granted(mine, str(secret))


def test_grants_need_absolute_paths_and_stay_bounded(agent: FakeAgent) -> None:
    grants = OutsideGrants()
    with pytest.raises(ValueError, match="absolute"):
        grants.grant(ToolExecution("c", "t", {}, agent), "relative/path")  # type: ignore[arg-type]
    first = ToolExecution("first", "t", {}, agent)  # type: ignore[arg-type]
    grants.grant(first, "/opt/x")
    for index in range(MAX_GRANTED_CALLS):
        grants.grant(ToolExecution(f"n{index}", "t", {}, agent), "/opt/x")  # type: ignore[arg-type]
    assert not grants.is_granted(first, "/opt/x")  # the oldest grant was dropped
    assert len(grants) == MAX_GRANTED_CALLS


async def test_extra_roots_of_a_session_are_inside(core: Context, call: Call, tmp_path: Path) -> None:
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "notes.md").write_text("shared notes\n")
    remove = core.workspace.add_root("session-1", str(extra))
    assert "shared notes" in text(await call("read_file", {"path": str(extra / "notes.md")}))
    other_session = FakeAgent.at(tmp_path / "work", "session-2")
    refused = await call("read_file", {"path": str(extra / "notes.md")}, on=other_session)
    assert refused.error is not None and refused.error["code"] == "OUTSIDE_ROOTS"
    remove()
    remove()
    after = await call("read_file", {"path": str(extra / "notes.md")})
    assert after.error is not None and after.error["code"] == "OUTSIDE_ROOTS"
