"""``spark watch``: windowed aggregates over a directory of exported files (available-now)."""

from __future__ import annotations

import math
import os
from collections import defaultdict
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from kafkasniff.export.schema import SCHEMAS
from kafkasniff.cli.spark import spark_group
from kafkasniff.spark.watch import WATCH_COLUMNS, run_watch

from .test_report import arrow_rows

# in arrival order (file modification times); the last one's rows are 47 minutes older than
# the newest seen before it
ARRIVALS = ["librdkafka_errors_latency.pcap", "kafka_python_codecs.pcap",
            "kafka_python_legacy.pcap", "librdkafka_produce_consume.pcap"]
THROTTLED = "kafka_python_legacy.pcap"


@pytest.fixture(scope="module")
def watch_dir(exported, tmp_path_factory) -> tuple[Path, dict[str, list[dict]]]:
    """``DIR/exchanges`` with one file per capture, arriving in ``ARRIVALS`` order; one gets
    throttle times (no committed capture is throttled)."""
    d = tmp_path_factory.mktemp("watch")
    (d / "exchanges").mkdir()
    rows = defaultdict(list)
    for r in arrow_rows(exported, "exchanges"):
        rows[r["capture"]].append(r)
    used = {}
    t0 = 1_700_000_000
    for k, name in enumerate(ARRIVALS):
        rs = rows[name]
        if name == THROTTLED:
            rs = [dict(r, throttle_time_ms=(i % 3) * 100) for i, r in enumerate(rs)]
        path = d / "exchanges" / f"part-{name}-0.parquet"
        pq.write_table(pa.Table.from_pylist(rs, schema=SCHEMAS["exchanges"]), path)
        os.utime(path, (t0 + k * 10, t0 + k * 10))
        used[name] = rs
    return d, used


def expected(rows: list[dict]) -> dict:
    """(window start minute, api) -> (exchanges, errors, paired, max, throttled, throttle
    total, sorted latencies)."""
    groups = defaultdict(list)
    for r in rows:
        groups[(r["ts"].replace(second=0, microsecond=0), r["api_name"])].append(r)
    out = {}
    for k, rs in groups.items():
        paired = sum(1 for r in rs if r["status"] == "paired")
        lat = sorted(max(r["latency_ns"], 0) for r in rs
                     if r["status"] == "paired" and not r["long_poll"])
        out[k] = (len(rs), sum(1 for r in rs if r["error_count"] > 0), paired,
                  lat[-1] if lat else None, sum(1 for r in rs if (r["throttle_time_ms"] or 0) > 0),
                  sum(r["throttle_time_ms"] for r in rs if (r["throttle_time_ms"] or 0) > 0), lat)
    return out


def watch_result(spark, d: Path, watermark: str) -> tuple[dict, list[int]]:
    """Run an available-now watch; the last update of every (window, api) and the batch ids
    that printed rows."""
    final = {}
    batches = []

    def on_batch(batch_id, rows):
        if rows:
            batches.append(batch_id)
        for r in rows:
            final[(r["window_start"].replace(tzinfo=None), r["api_name"])] = r

    run_watch(spark, str(d), watermark=watermark, available_now=True, max_files_per_trigger=1,
              on_batch=on_batch, echo=lambda s: None, timeout_s=240)
    return final, batches


def check(final: dict, want: dict) -> None:
    assert set(final) == {(k[0].replace(tzinfo=None), k[1]) for k in want}
    for (w, api), (n, err, paired, mx, thr, thr_total, lat) in want.items():
        r = final[(w.replace(tzinfo=None), api)]
        assert (r["exchanges"], r["error_exchanges"], r["paired"], r["max_ns"], r["throttled"],
                r["throttle_total_ms"]) == (n, err, paired, mx, thr, thr_total), (w, api)
        assert (r["window_end"] - r["window_start"]).total_seconds() == 60
        for q, col in ((0.5, "p50_ns"), (0.99, "p99_ns")):
            if not lat:
                assert r[col] is None
                continue
            i = math.ceil(q * len(lat)) - 1   # percentile_approx: exact sample, rank ±1
            assert r[col] in lat[max(0, i - 1):i + 2], (w, api, q)


def test_watch_windows_all_files(spark, watch_dir) -> None:
    d, used = watch_dir
    final, batches = watch_result(spark, d, "1 day")
    check(final, expected([r for rs in used.values() for r in rs]))
    assert len(batches) == len(ARRIVALS)   # one file per micro-batch
    assert any(r["throttle_total_ms"] > 0 for r in final.values())


def test_watermark_drops_late_files(spark, watch_dir) -> None:
    """With a 10-minute watermark the last file, 47 minutes behind the newest data, is late:
    its rows are dropped, the others are counted as before. (Spark drops late rows with the
    watermark of the previous micro-batch: here batch 3 uses the one set after batch 1.)"""
    d, used = watch_dir
    final, _ = watch_result(spark, d, "10 minutes")
    late = ARRIVALS[-1]
    check(final, expected([r for name, rs in used.items() if name != late for r in rs]))


def test_watch_command(spark, watch_dir, tmp_path) -> None:
    d, _ = watch_dir
    args = ["watch", str(d), "--available-now", "--watermark", "1 day",
            "--max-files-per-trigger", "2", "--checkpoint", str(tmp_path / "ckpt")]
    res = CliRunner().invoke(spark_group, args)
    assert res.exit_code == 0, res.output
    assert "batch 0:" in res.output and "batch 1:" in res.output
    header = [line for line in res.output.splitlines() if line.startswith("window_start")][0]
    assert header.split()[:3] == ["window_start", "window_end", "api_name"]
    assert "Fetch" in res.output and "p99 ms" in res.output
    assert len(WATCH_COLUMNS) == 12 and "long_polls" in WATCH_COLUMNS
    # the checkpoint remembers the files: a second run has nothing new to print
    again = CliRunner().invoke(spark_group, args)
    assert again.exit_code == 0, again.output
    assert "batch" not in again.output
