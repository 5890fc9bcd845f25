"""``spark report``: views, reports, percentiles against ``kafkasniff stats``, ``--sql``."""

from __future__ import annotations

import json
import math
import shutil
from collections import Counter, defaultdict
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from kafkasniff.cli.spark import spark_group
from kafkasniff.export.schema import SCHEMAS, TABLES
from kafkasniff.spark.report import QUANTILES, REPORTS, _latency_report, read_table, register_views

from .conftest import ALL_CAPTURES, all_broker_ports

THROTTLED = "synthetic_throttled.pcap"


def arrow_rows(root: Path, table: str) -> list[dict]:
    return ds.dataset(str(root / table), format="parquet",
                      schema=SCHEMAS[table]).to_table().to_pylist()


def add_throttled_capture(root: Path, source_rows: list[dict]) -> list[dict]:
    """Write a copy of some exchanges as capture ``THROTTLED`` with throttle times (none of
    the committed captures is throttled)."""
    rows = []
    for k, r in enumerate(source_rows):
        r = dict(r, capture=THROTTLED, throttle_time_ms=(k % 4) * 250)
        rows.append(r)
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMAS["exchanges"]),
                   root / "exchanges" / f"part-{THROTTLED}-0.parquet")
    return rows


@pytest.fixture(scope="module")
def report_dir(exported, tmp_path_factory) -> Path:
    """A copy of the export of every capture plus a throttled synthetic capture."""
    d = tmp_path_factory.mktemp("report") / "tables"
    shutil.copytree(exported, d)
    legacy = [r for r in arrow_rows(d, "exchanges") if r["capture"] == "kafka_python_legacy.pcap"]
    add_throttled_capture(d, legacy)
    return d


# ---------------------------------------------------------------------------- views

def test_views_have_the_documented_schema(spark, report_dir) -> None:
    from pyspark.sql.types import _parse_datatype_string

    from kafkasniff.export.schema import spark_ddl

    views = register_views(spark, report_dir)
    assert set(TABLES) <= set(views)
    for table in TABLES:
        want = _parse_datatype_string(spark_ddl(table))
        got = views[table].schema
        assert [(f.name, f.dataType) for f in got] == [(f.name, f.dataType) for f in want]
    assert spark.table("topic_names").columns == ["topic_id", "topic_name"]
    assert spark.table("exchange_topics").columns[-1] == "topic"
    assert spark.table("partition_topics").columns[-1] == "topic_name"


def test_partitioned_and_missing_tables(spark, tmp_path) -> None:
    from kafkasniff.export.writer import export_captures

    out = tmp_path / "p"
    export_captures([ALL_CAPTURES[0]], out, partition_by=("date", "hour"))
    shutil.rmtree(out / "topic_ids")
    df = read_table(spark, out, "exchanges")
    assert df.columns == SCHEMAS["exchanges"].names        # date/hour back in place
    assert read_table(spark, out, "records") is None
    views = register_views(spark, out)
    assert "topic_ids" not in views and "records" not in views
    # topic ids stay unresolved without the topic_ids table, the views still work: one row
    # per exchange and distinct topic name or id it carries
    want = Counter(t for r in arrow_rows(out, "exchanges")
                   for t in dict.fromkeys(r["topics"] + r["topic_ids"]))
    got = Counter(r["topic"] for r in spark.table("exchange_topics").select("topic").collect())
    assert got == want and sum(want.values()) > 0


# ---------------------------------------------------------------------------- percentiles

def stats_json(pcap: Path) -> dict:
    from kafkasniff.cli import main

    args = ["stats", "--json"]
    for p in sorted(all_broker_ports()):
        args += ["--port", str(p)]
    res = CliRunner().invoke(main, args + [str(pcap)])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def sample_ranks(xs: list[int], value: int) -> list[int]:
    return [k for k, x in enumerate(xs) if x == value]


