#!/usr/bin/env python3
"""Capture real clients talking to a real Apache Kafka broker, for ``captures/broker_*.pcap``.

Usage (as root: tcpdump captures on the loopback interface; Java, Maven's jars from
``tests/broker/fetch.sh`` and Go as ``.ci/setup`` installs them)::

    .venv/bin/python captures/make_broker_captures.py                  # every scenario
    .venv/bin/python captures/make_broker_captures.py broker_java      # some
    .venv/bin/python captures/make_broker_captures.py --out /tmp/caps  # elsewhere
    .venv/bin/python captures/make_broker_captures.py --list

The scenarios are the real-broker tests' own (``tests/broker/scenarios.py``), with fewer
records: the Java client (kafka-clients 4.3.1), franz-go and sarama against one Kafka 4.3.1
node (KRaft, PLAINTEXT on 127.0.0.1:9092 when free), a Java producer against a 3-node
cluster whose partition leader is killed and comes back, and Python and Go producers on the
SSL and SASL_SSL listeners (TLS 1.2 and 1.3, several cipher suites) writing an NSS key log
(``OUT/broker_tls.keylog``), and TLS sessions beyond a first handshake (``broker_tls_sessions``:
KeyUpdate both ways, TLS 1.3 and TLS 1.2 resumption). Each writes:

* ``OUT/NAME.pcap``: tcpdump of the broker port(s) (nanosecond pcap, Linux loopback);
* ``OUT/NAME.truth.json``: what the broker and the clients said happened, never read from
  the pcap: ``broker_requests`` (every line of the broker's request log for the captured
  connections: header, connection, timings, and the request and response bodies as the
  broker parsed and sent them), ``client_requests`` (each request the clients say they sent:
  the Java client's NetworkClient log, the Go clients' dialer wrapper), ``client_events``
  (records produced with their offsets, consumed, committed; each admin operation's error),
  ``events`` (the failover's leaders).

``tests/captures/test_broker_captures.py`` checks the decode of the committed files against
their truth; their reviewed decode is in ``captures/golden/`` (regenerate it with
``KAFKASNIFF_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/captures/test_captures.py -k
golden`` after reviewing the change).
"""

from __future__ import annotations

import argparse
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))            # _common
sys.path.insert(0, str(HERE.parent))     # tests.*

from _common import TRUTH_FORMAT, dump_truth  # noqa: E402

from tests.broker.common import capture_scenario  # noqa: E402
from tests.broker.scenarios import (  # noqa: E402
    TLS_RUNS,
    TLS_SESSION_RUNS,
    failover_scenario,
    go_scenario,
    java_scenario,
    tls_scenario,
    tls_sessions_scenario,
)
from tests.support.go_clients import GoClients  # noqa: E402
from tests.support.java_clients import JavaClients  # noqa: E402
from tests.support.kafka_broker import (  # noqa: E402
    KAFKA_VERSION,
    LIB_DIR,
    KafkaBroker,
    KafkaCluster,
)

GENERATED_BY = "captures/make_broker_captures.py"
#: client library versions (tests/broker/clients/go/go.mod, the broker's jars)
CLIENTS = {"java": f"kafka-clients {KAFKA_VERSION}", "franz-go": "v1.22.3",
           "sarama": "v1.61.1"}


def _port_9092_free() -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", 9092))
        except OSError:
            return False
    return True


def _truth(name: str, cap, runs: dict, ports: list[int], events: dict | None = None) -> dict:
    logged = []
    for r in cap.logged:
        f = r.fields
        logged.append({
            "api_key": r.api_key, "api_version": r.api_version,
            "correlation_id": r.correlation_id, "client_id": r.client_id,
            "broker_port": r.local_port, "client_port": r.client_port,
            "total_time_ms": r.total_time_ms, "send_time_ms": f.get("sendTimeMs"),
            "throttle_time_ms": r.throttle_time_ms, "logged_at": r.logged_at,
            "request": f.get("request"), "response": f.get("response")})
    client_requests = [{"run": run, "api_key": q.api_key, "api_version": q.api_version,
                        "correlation_id": q.correlation_id, "client_id": q.client_id,
                        "client_port": q.client_port}
                       for run, r in runs.items() for q in r.requests]
    client_events = [{"run": run, **line} for run, r in runs.items() for line in r.lines]
    return {"truth_format": TRUTH_FORMAT, "generated_by": GENERATED_BY, "scenario": name,
            "kafka_version": KAFKA_VERSION, "clients": CLIENTS, "broker_ports": ports,
            "events": events or {}, "broker_requests": logged,
            "client_requests": client_requests, "client_events": client_events}


