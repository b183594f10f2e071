"""``edit_file``: exact replacements in a file through the edit matcher, a prepared tool (schema, body and
card)."""

from __future__ import annotations

import difflib
from functools import partial
from typing import Any

from pydantic import BaseModel, Field

from dsh.services.tools import Prepared, ToolCard, ToolExecution, define_prepared_tool
from dsh.tools._common import Spec, card_path, parse, paths_of, refuse_placeholder, report, shown
from dsh.tools._edits import Edit, plan_edits
from dsh.tools._errors import ToolError
from dsh.tools._host import ToolHost
from dsh.tools._offload import CPU_TIMEOUT, run_cpu

__all__ = ["DIFF_MAX_CHARS", "EditFileArgs", "EditItem", "edit_file_spec"]

DIFF_MAX_CHARS = 20_000

DESCRIPTION = (
    "Replace text in a file (read it first in this session). `old_string` must match exactly one place: "
    "include enough surrounding lines to make it unique, or set `replace_all`. A match that differs only "
    "in trailing whitespace, indentation, runs of blanks, blank edge lines, Unicode spaces, typographic quotes "
    "and dashes or escaped newlines and quotes is accepted when it is unique (the result says so); nothing "
    "merely similar is applied: a miss shows the closest lines with their numbers. For several changes to one file pass `edits: [{old_string, new_string, "
    "replace_all?}, ...]` instead: applied in order, written once, nothing written if one fails. Line "
    "endings are kept. Returns a unified diff."
)


class EditItem(BaseModel):
    old_string: str = Field(description="The text to replace, as in the file (whitespace and indentation included).")
    new_string: str = Field(description="The text to put in its place.")
    replace_all: bool = Field(default=False, description="Replace every occurrence instead of exactly one.")


class EditFileArgs(BaseModel):
    path: str = Field(description="The file to edit: relative to the working directory, or absolute.")
    old_string: str | None = Field(
        default=None, description="The text to replace, as in the file (whitespace and indentation included)."
    )
    new_string: str | None = Field(default=None, description="The text to put in its place.")
    replace_all: bool = Field(default=False, description="Replace every occurrence instead of exactly one.")
    edits: list[EditItem] | None = Field(
        default=None,
        description="Several changes to the same file, applied in order and written once (instead of "
        "old_string/new_string); if one fails, nothing is written.",
    )

    def edit_list(self) -> tuple[list[Edit], bool]:
        """The edits to apply and whether they came as a list; raises ``BAD_ARGUMENTS`` on a mix or neither."""
        if self.edits is not None:
            if self.old_string is not None or self.new_string is not None:
                raise ToolError("give either edits or old_string/new_string, not both", "BAD_ARGUMENTS")
            if not self.edits:
                raise ToolError("edits is empty: there is nothing to change", "NO_CHANGE")
            return [Edit(e.old_string, e.new_string, e.replace_all) for e in self.edits], True
        if self.old_string is None or self.new_string is None:
            raise ToolError("give old_string and new_string (or an edits list)", "BAD_ARGUMENTS")
        return [Edit(self.old_string, self.new_string, self.replace_all)], False


_RULE_WORDS = {
    "trailing-whitespace": "trailing whitespace",
    "indentation": "indentation (new_string re-indented to the file's)",
    "unicode-punctuation": "typographic quotes, dashes and spaces",
    "escaped": 'escapes: old_string had literal \\n, \\t or \\" where the file has the characters (both strings '
    "unescaped)",
    "unicode-spaces": "Unicode spaces (read as plain spaces)",
    "inner-whitespace": "runs of blanks inside lines",
    "blank-edge-lines": "blank lines at the edges of old_string that the file lacks",
}


def _edit_summary(rules: tuple[str, ...], counts: tuple[int, ...], listed: bool) -> str:
    def one(rule: str, count: int) -> str:
        places = "1 occurrence" if count == 1 else f"{count} occurrences"
        return places if rule == "exact" else f"{places}, matched ignoring {_RULE_WORDS[rule]}"

    if not listed:
        return "replaced " + one(rules[0], counts[0])
    parts = [f"edits[{i}] {one(rule, count)}" for i, (rule, count) in enumerate(zip(rules, counts, strict=True))]
    return f"applied {len(rules)} edits (" + "; ".join(parts) + ")"


def _unified_diff(old: str, new: str, where: str) -> str:
    diff = "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{where}", f"b/{where}", n=3
        )
    )
    if len(diff) > DIFF_MAX_CHARS:
        diff = diff[:DIFF_MAX_CHARS] + "\n[… diff truncated]\n"
    return diff


async def edit_file(host: ToolHost, args: EditFileArgs, execution: ToolExecution) -> Prepared:
    """Prepared: the matcher computes the new text (an edit that cannot apply fails here, before anyone is
    asked, and the approval shows the real diff); apply writes exactly that."""
    target = host.locate(execution, args.path)
    where = shown(target.path, host.cwd(execution))
    edits, listed = args.edit_list()
    text = await host.old_text(execution, target, must_exist=True)
    assert text is not None
    for index, edit in enumerate(edits):
        field = f"edits[{index}].new_string" if listed else "new_string"
        refuse_placeholder(edit.new_string, edit.old_string, known=text, field=field)
    plan = await run_cpu(  # off the event loop, bounded: a miss on a large file is CPU-heavy (issue 34)
        partial(plan_edits, text, edits, shown=where, listed=listed),
        timeout=CPU_TIMEOUT,
        what=f"matching the edit in {where}",
    )

    async def apply() -> str:
        host.checked(execution, target, args.path)
        if not target.inside:
            await host.check_read(execution, target)
        await host.unchanged_since(execution, target, text, edit=True)
        await host.write(execution, target, plan.text)
        await host.record_read(execution, target)
        report(display={"diff": {"path": target.path, "old_text": text, "new_text": plan.text}, "line": plan.line})
        summary = _edit_summary(plan.rules, plan.counts, listed)
        return f"Edited {where}: {summary}.\n{_unified_diff(text, plan.text, where)}"

    return Prepared(apply, (target.path,), () if target.inside else (target.path,), (target.path, text, plan.text))


def present_edit(arguments: Any, cwd: str) -> ToolCard | None:
    args = parse(EditFileArgs, arguments)
    if args is None:
        return None
    path = card_path(args.path, cwd).path
    pairs = [(e.old_string, e.new_string) for e in args.edits or ()]
    if args.edits is None and args.old_string is not None and args.new_string is not None:
        pairs = [(args.old_string, args.new_string)]
    diff = (path, "\n…\n".join(o for o, _ in pairs), "\n…\n".join(n for _, n in pairs)) if pairs else None
    return ToolCard(f"Edit {shown(path, cwd)}", "edit", ((path, None),), diff)


def edit_file_spec(host: ToolHost) -> Spec:
    async def prepare(args: EditFileArgs, execution: ToolExecution) -> Prepared:
        return await edit_file(host, args, execution)

    tool = define_prepared_tool("edit_file", DESCRIPTION, EditFileArgs, prepare)
    return tool, "edit", present_edit, paths_of(EditFileArgs, "path")
