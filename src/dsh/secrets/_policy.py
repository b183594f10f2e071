"""What the processes dsh starts for tools must not see, and what must never be stored or sent: the policy.

A :class:`SecretPolicy` is built from the providers dsh knows (the built-ins merged with the configured ones) and
the ``secrets`` section of the configuration file. It is pure data: the environment is passed in (or read from
``os.environ`` at call time by :func:`child_environment`), so a key exported after start-up is still withheld.

Rules, for each variable ``NAME=value`` of the daemon's environment (the first that applies wins):

1. ``NAME`` is in ``pass_through``: kept (the user asked for it).
2. ``NAME`` is the ``api_key_env`` of a built-in or configured provider (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``,
   ``DEEPSEEK_API_KEY``, …): withheld, whether or not that provider is used.
3. ``NAME`` starts with ``DSH_`` and contains a secret word (``KEY``, ``TOKEN``, ``SECRET``, ``PASSWORD``,
   ``PASSWD``, ``CREDENTIAL``, ``AUTH``): withheld.
4. ``NAME`` matches a name or shell-style pattern of ``remove`` (``fnmatch``, case-sensitive): withheld.
5. ``value`` is a secret dsh holds (the value of a rule-2 variable, an inline ``api_key`` or a secret-looking
   header of a provider in the file) and is at least :data:`MIN_SECRET_LENGTH` characters: withheld under any
   name (``MY_KEY=$OPENAI_API_KEY``).

Everything else is kept: generic spellings such as ``GITHUB_TOKEN`` or ``AWS_SECRET_ACCESS_KEY`` belong to the
tools the user runs, not to dsh (``remove: ["*_API_KEY"]`` opts into more).

Redaction (:meth:`SecretPolicy.secret_values`): the values of every withheld variable, every provider key in the
environment (even one passed through) and every inline secret of the file, when at least
:data:`MIN_SECRET_LENGTH` characters long (a shorter value would mask ordinary words); each also in hex and base64,
and cut (its first or last :data:`MIN_PARTIAL_LENGTH` or more characters) as an output budget leaves it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dsh.providers import ProviderSettings

__all__ = [
    "DSH_SECRET_WORDS",
    "MIN_PARTIAL_LENGTH",
    "MIN_SECRET_LENGTH",
    "SecretPolicy",
    "child_environment",
    "current_policy",
    "default_policy",
    "policy_in_force",
    "redact_json",
    "redact_text",
]

MIN_SECRET_LENGTH = 8
"""Values shorter than this are neither matched by value nor redacted (``1`` or ``true`` are not secrets)."""
DSH_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")
"""A ``DSH_*`` variable whose name contains one of these carries a secret."""
_SECRET_HEADER_WORDS = ("auth", "key", "token", "secret", "password", "cookie", "session", "signature", "credential")
REDACTED = "[redacted {}]"
"""What replaces a secret value in tool output: the variable's name (never secret) or ``api_key``."""


