"""The one test-support package: everything a test needs to spawn the daemon, drive it, or stand in for a provider.

* :mod:`tests.support.env` — the sandboxed environment of a spawned daemon and scripted-model scripts.
* :mod:`tests.support.sdk` — the official ACP Python SDK client against ``python -m dsh acp`` (frame checks).
* :mod:`tests.support.images` — real PNG, JPEG, GIF and WebP files made in memory.
* :mod:`tests.support.raw` — raw JSON-RPC lines to a daemon (hostile input, framing, purity).
* :mod:`tests.support.acp_schema` — a client of our own that advertises the 2026 capabilities (sub-agents, plans,
  notices), every frame both ways validated against the TypeScript SDK 2.4.0's JSON schemas (``tests/acp_schema``).
* :mod:`tests.support.editor` — an SDK client that plays an editor with fs / terminal capabilities.
* :mod:`tests.support.durable` — daemons over a shared data directory (restart, load, crash).
* :mod:`tests.support.chat` — ``dsh chat`` piped, or in a real terminal (tmux: keys in, screen out), its
  ``--trace`` frames checked against the SDK's schema.
* :mod:`tests.support.headless` — ``dsh exec`` as a subprocess: a finished run, or a running one read line by
  line and interrupted.
* :mod:`tests.support.recordings` — a session recorded with ``dsh acp --record`` through the editor client, and
  ``dsh replay`` run as a subprocess.
* :mod:`tests.support.provider_server` / :mod:`tests.support.provider_wire` — a real HTTP server on 127.0.0.1
  speaking the providers' streaming formats, and the chunks it sends.
* :mod:`tests.support.subagent_tools` — daemon-side tools for sub-agent tests: a barrier that proves overlap, a
  call that blocks until cancelled.
* :mod:`tests.support.counting_model` / :mod:`tests.support.bulk_tool` — a model at that server that counts
  what it is sent and refuses what passes its window, and a daemon-side tool of known output size (long turns).

New harness code goes here, never into a test folder of its own.
"""
