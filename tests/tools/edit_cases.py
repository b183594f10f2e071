"""Round 2 of the edit corpus (issue 35): cases written for dsh from what the peers' own tests and documents pin
down (gemini-cli, opencode, codex, aider, OpenHands), none copied. Each case ends in exactly its expected bytes
or in a refusal with the file unchanged; ``says`` lists phrases the result must contain (the rule named, the line
of a placeholder, the numbers of an ambiguous match, the closest lines of a miss).

Shared by the in-process run (``test_edit_corpus.py``) and the run over the wire (``test_edit_corpus_wire.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Case:
    name: str
    before: bytes
    arguments: dict[str, Any]
    after: bytes | None = None
    """The expected bytes; None: refused (the file must be unchanged)."""
    code: str | None = None
    says: tuple[str, ...] = ()
    """Phrases the result's text must contain."""
    tool: str = "edit_file"
    extra: dict[str, Any] = field(default_factory=dict)


def edit(old: str, new: str, **more: Any) -> dict[str, Any]:
    return {"old_string": old, "new_string": new, **more}


BLOCK = b"def run(x):\n    if x:\n        x = 1\n    return x\n"
CLASS = b"class A:\n    def f(self):\n        return 1\n\n    def g(self):\n        return 2\n"
JS = b"function f() {\n  const a = 1;\n  return a;\n}\n"
TABBED = b"func f() {\n\tx := 1\n\treturn x\n}\n"

