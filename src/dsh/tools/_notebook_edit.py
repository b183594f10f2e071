"""``notebook_edit``: replace, insert or delete one cell of a Jupyter notebook, a prepared tool (schema, body and
card). The cell work is :func:`dsh.tools._notebooks.edit_notebook` (pure); this module adds what every edit has:
the read ledger, the exact new text computed before anyone is asked, apply's guard that the file is still what
prepare read, the diff for people."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from dsh.services.tools import Prepared, ToolCard, ToolExecution, define_prepared_tool
from dsh.tools._common import Spec, card_path, parse, paths_of, refuse_placeholder, report, shown
from dsh.tools._errors import ToolError
from dsh.tools._host import ToolHost
from dsh.tools._notebooks import NOTEBOOK_SUFFIX, edit_notebook, parse_notebook

__all__ = ["NotebookEditArgs", "notebook_edit_spec"]

DESCRIPTION = (
    "Change one cell of a Jupyter notebook (read it first): replace its source (a code cell's outputs are "
    "cleared), insert a cell at index `cell` (or after `cell_id`), or delete it. Cells count from 0, as "
    "read_file shows them; the rest of the notebook is kept."
)


class NotebookEditArgs(BaseModel):
    path: str = Field(description="The .ipynb file.")
    edit_mode: Literal["replace", "insert", "delete"] = Field(
        default="replace", description="replace (default), insert or delete."
    )
    cell: int | None = Field(
        default=None,
        ge=0,
        description="The cell's index (insert: the new cell's).",
    )
    cell_id: str | None = Field(default=None, description="The cell's id instead of its index.")
    new_source: str | None = Field(default=None, description="The cell's complete new source.")
    cell_type: Literal["code", "markdown", "raw"] | None = Field(
        default=None, description="insert: default code; replace: default unchanged."
    )


async def notebook_edit(host: ToolHost, args: NotebookEditArgs, execution: ToolExecution) -> Prepared:
    """Prepared: the new notebook text is computed before anyone is asked; apply writes exactly that."""
    target = host.locate(execution, args.path)
    where = shown(target.path, host.cwd(execution))
    if not target.path.lower().endswith(NOTEBOOK_SUFFIX):
        raise ToolError(f"{where} is not a notebook (.ipynb): use edit_file for other files", "NOT_A_NOTEBOOK")
    text = await host.old_text(execution, target, must_exist=True)
    assert text is not None
    if args.new_source is not None and args.edit_mode == "replace" and args.cell is not None:
        cells = parse_notebook(text, where)["cells"]
        if 0 <= args.cell < len(cells) and isinstance(cells[args.cell], dict):
            old = cells[args.cell].get("source", "")
            refuse_placeholder(args.new_source, "".join(old) if isinstance(old, list) else str(old), field="new_source")
    new_text, summary = edit_notebook(
        text,
        where,
        mode=args.edit_mode,
        index=args.cell,
        cell_id=args.cell_id,
        source=args.new_source,
        cell_type=args.cell_type,
    )

    async def apply() -> str:
        host.checked(execution, target, args.path)
        if not target.inside:
            await host.check_read(execution, target)
        await host.unchanged_since(execution, target, text, edit=True)
        await host.write(execution, target, new_text)
        await host.record_read(execution, target)
        report(display={"diff": {"path": target.path, "old_text": text, "new_text": new_text}})
        return f"Edited {where}: {summary}."

    return Prepared(apply, (target.path,), () if target.inside else (target.path,), (target.path, text, new_text))


def present_notebook_edit(arguments: Any, cwd: str) -> ToolCard | None:
    args = parse(NotebookEditArgs, arguments)
    if args is None:
        return None
    path = card_path(args.path, cwd).path
    which = f"cell {args.cell}" if args.cell is not None else f"cell {args.cell_id}"
    return ToolCard(f"Notebook {args.edit_mode} {which} in {shown(path, cwd)}", "edit", ((path, None),))


def notebook_edit_spec(host: ToolHost) -> Spec:
    async def prepare(args: NotebookEditArgs, execution: ToolExecution) -> Prepared:
        return await notebook_edit(host, args, execution)

    tool = define_prepared_tool("notebook_edit", DESCRIPTION, NotebookEditArgs, prepare)
    return tool, "edit", present_notebook_edit, paths_of(NotebookEditArgs, "path")
