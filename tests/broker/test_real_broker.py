"""kafkasniff on traffic between real clients and a real Apache Kafka 4.3.1 broker.

One capture (``tcpdump -i lo`` on the broker's PLAINTEXT port, the capture harness's
:class:`harness.tcpdump.Tcpdump`) of: an admin client creating a topic; two librdkafka
producers (confluent-kafka) writing lz4 and zstd batches; a librdkafka KIP-848 consumer
(``group.protocol=consumer``) reading them; a kafka-python producer writing gzip batches and a
kafka-python classic-group consumer reading everything. The capture is decoded in-process and
compared with the broker's request log (server-side truth, :mod:`tests.support.kafka_broker`)
and with what the clients sent.

Tolerated departures, each explained where it is allowed: a consumer closing while its Fetch
long-polls makes the broker answer into a closed socket, so the last response on that
connection may be cut (``frame_truncated``) or absent, and a request the client sent just
before closing may never have been read by the broker (unanswered, not in the log).

A departure real peers show, which kafkasniff must report: librdkafka (2.16) asks for all
topics with a flexible Metadata request (v9+) by leaving the 4-byte placeholder of the topics
array count (``00 00 00 00``) where the spec has a 1-byte null compact array (``00``): the
broker reads topics=null, allow_auto_topic_creation=false, include_topic_authorized_operations
=false, no tagged fields, and ignores the 3 bytes left (``01 00 00``, librdkafka's true, false
and empty tags). kafkasniff decodes the body as the broker does and reports the 3 bytes as
``trailing_bytes`` (src/rdkafka_request.c, ``rd_kafka_MetadataRequest0``: "v9+: keep 0,
varint encoded null, all topics", and ``rd_kafka_buf_write_arraycnt_pos`` writes an int32).
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kafkasniff.issues import IssueKind, Severity
from kafkasniff.model import ConnectionSummary, DecodeIssue, Exchange, ExchangeStatus
from kafkasniff.pipeline import Pipeline, PipelineOptions, analyze
from tests.broker.common import (
    body_differences,
    complete,
    cut_by_close,
    librdkafka_all_topics_metadata,
    tcpdump_class,
)
from tests.support.kafka_broker import KafkaBroker, LoggedRequest

pytestmark = [
    pytest.mark.skipif(shutil.which("tcpdump") is None, reason="tcpdump not installed"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),   # kafka-python
]

N = 20                      # records per producer
PARTITIONS = 3
CK_CODECS = ("lz4", "zstd")  # one librdkafka producer each
KP_CODEC = "gzip"


# --------------------------------------------------------------------------- scenario


@dataclass
class Captured:
    """The scenario's capture, decoded, with the truth to compare it with."""

    broker: KafkaBroker
    pcap: Path
    topic: str
    sent: dict[str, list[bytes]]          # producer client.id -> record values
    codecs: dict[str, str]                # producer client.id -> compression codec
    logged: list[LoggedRequest]           # the broker's request log, during the capture
    exchanges: list[Exchange] = field(default_factory=list)
    issues: list[DecodeIssue] = field(default_factory=list)
    connections: dict[str, ConnectionSummary] = field(default_factory=dict)  # by client

    def all_issues(self) -> list[tuple[Exchange | None, DecodeIssue]]:
        return [(ex, i) for ex in self.exchanges for i in ex.issues] + \
            [(None, i) for i in self.issues]


def _librdkafka(bootstrap: str, topic: str, tag: str) -> tuple[dict, dict]:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient

    # a Metadata request for all topics (see the module docstring)
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": f"{tag}-ck-admin"})
    assert topic in admin.list_topics(timeout=10).topics
    del admin
    sent, codecs = {}, {}
    for codec in CK_CODECS:
        cid = f"{tag}-ck-{codec}"
        p = Producer({"bootstrap.servers": bootstrap, "client.id": cid, "acks": "all",
                      "compression.type": codec, "linger.ms": 5})
        values = [f"{cid}-value-{i}-".encode() + b"x" * i for i in range(N)]
        for i, v in enumerate(values):
            p.produce(topic, key=f"k{i}".encode(), value=v)
        assert p.flush(20) == 0
        del p
        sent[cid], codecs[cid] = values, codec
    want = sorted(v for vs in sent.values() for v in vs)
    c = Consumer({"bootstrap.servers": bootstrap, "client.id": f"{tag}-ck-consumer",
                  "group.id": f"{tag}-ck-group", "group.protocol": "consumer",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 100})
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < len(want) and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            got.append(m.value())
    c.commit(asynchronous=False)
    c.close()
    assert sorted(got) == want
    return sent, codecs


