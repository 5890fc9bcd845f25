"""confluent-kafka (librdkafka) helpers: client configuration, produce, consume, flush."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from harness.run import Run
from harness.values import now_ms, now_ns


def confluent_version() -> dict[str, str]:
    """The truth's ``client_library`` for confluent-kafka: ``name``, ``version``,
    ``librdkafka_version``."""
    import confluent_kafka

    return {"name": "confluent-kafka", "version": confluent_kafka.version()[0],
            "librdkafka_version": confluent_kafka.libversion()[0]}


def rdkafka_conf(run: Run, label: str, **extra: Any) -> dict[str, Any]:
    """A confluent-kafka configuration for ``run``'s mock cluster: ``client.id`` = ``label``,
    protocol debug logs into ``run.log`` (the truth's ``requests``), no KIP-714 metrics;
    ``extra`` (librdkafka property names, dots as ``**{"linger.ms": 5}``) on top."""
    conf = {
        "bootstrap.servers": run.cluster.bootstrap_servers,
        "client.id": label,
        "debug": "protocol",
        "logger": run.log.rdkafka_logger(label),
        # no KIP-714 metrics pushes: keep the captures about the scenario
        "enable.metrics.push": False,
    }
    conf.update(extra)
    return conf


def rdkafka_consume(run: Run, consumer: Any, label: str, want: int,
                    timeout_s: float = 20.0, drain_s: float = 0.0) -> int:
    """Poll ``consumer`` until ``want`` messages arrived (or timeout); record them.

    With ``drain_s`` > 0, keep polling after that until no message came for ``drain_s``.
    """
    got = 0
    deadline = time.monotonic() + timeout_s
    last = time.monotonic()
    while time.monotonic() < deadline:
        if got >= want and time.monotonic() - last >= drain_s:
            break
        msg = consumer.poll(0.2 if got < want else min(0.2, drain_s))
        if msg is None:
            continue
        last = time.monotonic()
        if msg.error():
            run.truth["notes"].append(f"{label} poll error: {msg.error().name()}")
            continue
        run.rdkafka_consumed(label, msg)
        got += 1
    if got < want:
        run.truth["notes"].append(f"{label} received {got} of {want} messages before timeout")
    return got


def rdkafka_produce_all(run: Run, producer: Any, label: str, topic: str,
                        messages: list[tuple[Any, Any, Any]], *,
                        partition_for: Callable[[int], int | None] = lambda i: None,
                        timestamp_for: Callable[[int], int | None] = lambda i: None) -> None:
    """Produce ``messages`` ((key, value, headers) tuples) to ``topic``, each with a
    delivery callback recording it in ``produced``. ``partition_for(i)``: the partition of
    message i (``None``: the partitioner's); ``timestamp_for(i)``: its CreateTime in ms
    (``None``: now)."""
    for i, (key, value, headers) in enumerate(messages):
        kwargs: dict[str, Any] = {"key": key, "value": value}
        if headers:
            kwargs["headers"] = headers
        if (p := partition_for(i)) is not None:
            kwargs["partition"] = p
        ts = timestamp_for(i)
        kwargs["timestamp"] = ts = now_ms() if ts is None else ts
        producer.produce(topic, on_delivery=run.rdkafka_delivery(label, key, value, headers,
                                                                  now_ns(), ts), **kwargs)
        producer.poll(0)


def check_flush(producer: Any, timeout_s: float = 15.0) -> None:
    """Flush ``producer``; SystemExit when messages are left after ``timeout_s`` seconds."""
    left = producer.flush(timeout_s)
    if left:
        raise SystemExit(f"{left} messages not delivered within {timeout_s} s")
