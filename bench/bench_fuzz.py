"""The long fuzz run: coverage-guided (atheris, libFuzzer) mutation of the committed captures
through the in-process target ``tests/support/fuzz_target.py``, under a 1 GiB address-space
cap, then every command of the CLI on what it found.

``--workers`` processes (default: one per core) each run libFuzzer for ``--minutes`` with its
own corpus (seeded with ``captures/*.pcap`` and the regression captures), the structure-aware
mutator of the target (packets changed, dropped, duplicated, swapped; payload bytes mutated
by libFuzzer's own mutator; the file truncated) and ``RLIMIT_AS`` = 1 GiB. libFuzzer writes
``crash-*`` (an exception or a broken promise: internal_error issue, byte ledger not adding
up), ``timeout-*`` (an input running over ``--timeout`` seconds: a hang) and ``oom-*``
artifacts. Afterwards every artifact and the newest ``--replay`` corpus entries of each
worker run through ``read``, ``read --json --records``, ``stats --json`` and ``export
--records`` as subprocesses under the same cap: each must exit 0 or 2 with a one-line error.

Prints inputs run, inputs per second, crashes, hangs, out-of-memory, peak RSS (libFuzzer's
``stat::peak_rss_mb``) and the replay's exits. A crasher is committed as
``captures/regressions/fuzz-<hash>.pcap`` with a test (see ``captures/craft_regressions.py``).

Usage::

    .venv/bin/pip install -e '.[bench]'          # atheris
    .venv/bin/python bench/bench_fuzz.py [--minutes 10] [--workers 2] [--out bench/data/fuzz]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CAP_BYTES = 1 << 30
MAX_LEN = 256 * 1024
MAX_SEED = 128 * 1024
COMMANDS = (["read", "-q"], ["read", "-q", "--json", "--records"], ["stats", "--json"],
            ["export", "--records", "-o", "{out}"])


def cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CAP_BYTES, CAP_BYTES))


def seeds() -> list[Path]:
    caps = sorted((ROOT / "captures").glob("*.pcap"))
    caps += sorted((ROOT / "captures" / "regressions").glob("*.pcap"))
    return [p for p in caps if p.stat().st_size <= MAX_SEED]


# ------------------------------------------------------------------------- worker (atheris)

def worker(argv: list[str]) -> None:
    """Run inside a worker process: libFuzzer arguments in ``argv``."""
    import atheris

    sys.path.insert(0, str(ROOT))
    with atheris.instrument_imports(include=["kafkasniff", "tests.support.fuzz_target"]):
        from tests.support import fuzz_target as ft

    def one_input(data: bytes) -> None:
        ft.check(data, ft.Mode.of(zlib.crc32(data) & 15))

    def custom_mutator(data: bytes, max_size: int, seed: int) -> bytes:
        rng = random.Random(seed)
        if rng.random() < 0.15:
            return atheris.Mutate(data, max_size)
        out = ft.mutate(data, rng, bytes_mutator=atheris.Mutate)
        return out[:max_size]

    cap_memory()
    atheris.Setup([sys.argv[0], *argv], one_input, custom_mutator=custom_mutator)
    atheris.Fuzz()


# ------------------------------------------------------------------------- parent

def _worker_loop(w: int, args, out: Path) -> dict:
    """One worker: libFuzzer until ``--minutes`` are spent, restarted after each artifact
    (libFuzzer stops at the first crash, hang or out-of-memory)."""
    corpus = out / f"corpus-{w}"
    corpus.mkdir(parents=True, exist_ok=True)
    for p in seeds():
        shutil.copy(p, corpus / p.name)
    art = out / "artifacts"
    art.mkdir(exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    deadline = time.time() + args.minutes * 60
    runs = peak = restarts = 0
    logs = []
    while (left := int(deadline - time.time())) > 5:
        cmd = [sys.executable, __file__, "--worker", "--", str(corpus),
               f"-max_total_time={left}", f"-timeout={args.timeout}",
               f"-rss_limit_mb={CAP_BYTES >> 20}", f"-max_len={MAX_LEN}",
               f"-seed={w * 1000 + restarts + 1}", f"-artifact_prefix={art}/",
               "-print_final_stats=1", "-close_fd_mask=1"]
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                              cwd=ROOT, text=True, errors="replace")
        text = proc.stdout
        logs.append(text)
        stat = dict(re.findall(r"stat::(\w+):\s*(\d+)", text))
        execs = [int(x) for x in re.findall(r"^#(\d+)\s", text, re.M)]
        runs += int(stat.get("number_of_executed_units", max(execs or [0])))
        peak = max(peak, int(stat.get("peak_rss_mb", 0)),
                   *[int(x) for x in re.findall(r"rss: (\d+)Mb", text)])
        restarts += 1
        if proc.returncode == 0:
            break
    (out / f"worker-{w}.log").write_text("\n".join(logs))
    return {"worker": w, "runs": runs, "peak_rss_mb": peak, "restarts": restarts - 1}


def run_workers(args, out: Path) -> list[dict]:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(args.workers) as pool:
        return list(pool.map(lambda w: _worker_loop(w, args, out), range(args.workers)))


def replay(paths: list[Path], out: Path) -> list[tuple[str, str, int, str]]:
    """Every command on each path under the cap: (path, command, exit, stderr tail)."""
    bad = []
    env = dict(os.environ)     # what users run: no allocator settings (peak export ~530 MiB)
    for p in paths:
        for cmd in COMMANDS:
            with tempfile.TemporaryDirectory(dir=out) as tmp:
                argv = [a.format(out=tmp + "/x") for a in cmd]
                try:
                    proc = subprocess.run([sys.executable, "-m", "kafkasniff.cli", *argv, str(p)],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                          text=True, env=env, cwd=ROOT, preexec_fn=cap_memory,
                                          timeout=300)
                except subprocess.TimeoutExpired:
                    bad.append((p.name, " ".join(cmd), -1, "timeout"))
                    continue
                err = proc.stderr.strip()
                one_line = proc.returncode == 2 and "\n" not in err and "Traceback" not in err
                if proc.returncode != 0 and not one_line:
                    bad.append((p.name, " ".join(cmd), proc.returncode, err[-400:]))
    return bad


def main() -> None:
    if "--worker" in sys.argv:
        worker(sys.argv[sys.argv.index("--") + 1:])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--timeout", type=int, default=120, help="seconds before an input is a hang")
    ap.add_argument("--replay", type=int, default=25,
                    help="newest corpus entries per worker replayed through the CLI")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "data" / "fuzz")
    args = ap.parse_args()
    try:
        import atheris  # noqa: F401
    except ImportError:
        raise SystemExit("atheris is not installed: .venv/bin/pip install -e '.[bench]'")
    if args.out.exists():
        shutil.rmtree(args.out)
    args.out.mkdir(parents=True)
    t0 = time.time()
    results = run_workers(args, args.out)
    wall = time.time() - t0
    runs = sum(r["runs"] for r in results)
    art = sorted((args.out / "artifacts").glob("*"))
    kinds = {k: [a for a in art if a.name.startswith(k)] for k in ("crash-", "timeout-", "oom-")}
    print(f"{args.workers} workers x {args.minutes:g} min under RLIMIT_AS {CAP_BYTES >> 20} MiB: "
          f"{runs} inputs in {wall:.0f} s ({runs / wall:.0f}/s); crashes "
          f"{len(kinds['crash-'])}, hangs {len(kinds['timeout-'])}, out of memory "
          f"{len(kinds['oom-'])}; peak RSS {max(r['peak_rss_mb'] for r in results)} MB")
    for r in results:
        print(f"  worker {r['worker']}: {r['runs']} inputs, peak RSS {r['peak_rss_mb']} MB, "
              f"restarted {r['restarts']} times after an artifact")
    newest = []
    for w in range(args.workers):
        corpus = sorted((args.out / f"corpus-{w}").iterdir(), key=lambda p: p.stat().st_mtime)
        newest += corpus[-args.replay:]
    paths = art + newest
    t1 = time.time()
    bad = replay(paths, args.out)
    print(f"replay: {len(paths)} inputs x {len(COMMANDS)} commands under the cap in "
          f"{time.time() - t1:.0f} s: {len(bad)} not exit 0 or a one-line error")
    for name, cmd, code, err in bad:
        print(f"  {name}: {cmd}: exit {code}: {err}")
    for a in art:
        print(f"  artifact {a}")


if __name__ == "__main__":
    main()
