"""``spark report``: Spark SQL over the export tables.

:func:`register_views` reads every table present under ``DIR`` (``exchanges``,
``partitions``, ``records``, ``issues``, ``connections``, ``topic_ids``) with its explicit
schema (:func:`kafkasniff.export.schema.spark_ddl`, columns in the documented order, also
when the directory is Hive-partitioned by date/hour) and registers it as a temporary view of
the same name, plus three helper views that resolve topic ids through ``topic_ids``:

- ``topic_names(topic_id, topic_name)``: one name per id (the earliest seen);
- ``exchange_topics``: every ``exchanges`` column plus ``topic``, one row per exchange and
  topic it touches (names carried on the wire and ids resolved by ``topic_names``; an id
  never seen with a name stays as its text form), as ``kafkasniff stats`` counts topics;
- ``partition_topics``: every ``partitions`` column plus ``topic_name`` (``topic``, else the
  name of ``topic_id``, else the id).

:func:`build_reports` computes the reports (:data:`REPORTS`), :func:`run_report` prints them
as text tables and writes each as Parquet under ``DIR/report/<name>/`` (replaced on every
run). Every report's ORDER BY ends with its group keys, so that tied rows come out in the
same order on every run. ``throttle`` keeps only (client_id, API) pairs with a throttled
response (none: ``no throttling`` is printed). ``throughput_per_minute`` divides a minute's
bytes by the seconds of it the captures cover (:func:`capture_spans`), not by 60. Printed
floats keep at least 3 significant digits (:func:`format_number`).

Latency percentiles follow the rank rule of every kafkasniff output, **nearest rank**: the
p-th percentile of ``n`` latencies is the value of rank ``ceil(p * n)`` (1-based) of the
sorted latencies (:func:`kafkasniff.stats.aggregate.nearest_rank`). Spark's
``percentile_approx(latency_ns, array(0.5, 0.9, 0.99), PERCENTILE_ACCURACY)``
(Greenwald-Khanna summaries) targets that rank: the value returned is an actual value of the
column whose rank differs from ``ceil(p * n)`` by at most ``n / accuracy`` (relative rank
error ``1 / accuracy``, here 1/10000 = 0.01 %); it is not a bound on the value itself. With
fewer values than about ``accuracy`` the summary keeps every value and the answer is the
exact sample at that rank. ``kafkasniff stats`` and the TUI estimate the same rank's value
with DDSketch, within 1 % of it, so on the same capture they agree within 1 % (a test checks
it on every capture). Maximum latencies are exact (``max``). Like ``stats``, the percentiles
and maxima are of the served exchanges: long-polls (``long_poll``, docs/long-polls.md) are
counted apart (``long_polls``, ``long_poll_p50_ns``).
"""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path
from typing import Callable

from kafkasniff.spark.groups_report import GROUP_REPORTS, build_group_reports
from kafkasniff.text import escape_text

__all__ = [
    "PERCENTILE_ACCURACY",
    "PERCENTILE_RULE",
    "QUANTILES",
    "REPORTS",
    "build_reports",
    "capture_spans",
    "format_number",
    "no_table_error",
    "read_table",
    "register_views",
    "REPORT_TABLES",
    "render_dataframe",
    "run_report",
    "run_sql",
    "tables_present",
]

#: ``accuracy`` argument of ``percentile_approx``: relative rank error 1 / 10 000.
PERCENTILE_ACCURACY = 10_000
#: how the report names its percentile rule and accuracy
PERCENTILE_RULE = (f"nearest rank, percentile_approx within n/{PERCENTILE_ACCURACY} ranks "
                   f"(accuracy {PERCENTILE_ACCURACY})")
QUANTILES = (0.5, 0.9, 0.99)
HELPER_VIEWS = ("topic_names", "exchange_topics", "partition_topics")
#: the tables the reports are made of: a report needs at least one of them
REPORT_TABLES = ("exchanges", "partitions", "issues")

