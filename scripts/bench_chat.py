"""``dsh chat`` start-up on a pseudo-terminal: how long until the first prompt line is drawn, and until the
session is ready (the status line names the model), on the offline ``echo`` model.

Runs the chat as a person would (``python -m dsh chat`` with its stdin, stdout and stderr on a pty), reads what
it draws, and prints the median and the spread over ``--runs`` starts, and the chat's own CPU time until its
prompt line (on a busy machine wall times mostly measure the wait for a core). With ``--short`` it runs twice (the
suite's smoke run). Not a test: it prints numbers.
"""

from __future__ import annotations

import argparse
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROMPT = "\u276f ".encode()
READY = b"echo \xc2\xb7"  # the status line: "echo · Default"


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time the process has used so far (Linux ``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_start(env: dict[str, str], cwd: str, deadline: float = 20.0) -> tuple[float, float, float]:
    leader, follower = os.openpty()
    os.set_blocking(leader, False)
    start = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "dsh", "chat"],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=env,
        cwd=cwd,
        start_new_session=True,
    )
    os.close(follower)
    seen = b""
    prompt_at = ready_at = None
    cpu_at = 0.0
    try:
        while ready_at is None and time.perf_counter() - start < deadline:
            select.select([leader], [], [], 0.01)
            try:
                seen += os.read(leader, 65536)
            except BlockingIOError:
                continue
            except OSError:
                break
            now = time.perf_counter() - start
            if prompt_at is None and PROMPT in seen:
                prompt_at = now
                cpu_at = _cpu_seconds(process.pid)
                os.write(leader, b"\x1b[1;1R")  # answer prompt_toolkit's cursor-position request, as a terminal does
            if prompt_at is not None and READY in seen:
                ready_at = now
    finally:
        os.write(leader, b"\x04")  # Ctrl+D: the chat exits
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        os.close(leader)
    if prompt_at is None or ready_at is None:
        raise SystemExit(f"the chat did not get there in {deadline} s; it drew:\n{seen[-2000:]!r}")
    return prompt_at, ready_at, cpu_at


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--short", action="store_true", help="two runs (the suite's smoke run)")
    args = parser.parse_args()
    runs = 2 if args.short else args.runs
    with tempfile.TemporaryDirectory() as home:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": home,
            "XDG_CONFIG_HOME": os.path.join(home, "config"),
            "DSH_DATA_DIR": os.path.join(home, "sessions"),
            "DSH_MODEL": "echo",
            "TERM": "xterm-256color",
            "LANG": "C.UTF-8",
        }
        if "PYTHONPATH" in os.environ:
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        samples = [one_start(env, home) for _ in range(runs)]
    prompts = [p * 1000 for p, _, _ in samples]
    readies = [r * 1000 for _, r, _ in samples]
    cpus = [c * 1000 for _, _, c in samples]
    print(f"dsh chat start-up on a pty, echo model, {runs} runs (median, min-max):")
    print(f"  first prompt line drawn: {statistics.median(prompts):.0f} ms ({min(prompts):.0f}-{max(prompts):.0f})")
    print(f"  session ready (status line): {statistics.median(readies):.0f} ms ({min(readies):.0f}-{max(readies):.0f})")
    print(
        f"  the chat's own CPU time until the prompt line: {statistics.median(cpus):.0f} ms "
        f"({min(cpus):.0f}-{max(cpus):.0f}; what the wall time is on an idle machine, the agent starting on the other core)"
    )


if __name__ == "__main__":
    main()