def test_percentiles_agree_with_stats(spark, exported) -> None:
    """Both tools estimate the same percentiles of the same latencies by one rank rule,
    nearest rank (rank ceil(p*n), 1-based), each within its own documented guarantee.

    - percentile_approx(accuracy=10000) returns a value of the column whose 1-based rank is
      within n/10000 of ceil(p*n); for these small groups (n < 10000) the summary holds every
      value: the answer is x[i] with i = ceil(p*n) - 1 (0-based, x sorted).
    - stats' DDSketch (relative accuracy 1 %), read at the same rank, returns a value within
      1 % of x[i].
    So the two agree within 1 %. Maxima are exact in both.
    """
    views = register_views(spark, exported)
    assert "exchanges" in views
    dims = {
        "apis": ("exchanges", "concat_ws('|', capture, api_name)"),
        "clients": ("exchanges", "concat_ws('|', capture, coalesce(client_id, '(none)'))"),
        "brokers": ("exchanges", "concat_ws('|', capture, broker)"),
        "topics": ("exchange_topics", "concat_ws('|', capture, topic)"),
    }
    spark_rows = {}
    for dim, (src, key) in dims.items():
        for r in _latency_report(spark, src, key, "k").collect():
            spark_rows[(dim, r["k"])] = r
    # the exact latencies from the exchanges table (the population of both tools)
    lat: dict = defaultdict(list)
    names = {}
    for r in arrow_rows(exported, "exchanges"):
        if r["status"] != "paired" or r["latency_ns"] is None or r["long_poll"]:
            continue    # long-polls are apart in both tools
        v = max(r["latency_ns"], 0)
        c = r["capture"]
        lat[("apis", f"{c}|{r['api_name']}")].append(v)
        lat[("clients", f"{c}|{r['client_id'] or '(none)'}")].append(v)
        lat[("brokers", f"{c}|{r['broker']}")].append(v)
        names[r["exchange_id"]] = r
    topic_lat = defaultdict(list)
    for r in spark.sql("SELECT capture, topic, status, latency_ns FROM exchange_topics "
                       "WHERE status = 'paired' AND latency_ns IS NOT NULL "
                       "AND NOT long_poll").collect():
        topic_lat[("topics", f"{r['capture']}|{r['topic']}")].append(max(r["latency_ns"], 0))
    lat.update(topic_lat)

    checked = Counter()
    exact = 0
    for pcap in ALL_CAPTURES:
        st = stats_json(pcap)
        for dim in dims:
            for key, row in st[dim].items():
                k = (dim, f"{pcap.name}|{key}")
                srow = spark_rows.get(k)
                if srow is None or row["latency_count"] == 0:
                    continue   # e.g. stats names SaslToken exchanges "Unknown"
                xs = sorted(lat[k])
                n = len(xs)
                assert srow["long_polls"] == row["long_polls"] or dim == "topics", k
                if n != row["latency_count"] or n != srow["paired"] - srow["long_polls"]:
                    # topics: stats resolves ids only through responses seen earlier
                    assert dim == "topics", (k, n, row["latency_count"], srow["paired"])
                    continue
                assert srow["max_ns"] == row["latency_max_ns"] == xs[-1], k
                for q in QUANTILES:
                    col = f"p{round(q * 100)}_ns"
                    sv = srow[col]
                    dd = row[f"latency_p{round(q * 100)}_ns"]
                    i = math.ceil(q * n) - 1
                    ranks = sample_ranks(xs, sv)
                    assert ranks and min(abs(r - i) for r in ranks) <= 1, (k, q, sv, xs[i])
                    exact += sv == xs[i]
                    assert abs(dd - xs[i]) <= 0.01 * xs[i] + 1, (k, q, dd, xs[i])
                    assert abs(dd - sv) <= 0.01 * sv + 1, (k, q, dd, sv)
                    checked[dim] += 1
    assert checked["apis"] > 100 and checked["clients"] > 30 and checked["brokers"] > 50
    assert checked["topics"] > 20
    # small groups: percentile_approx answered with the exact sample everywhere here
    assert exact == sum(checked.values())