#: Report name -> title, in output order.
REPORTS = {
    "summary": "Summary per capture",
    "latency_by_api": "Latency per API (paired exchanges)",
    "latency_by_client_id": "Latency per client_id",
    "latency_by_broker": "Latency per broker",
    "latency_by_topic": "Latency per topic",
    "errors_by_name": "Errors by name (exchanges with the error; rate = share of all "
                      "exchanges)",
    "errors_by_api": "Errors by API and name (rate = share of the API's exchanges)",
    "partition_errors": "Partition errors (topic-partitions answered with an error)",
    "throttle": "Throttling per client_id and API (pairs with a throttled response)",
    "top_clients": "Top talkers by client host",
    "top_client_ids": "Top talkers by client_id",
    "throughput_per_minute": "Produce and fetch throughput per topic per minute (record "
                             "data)",
    "issues_by_kind": "Issues by kind and severity",
    **GROUP_REPORTS,
}


#: What an empty report prints instead of ``(none)``.
EMPTY_TEXT = {
    "throttle": "no throttling: no response has throttle_time_ms > 0",
}


# ---------------------------------------------------------------------------- reading

def _table_dir(root: Path, table: str) -> Path | None:
    d = Path(root) / table
    if not d.is_dir():
        return None
    for _, _, files in os.walk(d):
        if any(not f.startswith((".", "_")) for f in files):
            return d
    return None


def _detect_format(root: Path) -> str:
    for _, _, files in os.walk(root):
        for f in files:
            if f.startswith("."):
                continue
            if f.endswith(".jsonl"):
                return "jsonl"
            if f.endswith(".parquet"):
                return "parquet"
    return "parquet"


def tables_present(root: str | os.PathLike[str]) -> list[str]:
    """The export tables (:data:`kafkasniff.export.schema.ALL_TABLES`, the consumer-group
    tables included: the ones :func:`register_views` registers) that ``root`` holds: a
    sub-directory of that name with at least one data file, in that order. Plain file
    system checks: no Spark, no JVM (the CLI calls it before starting Spark)."""
    from kafkasniff.export.schema import ALL_TABLES

    return [t for t in ALL_TABLES if _table_dir(Path(root), t) is not None]


def read_table(spark, root: str | os.PathLike[str], table: str, fmt: str | None = None):
    """The table ``root/<table>`` as a DataFrame with exactly the documented schema and
    column order, or ``None`` when the directory is missing or holds no file.

    ``fmt``: ``"parquet"`` / ``"jsonl"`` (default: detected from the files)."""
    from kafkasniff.export.schema import SCHEMAS, spark_ddl

    d = _table_dir(Path(root), table)
    if d is None:
        return None
    fmt = fmt or _detect_format(d)
    reader = spark.read.schema(spark_ddl(table))
    df = reader.parquet(str(d)) if fmt == "parquet" else reader.json(str(d))
    return df.select(*[f"`{n}`" for n in SCHEMAS[table].names])


def register_views(spark, root: str | os.PathLike[str], fmt: str | None = None) -> dict:
    """Register the tables present under ``root`` (the consumer-group tables included) and
    the helper views as temporary views. Returns view name -> DataFrame."""
    from kafkasniff.export.schema import ALL_TABLES

    views = {}
    for table in ALL_TABLES:
        df = read_table(spark, root, table, fmt)
        if df is not None:
            df.createOrReplaceTempView(table)
            views[table] = df
    for v in HELPER_VIEWS:
        spark.catalog.dropTempView(v)
    if "topic_ids" in views:
        views["topic_names"] = spark.sql(
            "SELECT topic_id, min_by(topic_name, first_seen_ts_ns) AS topic_name "
            "FROM topic_ids GROUP BY topic_id")
    else:
        views["topic_names"] = spark.sql(
            "SELECT CAST(NULL AS STRING) AS topic_id, CAST(NULL AS STRING) AS topic_name "
            "WHERE false")
    views["topic_names"].createOrReplaceTempView("topic_names")
    if "exchanges" in views:
        views["exchange_topics"] = spark.sql("""
            WITH ids AS (
              SELECT i.capture, i.exchange_id, coalesce(n.topic_name, i.id) AS name
              FROM (SELECT capture, exchange_id, explode(topic_ids) AS id FROM exchanges) i
              LEFT JOIN topic_names n ON n.topic_id = i.id),
            resolved AS (
              SELECT capture, exchange_id, collect_list(name) AS names
              FROM ids GROUP BY capture, exchange_id)
            SELECT e.*, t.topic
            FROM exchanges e
            LEFT JOIN resolved r ON r.capture = e.capture AND r.exchange_id = e.exchange_id
            LATERAL VIEW explode(array_distinct(
              concat(e.topics, coalesce(r.names, CAST(array() AS ARRAY<STRING>))))) t AS topic
            """)
        views["exchange_topics"].createOrReplaceTempView("exchange_topics")
    if "partitions" in views:
        views["partition_topics"] = spark.sql("""
            SELECT p.*, coalesce(p.topic, n.topic_name, p.topic_id) AS topic_name
            FROM partitions p LEFT JOIN topic_names n ON n.topic_id = p.topic_id""")
        views["partition_topics"].createOrReplaceTempView("partition_topics")
    return views