def _kafka_python(bootstrap: str, topic: str, tag: str, total: int) -> tuple[dict, dict]:
    from kafka import KafkaConsumer, KafkaProducer

    cid = f"{tag}-kp-{KP_CODEC}"
    values = [f"{cid}-value-{i}".encode() for i in range(N)]
    p = KafkaProducer(bootstrap_servers=bootstrap, client_id=cid, acks="all",
                      compression_type=KP_CODEC, linger_ms=5)
    futures = [p.send(topic, key=f"k{i}".encode(), value=v) for i, v in enumerate(values)]
    p.flush(20)
    for f in futures:
        f.get(timeout=20)
    p.close(5)
    c = KafkaConsumer(topic, bootstrap_servers=bootstrap, client_id=f"{tag}-kp-consumer",
                      group_id=f"{tag}-kp-group", auto_offset_reset="earliest",
                      fetch_max_wait_ms=100, consumer_timeout_ms=20000)
    got = []
    for m in c:
        got.append(m.value)
        if len(got) == total:
            break
    c.commit()
    c.close()
    assert len(got) == total and set(values) <= set(got)
    return {cid: values}, {cid: KP_CODEC}


@pytest.fixture(scope="module")
def captured(kafka_broker: KafkaBroker, tmp_path_factory) -> Captured:
    """Run the scenario once under tcpdump and decode the capture."""
    broker = kafka_broker
    pcap = tmp_path_factory.mktemp("real-broker") / "real_broker.pcap"
    tag = "ks-" + uuid.uuid4().hex[:6]
    topic = f"{tag}-topic"
    tcpdump = tcpdump_class()(pcap, [broker.port])
    log_offset = broker.request_log_size()
    tcpdump.start()
    try:
        broker.create_topic(topic, PARTITIONS)
        sent, codecs = _librdkafka(broker.bootstrap_servers, topic, tag)
        kp_sent, kp_codecs = _kafka_python(broker.bootstrap_servers, topic, tag,
                                           total=N * (len(CK_CODECS) + 1))
        sent.update(kp_sent)
        codecs.update(kp_codecs)
    except BaseException:
        tcpdump.kill()
        raise
    tcpdump.stop()
    time.sleep(0.3)   # the broker logs a request once its response is sent
    cap = Captured(broker, pcap, topic, sent, codecs,
                   [r for r in broker.requests(log_offset)
                    if r.local_port == broker.port and not r.forwarded])
    pipe = Pipeline(PipelineOptions(ports=frozenset({broker.port}), with_records=True,
                                    meta_records=True))
    for rec in analyze([pcap], pipeline=pipe):
        if type(rec) is Exchange:
            cap.exchanges.append(rec)
        elif type(rec) is DecodeIssue:
            cap.issues.append(rec)
        elif type(rec) is ConnectionSummary:
            cap.connections[rec.client] = rec
    return cap


# --------------------------------------------------------------------------- helpers


def _port(endpoint: str) -> int:
    return int(endpoint.rsplit(":", 1)[1])


def _captured_requests(cap: Captured) -> list[LoggedRequest]:
    """Logged requests on connections the capture saw open (their SYN captured)."""
    ports = {_port(c) for c, s in cap.connections.items() if s.handshake_seen}
    return [r for r in cap.logged if r.client_port in ports]


def _records(cap: Captured, api: str):
    """(exchange, batch, record) of every record of ``api`` exchanges."""
    for ex in cap.exchanges:
        if ex.api_name != api:
            continue
        for loc in ex.record_fields:
            if loc.topic not in (None, cap.topic) or loc.records.decoded is None:
                continue
            for b in loc.records.decoded.batches:
                for r in b.records or ():
                    yield ex, b, r


# --------------------------------------------------------------------------- tests


def test_every_logged_request_is_found_and_paired(captured: Captured):
    cap = captured
    logged = _captured_requests(cap)
    clients = {r.client_id for r in logged}
    tag = cap.topic.removesuffix("-topic")
    assert {"kafkasniff-test-admin", f"{tag}-ck-admin", f"{tag}-ck-consumer",
            f"{tag}-kp-consumer", *cap.sent} <= clients, clients
    assert len(logged) >= 40, f"only {len(logged)} requests logged"
    by_key = {(_port(ex.client), ex.correlation_id): ex for ex in cap.exchanges}
    cut_ok = cut_by_close(cap)
    problems = []
    for r in logged:
        ex = by_key.get((r.client_port, r.correlation_id))
        if ex is None:
            problems.append(f"not found: {r}")
            continue
        got = (ex.api_key, ex.api_version, ex.correlation_id, ex.client_id)
        want = (r.api_key, r.api_version, r.correlation_id, r.client_id)
        if got != want:
            problems.append(f"{ex.client} corr {r.correlation_id}: decoded {got}, "
                            f"broker logged {want}")
        if not complete(ex) and (ex.client, ex.correlation_id) not in cut_ok:
            problems.append(f"{ex.client} {ex.api_name} corr {ex.correlation_id}: "
                            f"{ex.status}, response complete: "
                            f"{ex.response is not None and ex.response.complete}")
    assert not problems, "\n".join(problems[:20])


def test_every_captured_exchange_is_in_the_log(captured: Captured):
    """Conversely: the broker logged every paired exchange; an unanswered request is one
    the client sent just before it closed the connection (the broker never read it)."""
    cap = captured
    logged = {(r.client_port, r.correlation_id) for r in cap.logged}
    cut_ok = cut_by_close(cap)
    for ex in cap.exchanges:
        key = (_port(ex.client), ex.correlation_id)
        if ex.status == ExchangeStatus.PAIRED:
            assert key in logged, f"{ex.client} {ex.api_name} corr {ex.correlation_id}"
        else:
            assert ex.status == ExchangeStatus.UNANSWERED, (ex.client, ex.status)
            assert (ex.client, ex.correlation_id) in cut_ok, (ex.client, ex.api_name)


