"""TUI responsiveness and memory on the large generated capture.

Measures, each in its own process (so resident memory is the process's own):

- ``pipeline``: the baseline. ``Pipeline`` (with ``meta_records``, as the TUI runs it) over
  the capture with no UI: time to the first exchange, total time, resident memory at the end.
- ``app``: ``KafkaSniffApp`` over the capture, headless (Textual's ``run_test``, 120x40),
  with the process settings of ``kafkasniff tui`` (``configure_process``; ``app-plain``:
  without them, CPython's defaults):
  time until the first rows are painted (from the app's creation, and from the process's
  start, imports included); key press (down/up in the exchanges table, posted
  every 150 ms while the capture loads, then 40 more once loaded) to the first repaint that
  shows the moved cursor (the app's ``_display`` is timed: it is what writes a frame to the
  terminal); the whole load time; resident memory at the end. Memory per exchange held is
  (RSS of the app - RSS of the pipeline baseline) / exchanges.
- ``store``: ``tracemalloc`` of the summary store alone (its columns, interned tables,
  extras and kept issues) after loading the capture without UI, per exchange.
- ``scale``: a store of ``--rows`` (default 1,000,000) exchanges (the capture's rows
  repeated): filter (errors only, one API, a topic glob), sort by latency, a search that
  matches nothing (worst case), drawing one screen of rows, and key presses in the app over
  it; next to Textual's ``DataTable`` given 100,000 of the same rows (time and memory).

Results are printed and written to ``bench/out/tui.json``. Nothing here is asserted in tests.
The machine may be shared: every ratio is against a baseline measured in the same run.

Usage::

    .venv/bin/python bench/bench_tui.py [--capture bench/data/big.pcap] [--rows 1000000]
    .venv/bin/python bench/make_big_capture.py -o bench/data/big.pcap   # if missing
"""

from __future__ import annotations

import time

_T_START = time.perf_counter()      # process start (before importing Textual and kafkasniff)

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))


