"""Real throttling: client quotas on a real Kafka 4.3.1 broker (``producer_byte_rate``,
``consumer_byte_rate`` and ``request_percentage`` for three client ids, set with Kafka's own
``kafka-configs`` tool, which sends AlterClientQuotas) slow a librdkafka producer, consumer
and admin client down, under tcpdump.

What it proves: the AlterClientQuotas exchanges decode and pair; every Produce and Fetch of the
throttled clients carries the broker's throttle time (``throttle_time_ms`` equal to the
request log's ``throttleTimeMs``), some of each are throttled, and ``stats --json`` counts
them as throttled.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from click.testing import CliRunner

from kafkasniff.cli import main
from kafkasniff.model import ExchangeStatus
from tests.broker.common import capture_scenario, client_port

RATE = 4096             # bytes per second, both quotas
RECORDS, SIZE = 12, 1024
REQUEST_PERCENTAGE = 0.1   # of one request handler thread's time, per quota window
METADATA_REQUESTS = 4



def _set_quota(broker, client_id: str, quota: str, value: float = RATE) -> None:
    """``kafka-configs --alter --entity-type clients`` (kafka.admin.ConfigCommand)."""
    cmd = broker.java("kafka.admin.ConfigCommand", "--bootstrap-server",
                       broker.bootstrap_servers, "--alter", "--add-config",
                       f"{quota}={value}", "--entity-type", "clients", "--entity-name",
                       client_id, heap="256m")
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr


def _throttled_clients(broker, topic: str, tag: str) -> None:
    from confluent_kafka import Consumer, Producer

    # the three kafka-configs runs (a JVM each) at once
    quotas = [(f"{tag}-producer", "producer_byte_rate", RATE),
              (f"{tag}-consumer", "consumer_byte_rate", RATE),
              (f"{tag}-requests", "request_percentage", REQUEST_PERCENTAGE)]
    with ThreadPoolExecutor(len(quotas)) as pool:
        list(pool.map(lambda q: _set_quota(broker, *q), quotas))
    time.sleep(0.5)     # quotas reach the broker through the metadata log
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers,
                         "client.id": f"{tag}-requests"})
    for _ in range(METADATA_REQUESTS):
        admin.list_topics(topic, timeout=30)
    del admin
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0,
                  "client.id": f"{tag}-producer", "batch.num.messages": 1})
    for i in range(RECORDS):
        p.produce(topic, value=bytes([65 + i % 26]) * SIZE)
        p.poll(0)
    assert p.flush(60) == 0
    del p
    c = Consumer({"bootstrap.servers": broker.bootstrap_servers,
                  "client.id": f"{tag}-consumer", "group.id": f"{tag}-group",
                  "auto.offset.reset": "earliest", "fetch.max.bytes": 2 * SIZE,
                  "message.max.bytes": 2 * SIZE,
                  "max.partition.fetch.bytes": 2 * SIZE, "fetch.wait.max.ms": 100})
    c.subscribe([topic])
    got = 0
    deadline = time.monotonic() + 60
    while got < RECORDS and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got += 1
    c.close()
    assert got == RECORDS


@pytest.fixture(scope="module")
def throttled(kafka_broker, tmp_path_factory):
    broker = kafka_broker
    tag = "thr-" + uuid.uuid4().hex[:6]
    topic = f"{tag}-topic"
    broker.create_topic(topic, partitions=1)
    cap, _ = capture_scenario(
        broker, broker.port, tmp_path_factory.mktemp("throttle") / "throttle.pcap",
        lambda: _throttled_clients(broker, topic, tag))
    return tag, cap


def test_alter_client_quotas_is_decoded(throttled):
    tag, cap = throttled
    exchanges = cap.exchanges
    alters = [ex for ex in exchanges if ex.api_name == "AlterClientQuotas"]
    assert len(alters) == 3 and all(ex.status == ExchangeStatus.PAIRED and not ex.errors
                                    for ex in alters)
    entities = sorted(e["entity"][0]["entity_name"] for ex in alters
                      for e in ex.request.body["entries"])
    assert entities == [f"{tag}-consumer", f"{tag}-producer", f"{tag}-requests"]
    ops = {op["key"]: op["value"] for ex in alters for e in ex.request.body["entries"]
           for op in e["ops"]}
    assert ops == {"producer_byte_rate": RATE, "consumer_byte_rate": RATE,
                   "request_percentage": REQUEST_PERCENTAGE}


def _by_key(cap):
    """Exchanges by (client port, correlation_id, client_id): a port another connection of
    the capture used before is told apart by the client_id."""
    return {(client_port(ex.client), ex.correlation_id, ex.client_id): ex
            for ex in cap.exchanges}


def test_request_percentage_throttles_metadata(throttled):
    """A request-time quota (request_percentage) throttles every API, here Metadata: the
    throttled answers carry the broker's throttle time."""
    tag, cap = throttled
    by_key = _by_key(cap)
    throttles = []
    for r in cap.logged:
        if r.client_id == f"{tag}-requests" and r.api_key == 3:
            ex = by_key[(r.client_port, r.correlation_id, r.client_id)]
            assert ex.throttle_time_ms == int(r.throttle_time_ms)
            throttles.append(ex.throttle_time_ms)
    assert len(throttles) >= METADATA_REQUESTS and max(throttles) > 0


def test_throttle_times_are_the_brokers(throttled):
    tag, cap = throttled
    by_key = _by_key(cap)
    throttled_apis = set()
    compared = 0
    for r in cap.logged:
        if r.api_key not in (0, 1) or not (r.client_id or "").startswith(tag):
            continue
        ex = by_key[(r.client_port, r.correlation_id, r.client_id)]
        assert ex.status == ExchangeStatus.PAIRED
        assert ex.throttle_time_ms == int(r.throttle_time_ms), (ex.api_name, r.fields)
        compared += 1
        if ex.throttle_time_ms > 0:
            throttled_apis.add(ex.api_name)
    assert compared >= RECORDS // 2
    assert throttled_apis == {"Produce", "Fetch"}


def test_stats_counts_the_throttled_exchanges(throttled):
    tag, cap = throttled
    exchanges = cap.exchanges
    res = CliRunner().invoke(main, ["stats", "--json", str(cap.pcap)], catch_exceptions=False)
    assert res.exit_code == 0
    apis = json.loads(res.output)["apis"]
    for api in ("Produce", "Fetch"):
        throttles = [ex.throttle_time_ms for ex in exchanges
                     if ex.api_name == api and ex.throttle_time_ms]
        assert throttles, api
        assert apis[api]["throttled"] == len(throttles)
        assert apis[api]["throttle_total_ms"] == sum(throttles)
        assert apis[api]["throttle_max_ms"] == max(throttles)
