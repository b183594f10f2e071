"""``DSH_PLUGINS``: extra plugins as ``module:attribute`` entries, loaded the same way by every command.

Every command that builds the application (``dsh acp``, ``dsh prompt``, and those other modules add) takes the
entries from :attr:`dsh.settings.Settings.plugins` and calls :func:`import_plugins` then :func:`apply_plugins`;
``dsh config check`` imports them to report a bad one. An entry without ``:attribute`` means ``module:plugin``.

Guarantees:

* A bad entry is a :class:`~dsh.settings.SettingError` (usage, exit status 2) whose message is one line naming
  the entry and what was wrong: the module cannot be imported (and why), it has no such attribute, the attribute
  is not a plugin (a plugin is callable as ``plugin(ctx, config)``; ``os:path`` is a module), or its set-up
  raised. Never a traceback, never an ``ExceptionGroup``, never silence.
* Importing is a separate step so that the daemon can do it after it owns stdout (an import may print).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from dsh.settings import SettingError

if TYPE_CHECKING:
    from dsh.kernel import Context, Plugin

__all__ = ["ExtraPlugin", "apply_plugins", "import_plugins"]

SOURCE = "DSH_PLUGINS"


class ExtraPlugin:
    """One imported entry: the text the user wrote and the plugin it names."""

    __slots__ = ("entry", "plugin")

    def __init__(self, entry: str, plugin: Plugin) -> None:
        self.entry = entry
        self.plugin = plugin


def _fail(entry: str, problem: str) -> SettingError:
    return SettingError(f"{SOURCE}: {entry!r}: {problem}")


def _describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def import_plugins(entries: Sequence[str]) -> list[ExtraPlugin]:
    """Import every entry; the first bad one raises :class:`~dsh.settings.SettingError` (status 2)."""
    import importlib

    loaded: list[ExtraPlugin] = []
    for entry in entries:
        module_name, _, attribute = entry.partition(":")
        module_name, attribute = module_name.strip(), attribute.strip() or "plugin"
        if not module_name:
            raise _fail(entry, "no module named; write module:attribute")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and module_name.startswith(exc.name):
                raise _fail(entry, f"there is no module {exc.name!r} (is it installed, or on PYTHONPATH?)") from None
            raise _fail(entry, f"importing {module_name!r} failed: {_describe(exc)}") from None
        except Exception as exc:  # a module that raises on import: its own error, in one line
            raise _fail(entry, f"importing {module_name!r} failed: {_describe(exc)}") from None
        try:
            found: Any = getattr(module, attribute)
        except AttributeError:
            raise _fail(entry, f"module {module_name!r} has no attribute {attribute!r}") from None
        if not callable(found):
            kind = "a module" if type(found).__name__ == "module" else f"a {type(found).__name__}"
            raise _fail(entry, f"{module_name}.{attribute} is {kind}, not a plugin (a function plugin(ctx, config))")
        loaded.append(ExtraPlugin(entry, found))
    return loaded


def apply_plugins(ctx: Context, plugins: Sequence[ExtraPlugin]) -> None:
    """Load each plugin into *ctx* (``ctx.plugin``); a set-up that raises is a
    :class:`~dsh.settings.SettingError` naming the entry (the application must not start half-made)."""
    for extra in plugins:
        try:
            ctx.plugin(extra.plugin)
        except Exception as exc:
            raise _fail(extra.entry, f"its set-up failed: {_describe(exc)}") from None
