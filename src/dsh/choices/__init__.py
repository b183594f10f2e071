"""Each session's choices (model, mode, reasoning effort): core state that front ends render (see ``README.md``)."""

from dsh.choices._choices import ChoiceError, Choices, SessionChoices, choices_plugin, current_level

__all__ = [
    "ChoiceError",
    "Choices",
    "SessionChoices",
    "choices_plugin",
    "current_level",
]
