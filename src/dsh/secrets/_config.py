"""The ``secrets`` section of the configuration file (referenced from :class:`dsh.config.DshConfig`)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["SecretsConfig"]


class SecretsConfig(BaseModel):
    """What the processes dsh starts for tools see of its environment, beyond the default rules (provider keys
    and secret-looking ``DSH_*`` variables are withheld; see :mod:`dsh.secrets`)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    pass_through: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    """Variable names that children see anyway (exact names), even a provider's key."""
    remove: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    """More variables children do not see: names or shell-style patterns (``*_API_KEY``, ``AWS_*``),
    case-sensitive. Their values are also redacted from tool output."""
    redact_prompts: bool = True
    """A secret the user types or pastes into a prompt is stored in the session file redacted (``[redacted
    NAME]``, as ``dsh acp --record`` does); the model still gets the prompt as typed for that turn (issue 34)."""
