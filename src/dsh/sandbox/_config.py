"""The ``sandbox`` section of the configuration file (referenced from :class:`dsh.config.DshConfig`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["ApprovedLevel", "SandboxConfig"]

ApprovedLevel = Literal["workspace-write", "off"]


class SandboxConfig(BaseModel):
    """Where the commands the user approved run (commands that run without a question always run at
    ``read-only``), and whether they reach the network."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    approved: ApprovedLevel = "workspace-write"
    """``workspace-write``: writes in the session's roots and its private temporary directory only; ``off``: no
    sandbox for approved commands."""

    @field_validator("approved", mode="before")
    @classmethod
    def _yaml_off(cls, value: Any) -> Any:
        """YAML 1.1 reads a bare ``off`` as the boolean false: ``approved: off`` means ``"off"``, as written."""
        return "off" if value is False else value

    network: bool | list[Annotated[str, Field(min_length=1)]] = True
    """Network for approved commands at ``workspace-write``: ``true``, ``false``, or a list of domains (not
    supported yet: a list means no network, said by ``dsh config show``)."""
