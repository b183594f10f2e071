"""An OS sandbox for the commands dsh runs (RFC 0028; see ``README.md``).

* :func:`sandbox_plugin` (loaded by :func:`dsh.app.load_core`) provides the ``sandbox`` service
  (:class:`Sandbox`): the level of each command call (:meth:`Sandbox.judge`, :meth:`Sandbox.contain`, called by
  the tool pipeline), the per-session private temporary directory and Landlock rulesets.
* :func:`active`: the :class:`Containment` of the call running in this task; the process spawn asks it for a
  :class:`SpawnPlan` (environment and the child's confinement step).
* :func:`git_environment`: the environment that keeps git from running programs the repository configured.
* :func:`support`: what this machine offers (Landlock ABI, namespaces), probed once.

Importing this package is cheap: nothing is probed and no ruleset is built until a command needs one.
"""

from dsh.sandbox._config import SandboxConfig
from dsh.sandbox._gitenv import git_environment
from dsh.sandbox._plugin import sandbox_command_plugin, sandbox_plugin
from dsh.sandbox._sandbox import FORCE_NO_ASK_ENV, Containment, Judgement, Level, Sandbox, SpawnPlan, active
from dsh.sandbox._support import support

__all__ = [
    "FORCE_NO_ASK_ENV",
    "Containment",
    "Judgement",
    "Level",
    "Sandbox",
    "SandboxConfig",
    "SpawnPlan",
    "active",
    "git_environment",
    "sandbox_command_plugin",
    "sandbox_plugin",
    "support",
]