def rss_mb() -> float:
    """Current resident set size (MB)."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


def pct(values: list[float], q: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))] if v else float("nan")


def summary(lat: list[float]) -> dict:
    if not lat:
        return {}
    return {"n": len(lat), "median_ms": round(statistics.median(lat), 1),
            "p90_ms": round(pct(lat, 0.9), 1), "p99_ms": round(pct(lat, 0.99), 1),
            "max_ms": round(max(lat), 1)}


# ------------------------------------------------------------------------------------ children

def child_pipeline(capture: str) -> dict:
    from kafkasniff.model import Exchange
    from kafkasniff.pipeline import Pipeline, PipelineOptions, analyze

    base = rss_mb()
    t0 = time.perf_counter()
    first = None
    n = 0
    pipe = Pipeline(PipelineOptions(meta_records=True))
    for rec in analyze([capture], pipeline=pipe):
        if type(rec) is Exchange:
            n += 1
            if first is None:
                first = time.perf_counter() - t0
    total = time.perf_counter() - t0
    gc.collect()
    return {"first_exchange_s": round(first, 3), "total_s": round(total, 1), "exchanges": n,
            "rss_start_mb": round(base, 1), "rss_end_mb": round(rss_mb(), 1)}


def child_app(capture: str, switch_interval: float | None, plain: bool) -> dict:
    from textual import events

    from kafkasniff.tui.app import KafkaSniffApp, configure_process
    from kafkasniff.tui.source import FileSource
    from kafkasniff.tui.widgets import VirtualTable

    base = rss_mb()
    t0 = time.perf_counter()
    app = KafkaSniffApp(FileSource([capture]))
    if not plain:
        configure_process()          # as `kafkasniff tui` does
    if switch_interval:
        sys.setswitchinterval(switch_interval)
    paints: list[tuple[float, int, int]] = []
    table_ref: list[VirtualTable] = []
    orig = app._display

    def hook(screen, renderable):
        if renderable is not None and table_ref:
            t = table_ref[0]
            paints.append((time.perf_counter(), t.cursor, len(t.model)))
        return orig(screen, renderable)
    app._display = hook
    out: dict = {}

    async def press_and_wait(key: str, want: int, timeout: float = 10.0) -> float | None:
        n0 = len(paints)
        ts = time.perf_counter()
        app.post_message(events.Key(key, None))
        end = ts + timeout
        while time.perf_counter() < end:
            for t, cur, _ in paints[n0:]:
                if cur == want:
                    return (t - ts) * 1000
            await asyncio.sleep(0.0005)
        return None

    async def run() -> None:
        async with app.run_test(size=(120, 40)):
            table = app.query_one("#ex-table", VirtualTable)
            table_ref.append(table)
            while not any(n > 0 for _, _, n in paints):
                await asyncio.sleep(0.002)
            first = next(t for t, _, n in paints if n > 0)
            out["first_rows_s"] = round(first - t0, 3)
            out["first_rows_since_process_start_s"] = round(first - _T_START, 3)
            loading: list[float] = []
            i = 0
            while not app.progress.finished:
                await asyncio.sleep(0.15)
                down = i % 2 == 0
                want = table.cursor + (1 if down else -1)
                lat = await press_and_wait("down" if down else "up", want)
                if lat is not None and not app.progress.finished:
                    loading.append(lat)
                i += 1
            out["load_s"] = round(time.perf_counter() - t0, 1)
            out["rows"] = len(app.store)
            idle: list[float] = []
            for i in range(40):
                await asyncio.sleep(0.05)
                down = i % 2 == 0
                want = table.cursor + (1 if down else -1)
                lat = await press_and_wait("down" if down else "up", want)
                if lat is not None:
                    idle.append(lat)
            out["key_to_paint_loading"] = summary(loading)
            out["key_to_paint_idle"] = summary(idle)
            gc.collect()
            out["rss_start_mb"] = round(base, 1)
            out["rss_end_mb"] = round(rss_mb(), 1)
            out["issues_kept"] = len(app.store.issues)

    asyncio.run(run())
    return out


def _load_store(capture: str, trace: bool):
    import tracemalloc

    from kafkasniff.tui.source import FileSource
    from kafkasniff.tui.store import SummaryStore

    if trace:
        tracemalloc.start()
    src = FileSource([capture])
    store = SummaryStore(src.tables)
    ev = threading.Event()
    src.start(ev.set)
    while True:
        ev.wait(0.5)
        ev.clear()
        u = src.drain()
        for ch in u.chunks:
            store.extend(ch)
        if u.progress is not None and u.progress.finished:
            break
    return src, store


def child_store(capture: str) -> dict:
    import tracemalloc

    src, store = _load_store(capture, trace=True)
    del src
    gc.collect()
    snap = tracemalloc.take_snapshot()
    tracemalloc.stop()
    n = len(store)
    store_file = str(ROOT / "kafkasniff" / "tui" / "store.py")
    by_file = snap.filter_traces([tracemalloc.Filter(True, store_file)])
    store_bytes = sum(s.size for s in by_file.statistics("filename"))
    cols = sum(c.buffer_info()[1] * c.itemsize for c in store.columns.values())
    # what the store holds beyond its own allocations: interned strings and kept issues
    strings = sum(sys.getsizeof(s) for t in (store.tables.endpoints, store.tables.client_ids,
                                             store.tables.names) for s in t.items if s)
    issues = sum(sys.getsizeof(t) + sys.getsizeof(t[3]) for t in store.issues)
    return {"exchanges": n, "column_bytes_per_exchange": round(cols / n, 1),
            "tracemalloc_store_py_bytes_per_exchange": round(store_bytes / n, 1),
            "interned_string_bytes_per_exchange": round(strings / n, 1),
            "kept_issue_bytes_per_exchange": round(issues / n, 1),
            "issues_kept": len(store.issues)}


def child_scale(capture: str, rows: int) -> dict:
    from kafkasniff.output.filters import Filter
    from kafkasniff.tui.models import ExchangeModel
    from kafkasniff.tui.store import SummaryChunk

    src, store = _load_store(capture, trace=False)
    base_n = len(store)
    # repeat the capture's rows up to `rows`
    t0 = time.perf_counter()
    while len(store) < rows:
        ch = SummaryChunk()
        take = min(base_n, rows - len(store))
        for k, col in store.columns.items():
            ch.columns[k] = col[:take]
        store.extend(ch)
    out: dict = {"rows": len(store), "build_s": round(time.perf_counter() - t0, 2)}

    def timed(fn):
        t = time.perf_counter()
        r = fn()
        return r, round((time.perf_counter() - t) * 1000, 1)

    view, out["view_all_ms"] = timed(lambda: store.filter_rows(None, 0, len(store)))
    for name, f in (("errors_only", Filter(errors_only=True)), ("api_produce", Filter(apis=("Produce",))),
                    ("topic_glob", Filter(topic="ks-*")),
                    ("min_latency_10ms", Filter(min_latency_ms=10))):
        comp = store.compile(f)
        r, ms = timed(lambda: store.filter_rows(comp, 0, len(store)))
        out[f"filter_{name}_ms"] = ms
        out[f"filter_{name}_rows"] = len(r)
    _, out["sort_latency_ms"] = timed(lambda: store.sort(view, "latency", True))
    _, out["sort_api_ms"] = timed(lambda: store.sort(view, "api"))
    match = store.search_matcher("no-such-thing-anywhere")
    _, out["search_no_match_ms"] = timed(lambda: sum(1 for r in view if match(r)))
    model = ExchangeModel(store, view)
    _, out["draw_40_rows_ms"] = timed(lambda: [model.cells(i) for i in range(500_000, 500_040)])
    gc.collect()
    out["rss_mb"] = round(rss_mb(), 1)
    out.update(_app_over_store(store))
    out.update(_datatable(store, 100_000))
    return out


def _app_over_store(store) -> dict:
    """The app over a store of many rows: key presses (down, page down, end) and a filter."""
    from textual import events

    from kafkasniff.output.filters import Filter
    from kafkasniff.tui.app import KafkaSniffApp
    from kafkasniff.tui.source import DataSource, Progress, SourceUpdate
    from kafkasniff.tui.store import SummaryChunk
    from kafkasniff.tui.widgets import VirtualTable

    class StoreSource(DataSource):
        """Publishes an existing store's rows in one batch."""

        title = "synthetic"

        def __init__(self) -> None:
            super().__init__()
            self.tables = store.tables
            self.sent = False

        def start(self, notify) -> None:
            notify()

        def drain(self) -> SourceUpdate:
            if self.sent:
                return SourceUpdate()
            self.sent = True
            ch = SummaryChunk()
            ch.columns = store.columns
            return SourceUpdate([ch], None, Progress(finished=True))

        def stop(self) -> None:
            pass

    app = KafkaSniffApp(StoreSource())
    paints: list[tuple[float, int]] = []
    ref: list = []
    orig = app._display

    def hook(screen, renderable):
        if renderable is not None and ref:
            paints.append((time.perf_counter(), ref[0].cursor))
        return orig(screen, renderable)
    app._display = hook
    out: dict = {}

    async def run() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            table = app.query_one("#ex-table", VirtualTable)
            ref.append(table)
            while len(app.store) < len(store.columns["ts"]):
                await asyncio.sleep(0.01)
            await pilot.pause()
            lat = {}
            page = table._body_height()
            for key, want in (("down", lambda c: c + 1), ("pagedown", lambda c: c + page),
                              ("end", lambda c: len(table.model) - 1), ("home", lambda c: 0)):
                vals = []
                for _ in range(10):
                    w = want(table.cursor)
                    n0 = len(paints)
                    ts = time.perf_counter()
                    app.post_message(events.Key(key, None))
                    end = time.perf_counter() + 20
                    while not any(c == w for _, c in paints[n0:]):
                        if time.perf_counter() > end:
                            raise SystemExit(f"no repaint with cursor {w} after {key}")
                        await asyncio.sleep(0.0005)
                    vals.append((next(t for t, c in paints[n0:] if c == w) - ts) * 1000)
                    if key in ("end", "home"):
                        app.post_message(events.Key("up" if key == "end" else "down", None))
                        await pilot.pause()
                lat[key] = round(statistics.median(vals), 1)
            out["app_key_to_paint_median_ms"] = lat
            pane = app.query_one("#exchanges-pane")
            t = time.perf_counter()
            pane.set_filter(Filter(errors_only=True))
            await pilot.pause()
            while pane._busy:
                await asyncio.sleep(0.005)
            out["app_filter_errors_only_s"] = round(time.perf_counter() - t, 2)
            t = time.perf_counter()
            pane.sort_by("latency", True)
            await pilot.pause()
            while pane._busy:
                await asyncio.sleep(0.005)
            out["app_sort_latency_s"] = round(time.perf_counter() - t, 2)

    asyncio.run(run())
    return out