def no_table_error(root: str | os.PathLike[str]):
    """The :class:`~kafkasniff.errors.KafkaSniffError` (returned, not raised) for a
    directory without tables: :func:`run_report` raises it, the CLI prints it before
    Spark starts."""
    from kafkasniff.errors import KafkaSniffError

    return KafkaSniffError(f"{root}: no exported table found (expected exchanges/, "
                           f"partitions/, ... written by kafkasniff export or spark decode)")


# ---------------------------------------------------------------------------- reports

# the latency of a paired exchange the broker answered when it could (long-polls, which waited
# by design, are apart: docs/long-polls.md); files written before the column read it as null
SERVED_LATENCY = ("CASE WHEN status = 'paired' AND NOT coalesce(long_poll, false) "
                  "THEN greatest(latency_ns, 0) END")
LONG_POLL_LATENCY = ("CASE WHEN status = 'paired' AND coalesce(long_poll, false) "
                     "THEN greatest(latency_ns, 0) END")


def _latency_sql(source: str, key_sql: str, key_name: str) -> str:
    qs = ", ".join(str(q) for q in QUANTILES)
    return f"""
        SELECT {key_sql} AS {key_name},
               count(*) AS exchanges,
               count_if(error_count > 0) AS error_exchanges,
               count_if(status = 'paired' AND latency_ns IS NOT NULL) AS paired,
               percentile_approx({SERVED_LATENCY}, array({qs}), {PERCENTILE_ACCURACY}) AS _p,
               max({SERVED_LATENCY}) AS max_ns,
               count({LONG_POLL_LATENCY}) AS long_polls,
               percentile_approx({LONG_POLL_LATENCY}, 0.5, {PERCENTILE_ACCURACY})
                 AS long_poll_p50_ns,
               count_if(throttle_time_ms > 0) AS throttled,
               coalesce(sum(CASE WHEN throttle_time_ms > 0 THEN throttle_time_ms END), 0)
                 AS throttle_total_ms,
               sum(request_bytes) AS request_bytes,
               sum(response_bytes) AS response_bytes
        FROM {source}
        GROUP BY {key_sql}"""


def _latency_report(spark, source: str, key_sql: str, key_name: str):
    from pyspark.sql import functions as F

    df = spark.sql(_latency_sql(source, key_sql, key_name))
    return (df.selectExpr(key_name, "exchanges", "error_exchanges", "paired",
                          "_p[0] AS p50_ns", "_p[1] AS p90_ns", "_p[2] AS p99_ns", "max_ns",
                          "long_polls", "long_poll_p50_ns", "throttled", "throttle_total_ms",
                          "request_bytes", "response_bytes")
            .orderBy(F.desc("exchanges"), F.asc_nulls_first(key_name)))


