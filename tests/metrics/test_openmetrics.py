"""``kafkasniff stats --openmetrics FILE`` on real captures: the series are the numbers
``stats --json`` reports, and the histograms hold the exchanges' own latencies."""

from __future__ import annotations

import json
import re
import subprocess
from bisect import bisect_left
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path

import pytest

from kafkasniff.metrics import families as fam
from kafkasniff.metrics.families import OTHER, ExchangeMetrics, openmetrics_text
from tests.cli.common import KAFKASNIFF, run
from tests.conftest import CAPTURES, decode_capture

from .helpers import parse_openmetrics, sum_by

ERR = CAPTURES / "librdkafka_errors_latency.pcap"
# errors, throttling, share groups, several client libraries, Kafka 0.7, raw SASL tokens,
# a capture joined mid-stream (orphan responses)
CASES = [ERR, CAPTURES / "librdkafka_produce_consume.pcap", CAPTURES / "crafted_throttle.pcap",
         CAPTURES / "kafka_python.pcap", CAPTURES / "librdkafka_share.pcap",
         CAPTURES / "crafted_kafka07.pcap", CAPTURES / "crafted_sasl.pcap",
         CAPTURES / "librdkafka_midstream.pcap"]


def _ports(path) -> list[str]:
    truth = path.with_suffix(".truth.json")
    out: list[str] = []
    if truth.is_file():
        for p in json.loads(truth.read_text()).get("broker_ports", []):
            out += ["--port", str(p)]
    return out


def _stats(path, tmp_path, *extra):
    om = tmp_path / "m.txt"
    res = run("stats", "--json", "--jobs", "1", "--openmetrics", om, *_ports(path), *extra,
              path)
    assert res.exit_code == 0, res.output
    return json.loads(res.output), om.read_text()


def _nonzero(d: dict) -> dict:
    return {k: v for k, v in d.items() if v}


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_series_equal_stats_json(path, tmp_path):
    rep, text = _stats(path, tmp_path, "--metrics-topics")
    s = parse_openmetrics(text)          # strict OpenMetrics parser: the file is valid
    assert text.endswith("# EOF\n")
    assert rep["total"]["count"] > 0
    for api, row in rep["apis"].items():
        assert sum_by(s, "kafkasniff_exchanges_total", api_name=api) == row["count"], api
        assert _nonzero(sum_by(s, "kafkasniff_exchanges_total", "status", api_name=api)) \
            == row["statuses"], api
        # served exchanges in the request durations, long-polls apart (as in stats)
        assert sum_by(s, "kafkasniff_request_duration_seconds_count", api_name=api) \
            == row["latency_count"], api
        assert sum_by(s, "kafkasniff_long_poll_duration_seconds_count", api_name=api) \
            == row["long_polls"], api
        assert sum_by(s, "kafkasniff_errors_total", "error_name", api_name=api) \
            == row["errors"], api
        assert sum_by(s, "kafkasniff_throttle_time_seconds_count", api_name=api) \
            == row["throttled"], api
        assert sum_by(s, "kafkasniff_throttle_time_seconds_sum", api_name=api) \
            == pytest.approx(row["throttle_total_ms"] / 1000), api
        assert sum_by(s, "kafkasniff_request_bytes_total", api_name=api) \
            == row["request_bytes"], api
        assert sum_by(s, "kafkasniff_response_bytes_total", api_name=api) \
            == row["response_bytes"], api
    # per client_id ("(none)" in stats is the empty label value), broker and topic
    assert sum_by(s, "kafkasniff_exchanges_total", "client_id") == \
        {("" if k == "(none)" else k): r["count"] for k, r in rep["clients"].items()}
    assert sum_by(s, "kafkasniff_exchanges_total", "broker") == \
        {k: r["count"] for k, r in rep["brokers"].items()}
    assert sum_by(s, "kafkasniff_topic_exchanges_total", "topic") == \
        {k: r["count"] for k, r in rep["topics"].items()}
    assert sum_by(s, "kafkasniff_errors_total") == sum(rep["total"]["errors"].values())
    assert sum_by(s, "kafkasniff_issues_total", "kind") == rep["issues"]
    assert sum_by(s, "kafkasniff_packets_decoded_total") == rep["pipeline"]["packets"]
    assert sum_by(s, "kafkasniff_metrics_capped_total") == 0
    if path.stem == "crafted_throttle":
        assert rep["total"]["throttled"] > 0          # the case is really exercised


