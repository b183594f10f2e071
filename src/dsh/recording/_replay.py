"""``dsh replay FILE``: re-drive a fresh daemon from a recording and compare what it sends with what it sent.

How, and what it guarantees:

* The daemon is ``python -m dsh acp`` with the recorded model (and picker), a fresh data directory, and
  ``--replay-models`` pointing at the recorded model responses rebuilt as a scripted model's steps: no provider
  is called, no key is needed.
* The recorded client frames are sent in their order, each once the replayed daemon has sent as many frames as
  the recorded one had when the client sent it (so a cancel lands mid-reply as it did, and an answer to a
  permission request follows the request); the client's answers to the daemon's requests are sent with the
  ids of the replayed requests. The end of the recorded input closes the daemon's stdin.
* Each frame the daemon sends must equal (:mod:`dsh.recording._compare`) one of the next few recorded frames
  not yet matched (frames of independent tasks may interleave differently); the first that equals none, a
  recorded frame that does not come within *timeout*, or a frame after the last recorded one, is the
  divergence: the report names it, the client frame it followed and the recording's line, with a diff.
* A recording that was cut (:attr:`~dsh.recording._format.Recording.cut`) is replayed up to its cut: every
  recorded frame must still come as recorded, and what the daemon sends after the last recorded one (the rest of
  a turn the recorded daemon never finished) is not compared; the report says where the recording stopped.
* ``update``: every frame is taken as it comes and the recording is rewritten with what the daemon sent now
  (in the recording's names), the client frames and model responses unchanged.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from dsh.jsonrpc import Oversized, read_lines
from dsh.recording._compare import Pairing, describe, diff, equal
from dsh.recording._format import Event, Recording, script_of

__all__ = ["ReplayResult", "replay"]

WINDOW = 8
"""How many not-yet-matched recorded frames a replayed frame may be matched against (reordering tolerance)."""
EXIT_GRACE = 5.0


@dataclass
class ReplayResult:
    ok: bool
    report: str
    sent: int = 0
    """Client frames sent."""
    matched: int = 0
    """Recorded daemon frames matched."""
    frames: list[Any] = field(default_factory=list)
    """What the replayed daemon sent, in the recording's names."""
    timeline: list[tuple[str, Any]] = field(default_factory=list)
    """(``in`` | ``out`` | ``eof``, frame) in the order they happened in the replay (``--update`` writes it)."""
    stderr: str = ""


class _Divergence(Exception):
    pass