def capture_spans(spark, views: dict) -> list[tuple[int, int]]:
    """The time the captures cover: per capture, its first to its last packet (ns since the
    Unix epoch), taken from the ``connections`` rows (first and last packet of every TCP
    connection) and the ``exchanges`` rows (first byte of a request to last byte of its
    response) present, else from ``partitions.ts_ns``; the spans of all captures merged
    where they overlap or touch. Sorted, disjoint ``(start_ns, end_ns)`` pairs; empty
    when no table has a row. Runs one small Spark job (one row per capture)."""
    parts = []
    if "connections" in views:
        parts.append("SELECT capture, first_ts_ns AS s, last_ts_ns AS e FROM connections")
    if "exchanges" in views:
        parts.append("SELECT capture, ts_ns AS s, greatest(ts_ns, request_last_ts_ns, "
                     "response_last_ts_ns) AS e FROM exchanges")
    if not parts and "partitions" in views:
        parts.append("SELECT capture, ts_ns AS s, ts_ns AS e FROM partitions")
    if not parts:
        return []
    rows = spark.sql(f"SELECT capture, min(s) AS s, max(e) AS e FROM "
                     f"({' UNION ALL '.join(parts)}) GROUP BY capture").collect()
    merged: list[list[int]] = []
    for start, end in sorted((r["s"], r["e"]) for r in rows if r["s"] is not None):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(a, b) for a, b in merged]


def _throughput_per_minute(spark, views: dict):
    """Record bytes per (minute, topic, direction); ``covered_s``: the seconds of that
    minute the captures cover (:func:`capture_spans`: less than 60 in a capture's first and
    last minute, and where captures leave gaps), ``bytes_per_s`` = bytes / covered_s
    (null when covered_s is 0)."""
    from pyspark.sql import functions as F

    agg = spark.sql("""
        WITH flows AS (
          SELECT date_trunc('MINUTE', ts) AS minute, topic_name AS topic,
                 CASE WHEN api_name = 'Produce' OR api_name LIKE '%PRODUCE (0.7)'
                      THEN 'produce' ELSE 'fetch' END AS direction,
                 records_bytes, records, batches
          FROM partition_topics
          WHERE records_bytes IS NOT NULL
            AND (api_name IN ('Produce', 'Fetch', 'ShareFetch')
                 OR api_name LIKE '%PRODUCE (0.7)' OR api_name LIKE '%FETCH (0.7)'))
        SELECT minute, topic, direction, sum(records_bytes) AS bytes,
               coalesce(sum(records), 0) AS records, coalesce(sum(batches), 0) AS batches,
               count(*) AS partition_rows
        FROM flows GROUP BY 1, 2, 3""")
    spans = spark.createDataFrame(capture_spans(spark, views), "start_ns BIGINT, end_ns BIGINT")
    minute_ns = 60 * 10**9
    covered = (agg.select("minute").distinct()
               .withColumn("m0", F.expr("unix_micros(minute) * 1000"))
               .crossJoin(spans)
               .groupBy("minute")
               .agg(F.expr(f"sum(greatest(0L, least(m0 + {minute_ns}L, end_ns) "
                           f"- greatest(m0, start_ns))) / 1e9").alias("covered_s")))
    return (agg.join(covered, "minute", "left")
            .selectExpr("minute", "topic", "direction", "bytes", "records", "batches",
                        "partition_rows", "covered_s",
                        "CASE WHEN covered_s > 0 THEN CAST(bytes AS DOUBLE) / covered_s END "
                        "AS bytes_per_s")
            .orderBy("minute", "topic", "direction"))


