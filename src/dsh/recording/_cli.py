"""``dsh replay FILE [--update]``: the command's body (the typer command in :mod:`dsh.cli` only parses)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from dsh.recording._format import RecordingError, read_recording
from dsh.recording._replay import ReplayResult, replay

__all__ = ["run_replay", "write_updated"]


def write_updated(
    path: Path,
    header: dict[str, object],
    result: ReplayResult,
    model_entries: list[dict[str, object]],
    session_files: dict[str, list[str]] | None = None,
) -> None:
    """Rewrite the recording at *path*: its header, the replay's frames in the order they happened (the
    daemon's as it sent them now, in the recording's names), then the recorded model responses."""
    lines = [header]
    for sid, content in (session_files or {}).items():
        lines.append({"kind": "session-file", "sessionId": sid, "lines": content})
    for kind, value in result.timeline:
        if kind == "eof":
            lines.append({"kind": "eof"})
        elif kind == "in":
            lines.append(
                {"kind": "frame", "dir": "in", **({"frame": value} if not isinstance(value, str) else {"raw": value})}
            )
        else:
            lines.append({"kind": "frame", "dir": "out", "frame": value})
    lines.extend(model_entries)
    text = "".join(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n" for line in lines)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(path)


def run_replay(file: str, *, cwd: str | None, frame_timeout: float, update: bool, config: str | None) -> int:
    """Exit status: 0 when the daemon sent what it sent then (or ``update`` rewrote the file), 1 at a
    divergence (the report on stdout), 2 for a file that is not a recording."""
    import anyio

    try:
        recording = read_recording(file)
    except RecordingError as error:
        sys.stderr.write(f"dsh replay: {error.message}\n")
        return 2
    result = anyio.run(lambda: replay(recording, cwd=cwd, frame_timeout=frame_timeout, update=update, config=config))
    if update:
        write_updated(Path(file), recording.header, result, recording.model_entries, recording.session_files)
        sys.stdout.write(f"updated {file}: {result.report}\n")
        return 0
    sys.stdout.write(("ok: " if result.ok else "replay differs: ") + result.report + "\n")
    if not result.ok and result.stderr.strip():
        sys.stdout.write("the daemon's stderr (last lines):\n" + "\n".join(result.stderr.splitlines()[-15:]) + "\n")
    return 0 if result.ok else 1
