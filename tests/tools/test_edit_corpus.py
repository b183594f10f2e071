"""The edit corpus: every case ends in exactly the expected file bytes or the expected refusal, and a refused
case leaves the file byte for byte as it was (no case writes a wrong change).

Each case runs the real ``edit_file`` / ``write_file`` through the tools service on a file in a temporary
session directory: read first (the ledger) unless the case is about not reading, then the call."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.tools.conftest import Call, text
from tests.tools.edit_cases import ROUND_2
from tests.tools.edit_cases import Case as Round2


@dataclass(frozen=True)
class Case:
    name: str
    before: bytes
    arguments: dict[str, Any]
    after: bytes | None = None
    """The expected bytes; None: refused (the file must be unchanged)."""
    code: str | None = None
    rule: str | None = None
    """A phrase the success message must contain (which rule matched)."""
    tool: str = "edit_file"
    read: bool = True
    touch_after_read: bytes | None = None
    """New content written behind the session's back after its read."""
    extra: dict[str, Any] = field(default_factory=dict)


def edit(old: str, new: str, **more: Any) -> dict[str, Any]:
    return {"old_string": old, "new_string": new, **more}


PY = b"def f(x):\n    if x:\n        return 1\n    return 2\n"
TABS = b"func f() {\n\tif x {\n\t\treturn 1\n\t}\n}\n"

