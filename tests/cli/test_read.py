"""kafkasniff read: lines, JSON Lines, filters, count, exit codes."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from kafkasniff.cli import main
from tests.cli.common import ERR, JSON_KEYS, PC, run
from tests.conftest import CAPTURES, decode_capture


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


def test_strict_exit_code():
    assert run("read", "-q", CAPTURES / "aiokafka.pcap").exit_code == 0
    assert run("read", "-q", "--strict", CAPTURES / "aiokafka.pcap").exit_code == 0  # info only
    assert run("read", "-q", "--strict", PC).exit_code == 1  # the mock's departures


def test_json_fast_path_equals_converted_dicts():
    """read --json serialises raw bodies with a default= hook; it must equal the converted
    dicts, records included."""
    from kafkasniff.output.render import exchange_to_dict, json_default
    d = decode_capture(CAPTURES / "crafted_records.pcap", with_records=True)
    d2 = decode_capture(CAPTURES / "crafted_sasl.pcap")
    for ex in d.exchanges + d2.exchanges:
        fast = json.dumps(exchange_to_dict(ex, 64, convert=False), default=json_default(64))
        assert json.loads(fast) == json.loads(json.dumps(exchange_to_dict(ex, 64)))


def test_a_capture_not_read_to_its_end_says_so_and_fails_under_strict(tmp_path):
    """A pcapng block with an absurd length in the middle: reading stops there, the summary
    counts the unread rest, and --strict exits 1 on read and stats (exit 0 without it)."""
    import struct

    data = (CAPTURES / "regressions" / "pcapng_unknown_blocks.pcapng").read_bytes()
    cut = 1200
    # find the block boundary at or after `cut` by walking the blocks
    pos = 0
    while pos < cut:
        pos += struct.unpack_from("<I", data, pos + 4)[0]
    damaged = data[:pos] + struct.pack("<II", 6, 0xFFFFFFF0) + data[pos + 8:]
    path = tmp_path / "cut.pcapng"
    path.write_bytes(damaged)
    res = run("read", str(path))
    assert res.exit_code == 0
    assert f"unread {len(data) - pos}" in res.stderr
    assert run("read", "-q", "--strict", str(path)).exit_code == 1
    assert run("stats", "--strict", str(path)).exit_code == 1
    assert run("stats", str(path)).exit_code == 0


# ------------------------------------------------ filters: one grammar (issue 45, item 12)

def test_read_api_comma_list():
    """``--api Produce,Fetch``: the TUI's comma lists, also on the command line."""
    res = run("read", "-q", "--json", "--api", "Produce,Fetch", PC)
    assert res.exit_code == 0
    names = {json.loads(ln)["api_name"] for ln in res.output.splitlines()}
    assert names == {"Produce", "Fetch"}


@pytest.mark.parametrize("command", ["read", "live"])
@pytest.mark.parametrize("args, message", [
    (["--api", "Prodce"], "kafkasniff: error: unknown API 'Prodce' (did you mean Produce? "
                          "valid: "),
    (["--api", "Produce,Fetchh"], "kafkasniff: error: unknown API 'Fetchh' (did you mean "
                                  "Fetch? valid: "),
    (["--client", "[abc"], "kafkasniff: error: --client: invalid pattern '[abc'"),
    (["--topic", "ks-[0-9"], "kafkasniff: error: --topic: invalid pattern 'ks-[0-9'"),
    (["--min-latency", "12.5-"], "kafkasniff: error: --min-latency: not a minimum latency "
                                 "in milliseconds: '12.5-'"),
])
def test_filter_that_can_match_nothing_is_an_error(command, args, message):
    """An unknown API name, an invalid glob or a latency that is not a number: one line on
    stderr with the valid choices, exit 2 (before any capture is read)."""
    extra = ["--no-tui", "-r"] if command == "live" else []
    res = CliRunner().invoke(main, [command, *args, *extra, str(PC)])
    assert res.exit_code == 2, res.output
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), res.stderr
    assert res.stdout == ""
