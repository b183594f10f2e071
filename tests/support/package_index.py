"""A built wheel of this checkout, and a package index on 127.0.0.1 that serves it the way PyPI does.

* :func:`build_wheel` builds the distribution's wheel into a directory (or takes ``DSH_TEST_WHEEL``) (``pip wheel --no-deps`` without build
  isolation: hatchling is a dev dependency, so nothing is downloaded); the wheel test and the registry test use it.
* :func:`serve_index` serves one wheel as PyPI's JSON API does: ``/pypi/<name>/json`` and
  ``/pypi/<name>/<version>/json`` (GET and HEAD; the name compared normalised, as PyPI does), the file itself under
  ``/packages/``; anything else is a 404. Every request is recorded (method, path).
* :func:`redirect_pypi` writes a ``sitecustomize`` that sends a child process's ``urllib`` requests for
  ``https://pypi.org/`` to the index and refuses every other URL, so a script that checks packages on PyPI runs
  offline against the local wheel and nothing leaves the machine.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.parser import Parser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.support.env import ROOT

__all__ = ["PackageIndex", "build_wheel", "redirect_pypi", "serve_index", "wheel_metadata"]

BUILD_TIMEOUT = 180


def build_wheel(dest: Path) -> Path:
    """Build this checkout's wheel into *dest*; return its path. With ``DSH_TEST_WHEEL`` set (the release
    workflow), that wheel is the one tested instead: the file that is then published."""
    given = os.environ.get("DSH_TEST_WHEEL")
    if given:
        return Path(given).resolve()
    try:
        import hatchling  # noqa: F401

        isolation = ["--no-build-isolation"]
    except ImportError:  # pragma: no cover - a venv made before hatchling joined the dev extra
        isolation = []
    argv = [sys.executable, "-m", "pip", "wheel", "--no-deps", *isolation, "-q", "-w", str(dest), str(ROOT)]
    built = subprocess.run(argv, capture_output=True, text=True, timeout=BUILD_TIMEOUT, check=False)
    assert built.returncode == 0, built.stderr
    (wheel,) = dest.glob("dsh_agent-*.whl")
    return wheel


def wheel_metadata(wheel: Path) -> tuple[str, str]:
    """(Name, Version) from the wheel's own METADATA."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = Parser().parsestr(archive.read(name).decode("utf-8"))
    return metadata["Name"], metadata["Version"]


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass
class PackageIndex:
    url: str
    wheel: Path
    name: str
    version: str
    requests: list[tuple[str, str]] = field(default_factory=list)


@contextmanager
def serve_index(wheel: Path) -> Iterator[PackageIndex]:
    name, version = wheel_metadata(wheel)
    index = PackageIndex("", wheel, name, version)

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, send_body: bool) -> None:
            index.requests.append((self.command, self.path))
            body, kind = self._body()
            self.send_response(200 if body is not None else 404)
            payload = body if body is not None else b'{"message": "Not Found"}'
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if send_body:
                self.wfile.write(payload)

        def _body(self) -> tuple[bytes | None, str]:
            parts = [part for part in self.path.split("?", 1)[0].split("/") if part]
            if (
                len(parts) in (3, 4)
                and parts[0] == "pypi"
                and parts[-1] == "json"
                and _normal(parts[1]) == _normal(name)
            ):
                if len(parts) == 4 and parts[2] != version:
                    return None, "application/json"
                info = {"name": name, "version": version}
                file = {
                    "filename": wheel.name,
                    "packagetype": "bdist_wheel",
                    "url": f"{index.url}/packages/{wheel.name}",
                    "size": wheel.stat().st_size,
                }
                return json.dumps(
                    {"info": info, "urls": [file], "releases": {version: [file]}}
                ).encode(), "application/json"
            if parts == ["packages", wheel.name]:
                return wheel.read_bytes(), "application/octet-stream"
            return None, "application/json"

        def do_GET(self) -> None:
            self._answer(True)

        def do_HEAD(self) -> None:
            self._answer(False)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    index.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield index
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


SITECUSTOMIZE = '''\
"""Written by tests.support.package_index.redirect_pypi: https://pypi.org/ goes to a local index, nothing else leaves."""
import os
import urllib.error
import urllib.request

_urlopen = urllib.request.urlopen
_INDEX = os.environ["DSH_TEST_PACKAGE_INDEX"]


def urlopen(request, *args, **kwargs):
    url = request.full_url if isinstance(request, urllib.request.Request) else str(request)
    if not url.startswith("https://pypi.org/"):
        raise urllib.error.URLError(f"offline test: {url} is not served")
    local = _INDEX + url[len("https://pypi.org"):]
    if isinstance(request, urllib.request.Request):
        request.full_url = local
    else:
        request = local
    return _urlopen(request, *args, **kwargs)


urllib.request.urlopen = urlopen
'''


def redirect_pypi(directory: Path) -> Path:
    """Write the ``sitecustomize`` into *directory* (put it first on the child's ``PYTHONPATH`` and set
    ``DSH_TEST_PACKAGE_INDEX`` to the index's URL); return *directory*."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    return directory
