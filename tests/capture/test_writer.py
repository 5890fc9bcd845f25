"""pcapng writer (kafkasniff.capture.writer): round trip through our reader, tcpdump, tshark."""

from __future__ import annotations

import io
import shutil
import subprocess
from pathlib import Path

import pytest

from kafkasniff.capture import CapturedPacket, open_capture
from kafkasniff.capture.writer import PcapNgWriter

from . import builders as b

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = sorted((ROOT / "captures").glob("*.pcap"))

SRC4 = bytes([10, 0, 0, 1])
DST4 = bytes([10, 0, 0, 2])
SRC6 = bytes(15) + b"\x01"
DST6 = bytes(15) + b"\x02"


def _seg(i: int, n: int) -> bytes:
    return b.tcp_header(seq=1000 + i) + bytes((i + k) & 0xFF for k in range(n))


def sample_packets() -> list[CapturedPacket]:
    """Packets of six link types, odd lengths (padding), exact ns timestamps (beyond 2^32 and
    beyond the float64 mantissa), one snaplen-cut packet."""
    ts0 = 1_700_000_000_123_456_789
    frames = [
        (1, b.ether(b.ipv4(SRC4, DST4, _seg(0, 5)))),
        (113, b.sll(b.ipv4(SRC4, DST4, _seg(1, 6)))),
        (276, b.sll2(b.ipv6(SRC6, DST6, _seg(2, 7)), proto=0x86DD)),
        (0, b.null_loop(b.ipv4(SRC4, DST4, _seg(3, 0)), 2, "<")),
        (101, b.ipv6(SRC6, DST6, _seg(4, 1))),
        (228, b.ipv4(SRC4, DST4, _seg(5, 3))),
        (1, b.ether(b.ipv4(DST4, SRC4, _seg(6, 2)))),
    ]
    out = [CapturedPacket(ts0 + i * 1_000_000_007 + i, lt, data, len(data))
           for i, (lt, data) in enumerate(frames)]
    cut = b.ether(b.ipv4(SRC4, DST4, _seg(7, 100)))
    out.append(CapturedPacket(ts0 + 10**10 + 1, 1, cut[:60], len(cut)))
    out.append(CapturedPacket(1, 113, b"\x00" * 16, 16))      # near the epoch
    return out


def key(p: CapturedPacket) -> tuple:
    return (p.ts_ns, p.link_type, p.data, p.orig_len)


def read_back(source) -> tuple[list[CapturedPacket], object]:
    with open_capture(source) as src:
        pkts = list(src)
    assert src.issues == []
    return pkts, src


def test_round_trip_several_link_types(tmp_path: Path) -> None:
    pkts = sample_packets()
    path = tmp_path / "x.pcapng"
    with PcapNgWriter(path) as w:
        for p in pkts:
            w.write(p)
    assert w.packets_written == len(pkts)
    assert w.bytes_written == path.stat().st_size
    got, src = read_back(path)
    assert src.format == "pcapng"
    assert [key(p) for p in got] == [key(p) for p in pkts]
    # one interface per link type, in order of first appearance
    assert list(src.link_types.values()) == [1, 113, 276, 0, 101, 228]
    assert w.link_types == src.link_types
    assert [p.interface_id for p in got] == [0, 1, 2, 3, 4, 5, 0, 0, 1]


def test_file_object_and_small_buffer(tmp_path: Path) -> None:
    pkts = sample_packets() * 50
    bio = io.BytesIO()
    w = PcapNgWriter(bio, buffer_bytes=100)
    for p in pkts:
        w.write(p)
    w.close()
    w.close()  # idempotent
    assert not bio.closed  # not ours to close
    got, _ = read_back(io.BytesIO(bio.getvalue()))
    assert [key(p) for p in got] == [key(p) for p in pkts]
    with pytest.raises(ValueError, match="after close"):
        w.write(pkts[0])


def test_flush_makes_packets_visible(tmp_path: Path) -> None:
    path = tmp_path / "live.pcapng"
    w = PcapNgWriter(path)
    w.write(sample_packets()[0])
    w.flush()
    got, _ = read_back(path)
    assert len(got) == 1
    w.write(sample_packets()[1])
    w.close()
    assert len(read_back(path)[0]) == 2


def test_empty_file_is_valid(tmp_path: Path) -> None:
    path = tmp_path / "empty.pcapng"
    PcapNgWriter(path).close()
    got, src = read_back(path)
    assert got == [] and src.format == "pcapng"


def test_rejects_impossible_values(tmp_path: Path) -> None:
    with PcapNgWriter(tmp_path / "bad.pcapng") as w:
        with pytest.raises(ValueError, match="timestamp"):
            w.write_packet(-1, 1, b"x")
        with pytest.raises(ValueError, match="timestamp"):
            w.write_packet(1 << 64, 1, b"x")
        with pytest.raises(ValueError, match="link type"):
            w.write_packet(0, 70000, b"x")
    with pytest.raises(TypeError):
        PcapNgWriter(42)  # type: ignore[arg-type]


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.name)
def test_real_captures_round_trip(tmp_path: Path, capture: Path) -> None:
    orig, _ = read_back(capture)
    path = tmp_path / "copy.pcapng"
    with PcapNgWriter(path) as w:
        for p in orig:
            w.write(p)
    got, _ = read_back(path)
    assert [key(p) for p in got] == [key(p) for p in orig]


def _written(tmp_path: Path, link_types=(1, 113, 276, 101, 228, 0)
             ) -> tuple[Path, list[CapturedPacket]]:
    pkts = [p for p in sample_packets() if p.link_type in link_types]
    path = tmp_path / f"tools-{'-'.join(map(str, link_types))}.pcapng"
    with PcapNgWriter(path) as w:
        for p in pkts:
            w.write(p)
    return path, pkts


@pytest.mark.skipif(shutil.which("tcpdump") is None, reason="tcpdump not installed")
@pytest.mark.parametrize("link_type", [1, 113, 276])
def test_tcpdump_reads_it(tmp_path: Path, link_type: int) -> None:
    # libpcap reads pcapng files whose interfaces all share one link type (it stops at an
    # interface of another type), so each file here has one link type
    path, pkts = _written(tmp_path, (link_type,))
    res = subprocess.run(["tcpdump", "-nn", "--nano", "-tt", "-r", str(path)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert len(lines) == len(pkts)
    for line, p in zip(lines, pkts):
        sec, frac = line.split()[0].split(".")
        assert int(sec) * 10**9 + int(frac) == p.ts_ns


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
def test_tshark_reads_it(tmp_path: Path) -> None:
    path, pkts = _written(tmp_path)   # six link types in one file
    res = subprocess.run(["tshark", "-r", str(path), "-T", "fields", "-e", "frame.time_epoch",
                          "-e", "frame.cap_len", "-e", "frame.len", "-e", "tcp.srcport"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    rows = [line.split("\t") for line in res.stdout.splitlines()]
    assert len(rows) == len(pkts)
    for row, p in zip(rows, pkts):
        sec, frac = row[0].split(".")
        assert int(sec) * 10**9 + int(frac.ljust(9, "0")[:9]) == p.ts_ns
        assert (int(row[1]), int(row[2])) == (len(p.data), p.orig_len)
        if len(p.data) > 60:   # a complete TCP header: tshark dissected down to TCP
            assert row[3] == "40000"