def build_reports(spark, views: dict) -> dict:
    """Report name -> DataFrame (only the reports whose tables are present)."""
    r: dict = {}
    if "exchanges" in views:
        r["summary"] = spark.sql("""
            SELECT capture, count(*) AS exchanges,
                   count_if(status = 'paired') AS paired,
                   count_if(status = 'unanswered') AS unanswered,
                   count_if(status = 'orphan_response') AS orphans,
                   count_if(status = 'no_response_expected') AS no_response_expected,
                   count_if(error_count > 0) AS error_exchanges,
                   count(DISTINCT connection_key) AS connections,
                   min(ts) AS first_ts, max(ts) AS last_ts
            FROM exchanges GROUP BY capture ORDER BY capture""")
        r["latency_by_api"] = _latency_report(spark, "exchanges", "api_name", "api_name")
        r["latency_by_client_id"] = _latency_report(spark, "exchanges",
                                                    "coalesce(client_id, '(none)')", "client_id")
        r["latency_by_broker"] = _latency_report(spark, "exchanges", "broker", "broker")
        r["latency_by_topic"] = _latency_report(spark, "exchange_topics", "topic", "topic")
        total = "(SELECT count(*) FROM exchanges)"
        r["errors_by_name"] = spark.sql(f"""
            SELECT error, count(*) AS exchanges, count(*) / {total} AS rate
            FROM (SELECT explode(errors) AS error FROM exchanges)
            GROUP BY error ORDER BY exchanges DESC, error""")
        r["errors_by_api"] = spark.sql("""
            WITH per_api AS (SELECT api_name, count(*) AS n FROM exchanges GROUP BY api_name)
            SELECT e.api_name, e.error, count(*) AS exchanges, count(*) / first(p.n) AS rate
            FROM (SELECT api_name, explode(errors) AS error FROM exchanges) e
            JOIN per_api p ON p.api_name = e.api_name
            GROUP BY e.api_name, e.error ORDER BY exchanges DESC, e.api_name, e.error""")
        r["throttle"] = spark.sql("""
            SELECT coalesce(client_id, '(none)') AS client_id, api_name,
                   count(*) AS exchanges, count_if(throttle_time_ms > 0) AS throttled,
                   coalesce(sum(CASE WHEN throttle_time_ms > 0 THEN throttle_time_ms END), 0)
                     AS throttle_total_ms,
                   coalesce(max(throttle_time_ms), 0) AS throttle_max_ms
            FROM exchanges WHERE throttle_time_ms IS NOT NULL
            GROUP BY 1, 2 HAVING count_if(throttle_time_ms > 0) > 0
            ORDER BY throttle_total_ms DESC, throttled DESC, client_id, api_name""")
        r["top_clients"] = spark.sql("""
            SELECT client_ip, count(DISTINCT connection_key) AS connections,
                   count(*) AS requests, sum(request_bytes) AS request_bytes,
                   sum(response_bytes) AS response_bytes,
                   sum(request_bytes + response_bytes) AS total_bytes
            FROM exchanges GROUP BY client_ip
            ORDER BY total_bytes DESC, requests DESC, client_ip""")
        r["top_client_ids"] = spark.sql("""
            SELECT coalesce(client_id, '(none)') AS client_id,
                   count(DISTINCT client_ip) AS client_hosts,
                   count(*) AS requests, sum(request_bytes) AS request_bytes,
                   sum(response_bytes) AS response_bytes,
                   sum(request_bytes + response_bytes) AS total_bytes
            FROM exchanges GROUP BY 1
            ORDER BY total_bytes DESC, requests DESC, client_id""")
    if "partitions" in views:
        r["partition_errors"] = spark.sql("""
            SELECT topic_name AS topic, partition, api_name, error_name,
                   count(*) AS responses, min(ts) AS first_ts, max(ts) AS last_ts
            FROM partition_topics WHERE error_code IS NOT NULL AND error_code <> 0
            GROUP BY 1, 2, 3, 4
            ORDER BY responses DESC, topic, partition, api_name, error_name""")
        r["throughput_per_minute"] = _throughput_per_minute(spark, views)
    if "issues" in views:
        r["issues_by_kind"] = spark.sql("""
            SELECT kind, severity, count(*) AS issues,
                   count_if(exchange_id IS NULL) AS standalone
            FROM issues GROUP BY kind, severity ORDER BY issues DESC, kind, severity""")
    r.update(build_group_reports(spark, views))
    order = list(REPORTS)
    return {k: r[k] for k in order if k in r}


# ---------------------------------------------------------------------------- printing

