"""Speed and memory of the working tree next to an earlier revision, on the same capture.

Checks out ``REV`` into a temporary git worktree and runs ``kafkasniff stats`` and ``kafkasniff
read --json`` from both trees with the same interpreter (``PYTHONPATH`` selects the tree: the
project is installed in editable mode, so the path wins over the installed copy), alternating
old and new ``--rounds`` times so that a busy machine slows both alike. Prints wall seconds and
peak RSS (``/usr/bin/time``) of every run. Timings are measured here, never asserted in tests.

Usage::

    .venv/bin/python bench/bench_revisions.py REV [--capture bench/data/big.pcap] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import make_big_capture

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
COMMANDS = {"stats": ["stats"], "read --json": ["read", "-q", "--json"]}


def timed(tree: Path, args: list[str]) -> tuple[float, int]:
    """(wall seconds, peak RSS KiB) of ``kafkasniff ARGS`` run from ``tree``."""
    cmd = ["/usr/bin/time", "-f", "%e %M", sys.executable, "-m", "kafkasniff.cli", *args]
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"})
    if proc.returncode != 0:
        raise SystemExit(f"{tree}: kafkasniff {' '.join(args)} failed: {proc.stderr[-500:]}")
    wall, rss = proc.stderr.strip().splitlines()[-1].split()
    return float(wall), int(rss)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rev", help="git revision to compare with (e.g. HEAD~10)")
    ap.add_argument("--capture", type=Path, default=HERE / "data" / "big.pcap")
    ap.add_argument("--packets", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json-out", type=Path, default=HERE / "out" / "revisions.json")
    args = ap.parse_args(argv)
    make_big_capture.ensure(args.capture, args.packets)
    results: dict[str, dict[str, list]] = {c: {"old": [], "new": []} for c in COMMANDS}
    with tempfile.TemporaryDirectory(prefix="kafkasniff-rev-") as tmp:
        old = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(old),
                        args.rev], check=True, capture_output=True)
        try:
            for _ in range(args.rounds):
                for name, cmd in COMMANDS.items():
                    for side, tree in (("old", old), ("new", ROOT)):
                        wall, rss = timed(tree, cmd + [str(args.capture)])
                        results[name][side].append((wall, rss))
                        print(f"{name:12s} {side:3s} {wall:7.1f} s  {rss / 1024:6.0f} MB",
                              flush=True)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)],
                           capture_output=True)
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    args.json_out.write_text(json.dumps({"rev": args.rev, "capture": str(args.capture),
                                         "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
