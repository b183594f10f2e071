"""Notebooks (issue 35): ``read_file`` of an ``.ipynb`` shows cells with their outputs summarised and the images
as images; ``notebook_edit`` replaces, inserts and deletes cells, keeping a valid notebook with its metadata.
The notebooks are made by ``nbformat`` (Jupyter's own library) in each test, and checked by it after each edit."""

from __future__ import annotations

import base64
import copy
import struct
import zlib
from pathlib import Path
from typing import Any

import nbformat
from nbformat import v4

from dsh.tools._read import READ_MAX_CHARS
from tests.tools.conftest import Call, text


def tiny_png() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0\0\0\0")) + chunk(b"IEND", b"")
    )


def sample() -> Any:
    nb = v4.new_notebook(metadata={"kernelspec": {"name": "python3", "language": "python", "display_name": "Py"}})
    nb.cells = [
        v4.new_markdown_cell("# Analysis\nSome words."),
        v4.new_code_cell(
            "print('hello')\n1 + 1",
            execution_count=3,
            outputs=[
                v4.new_output("stream", name="stdout", text="hello\n"),
                v4.new_output("execute_result", data={"text/plain": "2"}, execution_count=3),
            ],
        ),
        v4.new_code_cell(
            "plot()",
            execution_count=4,
            outputs=[
                v4.new_output(
                    "display_data",
                    data={"image/png": base64.b64encode(tiny_png()).decode(), "text/plain": "<Figure>"},
                ),
                v4.new_output("display_data", data={"text/html": "<b>table</b>", "text/plain": "table"}),
            ],
        ),
        v4.new_code_cell(
            "raise ValueError('bad')",
            execution_count=5,
            outputs=[
                v4.new_output(
                    "error", ename="ValueError", evalue="bad", traceback=["\x1b[31mTraceback", "ValueError: bad"]
                )
            ],
        ),
    ]
    return nb


def write(path: Path, nb: Any) -> None:
    nbformat.write(nb, str(path))


async def test_read_shows_cells_outputs_and_images(call: Call, work: Path) -> None:
    nb = sample()
    write(work / "a.ipynb", nb)
    result = await call("read_file", {"path": "a.ipynb"})
    assert not result.is_error, text(result)
    said = text(result)
    ids = [cell.id for cell in nb.cells]
    assert said.startswith("a.ipynb: Jupyter notebook, 4 cells, language python (nbformat 4.")
    assert f"<cell 0 markdown id={ids[0]}>\n# Analysis\nSome words.\n</cell 0>" in said
    assert (
        f"<cell 1 code id={ids[1]} [3]>\nprint('hello')\n1 + 1\n<outputs>\n[stdout]\nhello\n[result]\n2\n</outputs>"
        in said
    )
    assert "[image/png output: image 1 below]" in said
    assert "[also as text/html: not shown]" in said and "[display]\ntable" in said
    assert "[error] ValueError: bad" in said and "\x1b" not in said
    assert "base64" not in said and "iVBOR" not in said  # no raw image data as text
    images = [block for block in result.content if block["type"] == "image"]
    assert len(images) == 1 and images[0]["mime_type"] == "image/png"


async def test_a_long_notebook_is_paged_by_cells(call: Call, work: Path) -> None:
    nb = v4.new_notebook()
    nb.cells = [v4.new_code_cell(f"x{i} = '{'y' * 300}'") for i in range(300)]
    write(work / "long.ipynb", nb)
    first = text(await call("read_file", {"path": "long.ipynb"}))
    assert len(first) <= READ_MAX_CHARS
    assert "read on with offset=" in first
    offset = int(first.rsplit("offset=", 1)[1].split(" ", 1)[0])
    assert f"</cell {offset - 1}>" in first and f"<cell {offset} " not in first
    after = text(await call("read_file", {"path": "long.ipynb", "offset": offset, "limit": 2}))
    assert f"<cell {offset} code" in after and f"<cell {offset + 2} " not in after


def _same_json_except(path: Path, before: Any, change: Any) -> None:
    """The file is what nbformat itself writes for *before* changed by *change* (bytes), and it validates."""
    expected = copy.deepcopy(before)
    change(expected)
    other = path.with_name("expected.ipynb")
    nbformat.write(expected, str(other))
    assert path.read_text() == other.read_text()
    nbformat.validate(nbformat.read(str(path), as_version=4))


