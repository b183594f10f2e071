"""What a file's text looks like to the model and what a write keeps of it: numbering, binary sniffing, the
file's own conventions (CRLF, a final newline, a byte-order mark).

Pure helpers (the sniff reads at most :data:`SNIFF_BYTES` of a local file); the tools in
:mod:`dsh.tools._builtin` use them.
"""

from __future__ import annotations

import mimetypes
import os
from dataclasses import dataclass

from dsh.tools._encoding import bom_encoding, guess_encoding

__all__ = [
    "READ_LINE_WIDTH",
    "SNIFF_BYTES",
    "Binary",
    "keep_conventions",
    "number_lines",
    "sniff_binary",
]

READ_LINE_WIDTH = 2000
"""Characters of one line a read shows; the rest is cut, and the cut is said."""

SNIFF_BYTES = 8192

_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"RIFF", "application/octet-stream"),  # refined below (WEBP, WAV)
    (b"%PDF-", "application/pdf"),
    (b"PK\x03\x04", "application/zip"),
    (b"\x1f\x8b", "application/gzip"),
    (b"\x7fELF", "application/x-executable"),
    (b"\xca\xfe\xba\xbe", "application/java-vm"),
    (b"SQLite format 3\x00", "application/vnd.sqlite3"),
)


@dataclass(frozen=True, slots=True)
class Binary:
    """A file that is not UTF-8 text: its size in bytes and its type (a MIME type); ``encoding`` is set when it
    is text in another encoding (:mod:`dsh.tools._encoding`'s guess), None for binary data."""

    size: int
    mime: str
    encoding: str | None = None


def sniff_binary(real: str) -> Binary | None:
    """*real* as a :class:`Binary` when its first bytes say it is not UTF-8 text (a NUL byte, a known magic
    number, or bytes that are not UTF-8), else None (also when it cannot be opened: the read reports that). Text
    in another encoding (a UTF-16/32 byte-order mark; bytes that are not UTF-8 but hold no NUL) comes back with
    its guessed ``encoding``. Anything but a regular file raises :class:`~dsh.tools._regular.NotRegularFileError`
    without blocking (a FIFO)."""
    from dsh.tools._regular import open_regular

    try:
        with open(open_regular(real, checked=False), "rb") as file:
            head = file.read(SNIFF_BYTES)
            size = os.fstat(file.fileno()).st_size
    except OSError:
        return None
    bom = bom_encoding(head)
    if bom is not None:
        return Binary(size, "text/plain", bom)
    mime = next((kind for magic, kind in _MAGIC if head.startswith(magic)), None)
    if mime is not None and head.startswith(b"RIFF"):
        mime = "image/webp" if head[8:12] == b"WEBP" else "audio/wav" if head[8:12] == b"WAVE" else mime
    if mime is None:
        if b"\0" not in head:
            try:
                head.decode("utf-8")
                return None
            except UnicodeDecodeError as exc:
                if exc.start >= len(head) - 3:  # a character cut by the probe's end
                    return None
            return Binary(size, mimetypes.guess_type(real)[0] or "text/plain", guess_encoding(head))
        mime = mimetypes.guess_type(real)[0] or "application/octet-stream"
    return Binary(size, mime)


def number_lines(text: str, offset: int, limit: int, *, max_chars: int, total: int | None) -> str:
    """``cat -n`` style (number right-aligned in 6 columns, a tab, the line without its ending) for the lines of
    *text*, which start at line *offset*; at most *limit* lines and about *max_chars* characters. Lines longer
    than :data:`READ_LINE_WIDTH` are cut and marked. *total*: the file's line count when known; the last line
    then says how many remain and the offset to read on from."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    out: list[str] = []
    used = 0
    cut_lines = 0
    for index, line in enumerate(lines[:limit]):
        line = line.removesuffix("\r")
        if len(line) > READ_LINE_WIDTH:
            line = line[:READ_LINE_WIDTH] + f" … [line cut: {len(line) - READ_LINE_WIDTH} more characters]"
            cut_lines += 1
        entry = f"{offset + index:>6}\t{line}"
        if out and used + len(entry) > max_chars:
            break
        out.append(entry)
        used += len(entry) + 1
    if not out:
        if offset > 1:
            known = f" (it has {total} line{'' if total == 1 else 's'})" if total is not None else ""
            return f"[offset {offset} is past the end of the file{known}]"
        return "[empty file]"
    shown_to = offset + len(out) - 1
    more = len(lines) > len(out) if total is None else total > shown_to
    if cut_lines:
        out.append(f"[{cut_lines} line(s) longer than {READ_LINE_WIDTH} characters were cut]")
    if more:
        if total is not None:
            out.append(f"[… {total - shown_to} more lines (of {total}): read on with offset={shown_to + 1}]")
        else:
            out.append(f"[… the file continues: read on with offset={shown_to + 1}]")
    return "\n".join(out)


def keep_conventions(new: str, old: str | None) -> str:
    """*new* as it should be written over *old*: a file whose line breaks were all CRLF keeps CRLF; a file that
    ended with a newline keeps one; a byte-order mark stays. A new file (*old* None) is written as given."""
    if old is None or not new:
        return new
    if old.startswith("\ufeff") and not new.startswith("\ufeff"):
        new = "\ufeff" + new
    crlf = old.count("\r\n")
    if crlf and crlf == old.count("\n") and "\r\n" not in new:
        new = new.replace("\n", "\r\n")
    if old.endswith("\n") and not new.endswith("\n"):
        new += "\r\n" if crlf and crlf == old.count("\n") else "\n"
    return new
