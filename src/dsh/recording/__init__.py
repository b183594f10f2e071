"""Recordings of daemon runs and their exact replays: ``dsh acp --record FILE`` and ``dsh replay FILE``.

* :class:`Recorder` writes a recording (every frame both ways, every model response as the adapter streamed it,
  secrets redacted); :func:`recording_plugin` records the model side.
* :func:`read_recording` and :func:`script_of` read one and rebuild its model responses as scripted-model steps;
  :func:`replay_models_plugin` serves them to a replayed daemon; :func:`replay` drives that daemon and compares.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dsh.recording._recorder import Recorder

if TYPE_CHECKING:
    from dsh.recording._cli import run_replay
    from dsh.recording._plugin import recording_plugin
    from dsh.recording._replay_plugin import replay_models_plugin

__all__ = [
    "Recorder",
    "recording_plugin",
    "replay_models_plugin",
    "run_replay",
]

_LAZY = {
    "run_replay": "dsh.recording._cli",
    "recording_plugin": "dsh.recording._plugin",
    "replay_models_plugin": "dsh.recording._replay_plugin",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dsh.recording' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