def run_single(name: str, out: Path, work: Path, java: JavaClients, go: GoClients) -> None:
    with KafkaBroker(LIB_DIR, work / name, port=9092 if _port_9092_free() else None) as broker:
        tag = name.removeprefix("broker_")
        topic = f"{tag}-topic"
        broker.create_topic(topic, partitions=2)
        bs = broker.bootstrap_servers
        scenario = {"broker_java": lambda: java_scenario(java, bs, topic, tag, 2),
                    "broker_go": lambda: go_scenario(go, bs, topic, tag, 1)}[name]
        cap, runs = capture_scenario(broker, broker.port, out / f"{name}.pcap", scenario)
        (out / f"{name}.truth.json").write_text(dump_truth(_truth(name, cap, runs,
                                                                  [broker.port])))


def run_tls(name: str, out: Path, work: Path, java: JavaClients, go: GoClients) -> None:
    sessions = name == "broker_tls_sessions"
    with KafkaBroker(LIB_DIR, work / name) as broker:
        topic = "tls-topic"
        broker.create_topic(topic, partitions=2)
        keylog = out / f"{name}.keylog"
        keylog.unlink(missing_ok=True)
        ports = [broker.ssl_port] if sessions else [broker.ssl_port, broker.sasl_ssl_port]
        scenario = (lambda: tls_sessions_scenario(go, broker, topic, "sessions", keylog, 16)) \
            if sessions else (lambda: tls_scenario(go, broker, topic, "tls", keylog, 2))
        cap, runs = capture_scenario(broker, ports, out / f"{name}.pcap", scenario)
        truth = _truth(name, cap, runs, ports)
        truth["keylog"] = keylog.name
        truth["tls_runs"] = TLS_SESSION_RUNS if sessions else TLS_RUNS
        (out / f"{name}.truth.json").write_text(dump_truth(truth))


def run_failover(name: str, out: Path, work: Path, java: JavaClients, go: GoClients) -> None:
    with KafkaCluster(LIB_DIR, work / name) as cluster:
        topic = "failover-topic"
        cluster.create_topic(topic, 3)
        events: dict = {}
        cap, runs = capture_scenario(
            cluster, cluster.ports, out / f"{name}.pcap",
            lambda: failover_scenario(cluster, java, topic, "failover", work, events))
        events = {k: ({str(p): n for p, n in v.items()} if isinstance(v, dict) else v)
                  for k, v in events.items()}
        (out / f"{name}.truth.json").write_text(dump_truth(_truth(name, cap, runs,
                                                                  cluster.ports, events)))


SCENARIOS = {"broker_java": run_single, "broker_go": run_single,
             "broker_failover": run_failover, "broker_tls": run_tls,
             "broker_tls_sessions": run_tls}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenarios", nargs="*", help="scenario names (default: all)")
    parser.add_argument("--list", action="store_true", help="list scenario names")
    parser.add_argument("--out", type=Path, default=HERE, metavar="DIR",
                        help="where the captures go (default: captures/)")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(SCENARIOS))
        return 0
    unknown = [s for s in args.scenarios if s not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(unknown)}")
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="kafkasniff-broker-captures-"))
    try:
        java = JavaClients(LIB_DIR, work / "java").compile()
        go = GoClients(work / "go").build()
        for name in args.scenarios or list(SCENARIOS):
            t0 = time.monotonic()
            SCENARIOS[name](name, out, work, java, go)
            print(f"{name}: {out / (name + '.pcap')} "
                  f"({(out / (name + '.pcap')).stat().st_size} bytes, "
                  f"{time.monotonic() - t0:.0f} s)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
