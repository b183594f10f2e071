"""Jupyter notebooks (``.ipynb``) for the model: cells to read, cells to edit, the file kept a valid notebook.

``read_file`` of a notebook shows its cells (index, type, id, source) with their outputs summarised (text cut,
HTML and other rich outputs named, errors as their name, message and last traceback line), and the images among
the outputs as image blocks (a model that takes no images gets their description from the ``llm`` service, as
for any image). ``notebook_edit`` replaces, inserts or deletes one cell.

Pure functions (no I/O): the caller reads and writes through the workspace seam.

Guarantees:

* :func:`render_notebook` holds its text to ``max_chars`` (whole cells; a cell larger than the budget alone is
  cut with a note) and at most :data:`MAX_IMAGES` images, and says how to read on (``offset`` counts cells for a
  notebook: the index of the first cell to show).
* :func:`edit_notebook` changes one cell and nothing else: the notebook's metadata, its format numbers, the
  other cells (ids, metadata, outputs) and its key order are kept; the text is written the way Jupyter writes
  it (the file's own indentation, non-ASCII kept, a final newline when the file had one), so an untouched part
  keeps its bytes. A replaced code cell loses its outputs and execution count (they belonged to the old
  source). A new cell gets a fresh id when the notebook's format has ids (nbformat 4.5 and later).
* Anything that is not a notebook (invalid JSON, no ``cells`` list) is ``NOT_A_NOTEBOOK``; a cell index or id
  that does not exist is ``NO_CELL`` naming the valid range; neither changes anything.
"""

from __future__ import annotations

import json
import re
import secrets
from typing import Any, Literal

from dsh.services.llm import ContentBlock
from dsh.tools._errors import ToolError

__all__ = [
    "MAX_IMAGES",
    "NOTEBOOK_SUFFIX",
    "EditMode",
    "edit_notebook",
    "image_blocks",
    "parse_notebook",
    "render_notebook",
]

NOTEBOOK_SUFFIX = ".ipynb"
MAX_IMAGES = 4
"""Images one read of a notebook returns (the others are named)."""
OUTPUT_CHARS = 2000
"""Characters of one text output shown (its head and its tail beyond that)."""
OUTPUT_LINES = 40
CellType = Literal["code", "markdown", "raw"]
EditMode = Literal["replace", "insert", "delete"]
_IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def parse_notebook(text: str, shown: str) -> dict[str, Any]:
    """*text* as a notebook (a JSON object with a ``cells`` list), else ``NOT_A_NOTEBOOK``."""
    try:
        notebook = json.loads(text)
    except ValueError as exc:
        raise ToolError(
            f"{shown} is not a valid notebook: its JSON does not parse ({exc}); read it with read_file's offset "
            "and limit on a copy, or fix the JSON with edit_file",
            "NOT_A_NOTEBOOK",
        ) from None
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        raise ToolError(f"{shown} is not a Jupyter notebook (no cells list)", "NOT_A_NOTEBOOK")
    return notebook