@dataclass(frozen=True, slots=True)
class SecretPolicy:
    """Which variables children do not see, and which values are redacted (see the module docstring)."""

    key_variables: frozenset[str] = frozenset()
    """The ``api_key_env`` of every provider dsh knows."""
    inline_secrets: tuple[tuple[str, str], ...] = ()
    """``(label, value)`` of secrets the configuration file holds itself (inline ``api_key``, secret headers)."""
    remove: tuple[str, ...] = ()
    pass_through: frozenset[str] = frozenset()
    redact_prompts: bool = True
    """The session file stores the user's prompts redacted (``secrets.redact_prompts``)."""

    @classmethod
    def build(
        cls,
        providers: Mapping[str, ProviderSettings] | None = None,
        *,
        remove: Iterable[str] = (),
        pass_through: Iterable[str] = (),
        redact_prompts: bool = True,
    ) -> SecretPolicy:
        """The policy for *providers* (merged over the built-ins) and the ``secrets`` section's lists."""
        from dsh.providers import merge_providers

        merged = merge_providers(dict(providers) if providers is not None else None)
        variables = {settings.api_key_env for settings in merged.values() if settings.api_key_env}
        inline: list[tuple[str, str]] = []
        for name, settings in merged.items():
            if settings.api_key is not None and settings.api_key.get_secret_value():
                inline.append((f"providers.{name}.api_key", settings.api_key.get_secret_value()))
            for header, value in settings.headers.items():
                if value and any(word in header.lower() for word in _SECRET_HEADER_WORDS):
                    inline.append((f"providers.{name}.headers.{header}", value))
        return cls(frozenset(variables), tuple(inline), tuple(remove), frozenset(pass_through), redact_prompts)

    def _held_values(self, env: Mapping[str, str]) -> dict[str, str]:
        """Secret value → label, for the values dsh itself holds (provider keys in *env*, inline secrets)."""
        held: dict[str, str] = {}
        for label, value in self.inline_secrets:
            if len(value) >= MIN_SECRET_LENGTH:
                held.setdefault(value, label)
        for name in sorted(self.key_variables):
            key = env.get(name)
            if key is not None and len(key) >= MIN_SECRET_LENGTH:
                held.setdefault(key, name)
        return held

    def withholds(self, name: str, value: str, held: Mapping[str, str]) -> bool:
        """Whether ``name=value`` is kept from children; *held* is :meth:`_held_values` of the environment."""
        if name in self.pass_through:
            return False
        if name in self.key_variables:
            return True
        if name.startswith("DSH_") and any(word in name.upper() for word in DSH_SECRET_WORDS):
            return True
        if any(fnmatchcase(name, pattern) for pattern in self.remove):
            return True
        return value in held

    def withheld(self, env: Mapping[str, str]) -> list[str]:
        """The names of *env* that children do not see, sorted (names only: never log or show a value)."""
        held = self._held_values(env)
        return sorted(name for name, value in env.items() if self.withholds(name, value, held))

    def child_environment(self, env: Mapping[str, str]) -> dict[str, str]:
        """*env* without the withheld variables (a new dict; *env* is not changed)."""
        held = self._held_values(env)
        return {name: value for name, value in env.items() if not self.withholds(name, value, held)}

    def secret_values(self, env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
        """``(value, label)`` of every value to redact, longest first (a key that contains another is replaced
        whole)."""
        held = self._held_values(env)
        values = dict(held)
        for name, value in env.items():
            if len(value) >= MIN_SECRET_LENGTH and value not in values and self.withholds(name, value, held):
                values[value] = name
        return tuple(sorted(values.items(), key=lambda item: (-len(item[0]), item[1])))

    def redactor(self, env: Mapping[str, str] | None = None) -> Callable[[str], str]:
        """A function replacing every secret value in a text with ``[redacted NAME]`` (*env*: ``os.environ``
        now): the value as it is, its hex (either case) and base64 (standard and URL-safe, at each of the three
        alignments it can have inside a longer encoded text), and a piece of :data:`MIN_PARTIAL_LENGTH` or more
        characters that starts or ends any of those forms (a key cut by an output budget or a line wrap)."""
        return _Redactor(self.secret_values(os.environ if env is None else env))


MIN_PARTIAL_LENGTH = 16
"""A secret's first or last this many characters (or more), on their own, are redacted too: what an output
budget or a wrapped line leaves of a key still gives most of it away, and 16 characters of a key (or of its
hex or base64) never occur by chance."""


def _forms(value: str) -> list[str]:
    """The spellings of *value* to redact: itself, hex, and the stable core of its base64 at each alignment."""
    import base64

    data = value.encode("utf-8")
    forms = [value, data.hex(), data.hex().upper()]
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + data).decode("ascii")
        start = -(-8 * offset // 6)  # the first character made only of the value's bits
        stop = (8 * (offset + len(data))) // 6  # characters after this one share bits with what follows
        core = encoded[start:stop]
        if len(core) >= MIN_SECRET_LENGTH:
            forms.append(core)
            urlsafe = core.replace("+", "-").replace("/", "_")
            if urlsafe != core:
                forms.append(urlsafe)
    return forms


class _Redactor:
    """Replace whole secrets (every form) and their cut pieces; see :meth:`SecretPolicy.redactor`."""

    __slots__ = ("_probes",)

    def __init__(self, values: tuple[tuple[str, str], ...]) -> None:
        probes: list[tuple[str, str]] = []
        for value, label in values:
            probes.extend((form, label) for form in _forms(value))
        self._probes = tuple(probes)

    def _spans(self, text: str) -> list[tuple[int, int, str]]:
        spans: list[tuple[int, int, str]] = []
        for form, label in self._probes:
            if len(form) < MIN_PARTIAL_LENGTH:
                start = text.find(form)
                while start != -1:
                    spans.append((start, start + len(form), label))
                    start = text.find(form, start + len(form))
                continue
            head, tail = form[:MIN_PARTIAL_LENGTH], form[-MIN_PARTIAL_LENGTH:]
            start = text.find(head)
            while start != -1:  # the form's start, as far as it goes on
                end = start + MIN_PARTIAL_LENGTH
                while end < len(text) and end - start < len(form) and text[end] == form[end - start]:
                    end += 1
                spans.append((start, end, label))
                start = text.find(head, end)
            end = text.find(tail)
            while end != -1:  # the form's end, as far back as it goes
                stop = end + MIN_PARTIAL_LENGTH
                start = end
                while (
                    start > 0 and stop - start < len(form) and text[start - 1] == form[len(form) - (stop - start) - 1]
                ):
                    start -= 1
                spans.append((start, stop, label))
                end = text.find(tail, stop)
        return spans

    def __call__(self, text: str) -> str:
        if not self._probes or not text:
            return text
        spans = self._spans(text)
        if not spans:
            return text
        spans.sort()
        merged: list[list[Any]] = []
        for start, end, label in spans:
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end, label])
        pieces: list[str] = []
        position = 0
        for start, end, label in merged:
            pieces.append(text[position:start])
            pieces.append(REDACTED.format(label))
            position = end
        pieces.append(text[position:])
        return "".join(pieces)


