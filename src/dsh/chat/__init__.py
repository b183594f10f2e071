"""``dsh chat``: a terminal client for dsh, or for any ACP agent (``--agent``).

The chat starts the agent as a subprocess and speaks ACP to it over its stdin and stdout; it never talks to the
loop directly. On a terminal it draws with rich and reads with prompt_toolkit (both imported only when the chat
runs); without one it reads one prompt per line and prints plain text. See ``README.md`` here and RFC 0021.
"""

from __future__ import annotations

from dsh.chat._cli import main

__all__ = [
    "main",
]
