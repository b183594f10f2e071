"""The recording file's writer (``dsh.recording.Recorder``): every line JSON, every secret redacted, on both of
its paths (a daemon frame copied as text when the secrets are plain, re-encoded otherwise)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsh.recording import Recorder


def _redactor(secret: str):  # type: ignore[no-untyped-def]
    return lambda text: text.replace(secret, "[redacted KEY]")


@pytest.mark.parametrize("secret", ["sk-plain-0123456789", 'sk-"quoted\\-0123'])
def test_every_line_is_json_and_holds_no_secret(tmp_path: Path, secret: str) -> None:
    plain = '"' not in secret and "\\" not in secret
    recorder = Recorder(tmp_path / "r.jsonl", _redactor(secret), secrets_are_plain=plain)
    recorder.header(model="echo")
    update = {"jsonrpc": "2.0", "method": "session/update", "params": {"update": {"text": f"key {secret} here"}}}
    recorder.frame("out", json.dumps(update).encode())
    recorder.frame("out", json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "s", "x": secret}}).encode())
    recorder.frame(
        "in", json.dumps({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": [secret]}).encode()
    )
    recorder.frame("in", b"not json " + secret.encode())
    n = recorder.model_request("echo")
    recorder.model_chunk(n, {"type": "text-delta", "text": secret}, aborted=False)
    recorder.model_end(n, "finished", aborted=False)
    recorder.eof()
    recorder.close()
    text = (tmp_path / "r.jsonl").read_text(encoding="utf-8")
    lines = [json.loads(line) for line in text.splitlines()]  # every line parses
    assert len(lines) == 9
    assert secret not in text and json.dumps(secret)[1:-1] not in text
    assert lines[1]["frame"]["params"]["update"]["text"] == "key [redacted KEY] here"
    assert lines[4]["raw"] == "not json [redacted KEY]"
    assert (tmp_path / "r.jsonl").stat().st_mode & 0o777 == 0o600
