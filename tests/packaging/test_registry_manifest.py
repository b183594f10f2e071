"""Issue #11: ``packaging/registry/agent.json`` and ``icon.svg`` follow the ACP registry's rules that can be
checked offline (its FORMAT.md and the checks its CI runs), and stay in step with the package."""

from __future__ import annotations

import json
import re
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
REGISTRY = ROOT / "packaging" / "registry"
REGISTRY_ID = "dsh-agent"
"""The registry folder this entry goes into (``dsh-acp`` and ``dsh-acp-interactive`` belong to another project)."""
ALLOWED_PAINT = {"currentcolor", "none", "inherit"}


def project() -> dict[str, Any]:
    return dict(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"])


def manifest_problems(agent: dict[str, Any], folder: str, package_version: str, scripts: dict[str, str]) -> list[str]:
    problems = [
        f"missing {key}" for key in ("id", "name", "version", "description", "distribution") if not agent.get(key)
    ]
    agent_id = str(agent.get("id", ""))
    if not re.fullmatch(r"[a-z][a-z0-9-]*", agent_id):
        problems.append(f"id {agent_id!r} must start with a letter and be lowercase with hyphens")
    if agent_id != folder:
        problems.append(f"id {agent_id!r} is not the folder name {folder!r}")
    version = str(agent.get("version", ""))
    if not re.fullmatch(r"\d+\.\d+\.\d+.*", version):
        problems.append(f"version {version!r} is not semantic")
    if version != package_version:
        problems.append(f"version {version!r} is not the package's {package_version!r}")
    distribution = agent.get("distribution") or {}
    if set(distribution) - {"binary", "npx", "uvx"}:
        problems.append(f"unknown distribution types {sorted(set(distribution) - {'binary', 'npx', 'uvx'})}")
    uvx = distribution.get("uvx")
    if not isinstance(uvx, dict):
        problems.append("no uvx distribution")
        return problems
    package = str(uvx.get("package", ""))
    if "@latest" in package.lower():
        problems.append("the uvx package uses @latest")
    name, _, pinned = package.partition("==")
    if name != project()["name"]:
        problems.append(f"uvx package {name!r} is not the distribution {project()['name']!r}")
    if pinned != package_version:
        problems.append(f"uvx package pins {pinned!r}, not the package's version {package_version!r}")
    command = uvx.get("cmd", name)
    if command not in scripts:
        problems.append(f"uvx would run {command!r}, which is no console script of the package")
    if uvx.get("args") != ["acp"]:
        problems.append(f"uvx args {uvx.get('args')!r} do not start the daemon")
    return problems


def icon_problems(text: str) -> list[str]:
    problems = []
    if "<!--" in text:
        problems.append("comments in the icon")
    root = ET.fromstring(text)
    if root.tag.rsplit("}", 1)[-1] != "svg":
        return ["the root is not <svg>"]
    width, height = root.get("width"), root.get("height")
    view_box = (root.get("viewBox") or "").split()
    size = (float(width), float(height)) if width and height else tuple(float(v) for v in view_box[2:4])
    if size != (16.0, 16.0):
        problems.append(f"the icon is {size}, not 16x16")
    uses_current = False
    for element in root.iter():
        paints = [element.get("fill"), element.get("stroke")]
        for declaration in (element.get("style") or "").split(";"):
            key, _, value = declaration.partition(":")
            if key.strip().lower() in ("fill", "stroke"):
                paints.append(value)
        if element.tag.rsplit("}", 1)[-1] == "style" and element.text:
            paints += re.findall(r"\b(?:fill|stroke)\s*:\s*([^;}\s]+)", element.text, re.IGNORECASE)
        for paint in paints:
            if paint is None:
                continue
            value = paint.strip().lower()
            if value == "currentcolor":
                uses_current = True
            elif value not in ALLOWED_PAINT:
                problems.append(f"hard-coded colour {paint!r}")
    if not uses_current:
        problems.append("the icon does not use currentColor")
    return problems


def test_the_manifest_follows_the_registry_rules() -> None:
    agent = json.loads((REGISTRY / "agent.json").read_text(encoding="utf-8"))
    info = project()
    assert manifest_problems(agent, REGISTRY_ID, info["version"], info["scripts"]) == []


def test_the_icon_is_16px_monochrome_current_color() -> None:
    assert icon_problems((REGISTRY / "icon.svg").read_text(encoding="utf-8")) == []


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"version": "9.9.9"}, "is not the package's"),
        ({"id": "Dsh"}, "lowercase"),
        ({"distribution": {"uvx": {"package": "dsh-agent@latest", "args": ["acp"]}}}, "@latest"),
        (
            {"distribution": {"uvx": {"package": "dsh-agent==0.1.0", "cmd": "nope", "args": ["acp"]}}},
            "no console script",
        ),
        ({"description": ""}, "missing description"),
    ],
)
def test_the_manifest_check_catches_mistakes(change: dict[str, Any], problem: str) -> None:
    agent = {**json.loads((REGISTRY / "agent.json").read_text(encoding="utf-8")), **change}
    info = project()
    problems = manifest_problems(agent, REGISTRY_ID, info["version"], info["scripts"])
    assert any(problem in p for p in problems), problems


@pytest.mark.parametrize(
    ("svg", "problem"),
    [
        ('<svg xmlns="http://www.w3.org/2000/svg" width="24" height="24"><path fill="currentColor"/></svg>', "16x16"),
        ('<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16"><path fill="#000"/></svg>', "hard-coded"),
        ('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><path fill="none"/></svg>', "currentColor"),
    ],
)
def test_the_icon_check_catches_mistakes(svg: str, problem: str) -> None:
    assert any(problem in p for p in icon_problems(svg))


def test_both_console_scripts_run_the_same_entry_point() -> None:
    scripts = project()["scripts"]
    assert scripts["dsh"] == scripts["dsh-agent"] == "dsh._entry:main"