def test_stats_and_spark_report_agree_on_broker_failover(spark, tmp_path) -> None:
    """``kafkasniff stats --json`` and ``spark report`` on the same capture give the same
    percentiles: one rank rule (nearest rank, the value of rank ceil(p * n) of the n sorted
    latencies), each within its stated accuracy (stats: DDSketch, 1 % of the value; spark
    report: percentile_approx, exact below 10 000 values). Produce p90 was 541.92 ms in
    ``stats`` (DDSketch's rank floor(p * (n - 1))) and 653.389 ms in ``spark report``. Both
    text outputs name the rule."""
    from kafkasniff.export.writer import export_captures
    from kafkasniff.spark.report import run_report

    from .conftest import pipeline_options

    pcap = next(p for p in ALL_CAPTURES if p.name == "broker_failover.pcap")
    out = tmp_path / "tables"
    export_captures([pcap], out, options=pipeline_options())
    lines: list[str] = []
    reports = run_report(spark, out, top=1000, write=False, echo=lines.append)
    st = stats_json(pcap)
    checked = 0
    for dim, report, key in (("apis", "latency_by_api", "api_name"),
                             ("clients", "latency_by_client_id", "client_id"),
                             ("brokers", "latency_by_broker", "broker")):
        rows = {r[key]: r for r in reports[report].collect()}
        for name, row in st[dim].items():
            if row["latency_count"] == 0 or name not in rows:
                continue
            srow = rows[name]
            assert srow["paired"] - srow["long_polls"] == row["latency_count"], (dim, name)
            for q in QUANTILES:
                col = f"p{round(q * 100)}_ns"
                want, got = srow[col], row[f"latency_{col}"]
                assert abs(got - want) <= 0.01 * want + 1, (dim, name, col, got, want)
                checked += 1
    assert checked > 30
    assert "nearest rank" in lines[-1], lines[-1]
    from kafkasniff.cli import main

    res = CliRunner().invoke(main, ["stats", str(pcap)])
    assert res.exit_code == 0 and "nearest rank" in res.output.splitlines()[-1], res.output


# ---------------------------------------------------------------------------- report

