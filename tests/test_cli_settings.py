"""Issue #11: one settings resolution for every command, and every bad setting is one line on stderr.

The table runs every command with each bad flag, environment value and file, through the real entry point
(:func:`dsh._entry.main`, both the bare ``dsh acp`` path and typer) in this process: an exception that escapes
would fail the test just as a traceback would show in a terminal. A few rows run again as real subprocesses, to
prove what reaches the terminal: exactly one line, no ``Traceback``, nothing on stdout.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from dsh import __version__
from dsh._entry import main as entry_main
from tests.support.env import sandbox_env
from tests.support.sdk import run_dsh

WAIT = 30

COMMANDS: dict[str, list[str]] = {
    "acp": ["acp"],
    "prompt": ["prompt", "hi"],
    "sessions list": ["sessions", "list"],
    "sessions show": ["sessions", "show", "abc"],
    "sessions export": ["sessions", "export", "abc"],
    "sessions rm": ["sessions", "rm", "abc"],
    "config check": ["config", "check"],
    "config show": ["config", "show"],
    "mcp check": ["mcp", "check"],
}
LOGGING_COMMANDS = ("acp", "prompt")


@dataclass(frozen=True)
class Bad:
    name: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    code: int = 2
    says: str = ""


def bad_settings(tmp: Path) -> list[Bad]:
    missing_dir = str(tmp / "no-such-dir" / "dsh.log")
    a_dir = str(tmp)
    return [
        Bad("DSH_LOG_LEVEL=loud", env=(("DSH_LOG_LEVEL", "loud"),), code=2, says="DSH_LOG_LEVEL: 'loud' is not a log"),
        Bad("DSH_LOG_FILE in a missing dir", env=(("DSH_LOG_FILE", missing_dir),), code=1, says="does not exist"),
        Bad("DSH_LOG_FILE on a dir", env=(("DSH_LOG_FILE", a_dir),), code=1, says="is a directory"),
        Bad("--config missing", args=("--config", str(tmp / "nope.yaml")), code=1, says="the file does not exist"),
        Bad("DSH_CONFIG is a dir", env=(("DSH_CONFIG", a_dir),), code=1, says="cannot read configuration file"),
        Bad("--config bad YAML", args=("--config", str(tmp / "bad.yaml")), code=1, says="invalid YAML in"),
        Bad("unknown option", args=("--bogus",), code=2, says="No such option: --bogus"),
    ]


def logging_flags(tmp: Path) -> list[Bad]:
    return [
        Bad("--log-level loud", args=("--log-level", "loud"), code=2, says="--log-level: 'loud' is not a log level"),
        Bad(
            "--log-file in a missing dir", args=("--log-file", str(tmp / "x" / "y.log")), code=1, says="does not exist"
        ),
        Bad("--log-file on a dir", args=("--log-file", str(tmp)), code=1, says="is a directory"),
    ]


@pytest.fixture
def clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    for name in list(os.environ):
        if name.startswith("DSH_"):
            monkeypatch.delenv(name)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    (tmp_path / "bad.yaml").write_text("model: [unclosed\n", encoding="utf-8")
    yield tmp_path


def run_in_process(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str], argv: list[str], env: dict[str, str]
) -> tuple[int, str, str]:
    with monkeypatch.context() as patch:
        patch.setattr(sys, "argv", ["dsh", *argv])
        for key, value in env.items():
            patch.setenv(key, value)
        with pytest.raises(SystemExit) as caught:
            entry_main()
    out, err = capfd.readouterr()
    code = caught.value.code
    return (code if isinstance(code, int) else 1), out, err


def test_every_command_reports_every_bad_setting_in_one_line(
    clean: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    failures: list[str] = []
    ran = 0
    for command, argv in COMMANDS.items():
        rows = bad_settings(clean) + (logging_flags(clean) if command in LOGGING_COMMANDS else [])
        for bad in rows:
            code, out, err = run_in_process(monkeypatch, capfd, [*argv, *bad.args], dict(bad.env))
            ran += 1
            lines = err.splitlines()
            problems = []
            if code != bad.code:
                problems.append(f"exit {code}, expected {bad.code}")
            if len(lines) != 1 or not err.endswith("\n"):
                problems.append(f"{len(lines)} lines on stderr")
            if "Traceback" in err:
                problems.append("a traceback")
            if bad.says not in err:
                problems.append(f"stderr does not say {bad.says!r}")
            if out:
                problems.append(f"stdout not empty: {out[:100]!r}")
            if problems:
                failures.append(f"dsh {' '.join(argv)} with {bad.name}: {'; '.join(problems)}: {err!r}")
    assert ran == 9 * 7 + 2 * 3
    assert not failures, "\n".join(failures)


def test_the_bare_acp_path_and_typer_give_the_same_line(
    clean: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    bare = run_in_process(monkeypatch, capfd, ["acp"], {"DSH_LOG_LEVEL": "loud"})
    typer = run_in_process(monkeypatch, capfd, ["acp", "--config", ""], {"DSH_LOG_LEVEL": "loud"})
    assert bare == typer == (2, "", "dsh: DSH_LOG_LEVEL: 'loud' is not a log level; use one of " + LEVELS + "\n")


LEVELS = "debug, info, warning, error, critical"


async def test_unknown_model_for_prompt_names_the_providers(tmp_path: Path) -> None:
    """A subprocess: ``dsh prompt`` with a good model would configure logging, which must not leak into the
    test process."""
    for argv, changes, origin in (
        (["--model", "nope:x"], {}, "--model"),
        ([], {"DSH_MODEL": "nope"}, "DSH_MODEL"),
    ):
        with anyio.fail_after(WAIT):
            done = await anyio.run_process(
                [sys.executable, "-m", "dsh", "prompt", "hi", *argv],
                env=subprocess_env(tmp_path, **changes),
                stdin=subprocess.DEVNULL,
                check=False,
            )
        err = done.stderr.decode()
        assert (done.returncode, done.stdout) == (2, b""), err
        model = argv[1] if argv else changes["DSH_MODEL"]
        assert err.startswith(f"dsh: {origin}: no provider serves model {model!r}"), err
        assert "available providers:" in err and "openai" in err and "echo" in err and err.count("\n") == 1


def subprocess_env(tmp_path: Path, **changes: str) -> dict[str, str]:
    env = sandbox_env(tmp_path, "echo")
    env.update(changes)
    return env


@pytest.mark.parametrize(
    ("argv", "changes", "code", "says"),
    [
        (["acp"], {"DSH_LOG_LEVEL": "loud"}, 2, "dsh: DSH_LOG_LEVEL: 'loud' is not a log level"),
        (["acp", "--log-level", "loud"], {}, 2, "dsh: --log-level: 'loud' is not a log level"),
        (["acp", "--log-file", "/no/such/dir/x.log"], {}, 1, "dsh: --log-file: the directory /no/such/dir does"),
        (["sessions", "list", "--config", "/no/such.yaml"], {}, 1, "dsh: cannot read configuration file"),
    ],
    ids=["env-log-level", "flag-log-level", "log-file", "config"],
)
async def test_a_terminal_sees_one_line_and_no_traceback(
    tmp_path: Path, argv: list[str], changes: dict[str, str], code: int, says: str
) -> None:
    with anyio.fail_after(WAIT):
        done = await anyio.run_process(
            [sys.executable, "-m", "dsh", *argv],
            env=subprocess_env(tmp_path, **changes),
            stdin=subprocess.DEVNULL,
            check=False,
        )
    err = done.stderr.decode()
    assert done.returncode == code, err
    assert done.stdout == b""
    assert err.startswith(says) and err.count("\n") == 1 and err.endswith("\n"), err
    assert "Traceback" not in err


def test_version_flag_and_command(
    clean: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    for argv in (["--version"], ["-V"], ["version"]):
        assert run_in_process(monkeypatch, capfd, argv, {}) == (0, f"dsh {__version__}\n", "")


def help_of(monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str], argv: list[str]) -> str:
    code, out, err = run_in_process(monkeypatch, capfd, [*argv, "--help"], {"COLUMNS": "200", "TERM": "dumb"})
    assert (code, err) == (0, "")
    return out


def all_commands() -> list[list[str]]:
    return [[], *COMMANDS.values(), ["sessions"], ["config"], ["mcp"], ["version"]]


@pytest.mark.parametrize("argv", all_commands(), ids=lambda argv: " ".join(argv[:2]) or "dsh")
def test_help_has_no_stray_metavars(
    clean: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    command = [word for word in argv if word not in ("hi", "abc")]
    text = help_of(monkeypatch, capfd, command)
    assert "Usage: dsh" in text
    for stray in ("<bool>", "<str>", "<int>", "{text}", "{ID}", "{TEXT}"):
        assert stray not in text, f"{stray} in the help of dsh {' '.join(command)}:\n{text}"


def test_help_of_prompt_shows_its_argument_plainly(
    clean: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    text = help_of(monkeypatch, capfd, ["prompt"])
    assert "Usage: dsh prompt [OPTIONS] TEXT" in text
    assert "--model" in text and "PROVIDER:MODEL" in text


# -- one resolution: the configuration file reaches every command ---------------------------------------------


async def test_a_session_stored_with_the_files_data_dir_is_found_by_dsh_sessions(tmp_path: Path) -> None:
    """``data_dir`` from the (default-located) configuration file: ``dsh acp`` stores the session there and
    ``dsh sessions list/show`` find it there, with no DSH_DATA_DIR anywhere."""
    store = tmp_path / "from-config"
    config = tmp_path / "home" / ".config" / "dsh" / "config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(f"data_dir: {store}\n", encoding="utf-8")
    async with run_dsh(tmp_path, env={"DSH_DATA_DIR": None}) as dsh:
        session_id = await dsh.start()
        await dsh.prompt(session_id, "remember the lighthouse")
    assert (store / f"{session_id}.jsonl").is_file() or any(store.rglob(f"{session_id}*"))
    env = sandbox_env(tmp_path, "echo")
    del env["DSH_DATA_DIR"]
    with anyio.fail_after(WAIT):
        listed = await anyio.run_process([sys.executable, "-m", "dsh", "sessions", "list"], env=env, check=False)
        shown = await anyio.run_process(
            [sys.executable, "-m", "dsh", "sessions", "show", session_id], env=env, check=False
        )
    assert listed.returncode == 0, listed.stderr
    assert session_id in listed.stdout.decode()
    assert shown.returncode == 0, shown.stderr
    assert "remember the lighthouse" in shown.stdout.decode()


async def test_dsh_prompt_uses_the_files_model(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text('[{"text": "answer from the configured model"}]', encoding="utf-8")
    config = tmp_path / "config.yaml"
    config.write_text(f"model: scripted:{script}\n", encoding="utf-8")
    env = sandbox_env(tmp_path, "echo")
    del env["DSH_MODEL"]
    env["DSH_CONFIG"] = str(config)
    with anyio.fail_after(WAIT):
        done = await anyio.run_process([sys.executable, "-m", "dsh", "prompt", "hello"], env=env, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == "answer from the configured model\n"
