"""Two things only a real broker shows, with the Java client: an idle consumer whose every
Fetch waits ``max_wait_ms`` on the broker (a long-poll, not a slow broker), and a batch of
more than 1 MB in one Produce request and one Fetch response.

What it proves: the long-polls are paired, their latency and the broker's own time both
reach ``max_wait_ms`` as the request asked, and they return no records; the 1.2 MB batch is
one batch in one Produce request, decoded record by record at the offsets the producer got,
and a consumer's Fetch returns it whole; every body equals the broker's.
"""

from __future__ import annotations

import uuid

import pytest

from tests.broker.common import (
    body_differences,
    capture_scenario,
    consumed_missing,
    produced_mismatches,
    record_batches,
    status_allowing_resets,
    unexpected_issues,
    unpaired,
)

RECORD_BYTES = 1000
BATCH_BYTES = 1_200_000


@pytest.fixture(scope="module")
def waits_and_big(kafka_broker, java_clients, tmp_path_factory):
    broker = kafka_broker
    tag = "lp-" + uuid.uuid4().hex[:6]
    topic = f"{tag}-topic"
    broker.create_topic(topic, 1, config={"max.message.bytes": str(4 * BATCH_BYTES)})
    bs = broker.bootstrap_servers

    def scenario():
        runs = {"idle": java_clients.run("idle", bs, topic, f"{tag}-idle", f"{tag}-gidle", "4")}
        runs["big"] = java_clients.run("big", bs, topic, f"{tag}-big", str(RECORD_BYTES),
                                       str(BATCH_BYTES))
        n = len(runs["big"].events("produced"))
        runs["consume"] = java_clients.run("consume", bs, topic, f"{tag}-reader", f"{tag}-gr",
                                           "classic", str(n))
        return runs

    cap, runs = capture_scenario(broker, broker.port,
                                 tmp_path_factory.mktemp("longpoll") / "longpoll.pcap",
                                 scenario, with_records=True)
    return tag, runs, cap


def test_every_logged_request_is_paired_and_equal(waits_and_big):
    cap = waits_and_big[2]
    assert not unpaired(cap, status_allowing_resets(cap))
    diffs, compared = body_differences(cap)
    assert not diffs, "\n".join(diffs[:20])
    assert not unexpected_issues(cap)


def test_idle_fetches_wait_max_wait_ms(waits_and_big):
    tag, runs, cap = waits_and_big
    assert runs["idle"].events("idle")[0]["records"] == 0
    logged = {(r.client_port, r.correlation_id): r for r in cap.logged}
    waits = []
    for ex in cap.exchanges:
        if ex.client_id != f"{tag}-idle" or ex.api_name != "Fetch" or ex.latency_ns is None:
            continue
        wait_ms = ex.request.body["max_wait_ms"]
        assert wait_ms == 500
        r = logged[(int(ex.client.rsplit(":", 1)[1]), ex.correlation_id)]
        records = [b for _, _, b in record_batches([ex], ex.client_id, "Fetch")]
        if not records and r.total_time_ms >= 0.9 * wait_ms:
            waits.append((ex.latency_ns / 1e6, r.total_time_ms))
    assert waits, "no Fetch waited"     # 4 s idle: ~6 on an idle machine, 1 seen under load
    assert all(lat >= 0.9 * 500 for lat, _ in waits), waits


def test_a_batch_of_more_than_1_mb_in_one_produce_and_one_fetch(waits_and_big):
    tag, runs, cap = waits_and_big
    produced = runs["big"].events("produced")
    assert len(produced) * RECORD_BYTES >= BATCH_BYTES
    assert not produced_mismatches(cap, produced)
    sent = [b for _, _, b in record_batches(cap.exchanges, f"{tag}-big")]
    assert max(b.batch_bytes for b in sent) >= 1_000_000
    assert sum(b.record_count for b in sent) == len(produced)
    fetched = [b for _, _, b in record_batches(cap.exchanges, f"{tag}-reader", "Fetch")]
    assert max(b.batch_bytes for b in fetched) >= 1_000_000
    assert not any(b.partial for b in fetched if b.batch_bytes >= 1_000_000)
    consumed = runs["consume"].events("consumed")
    assert len(consumed) == len(produced)
    assert not consumed_missing(cap, consumed, "Fetch")
