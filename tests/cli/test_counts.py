"""Counts in the summaries say "1 exchange", never "1 exchanges" (issue 45, item 16): the one
helper (:func:`kafkasniff.text.plural`) and the lines of ``read``, ``live``, ``stats`` and the
TUI's status line that use it."""

from __future__ import annotations

import asyncio
import re
import struct
import subprocess

import pytest

from kafkasniff.text import plural
from tests.cli.common import KAFKASNIFF
from tests.conftest import CAPTURES

JAVA = CAPTURES / "broker_java.pcap"


def first_packets(k: int) -> bytes:
    """The pcap file header and the first ``k`` packet records of broker_java.pcap."""
    data = JAVA.read_bytes()
    e = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    pos = 24
    for _ in range(k):
        pos += 16 + struct.unpack_from(e + "I", data, pos + 8)[0]
    return data[:pos]


@pytest.fixture()
def one_of_each(tmp_path):
    """The first 4 packets of broker_java.pcap: 1 exchange (unanswered), 1 issue, 4 packets,
    1 Kafka connection."""
    path = tmp_path / "one.pcap"
    path.write_bytes(first_packets(4))
    return path


#: "1 exchanges", "1 issues", "1 packets", "1 Kafka connections", "1 long-polls" ...
ONE_PLURAL = re.compile(r"(?<![\d.,])1 (\w+ )?(exchanges|issues|packets|connections|"
                        r"long-polls|groups|files|bytes)\b")


def test_plural():
    assert plural(0, "exchange") == "0 exchanges"
    assert plural(1, "exchange") == "1 exchange"
    assert plural(2, "exchange") == "2 exchanges"
    assert plural(1, "Kafka connection") == "1 Kafka connection"
    assert plural(3, "Kafka connection") == "3 Kafka connections"
    assert plural(1, "long-poll") == "1 long-poll"
    assert plural(1, "capture", "captures") == "1 capture"
    assert plural(2, "analysis", "analyses") == "2 analyses"
    assert plural(12345, "exchange", grouped=True) == "12,345 exchanges"
    assert plural(-1, "exchange") == "-1 exchanges"


def test_read_summary_singular(one_of_each):
    p = subprocess.run(KAFKASNIFF + ["read", str(one_of_each)], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    summary = next(ln for ln in p.stderr.splitlines() if ln.startswith("summary:"))
    assert "1 exchange (unanswered 1)" in summary
    assert "1 issue (unanswered_request 1)" in summary
    assert "4 packets" in summary and "1 Kafka connection;" in summary
    assert not ONE_PLURAL.search(summary), summary


def test_one_packet(tmp_path):
    path = tmp_path / "p1.pcap"
    path.write_bytes(first_packets(1))
    p = subprocess.run(KAFKASNIFF + ["read", str(path)], capture_output=True, text=True,
                       timeout=60)
    summary = next(ln for ln in p.stderr.splitlines() if ln.startswith("summary:"))
    assert "0 exchanges; 0 issues; 1 packet;" in summary, summary


def test_stats_summary_singular(one_of_each):
    p = subprocess.run(KAFKASNIFF + ["stats", str(one_of_each)], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    last = p.stdout.rstrip().splitlines()[-1]
    assert last.startswith("1 exchange, 0 with errors"), last
    assert "1 Kafka connection" in last
    assert not ONE_PLURAL.search(last), last


def test_live_summary_singular(one_of_each):
    from tests.live.helpers import run_live

    p = run_live(["-r", str(one_of_each), "--no-tui", "--workers", "1"])
    assert p.returncode == 0, p.stderr
    summary = next(ln for ln in p.stderr.splitlines() if ln.startswith("summary:"))
    assert "1 exchange (unanswered 1)" in summary and "4 packets decoded" in summary
    assert not ONE_PLURAL.search(summary), summary


def test_tui_status_line_singular(one_of_each):
    from tests.tui.conftest import make_app, wait_loaded

    async def drive():
        app = make_app(one_of_each)
        async with app.run_test(size=(160, 30)) as pilot:
            await wait_loaded(pilot)
            return str(app.query_one("#status").render())

    status = asyncio.run(drive())
    assert "1 exchange " in status + " " and "1 issue" in status, status
    assert not ONE_PLURAL.search(status), status


def test_summary_parts_packet_label():
    from kafkasniff.output.render import summary_parts

    one = summary_parts({}, {}, 1, {}, 1, 1, packets_label="packets decoded")
    assert one == ["0 exchanges", "0 issues", "1 packet decoded", "1 Kafka connection",
                   "1 other TCP connection"]
    two = summary_parts({"paired": 2}, {"tcp_gap": 2}, 2, {}, 2, 0)
    assert two == ["2 exchanges (paired 2)", "2 issues (tcp_gap 2)", "2 packets",
                   "2 Kafka connections"]
