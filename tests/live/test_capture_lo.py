"""Live capture on ``lo`` of real Kafka clients talking to librdkafka's mock cluster,
checked against what the clients did and against ``tcpdump`` + ``kafkasniff read`` of the
same traffic (CI runs as root; skipped only without capture permission)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
import uuid

import pytest

from tests.support.mock_cluster import MockCluster

from .helpers import (LIVE, LiveProcess, capture_permission, parse_json_lines, port_args,
                      records_of, run_live, run_read)

pytestmark = [pytest.mark.skipif(capture_permission() is not None,
                                 reason=capture_permission() or ""),
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]   # kafka-python


# --------------------------------------------------------------------------- tcpdump


class Tcpdump:
    """tcpdump -i lo writing a nanosecond pcap (as captures/make_captures.py runs it)."""

    def __init__(self, path, ports) -> None:
        self.path = path
        bpf = "tcp and (" + " or ".join(f"port {p}" for p in ports) + ")"
        self.argv = ["tcpdump", "-i", "lo", "-s", "0", "-U", "-n", "--immediate-mode",
                     "-B", "65536", "--time-stamp-precision=nano", "-w", str(path), bpf]

    def start(self) -> "Tcpdump":
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True)
        line = ""
        while "listening on" not in line:
            line = self.proc.stderr.readline()
            if not line:
                raise AssertionError("tcpdump did not start")
        return self

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGINT)
        _, err = self.proc.communicate(timeout=30)
        return err


# --------------------------------------------------------------------------- clients


def _confluent(bootstrap: str, topic: str, n: int, tag: str) -> list[tuple[str, str]]:
    from confluent_kafka import Consumer, Producer, TopicPartition

    sent = [(f"{tag}-key-{i}", f"{tag}-value-{i}-" + "v" * (i % 50)) for i in range(n)]
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
                  "client.id": f"{tag}-producer"})
    for k, v in sent:
        p.produce(topic, key=k.encode(), value=v.encode())
    assert p.flush(20) == 0
    got = []
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{tag}-group",
                  "client.id": f"{tag}-consumer", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 50})
    c.assign([TopicPartition(topic, part, -2) for part in range(3)])   # OFFSET_BEGINNING
    deadline = time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            got.append((m.key().decode(), m.value().decode()))
    c.close()
    del p
    assert sorted(got) == sorted(sent)
    return sent


def _kafka_python(bootstrap: str, topic: str, n: int, tag: str) -> list[tuple[str, str]]:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    common = {"bootstrap_servers": bootstrap, "api_version": (2, 3),
              "request_timeout_ms": 5000}
    sent = [(f"{tag}-key-{i}", f"{tag}-value-{i}") for i in range(n)]
    p = KafkaProducer(client_id=f"{tag}-producer", acks="all", linger_ms=5, **common)
    futures = [p.send(topic, key=k.encode(), value=v.encode()) for k, v in sent]
    p.flush(20)
    for f in futures:
        f.get(timeout=20)
    p.close(5)
    c = KafkaConsumer(client_id=f"{tag}-consumer", group_id=None, enable_auto_commit=False,
                      fetch_max_wait_ms=50, consumer_timeout_ms=20000, **common)
    c.assign([TopicPartition(topic, part) for part in range(3)])
    c.seek_to_beginning()
    got = []
    for m in c:
        got.append((m.key.decode(), m.value.decode()))
        if len(got) == n:
            break
    c.close()
    assert sorted(got) == sorted(sent)
    return sent


# --------------------------------------------------------------------------- checks


def _record_texts(obj, out: list) -> None:
    """(key text, value text) of every decoded record under a JSON body."""
    if isinstance(obj, dict):
        if "batches" in obj and "size_bytes" in obj:
            for b in obj.get("batches") or ():
                for r in b.get("records") or ():
                    k, v = r.get("key"), r.get("value")
                    out.append(((k or {}).get("text"), (v or {}).get("text")))
            return
        for v in obj.values():
            _record_texts(v, out)
    elif isinstance(obj, list):
        for v in obj:
            _record_texts(v, out)


def _records(lines: list[dict], api: str, side: str) -> list:
    out: list = []
    for d in lines:
        if d.get("type") == "exchange" and d["api_name"] == api and d[side]:
            _record_texts(d[side]["body"], out)
    return out


def _final_stats(lines: list[dict]) -> dict:
    stats = [d for d in lines if d.get("type") == "stats"]
    assert stats and stats[-1]["final"]
    return stats[-1]


@pytest.fixture
def cluster():
    with MockCluster(num_brokers=3) as c:
        yield c


@pytest.mark.skipif(shutil.which("tcpdump") is None, reason="tcpdump not installed")
def test_two_client_libraries_decoded_live_like_tcpdump_and_read(cluster, tmp_path):
    topic_cf, topic_kp = "live-cf", "live-kp"
    cluster.create_topic(topic_cf, 3)
    cluster.create_topic(topic_kp, 3)
    cluster.set_controller_id(1)
    ports = cluster.broker_ports
    live = LiveProcess(["-i", "lo", "--no-tui", "--json", "--records", "--workers", "2",
                        "--stats-every", "1"] + port_args(ports),
                       tmp_path / "live.jsonl").start()
    td = Tcpdump(tmp_path / "td.pcap", ports).start()
    time.sleep(0.3)
    tag = uuid.uuid4().hex[:6]
    sent_cf = _confluent(cluster.bootstrap_servers, topic_cf, 120, f"cf{tag}")
    sent_kp = _kafka_python(cluster.bootstrap_servers, topic_kp, 60, f"kp{tag}")
    time.sleep(0.5)
    assert live.stop(signal.SIGINT) == 0, live.stderr
    td_err = td.stop()
    assert "0 packets dropped by kernel" in td_err

    lines = live.json_lines()
    st = _final_stats(lines)
    # zero drops, every captured packet decoded
    assert st["kernel_drops"] == 0 and st["queue_drops"] == 0, st
    assert st["kernel_received"] == st["packets"] == st["decoded_packets"] > 0
    summary = [line for line in live.stderr_lines if line.startswith("summary:")][0]
    assert f"kernel: {st['packets']} received, 0 dropped" in summary
    assert "queue drops 0" in summary
    assert sum(d.get("type") == "stats" for d in lines) >= 2     # --stats-every, and final
    # every produced record in a Produce request, every consumed one in a Fetch response
    sent = set(sent_cf) | set(sent_kp)
    produced = set(_records(lines, "Produce", "request"))
    fetched = set(_records(lines, "Fetch", "response"))
    assert sent <= produced
    assert sent <= fetched
    # every request answered (the mock answers everything; clients closed cleanly)
    statuses = {d["status"] for d in lines if d.get("type") == "exchange"}
    assert statuses <= {"paired", "unanswered"}
    assert sum(d["status"] == "paired" for d in lines if d.get("type") == "exchange") >= 20
    # both client libraries were seen
    client_ids = {d["client_id"] for d in lines if d.get("type") == "exchange"}
    assert {f"cf{tag}-producer", f"cf{tag}-consumer", f"kp{tag}-producer",
            f"kp{tag}-consumer"} <= client_ids
    # the same exchanges as tcpdump's capture decoded by `read` (times aside: two sockets
    # on loopback do not time a packet to the same nanosecond)
    want = parse_json_lines(run_read(["--json", "--records", str(tmp_path / "td.pcap")]
                                     + port_args(ports)).stdout)
    assert records_of(lines, drop_times=True) == records_of(want, drop_times=True)
    tcpdump_captured = int(td_err.split(" packets captured")[0].split()[-1])
    assert tcpdump_captured == st["packets"]


@pytest.mark.parametrize("iface,backend,workers", [("any", "ring", 2), ("lo", "socket", 2),
                                                   ("lo", "ring", 1), ("any", "socket", 1)])
def test_any_interface_and_socket_backend(cluster, tmp_path, iface, backend, workers):
    cluster.create_topic("live-x", 3)
    ports = cluster.broker_ports
    live = LiveProcess(["-i", iface, "--backend", backend, "--workers", str(workers),
                        "--no-tui", "--json", "--records"] + port_args(ports),
                       tmp_path / "live.jsonl").start()
    td = Tcpdump(tmp_path / "td.pcap", ports).start() if shutil.which("tcpdump") else None
    time.sleep(0.3)
    sent = _confluent(cluster.bootstrap_servers, "live-x", 40, f"{iface}{backend}")
    time.sleep(0.3)
    assert live.stop(signal.SIGTERM) == 0, live.stderr
    td_err = td.stop() if td is not None else None
    lines = live.json_lines()
    st = _final_stats(lines)
    assert st["kernel_drops"] == 0 and st["queue_drops"] == 0
    assert st["packets"] == st["decoded_packets"] == st["kernel_received"] > 0
    assert st["skipped"] == {}
    assert set(sent) <= set(_records(lines, "Produce", "request"))
    assert set(sent) <= set(_records(lines, "Fetch", "response"))
    tcp = [d for d in lines if d.get("type") == "issue" and d["kind"] == "tcp_gap"]
    assert not tcp
    if td_err is not None:
        # loopback packets counted once (outgoing copies skipped), as tcpdump counts them
        assert int(td_err.split(" packets captured")[0].split()[-1]) == st["packets"]


def test_count_stops_and_write_keeps_the_packets(cluster, tmp_path):
    from kafkasniff.capture import open_capture

    cluster.create_topic("live-w", 3)
    ports = cluster.broker_ports
    pcap = tmp_path / "x.pcapng"
    live = LiveProcess(["-i", "lo", "--no-tui", "-w", str(pcap), "-c", "5"] + port_args(ports),
                       tmp_path / "out.txt").start()
    time.sleep(0.3)
    _confluent(cluster.bootstrap_servers, "live-w", 10, "count")
    rc = live.proc.wait(timeout=30)      # -c 5 ends it by itself
    live._t.join(5)
    live._out.close()
    assert rc == 0, live.stderr
    assert len((tmp_path / "out.txt").read_text().splitlines()) == 5
    with open_capture(str(pcap)) as src:
        pkts = list(src)
    assert pkts and all(p.link_type == 1 for p in pkts)
    summary = [line for line in live.stderr_lines if line.startswith("summary:")][0]
    assert f"{len(pkts)} packets written" in summary
    # the written packets decode to the exchanges that were printed (and more)
    got = run_read([str(pcap)] + port_args(ports) + ["--no-color"])
    printed = (tmp_path / "out.txt").read_text().splitlines()
    assert set(printed) <= set(got.stdout.splitlines())


def test_without_cap_net_raw_one_line_error(tmp_path):
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) not installed")
    p = subprocess.run(["setpriv", "--bounding-set=-net_raw", "--inh-caps=-net_raw"] + LIVE
                       + ["-i", "lo", "--no-tui"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1
    msg = lines[0]
    assert "CAP_NET_RAW" in msg and "run as root" in msg
    assert "setcap cap_net_raw+eip" in msg and "tcpdump" in msg and "live -r -" in msg


def test_unknown_interface_and_bad_filter_exit_2():
    p = run_live(["-i", "nosuch0", "--no-tui"])
    assert p.returncode == 2 and "lo" in p.stderr and "nosuch0" in p.stderr
    p = run_live(["-i", "lo", "-f", "tcp prot 1", "--no-tui"])
    assert p.returncode == 2 and "syntax error" in p.stderr
    assert p.stderr.count("\n") == 1


def test_bad_filter_with_parenthesis_one_clear_line():
    expr = "tcp and (port 1 or"
    p = run_live(["-i", "lo", "-f", expr, "--no-tui"])
    assert p.returncode == 2
    assert p.stderr == (f"kafkasniff: error: bad filter {expr!r}: can't parse filter "
                        "expression: syntax error\n")