CASES = [
    # -- exact -------------------------------------------------------------------------------------------------
    Case("exact unique", PY, edit("return 2", "return 3"), PY.replace(b"return 2", b"return 3")),
    Case(
        "exact multiline",
        PY,
        edit("    if x:\n        return 1\n", "    if not x:\n        return 0\n"),
        b"def f(x):\n    if not x:\n        return 0\n    return 2\n",
    ),
    Case("exact ambiguous refused", b"a = 1\na = 1\n", edit("a = 1", "a = 2"), code="AMBIGUOUS_MATCH"),
    Case("replace_all", b"a = 1\nb\na = 1\n", edit("a = 1", "a = 2", replace_all=True), b"a = 2\nb\na = 2\n"),
    Case("not found refused", PY, edit("return 9", "return 3"), code="NO_MATCH"),
    Case("identical strings refused", PY, edit("return 2", "return 2"), code="NO_CHANGE"),
    Case("empty old_string refused", PY, edit("", "x"), code="NO_MATCH"),
    Case("delete a line", b"a\nb\nc\n", edit("b\n", ""), b"a\nc\n"),
    # -- trailing whitespace -----------------------------------------------------------------------------------
    Case(
        "file has trailing spaces",
        b"x = 1   \ny = 2\n",
        edit("x = 1\ny = 2\n", "x = 3\ny = 4\n"),
        b"x = 3\ny = 4\n",
        rule="trailing whitespace",
    ),
    Case(
        "model added trailing spaces",
        b"x = 1\ny = 2\n",
        edit("x = 1  \ny = 2", "x = 5\ny = 2"),
        b"x = 5\ny = 2\n",
        rule="trailing whitespace",
    ),
    Case(
        "trailing tab in file",
        b"if a:\t\n    go()\n",
        edit("if a:\n    go()", "if b:\n    go()"),
        b"if b:\n    go()\n",
        rule="trailing whitespace",
    ),
    Case(
        "trailing-whitespace ambiguous refused",
        b"x = 1 \nx = 1\t\n",
        edit("x = 1\n", "x = 2\n"),
        code="AMBIGUOUS_MATCH",
    ),
    # -- indentation -------------------------------------------------------------------------------------------
    Case(
        "model under-indented block",
        PY,
        edit("if x:\n    return 1", "if x:\n    return 10"),
        b"def f(x):\n    if x:\n        return 10\n    return 2\n",
        rule="indentation",
    ),
    Case(
        "model over-indented block",
        b"def g():\n  a()\n  b()\n",
        edit("      a()\n      b()", "      a()\n      c()"),
        b"def g():\n  a()\n  c()\n",
        rule="indentation",
    ),
    Case(
        "spaces for tabs re-indented to tabs",
        TABS,
        edit("    if x {\n        return 1\n    }", "    if y {\n        return 2\n    }"),
        b"func f() {\n\tif y {\n\t\treturn 2\n\t}\n}\n",
        rule="indentation",
    ),
    Case(
        "new deeper line keeps its extra depth",
        PY,
        edit("if x:\n    return 1", "if x:\n    if y:\n        return 1"),
        b"def f(x):\n    if x:\n        if y:\n            return 1\n    return 2\n",
        rule="indentation",
    ),
    Case(
        "indentation ambiguous refused",
        b"class A:\n    def f(self):\n        pass\nclass B:\n  def f(self):\n      pass\n",
        edit("def f(self):\n    pass", "def f(self):\n    return 1"),
        code="AMBIGUOUS_MATCH",
    ),
    # -- typographic punctuation -------------------------------------------------------------------------------
    Case(
        "curly quotes in file",
        "msg = \u201chello\u201d\n".encode(),
        edit('msg = "hello"', 'msg = "bye"'),
        b'msg = "bye"\n',
        rule="typographic",
    ),
    Case(
        "curly apostrophe mid-line",
        "print('don\u2019t')\n".encode(),
        edit("don't", "do not"),
        b"print('do not')\n",
        rule="typographic",
    ),
    Case(
        "en dash in file",
        "range 1\u20135 ok\n".encode(),
        edit("range 1-5", "range 1-9"),
        b"range 1-9 ok\n",
        rule="typographic",
    ),
    Case("non-breaking space in file", "a\u00a0= 1\n".encode(), edit("a = 1", "a = 2"), b"a = 2\n", rule="typographic"),
    Case(
        "punctuation ambiguous refused",
        's = \u201cx\u201d\ns = "x"\n'.encode(),
        edit("s = 'x'", "s = 'y'"),
        code="NO_MATCH",
    ),
    Case(
        "punctuation two places refused",
        "\u201ca\u201d\n\u201ca\u201d\n".encode(),
        edit('"a"', '"b"'),
        code="AMBIGUOUS_MATCH",
    ),
    # -- line endings, final newline, encoding -----------------------------------------------------------------
    Case(
        "crlf file edited with lf lines",
        b"one\r\ntwo\r\nthree\r\n",
        edit("one\ntwo", "1\n2\n2.5"),
        b"1\r\n2\r\n2.5\r\nthree\r\n",
    ),
    Case(
        "crlf file trailing-whitespace rule",
        b"a  \r\nb\r\n",
        edit("a\nb\n", "c\nd\n"),
        b"c\r\nd\r\n",
        rule="trailing whitespace",
    ),
    Case("no final newline kept", b"x = 1\ny = 2", edit("y = 2", "y = 3"), b"x = 1\ny = 3"),
    Case("mixed endings left alone", b"a\r\nb\nc\n", edit("b\nc", "B\nC"), b"a\r\nB\nC\n"),
    Case("bom kept", "\ufeffname = 1\n".encode(), edit("name = 1", "name = 2"), "\ufeffname = 2\n".encode()),
    # -- several edits in one call -----------------------------------------------------------------------------
    Case(
        "edits list applied in order",
        PY,
        {"edits": [edit("return 1", "return 10"), edit("return 2", "return 20"), edit("def f(x)", "def g(x)")]},
        b"def g(x):\n    if x:\n        return 10\n    return 20\n",
        rule="applied 3 edits",
    ),
    Case("edits list sees earlier edits", b"a\n", {"edits": [edit("a", "b"), edit("b", "c")]}, b"c\n"),
    Case(
        "edits list with a failing member writes nothing",
        PY,
        {"edits": [edit("return 1", "return 10"), edit("return 9", "x"), edit("return 2", "return 20")]},
        code="NO_MATCH",
        extra={"says": "edits[1]"},
    ),
    Case(
        "edits list with an ambiguous member writes nothing",
        b"a\nb\nb\n",
        {"edits": [edit("a", "z"), edit("b", "y")]},
        code="AMBIGUOUS_MATCH",
        extra={"says": "edits[1]"},
    ),
    Case(
        "edits and old_string together refused",
        PY,
        {"edits": [edit("a", "b")], "old_string": "x", "new_string": "y"},
        code="BAD_ARGUMENTS",
    ),
    Case("edits that cancel out refused", b"a\n", {"edits": [edit("a", "b"), edit("b", "a")]}, code="NO_CHANGE"),
    # -- placeholders ------------------------------------------------------------------------------------------
    Case(
        "placeholder in new_string refused",
        PY,
        edit("    if x:\n        return 1\n    return 2\n", "    # ... existing code ...\n    return 3\n"),
        code="PLACEHOLDER",
    ),
    Case(
        "js placeholder refused",
        b"function a() {\n  one();\n  two();\n}\n",
        edit("  one();\n  two();\n", "  // ... rest of code ...\n  three();\n"),
        code="PLACEHOLDER",
    ),
    Case(
        "placeholder in write_file refused",
        PY,
        {"content": "def f(x):\n    # ... rest of the file unchanged\n"},
        code="PLACEHOLDER",
        tool="write_file",
    ),
    Case(
        "block-comment placeholder refused",
        b"int a;\nint b;\n",
        {"content": "/* unchanged */\nint c;\n"},
        code="PLACEHOLDER",
        tool="write_file",
    ),
    Case(
        "a comment already in the file is fine",
        b"x = 1\n# ... rest unchanged\n",
        edit("x = 1", "x = 2"),
        b"x = 2\n# ... rest unchanged\n",
    ),
    Case(
        "an ordinary comment is fine",
        PY,
        edit("return 2", "return 2  # unchanged values are skipped"),
        PY.replace(b"return 2", b"return 2  # unchanged values are skipped"),
    ),
    # -- the read ledger ---------------------------------------------------------------------------------------
    Case("unread file refused", PY, edit("return 2", "return 3"), code="NOT_READ", read=False),
    Case("unread file refused for write_file", PY, {"content": "x\n"}, code="NOT_READ", read=False, tool="write_file"),
    Case(
        "changed on disk since read refused",
        PY,
        edit("return 2", "return 3"),
        code="CHANGED_SINCE_READ",
        touch_after_read=PY + b"# the user's line\n",
    ),
    Case(
        "touched since read but the same bytes is fine",
        PY,
        edit("return 2", "return 3"),
        PY.replace(b"return 2", b"return 3"),
        touch_after_read=PY,
    ),
    Case(
        "write_file keeps crlf and final newline", b"a\r\nb\r\n", {"content": "c\nd"}, b"c\r\nd\r\n", tool="write_file"
    ),
]