def _le(samples, name: str) -> dict:
    """``{(labels without le): {le: cumulative count}}`` of a histogram's buckets."""
    out: dict = defaultdict(dict)
    for n, labels, v in samples:
        if n == name + "_bucket":
            le = labels.pop("le")
            out[tuple(sorted(labels.items()))][float(le)] = v
    return dict(out)


def _expected(counts: dict, bounds) -> dict:
    out = {}
    for key, values in counts.items():
        cum = {}
        per = Counter(bisect_left(bounds, v) for v in values)
        n = 0
        for i, b in enumerate(bounds):
            n += per.get(i, 0)
            cum[b] = n
        cum[float("inf")] = len(values)
        out[key] = cum
    return out


@pytest.mark.parametrize("path", [ERR, CAPTURES / "librdkafka_produce_consume.pcap"],
                         ids=lambda p: p.stem)
def test_histograms_hold_each_exchanges_latency(path, tmp_path):
    """Bucket counts and sums, recomputed from the exchanges ``read`` decodes (the same
    pipeline in this process), for the kafkasniff family and the OpenTelemetry one."""
    _, text = _stats(path, tmp_path)
    s = parse_openmetrics(text)
    ports = [int(p) for p in _ports(path)[1::2]]
    exchanges = decode_capture(path, ports=frozenset(ports)).exchanges if ports else \
        decode_capture(path).exchanges
    ours: dict = defaultdict(list)
    otel: dict = defaultdict(list)
    for ex in exchanges:
        if ex.status != "paired" or ex.latency_ns is None or ex.long_poll:
            continue
        lat = max(0, ex.latency_ns) / 1e9
        api = ex.api_name if ex.api_key >= 0 else "Unknown"
        ours[tuple(sorted({"api_name": api, "api_version": str(ex.api_version),
                           "client_id": ex.client_id or "", "broker": ex.broker}.items()))
             ].append(lat)
        if api in fam.OTEL_OPERATIONS:
            addr, port = fam.server_address_port(ex.broker)
            op_name, op_type = fam.OTEL_OPERATIONS[api]
            otel[tuple(sorted({
                "messaging_system": "kafka", "messaging_operation_name": op_name,
                "messaging_operation_type": op_type,
                "error_type": ex.errors[0] if ex.errors else "",
                "messaging_client_id": ex.client_id or "", "server_address": addr,
                "server_port": port, "messaging_destination_name": ""}.items()))].append(lat)
    assert otel, "no Produce/Fetch/OffsetCommit in the capture"
    assert _le(s, "kafkasniff_request_duration_seconds") == \
        _expected(ours, fam.DURATION_BUCKETS_S)
    assert _le(s, "messaging_client_operation_duration_seconds") == \
        _expected(otel, fam.OTEL_BUCKETS_S)
    total_ns = sum(max(0, ex.latency_ns) for ex in exchanges
                   if ex.status == "paired" and ex.latency_ns is not None and not ex.long_poll)
    got = sum_by(s, "kafkasniff_request_duration_seconds_sum")
    assert got == pytest.approx(total_ns / 1e9, rel=1e-12)
    # errors become OpenTelemetry's error.type: the Kafka error name
    if path == ERR:
        assert sum_by(s, "messaging_client_operation_duration_seconds_count",
                      "error_type", messaging_operation_name="send") \
            .get("NOT_LEADER_OR_FOLLOWER", 0) > 0