_default: SecretPolicy | None = None
"""The built-in providers' policy, built once (an immutable value: not state)."""
_in_force: ContextVar[SecretPolicy | None] = ContextVar("dsh_secret_policy", default=None)
"""The policy of the application whose tool call the running task serves (:func:`policy_in_force`)."""


def default_policy() -> SecretPolicy:
    """The policy for the built-in providers with an empty ``secrets`` section: safe by default."""
    global _default
    if _default is None:
        _default = SecretPolicy.build()
    return _default


def current_policy() -> SecretPolicy:
    """The policy in force for the running task: its application's (the ``secrets`` plugin's ``secret_policy``
    service, set around every tool call by :func:`policy_in_force`), else :func:`default_policy`.

    There is no process-wide policy (RFC 0027 §4f): two applications in one process each have their own, and a
    caller outside a tool call that knows its application passes ``ctx.get("secret_policy")`` explicitly."""
    return _in_force.get() or default_policy()


@contextlib.contextmanager
def policy_in_force(policy: SecretPolicy | None) -> Iterator[None]:
    """Make *policy* the :func:`current_policy` of this block (and of the tasks it starts); None leaves the
    current one."""
    if policy is None:
        yield
        return
    token = _in_force.set(policy)
    try:
        yield
    finally:
        _in_force.reset(token)


def child_environment(policy: SecretPolicy | None = None) -> dict[str, str]:
    """The environment for a process dsh starts for a tool (a command, an MCP server, a hook): the daemon's
    environment now, minus every variable *policy* (default: :func:`current_policy`) withholds, plus the session
    tag of the running task (:func:`dsh.reaper.tag_environment`: what lets dsh find the child's descendants when
    the session ends). Pass it whole as the child's ``env``."""
    from dsh.reaper import tag_environment

    chosen = policy if policy is not None else current_policy()
    return {**chosen.child_environment(os.environ), **tag_environment()}


def redact_text(text: str, policy: SecretPolicy | None = None) -> str:
    """*text* with every secret value of *policy* (default: :func:`current_policy`) replaced (see
    :meth:`SecretPolicy.redactor`)."""
    return (policy if policy is not None else current_policy()).redactor()(text)


def redact_json(value: Any, redact: Callable[[str], str]) -> Any:
    """A copy of the JSON *value* with *redact* applied to every string (keys included)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact(k) if isinstance(k, str) else k: redact_json(v, redact) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_json(item, redact) for item in value]
    return value
