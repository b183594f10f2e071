"""Run ``dsh acp`` and record which modules were imported when the answer to ``initialize`` was written.

Run as a script (``python tests/support/startup_probe.py OUT``), never imported: it imports nothing but what
the interpreter already has (``os``, ``sys``), wraps ``os.write`` so that the first write carrying
``"protocolVersion"`` (the answer to ``initialize``) first dumps ``sorted(sys.modules)`` to the file OUT, then
runs the daemon exactly as the ``dsh`` console script does for ``dsh acp``.
"""

import os
import sys

_out = sys.argv[1]
_write = os.write
_dumped = []


def _probing_write(fd: int, data: bytes, /) -> int:
    if not _dumped and b'"protocolVersion"' in bytes(data[:65536]):
        _dumped.append(True)
        with open(_out, "w", encoding="utf-8") as file:
            file.write("\n".join(sorted(sys.modules)))
    return _write(fd, data)


os.write = _probing_write
sys.argv = ["dsh", "acp"]
from dsh._entry import main  # noqa: E402

main()
