"""Issue #11: logs on a terminal are human-readable (structlog's console renderer); anywhere else JSON lines."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys

from tests.support.env import SRC

CODE = (
    "from dsh._log import configure_logging, get_logger; import logging;"
    "configure_logging('info'); get_logger('dsh.test').info('hello there', key=1);"
    "logging.getLogger('third.party').warning('from stdlib')"
)


def run(stderr: int) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.run([sys.executable, "-c", CODE], stderr=stderr, stdout=subprocess.PIPE, env=env, timeout=30)


def test_a_terminal_gets_readable_lines() -> None:
    controller, terminal = pty.openpty()
    try:
        done = run(terminal)
        os.close(terminal)
        terminal = -1
        output = b""
        while True:
            try:
                chunk = os.read(controller, 4096)
            except OSError:  # EIO: the other side is closed and drained
                break
            if not chunk:
                break
            output += chunk
    finally:
        if terminal >= 0:
            os.close(terminal)
        os.close(controller)
    assert done.returncode == 0 and done.stdout == b""
    text = output.decode()
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 2, text
    assert "hello there" in lines[0] and "key" in lines[0] and "info" in lines[0]
    assert "from stdlib" in lines[1] and "WARNING" in lines[1]
    for line in lines:
        assert not line.lstrip().startswith("{"), line


def test_a_pipe_gets_json_lines() -> None:
    done = run(subprocess.PIPE)
    assert done.returncode == 0 and done.stdout == b""
    entries = [json.loads(line) for line in done.stderr.decode().splitlines()]
    assert entries[0]["event"] == "hello there" and entries[0]["key"] == 1 and entries[0]["level"] == "info"
    assert entries[1]["event"] == "from stdlib" and entries[1]["level"] == "warning"