class _Run:
    def __init__(self, recording: Recording, pairing: Pairing, *, timeout: float, update: bool) -> None:
        self.recording = recording
        self.expected = recording.outgoing
        self.pending = list(range(len(self.expected)))
        self.pairing = pairing
        self.timeout = timeout
        self.update = update
        self.got: list[Any] = []
        self.arrived = anyio.Event()
        self.ended = False
        self.divergence: str | None = None
        self.last_in: Event | None = None
        self.timeline: list[tuple[str, Any]] = []
        self.beyond = 0
        """Frames the daemon sent after the last recorded one of a cut recording (not compared)."""

    def context(self) -> str:
        if self.last_in is None:
            return "before the client sent anything"
        return f"after client frame {describe(self.last_in.frame)} (recording line {self.last_in.line})"

    @property
    def stopped(self) -> bool:
        """A divergence ends the replay (with ``update`` nothing does: every frame is taken)."""
        return self.divergence is not None and not self.update

    def diverge(self, report: str) -> None:
        if self.divergence is None:
            self.divergence = report

    def take(self, frame: Any) -> None:
        self.got.append(frame)
        self.timeline.append(("out", frame))
        number = len(self.got)
        for index in self.pending[:WINDOW]:
            trial = self.pairing.copy()
            if equal(self.expected[index].frame, frame, trial):
                self.pairing.ids, self.pairing.requests = trial.ids, trial.requests
                self.pending.remove(index)
                break
        else:
            if not self.pending and self.recording.cut is not None:
                self.beyond += 1  # past the cut: the recorded daemon never got that far
            elif not self.pending:
                self.diverge(
                    f"the daemon sent frame {number} ({describe(frame)}), {self.context()}, "
                    f"but the recording has no more frames:\n{json.dumps(self.pairing.to_recorded(frame))[:2000]}"
                )
            else:
                wanted = self.expected[self.pending[0]]
                self.diverge(
                    f"frame {number} differs: expected {describe(wanted.frame)} (recording line {wanted.line}), "
                    f"got {describe(frame)}, {self.context()}\n{diff(wanted.frame, frame, self.pairing)}"
                )
        self.arrived.set()
        self.arrived = anyio.Event()

    async def wait_for(self, count: int) -> None:
        """Until the daemon sent *count* frames: a divergence if it does not within the timeout (with
        ``update``: until it is quiet for the timeout)."""
        while len(self.got) < count and not self.stopped and not self.ended:
            with anyio.move_on_after(self.timeout) as scope:
                await self.arrived.wait()
            if scope.cancelled_caught:
                if not self.update:
                    wanted = self.expected[self.pending[0]] if self.pending else None
                    name = describe(wanted.frame) if wanted is not None else "a frame"
                    line = f" (recording line {wanted.line})" if wanted is not None else ""
                    self.diverge(
                        f"the daemon did not send {name}{line} within {self.timeout:g} s, {self.context()}: "
                        f"it sent {len(self.got)} frames, the recording has {len(self.expected)}"
                    )
                return
        if self.ended and len(self.got) < count and self.divergence is None and not self.update:
            wanted = self.expected[self.pending[0]] if self.pending else None
            self.diverge(
                f"the daemon closed its output before sending {describe(wanted.frame) if wanted else 'a frame'}"
                f"{f' (recording line {wanted.line})' if wanted else ''}, {self.context()}"
            )

    def client_frame(self, event: Event) -> bytes:
        """The recorded client frame *event* as the replayed daemon must get it."""
        if event.frame is None:
            return (event.raw or "").encode()
        frame = self.pairing.to_replayed(event.frame)
        if isinstance(frame, dict) and "method" not in frame and "id" in frame:
            frame["id"] = self.pairing.requests.get(event.frame.get("id"), frame["id"])
        return json.dumps(frame, ensure_ascii=False, separators=(",", ":")).encode()


async def _read(stdout: Any, run: _Run) -> None:
    try:
        async for line in read_lines(stdout):
            if isinstance(line, Oversized):  # never a recorded frame: the divergence names it
                frame: Any = {"oversized": line.size}
            else:
                try:
                    frame = json.loads(line)
                except ValueError:
                    frame = {"notJson": line.decode("utf-8", errors="replace")}
            run.take(frame)
    finally:
        run.ended = True
        run.arrived.set()


def _command(recording: Recording, script: Path, data_dir: Path, config: str | None) -> list[str]:
    header = recording.header
    command = [sys.executable, "-m", "dsh", "acp", "--replay-models", str(script), "--data-dir", str(data_dir)]
    if isinstance(header.get("model"), str):
        command += ["--model", header["model"]]
    if header.get("agentEvents"):
        command.append("--agent-events")
    if config is not None:
        command += ["--config", config]
    return command


def recorded_cwd(recording: Recording) -> str | None:
    """The working directory the recorded client gave its first session (else the daemon's own)."""
    for event in recording.events:
        params = event.frame.get("params") if event.dir == "in" and isinstance(event.frame, dict) else None
        if isinstance(params, dict) and isinstance(params.get("cwd"), str):
            return str(params["cwd"])
    cwd = recording.header.get("cwd")
    return cwd if isinstance(cwd, str) else None


def _prepare(
    recording: Recording, root: Path, cwd: str | None, config: str | None
) -> tuple[list[str], str, dict[str, str]]:
    """Write the model's steps under *root*; return the daemon's command, its working directory, and the
    paths the replay uses for the recording's (replay → recorded)."""
    header = recording.header
    steps = root / "steps.json"
    steps.write_text(json.dumps(script_of(recording)), encoding="utf-8")
    script = root / "model.json"
    models = [header.get("model"), *header.get("models", [])]
    script.write_text(json.dumps({"script": str(steps), "models": [m for m in models if isinstance(m, str)]}))
    data_dir = root / "data"
    data_dir.mkdir()
    for session_id, lines in recording.session_files.items():  # stored sessions the client loaded, as they were
        (data_dir / f"{session_id}.jsonl").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    paths: dict[str, str] = {}
    if isinstance(header.get("dataDir"), str):
        paths[str(data_dir)] = header["dataDir"]
    if isinstance(header.get("python"), str):  # the interpreter a command line names (a sandboxed terminal's)
        paths[sys.executable] = header["python"]
    theirs = recorded_cwd(recording)
    if cwd is not None and theirs is not None:
        paths[cwd] = theirs
        paths[os.path.realpath(cwd)] = theirs
    own = header.get("cwd")
    workdir = cwd or (own if isinstance(own, str) and os.path.isdir(own) else str(root))
    return _command(recording, script, data_dir, config), workdir, paths