ROUND_2 = [
    # -- indentation of the added lines of an exact match inside an indented line -------------------------------
    Case(
        "inline match: added line takes the line's indentation",
        BLOCK,
        edit("x = 1", "x = 2\ny = 3"),
        b"def run(x):\n    if x:\n        x = 2\n        y = 3\n    return x\n",
    ),
    Case(
        "inline match: added lines keep their depth relative to the match",
        BLOCK,
        edit("x = 1", "for i in r:\n    x += i"),
        b"def run(x):\n    if x:\n        for i in r:\n            x += i\n    return x\n",
    ),
    Case(
        "inline match: added lines already written at the file's indentation stay",
        BLOCK,
        edit("x = 1", "x = 2\n        y = 3"),
        b"def run(x):\n    if x:\n        x = 2\n        y = 3\n    return x\n",
    ),
    Case(
        "inline match: a block opener nests the added lines",
        BLOCK,
        edit("return x", "if x:\n    return x"),
        b"def run(x):\n    if x:\n        x = 1\n    if x:\n        return x\n",
    ),
    Case(
        "inline match in a tab-indented file",
        TABBED,
        edit("x := 1", "x := 2\ny := 3"),
        b"func f() {\n\tx := 2\n\ty := 3\n\treturn x\n}\n",
    ),
    Case(
        "inline match with a trailing newline in both strings",
        JS,
        edit("const a = 1;\n", "const a = 1;\nconst b = 2;\n"),
        b"function f() {\n  const a = 1;\n  const b = 2;\n  return a;\n}\n",
    ),
    Case(
        "inline match after code on the line is not re-indented",
        b"x = f(a)\n",
        edit("f(a)", "f(a,\nb)"),
        b"x = f(a,\nb)\n",
    ),
    Case(
        "inline match with blank added line keeps it blank",
        BLOCK,
        edit("x = 1", "x = 1\n\nz = 0"),
        b"def run(x):\n    if x:\n        x = 1\n\n        z = 0\n    return x\n",
    ),
    Case(
        "inline match in a crlf file",
        b"if a:\r\n    b()\r\n",
        edit("b()", "b()\nc()"),
        b"if a:\r\n    b()\r\n    c()\r\n",
    ),
    # -- placeholders that are bracketed or parenthesised lines ------------------------------------------------
    Case(
        "parenthesised rest-of-methods placeholder",
        CLASS,
        edit(
            "    def f(self):\n        return 1\n\n    def g(self):\n        return 2\n",
            "    def f(self):\n        return 10\n\n    (rest of methods ...)\n",
        ),
        code="PLACEHOLDER",
        says=("new_string line 4", "(rest of methods ...)"),
    ),
    Case(
        "bracketed rest-unchanged placeholder",
        CLASS,
        edit("class A:\n    def f(self):\n", "class A:\n    [... rest unchanged ...]\n    def f(self):\n"),
        code="PLACEHOLDER",
        says=("line 2",),
    ),
    Case(
        "parenthesised unchanged-code placeholder with a unicode ellipsis",
        JS,
        edit("  const a = 1;\n  return a;\n", "  (unchanged code \u2026)\n  return a + 1;\n"),
        code="PLACEHOLDER",
    ),
    Case(
        "upper-case bracketed placeholder",
        JS,
        edit("  return a;\n", "  [REST OF FUNCTION ...]\n  return a;\n"),
        code="PLACEHOLDER",
    ),
    Case(
        "bracketed placeholder in an edits list names the edit",
        CLASS,
        {"edits": [edit("return 1", "return 10"), edit("        return 2\n", "        (previous code ...)\n")]},
        code="PLACEHOLDER",
        says=("edits[1].new_string",),
    ),
    Case(
        "bracketed placeholder in write_file",
        CLASS,
        {"content": "class A:\n    def f(self):\n        return 1\n\n    (remaining methods ...)\n"},
        code="PLACEHOLDER",
        tool="write_file",
        says=("content line 5",),
    ),
    Case(
        "parenthesised placeholder without an ellipsis in write_file",
        CLASS,
        {"content": "class A:\n    (rest of the class unchanged)\n"},
        code="PLACEHOLDER",
        tool="write_file",
    ),
    Case(
        "python ellipsis in brackets is code",
        b"x = 1\n",
        edit("x = 1", "x = [\n    ...\n]\ny = (...)\n[...]"),
        b"x = [\n    ...\n]\ny = (...)\n[...]\n",
    ),
    Case(
        "a bracketed markdown line is text",
        b"# Notes\n",
        edit("# Notes", "# Notes\n\n[Read more...]\n(see here...)"),
        b"# Notes\n\n[Read more...]\n(see here...)\n",
    ),
    Case(
        "a parenthesised call line is code",
        b"a = 1\n",
        edit("a = 1", "a = 1\n(check_rest(a))"),
        b"a = 1\n(check_rest(a))\n",
    ),
    Case(
        "a bracketed placeholder the file already has is its own text",
        b"items = [\n    1,\n    [... more items ...]\n]\n",
        edit("    1,\n", "    2,\n"),
        b"items = [\n    2,\n    [... more items ...]\n]\n",
    ),
    # -- line endings of old_string and new_string -------------------------------------------------------------
    Case("crlf in new_string into an lf file", b"a\nb\n", edit("a", "x\r\ny"), b"x\ny\nb\n"),
    Case("crlf in old_string of an lf file", b"a\nb\nc\n", edit("a\r\nb", "A\r\nB"), b"A\nB\nc\n"),
    Case("crlf in both strings of a crlf file", b"a\r\nb\r\n", edit("a\r\nb", "x\r\ny\r\nz"), b"x\r\ny\r\nz\r\n"),
    Case("lf new_string into a crlf file", b"one\r\ntwo\r\n", edit("two", "2\n3"), b"one\r\n2\r\n3\r\n"),
    Case(
        "mixed file: replacement takes the crlf of what it replaces",
        b"a\r\nb\r\nc\nd\n",
        edit("a\r\nb", "x\ny"),
        b"x\r\ny\r\nc\nd\n",
    ),
    Case(
        "mixed file: replacement in an lf part stays lf",
        b"a\r\nb\r\nc\nd\n",
        edit("c\r\nd", "y\r\nz"),
        b"a\r\nb\r\ny\nz\n",
    ),
    Case(
        "crlf in an edits list into an lf file",
        b"a\nb\n",
        {"edits": [edit("a", "1\r\n2"), edit("b\r\n", "3\r\n")]},
        b"1\n2\n3\n",
    ),
    # -- over-escaped old_string ----------------------------------------------------------------------------
    Case(
        "literal backslash-n in old_string",
        b"def f():\n    return 1\n",
        edit("def f():\\n    return 1", "def f():\\n    return 2"),
        b"def f():\n    return 2\n",
        says=("escape",),
    ),
    Case(
        "literal backslash-t in old_string",
        b"a\tb\n",
        edit("a\\tb", "a\\tc"),
        b"a\tc\n",
        says=("escape",),
    ),
    Case(
        "escaped quotes in old_string",
        b'print("hi")\n',
        edit('print(\\"hi\\")', 'print(\\"bye\\")'),
        b'print("bye")\n',
        says=("escape",),
    ),
    Case(
        "over-escaped old_string ending a line before the next one",
        b"x = 1\ny = 2\n",
        edit("x = 1\\n", "x = 5\\n"),
        b"x = 5\ny = 2\n",
        says=("escape",),
    ),
    Case(
        "a literal backslash-n the file has is matched as it is",
        b'msg = "a\\nb"\nother = 1\n',
        edit('msg = "a\\nb"', 'msg = "a\\nc"'),
        b'msg = "a\\nc"\nother = 1\n',
    ),
    Case(
        "over-escaped old_string in two places refused",
        b"x = 1\ny = 2\nx = 1\ny = 2\n",
        edit("x = 1\\ny = 2", "x = 3\\ny = 4"),
        code="AMBIGUOUS_MATCH",
        says=("lines 1, 3",),
    ),
    Case(
        "over-escaped old_string with replace_all still refused in two places",
        b"x = 1\ny = 2\nx = 1\ny = 2\n",
        edit("x = 1\\ny = 2", "x = 3\\ny = 4", replace_all=True),
        code="AMBIGUOUS_MATCH",
    ),
    Case(
        "over-escaped old_string under-indented",
        b"class A:\n    def f(self):\n        pass\n",
        edit("def f(self):\\n    pass", "def f(self):\\n    return 1"),
        b"class A:\n    def f(self):\n        return 1\n",
        says=("escape",),
    ),
    # -- the rest of codex's unicode spaces --------------------------------------------------------------------
    Case("three-per-em space (U+2004)", "a\u2004= 1\n".encode(), edit("a = 1", "a = 2"), b"a = 2\n", says=("space",)),
    Case("four-per-em space (U+2005)", "b\u2005= 1\n".encode(), edit("b = 1", "b = 2"), b"b = 2\n", says=("space",)),
    Case("six-per-em space (U+2006)", "c\u2006= 1\n".encode(), edit("c = 1", "c = 2"), b"c = 2\n", says=("space",)),
    Case("punctuation space (U+2008)", "d =\u20081\n".encode(), edit("d = 1", "d = 2"), b"d = 2\n", says=("space",)),
    Case("hair space (U+200A)", "e\u200a= 1\n".encode(), edit("e = 1", "e = 2"), b"e = 2\n", says=("space",)),
    Case(
        "medium mathematical space (U+205F)",
        "f\u205f= 1\n".encode(),
        edit("f = 1", "f = 2"),
        b"f = 2\n",
        says=("space",),
    ),
    Case(
        "ideographic space (U+3000) in a block",
        "if x:\n\u3000\u3000y()\n".encode(),
        edit("if x:\n  y()", "if x:\n  z()"),
        "if x:\n\u3000\u3000z()\n".encode(),
    ),
    Case(
        "unicode spaces in two places refused",
        "a\u2004= 1\na\u2005= 1\n".encode(),
        edit("a = 1", "a = 2"),
        code="AMBIGUOUS_MATCH",
        says=("lines 1, 2",),
    ),
    # -- runs of spaces and tabs inside a line ---------------------------------------------------------------
    Case(
        "aligned assignment in the file",
        b"name    = 1\nvalue   = 2\n",
        edit("name = 1", "name = 3"),
        b"name = 3\nvalue   = 2\n",
        says=("blanks",),
    ),
    Case(
        "model doubled a space",
        b"return a + b\n",
        edit("return a  +  b", "return a - b"),
        b"return a - b\n",
        says=("blanks",),
    ),
    Case(
        "tab inside a line",
        b"key\tvalue\nother\tthing\n",
        edit("key value", "key other"),
        b"key other\nother\tthing\n",
        says=("blanks",),
    ),
    Case(
        "runs inside lines of an indented block",
        b"def f():\n    x  =  1\n    y  =  2\n",
        edit("    x = 1\n    y = 2", "    x = 10\n    y = 20"),
        b"def f():\n    x = 10\n    y = 20\n",
        says=("blanks",),
    ),
    Case(
        "runs inside a line with its own indentation",
        b"if a:\n        v    = 1\n",
        edit("    v = 1", "    v = 2"),
        b"if a:\n        v = 2\n",
        says=("blanks",),
    ),
    Case(
        "runs of blanks matching two places refused",
        b"a  = 1\na   = 1\n",
        edit("a = 1", "a = 2"),
        code="AMBIGUOUS_MATCH",
        says=("lines 1, 2",),
    ),
    Case(
        "runs of blanks never match inside a longer word",
        b"value  = 10\n",
        edit("value = 1", "value = 2"),
        code="NO_MATCH",
        says=("     1\tvalue  = 10",),
    ),
    Case(
        "unicode spaces never match inside a longer word",
        "n\u2004= 12\n".encode(),
        edit("n = 1", "n = 2"),
        code="NO_MATCH",
    ),
    Case(
        "blank edges: a file without a final newline keeps none",
        b"a\nb",
        edit("b\n", "c\n"),
        b"a\nc",
        says=("blank",),
    ),
    Case(
        "a missing blank is not a run",
        b"a=1\n",
        edit("a = 1", "a = 2"),
        code="NO_MATCH",
    ),
    # -- blank lines at the edges of old_string --------------------------------------------------------------
    Case(
        "leading blank line the file lacks",
        b"x = 1\ny = 2\n",
        edit("\nx = 1\ny = 2", "\nx = 3\ny = 2"),
        b"x = 3\ny = 2\n",
        says=("blank",),
    ),
    Case(
        "trailing blank lines the file lacks",
        b"def f():\n    return 1\ndef g():\n    return 2\n",
        edit("def f():\n    return 1\n\n\n", "def f():\n    return 9\n\n\n"),
        b"def f():\n    return 9\ndef g():\n    return 2\n",
        says=("blank",),
    ),
    Case(
        "blank edges and wrong indentation",
        b"class A:\n    def f(self):\n        pass\n",
        edit("\n\ndef f(self):\n    pass\n\n", "\n\ndef f(self):\n    return 0\n\n"),
        b"class A:\n    def f(self):\n        return 0\n",
        says=("blank",),
    ),
    Case(
        "blank edges only in old_string keep new_string whole",
        b"a = 1\nb = 2\n",
        edit("\na = 1\n", "a = 5\n"),
        b"a = 5\nb = 2\n",
    ),
    Case(
        "blank edges matching two places refused",
        b"a = 1\nb\na = 1\n",
        edit("\na = 1\n\n", "\na = 2\n\n"),
        code="AMBIGUOUS_MATCH",
        says=("lines 1, 3",),
    ),
    Case(
        "blank lines the file has are matched exactly",
        b"a\n\nb\n",
        edit("a\n\nb", "a\nb"),
        b"a\nb\n",
    ),
    # -- similarity is never applied --------------------------------------------------------------------------
    Case(
        "one character different refused with the closest lines",
        b"def total(items):\n    return sum(items)\n",
        edit("def total(item):\n    return sum(item)", "def total(items):\n    return len(items)"),
        code="NO_MATCH",
        says=("     1\tdef total(items):", "     2\t    return sum(items)"),
    ),
    Case(
        "anchor lines with a different middle refused",
        b"start()\nmiddle_a()\nend()\n",
        edit("start()\nmiddle_b()\nend()", "start()\nend()"),
        code="NO_MATCH",
        says=("     1\tstart()",),
    ),
    Case(
        "first of several similar blocks is not picked",
        b"a(1)\nb(1)\n\na(2)\nb(2)\n",
        edit("a(3)\nb(3)", "c()"),
        code="NO_MATCH",
    ),
    Case(
        "a typo in an identifier refused",
        b"value = compute()\n",
        edit("valeu = compute()", "value = compute(1)"),
        code="NO_MATCH",
        says=("value = compute()", "never guessed"),
    ),
    Case(
        "nothing alike says to read again",
        b"alpha\nbeta\n",
        edit("zzz qqq", "x"),
        code="NO_MATCH",
        says=("read the file again",),
    ),
    Case(
        "line-number prefixes in old_string are named",
        b"a = 1\nb = 2\n",
        edit("     1\ta = 1\n     2\tb = 2", "a = 3\nb = 4"),
        code="NO_MATCH",
        says=("line numbers",),
    ),
    # -- ambiguous: every line number ------------------------------------------------------------------------
    Case(
        "exact ambiguous names every line",
        b"log()\nx\nlog()\ny\nlog()\n",
        edit("log()", "log(1)"),
        code="AMBIGUOUS_MATCH",
        says=("3 times", "lines 1, 3, 5", "replace_all"),
    ),
    Case(
        "indentation ambiguous names every line",
        b"if a:\n    go()\nif b:\n  go()\n",
        edit("go()\n", "stop()\n"),
        code="AMBIGUOUS_MATCH",
        says=("lines 2, 4",),
    ),
    Case(
        "ambiguous in an edits list names the edit and the lines",
        b"a\nb\nb\n",
        {"edits": [edit("a", "z"), edit("b", "y")]},
        code="AMBIGUOUS_MATCH",
        says=("edits[1]", "lines 2, 3"),
    ),
    # -- the earlier rules still hold beside the new ones ----------------------------------------------------
    Case(
        "exact wins over an escaped reading",
        b"s = 'a\\\\nb'\nt = 1\n",
        edit("s = 'a\\\\nb'", "s = 'c'"),
        b"s = 'c'\nt = 1\n",
    ),
    Case(
        "replace_all with the indentation rule still applies everywhere",
        b"if a:\n    go()\nif b:\n  go()\n",
        edit("go()\n", "stop()\n", replace_all=True),
        b"if a:\n    stop()\nif b:\n  stop()\n",
    ),
    Case(
        "crlf file and unicode space",
        "a\u2005= 1\r\nb = 2\r\n".encode(),
        edit("a = 1\r\n", "a = 3\r\n"),
        b"a = 3\r\nb = 2\r\n",
    ),
    Case(
        "bom file with an inline indented match",
        "\ufeffif a:\n    b()\n".encode(),
        edit("b()", "b()\nc()"),
        "\ufeffif a:\n    b()\n    c()\n".encode(),
    ),
]
