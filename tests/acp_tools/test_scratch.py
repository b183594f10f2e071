from __future__ import annotations
import json
from pathlib import Path
from tests.acp_tools._harness import EditorClient, run_editor, write_script


async def test_scratch(tmp_path: Path) -> None:
    model = write_script(
        tmp_path / "s.json",
        [
            {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "hello\n"}, "id": "w1"}]},
            {"text": "done"},
        ],
    )
    client = EditorClient(["allow_once"])
    async with run_editor(tmp_path, model, client) as ed:
        s = await ed.new_session()
        print(s.model_dump_json(by_alias=True))
        r = await ed.prompt(s.session_id, "go")
        print(r)
        for f in ed.frames():
            print(json.dumps(f)[:400])
