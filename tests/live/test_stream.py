"""``kafkasniff live -r FILE|-``: the live engine (capture process, decoders partitioned by
connection, collector) over pcap streams gives what ``kafkasniff read`` gives."""

from __future__ import annotations

import json
import subprocess

import pytest

from .helpers import (CAPTURES, LIVE, broker_ports, parse_json_lines, port_args, records_of,
                      run_live, run_read)

# topic ids learnt on other connections (Fetch v16, ShareFetch), mid-stream joins, many
# clients, record data, Kafka 0.7, SASL
SAMPLES = ["librdkafka_produce_consume", "librdkafka_share", "librdkafka_midstream",
           "kafka_python", "librdkafka_compression", "crafted_kafka07", "crafted_sasl",
           "librdkafka_transactions"]


@pytest.mark.parametrize("name", SAMPLES)
@pytest.mark.parametrize("workers", [3])
def test_file_through_live_equals_read(name, workers):
    cap = CAPTURES / f"{name}.pcap"
    ports = port_args(broker_ports(cap))
    want = run_read(["--json", str(cap)] + ports)
    got = run_live(["-r", str(cap), "--json", "--no-tui", "--workers", str(workers)] + ports)
    assert got.returncode == 0, got.stderr
    w, g = parse_json_lines(want.stdout), parse_json_lines(got.stdout)
    assert records_of(g) == records_of(w)
    # the stats object closes the stream, drops shown
    last = g[-1]
    assert last["type"] == "stats" and last["final"] is True
    assert last["queue_drops"] == 0 and last["kernel_drops"] is None
    assert last["packets"] == last["decoded_packets"] > 0
    assert last["exchanges"] == sum(1 for d in w if d["type"] == "exchange")
    # connection ids are unique across decoders
    ids = {(d["connection"]["id"], d["connection"]["client"], d["connection"]["broker"])
           for d in g if d["type"] == "exchange"}
    assert len({i for i, _, _ in ids}) == len({(c, br) for _, c, br in ids})


def test_stdin_pipe_lines_like_read():
    cap = CAPTURES / "librdkafka_errors_latency.pcap"
    ports = port_args(broker_ports(cap))
    want = run_read([str(cap), "--no-color"] + ports)
    with open(cap, "rb") as f:
        p = subprocess.Popen(["cat"], stdin=f, stdout=subprocess.PIPE)
        got = run_live(["-r", "-", "--no-tui", "--no-color"] + ports, stdin=p.stdout)
        p.wait()
    assert got.returncode == 0, got.stderr
    strip = lambda lines: sorted(line for line in lines.splitlines())  # noqa: E731
    assert strip(got.stdout) == strip(want.stdout)
    summary = [line for line in got.stderr.splitlines() if line.startswith("summary:")]
    assert summary and "queue drops 0" in summary[0] and "kernel drops: n/a" in summary[0]


def test_records_filters_and_count():
    cap = CAPTURES / "librdkafka_produce_consume.pcap"
    ports = port_args(broker_ports(cap))
    want = run_read(["--json", "--records", "--api", "Produce", str(cap)] + ports)
    got = run_live(["-r", str(cap), "--json", "--no-tui", "--records", "--api", "Produce"]
                   + ports)
    assert got.returncode == 0, got.stderr
    assert records_of(parse_json_lines(got.stdout)) == records_of(parse_json_lines(want.stdout))
    three = run_live(["-r", str(cap), "--no-tui", "-c", "3"] + ports)
    assert three.returncode == 0
    assert len(three.stdout.splitlines()) == 3
    assert "(3 shown)" in three.stderr


def test_not_a_capture_on_stdin_exits_2():
    p = subprocess.run(LIVE + ["-r", "-", "--no-tui"], input=b"hello, this is not a pcap\n",
                       capture_output=True, timeout=30)
    assert p.returncode == 2
    assert p.stderr.decode().startswith("kafkasniff: error: <stdin>: not a pcap")


def test_usage_errors_exit_2():
    for args, text in [([], "no interface given"),
                       (["-i", "lo", "-r", "-"], "not both"),
                       (["-r", "-", "--ring", "2"], "--write"),
                       (["-r", str(CAPTURES / "kafka_python.pcap"), "-f", "tcp"], "-f applies")]:
        p = run_live(args)
        assert p.returncode == 2, (args, p.stderr)
        assert text in p.stderr


def test_stats_every_in_json_and_duration(tmp_path):
    """A pipe that stays open: --duration ends the capture; stats objects come
    periodically in the JSON stream."""
    cap = CAPTURES / "kafka_python.pcap"
    with open(cap, "rb") as f:
        head = f.read()
    with open(tmp_path / "out", "wb") as fout, open(tmp_path / "err", "wb") as ferr:
        p = subprocess.Popen(LIVE + ["-r", "-", "--json", "--no-tui", "--duration", "1.5",
                                     "--stats-every", "0.3"] + port_args(broker_ports(cap)),
                             stdin=subprocess.PIPE, stdout=fout, stderr=ferr)
        p.stdin.write(head)
        p.stdin.flush()
        assert p.wait(timeout=30) == 0          # stdin still open: --duration ended it
        p.stdin.close()
    out = (tmp_path / "out").read_bytes()
    lines = parse_json_lines(out.decode())
    stats = [d for d in lines if d["type"] == "stats"]
    assert len(stats) >= 3 and stats[-1]["final"] and not stats[0]["final"]
    assert stats[-1]["exchanges"] == sum(1 for d in lines if d["type"] == "exchange") == 42
    assert {"packets", "kernel_drops", "queue_drops", "exchanges", "issues"} <= stats[0].keys()


def test_sigterm_drains_a_pipe():
    """SIGTERM: what is already in the pipe is read, decoded and printed; exit 0."""
    import signal
    import time

    cap = CAPTURES / "librdkafka_produce_consume.pcap"
    ports = port_args(broker_ports(cap))
    p = subprocess.Popen(LIVE + ["-r", "-", "--json", "--no-tui"] + ports,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdin.write(cap.read_bytes())
    p.stdin.flush()
    time.sleep(1.0)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    want = run_read(["--json", str(cap)] + ports)
    assert records_of(parse_json_lines(out.decode())) == \
        records_of(parse_json_lines(want.stdout))
    assert json.loads(out.decode().splitlines()[-1])["final"] is True


def test_processes_exit_when_the_main_process_dies():
    """The capture and decoder processes stop by themselves when the main process is
    killed (they ignore the terminal's signals; nothing may be left behind)."""
    import os
    import signal
    import time

    cap = CAPTURES / "librdkafka_midstream.pcap"
    p = subprocess.Popen(LIVE + ["-r", "-", "--no-tui", "--workers", "2"]
                         + port_args(broker_ports(cap)), stdin=subprocess.PIPE,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    p.stdin.write(cap.read_bytes())
    p.stdin.flush()
    line = p.stderr.readline().decode()
    assert "capturing on" in line
    time.sleep(1.0)
    with open(f"/proc/{p.pid}/task/{p.pid}/children") as f:
        children = [int(c) for c in f.read().split()]
    assert len(children) == 3
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    deadline = time.monotonic() + 15
    alive = children
    while alive and time.monotonic() < deadline:
        time.sleep(0.2)
        alive = [c for c in alive if os.path.exists(f"/proc/{c}") and
                 open(f"/proc/{c}/stat").read().split(") ")[1][0] != "Z"]
    for c in alive:
        os.kill(c, signal.SIGKILL)
    p.stdin.close()
    assert not alive
