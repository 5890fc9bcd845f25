"""``kafkasniff live`` on the loopback while real clients talk to a real Kafka 4.3.1 broker,
checked against the broker's request log (issue 12: tests against the live broker, not only
against committed captures).

A librdkafka producer (lz4) writes records to a new topic and a librdkafka consumer in a
classic group reads them back while ``kafkasniff live -i lo --json --records`` runs with two
decoder processes. Every request the broker logged on these clients' connections must come
out of live capture paired, with the broker's api_key, api_version, correlation_id and
client_id, and every record produced must be in a decoded Produce request.
"""

from __future__ import annotations

import time
import uuid

from tests.live.helpers import LiveProcess

N = 30


def _clients(bootstrap: str, topic: str, tag: str) -> list[bytes]:
    from confluent_kafka import Consumer, Producer

    values = [f"{tag}-value-{i}".encode() for i in range(N)]
    p = Producer({"bootstrap.servers": bootstrap, "compression.type": "lz4",
                  "linger.ms": 5, "client.id": f"{tag}-producer"})
    for i, v in enumerate(values):
        p.produce(topic, key=f"k{i}".encode(), value=v)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{tag}-group",
                  "client.id": f"{tag}-consumer", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + 40
    while len(got) < N and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    assert sorted(got) == sorted(values)
    return values


def test_live_capture_agrees_with_the_broker_request_log(kafka_broker, tmp_path):
    tag = f"live-{uuid.uuid4().hex[:6]}"
    topic = f"{tag}-topic"
    kafka_broker.create_topic(topic, partitions=2)
    offset = kafka_broker.request_log_size()
    live = LiveProcess(["-i", "lo", "--no-tui", "--json", "--records", "--workers", "2",
                        "--port", str(kafka_broker.port)], tmp_path / "live.jsonl").start()
    try:
        values = _clients(kafka_broker.bootstrap_servers, topic, tag)
        time.sleep(1.0)                 # the last responses reach the decoders
    finally:
        rc = live.stop()
    assert rc == 0, live.stderr[-2000:]
    lines = live.json_lines()
    exchanges = [o for o in lines if o["type"] == "exchange"]
    ours = [e for e in exchanges if (e["client_id"] or "").startswith(tag)]
    assert ours, f"live printed no exchange of {tag}: {live.stderr[-1000:]}"
    ports = {int(e["connection"]["client"].rsplit(":", 1)[1]) for e in ours}

    logged = [r for r in kafka_broker.requests(offset)
              if r.client_port in ports and r.local_port == kafka_broker.port
              and not r.forwarded]
    assert logged, "the broker logged no request of these clients"
    by_key = {(int(e["connection"]["client"].rsplit(":", 1)[1]), e["correlation_id"]): e
              for e in exchanges}
    # a consumer closing while a request is in flight: the broker logs the response it
    # wrote into the closed socket, the wire carries none (see test_real_broker.py); only
    # the last request of a connection may end so
    last = {}
    for (port, corr) in by_key:
        last[port] = max(last.get(port, corr), corr)
    missing, wrong = [], []
    for r in logged:
        e = by_key.get((r.client_port, r.correlation_id))
        if e is None:
            missing.append((r.client_port, r.correlation_id, r.api_key))
            continue
        got = (e["api_key"], e["api_version"], e["client_id"], e["status"])
        cut = e["status"] == "unanswered" and last[r.client_port] == r.correlation_id
        want = (r.api_key, r.api_version, r.client_id, "unanswered" if cut else "paired")
        if got != want:
            wrong.append((r.client_port, r.correlation_id, got, want))
    assert not missing, f"requests the broker logged that live did not print: {missing}"
    assert not wrong, wrong

    # every produced value is in a decoded Produce request of the live output
    produced = set()
    for e in ours:
        if e["api_name"] != "Produce":
            continue
        for t in e["request"]["body"]["topic_data"]:
            for part in t["partition_data"]:
                for batch in (part["records"] or {}).get("batches", []):
                    assert batch["codec"] == "lz4"
                    produced.update(r["value"]["text"] for r in batch["records"])
    assert {v.decode() for v in values} <= produced, sorted(produced)[:5]
    issues = [o for o in lines if o["type"] == "issue" and o["severity"] == "error"]
    assert not issues, issues[:3]
