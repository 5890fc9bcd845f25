"""Text tables of an :class:`~kafkasniff.stats.aggregate.Aggregator` report (``kafkasniff stats``).

The keys of the tables (client_ids, topics, which peers choose) are escaped by
:func:`kafkasniff.text.escape_text`: one row per line, no control character reaches the
terminal. :func:`render_table` writes cells as given: its callers escape the names.
"""

from __future__ import annotations

from kafkasniff.output.render import bytes_part
from kafkasniff.stats.aggregate import PERCENTILE_RULE
from kafkasniff.text import escape_text, plural


def _ms(ns) -> str:
    return "-" if ns is None else f"{ns / 1e6:.2f}"


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.0f}{unit}" if unit == "B" else f"{n:.1f}{unit}"
        n /= 1024
    return f"{n:.1f}GiB"


def _errors(d: dict, limit: int = 3) -> str:
    if not d:
        return "-"
    items = list(d.items())
    text = ", ".join(f"{k}:{v}" for k, v in items[:limit])
    return text + (f" +{len(items) - limit}" if len(items) > limit else "")


def render_table(title: str, header: list[str], rows: list[list[str]]) -> str:
    """A plain text table: ``title``, the header, a rule, one line per row (each row as many
    cells as ``header``); cells of later columns that start with a digit, or are ``-``, are
    right-aligned. Ends with a newline; ``(none)`` stands for no rows. Cells are written as
    given: names off the wire must come escaped (:func:`kafkasniff.text.escape_text`), once
    (a cell escaped twice would show its backslashes doubled)."""
    if not rows:
        return f"{title}\n  (none)\n"
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]

    def fmt(cells: list[str]) -> str:
        out = []
        for i, c in enumerate(cells):
            num = i > 0 and (c[:1].isdigit() or c == "-")
            out.append(c.rjust(widths[i]) if num else c.ljust(widths[i]))
        return "  ".join(out).rstrip()

    lines = [title, fmt(header), fmt(["-" * w for w in widths])]
    lines.extend(fmt(r) for r in rows)
    return "\n".join(lines) + "\n"


def _rows(table: dict, top: int) -> list[list[str]]:
    return [[escape_text(str(key)), str(r["count"]), str(r["error_exchanges"]),
             _errors(r["errors"]),
             _ms(r["latency_p50_ns"]), _ms(r["latency_p90_ns"]), _ms(r["latency_p99_ns"]),
             _ms(r["latency_max_ns"]), str(r["long_polls"]), _ms(r["long_poll_p50_ns"]),
             str(r["throttled"]), str(r["throttle_total_ms"]),
             str(r["throttle_max_ms"]), _bytes(r["request_bytes"]), _bytes(r["response_bytes"])]
            for key, r in list(table.items())[:top]]


# the columns of every table after its key column, in the order of _rows (the latency
# columns leave long-polls out; they have their own count and median)
COLUMNS = ["count", "err", "errors by name", "p50 ms", "p90 ms", "p99 ms", "max ms",
           "long-polls", "lp p50 ms", "thr", "thr total ms", "thr max ms", "req bytes",
           "resp bytes"]


def render_report(report: dict, pipeline_stats: dict | None = None, top: int = 20) -> str:
    """The whole ``stats`` text output: the per API, client_id, broker and topic tables (at
    most ``top`` rows each), issues and counters, and a summary line.

    ``report`` is :meth:`~kafkasniff.stats.aggregate.Aggregator.to_dict`; ``pipeline_stats``
    (optional) has the ``packets``, ``kafka_connections``, ``other_connections`` and
    ``skipped`` (reason -> packets) counts of :class:`kafkasniff.pipeline.PipelineStats`.
    Latencies are shown in ms; the percentiles are of served exchanges, long-polls
    (:mod:`kafkasniff.content.waits`) are counted apart.
    """
    parts = []
    for title, key, label in (("Per API", "apis", "api"), ("Per client_id", "clients", "client_id"),
                              ("Per broker", "brokers", "broker"), ("Per topic", "topics", "topic")):
        parts.append(render_table(title, [label] + COLUMNS, _rows(report[key], top)))
    issues = report["issues"]
    issue_rows = [[k, str(v)] for k, v in issues.items()]
    if pipeline_stats:
        for reason, n in sorted(pipeline_stats.get("skipped", {}).items()):
            issue_rows.append([f"skipped packets: {reason}", str(n)])
        if pipeline_stats.get("other_connections"):
            issue_rows.append(["other connections", str(pipeline_stats["other_connections"])])
        for what, n in sorted(pipeline_stats.get("bytes", {}).items()):
            issue_rows.append([f"bytes {what}", str(n)])
    statuses = report["total"]["statuses"]
    for s in ("unanswered", "orphan_response", "no_response_expected"):
        if statuses.get(s):
            issue_rows.append([f"exchanges {s}", str(statuses[s])])
    parts.append(render_table("Issues and counters", ["what", "count"], issue_rows))
    t = report["total"]
    summary = (f"{plural(t['count'], 'exchange')}, {t['error_exchanges']} with errors, "
               f"p50 {_ms(t['latency_p50_ns'])} ms, p99 {_ms(t['latency_p99_ns'])} ms, "
               f"max {_ms(t['latency_max_ns'])} ms"
               + (f" ({plural(t['long_polls'], 'long-poll')} apart, "
                  f"p50 {_ms(t['long_poll_p50_ns'])} ms)"
                  if t["long_polls"] else "")
               + f", {t['throttled']} throttled "
               f"(latency percentiles: {PERCENTILE_RULE})")
    if pipeline_stats:
        summary += (f"; {plural(pipeline_stats['packets'], 'packet')}, "
                    f"{plural(pipeline_stats['kafka_connections'], 'Kafka connection')}")
        if pipeline_stats.get("bytes"):
            summary += "; " + bytes_part(pipeline_stats["bytes"])
    parts.append(summary + "\n")
    return "\n".join(parts)
