"""The bearer token every ``dsh serve`` connection presents: where it is kept and how it is compared.

Guarantees:

* :func:`server_token` returns ``DSH_SERVE_TOKEN`` when set (non-empty), else the token file's content; a
  missing file is created with a fresh 256-bit token, mode 0600, atomically (``O_CREAT | O_EXCL``: two servers
  starting at once agree on one token). A token file readable by others is refused (one line, exit 2).
* :func:`client_token` reads the same places and never creates a file.
* :func:`token_matches` compares in constant time (:func:`hmac.compare_digest`).
"""

from __future__ import annotations

import hmac
import os
import secrets
import stat
from pathlib import Path

__all__ = ["ENV_TOKEN", "client_token", "default_token_file", "server_token", "token_matches"]

ENV_TOKEN = "DSH_SERVE_TOKEN"


class TokenError(Exception):
    """The token cannot be had safely; the message is one line for the user."""


def default_token_file() -> Path:
    """``$XDG_CONFIG_HOME/dsh/serve-token`` (``~/.config/dsh/serve-token``)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "dsh" / "serve-token"


def _read(path: Path) -> str:
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise TokenError(f"{path} can be read by others (mode {stat.S_IMODE(mode):o}); chmod 600 it")
    token = path.read_text(encoding="utf-8").strip()
    if not token:
        raise TokenError(f"{path} is empty")
    return token


def server_token(path: Path | None = None) -> tuple[str, str]:
    """The token the server requires and where it came from (``DSH_SERVE_TOKEN`` or the file's path)."""
    env = os.environ.get(ENV_TOKEN, "").strip()
    if env:
        return env, ENV_TOKEN
    path = path or default_token_file()
    try:
        return _read(path), str(path)
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    token = secrets.token_urlsafe(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another server wrote it first: use theirs
        return _read(path), str(path)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(token + "\n")
    return token, str(path)


def client_token(path: Path | None = None) -> str | None:
    """The token a client presents: ``DSH_SERVE_TOKEN``, else the token file when it exists; None: none."""
    env = os.environ.get(ENV_TOKEN, "").strip()
    if env:
        return env
    try:
        return _read(path or default_token_file())
    except FileNotFoundError:
        return None


def token_matches(expected: str, presented: str | None) -> bool:
    """Whether *presented* is *expected*, in time independent of where they differ."""
    if presented is None:
        return False
    return hmac.compare_digest(expected.encode("utf-8"), presented.encode("utf-8"))
