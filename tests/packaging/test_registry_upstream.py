"""Issue #29 item 7: the ACP registry's own validation script (vendored unchanged from agentclientprotocol/registry,
see ``registry_upstream/README.md``) accepts ``packaging/registry/agent.json`` and ``icon.svg`` with this
checkout's wheel served as the PyPI package.

The script runs as the registry's CI runs it, on a registry folder laid out like theirs, in a child process whose
``urllib`` requests for ``https://pypi.org/`` go to a local index serving the wheel (every other URL is refused:
nothing leaves the machine). Every rule of the script runs, the URL check included; two controls show that the
package check and the schema check really bite.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.env import ROOT
from tests.support.package_index import PackageIndex, build_wheel, redirect_pypi, serve_index

UPSTREAM = Path(__file__).parent / "registry_upstream"
ENTRY = ROOT / "packaging" / "registry"
REGISTRY_ID = "dsh-agent"
WAIT = 60


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("registry-wheel"))


@pytest.fixture
def index(wheel: Path) -> Iterator[PackageIndex]:
    with serve_index(wheel) as served:
        yield served


def registry(tmp_path: Path, agent: dict[str, Any]) -> Path:
    """A registry checkout with one entry, laid out as upstream (the script finds the root from its own path)."""
    root = tmp_path / "registry"
    (root / ".github" / "workflows").mkdir(parents=True)
    shutil.copy(UPSTREAM / "build_registry.py", root / ".github" / "workflows" / "build_registry.py")
    shutil.copy(UPSTREAM / "agent.schema.json", root / "agent.schema.json")
    (root / REGISTRY_ID).mkdir()
    (root / REGISTRY_ID / "agent.json").write_text(json.dumps(agent, indent=2) + "\n", encoding="utf-8")
    shutil.copy(ENTRY / "icon.svg", root / REGISTRY_ID / "icon.svg")
    return root


def validate(tmp_path: Path, agent: dict[str, Any], index_url: str) -> subprocess.CompletedProcess[str]:
    root = registry(tmp_path, agent)
    site = redirect_pypi(tmp_path / "site")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "PYTHONPATH": str(site),
        "DSH_TEST_PACKAGE_INDEX": index_url,
        "LANG": "C.UTF-8",
    }
    argv = [sys.executable, str(root / ".github" / "workflows" / "build_registry.py")]
    return subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=WAIT, check=False)


def agent_json() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((ENTRY / "agent.json").read_text(encoding="utf-8"))
    return loaded


def test_jsonschema_is_there_so_the_schema_rules_run() -> None:
    import jsonschema  # noqa: F401  (without it the script skips its schema check and says so)


def test_the_registry_script_accepts_the_entry_with_the_local_wheel_as_the_package(
    tmp_path: Path, index: PackageIndex
) -> None:
    agent = agent_json()
    assert agent["distribution"]["uvx"]["package"] == f"{index.name}=={index.version}"  # the wheel is the package
    done = validate(tmp_path, agent, index.url)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"Added agent: {REGISTRY_ID} v{agent['version']}" in done.stdout
    assert "skipping schema validation" not in done.stdout
    assert ("HEAD", f"/pypi/{index.name}/json") in index.requests  # the URL rule ran, against the local index
    built = json.loads((tmp_path / "registry" / "dist" / "registry.json").read_text(encoding="utf-8"))
    (entry,) = built["agents"]
    assert entry["id"] == REGISTRY_ID and entry["repository"] and entry["authors"]
    assert entry["icon"].endswith(f"/{REGISTRY_ID}.svg")


def test_the_entry_names_the_projects_repository_and_authors() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    agent = agent_json()
    assert agent["repository"] == project["urls"]["Repository"]
    assert agent["authors"] == [author["name"] for author in project["authors"]]
    assert agent["license"] == project["license"] and (ROOT / "LICENSE").read_text(encoding="utf-8").startswith(
        "MIT License"
    )


def test_control_a_package_the_index_does_not_have_is_refused(tmp_path: Path, index: PackageIndex) -> None:
    """What the script says today against the real PyPI (no release yet): the URL rule really runs."""
    agent = agent_json()
    agent["distribution"] = {"uvx": {"package": f"dsh-agent-unpublished=={agent['version']}", "args": ["acp"]}}
    done = validate(tmp_path, agent, index.url)
    assert done.returncode == 1
    assert "PyPI package not found: dsh-agent-unpublished" in done.stdout


def test_control_a_schema_violation_is_refused(tmp_path: Path, index: PackageIndex) -> None:
    agent = {**agent_json(), "authors": "The dsh contributors"}  # the schema wants a list
    done = validate(tmp_path, agent, index.url)
    assert done.returncode == 1
    assert "Schema validation error at 'authors'" in done.stdout


def test_a_tag_releases_through_trusted_publishing_after_the_wheel_test() -> None:
    import yaml

    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "release.yml").read_text(encoding="utf-8"))
    triggers = workflow[True] if True in workflow else workflow["on"]  # YAML 1.1 reads `on` as true
    assert list(triggers) == ["push"] and triggers["push"]["tags"] == ["v*.*.*"]
    build, publish = workflow["jobs"]["build"], workflow["jobs"]["publish"]
    commands = "\n".join(step.get("run", "") for step in build["steps"])
    assert "python -m build" in commands and "pytest -q -n 0 tests/packaging" in commands
    assert "$GITHUB_REF_NAME" in commands  # the tag must be the version
    assert publish["needs"] == "build" and publish["permissions"] == {"id-token": "write"}
    assert publish["environment"]["name"] == "pypi"
    assert [step["uses"] for step in publish["steps"]][-1] == "pypa/gh-action-pypi-publish@release/v1"
    assert not any("password" in (step.get("with") or {}) for step in publish["steps"])  # no stored token
    releasing = (ROOT / "RELEASING.md").read_text(encoding="utf-8")
    assert "release.yml" in releasing and "trusted publisher" in releasing and "environment `pypi`" in releasing