def format_number(v: float) -> str:
    """A float with at least 3 significant digits and at least one decimal place:
    ``0.000123``, ``0.0457``, ``5.68``, ``12.3``, ``123456.7``; below 1e-6 in scientific
    notation (``1.23e-09``), and from 1e16 on, where a double no longer holds every
    integer digit (``1.23e+20``); ``0.0`` (also for ``-0.0``), ``nan``, ``inf``, ``-inf``
    as such; negative values alike, with a ``-``."""
    if v == 0 or not math.isfinite(v):
        return "0.0" if v == 0 else str(v)
    if not 1e-6 <= abs(v) < 1e16:
        return f"{v:.2e}"
    places = max(1, 2 - math.floor(math.log10(abs(v))))
    return f"{v:.{places}f}"


def _cell(name: str, v) -> str:
    """A value as :func:`render_rows` shows it; text (names off the wire: client_ids, topics,
    group ids ...) escaped by :func:`kafkasniff.text.escape_text`."""
    if v is None:
        return "-"
    if name.endswith("_ns") and isinstance(v, int):
        return f"{v / 1e6:.3f}"
    if name == "rate" and isinstance(v, float):
        return f"{format_number(v * 100)}%"
    if isinstance(v, float):
        return format_number(v)
    if hasattr(v, "strftime"):
        return v.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(v, (list, tuple)):
        return escape_text(",".join(map(str, v)))
    return escape_text(str(v))


def _header(name: str) -> str:
    if name.endswith("_ns"):
        return name[:-3] + " ms" if name != "max_ns" else "max ms"
    return name


def render_rows(title: str, cols: list[str], rows: list, empty: str = "(none)") -> str:
    """Collected Spark ``Row``s (or mappings) as a text table of columns ``cols``
    (``*_ns`` columns shown in ms with 3 decimals, other floats with at least 3
    significant digits (:func:`format_number`), ``rate`` as a percentage, timestamps to
    the second); ``empty`` under the title when there is no row."""
    from kafkasniff.stats.report import render_table

    body = [[_cell(c, row[c]) for c in cols] for row in rows]
    if body:
        # render_table right-aligns cells starting with a digit (first column excepted)
        return render_table(title, [_header(c) for c in cols], body)
    return f"{title}\n  {empty}\n"


def render_dataframe(title: str, df, top: int | None = 20, empty: str = "(none)") -> str:
    """The first ``top`` rows of ``df`` as a text table (``*_ns`` columns shown in ms)."""
    return render_rows(title, df.columns, df.limit(top).collect() if top else df.collect(),
                       empty)


def run_report(spark, root: str | os.PathLike[str], *, top: int = 20, write: bool = True,
               echo: Callable[[str], None] = print) -> dict:
    """Register the views, compute every report, print each (``top`` rows) and write each as
    Parquet under ``root/report/<name>/`` (the whole result, replacing an earlier run).
    Returns report name -> DataFrame; raises :class:`~kafkasniff.errors.KafkaSniffError` when
    ``root`` holds none of the exchanges, partitions and issues tables."""
    views = register_views(spark, root)
    if not any(t in views for t in REPORT_TABLES):
        raise no_table_error(root)
    reports = build_reports(spark, views)
    out = Path(root) / "report"
    for name, df in reports.items():
        if write:
            df = df.cache()
            target = out / name
            if target.exists():
                shutil.rmtree(target)
            df.coalesce(1).write.mode("overwrite").parquet(str(target))
        echo(render_dataframe(f"{REPORTS[name]}  [{name}]", df, top,
                              EMPTY_TEXT.get(name, "(none)")))
        if write:
            df.unpersist()
    echo(f"latency percentiles: {PERCENTILE_RULE}"
         + (f"; reports written under {out}/" if write else "; not written (--no-write)"))
    return reports


def run_sql(spark, root: str | os.PathLike[str], query: str, *, top: int | None = 20,
            echo: Callable[[str], None] = print):
    """Register the views and run ``query``; print its first ``top`` rows (all when None).
    Returns the result DataFrame."""
    register_views(spark, root)
    df = spark.sql(query)
    echo(render_dataframe("result", df, top))
    return df
