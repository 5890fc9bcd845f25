"""kafkasniff.stats.report: the ``stats`` text tables, checked against values recomputed
from a real capture's decoded exchanges (captures/librdkafka_errors_latency.pcap)."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from kafkasniff.stats.aggregate import Aggregator
from kafkasniff.stats.report import COLUMNS, render_report, render_table

from tests.conftest import CAPTURES, decode_capture

CAPTURE = CAPTURES / "librdkafka_errors_latency.pcap"


@pytest.fixture(scope="module")
def decoded():
    return decode_capture(CAPTURE)


@pytest.fixture(scope="module")
def report(decoded):
    agg = Aggregator()
    for ex in decoded.exchanges:
        agg.add(ex)
    for issue in decoded.issues:
        agg.add_issue(issue)
    return agg.to_dict()


def table_lines(text: str, title: str) -> list[str]:
    """The lines of one table (title excluded) up to the blank line after it."""
    lines = text.splitlines()
    start = lines.index(title) + 1
    end = lines.index("", start) if "" in lines[start:] else len(lines)
    return lines[start:end]


def row_of(text: str, title: str, key: str) -> list[str]:
    """Cells of the row whose first cell is ``key`` (cells are separated by 2+ spaces)."""
    for line in table_lines(text, title)[2:]:
        cells = re.split(r"\s{2,}", line.strip())
        if cells[0] == key:
            return cells
    raise AssertionError(f"no row {key!r} in {title}")


def test_report_has_every_table(report, decoded):
    text = render_report(report, decoded.pipeline.stats.to_dict())
    for title in ("Per API", "Per client_id", "Per broker", "Per topic", "Issues and counters"):
        assert title in text.splitlines()
    header = table_lines(text, "Per API")[0].split("  ")
    assert [h.strip() for h in header if h.strip()] == ["api"] + COLUMNS


def test_api_rows_match_the_exchanges(report, decoded):
    """Each API row's count, error exchanges and max latency are those of the capture."""
    text = render_report(report)
    by_api: dict[str, list] = {}
    for ex in decoded.exchanges:
        by_api.setdefault(ex.api_name, []).append(ex)
    assert set(by_api) >= {"Produce", "Fetch", "Metadata"}
    for name, exs in by_api.items():
        cells = row_of(text, "Per API", name)
        assert cells[1] == str(len(exs))
        assert cells[2] == str(sum(1 for e in exs if e.errors))
        lat = [e.latency_ns for e in exs if e.status == "paired" and not e.long_poll]
        assert cells[7] == (f"{max(lat) / 1e6:.2f}" if lat else "-")
        assert cells[8] == str(sum(1 for e in exs if e.long_poll))
    produce = row_of(text, "Per API", "Produce")
    errs = Counter(err for e in by_api["Produce"] for err in e.errors)
    assert produce[3] == ", ".join(f"{k}:{v}" for k, v in errs.most_common())


def test_client_broker_topic_rows(report, decoded):
    text = render_report(report)
    clients = Counter(e.client_id for e in decoded.exchanges)
    for client_id, n in clients.items():
        assert row_of(text, "Per client_id", client_id)[1] == str(n)
    brokers = Counter(e.broker for e in decoded.exchanges)
    for broker, n in brokers.items():
        assert row_of(text, "Per broker", broker)[1] == str(n)
    topics = Counter(t for e in decoded.exchanges for t in e.topics)
    assert topics
    for topic, n in topics.items():
        assert row_of(text, "Per topic", topic)[1] == str(n)


def test_issues_and_summary(report, decoded):
    """Issue kinds with their counts, unanswered exchanges, and the summary line."""
    pstats = decoded.pipeline.stats.to_dict()
    text = render_report(report, pstats)
    kinds = Counter(i.kind for _, i in decoded.all_issues())
    for kind, n in kinds.items():
        assert row_of(text, "Issues and counters", str(kind))[1] == str(n)
    unanswered = sum(1 for e in decoded.exchanges if e.status == "unanswered")
    assert unanswered > 0
    assert row_of(text, "Issues and counters", "exchanges unanswered")[1] == str(unanswered)
    n = len(decoded.exchanges)
    with_errors = sum(1 for e in decoded.exchanges if e.errors)
    max_ms = max(e.latency_ns for e in decoded.exchanges if e.status == "paired") / 1e6
    summary = text.rstrip("\n").splitlines()[-1]
    assert summary.startswith(f"{n} exchanges, {with_errors} with errors, p50 ")
    assert f"max {max_ms:.2f} ms" in summary
    assert "(latency percentiles: nearest rank, DDSketch within 1% of the value)" in summary
    assert f"; {pstats['packets']} packets, {pstats['kafka_connections']} Kafka " \
        f"connections; " in summary
    total = sum(pstats["bytes"].values())
    assert summary.endswith(f"; {total} bytes: {total} decoded, 0 skipped")
    assert text.endswith("\n")


def test_top_limits_rows(report):
    text = render_report(report, top=2)
    rows = table_lines(text, "Per API")[2:]
    assert len(rows) == 2
    counts = sorted((r["count"] for r in report["apis"].values()), reverse=True)
    assert [int(r.split()[1]) for r in rows] == counts[:2]


def test_pipeline_counters_rows(report):
    pstats = {"packets": 10, "kafka_connections": 1, "other_connections": 3,
              "skipped": {"non_tcp": 4, "ip_fragment": 2}}
    text = render_report(report, pstats)
    lines = table_lines(text, "Issues and counters")
    assert row_of(text, "Issues and counters", "skipped packets: ip_fragment")[1] == "2"
    assert row_of(text, "Issues and counters", "skipped packets: non_tcp")[1] == "4"
    assert row_of(text, "Issues and counters", "other connections")[1] == "3"
    names = [line.split("  ")[0] for line in lines[2:]]
    assert names.index("skipped packets: ip_fragment") < names.index("skipped packets: non_tcp")


def test_empty_report():
    text = render_report(Aggregator().to_dict())
    assert text.count("  (none)") == 5
    assert text.rstrip("\n").splitlines()[-1].startswith("0 exchanges, 0 with errors, p50 - ms")


def test_render_table_alignment():
    """Later columns starting with a digit or "-" are right-aligned, others left."""
    text = render_table("T", ["key", "n", "name"], [["a", "5", "x"], ["bbb", "123", "-"]])
    assert text == ("T\n"
                    "key  n    name\n"
                    "---  ---  ----\n"
                    "a      5  x\n"
                    "bbb  123     -\n")
    assert render_table("Empty", ["a"], []) == "Empty\n  (none)\n"
