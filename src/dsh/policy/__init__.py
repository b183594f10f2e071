"""One tool call pipeline and one permission policy for every front end (RFC 0017; see ``README.md``).

* :func:`policy_plugin` (loaded by :func:`dsh.app.load_core`) provides ``ctx.policy`` (:class:`Policies`: each
  session's :class:`SessionPolicy`, its mode and rules) and fills the ``prepare``, ``decide`` and ``ask`` stages
  of the tool call pipeline (the stages and their order: :data:`dsh.services.tools.STAGES`, RFC 0027).
* :func:`approve` / ``user/approve``: how the pipeline, or any package, asks the user; front ends implement it.
* :data:`MODES`: the modes, defined once (ids, names, descriptions for the user, text for the model).
* :func:`split_command` (:func:`split_command_async` off the event loop), :func:`is_read_only`,
  :func:`command_paths`: shell commands read conservatively, the read-only allow-list, the paths a command reads;
  :func:`escape_control`: a command as a person must be shown it.

Importing this package is cheap: the bash grammar loads on the first command checked.
"""

from dsh.policy._approval import ALLOW_ALWAYS, ALLOW_ONCE, REJECT_ONCE, Approval, ApprovalOption, Verdict, approve
from dsh.policy._config import PermissionsConfig, policy_config, unattended_policy
from dsh.policy._modes import MODE_IDS, MODES, Mode
from dsh.policy._pipeline import REFUSED_CODE, amend_decision, refusal_of
from dsh.policy._plugin import Policies, PolicyConfig, policy_plugin
from dsh.policy._rules import CallFacts, Decision, Rule, SessionPolicy, parse_pattern
from dsh.policy._shell import ShellSplit, escape_control, is_read_only, split_command, split_command_async

__all__ = [
    "ALLOW_ALWAYS",
    "ALLOW_ONCE",
    "MODES",
    "MODE_IDS",
    "REFUSED_CODE",
    "REJECT_ONCE",
    "Approval",
    "ApprovalOption",
    "CallFacts",
    "Decision",
    "Mode",
    "PermissionsConfig",
    "Policies",
    "PolicyConfig",
    "Rule",
    "SessionPolicy",
    "ShellSplit",
    "Verdict",
    "amend_decision",
    "approve",
    "escape_control",
    "is_read_only",
    "parse_pattern",
    "policy_config",
    "policy_plugin",
    "refusal_of",
    "split_command",
    "split_command_async",
    "unattended_policy",
]
