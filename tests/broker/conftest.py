"""The real Kafka broker of the tests in this directory: one per test session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.live.helpers import capture_permission
from tests.support.go_clients import GoClients
from tests.support.java_clients import JavaClients
from tests.support.kafka_broker import LIB_DIR, KafkaBroker, KafkaCluster


@pytest.fixture(scope="session", autouse=True)
def _can_capture() -> None:
    """Every test here captures on loopback with tcpdump: skip, saying why, without the
    permission (tests/live/helpers.capture_permission), before any broker starts."""
    reason = capture_permission()
    if reason is not None:
        pytest.skip(reason)


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """A started single-node Kafka 4.3.1 broker (KRaft, PLAINTEXT on 127.0.0.1), shared by
    the session; skips when Java or the jars (tests/broker/fetch.sh) are missing. Its
    configuration and logs stay in pytest's temporary directory (``kafka-broker*``)."""
    with KafkaBroker(LIB_DIR, tmp_path_factory.mktemp("kafka-broker")) as broker:
        yield broker


@pytest.fixture(scope="session")
def java_clients(kafka_broker: KafkaBroker,
                 tmp_path_factory: pytest.TempPathFactory) -> JavaClients:
    """The Java client program (tests/broker/clients/java), compiled once per session;
    skips when javac or the jars are missing."""
    return JavaClients(LIB_DIR, tmp_path_factory.mktemp("java-clients")).compile()


@pytest.fixture(scope="session")
def go_clients(kafka_broker: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> GoClients:
    """The Go client program (tests/broker/clients/go: franz-go and sarama), built once per
    session; skips when Go or its modules are missing."""
    return GoClients(tmp_path_factory.mktemp("go-clients")).build()


@pytest.fixture(scope="session")
def kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """A started 3-node Kafka 4.3.1 cluster (KRaft, every node broker and controller); skips
    like ``kafka_broker``."""
    with KafkaCluster(LIB_DIR, tmp_path_factory.mktemp("kafka-cluster")) as cluster:
        yield cluster
