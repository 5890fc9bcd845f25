"""The command line: every command's help, read/stats output, filters, inputs, exit codes."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from kafkasniff.cli import main
from tests.conftest import CAPTURES, decode_capture

PC = CAPTURES / "librdkafka_produce_consume.pcap"
ERR = CAPTURES / "librdkafka_errors_latency.pcap"
KAFKASNIFF = [sys.executable, "-m", "kafkasniff.cli"]

JSON_KEYS = {"type", "ts_ns", "connection", "api_key", "api_name", "api_version",
             "correlation_id", "client_id", "status", "latency_ns", "request_bytes",
             "response_bytes", "errors", "throttle_time_ms", "topics", "request", "response",
             "issues", "inferred", "assumed_version"}


def run(*args, input=None):
    return CliRunner().invoke(main, [str(a) for a in args], input=input, catch_exceptions=False)


@pytest.mark.parametrize("cmd", [[], ["read"], ["stats"], ["definitions"],
                                 ["definitions", "generate"], ["definitions", "list"]])
def test_help_for_every_command(cmd):
    res = run(*cmd, "--help")
    assert res.exit_code == 0
    assert "Usage:" in res.output
    if cmd in (["read"], ["stats"]):
        for opt in ("--port", "--detect", "--max-frame-bytes", "-r, --read-file"):
            assert opt in res.output


def test_read_prints_one_line_per_exchange():
    res = run("read", "-q", PC)
    assert res.exit_code == 0
    lines = res.output.splitlines()
    d = decode_capture(PC)
    assert len([ln for ln in lines if not ln.startswith("!")]) == len(d.exchanges)
    assert any("Produce v10" in ln and "topics=ks-" in ln for ln in lines)


def test_read_json_objects_have_the_documented_fields():
    res = run("read", "-q", "--json", PC)
    objs = [json.loads(ln) for ln in res.output.splitlines()]
    exchanges = [o for o in objs if o["type"] == "exchange"]
    assert exchanges and all(JSON_KEYS <= set(o) for o in exchanges)
    produce = next(o for o in exchanges if o["api_name"] == "Produce")
    assert set(produce["connection"]) >= {"client", "broker"}
    body = produce["request"]["body"]
    assert body["acks"] == -1 and body["topic_data"][0]["partition_data"][0]["records"]["size_bytes"] > 0
    assert produce["status"] in ("paired", "no_response_expected", "unanswered", "orphan_response")


@pytest.mark.parametrize("args,check", [
    (["--api", "Produce"], lambda o: o["api_name"] == "Produce"),
    (["--api", "0"], lambda o: o["api_key"] == 0),
    (["--client", "ks-consumer*"], lambda o: o["client_id"].startswith("ks-consumer")),
    (["--topic", "ks-err*"], lambda o: any(t.startswith("ks-err") for t in o["topics"])),
    (["--errors-only"], lambda o: o["errors"]),
    (["--min-latency", "30"], lambda o: o["latency_ns"] >= 30_000_000),
])
def test_read_filters(args, check):
    res = run("read", "-q", "--json", *args, ERR)
    objs = [json.loads(ln) for ln in res.output.splitlines()]
    assert objs, args
    assert all(o["type"] == "exchange" and check(o) for o in objs)


def test_read_count_stops_early():
    res = run("read", "-q", "-c", "3", PC)
    assert len(res.output.splitlines()) == 3


def test_stdin_and_gzip(tmp_path):
    gz = tmp_path / "c.pcap.gz"
    gz.write_bytes(gzip.compress(PC.read_bytes()))
    direct = run("read", "-q", PC).output
    assert run("read", "-q", gz).output == direct
    proc = subprocess.run(KAFKASNIFF + ["read", "-q", "-r", "-"], input=PC.read_bytes(),
                          capture_output=True, check=True)
    assert proc.stdout.decode() == direct


def test_unreadable_input_exits_2_with_one_line(tmp_path):
    junk = tmp_path / "junk.txt"
    junk.write_text("hello, this is not a capture\n")
    for path in (junk, tmp_path / "missing.pcap"):
        res = CliRunner().invoke(main, ["read", str(path)])
        assert res.exit_code == 2
        err = res.stderr if hasattr(res, "stderr") else res.output
        assert len(err.strip().splitlines()) == 1 and "error" in err


def test_truncated_capture_is_an_issue_not_an_error(tmp_path):
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(PC.read_bytes()[:5000])
    res = run("read", "--json", cut)
    assert res.exit_code == 0
    kinds = {json.loads(ln).get("kind") for ln in res.output.splitlines() if ln.startswith("{")}
    assert "capture_truncated" in kinds


def test_strict_exit_code():
    assert run("read", "-q", CAPTURES / "aiokafka.pcap").exit_code == 0
    assert run("read", "-q", "--strict", CAPTURES / "aiokafka.pcap").exit_code == 0  # info only
    assert run("read", "-q", "--strict", PC).exit_code == 1  # the mock's departures


def test_stats_tables_and_json():
    res = run("stats", ERR)
    assert res.exit_code == 0
    for title in ("Per API", "Per client_id", "Per broker", "Per topic", "Issues and counters"):
        assert title in res.output
    rep = json.loads(run("stats", "--json", ERR).output)
    assert rep["total"]["count"] == len(decode_capture(ERR).exchanges)
    assert "NOT_LEADER_OR_FOLLOWER" in rep["apis"]["Produce"]["errors"]


def test_stats_percentiles_within_documented_accuracy():
    """DDSketch quantiles are within 1 % of a true value of the sample (same rank rule)."""
    rep = json.loads(run("stats", "--json", ERR).output)
    lat = sorted(ex.latency_ns for ex in decode_capture(ERR).exchanges if ex.status == "paired")
    for q, key in ((0.5, "latency_p50_ns"), (0.9, "latency_p90_ns"), (0.99, "latency_p99_ns")):
        exact = lat[int(q * (len(lat) - 1))]
        got = rep["total"][key]
        assert abs(got - exact) <= 0.01 * exact + 1, (q, got, exact)
    assert rep["total"]["latency_max_ns"] == lat[-1]


def test_definitions_list():
    res = run("definitions", "list")
    lines = res.output.splitlines()
    assert len(lines) == 95 and lines[0].split()[1] == "Produce"


def test_headless_commands_do_not_import_textual():
    code = ("import sys; from click.testing import CliRunner; from kafkasniff.cli import main; "
            f"r = CliRunner().invoke(main, ['stats', {str(PC)!r}]); assert r.exit_code == 0; "
            f"r = CliRunner().invoke(main, ['read', '--json', {str(PC)!r}]); assert r.exit_code == 0; "
            "import tempfile; d = tempfile.mkdtemp(); "
            f"r = CliRunner().invoke(main, ['export', '-q', '-o', d, {str(PC)!r}]); "
            "assert r.exit_code == 0, r.output; "
            "bad = [m for m in ('textual', 'pyspark', 'scapy', 'dpkt', 'kafkasniff.tui', "
            "'kafkasniff.live', 'kafkasniff.spark') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_json_fast_path_equals_converted_dicts():
    """read --json serialises raw bodies with a default= hook; it must equal the converted
    dicts, records included."""
    from kafkasniff.output.render import exchange_to_dict, json_default
    d = decode_capture(CAPTURES / "crafted_records.pcap", with_records=True)
    d2 = decode_capture(CAPTURES / "crafted_sasl.pcap")
    for ex in d.exchanges + d2.exchanges:
        fast = json.dumps(exchange_to_dict(ex, 64, convert=False), default=json_default(64))
        assert json.loads(fast) == json.loads(json.dumps(exchange_to_dict(ex, 64)))
