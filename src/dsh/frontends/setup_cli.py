"""``dsh setup``: provider, key and default model in the user's configuration file, the key checked first.

Interactive on a terminal (typer prompts: the provider, its key hidden, the model); with ``--provider`` and
``--api-key`` (or ``--yes``) no question is asked, for scripts. The ACP terminal authentication method runs
``dsh setup`` in the editor's terminal.

Guarantees:

* The key is checked with one small request (a one-token answer) through the same adapter the daemon uses,
  before anything is written; a failed check writes nothing and says why in one line (exit 1). ``--no-check``
  skips it.
* The file is the configuration file ``dsh`` reads (``--config``, else ``DSH_CONFIG``, else
  ``~/.config/dsh/config.yaml``); its other keys are kept; it is written with mode 0600 (its directory 0700
  when created), replaced atomically, and what is written validates as a configuration.
* The key is never printed; the last line says where the file is.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

__all__ = ["DEFAULT_MODELS", "setup"]

DEFAULT_MODELS = {"openai": "gpt-4.1-mini", "anthropic": "claude-sonnet-4-5", "deepseek": "deepseek-chat"}
"""The default model offered for each built-in provider."""


def setup(
    provider: Annotated[
        str | None, typer.Option("--provider", metavar="NAME", help="openai, anthropic, deepseek or a configured one.")
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option("--api-key", metavar="KEY", help="The provider's API key (prompted, hidden, if not given)."),
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", metavar="MODEL", help="Default model, without the provider prefix.")
    ] = None,
    base_url: Annotated[
        str | None, typer.Option("--base-url", metavar="URL", help="The provider's API base URL (default: its own).")
    ] = None,
    config: Annotated[
        str | None,
        typer.Option(
            "--config", metavar="PATH", help="File to write \\[env DSH_CONFIG; default ~/.config/dsh/config.yaml]."
        ),
    ] = None,
    check: Annotated[bool, typer.Option("--check/--no-check", help="Check the key with one small request.")] = True,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Ask nothing: take the defaults for what is not given.")
    ] = False,
) -> None:
    """Set up a provider, its key and the default model in the configuration file (mode 0600)."""
    import anyio

    from dsh.settings import default_config_path, fail

    path = Path(config or os.environ.get("DSH_CONFIG") or default_config_path()).expanduser()
    existing = _read_existing(path)
    interactive = not yes and sys.stdin.isatty()
    known = sorted({*DEFAULT_MODELS, *(existing.get("providers") or {})})
    if provider is None:
        if not interactive:
            fail("setup: --provider is required when not run in a terminal (or with --yes)", 2)
        provider = typer.prompt(f"Provider ({', '.join(known)})", default="openai")
    provider = provider.strip()
    if not provider or ":" in provider:
        fail(f"setup: --provider: {provider!r} is not a provider name", 2)
    _check_address(provider, base_url, existing)
    key_given = api_key is not None
    if api_key is None:
        if not interactive:
            fail("setup: --api-key is required when not run in a terminal", 2)
        api_key = typer.prompt(f"{provider} API key", hide_input=True)
    api_key = api_key.strip()
    if not api_key:
        fail("setup: the API key is empty", 2)
    if model is None:
        default = DEFAULT_MODELS.get(provider)
        if interactive:
            model = typer.prompt("Default model", default=default) if default else typer.prompt("Default model")
        elif default is not None:
            model = default
        else:
            fail(f"setup: --model is required for provider {provider!r}", 2)
    model = model.removeprefix(f"{provider}:").strip()
    data = _updated(existing, provider, api_key, model, base_url)
    loaded = _validated(data, path)
    pinned = base_url is not None
    from_env = _base_url_from_env(loaded, provider) if base_url is None else None
    if from_env is not None:  # the address the check goes to is the one the file keeps (issue 43)
        base_url = from_env[1]
        data = _updated(existing, provider, api_key, model, base_url)
        loaded = _validated(data, path)
    if check:
        problem = anyio.run(_check_key, loaded, f"{provider}:{model}", pinned)
        if problem is not None:
            given = "the key given with --api-key" if key_given else "the key you entered"
            problem = _blame(problem, given)
            fail(f"setup: the key check failed, nothing was written: {problem} (use --no-check to skip the check)")
    _write_private(path, data)
    checked = "key checked" if check else "key not checked"
    saved = f"; base URL {base_url} from {from_env[0]} saved" if from_env is not None else ""
    sys.stdout.write(f"dsh: wrote {path} (model {provider}:{model}; {checked}{saved}; mode 0600)\n")


def _base_url_from_env(config: Any, provider: str) -> tuple[str, str] | None:
    """``(variable, url)`` when *provider*'s ``base_url_env`` (``OPENAI_BASE_URL``) is set and ``--base-url`` is
    not given: the variable wins over a file's ``base_url``, so the check sends the key there, and that is the
    address to keep (a later ``dsh acp`` without the variable would otherwise send the checked key elsewhere)."""
    settings = config.providers.get(provider)
    variable = getattr(settings, "base_url_env", None)
    value = (os.environ.get(variable) or "").strip() if isinstance(variable, str) and variable else ""
    return (str(variable), value) if value else None


def _blame(problem: str, given: str) -> str:
    """The check's failure with its "check VARIABLE" hint pointing at the key setup was given instead: the key
    under test never came from the environment."""
    head, separator, _ = problem.rpartition("; check ")
    return f"{head}; check {given}" if separator else problem


def _read_existing(path: Path) -> dict[str, Any]:
    import yaml

    from dsh.settings import fail

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        fail(f"setup: cannot read {path}: {exc.strerror or exc}")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        fail(f"setup: {path} is not valid YAML; fix it (`dsh config check`) or choose another file with --config")
    if data is None:
        return {}
    if not isinstance(data, dict):
        fail(f"setup: {path} is not a mapping of settings; fix it or choose another file with --config")
    return data


def _updated(existing: dict[str, Any], provider: str, api_key: str, model: str, base_url: str | None) -> dict[str, Any]:
    data = dict(existing)
    providers = dict(data.get("providers") or {})
    entry = dict(providers.get(provider) or {})
    entry["api_key"] = api_key
    if base_url is not None:
        entry["base_url"] = base_url
    providers[provider] = entry
    data["providers"] = providers
    data["model"] = f"{provider}:{model}"
    return data


def _validated(data: dict[str, Any], path: Path) -> Any:
    from pydantic import ValidationError

    from dsh.config import DshConfig
    from dsh.settings import fail

    try:
        return DshConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        fail(f"setup: the configuration would not be valid ({where}: {first['msg']}); check {path}")


def _check_address(provider: str, base_url: str | None, existing: dict[str, Any]) -> None:
    """End setup (one line, status 2) before a key is asked for or sent when *provider* is neither built in
    nor given an address (``--base-url``, or a ``base_url`` already in the file): its key would otherwise go
    to another provider's address (``--provider antropic`` with an Anthropic key to OpenAI's)."""
    from dsh.providers import ProviderSettings, address_problem
    from dsh.settings import fail

    configured = (existing.get("providers") or {}).get(provider)
    given = base_url or (configured.get("base_url") if isinstance(configured, dict) else None)
    settings = ProviderSettings(base_url=given) if isinstance(given, str) and given else None
    problem = address_problem(provider, settings, hint="give its address with --base-url")
    if problem is not None:
        fail(f"setup: --provider: {problem}", 2)


async def _check_key(config: Any, model: str, pinned: bool) -> str | None:
    """None when one small request to *model* succeeds; the reason otherwise. No retries: one request.

    The request goes only to the address the user gave (*pinned*: ``--base-url``, which then wins over a
    ``base_url_env`` variable such as ``OPENAI_BASE_URL``) or to the named built-in provider's own."""
    import anyio

    from dsh.app import load_core
    from dsh.errors import error_message
    from dsh.kernel import App
    from dsh.services.llm import GenerateRequest

    named = model.split(":", 1)[0]
    providers = {
        name: settings.model_copy(update={"retries": 0, **({"base_url_env": None} if pinned and name == named else {})})
        for name, settings in config.providers.items()
    }
    async with App() as app:
        load_core(app.ctx, providers=providers, builtin_tools=False)
        request = GenerateRequest(
            model=model, messages=[{"role": "user", "content": [{"type": "text", "text": "Say OK."}]}], max_tokens=1
        )
        try:
            with anyio.fail_after(60):
                await app.ctx.llm.generate(request)
        except Exception as exc:
            return error_message(exc)
    return None


def _write_private(path: Path, data: dict[str, Any]) -> None:
    """Write *data* as YAML to *path* with mode 0600, atomically (a temporary file in the same directory)."""
    import yaml

    from dsh.settings import fail

    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, text.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except OSError as exc:
        fail(f"setup: cannot write {path}: {exc.strerror or exc}")