def _source(cell: dict[str, Any]) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _cut(text: str, chars: int = OUTPUT_CHARS, lines: int = OUTPUT_LINES) -> str:
    parts = text.split("\n")
    if len(text) <= chars and len(parts) <= lines:
        return text
    head = "\n".join(parts[: lines // 2])[: chars // 2]
    tail = "\n".join(parts[-(lines // 2) :])[-(chars // 2) :]
    return f"{head}\n[… {len(text) - len(head) - len(tail)} characters of output cut …]\n{tail}"


def _language(notebook: dict[str, Any]) -> str:
    metadata = notebook.get("metadata")
    if isinstance(metadata, dict):
        info = metadata.get("language_info")
        if isinstance(info, dict) and isinstance(info.get("name"), str):
            return str(info["name"])
        spec = metadata.get("kernelspec")
        if isinstance(spec, dict) and isinstance(spec.get("language"), str):
            return str(spec["language"])
    return "unknown"


def _output_lines(output: Any, images: list[tuple[str, str]], allowed: int) -> list[str]:
    """One output as text lines; an image goes to *images* (mime, base64) while fewer than *allowed*."""
    if not isinstance(output, dict):
        return ["[output: unreadable]"]
    kind = output.get("output_type")
    if kind == "stream":
        text = output.get("text", "")
        text = "".join(text) if isinstance(text, list) else str(text)
        return [f"[{output.get('name', 'stream')}]", _cut(_ANSI.sub("", text).rstrip("\n"))]
    if kind == "error":
        trace = output.get("traceback")
        last = _ANSI.sub("", str(trace[-1])).strip() if isinstance(trace, list) and trace else ""
        line = f"[error] {output.get('ename', 'Error')}: {output.get('evalue', '')}"
        return [line] + ([_cut(last, 500, 5)] if last and last not in line else [])
    data = output.get("data")
    if kind in ("execute_result", "display_data") and isinstance(data, dict):
        out: list[str] = []
        for mime in _IMAGE_TYPES:
            if mime in data:
                encoded = data[mime]
                encoded = "".join(encoded) if isinstance(encoded, list) else str(encoded)
                if len(images) < allowed:
                    images.append((mime, encoded.replace("\n", "")))
                    out.append(f"[{mime} output: image {len(images)} below]")
                else:
                    out.append(f"[{mime} output: not shown, more than {allowed} images in this read]")
                break
        text = data.get("text/plain")
        if text is not None and not out:
            text = "".join(text) if isinstance(text, list) else str(text)
            label = "[result]" if kind == "execute_result" else "[display]"
            out += [label, _cut(text.rstrip("\n"))]
        others = [m for m in data if m != "text/plain" and m not in _IMAGE_TYPES]
        if others:
            out.append(f"[also as {', '.join(sorted(others))}: not shown]")
        return out
    return [f"[output: {kind}]"]


def _cell_text(index: int, cell: Any, images: list[tuple[str, str]], allowed: int) -> str:
    if not isinstance(cell, dict):
        return f"<cell {index}: not a cell object>"
    kind = cell.get("cell_type", "?")
    head = f"<cell {index} {kind}"
    if isinstance(cell.get("id"), str):
        head += f" id={cell['id']}"
    if kind == "code":
        count = cell.get("execution_count")
        head += f" [{count if count is not None else ' '}]"
    lines = [head + ">", _source(cell)]
    outputs = cell.get("outputs")
    if kind == "code" and isinstance(outputs, list) and outputs:
        lines.append("<outputs>")
        for output in outputs:
            lines += _output_lines(output, images, allowed)
        lines.append("</outputs>")
    lines.append(f"</cell {index}>")
    return "\n".join(lines)


def render_notebook(
    notebook: dict[str, Any], shown: str, *, start: int = 0, limit: int | None = None, max_chars: int
) -> tuple[str, list[tuple[str, str]]]:
    """The text of cells *start* … (at most *limit*) and the images of their outputs (mime, base64), held to
    *max_chars* and :data:`MAX_IMAGES` (see the module docstring)."""
    cells: list[Any] = notebook["cells"]
    total = len(cells)
    header = (
        f"{shown}: Jupyter notebook, {total} cell{'' if total == 1 else 's'}, language {_language(notebook)} "
        f"(nbformat {notebook.get('nbformat', '?')}.{notebook.get('nbformat_minor', '?')}). Edit cells with "
        "notebook_edit (cell index or id)."
    )
    if start >= total and total:
        return f"{header}\n[offset {start} is past the last cell (index {total - 1})]", []
    parts = [header]
    used = len(header)
    images: list[tuple[str, str]] = []
    stop = total if limit is None else min(total, start + limit)
    shown_to = start
    for index in range(start, stop):
        kept = len(images)
        block = _cell_text(index, cells[index], images, MAX_IMAGES)
        room = max_chars - used - 200
        if len(block) + 1 > room:
            if index == start:  # one cell larger than a whole read: show its head
                parts.append(block[: max(room, 0)] + f"\n[… cell {index} cut: {len(block) - room} more characters]")
                shown_to = index + 1
            else:
                del images[kept:]
            break
        parts.append(block)
        used += len(block) + 1
        shown_to = index + 1
    if shown_to < total:
        parts.append(
            f"[… cells {shown_to}-{total - 1} not shown: read on with offset={shown_to} (for a notebook, offset "
            "is the index of the first cell and limit a number of cells)]"
        )
    return "\n".join(parts), images


def _lines(text: str) -> list[str]:
    """A source as Jupyter stores it: its lines, each with its newline."""
    return text.splitlines(keepends=True)


def _find_cell(cells: list[Any], shown: str, index: int | None, cell_id: str | None) -> int:
    if cell_id is not None:
        for i, cell in enumerate(cells):
            if isinstance(cell, dict) and cell.get("id") == cell_id:
                return i
        ids = [str(cell["id"]) for cell in cells if isinstance(cell, dict) and isinstance(cell.get("id"), str)]
        known = f"its ids: {', '.join(ids[:20])}" if ids else "its cells have no ids: use the cell index"
        raise ToolError(f"{shown} has no cell with id {cell_id!r} ({known})", "NO_CELL")
    assert index is not None
    return index


def _new_id(cells: list[Any]) -> str:
    taken = {cell.get("id") for cell in cells if isinstance(cell, dict)}
    while True:
        candidate = secrets.token_hex(4)
        if candidate not in taken:
            return candidate


def _has_ids(notebook: dict[str, Any]) -> bool:
    major, minor = notebook.get("nbformat"), notebook.get("nbformat_minor")
    return isinstance(major, int) and isinstance(minor, int) and (major, minor) >= (4, 5)


def _indent_of(text: str) -> int | None:
    match = re.match(r"\{\s*?\n( *)\S", text)
    return len(match.group(1)) if match else None


def edit_notebook(
    text: str,
    shown: str,
    *,
    mode: EditMode,
    index: int | None = None,
    cell_id: str | None = None,
    source: str | None = None,
    cell_type: CellType | None = None,
) -> tuple[str, str]:
    """The notebook *text* with one cell replaced, inserted or deleted, and a one-line summary (see the module
    docstring). *index*: the cell's 0-based index (for ``insert``, the new cell's, up to the number of cells);
    *cell_id*: the cell's id instead (for ``insert``, the new cell goes after it)."""
    notebook = parse_notebook(text, shown)
    indent = _indent_of(text)
    indent = indent if indent is not None else 1
    # Jupyter writes its keys sorted; a file that was written that way is written that way again
    sort_keys = text.rstrip("\n") == json.dumps(notebook, indent=indent, ensure_ascii=False, sort_keys=True)
    cells: list[Any] = notebook["cells"]
    if (index is None) == (cell_id is None):
        raise ToolError("give either cell (an index) or cell_id, not both or neither", "BAD_ARGUMENTS")
    at = _find_cell(cells, shown, index, cell_id)
    last = len(cells) if mode == "insert" and cell_id is None else len(cells) - 1
    if cell_id is not None and mode == "insert":
        at += 1
    if not 0 <= at <= last:
        valid = f"0-{last}" if last >= 0 else "none: the notebook has no cells"
        raise ToolError(
            f"{shown} has {len(cells)} cell{'' if len(cells) == 1 else 's'}: cell {at} does not exist (valid "
            f"indices for {mode}: {valid})",
            "NO_CELL",
        )
    if mode in ("replace", "insert") and source is None:
        raise ToolError(f"{mode} needs new_source (the cell's complete new text)", "BAD_ARGUMENTS")
    if mode == "delete":
        removed = cells.pop(at)
        kind = removed.get("cell_type", "?") if isinstance(removed, dict) else "?"
        summary = f"deleted cell {at} ({kind}); the cells after it moved up by one"
    elif mode == "insert":
        kind = cell_type or "code"
        cell: dict[str, Any] = {"cell_type": kind}
        if _has_ids(notebook):
            cell["id"] = _new_id(cells)
        cell["metadata"] = {}
        if kind == "code":
            cell["execution_count"] = None
            cell["outputs"] = []
        cell["source"] = _lines(source or "")
        cells.insert(at, cell)
        summary = f"inserted a {kind} cell at index {at}" + (f" (id {cell['id']})" if "id" in cell else "")
    else:
        cell = cells[at]
        if not isinstance(cell, dict):
            raise ToolError(f"cell {at} of {shown} is not a cell object; delete it instead", "NO_CELL")
        old_kind = cell.get("cell_type")
        kind = cell_type or (old_kind if old_kind in ("code", "markdown", "raw") else "code")
        if _source(cell) == source and kind == old_kind:
            raise ToolError(f"cell {at} already has this source: there is nothing to change", "NO_CHANGE")
        cell["source"] = _lines(source or "")
        cell["cell_type"] = kind
        if kind == "code":
            cell["execution_count"] = None
            cell["outputs"] = []
        else:
            cell.pop("execution_count", None)
            cell.pop("outputs", None)
        note = "; its outputs were cleared" if kind == "code" else ""
        changed = f", now {kind}" if kind != old_kind else ""
        summary = f"replaced the source of cell {at}{changed}{note}"
    new_text = json.dumps(notebook, indent=indent, ensure_ascii=False, sort_keys=sort_keys)
    if text.endswith("\n"):
        new_text += "\n"
    return new_text, summary


def image_blocks(images: list[tuple[str, str]], shown: str) -> list[ContentBlock]:
    """The images of a notebook's outputs as checked image blocks (an image that does not pass
    :func:`dsh.images.check_image` becomes a line saying why)."""
    from dsh.images import ImageError, check_image, decode_base64, image_block

    blocks: list[ContentBlock] = []
    for number, (mime, encoded) in enumerate(images, 1):
        name = f"{shown} image {number}"
        try:
            raw, canonical = decode_base64(encoded, name)
            info = check_image(raw, mime, name)
        except ImageError as exc:
            blocks.append({"type": "text", "text": f"[image {number}: {exc}]"})
            continue
        blocks.append({"type": "text", "text": f"[image {number}]"})
        blocks.append(image_block(canonical, info, len(raw), name))
    return blocks