def test_report_command_prints_and_writes(spark, report_dir) -> None:
    res = CliRunner().invoke(spark_group, ["report", str(report_dir), "--top", "5"])
    assert res.exit_code == 0, res.output
    for name, title in REPORTS.items():
        assert f"[{name}]" in res.output
        assert (report_dir / "report" / name).is_dir()
    assert "percentile_approx" in res.output
    assert f"reports written under {report_dir / 'report'}/" in res.output
    rep = {name: pq.read_table(report_dir / "report" / name).to_pylist() for name in REPORTS}
    ex = arrow_rows(report_dir, "exchanges")
    # every exchange is in exactly one api row; error counts by name
    assert sum(r["exchanges"] for r in rep["latency_by_api"]) == len(ex)
    want_errors = Counter(e for r in ex for e in r["errors"])
    assert {r["error"]: r["exchanges"] for r in rep["errors_by_name"]} == dict(want_errors)
    for r in rep["errors_by_name"]:
        assert r["rate"] == pytest.approx(want_errors[r["error"]] / len(ex))
    per_api = Counter(r["api_name"] for r in ex)
    for r in rep["errors_by_api"]:
        assert r["rate"] == pytest.approx(r["exchanges"] / per_api[r["api_name"]])
    # throttle totals (only the synthetic capture is throttled)
    thr = [r for r in ex if r["throttle_time_ms"]]
    assert thr and sum(r["throttle_total_ms"] for r in rep["throttle"]) == \
        sum(r["throttle_time_ms"] for r in thr)
    assert sum(r["throttled"] for r in rep["throttle"]) == len(thr)
    assert all(r["throttled"] > 0 and r["throttle_max_ms"] > 0 for r in rep["throttle"])
    # top talkers: bytes and requests add up
    assert sum(r["requests"] for r in rep["top_client_ids"]) == len(ex)
    assert sum(r["total_bytes"] for r in rep["top_clients"]) == \
        sum(r["request_bytes"] + r["response_bytes"] for r in ex)
    totals = [r["total_bytes"] for r in rep["top_client_ids"]]
    assert totals == sorted(totals, reverse=True)
    # throughput: every produce / fetch partition row with record data is counted once
    parts = arrow_rows(report_dir, "partitions")
    want = Counter()
    for p in parts:
        if p["records_bytes"] is not None and p["api_name"] in ("Produce", "Fetch",
                                                                  "ShareFetch"):
            want["produce" if p["api_name"] == "Produce" else "fetch"] += p["records_bytes"]
    got = Counter()
    for r in rep["throughput_per_minute"]:
        got[r["direction"]] += r["bytes"]
        assert r["minute"].second == 0 and r["topic"]
    assert got == want and got["produce"] > 0 and got["fetch"] > 0
    check_throughput(report_dir, rep["throughput_per_minute"])
    # topic ids resolved: no 22-character id where topic_ids knows the name
    ids = {r["topic_id"] for r in arrow_rows(report_dir, "topic_ids")}
    assert not ids & {r["topic"] for r in rep["throughput_per_minute"]}
    assert not ids & {r["topic"] for r in rep["latency_by_topic"]}


def test_sql(spark, report_dir) -> None:
    q = ("SELECT api_name, count(*) AS n FROM exchanges WHERE capture = "
         "'librdkafka_errors_latency.pcap' GROUP BY api_name ORDER BY n DESC, api_name")
    res = CliRunner().invoke(spark_group, ["report", str(report_dir), "--sql", q])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[0] == "result"
    assert lines[1].split() == ["api_name", "n"]
    assert lines[3].split() == ["Fetch", "53"]
    # the helper views resolve topics
    q2 = "SELECT DISTINCT topic FROM exchange_topics WHERE capture = 'librdkafka_share.pcap'"
    res = CliRunner().invoke(spark_group, ["report", str(report_dir), "--sql", q2])
    assert res.exit_code == 0 and "ks-share" in res.output, res.output
    bad = CliRunner().invoke(spark_group, ["report", str(report_dir), "--sql",
                                           "SELECT nope FROM exchanges"])
    assert bad.exit_code == 2
    assert "SQL:" in bad.output and "nope" in bad.output


def test_report_without_tables(spark, tmp_path) -> None:
    res = CliRunner().invoke(spark_group, ["report", str(tmp_path)])
    assert res.exit_code == 2
    assert "no exported table" in res.output


# ---------------------------------------------------------------------------- issue 15

def test_format_number() -> None:
    from kafkasniff.spark.report import _cell, format_number

    assert [format_number(v) for v in (0.000123456, 0.0457, 0.1, 5.678, 12.345, 123456.78,
                                       -0.00123, 0.0, 1.5e-9)] == \
        ["0.000123", "0.0457", "0.100", "5.68", "12.3", "123456.8", "-0.00123", "0.0",
         "1.50e-09"]
    assert _cell("p99_ms", 0.000456) == "0.000456"
    assert _cell("rate", 0.0000123) == "0.00123%"
    assert _cell("rate", 0.4783) == "47.8%"
    assert _cell("p99_ns", 456) == "0.000"                       # ns columns: in ms
    assert _cell("bytes_per_s", float("nan")) == "nan"
    assert [format_number(v) for v in (float("inf"), float("-inf"), -0.0, -5.678, 1e300,
                                       -2.5e16, 9.5e15)] == \
        ["inf", "-inf", "0.0", "-5.68", "1.00e+300", "-2.50e+16", "9500000000000000.0"]


