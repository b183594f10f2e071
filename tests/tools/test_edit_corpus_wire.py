"""Issue 35's edit corpus over the wire: every round-2 case (``edit_cases.ROUND_2``) runs in a real ``dsh acp``
daemon, driven by the official ACP SDK client and the scripted model, in accept-edits mode: one step reads every
subject file, the next sends every case's call. Each file must then hold exactly its expected bytes, or be byte
for byte what it was with the call failed (0 wrong writes), and the result the client saw must say what the
case's ``says`` lists."""

from __future__ import annotations

from pathlib import Path

import anyio

from tests.support.editor import EditorClient, call, run_editor, text_of, write_script
from tests.tools.edit_cases import ROUND_2


async def test_round_2_over_the_wire(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    names = [f"case{i:03}.txt" for i in range(len(ROUND_2))]
    for name, case in zip(names, ROUND_2, strict=True):
        (project / name).write_bytes(case.before)
    reads = [call("read_file", f"r{i}", path=name)["tool_calls"][0] for i, name in enumerate(names)]
    edits = [
        call(case.tool, f"e{i}", path=name, **case.arguments)["tool_calls"][0]
        for i, (name, case) in enumerate(zip(names, ROUND_2, strict=True))
    ]
    model = write_script(tmp_path / "script.json", [{"tool_calls": reads}, {"tool_calls": edits}, {"text": "done"}])
    client = EditorClient([])
    async with run_editor(tmp_path, model, client, project=project) as editor:
        session = (await editor.new_session()).session_id
        await editor.conn.set_session_mode(session_id=session, mode_id="accept-edits")
        with anyio.fail_after(120):
            assert (await editor.prompt(session, "apply the corpus")).stop_reason == "end_turn"
        outcomes = {i: editor.final(session, f"e{i}") for i in range(len(ROUND_2))}
    assert client.permissions() == []
    wrong: list[str] = []
    for i, (name, case) in enumerate(zip(names, ROUND_2, strict=True)):
        final = outcomes[i]
        said = text_of(final)
        now = (project / name).read_bytes()
        if case.after is None:
            if final["status"] != "failed" or now != case.before:
                wrong.append(f"{case.name}: should be refused, file unchanged; status {final['status']}: {said}")
        elif final["status"] != "completed" or now != case.after:
            wrong.append(f"{case.name}: expected {case.after!r}, got {now!r} ({final['status']}: {said})")
        missing = [phrase for phrase in case.says if phrase not in said]
        if missing:
            wrong.append(f"{case.name}: the result does not say {missing}: {said}")
    assert wrong == []
