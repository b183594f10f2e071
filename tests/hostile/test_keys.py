"""Keys stay out of reach of model-run commands (issue #30 item 6): the daemon's start-up environment block
holds no provider key once it serves and it is not dumpable; redaction catches a key's hex and base64 forms and
what an output budget leaves of it."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

from dsh.secrets import SecretPolicy
from tests.support.editor import EditorClient, call, read_log, run_editor, text_of, tool_results, write_script
from tests.support.env import sandbox_env

KEY = "sk-hostile-keys-0123456789abcdefghijklmnopqrstuv"
OTHER = "sk-ant-hostile-9876543210zyxwvutsrqponmlkjihg"


def _forms_absent(text: str, key: str) -> None:
    assert key not in text
    assert key.encode().hex() not in text.lower()
    for offset in range(3):
        core = base64.b64encode(b"\0" * offset + key.encode()).decode()[4:-4]
        assert core not in text


async def test_a_command_cannot_read_the_key_from_the_daemons_environ(tmp_path: Path) -> None:
    script = [
        call("run_command", "b64", command="base64 -w0 /proc/$PPID/environ"),
        call("run_command", "hex", command="od -An -v -tx1 /proc/$PPID/environ 2>&1 | tr -d ' \\n'"),
        {"text": "done"},
    ]
    model = write_script(tmp_path / "script.json", script)
    env = {"OPENAI_API_KEY": KEY, "ANTHROPIC_API_KEY": OTHER}
    async with run_editor(tmp_path, model, EditorClient(["allow_once", "allow_once"]), env=env) as editor:
        session = (await editor.new_session()).session_id
        assert (await editor.prompt(session, "look")).stop_reason == "end_turn"
        b64 = text_of(editor.final(session, "b64"))
        hexed = text_of(editor.final(session, "hex"))
    for key in (KEY, OTHER):
        _forms_absent(b64 + hexed, key)
    if "Permission denied" in b64:  # not root: the daemon is not dumpable, so its environ cannot be read at all
        assert "Permission" in hexed  # (the spaces are gone: tr removed them)
    else:  # root reads any process's memory: then the block itself holds no key
        environ = base64.b64decode(b64.strip().splitlines()[0])
        assert b"OPENAI_API_KEY=" in environ and b"DSH_MODEL=" in environ  # the daemon's block, read whole
        assert KEY.encode() not in environ and OTHER.encode() not in environ
        assert KEY.encode() not in bytes.fromhex(hexed.strip().splitlines()[0])
    events = read_log(tmp_path, session)
    stored = json.dumps(tool_results(events, "b64") + tool_results(events, "hex"))
    _forms_absent(stored, KEY)


def test_seal_process_scrubs_the_block_and_makes_the_process_non_dumpable(tmp_path: Path) -> None:
    probe = (
        "import ctypes, os, sys\n"
        "from dsh.secrets import current_policy, seal_process\n"
        "key = sys.argv[1]\n"
        "problems = seal_process(current_policy())\n"
        "block = open('/proc/self/environ', 'rb').read()\n"
        "dumpable = ctypes.CDLL(None).prctl(3, 0, 0, 0, 0)\n"
        "inherited = os.popen('env').read().count('OPENAI_API_KEY')\n"
        "print(repr(problems), dumpable, key.encode() in block, b'KEEP=me' in block,\n"
        "      os.environ['OPENAI_API_KEY'] == key, inherited)\n"
    )
    env = {**sandbox_env(tmp_path, "echo"), "OPENAI_API_KEY": KEY, "KEEP": "me"}
    done = subprocess.run([sys.executable, "-c", probe, KEY], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    # no problem, PR_GET_DUMPABLE is 0, the key is gone from the block, the rest is intact, Python still has it,
    # a child started without an explicit env does not inherit it
    assert done.stdout.split() == ["[]", "0", "False", "True", "True", "0"], done.stdout


def test_redaction_catches_hex_base64_and_a_key_cut_at_either_end() -> None:
    redact = SecretPolicy.build().redactor({"OPENAI_API_KEY": KEY})
    data = KEY.encode()
    texts = {
        "hex": f"x {data.hex()} y",
        "HEX": f"x {data.hex().upper()} y",
        "b64-0": base64.b64encode(data).decode(),
        "b64-1": base64.b64encode(b"A" + data + b"\n").decode(),
        "b64-2": base64.b64encode(b"AB" + data + b"Z").decode(),
        "urlsafe": base64.urlsafe_b64encode(b"\xff" + data).decode(),
        "head-cut": f"[output truncated]\n{KEY[-20:]}\nrest of the output",
        "tail-cut": f"start of the output {KEY[:17]}",
        "hex-wrapped": "\n".join(data.hex()[i : i + 60] for i in range(0, len(data.hex()), 60)),
    }
    for name, text in texts.items():
        shown = redact(text)
        assert "[redacted OPENAI_API_KEY]" in shown, name
        _forms_absent(shown, KEY)
        assert KEY[:16] not in shown and KEY[-16:] not in shown, name
    assert redact("the sk- prefix and 0123456789 stay") == "the sk- prefix and 0123456789 stay"
    assert redact(f"a {KEY[:15]} fragment under 16 stays") == f"a {KEY[:15]} fragment under 16 stays"