def test_sql_prints_sub_millisecond_values(spark, report_dir) -> None:
    """The docs' ``p99_ms`` example printed every double with one decimal place, so
    sub-millisecond latencies showed as ``0.0``: now with 3 significant digits."""
    q = ("SELECT client_id, percentile_approx(latency_ms, 0.99, 10000) AS p99_ms, "
         "count(*) AS n FROM exchanges WHERE api_name = 'Produce' AND status = 'paired' "
         "GROUP BY client_id ORDER BY p99_ms DESC, client_id")
    res = CliRunner().invoke(spark_group, ["report", str(report_dir), "--sql", q,
                                           "--top", "1000"])
    assert res.exit_code == 0, res.output
    register_views(spark, report_dir)
    want = spark.sql(q).collect()
    printed = [ln.split() for ln in res.output.splitlines()[3:] if ln.strip()]
    assert len(printed) == len(want)
    sub_ms = 0
    for row, cells in zip(want, printed):
        got = float(cells[-2])
        assert got == pytest.approx(row["p99_ms"], rel=0.005), (row, cells)
        sub_ms += row["p99_ms"] < 1
    assert sub_ms > 0


# every report's group keys (one row each) and order: keys to sort by (True: descending),
# ending with the group keys so that the order is total
REPORT_GROUP = {
    "summary": ["capture"],
    "latency_by_api": ["api_name"],
    "latency_by_client_id": ["client_id"],
    "latency_by_broker": ["broker"],
    "latency_by_topic": ["topic"],
    "errors_by_name": ["error"],
    "errors_by_api": ["api_name", "error"],
    "partition_errors": ["topic", "partition", "api_name", "error_name"],
    "throttle": ["client_id", "api_name"],
    "top_clients": ["client_ip"],
    "top_client_ids": ["client_id"],
    "throughput_per_minute": ["minute", "topic", "direction"],
    "issues_by_kind": ["kind", "severity"],
    "group_rebalances": ["group_id"],
    "slowest_rebalances": ["capture", "group_id", "rebalance_index"],
    "group_commits": ["group_id"],
}
REPORT_ORDER = {
    "summary": [("capture", False)],
    "latency_by_api": [("exchanges", True), ("api_name", False)],
    "latency_by_client_id": [("exchanges", True), ("client_id", False)],
    "latency_by_broker": [("exchanges", True), ("broker", False)],
    "latency_by_topic": [("exchanges", True), ("topic", False)],
    "errors_by_name": [("exchanges", True), ("error", False)],
    "errors_by_api": [("exchanges", True), ("api_name", False), ("error", False)],
    "partition_errors": [("responses", True), ("topic", False), ("partition", False),
                         ("api_name", False), ("error_name", False)],
    "throttle": [("throttle_total_ms", True), ("throttled", True), ("client_id", False),
                 ("api_name", False)],
    "top_clients": [("total_bytes", True), ("requests", True), ("client_ip", False)],
    "top_client_ids": [("total_bytes", True), ("requests", True), ("client_id", False)],
    "throughput_per_minute": [("minute", False), ("topic", False), ("direction", False)],
    "issues_by_kind": [("issues", True), ("kind", False), ("severity", False)],
    "group_rebalances": [("rebalances", True), ("total_duration_ns", True), ("group_id", False)],
    # rebalances that did not end (null duration) first
    "slowest_rebalances": [("duration_ns", True, "first"), ("capture", False),
                           ("group_id", False), ("rebalance_index", False)],
    "group_commits": [("commit_requests", True), ("group_id", False)],
}


def _sorted_like(rows: list[dict], keys) -> list[dict]:
    """``rows`` sorted as Spark's ORDER BY (nulls first ascending, last descending, unless
    a key's third item says ``"first"``)."""
    out = list(rows)
    for key, desc, *nulls in reversed(keys):          # stable sorts, last key first
        nulls_high = desc and nulls == ["first"]
        out.sort(key=lambda r: ((r[key] is None) == nulls_high, r[key]), reverse=desc)
    return out


