"""``python -m dsh.sandbox``: confine this process, then exec a command — for commands an editor's terminal runs
(``terminal/create``), which dsh cannot fork itself.

    python -m dsh.sandbox --level read-only --tmp DIR --abi N --namespaces --no-network --root R -- bash -c CMD

Guarantees: the process applies exactly what a forked child gets (:mod:`._child`: namespaces, read-only binds,
Landlock built from the same rules), sets ``TMPDIR`` and the git environment (:func:`git_environment`), then execs
the command; if any step fails it prints one line on stderr and exits 126 without running the command. It must
be started single-threaded (a fresh interpreter is): user namespaces refuse a multi-threaded process.
"""

from __future__ import annotations

import argparse
import os
import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> None:
    from dsh.sandbox._child import confine_step
    from dsh.sandbox._config import SandboxConfig
    from dsh.sandbox._gitenv import git_environment
    from dsh.sandbox._sandbox import Sandbox
    from dsh.sandbox._support import Support

    parser = argparse.ArgumentParser(prog="python -m dsh.sandbox")
    parser.add_argument("--level", choices=("read-only", "workspace-write"), required=True)
    parser.add_argument("--tmp", required=True)
    parser.add_argument("--abi", type=int, required=True)
    parser.add_argument("--namespaces", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--network", action=argparse.BooleanOptionalAction, default=False)
    parser.add_argument("--root", action="append", default=[])
    arguments = list(sys.argv[1:] if argv is None else argv)
    if "--" not in arguments or arguments.index("--") == len(arguments) - 1:
        parser.error("no command to run: give it after --")
    split = arguments.index("--")
    options = parser.parse_args(arguments[:split])
    command = arguments[split + 1 :]
    try:
        machine = Support(True, options.abi, options.namespaces, "")
        sandbox = Sandbox(SandboxConfig(network=options.network), machine=machine)
        roots = tuple(options.root)
        ruleset = sandbox._ruleset(
            options.level, roots, options.tmp, network=options.network, namespaces=options.namespaces
        )
        plan = sandbox.child_plan(options.level, roots, ruleset, network=options.network, parent=os.getppid())
        env = git_environment(dict(os.environ), os.getcwd())
        env.update({"TMPDIR": options.tmp, "TMP": options.tmp, "TEMP": options.tmp})
        confine_step(plan)()
    except OSError as exc:
        sys.stderr.write(f"blocked by the sandbox: it could not be set up ({exc}); the command did not run\n")
        sys.exit(126)
    os.execvpe(command[0], command, env)