def test_jobs_2_writes_the_same_file(tmp_path):
    """Two decoder processes (each counting its connections, merged by the reader) write
    the file one process writes."""
    one = tmp_path / "one.txt"
    two = tmp_path / "two.txt"
    assert run("stats", "--jobs", "1", "--metrics-topics", "--openmetrics", one,
               ERR).exit_code == 0
    p = subprocess.run(KAFKASNIFF + ["stats", "--jobs", "2", "--metrics-topics",
                                     "--openmetrics", str(two), str(ERR)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert two.read_text() == one.read_text()


def test_cardinality_caps_fold_into_other_and_count(tmp_path):
    rep, text = _stats(ERR, tmp_path, "--metrics-topics", "--metrics-max-values", "1")
    s = parse_openmetrics(text)
    clients = sum_by(s, "kafkasniff_exchanges_total", "client_id")
    brokers = sum_by(s, "kafkasniff_exchanges_total", "broker")
    assert len(rep["clients"]) >= 2 and len(rep["brokers"]) >= 2
    assert set(clients) == {next(iter(set(clients) - {OTHER})), OTHER}
    assert set(brokers) - {OTHER} and len(brokers) == 2 and OTHER in brokers
    # nothing is lost: the totals are those of stats
    assert sum(clients.values()) == sum(brokers.values()) == rep["total"]["count"]
    capped = sum_by(s, "kafkasniff_metrics_capped_total", "label")
    assert capped["client_id"] == clients[OTHER]
    assert capped["broker"] == brokers[OTHER]
    kept = [k for k in clients if k != OTHER][0]
    assert clients[kept] == rep["clients"][kept]["count"]
    # every family obeys the cap (the OpenTelemetry one too)
    for n, labels, _ in s:
        for lab in ("client_id", "messaging_client_id"):
            assert labels.get(lab, "") in ("", kept, OTHER), (n, labels)
    topics = {labels["topic"] for _, labels, _ in s if "topic" in labels}
    assert len(topics) <= 2 and len(topics - {OTHER}) <= 1


def test_decoder_deltas_merge_to_the_same_counts():
    """Live decoders and ``stats --jobs`` decoders send deltas that the collector merges:
    the result is what counting every exchange in one place gives, in any split."""
    exchanges = decode_capture(ERR).exchanges
    direct = ExchangeMetrics(topics=True)
    for ex in exchanges:
        direct.add(ex)
    merged = ExchangeMetrics(topics=True)
    decoders = [ExchangeMetrics(topics=True, decoder=True) for _ in range(2)]
    for i, ex in enumerate(exchanges):
        decoders[ex.conn_id % 2].add(ex)
        if i % 7 == 0:                        # deltas taken at arbitrary moments
            for d in decoders:
                merged.merge(d.take_delta())
    for d in decoders:
        merged.merge(d.take_delta())
    assert merged.data == direct.data
    assert openmetrics_text(merged) == openmetrics_text(direct)


def test_long_polls_go_to_their_own_histogram():
    """An exchange marked ``long_poll`` (by the long-poll rules) is counted in
    kafkasniff_long_poll_duration_seconds with its rule, not in the request duration or
    the OpenTelemetry histogram; it is still an exchange of its status. Every paired Fetch
    of the capture is marked here (the rules mark 46 of them)."""
    exchanges = decode_capture(ERR).exchanges
    fetches = [ex for ex in exchanges if ex.api_name == "Fetch" and ex.status == "paired"]
    assert 0 < sum(1 for ex in fetches if ex.long_poll) < len(fetches)
    marked = [replace(ex, long_poll=True, long_poll_rule="fetch_max_wait") for ex in fetches]
    m = ExchangeMetrics()
    for ex in [ex for ex in exchanges if ex not in fetches] + marked:
        m.add(ex)
    s = parse_openmetrics(openmetrics_text(m).decode())
    assert sum_by(s, "kafkasniff_request_duration_seconds_count", api_name="Fetch") == 0
    assert sum_by(s, "messaging_client_operation_duration_seconds_count",
                  messaging_operation_name="poll") == 0
    assert sum_by(s, "kafkasniff_long_poll_duration_seconds_count", "rule",
                  api_name="Fetch") == {"fetch_max_wait": len(fetches)}
    assert sum_by(s, "kafkasniff_long_poll_duration_seconds_sum", api_name="Fetch") == \
        pytest.approx(
        sum(ex.latency_ns for ex in fetches) / 1e9)
    assert sum_by(s, "kafkasniff_exchanges_total", api_name="Fetch", status="paired") \
        == len(fetches)


def test_unwritable_file_is_a_one_line_error(tmp_path):
    res = run("stats", "--openmetrics", tmp_path / "no" / "such" / "dir" / "m.txt", ERR)
    assert res.exit_code == 2
    assert res.output.count("\n") == 1 and "--openmetrics" in res.output
    assert not list(tmp_path.iterdir())


def test_collector_caps_decoders_counts_and_counts_what_it_folds():
    """With a cap of 1, the collector keeps one client_id and one broker of what decoders
    send (each counted up to their own, higher cap) and counts every folded exchange."""
    exchanges = decode_capture(ERR).exchanges
    merged = ExchangeMetrics(max_values=1)
    decoders = [ExchangeMetrics(**merged.settings(), decoder=True) for _ in range(2)]
    for ex in exchanges:
        decoders[ex.conn_id % 2].add(ex)
    for d in decoders:
        merged.merge(d.take_delta())
    s = parse_openmetrics(openmetrics_text(merged).decode())
    clients = sum_by(s, "kafkasniff_exchanges_total", "client_id")
    brokers = sum_by(s, "kafkasniff_exchanges_total", "broker")
    assert len(clients) == len(brokers) == 2 and OTHER in clients and OTHER in brokers
    assert sum(clients.values()) == sum(brokers.values()) == len(exchanges)
    capped = sum_by(s, "kafkasniff_metrics_capped_total", "label")
    assert capped == {"client_id": clients[OTHER], "broker": brokers[OTHER]}
    assert sum_by(s, "kafkasniff_request_duration_seconds_count") == \
        sum(1 for ex in exchanges if ex.status == "paired" and not ex.long_poll)


def test_label_values_any_text_round_trip():
    """client_ids and topics are peer-chosen text: quotes, backslashes, newlines and
    non-ASCII are escaped in the exposition and read back as they were."""
    ex = next(ex for ex in decode_capture(ERR).exchanges if ex.status == "paired")
    odd = 'a "quoted"\\ client\nwith\tcontrol \u00e9\u4e2d'
    m = ExchangeMetrics(topics=True)
    m.add(replace(ex, client_id=odd, topics=("t\n\"x",)))
    s = parse_openmetrics(openmetrics_text(m).decode())
    assert sum_by(s, "kafkasniff_exchanges_total", "client_id") == {odd: 1}
    assert sum_by(s, "kafkasniff_topic_exchanges_total", "topic") == {"t\n\"x": 1}


DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
#: captures with long-polls (rebalances, idle fetches, a failover)
LONG_POLL_CASES = [CAPTURES / "librdkafka_rebalance.pcap", CAPTURES / "broker_failover.pcap",
                   ERR]


def documented_identities() -> list[tuple[list[str], str | None, float, str]]:
    """The table of docs/metrics.md's "The same numbers as `stats`": per line, the series
    summed, the label it is split by (or None), the factor, the ``stats --json`` field
    (``a.b``: field ``b`` of dict ``a``)."""
    text = DOC.read_text()
    section = text.split("## The same numbers as `stats`", 1)[1].split("\n## ", 1)[0]
    out = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or not cells[0].startswith("`kafkasniff_"):
            continue
        left, field = cells
        m = re.fullmatch(r"(.+?)(?: by `(\w+)`)?(?: x (\d+))?", left)
        names = [n.strip().strip("`") for n in m.group(1).split("+")]
        field = re.match(r"`([\w.]+)`", field).group(1)     # the rest of the cell is prose
        out.append((names, m.group(2), float(m.group(3) or 1), field))
    return out


@pytest.mark.parametrize("path", LONG_POLL_CASES, ids=lambda p: p.stem)
def test_documented_identities_hold(path, tmp_path):
    """Every identity docs/metrics.md states between the series and ``stats --json`` holds,
    per API, client_id and broker, on captures with long-polls (the docs said request
    durations plus long-poll durations make ``latency_count``, which counts no long-poll)."""
    rows = documented_identities()
    assert len(rows) >= 8
    rep, text = _stats(path, tmp_path)
    assert rep["total"]["long_polls"] > 0
    s = parse_openmetrics(text)
    for dim, label in (("apis", "api_name"), ("clients", "client_id"), ("brokers", "broker")):
        for key, row in rep[dim].items():
            where = {label: "" if (dim, key) == ("clients", "(none)") else key}
            for names, by, factor, field in rows:
                want = row
                for part in field.split("."):
                    want = want.get(part, 0)
                if by is None:
                    got = sum(sum_by(s, n, **where) for n in names) * factor
                    assert got == pytest.approx(want), (dim, key, names, field)
                else:
                    got = defaultdict(float)
                    for n in names:
                        for k, v in sum_by(s, n, by, **where).items():
                            got[k] += v * factor
                    assert _nonzero(dict(got)) == want, (dim, key, names, by, field)
