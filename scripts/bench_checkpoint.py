"""Checkpoint benchmark (issue 34 item 5): the time and peak RSS of checkpointing one large file, and what it costs
the blob store, in a fresh process per measurement (so ``ru_maxrss`` is this checkpoint's peak alone).

Shapes: a file of ``--size`` MiB of incompressible data (1 GiB by default), the same size sparse (a 1-byte write in
the middle of a hole), and the hash alone (what ``checkpoint/after`` costs). Printed: seconds, peak RSS of the
process (MiB; an interpreter with dsh's checkpoint modules imported and nothing else is printed as the
baseline), blocks the store object takes. Not a test: it prints numbers and never fails on them. The machine is
shared: run it more than once.

Run: ``.venv/bin/python scripts/bench_checkpoint.py [--size MIB]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, resource, sys, time
from pathlib import Path
from dsh.checkpoints._files import checkpoint_local, state_local
from dsh.plugins.persistence import BlobStore
path, blobs, what = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
if what == "hash":
    state = state_local(path)
else:
    state = checkpoint_local(path, BlobStore(blobs), "bench.checkpoints")
took = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
blocks = 0
if what != "hash":
    stored = blobs / "objects" / state.digest[:2] / state.digest
    blocks = stored.stat().st_blocks * 512
print(json.dumps({"seconds": took, "peak_mib": peak / 1024, "base_mib": base / 1024, "stored_mib": blocks / 2**20}))
"""


def measure(path: Path, blobs: Path, what: str) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), str(blobs), what], capture_output=True, text=True, check=True
    )
    result: dict[str, float] = json.loads(done.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024, help="file size in MiB (default 1024)")
    args = parser.parse_args()
    size = args.size << 20
    with tempfile.TemporaryDirectory(prefix="dsh-bench-checkpoint-") as tmp:
        root = Path(tmp)
        dense = root / "dense.bin"
        block = os.urandom(1 << 20)
        with dense.open("wb") as file:
            for index in range(args.size):
                file.write(bytes([index & 0xFF]) + block[1:])
        sparse = root / "sparse.img"
        with sparse.open("wb") as file:
            file.truncate(size)
            file.seek(size // 2)
            file.write(b"x")
        print(f"checkpoint of a {args.size} MiB file (fresh process each; RSS in MiB):")
        for label, path, what in (
            ("dense, stored", dense, "store"),
            ("dense, hash only", dense, "hash"),
            ("sparse, stored", sparse, "store"),
        ):
            blobs = root / f"blobs-{what}-{path.stem}"
            figures = measure(path, blobs, what)
            print(
                f"  {label:18} {figures['seconds']:6.2f} s  peak RSS {figures['peak_mib']:6.1f}"
                f" (interpreter + modules {figures['base_mib']:5.1f})  store +{figures['stored_mib']:7.1f} MiB"
            )


if __name__ == "__main__":
    main()
