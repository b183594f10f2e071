"""Issue 43 item 3: ``dsh config show`` is generated from the configuration model: every section and key, with
its value or default and where it came from; secrets as ``***``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from dsh.config import DshConfig
from tests.support.env import sandbox_env


def show(tmp_path: Path, config: str, **extra: str) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(config)
    done = subprocess.run(
        [sys.executable, "-m", "dsh", "config", "show", "--config", str(path)],
        env=sandbox_env(tmp_path, "echo", extra=extra) | {"DSH_MODEL": ""},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def sections(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every field of *model* as a dotted path by the name the file uses (its alias: ``hooks.import``), sections
    (fields that are models themselves) walked into."""
    out = []
    for name, field in model.model_fields.items():
        key = field.alias or name
        out.append(prefix + key)
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            out += sections(kind, f"{prefix}{key}.")
    return out


def lookup(data: dict[str, Any], dotted: str) -> bool:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def test_every_field_of_the_model_is_shown(tmp_path: Path) -> None:
    shown = yaml.safe_load(show(tmp_path, ""))
    paths = sections(DshConfig)
    assert {"tools.fetch_private", "permissions.mode", "permissions.allow", "compaction.threshold"} <= set(paths)
    assert [path for path in paths if not lookup(shown, path)] == []
    assert list(shown) == list(DshConfig.model_fields)  # in the model's order, nothing else


def test_each_section_says_where_it_came_from_and_the_defaults_the_file_overrides(tmp_path: Path) -> None:
    out = show(
        tmp_path,
        "compaction:\n  threshold: 0.9\ntools:\n  fetch_private: true\nmodel: echo\n",
        DSH_SYSTEM_PROMPT="be brief",
    )
    lines = out.splitlines()
    assert "# compaction: file: threshold (default 0.8); the rest default" in lines
    assert "# tools: file: fetch_private (default False); the rest default" in lines
    assert "# permissions: default" in lines and "# model: file" in lines
    assert "# system_prompt: environment (DSH_SYSTEM_PROMPT overrides the default)" in lines
    assert out.splitlines()[0].endswith("config.yaml (from --config)")


def test_secrets_are_masked(tmp_path: Path) -> None:
    out = show(
        tmp_path,
        "providers:\n  local:\n    type: openai\n    base_url: http://localhost:1/v1\n    api_key: sk-very-secret\n"
        "mcp_servers:\n  s:\n    command: x\n    env: {TOKEN: tok-very-secret}\n",
    )
    assert "very-secret" not in out and out.count("***") >= 2
