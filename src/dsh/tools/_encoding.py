"""Text that is not UTF-8: which encoding it most likely is, and what the model is told to do with it.

``read_file`` and ``edit_file`` work on UTF-8 text (the workspace seam reads and writes UTF-8, an editor its own
buffers). A file in a legacy encoding (cp1251, KOI8-R, cp1252, UTF-16 with a byte-order mark) is not binary: the
model is told so, with the encoding guessed from its bytes and the commands that read it and change it while
keeping its encoding, instead of a "binary" refusal followed by "read it first" (a dead end).

Guarantees: :func:`guess_encoding` is pure, reads only the bytes it is given (the sniff's first 8 KiB), never
raises, and answers one of :data:`ENCODINGS`; the guess is a guess and the message says so.
"""

from __future__ import annotations

import shlex

__all__ = ["ENCODINGS", "bom_encoding", "guess_encoding", "not_utf8_message"]

ENCODINGS = ("utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be", "cp1251", "koi8-r", "cp1252")

_BOMS = (
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
)


def bom_encoding(head: bytes) -> str | None:
    """The UTF-16/32 encoding a byte-order mark at the start of *head* names, when what follows reads as text in
    it (printable characters or whitespace, some of them ASCII), else None: binary data may start with the same
    two bytes."""
    for bom, name in _BOMS:
        if head.startswith(bom):
            unit = 4 if name.startswith("utf-32") else 2
            body = head[len(bom) : len(bom) + (len(head) - len(bom)) // unit * unit]
            try:
                text = body.decode(name)
            except UnicodeDecodeError as exc:
                if exc.start < len(body) - 4:  # only a character cut by the probe's end is forgiven
                    return None
                text = body[: exc.start].decode(name, errors="replace")
            readable = all(char.isprintable() or char.isspace() for char in text)
            return name if text and readable and any(char.isascii() for char in text) else None
    return None


def _misplaced_capitals(text: str) -> int:
    """Capital letters inside words of non-ASCII letters: few in real text, many when the wrong Cyrillic table
    swapped the cases (cp1251 read as KOI8-R or the other way round)."""
    count = 0
    previous = ""
    for char in text:
        if char.isupper() and previous.isalpha() and not previous.isascii():
            count += 1
        previous = char
    return count


def guess_encoding(head: bytes) -> str:
    """The most likely encoding of *head*, text that is not UTF-8: a byte-order mark decides; else a single-byte
    table: bytes >= 0x80 mostly in runs (whole words of a non-Latin script) read as Cyrillic (cp1251 or KOI8-R,
    whichever leaves fewer capitals inside words), scattered ones as Western European (cp1252)."""
    named = bom_encoding(head)
    if named is not None:
        return named
    high = [i for i, byte in enumerate(head) if byte >= 0x80]
    if not high:
        return "cp1252"
    marks = set(high)
    in_runs = sum(1 for i in high if i - 1 in marks or i + 1 in marks)
    if in_runs / len(high) < 0.6:
        return "cp1252"
    scores = {name: _misplaced_capitals(head.decode(name, errors="replace")) for name in ("cp1251", "koi8-r")}
    return min(scores, key=lambda name: (scores[name], name != "cp1251"))


def not_utf8_message(shown: str, encoding: str, size: int) -> str:
    """What ``read_file``, ``edit_file`` and ``write_file`` say about the text file *shown* in *encoding*: what it
    is, how to read it and how to change it keeping its encoding (no step that leads back here)."""
    quoted = shlex.quote(shown)
    codec = encoding.upper()
    return (
        f"{shown} is a text file in {encoding} (a guess from its bytes; {size} bytes), not UTF-8: read_file and "
        "edit_file work on UTF-8 text only, so this file cannot be read or edited with them. "
        f"To read it: run_command `iconv -f {codec} -t UTF-8 {quoted} | cat -n` (add `| sed -n '1,200p'` for a "
        "part). To change it and keep its encoding: run_command with a short script that reads and writes it "
        f'with encoding {encoding!r}, e.g. `python3 -c "p = {shown!r}; t = open(p, encoding={encoding!r}, '
        f"newline='').read(); open(p, 'w', encoding={encoding!r}, newline='').write(t.replace(OLD, NEW, 1))\"`. "
        "Convert it to UTF-8 for good (`iconv -f {codec} -t UTF-8`) "
        "only if the user asks for that."
    )
