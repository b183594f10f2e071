"""read_file, write_file, edit_file and list_files, called through ``ctx.tools.execute``."""

from __future__ import annotations

from pathlib import Path

from dsh.tools._builtin import LIST_MAX_ENTRIES, READ_LINE_WIDTH, READ_MAX_CHARS, READ_MAX_LINES
from tests.tools.conftest import Call, text

# -- read_file ------------------------------------------------------------------------------------------------


async def test_read_numbers_lines_like_cat_n(call: Call, work: Path) -> None:
    (work / "app.py").write_text("import os\n\nprint(os.getcwd())\n")
    result = await call("read_file", {"path": "app.py"})
    assert not result.is_error
    assert text(result) == "     1\timport os\n     2\t\n     3\tprint(os.getcwd())"


async def test_read_offset_and_limit(call: Call, work: Path) -> None:
    (work / "n.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    result = await call("read_file", {"path": "n.txt", "offset": 4, "limit": 3})
    assert text(result) == (
        "     4\tline 4\n     5\tline 5\n     6\tline 6\n[… 4 more lines (of 10): read on with offset=7]"
    )
    tail = await call("read_file", {"path": "n.txt", "offset": 9})
    assert text(tail) == "     9\tline 9\n    10\tline 10"
    exact = await call("read_file", {"path": "n.txt", "offset": 9, "limit": 2})
    assert "continues" not in text(exact)


async def test_read_a_long_file_is_bounded_and_says_where_to_continue(call: Call, work: Path) -> None:
    (work / "long.txt").write_text("x\n" * (READ_MAX_LINES + 50))
    result = await call("read_file", {"path": "long.txt"})
    lines = text(result).split("\n")
    assert len(lines) == READ_MAX_LINES + 1
    assert lines[-1] == f"[… 50 more lines (of {READ_MAX_LINES + 50}): read on with offset={READ_MAX_LINES + 1}]"
    huge_limit = await call("read_file", {"path": "long.txt", "limit": 10**6})
    assert len(text(huge_limit).split("\n")) == READ_MAX_LINES + 1


async def test_read_bounds_long_lines_and_total_size(call: Call, work: Path) -> None:
    (work / "wide.txt").write_text("a" * (READ_LINE_WIDTH + 10) + "\nshort\n")
    wide = text(await call("read_file", {"path": "wide.txt"}))
    assert wide.startswith("     1\t" + "a" * READ_LINE_WIDTH + " … [line cut: 10 more characters]\n")
    assert wide.endswith("\n[1 line(s) longer than 2000 characters were cut]")
    (work / "big.txt").write_text(("b" * 1000 + "\n") * 500)
    big = text(await call("read_file", {"path": "big.txt"}))
    assert len(big) <= READ_MAX_CHARS + 200
    assert big.endswith("]") and "read on with offset=" in big


async def test_read_empty_file_and_offset_past_the_end(call: Call, work: Path) -> None:
    (work / "empty.txt").write_text("")
    assert text(await call("read_file", {"path": "empty.txt"})) == "[empty file]"
    (work / "one.txt").write_text("one\n")
    assert (
        text(await call("read_file", {"path": "one.txt", "offset": 5}))
        == "[offset 5 is past the end of the file (it has 1 line)]"
    )


async def test_read_errors_say_what_is_wrong(call: Call, work: Path) -> None:
    missing = await call("read_file", {"path": "nope.txt"})
    assert missing.is_error and missing.error is not None and missing.error["code"] == "NOT_FOUND"
    assert text(missing) == f"Error: file not found: {work / 'nope.txt'}"
    (work / "dir").mkdir()
    (work / "dir" / "inside.txt").write_text("x\n")
    directory = await call("read_file", {"path": "dir"})  # a directory gives its listing, not an error
    assert not directory.is_error
    assert text(directory) == "dir is a directory; its files:\ndir/inside.txt"
    (work / "blob.bin").write_bytes(b"\xff\xfe\x00\x01")
    binary = await call("read_file", {"path": "blob.bin"})
    assert binary.error is not None and binary.error["code"] == "NOT_TEXT"
    assert (
        text(binary)
        == "Error: blob.bin is a binary file (application/octet-stream, 4 bytes), not text: read_file shows only text "
        "files (write_file may now replace it whole, delete_file remove it)"
    )
    (work / "pic.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 100)
    png = await call("read_file", {"path": "pic.png"})
    assert png.error is not None and "image/png, 108 bytes" in text(png)
    bad = await call("read_file", {"path": "x", "offset": 0})
    assert bad.error is not None and bad.error["code"] == "INVALID_ARGUMENTS"


async def test_read_shows_crlf_files_without_the_carriage_returns(call: Call, work: Path) -> None:
    (work / "dos.txt").write_bytes(b"one\r\ntwo\r\n")
    assert text(await call("read_file", {"path": "dos.txt"})) == "     1\tone\n     2\ttwo"


# -- write_file -----------------------------------------------------------------------------------------------


async def test_write_creates_the_file_and_its_directories(call: Call, work: Path) -> None:
    result = await call("write_file", {"path": "a/b/c.txt", "content": "hello\nworld\n"})
    assert not result.is_error
    assert (work / "a" / "b" / "c.txt").read_text() == "hello\nworld\n"
    assert text(result) == "Created a/b/c.txt (2 lines, 12 bytes)."
    assert result.display == {
        "diff": {"path": str(work / "a" / "b" / "c.txt"), "old_text": None, "new_text": "hello\nworld\n"}
    }


async def test_write_overwrites_and_shows_the_old_text(call: Call, work: Path) -> None:
    (work / "f.txt").write_text("old\n")
    await call("read_file", {"path": "f.txt"})
    result = await call("write_file", {"path": str(work / "f.txt"), "content": "new"})
    assert (work / "f.txt").read_text() == "new\n"  # the file's final newline is kept
    assert text(result) == "Overwrote f.txt (1 line, 4 bytes)."
    assert result.display == {"diff": {"path": str(work / "f.txt"), "old_text": "old\n", "new_text": "new\n"}}


async def test_write_keeps_newlines_and_unicode_exactly(call: Call, work: Path) -> None:
    await call("write_file", {"path": "u.txt", "content": "é\r\nñ\n"})
    assert (work / "u.txt").read_bytes() == "é\r\nñ\n".encode()


async def test_write_onto_a_directory_fails(call: Call, work: Path) -> None:
    (work / "d").mkdir()
    result = await call("write_file", {"path": "d", "content": "x"})
    assert result.error is not None and result.error["code"] == "IS_DIRECTORY"


# -- edit_file ------------------------------------------------------------------------------------------------


async def test_edit_replaces_a_unique_match_and_returns_a_diff(call: Call, work: Path) -> None:
    (work / "m.py").write_text("def f():\n    return 1\n\n\ndef g():\n    return 2\n")
    await call("read_file", {"path": "m.py"})
    result = await call("edit_file", {"path": "m.py", "old_string": "return 2", "new_string": "return 3"})
    assert not result.is_error
    assert (work / "m.py").read_text() == "def f():\n    return 1\n\n\ndef g():\n    return 3\n"
    assert text(result) == (
        "Edited m.py: replaced 1 occurrence.\n"
        "--- a/m.py\n+++ b/m.py\n@@ -3,4 +3,4 @@\n \n \n def g():\n-    return 2\n+    return 3\n"
    )
    assert result.display == {
        "diff": {
            "path": str(work / "m.py"),
            "old_text": "def f():\n    return 1\n\n\ndef g():\n    return 2\n",
            "new_text": "def f():\n    return 1\n\n\ndef g():\n    return 3\n",
        },
        "line": 6,  # where the edit landed: shown by the card's final update
    }


async def test_edit_with_a_non_unique_match_fails_with_a_clear_message(call: Call, work: Path) -> None:
    (work / "dup.py").write_text("x = 1\nx = 1\nx = 1\n")
    await call("read_file", {"path": "dup.py"})
    result = await call("edit_file", {"path": "dup.py", "old_string": "x = 1", "new_string": "x = 2"})
    assert result.is_error
    assert result.error == {"name": "ToolError", "code": "AMBIGUOUS_MATCH"}
    assert text(result) == (
        "Error: old_string matches 3 times in dup.py, at lines 1, 2, 3; add surrounding lines to old_string to "
        "make it unique, or set replace_all to change every one"
    )
    assert (work / "dup.py").read_text() == "x = 1\nx = 1\nx = 1\n"


async def test_edit_replace_all(call: Call, work: Path) -> None:
    (work / "dup.py").write_text("x = 1\ny = 0\nx = 1\n")
    await call("read_file", {"path": "dup.py"})
    result = await call(
        "edit_file", {"path": "dup.py", "old_string": "x = 1", "new_string": "x = 2", "replace_all": True}
    )
    assert not result.is_error
    assert text(result).startswith("Edited dup.py: replaced 2 occurrences.\n")
    assert (work / "dup.py").read_text() == "x = 2\ny = 0\nx = 2\n"


async def test_edit_not_found(call: Call, work: Path) -> None:
    (work / "f.py").write_text("pass\n")
    await call("read_file", {"path": "f.py"})
    result = await call("edit_file", {"path": "f.py", "old_string": "  fail", "new_string": "x"})
    assert result.error == {"name": "ToolError", "code": "NO_MATCH"}
    assert text(result).startswith("Error: old_string not found in f.py")
    assert (work / "f.py").read_text() == "pass\n"


async def test_edit_refuses_empty_and_identical_strings_and_missing_files(call: Call, work: Path) -> None:
    (work / "f.py").write_text("pass\n")
    await call("read_file", {"path": "f.py"})
    empty = await call("edit_file", {"path": "f.py", "old_string": "", "new_string": "x"})
    assert empty.is_error and "use write_file" in text(empty)
    same = await call("edit_file", {"path": "f.py", "old_string": "pass", "new_string": "pass"})
    assert same.error is not None and same.error["code"] == "NO_CHANGE"
    missing = await call("edit_file", {"path": "g.py", "old_string": "a", "new_string": "b"})
    assert missing.error is not None and missing.error["code"] == "NOT_FOUND"
    assert not (work / "g.py").exists()


async def test_edit_a_crlf_file_with_lines_as_the_model_saw_them(call: Call, work: Path) -> None:
    (work / "dos.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    await call("read_file", {"path": "dos.txt"})
    result = await call("edit_file", {"path": "dos.txt", "old_string": "one\ntwo", "new_string": "1\n2"})
    assert not result.is_error, text(result)
    assert (work / "dos.txt").read_bytes() == b"1\r\n2\r\nthree\r\n"


# -- list_files -----------------------------------------------------------------------------------------------


def _tree(work: Path) -> None:
    for name in [
        "README.md",
        "src/app.py",
        "src/util/helpers.py",
        "tests/test_app.py",
        ".gitignore",
        ".git/config",
        "node_modules/pkg/index.js",
        ".venv/lib/site.py",
        "src/__pycache__/app.cpython-311.pyc",
    ]:
        path = work / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x\n")


async def test_list_is_one_directory_and_skips_vcs_dependency_and_cache_directories(call: Call, work: Path) -> None:
    _tree(work)
    result = await call("list_files", {})
    assert not result.is_error
    assert text(result).split("\n") == ["src/", "tests/", ".gitignore", "README.md"]


async def test_list_honours_gitignore(call: Call, work: Path) -> None:
    _tree(work)
    (work / ".gitignore").write_text("build/\n*.log\n!keep.log\n")
    for name in ("build/out.js", "debug.log", "keep.log", "src/build/x.o"):
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text("x\n")
    assert text(await call("list_files", {})).split("\n") == ["src/", "tests/", ".gitignore", "README.md", "keep.log"]
    assert text(await call("list_files", {"path": "src"})).split("\n") == ["src/util/", "src/app.py"]


async def test_list_a_subdirectory_gives_paths_relative_to_the_session(call: Call, work: Path) -> None:
    _tree(work)
    assert text(await call("list_files", {"path": "src"})).split("\n") == ["src/util/", "src/app.py"]
    assert text(await call("list_files", {"path": "src/util"})) == "src/util/helpers.py"
    assert text(await call("list_files", {"path": "README.md"})) == "README.md"


async def test_list_is_bounded_with_a_note(call: Call, work: Path) -> None:
    many = work / "many"
    many.mkdir()
    for index in range(LIST_MAX_ENTRIES + 5):
        (many / f"f{index:05}.txt").touch()
    lines = text(await call("list_files", {"path": "many"})).split("\n")
    assert len(lines) == LIST_MAX_ENTRIES + 1
    assert lines[0] == "many/f00000.txt"
    assert lines[-1] == "[… 5 more entries: use glob with a pattern to narrow]"


async def test_list_does_not_follow_symlinked_directories(call: Call, work: Path, tmp_path: Path) -> None:
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("s")
    (work / "portal").symlink_to(tmp_path / "outside")
    (work / "mine.txt").write_text("m")
    assert text(await call("list_files", {})).split("\n") == ["mine.txt", "portal@"]


async def test_list_errors(call: Call, work: Path) -> None:
    missing = await call("list_files", {"path": "nope"})
    assert missing.error is not None and missing.error["code"] == "NOT_FOUND"
    (work / "empty").mkdir()
    assert text(await call("list_files", {"path": "empty"})) == "[no files in empty]"