def test_report_order_is_total(spark, report_dir) -> None:
    """Tied rows came out in a different order each run (the latency reports ordered by
    exchanges only, partition_errors without error_name): every report's order now ends
    with its group keys."""
    from kafkasniff.spark.report import build_reports

    reports = build_reports(spark, register_views(spark, report_dir))
    assert set(reports) == set(REPORT_ORDER)
    ties = 0
    for name, df in reports.items():
        rows = [r.asDict() for r in df.collect()]
        keys, group = REPORT_ORDER[name], REPORT_GROUP[name]
        assert [k[0] for k in keys[-len(group):]] == group
        assert len({tuple(r[k] for k in group) for r in rows}) == len(rows), name
        assert rows == _sorted_like(rows, keys), name
        first = [r[keys[0][0]] for r in rows]
        ties += len(first) - len(set(first))
    assert ties > 10       # the order of tied rows is what is checked


def test_throttle_and_throughput_without_throttling(spark, tmp_path) -> None:
    """With no throttling the throttle table printed rows of zeros; ``bytes_per_s``
    divided the partial first and last minutes by 60."""
    from kafkasniff.export.writer import export_captures

    d = tmp_path / "t"
    pcap = ALL_CAPTURES[0].parent / "librdkafka_errors_latency.pcap"
    export_captures([pcap], d, options=pipeline_options_for(pcap))
    res = CliRunner().invoke(spark_group, ["report", str(d), "--top", "50"])
    assert res.exit_code == 0, res.output
    section = res.output.split("[throttle]", 1)[1].split("\n\n", 1)[0]
    assert section.strip() == "no throttling: no response has throttle_time_ms > 0"
    assert pq.read_table(d / "report" / "throttle").num_rows == 0
    rows = pq.read_table(d / "report" / "throughput_per_minute").to_pylist()
    check_throughput(d, rows)
    # the capture lasts about 5 s, all within one minute
    assert rows and all(0 < r["covered_s"] < 10 for r in rows)
    assert all(r["bytes_per_s"] > r["bytes"] / 10 for r in rows)


def pipeline_options_for(pcap: Path):
    from kafkasniff.pipeline import PipelineOptions

    truth = json.loads(pcap.with_suffix(".truth.json").read_text())
    return PipelineOptions(ports=frozenset(truth["broker_ports"]))


def check_throughput(root: Path, rows: list[dict]) -> None:
    """``covered_s`` of each minute is the time the captures cover in it (each capture from
    its first to its last packet: connections and exchanges), ``bytes_per_s`` bytes over
    it."""
    spans: dict = {}
    for r in arrow_rows(root, "connections"):
        spans.setdefault(r["capture"], []).extend((r["first_ts_ns"], r["last_ts_ns"]))
    for r in arrow_rows(root, "exchanges"):
        spans.setdefault(r["capture"], []).extend(
            v for v in (r["ts_ns"], r["request_last_ts_ns"], r["response_last_ts_ns"])
            if v is not None)
    intervals = sorted((min(v), max(v)) for v in spans.values())
    partial = 0
    for r in rows:
        m0 = int(r["minute"].timestamp()) * 10**9
        covered = set()        # whole milliseconds covered, to take the union of captures
        for a, b in intervals:
            lo, hi = max(a, m0), min(b, m0 + 60 * 10**9)
            if hi > lo:
                covered.update(range((lo - m0) // 10**6, (hi - m0) // 10**6))
        assert r["covered_s"] == pytest.approx(len(covered) / 1000, abs=0.002 * len(intervals))
        assert r["bytes_per_s"] == pytest.approx(r["bytes"] / r["covered_s"])
        partial += r["covered_s"] < 59
    assert partial > 0