def test_the_corpus_is_large_enough() -> None:
    assert len(CASES) >= 30
    assert len({case.name for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
async def test_edit_corpus(case: Case, call: Call, work: Path) -> None:
    path = work / "subject.txt"
    path.write_bytes(case.before)
    if case.read:
        seen = await call("read_file", {"path": "subject.txt"})
        assert not seen.is_error, text(seen)
    current = case.before
    if case.touch_after_read is not None:
        path.write_bytes(case.touch_after_read)
        stat = path.stat()
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))  # even on a coarse clock
        current = case.touch_after_read
    result = await call(case.tool, {"path": "subject.txt", **case.arguments})
    if case.after is None:
        assert result.is_error, text(result)
        assert result.error is not None and result.error["code"] == case.code, text(result)
        assert path.read_bytes() == current  # nothing written
        if "says" in case.extra:
            assert case.extra["says"] in text(result)
    else:
        assert not result.is_error, text(result)
        assert path.read_bytes() == case.after
        if case.rule is not None:
            assert case.rule in text(result)


async def test_a_file_the_session_wrote_counts_as_read(call: Call, work: Path) -> None:
    created = await call("write_file", {"path": "new.py", "content": "a = 1\n"})
    assert not created.is_error
    edited = await call("edit_file", {"path": "new.py", "old_string": "a = 1", "new_string": "a = 2"})
    assert not edited.is_error, text(edited)
    again = await call("edit_file", {"path": "new.py", "old_string": "a = 2", "new_string": "a = 3"})
    assert not again.is_error, text(again)
    assert (work / "new.py").read_bytes() == b"a = 3\n"


async def test_another_session_has_its_own_ledger(call: Call, work: Path) -> None:
    from tests.tools.conftest import FakeAgent

    (work / "f.txt").write_text("a\n")
    assert not (await call("read_file", {"path": "f.txt"})).is_error
    other = await call(
        "edit_file", {"path": "f.txt", "old_string": "a", "new_string": "b"}, on=FakeAgent.at(work, "s2")
    )
    assert other.error is not None and other.error["code"] == "NOT_READ"
    assert (work / "f.txt").read_text() == "a\n"


@pytest.mark.parametrize("case", ROUND_2, ids=[case.name for case in ROUND_2])
async def test_edit_corpus_round_2(case: Round2, call: Call, work: Path) -> None:
    """Issue 35's classes: every case exact or refused with the file unchanged, and the result says what the
    model needs (the rule used, the placeholder's line, every ambiguous line, the closest lines)."""
    path = work / "subject.txt"
    path.write_bytes(case.before)
    seen = await call("read_file", {"path": "subject.txt"})
    assert not seen.is_error, text(seen)
    result = await call(case.tool, {"path": "subject.txt", **case.arguments})
    said = text(result)
    if case.after is None:
        assert result.is_error, said
        assert result.error is not None and result.error["code"] == case.code, said
        assert path.read_bytes() == case.before  # nothing written
    else:
        assert not result.is_error, said
        assert path.read_bytes() == case.after
    for phrase in case.says:
        assert phrase in said, said


def test_round_2_is_large_enough() -> None:
    assert len(ROUND_2) >= 60
    assert len({case.name for case in ROUND_2}) == len(ROUND_2)
