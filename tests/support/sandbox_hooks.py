"""The sandbox's test hook as a ``DSH_PLUGINS`` entry: ``tests.support.sandbox_hooks:force_read_only`` makes every
command call the policy would ask about run without a question at ``read-only`` (the parser's verdict forced), so
that only the OS sandbox stands between a command and the world. The same switch as
``DSH_SANDBOX_TEST_FORCE_NO_ASK=1`` (:data:`dsh.sandbox.FORCE_NO_ASK_ENV`); a refusal (plan mode, a deny rule)
still refuses."""

from __future__ import annotations

from typing import Any

from dsh.kernel import Context, plugin

__all__ = ["force_read_only"]


@plugin("test_force_read_only", inject=("sandbox",))
def force_read_only(ctx: Context, config: Any) -> None:
    sandbox = ctx.get("sandbox")
    assert sandbox is not None
    sandbox.force_no_ask = True
