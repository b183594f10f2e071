"""A plugin that writes to stdout on every channel a careless tool or library could use.

Loaded into the daemon with ``DSH_PLUGINS=noisy_plugin:plugin`` and ``PYTHONPATH=tests/acp`` (see
``test_stdout_purity.py``). It is noisy at import, at apply time, and in its ``noisy`` tool: ``print``,
``sys.stdout.write``, ``sys.__stdout__``, a raw ``os.write(1, ...)``, a Python warning, a stdlib logger with the
root handler, a "chatty library" logger with its own handler on ``sys.stdout``, and a child process that inherits
fd 1. Every message contains ``noise`` and names its channel, so the test can find each one on stderr.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import warnings
from typing import TYPE_CHECKING

from pydantic import BaseModel

from dsh.kernel import plugin as dsh_plugin
from dsh.services.tools import ToolExecution, define_tool

if TYPE_CHECKING:
    from dsh.kernel import Context

__all__ = ["CHANNELS", "SETUP_CHANNELS", "plugin"]

CHANNELS = (
    "noise: print",
    "noise: sys.stdout.write",
    "noise: sys.__stdout__",
    "raw noise",
    "noise: warnings.warn",
    "noise: stdlib logger",
    "noise: chatty library",
    "child noise",
)
"""What the tool writes (each on its own channel); all of it must end up on stderr."""
SETUP_CHANNELS = ("noisy_plugin: import noise", "noisy_plugin: raw import noise", "noisy_plugin: apply noise")

print("noisy_plugin: import noise")
os.write(1, b"noisy_plugin: raw import noise\n")


class NoisyArgs(BaseModel):
    """No arguments."""


def _make_noise() -> None:
    print("noise: print")
    sys.stdout.write("noise: sys.stdout.write\n")
    sys.stdout.flush()
    if sys.__stdout__ is not None:
        sys.__stdout__.write("noise: sys.__stdout__\n")
        sys.__stdout__.flush()
    os.write(1, b"raw noise\n")
    warnings.warn("noise: warnings.warn", UserWarning, stacklevel=1)
    logging.getLogger("noisy.library").warning("noise: stdlib logger")
    chatty = logging.getLogger("noisy.chatty")
    if not chatty.handlers:
        chatty.addHandler(logging.StreamHandler(sys.stdout))
    chatty.warning("noise: chatty library")
    subprocess.run(["echo", "child noise"], check=True)


async def noisy(args: NoisyArgs, execution: ToolExecution) -> str:
    _make_noise()
    return "made some noise"


@dsh_plugin("noisy", inject=("tools",))
def plugin(ctx: Context, config: object) -> None:
    print("noisy_plugin: apply noise")
    ctx.tools.register(define_tool("noisy", "Make noise on every output channel.", NoisyArgs, noisy))
