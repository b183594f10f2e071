"""fetch_url conversion benchmark (issue 34 item 4): the time and peak RSS of turning a 460 KB and a 5 MB HTML page
into what the model reads, and how long the daemon's event loop is held meanwhile; also the loop's hold during a
1 MB edit miss (the matcher off the loop).

Each measurement runs in a fresh process (so ``ru_maxrss`` is its own peak): the conversion as ``fetch_url`` does it
now (the worker process, :func:`dsh.tools._fetch._convert`), with the caller's peak RSS and the worker's
(``RUSAGE_CHILDREN``); the loop's longest hold is the largest delay of a 5 ms ticker running beside it.
``--inline`` also measures the old way (markdownify in the caller's process, for the 460 KB page only: the 5 MB
one took over 120 s). Not a test: it prints numbers and never fails on them. The machine is shared: run it more
than once.

Run: ``.venv/bin/python scripts/bench_fetch.py [--inline]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time
import anyio

what, size = sys.argv[1], int(sys.argv[2])

def page(size):
    cell = ("<div class='section'><h2>Heading</h2><p>Some <b>bold</b> and <i>italic</i> text with "
            "<a href='/x'>a link</a> and <code>code()</code>.</p><ul><li>one</li><li>two</li></ul></div>\n")
    return "<html><head><title>Docs</title></head><body><main>" + cell * (size // len(cell)) + "</main></body></html>"

async def main():
    html = page(size)
    worst = 0.0
    done = False

    async def ticker():
        nonlocal worst
        while not done:
            start = time.perf_counter()
            await anyio.sleep(0.005)
            worst = max(worst, time.perf_counter() - start - 0.005)

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    note = ""
    async with anyio.create_task_group() as group:
        group.start_soon(ticker)
        await anyio.sleep(0.05)
        start = time.perf_counter()
        if what == "worker":
            from dsh.tools._fetch import _convert
            text, note = await _convert(html, "http://bench/")
        elif what == "inline":
            from dsh.tools._fetch import html_to_markdown
            text = html_to_markdown(html)
        else:  # edit: a 1 MB miss through run_cpu
            from functools import partial
            from dsh.tools._edits import Edit, plan_edits
            from dsh.tools._offload import run_cpu
            from dsh.tools._errors import ToolError
            big = "a line of the big file\n" * (size // 23)
            try:
                await run_cpu(partial(plan_edits, big, [Edit("not in the file\n" * 40, "x")]), timeout=60, what="bench")
            except ToolError:
                pass
            text = ""
        seconds = time.perf_counter() - start
        done = True
    print(json.dumps({
        "seconds": seconds, "loop_hold_ms": worst * 1000, "note": note, "chars": len(text),
        "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "base_mib": base / 1024,
        "worker_rss_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    }))

anyio.run(main)
"""


def measure(what: str, size: int) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", CHILD, what, str(size)], capture_output=True, text=True)
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1]}
    result: dict[str, object] = json.loads(out.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--inline", action="store_true", help="also the old in-process conversion (460 KB page)")
    args = parser.parse_args()
    runs = [("worker", 460_000), ("worker", 5_000_000), ("edit", 1_000_000)]
    if args.inline:
        runs.insert(0, ("inline", 460_000))
    for what, size in runs:
        r = measure(what, size)
        if "error" in r:
            print(f"{what:7} {size / 1e6:5.2f} MB: failed: {r['error']}")
            continue
        print(
            f"{what:7} {size / 1e6:5.2f} MB: {r['seconds']:6.2f} s, loop held at most {r['loop_hold_ms']:6.1f} ms, "
            f"caller peak RSS {r['rss_mib']:6.0f} MiB (baseline {r['base_mib']:.0f}), worker peak RSS "
            f"{r['worker_rss_mib']:6.0f} MiB" + (f" [{r['note']}]" if r["note"] else "")
        )


if __name__ == "__main__":
    main()
