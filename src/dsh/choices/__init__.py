"""Each session's choices (model, mode, reasoning effort): core state that front ends render (see ``README.md``)."""

from dsh.choices._choices import (
    CHOICE_EVENT,
    ChoiceError,
    Choices,
    SessionChoices,
    choices_from_log,
    choices_plugin,
    current_level,
)

__all__ = [
    "CHOICE_EVENT",
    "ChoiceError",
    "Choices",
    "SessionChoices",
    "choices_from_log",
    "choices_plugin",
    "current_level",
]