def _datatable(store, n: int) -> dict:
    """Textual's DataTable with ``n`` of the same rows: time to add them and memory."""
    from array import array

    from textual.app import App
    from textual.widgets import DataTable

    from kafkasniff.tui.models import EXCHANGE_COLUMNS, ExchangeModel

    model = ExchangeModel(store, array("i", range(n)))
    rows = [tuple(c[0] if type(c) is tuple else c for c in model.cells(i)) for i in range(n)]
    out: dict = {}

    class DT(App):
        def compose(self):
            yield DataTable()

    async def run() -> None:
        app = DT()
        async with app.run_test(size=(120, 40)) as pilot:
            dt = app.query_one(DataTable)
            dt.add_columns(*[c.label for c in EXCHANGE_COLUMNS])
            gc.collect()
            before = rss_mb()
            t = time.perf_counter()
            dt.add_rows(rows)
            await pilot.pause()
            out["datatable_add_rows_s"] = round(time.perf_counter() - t, 2)
            t = time.perf_counter()
            dt.move_cursor(row=n // 2)
            await pilot.pause()
            out["datatable_move_cursor_s"] = round(time.perf_counter() - t, 3)
            gc.collect()
            out["datatable_rss_growth_mb"] = round(rss_mb() - before, 1)
            out["datatable_rows"] = n

    asyncio.run(run())
    return out


# ------------------------------------------------------------------------------------ driver

def run_child(mode: str, args: argparse.Namespace, *extra: str) -> dict:
    cmd = [sys.executable, __file__, "--child", mode, "--capture", str(args.capture),
           "--rows", str(args.rows), *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{mode} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--capture", type=Path, default=HERE / "data" / "big.pcap")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--child", default=None)
    ap.add_argument("--switch-interval", type=float, default=None)
    ap.add_argument("--skip", default="app-plain", help="comma list of parts to skip "
                                                        "(pipeline,app,app-plain,store,scale)")
    ap.add_argument("--json-out", type=Path, default=HERE / "out" / "tui.json")
    args = ap.parse_args(argv)
    if args.child:
        fn = {"pipeline": lambda: child_pipeline(str(args.capture)),
              "app": lambda: child_app(str(args.capture), args.switch_interval, False),
              "app-plain": lambda: child_app(str(args.capture), None, True),
              "store": lambda: child_store(str(args.capture)),
              "scale": lambda: child_scale(str(args.capture), args.rows)}[args.child]
        print(json.dumps(fn()))
        return 0
    if not args.capture.exists():
        print(f"{args.capture} is missing: run .venv/bin/python bench/make_big_capture.py "
              f"-o {args.capture}", file=sys.stderr)
        return 2
    skip = set(filter(None, args.skip.split(",")))
    res: dict = {"capture": str(args.capture), "capture_bytes": args.capture.stat().st_size,
                 "loadavg_start": os.getloadavg()}
    for mode in ("pipeline", "app", "app-plain", "store", "scale"):
        if mode in skip:
            continue
        t = time.perf_counter()
        extra = ["--switch-interval", str(args.switch_interval)] if \
            mode == "app" and args.switch_interval else []
        res[mode] = run_child(mode, args, *extra)
        print(f"{mode} ({time.perf_counter() - t:.0f} s): {json.dumps(res[mode])}", flush=True)
    if "pipeline" in res and "app" in res:
        p, a = res["pipeline"], res["app"]
        n = a["rows"]
        res["memory_per_exchange_bytes"] = round((a["rss_end_mb"] - p["rss_end_mb"]) * 1e6 / n)
        res["app_rss_growth_per_exchange_bytes"] = round(
            (a["rss_end_mb"] - a["rss_start_mb"]) * 1e6 / n)
        res["load_time_ratio_to_pipeline"] = round(a["load_s"] / p["total_s"], 2)
    res["loadavg_end"] = os.getloadavg()
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    args.json_out.write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