async def replay(
    recording: Recording,
    *,
    cwd: str | None = None,
    frame_timeout: float = 10.0,
    update: bool = False,
    config: str | None = None,
    env: dict[str, str] | None = None,
) -> ReplayResult:
    """Replay *recording* (see the module docstring). *cwd*: the directory that stands for the recorded
    working directory (default: the recorded one); *frame_timeout*: how long to wait for each recorded frame; *config*: the configuration file the daemon loads."""
    with tempfile.TemporaryDirectory(prefix="dsh-replay-") as scratch:
        root = Path(scratch)
        command, workdir, paths = _prepare(recording, root, cwd, config)
        environment = dict(os.environ if env is None else env)
        environment.pop("DSH_RECORD", None)
        run = _Run(recording, Pairing(paths), timeout=frame_timeout, update=update)
        stderr_path = root / "stderr.log"
        with stderr_path.open("wb") as stderr:
            process = await anyio.open_process(
                command,
                stdin=-1,
                stdout=-1,
                stderr=stderr,
                cwd=workdir,
                env=environment,
            )
        result = ReplayResult(False, "")
        async with process, anyio.create_task_group() as group:
            assert process.stdin is not None and process.stdout is not None
            group.start_soon(_read, process.stdout, run)
            before = 0
            try:
                for event in recording.events:
                    if event.dir == "out":
                        before += 1
                        continue
                    await run.wait_for(before)
                    if run.stopped:
                        break
                    if event.dir == "eof":
                        run.timeline.append(("eof", None))
                        await process.stdin.aclose()
                        continue
                    run.timeline.append(("in", event.frame if event.frame is not None else event.raw))
                    await process.stdin.send(run.client_frame(event) + b"\n")
                    run.last_in = event
                    result.sent += 1
                if not run.stopped:
                    await run.wait_for(len(run.expected))
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                run.diverge(f"the daemon stopped reading its input, {run.context()}")
            finally:
                if not any(kind == "eof" for kind, _ in run.timeline):
                    await process.stdin.aclose()
                with anyio.move_on_after(EXIT_GRACE):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
                    run.diverge(f"the daemon did not exit within {EXIT_GRACE:g} s of the end of its input")
                with anyio.move_on_after(EXIT_GRACE):
                    while not run.ended:
                        await run.arrived.wait()
                group.cancel_scope.cancel()
        if run.divergence is None and run.pending and not update:
            wanted = run.expected[run.pending[0]]
            run.diverge(f"the daemon never sent {describe(wanted.frame)} (recording line {wanted.line})")
        if process.returncode not in (0, None) and run.divergence is None:
            run.diverge(f"the daemon exited with status {process.returncode}")
        result.stderr = stderr_path.read_text(encoding="utf-8", errors="replace")
    result.matched = len(run.expected) - len(run.pending)
    result.frames = [run.pairing.to_recorded(frame) for frame in run.got]
    result.timeline = [
        (kind, run.pairing.to_recorded(value) if kind == "out" else value) for kind, value in run.timeline
    ]
    if update:
        result.ok, result.report = True, f"{len(run.got)} daemon frames taken ({result.matched} as recorded)"
        return result
    if run.divergence is not None:
        result.report = run.divergence
        return result
    result.ok = True
    result.report = f"replayed: {result.sent} client frames, {len(run.got) - run.beyond} daemon frames as recorded"
    if recording.cut is not None:
        result.report += (
            f"; the recording stops early: {recording.cut}, so the replay stopped there"
            f" ({run.beyond} later daemon frames not compared)"
        )
    return result