async def test_replace_a_cell_keeps_everything_else(call: Call, work: Path) -> None:
    nb = sample()
    path = work / "a.ipynb"
    write(path, nb)
    assert not (await call("read_file", {"path": "a.ipynb"})).is_error
    result = await call("notebook_edit", {"path": "a.ipynb", "cell": 1, "new_source": "print('bye')"})
    assert not result.is_error, text(result)
    assert "replaced the source of cell 1; its outputs were cleared" in text(result)

    def change(expected: Any) -> None:
        expected.cells[1].source = "print('bye')"
        expected.cells[1].outputs = []
        expected.cells[1].execution_count = None

    _same_json_except(path, nb, change)


async def test_insert_and_delete_cells(call: Call, work: Path) -> None:
    nb = sample()
    path = work / "a.ipynb"
    write(path, nb)
    await call("read_file", {"path": "a.ipynb"})
    inserted = await call(
        "notebook_edit",
        {"path": "a.ipynb", "edit_mode": "insert", "cell": 1, "new_source": "## Step 2", "cell_type": "markdown"},
    )
    assert not inserted.is_error, text(inserted)
    now = nbformat.read(str(path), as_version=4)
    nbformat.validate(now)
    assert [c.cell_type for c in now.cells] == ["markdown", "markdown", "code", "code", "code"]
    assert now.cells[1].source == "## Step 2" and now.cells[1].id not in {c.id for c in nb.cells}
    assert now.metadata == nb.metadata
    appended = await call(
        "notebook_edit", {"path": "a.ipynb", "edit_mode": "insert", "cell": 5, "new_source": "done = True"}
    )
    assert not appended.is_error, text(appended)
    after_id = await call(
        "notebook_edit",
        {"path": "a.ipynb", "edit_mode": "insert", "cell_id": nb.cells[0].id, "new_source": "x", "cell_type": "raw"},
    )
    assert not after_id.is_error, text(after_id)
    deleted = await call("notebook_edit", {"path": "a.ipynb", "edit_mode": "delete", "cell": 4})
    assert not deleted.is_error and "deleted cell 4 (code)" in text(deleted)
    final = nbformat.read(str(path), as_version=4)
    nbformat.validate(final)
    assert [c.cell_type for c in final.cells] == ["markdown", "raw", "markdown", "code", "code", "code"]
    assert final.cells[-1].source == "done = True" and final.cells[-1].outputs == []
    assert [c.source for c in final.cells[3:5]] == [nb.cells[1].source, nb.cells[3].source]
    assert final.cells[3].outputs == nb.cells[1].outputs  # untouched cells keep their outputs


async def test_notebook_edit_refusals_name_the_next_step(call: Call, work: Path) -> None:
    nb = sample()
    path = work / "a.ipynb"
    write(path, nb)
    before = path.read_bytes()
    unread = await call("notebook_edit", {"path": "a.ipynb", "cell": 0, "new_source": "x"})
    assert unread.error is not None and unread.error["code"] == "NOT_READ"
    await call("read_file", {"path": "a.ipynb"})
    missing = await call("notebook_edit", {"path": "a.ipynb", "cell": 9, "new_source": "x"})
    assert missing.error is not None and missing.error["code"] == "NO_CELL"
    assert "has 4 cells: cell 9 does not exist (valid indices for replace: 0-3)" in text(missing)
    no_id = await call("notebook_edit", {"path": "a.ipynb", "cell_id": "nope", "new_source": "x"})
    assert no_id.error is not None and no_id.error["code"] == "NO_CELL" and nb.cells[0].id in text(no_id)
    placeholder = await call(
        "notebook_edit", {"path": "a.ipynb", "cell": 1, "new_source": "print('hi')\n# ... rest of the cell unchanged"}
    )
    assert placeholder.error is not None and placeholder.error["code"] == "PLACEHOLDER"
    (work / "plain.py").write_text("x = 1\n")
    await call("read_file", {"path": "plain.py"})
    not_nb = await call("notebook_edit", {"path": "plain.py", "cell": 0, "new_source": "x"})
    assert not_nb.error is not None and "use edit_file" in text(not_nb)
    assert path.read_bytes() == before


async def test_a_broken_notebook_is_read_as_text(call: Call, work: Path) -> None:
    (work / "broken.ipynb").write_text('{"cells": [\n')
    result = await call("read_file", {"path": "broken.ipynb"})
    assert text(result) == '     1\t{"cells": ['
    refused = await call("notebook_edit", {"path": "broken.ipynb", "cell": 0, "new_source": "x"})
    assert refused.error is not None and refused.error["code"] == "NOT_A_NOTEBOOK"