def test_decoded_bodies_equal_the_brokers(captured: Captured):
    """Every request and response body equals what the broker itself parsed and answered, as
    its request log shows them (every field the log has, at every depth)."""
    diffs, compared = body_differences(captured)
    assert not diffs, "\n".join(diffs[:30])
    assert compared >= 80


def test_produced_records_are_in_produce_and_fetch(captured: Captured):
    cap = captured
    produced: dict[str, Counter] = defaultdict(Counter)
    retried: dict[str, Counter] = defaultdict(Counter)
    codecs: dict[str, set] = defaultdict(set)
    for ex, batch, rec in _records(cap, "Produce"):
        (retried if ex.errors else produced)[ex.client_id][rec.value] += 1
        codecs[ex.client_id].add(batch.codec)
    for cid, values in cap.sent.items():
        # every record written once; a batch the broker refused is sent again
        assert produced[cid] == Counter(values), (cid, {
            ex.correlation_id: ex.errors for ex in cap.exchanges
            if ex.client_id == cid and ex.api_name == "Produce"})
        assert set(retried[cid]) <= set(values), cid
        assert codecs[cid] == {cap.codecs[cid]}, (cid, codecs[cid])
    fetched: dict[str, set] = defaultdict(set)
    fetch_codecs = set()
    for ex, batch, rec in _records(cap, "Fetch"):
        fetched[ex.client_id].add(rec.value)
        fetch_codecs.add(batch.codec)
    everything = {v for vs in cap.sent.values() for v in vs}
    ck_values = {v for cid, vs in cap.sent.items() if "-ck-" in cid for v in vs}
    ck_consumer = next(c for c in fetched if c.endswith("-ck-consumer"))
    kp_consumer = next(c for c in fetched if c.endswith("-kp-consumer"))
    assert ck_values <= fetched[ck_consumer]
    assert everything <= fetched[kp_consumer]
    # the broker hands the batches out as the producers compressed them
    assert fetch_codecs == set(cap.codecs.values())


def test_librdkafka_all_topics_metadata_is_reported(captured: Captured):
    cap = captured
    meta = [ex for ex in cap.exchanges if ex.api_name == "Metadata" and
            (ex.client_id or "").endswith("-ck-admin") and ex.request.body["topics"] is None]
    assert meta, "the admin client sent no all-topics Metadata request"
    for ex in meta:
        assert [i.kind for i in ex.issues] == [IssueKind.TRAILING_BYTES], ex.issues
        assert librdkafka_all_topics_metadata(ex, ex.issues[0]), ex.issues[0]
        # decoded as the broker read it, and the broker answered with every topic
        assert ex.request.body["allow_auto_topic_creation"] is False
        assert cap.topic in [t["name"] for t in ex.response.body["topics"]]


def test_no_unexpected_issue(captured: Captured):
    cap = captured
    cut_conns = {c for c, _ in cut_by_close(cap)}
    unexpected = []
    for ex, i in cap.all_issues():
        assert i.kind != IssueKind.INTERNAL_ERROR, i.message
        if i.severity == Severity.INFO or librdkafka_all_topics_metadata(ex, i):
            continue
        # the broker answered a long-polling Fetch into a socket the consumer had closed:
        # only the first bytes of that last response reached the wire
        if i.kind == IssueKind.FRAME_TRUNCATED and i.direction == "response" and \
                i.client in cut_conns:
            continue
        unexpected.append(f"{i.kind} {i.severity} {i.client} {i.direction}: {i.message}"
                          + (f" ({ex.api_name} corr {ex.correlation_id})" if ex else ""))
    assert not unexpected, "\n".join(unexpected)


def test_latency_and_throttle_agree_with_the_broker(captured: Captured):
    """Sniffer latency (request's last byte to response's first byte) is positive and at
    least the broker's time from reading the request to starting to send the response
    (``totalTimeMs - sendTimeMs``: the send time includes writing the whole response, which
    the sniffer's latency does not); throttle_time_ms is the broker's."""
    cap = captured
    log = {(r.client_port, r.correlation_id): r for r in cap.logged}
    checked = 0
    for ex in cap.exchanges:
        if ex.status != ExchangeStatus.PAIRED:
            continue
        assert ex.latency_ns is not None and ex.latency_ns > 0, (ex.client, ex.api_name)
        r = log.get((_port(ex.client), ex.correlation_id))
        if r is None:
            continue
        broker_ms = r.total_time_ms - float(r.fields["sendTimeMs"])
        assert ex.latency_ns / 1e6 >= broker_ms - 0.01, \
            (ex.client, ex.api_name, ex.correlation_id, ex.latency_ns, r.fields)
        if ex.throttle_time_ms is not None and ex.response is not None and \
                ex.response.complete:
            assert ex.throttle_time_ms == r.throttle_time_ms, (ex.client, ex.api_name)
        checked += 1
    assert checked >= 40
