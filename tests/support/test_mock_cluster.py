"""tests.support.mock_cluster against a real librdkafka client (confluent-kafka)."""

from __future__ import annotations

import logging
import os
import re

import pytest

confluent_kafka = pytest.importorskip(
    "confluent_kafka", reason="confluent-kafka (which bundles librdkafka) is not installed")

from confluent_kafka.admin import AdminClient  # noqa: E402

from tests.support.mock_cluster import (  # noqa: E402
    MockCluster,
    MockClusterError,
    MockRequest,
    find_librdkafka,
    librdkafka_version,
)

PRODUCE, FETCH, METADATA = 0, 1, 3
NOT_LEADER_OR_FOLLOWER = 6


def _os_thread_count() -> int:
    """Threads of this process, including librdkafka's C threads."""
    return len(os.listdir("/proc/self/task"))


def _produce(bootstrap: str, topic: str, partition: int, *, extra: dict | None = None,
             logger: logging.Logger | None = None) -> confluent_kafka.Message:
    conf = {"bootstrap.servers": bootstrap, "linger.ms": 0, "message.timeout.ms": 20000}
    if logger is not None:
        conf.update({"debug": "protocol", "logger": logger})
    conf.update(extra or {})
    producer = confluent_kafka.Producer(conf)
    reports: list[tuple[object, object]] = []
    producer.produce(topic, value=b"value-1", key=b"key-1", partition=partition,
                     on_delivery=lambda err, msg: reports.append((err, msg)))
    assert producer.flush(20) == 0, "message still in queue after 20 s"
    del producer
    assert len(reports) == 1
    err, msg = reports[0]
    assert err is None, f"delivery failed: {err}"
    return msg


class _ListHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _logger(name: str) -> tuple[logging.Logger, _ListHandler]:
    logger = logging.getLogger(f"kafkasniff.tests.{name}")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    handler = _ListHandler()
    logger.handlers[:] = [handler]
    return logger, handler


def test_library_is_found_and_has_a_version() -> None:
    assert os.path.exists(find_librdkafka())
    assert re.match(r"^\d+\.\d+", librdkafka_version())


def test_produce_reaches_the_leader_and_is_tracked() -> None:
    with MockCluster(num_brokers=3) as cluster:
        assert cluster.broker_ids == [1, 2, 3]
        assert len(cluster.broker_ports) == 3
        assert cluster.bootstrap_servers == ",".join(
            f"127.0.0.1:{p}" for p in cluster.broker_ports)
        cluster.create_topic("mc-orders", partitions=3)
        cluster.start_request_tracking()

        msg = _produce(cluster.bootstrap_servers, "mc-orders", 1)
        assert (msg.topic(), msg.partition(), msg.offset()) == ("mc-orders", 1, 0)

        # The ids/ports the brokers advertise agree with broker_port_by_id.
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        md = admin.list_topics(timeout=10)
        advertised = {b.id: b.port for b in md.brokers.values()}
        assert advertised == cluster.broker_port_by_id
        leader = md.topics["mc-orders"].partitions[1].leader
        del admin

        requests = cluster.get_requests()
        assert all(isinstance(r, MockRequest) for r in requests)
        produce = [r for r in requests if r.api_key == PRODUCE]
        assert len(produce) == 1
        assert produce[0].broker_id == leader
        assert cluster.request_counts()[METADATA] >= 1
        stamps = [r.timestamp_us for r in requests]
        assert stamps == sorted(stamps)
        assert all(r.broker_id in cluster.broker_ids for r in requests)

        cluster.clear_requests()
        assert cluster.get_requests() == []


def test_pushed_errors_are_returned_then_the_retry_succeeds() -> None:
    logger, handler = _logger("errors")
    with MockCluster(num_brokers=1) as cluster:
        cluster.create_topic("mc-errors", partitions=1)
        cluster.push_request_errors(PRODUCE, NOT_LEADER_OR_FOLLOWER, NOT_LEADER_OR_FOLLOWER)
        cluster.start_request_tracking()
        msg = _produce(cluster.bootstrap_servers, "mc-errors", 0, logger=logger,
                       extra={"retry.backoff.ms": 10})
        assert msg.offset() == 0
        assert cluster.request_counts()[PRODUCE] == 3
    sent = [line for line in handler.lines if "Sent ProduceRequest" in line]
    assert len(sent) == 3, handler.lines


def test_broker_error_rtts_are_consumed_and_apiversion_is_honoured() -> None:
    logger, handler = _logger("apiversion")
    with MockCluster(num_brokers=1) as cluster:
        cluster.create_topic("mc-rtt", partitions=1)
        cluster.set_apiversion(PRODUCE, 3, 7)
        cluster.broker_push_request_error_rtts(1, PRODUCE, (NOT_LEADER_OR_FOLLOWER, 5), (0, 5))
        assert cluster.broker_error_stack_count(1, PRODUCE) == 2
        _produce(cluster.bootstrap_servers, "mc-rtt", 0, logger=logger,
                 extra={"retry.backoff.ms": 10})
        assert cluster.broker_error_stack_count(1, PRODUCE) == 0
    versions = {m.group(1) for line in handler.lines
                if (m := re.search(r"Sent ProduceRequest \(v(\d+),", line))}
    assert versions == {"7"}, handler.lines


def test_controls_report_bad_arguments() -> None:
    with MockCluster(num_brokers=2) as cluster:
        cluster.create_topic("mc-dup", partitions=1)
        with pytest.raises(MockClusterError) as info:
            cluster.create_topic("mc-dup", partitions=1)
        assert info.value.error_code
        with pytest.raises(MockClusterError):
            cluster.broker_set_rtt(99, 10)
        with pytest.raises(ValueError):
            cluster.coordinator_set("consumer", "g", 1)
        cluster.coordinator_set("group", "g", 2)
        cluster.broker_set_rtt(-1, 0)
        cluster.broker_set_down(2)
        cluster.broker_set_up(2)
    with pytest.raises(MockClusterError, match="closed"):
        cluster.create_topic("after-close", partitions=1)
    cluster.close()  # idempotent


def test_repeated_and_concurrent_clusters_leak_no_threads() -> None:
    before = _os_thread_count()
    for _ in range(3):
        with MockCluster(num_brokers=2) as cluster:
            cluster.create_topic("mc-repeat", partitions=2)
            _produce(cluster.bootstrap_servers, "mc-repeat", 0)
    a, b = MockCluster(num_brokers=1), MockCluster(num_brokers=1)
    assert set(a.broker_ports).isdisjoint(b.broker_ports)
    a.close()
    b.close()
    assert _os_thread_count() == before
