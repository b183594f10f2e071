"""The recording file: every ACP frame in both directions and every model response, as JSON lines.

Format (one JSON object per line, ``kind`` first; ``t`` is seconds since the recording started, from the
monotonic clock):

* ``{"kind": "header", "format": "dsh-recording", "version": 1, "dsh": VERSION, "model": …, "models": […],
  "cwd": …, "dataDir": …, "python": the daemon's interpreter, "started": ISO-8601}`` — the first line.
* ``{"kind": "eof", "t"}`` — the daemon's input ended.
* ``{"kind": "session-file", "t", "sessionId", "lines": […]}`` — a stored session the client loads or resumes
  that this recording did not create, as its file was just before the daemon read the request (a replay puts it
  in its data directory first).
* ``{"kind": "frame", "t", "dir": "in" | "out", "frame": {…}}`` — a frame the daemon read (``in``) or wrote
  (``out``); a frame that is not JSON is kept as text in ``raw`` instead of ``frame``.
* ``{"kind": "model-request", "t", "n", "model"}``, then ``{"kind": "model-chunk", "t", "n", "chunk": {…}}`` per
  chunk (``"aborted": true`` once the request's signal was aborted), then ``{"kind": "model-end", "t", "n",
  "end": "finished" | "closed" | "error", "aborted": bool, "error"?: {message, code?}}`` — the *n*-th model call
  as the provider's adapter streamed it to dsh.

Guarantees: every line is written and flushed when its frame or chunk passes (a crash loses nothing already
sent); every string is passed through the redactor (provider keys and every value ``dsh config show`` lists as
withheld become ``[redacted NAME]``) before it reaches the file; the file is created with mode 0600. A write
that fails (disk full) stops the recording: it says so on stderr, naming the errno (``ENOSPC``) and how many
lines the file holds (what is there replays up to that point), and :attr:`Recorder.stopped` holds the reason for
the daemon to repeat when it exits; the daemon never fails because of it.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dsh._log import get_logger

__all__ = ["FORMAT", "VERSION", "Recorder", "recording_path"]

FORMAT = "dsh-recording"
VERSION = 1
log = get_logger("dsh.recording")


def recording_path(target: str | Path, *, pid: int | None = None) -> Path:
    """*target* itself, or a new file ``dsh-YYYYmmdd-HHMMSS-PID.jsonl`` in it when *target* is a directory (so
    ``DSH_RECORD=DIR`` gives each daemon its own file)."""
    path = Path(target).expanduser()
    if path.is_dir():
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        return path / f"dsh-{stamp}-{pid if pid is not None else os.getpid()}.jsonl"
    return path


def _redact_json(value: Any, redact: Callable[[str], str]) -> Any:
    from dsh.secrets import redact_json

    return redact_json(value, redact)


class Recorder:
    """Writes one recording file (see the module docstring). Not thread-safe: used from the event loop only."""

    def __init__(
        self,
        path: str | Path,
        redact: Callable[[str], str],
        *,
        data_dir: str | None = None,
        secrets_are_plain: bool = False,
    ) -> None:
        self.path = recording_path(path)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        self._file: Any = os.fdopen(fd, "w", encoding="utf-8")
        self._redact = redact
        self._plain = secrets_are_plain
        """Every secret value reads the same inside a JSON string (no quote, backslash, control or non-ASCII
        character): then a line's JSON text is redacted as text, exactly as its strings would be one by one."""
        self._start = time.monotonic()
        self._requests = 0
        self._data_dir = data_dir
        self._sessions: set[str] = set()
        """Session ids the recording already holds: created in it (answered by the daemon) or embedded."""
        self._lines = 0
        self.stopped: str | None = None
        """Why the recording stopped before the daemon ended (None while it records)."""

    def _write(self, entry: dict[str, Any]) -> None:
        if self._file is None:
            return
        try:
            if self._plain:
                line = self._redact(json.dumps(entry, ensure_ascii=False, separators=(",", ":")))
            else:
                line = json.dumps(_redact_json(entry, self._redact), ensure_ascii=False, separators=(",", ":"))
        except (ValueError, TypeError) as exc:
            log.error("recording: an entry that is not JSON was left out", error=str(exc))
            return
        self._line(line)

    def _line(self, line: str) -> None:
        if self._file is None:
            return
        try:
            self._file.write(line + "\n")
            self._file.flush()
            self._lines += 1
        except (OSError, ValueError) as exc:
            from dsh.errors import error_message

            why = error_message(exc)
            self.stopped = (
                f"recording stopped: cannot write {self.path} ({why}); it holds {self._lines} complete lines, "
                "which dsh replay replays up to there"
            )
            log.error("recording stopped: cannot write it", path=str(self.path), error=why, lines=self._lines)
            self._say(self.stopped)
            self.close()

    @staticmethod
    def _say(text: str) -> None:
        """One plain line on stderr (beside the structured log): what a person running the daemon reads."""
        import sys

        try:
            sys.stderr.write(f"dsh: {text}\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass

    def _now(self) -> float:
        return round(time.monotonic() - self._start, 6)

    def header(self, **fields: Any) -> None:
        from dsh import __version__

        started = datetime.now(UTC).isoformat(timespec="seconds")
        self._write(
            {"kind": "header", "format": FORMAT, "version": VERSION, "dsh": __version__, **fields, "started": started}
        )

    def frame(self, direction: str, data: bytes) -> None:
        """A frame read (``in``) or written (``out``), without its newline."""
        if direction == "out" and self._plain and b'"result"' not in data:
            # The daemon's own frame is one line of JSON already: no parse and no re-encoding on the chunk path.
            text = data.decode("utf-8", errors="replace")
            self._line(f'{{"kind":"frame","t":{self._now()},"dir":"out","frame":{self._redact(text)}}}')
            return
        entry: dict[str, Any] = {"kind": "frame", "t": self._now(), "dir": direction}
        try:
            entry["frame"] = json.loads(data)
        except ValueError:
            entry["raw"] = data.decode("utf-8", errors="replace")
        frame = entry.get("frame")
        if isinstance(frame, dict):
            if direction == "in":
                self._embed_stored(frame)
            else:
                result = frame.get("result")
                if isinstance(result, dict) and isinstance(result.get("sessionId"), str):
                    self._sessions.add(result["sessionId"])
        self._write(entry)

    def _embed_stored(self, frame: dict[str, Any]) -> None:
        """Before a ``session/load`` or ``session/resume`` of a session this recording did not create, the stored
        session as it is now (the daemon has not read the frame yet): a replay starts from the same file."""
        params = frame.get("params")
        if frame.get("method") not in ("session/load", "session/resume") or not isinstance(params, dict):
            return
        session_id = params.get("sessionId")
        if not isinstance(session_id, str) or session_id in self._sessions or self._data_dir is None:
            return
        if not session_id.replace("-", "").isalnum():  # never a path: the daemon refuses such ids anyway
            return
        try:
            text = (Path(self._data_dir) / f"{session_id}.jsonl").read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return
        self._sessions.add(session_id)
        self._write({"kind": "session-file", "t": self._now(), "sessionId": session_id, "lines": text.splitlines()})

    def eof(self) -> None:
        """The daemon's input ended (the client closed its end): a replay closes the replayed daemon's here."""
        self._write({"kind": "eof", "t": self._now()})

    def outgoing(self, send: Callable[[bytes], None]) -> Callable[[bytes], None]:
        """*send*, recording each frame first."""

        def recorded(frame: bytes) -> None:
            self.frame("out", frame)
            send(frame)

        return recorded

    def model_request(self, model: str) -> int:
        """Open the next model call; return its number."""
        self._requests += 1
        self._write({"kind": "model-request", "t": self._now(), "n": self._requests, "model": model})
        return self._requests

    def model_chunk(self, n: int, chunk: Any, *, aborted: bool) -> None:
        entry: dict[str, Any] = {"kind": "model-chunk", "t": self._now(), "n": n, "chunk": chunk}
        if aborted:
            entry["aborted"] = True
        self._write(entry)

    def model_end(self, n: int, end: str, *, aborted: bool, error: dict[str, Any] | None = None) -> None:
        entry: dict[str, Any] = {"kind": "model-end", "t": self._now(), "n": n, "end": end, "aborted": aborted}
        if error is not None:
            entry["error"] = error
        self._write(entry)

    def close(self) -> None:
        if self._file is None and self.stopped is not None:
            self._say(self.stopped)  # at the daemon's exit too: the first line may be far up the log
            self.stopped = None
            return
        file, self._file = self._file, None
        if file is not None:
            try:
                file.close()
            except OSError:
                pass
