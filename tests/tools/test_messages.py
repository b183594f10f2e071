"""Errors that save a round trip (issue 35): each refusal tells the model the lines, the numbers or the next
step, and following that step works (no dead end)."""

from __future__ import annotations

import re
from pathlib import Path

from dsh.tools._budget import READ_BUDGET, budget_for
from dsh.tools._read import READ_MAX_CHARS, ReadFileArgs
from tests.tools.conftest import Call, text

CYRILLIC = "# Привет, мир! Этот файл записан в кодировке Windows-1251.\nprint('Здравствуй, мир')\n"


async def test_not_found_shows_the_closest_lines_with_their_numbers(call: Call, work: Path) -> None:
    body = "".join(f"line_{n} = {n}\n" for n in range(1, 40))
    body += "def handler(request):\n    user = request.user\n    return render(user)\n"
    (work / "app.py").write_text(body)
    await call("read_file", {"path": "app.py"})
    result = await call(
        "edit_file",
        {
            "path": "app.py",
            "old_string": "def handler(req):\n    user = req.user\n    return render(user)",
            "new_string": "x",
        },
    )
    said = text(result)
    assert result.error is not None and result.error["code"] == "NO_MATCH"
    assert "The closest lines in the file:\n    40\tdef handler(request):\n    41\t    user = request.user\n" in said
    assert "    42\t    return render(user)" in said
    assert "never guessed" in said and "Copy old_string from the right place exactly" in said
    assert said.count("\n") < 40  # bounded: a few candidates, not the file


async def test_not_found_candidates_are_bounded(call: Call, work: Path) -> None:
    (work / "many.txt").write_text("".join(f"value = compute({n})\n" for n in range(500)))
    await call("read_file", {"path": "many.txt"})
    long_old = "\n".join(f"value = compute(x{n})" for n in range(30))
    said = text(await call("edit_file", {"path": "many.txt", "old_string": long_old, "new_string": "y"}))
    numbered = [line for line in said.split("\n") if re.match(r"^\s+\d+\t", line)]
    assert 0 < len(numbered) <= 3 * 10


async def test_ambiguous_names_the_line_of_every_match(call: Call, work: Path) -> None:
    (work / "m.py").write_text("a()\nb()\na()\nc()\na()\n")
    await call("read_file", {"path": "m.py"})
    result = await call("edit_file", {"path": "m.py", "old_string": "a()", "new_string": "z()"})
    assert result.error is not None and result.error["code"] == "AMBIGUOUS_MATCH"
    assert "matches 3 times in m.py, at lines 1, 3, 5;" in text(result)
    assert "set replace_all" in text(result)


async def test_a_cp1251_file_is_named_with_its_encoding_and_how_to_work_on_it(call: Call, work: Path) -> None:
    path = work / "legacy.py"
    path.write_bytes(CYRILLIC.encode("cp1251"))
    read = await call("read_file", {"path": "legacy.py"})
    said = text(read)
    assert read.error is not None and read.error["code"] == "NOT_TEXT"
    assert "legacy.py is a text file in cp1251" in said
    assert "iconv -f CP1251 -t UTF-8 legacy.py" in said
    assert "binary" not in said
    # edit_file and write_file say the same, not "read it first" (the dead end of before)
    for tool, arguments in (
        ("edit_file", {"old_string": "мир", "new_string": "свет"}),
        ("write_file", {"content": "x\n"}),
    ):
        refused = await call(tool, {"path": "legacy.py", **arguments})
        assert refused.error is not None and refused.error["code"] == "NOT_TEXT", text(refused)
        assert "text file in cp1251" in text(refused)
    assert path.read_bytes() == CYRILLIC.encode("cp1251")
    # the suggested commands work: the reading one shows the text, the changing one keeps the encoding
    shown = await call("run_command", {"command": "iconv -f CP1251 -t UTF-8 legacy.py | cat -n"})
    assert "Привет, мир!" in text(shown)
    script = re.search(r"`(python3 -c .*?)`\. Convert", said)
    assert script is not None, said
    command = script.group(1).replace("OLD", "'мир!'").replace("NEW", "'свет!'")
    changed = await call("run_command", {"command": command})
    assert not changed.is_error, text(changed)
    assert path.read_bytes() == CYRILLIC.replace("мир!", "свет!", 1).encode("cp1251")


async def test_a_utf16_file_with_a_byte_order_mark_is_text_in_utf16(call: Call, work: Path) -> None:
    (work / "w.txt").write_bytes("hello\r\n".encode("utf-16"))
    said = text(await call("read_file", {"path": "w.txt"}))
    assert "w.txt is a text file in utf-16-le" in said


async def test_a_default_read_fits_the_budget_and_says_how_to_read_on(call: Call, work: Path) -> None:
    assert READ_MAX_CHARS == READ_BUDGET == budget_for("read_file").max_chars == 30_000
    assert f"at most {READ_MAX_CHARS} characters" in str(ReadFileArgs.model_json_schema())
    line = "x" * 90
    (work / "big.txt").write_text(f"{line}\n" * 5000)
    first = text(await call("read_file", {"path": "big.txt"}))
    assert len(first) <= 30_000
    last = first.split("\n")[-1]
    match = re.fullmatch(r"\[… (\d+) more lines \(of 5000\): read on with offset=(\d+)\]", last)
    assert match is not None, last
    offset = int(match.group(2))
    assert offset > 250 and int(match.group(1)) == 5000 - offset + 1
    after = text(await call("read_file", {"path": "big.txt", "offset": offset}))
    assert after.startswith(f"{offset:>6}\t{line}")
