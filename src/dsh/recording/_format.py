"""Reading a recording (:mod:`dsh.recording._recorder` writes it) and rebuilding its model responses as a script.

A recording that is not one cannot be replayed: :class:`RecordingError` says which line is wrong and why. A
recording that was cut (the daemon killed, the disk full: a torn last line, or no end of input) is one: its
complete lines are read, and :attr:`Recording.cut` says where it stops, so a replay can replay what is there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsh.errors import DshError
from dsh.recording._recorder import FORMAT, VERSION

__all__ = ["Event", "Recording", "RecordingError", "read_recording", "script_of"]


class RecordingError(DshError):
    default_code = "BAD_RECORDING"


@dataclass
class Event:
    """A frame read (``in``) or written (``out``) by the daemon, or the end of its input (``eof``)."""

    dir: str
    line: int
    """The line of the recording (1-based): how a report names it."""
    frame: Any = None
    raw: str | None = None
    t: float = 0.0


@dataclass
class Recording:
    header: dict[str, Any]
    events: list[Event] = field(default_factory=list)
    model_entries: list[dict[str, Any]] = field(default_factory=list)
    session_files: dict[str, list[str]] = field(default_factory=dict)
    """Stored sessions the recorded client loaded (id → the file's lines when it did)."""
    cut: str | None = None
    """Where and how the recording stops early (None: it ends with the daemon's end of input)."""

    @property
    def outgoing(self) -> list[Event]:
        return [event for event in self.events if event.dir == "out"]


def read_recording(path: str | Path) -> Recording:
    """Parse the recording at *path*; raise :class:`RecordingError` naming the first line that is wrong."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RecordingError(f"cannot read {path}: {exc}") from None
    recording: Recording | None = None
    lines = text.splitlines()
    torn: int | None = None
    if lines and not text.endswith("\n"):  # the writer stopped inside its last line
        torn = len(lines)
    last = 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError as exc:
            if number == torn and recording is not None:
                break  # a torn last line: the recording was cut there
            raise RecordingError(f"{path}:{number}: not JSON ({exc})") from None
        last = number
        kind = entry.get("kind") if isinstance(entry, dict) else None
        if recording is None:
            if kind != "header" or entry.get("format") != FORMAT:
                raise RecordingError(f"{path}:{number}: not a dsh recording (no {FORMAT} header line)")
            if entry.get("version") != VERSION:
                raise RecordingError(
                    f"{path}:{number}: recording version {entry.get('version')!r}; this dsh reads {VERSION}"
                )
            recording = Recording(entry)
        elif kind == "frame" and entry.get("dir") in ("in", "out"):
            recording.events.append(
                Event(entry["dir"], number, entry.get("frame"), entry.get("raw"), float(entry.get("t", 0.0)))
            )
        elif kind == "eof":
            recording.events.append(Event("eof", number, t=float(entry.get("t", 0.0))))
        elif kind == "session-file" and isinstance(entry.get("sessionId"), str):
            if not entry["sessionId"].replace("-", "").isalnum():
                raise RecordingError(f"{path}:{number}: session id {entry['sessionId'][:80]!r} is not a session id")
            recording.session_files.setdefault(entry["sessionId"], [str(line) for line in entry.get("lines", [])])
        elif kind in ("model-request", "model-chunk", "model-end"):
            recording.model_entries.append(entry)
        else:
            raise RecordingError(f"{path}:{number}: unknown entry {kind!r}")
    if recording is None:
        raise RecordingError(f"{path}: empty; a recording starts with a {FORMAT} header line")
    if torn is not None and last < torn:
        recording.cut = f"line {torn} is torn (the recording stopped in the middle of it); complete up to line {last}"
    elif not any(event.dir == "eof" for event in recording.events):
        recording.cut = f"it has no end of input (the daemon was killed, or the recording stopped) after line {last}"
    return recording


def script_of(recording: Recording) -> list[dict[str, Any]]:
    """The scripted model's steps that stream the recorded responses again, one step per model call, in order.

    A call that was aborted while it streamed (a cancel) becomes: the chunks that came before the abort, then
    nothing until the replayed request is aborted too, then the chunks that came after. A call whose stream
    raised raises the same message and code. A call the recording does not finish (the daemon died) waits for
    an abort."""
    steps: dict[int, dict[str, Any]] = {}
    ends: dict[int, dict[str, Any]] = {}
    for entry in recording.model_entries:
        n = int(entry["n"])
        step = steps.setdefault(n, {"chunks": [], "after": []})
        if entry["kind"] == "model-chunk":
            (step["after"] if entry.get("aborted") else step["chunks"]).append(entry["chunk"])
        elif entry["kind"] == "model-end":
            ends[n] = entry
    script: list[dict[str, Any]] = []
    for n in sorted(steps):
        step, end = steps[n], ends.get(n)
        built: dict[str, Any] = {"chunks": step["chunks"]}
        if end is None or end.get("aborted"):
            built["on_abort"] = step["after"]
        else:
            built["chunks"] = step["chunks"] + step["after"]
        if end is not None and end.get("end") == "error":
            error = end.get("error") or {}
            built["error"] = {"message": str(error.get("message") or "model error")}
            if isinstance(error.get("code"), str):
                built["error"]["code"] = error["code"]
        script.append(built)
    return script
