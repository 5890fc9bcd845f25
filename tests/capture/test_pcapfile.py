"""pcap / pcapng / gzip reading (kafkasniff.capture.pcapfile)."""

from __future__ import annotations

import gzip
import io
import os
import struct
import subprocess
import sys
import tracemalloc
import types
from fractions import Fraction
from pathlib import Path

import dpkt
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kafkasniff.capture import CapturedPacket, PacketSource, open_capture
from kafkasniff.capture.pcapfile import MAX_RECORD_BYTES
from kafkasniff.errors import CaptureError
from kafkasniff.issues import IssueKind, Severity

from . import builders as b

ROOT = Path(__file__).resolve().parents[2]

SRC4 = bytes([10, 0, 0, 1])
DST4 = bytes([10, 0, 0, 2])


def frame(i: int, size: int = 40) -> bytes:
    payload = bytes((i + k) & 0xFF for k in range(size))
    return b.ether(b.ipv4(SRC4, DST4, b.tcp_header(seq=i) + payload))


def read_all(source) -> tuple[list[CapturedPacket], PacketSource]:
    with open_capture(source) as src:
        return list(src), src


# ---------------------------------------------------------------------------- sample files

PCAP_RECORDS = [(1_700_000_000, 123_456, frame(0)), (1_700_000_001, 999_999, frame(1, 3)),
                (4_000_000_000, 0, frame(2, 300), 1500)]
PCAP_BLOB = b.pcap(PCAP_RECORDS)

E = "<"
TS_US = 1_700_000_000_123_456
TS_NS = 1_700_000_000_987_654_321
TS_BIN = (1_700_000_100 << 20) + 12_345           # 2^-20 s units
TS_MS = 1_700_000_200_555
TS_PS = 12_345_678_901_234_567_891          # 10^-12 s units (64 bits hold ~213 days)


def pcapng_sample() -> tuple[bytes, list[tuple[int, int, int, bytes, int]], dict[int, int]]:
    """A two-section pcapng file (little- then big-endian) with 5 interfaces of different link
    types and resolutions, every packet block type and skipped blocks in between.
    Returns (blob, expected [(ts_ns, link_type, interface_id, data, orig_len)], link_types)."""
    l1, l2 = "<", ">"
    ns_bin = int(Fraction(TS_BIN * 10**9, 2**20)) + 1000 * 10**9   # floor, plus if_tsoffset
    f_raw = b.ipv4(SRC4, DST4, b.tcp_header() + b"raw")
    f_sll = b.sll(b.ipv4(SRC4, DST4, b.tcp_header() + b"sll"))
    blob = b"".join([
        b.shb(l1),
        b.idb(l1, 1, 0),                                    # if 0: usec (default)
        b.idb(l1, 101, 0, tsresol=9, name=b"lo"),            # if 1: nsec
        b.idb(l1, 113, 0, tsresol=0x80 | 20, tsoffset=1000),  # if 2: 2^-20, +1000 s
        b.epb(l1, 0, TS_US, frame(10), options=b.option(l1, 1, b"a comment")
              + b.end_of_options(l1)),
        b.nrb(l1),
        b.epb(l1, 1, TS_NS, f_raw),
        b.isb(l1, 0),
        b.epb(l1, 2, TS_BIN, f_sll, orig_len=len(f_sll) + 100),
        b.custom_block(l1),
        b.spb(l1, frame(11, 41)),                           # interface 0, reuses last ts
        b.opb(l1, 1, TS_NS + 5, f_raw),
        b.dsb(l1),
        b.shb(l2),
        b.idb(l2, 229, 0, tsresol=3, tsoffset=-5),          # global 3: msec, -5 s
        b.spb(l2, frame(12, 2)),                            # no timestamp seen yet: 0
        b.idb(l2, 228, 0, tsresol=12, tsoffset=7),          # global 4: psec, +7 s
        b.epb(l2, 1, TS_PS, f_raw),
        b.epb(l2, 0, TS_MS, b"\x60" + b"\0" * 39),
    ])
    expected = [
        (TS_US * 1000, 1, 0, frame(10), len(frame(10))),
        (TS_NS, 101, 1, f_raw, len(f_raw)),
        (ns_bin, 113, 2, f_sll, len(f_sll) + 100),
        (ns_bin, 1, 0, frame(11, 41), len(frame(11, 41))),
        (TS_NS + 5, 101, 1, f_raw, len(f_raw)),
        (0, 229, 3, frame(12, 2), len(frame(12, 2))),
        (TS_PS // 1000 + 7 * 10**9, 228, 4, f_raw, len(f_raw)),
        (TS_MS * 1_000_000 - 5 * 10**9, 229, 3, b"\x60" + b"\0" * 39, 40),
    ]
    return blob, expected, {0: 1, 1: 101, 2: 113, 3: 229, 4: 228}


PCAPNG_BLOB, PCAPNG_EXPECTED, PCAPNG_LINKS = pcapng_sample()
PACKET_BLOCKS = {2, 3, 6}


def as_tuples(pkts):
    return [(p.ts_ns, p.link_type, p.interface_id, p.data, p.orig_len) for p in pkts]


# ---------------------------------------------------------------------------- pcap

@pytest.mark.parametrize("endian", ["<", ">"])
@pytest.mark.parametrize("nano", [False, True])
def test_pcap_all_magics(tmp_path, endian, nano):
    records = [(1_700_000_000, 123_456_789 if nano else 123_456, frame(0)),
               (1_700_000_001, 1, frame(1, 0), 1514)]
    path = tmp_path / "x.cap"
    path.write_bytes(b.pcap(records, endian=endian, nano=nano, linktype=1))
    pkts, src = read_all(path)
    mult = 1 if nano else 1000
    assert [(p.ts_ns, p.data, p.orig_len, p.link_type, p.interface_id) for p in pkts] == [
        (1_700_000_000 * 10**9 + records[0][1] * mult, frame(0), len(frame(0)), 1, 0),
        (1_700_000_001 * 10**9 + mult, frame(1, 0), 1514, 1, 0),
    ]
    assert all(type(p.ts_ns) is int for p in pkts)
    assert src.format == "pcap" and src.compressed == ""
    assert src.link_types == {0: 1}
    assert src.packets_read == 2 and src.issues == []
    assert src.bytes_read == src.total_bytes == path.stat().st_size


def test_pcap_exact_nanoseconds():
    blob = b.pcap([(1_699_999_999, 999_999_999, b"x")], nano=True, linktype=101)
    (pkt,), _ = read_all(io.BytesIO(blob))
    assert pkt.ts_ns == 1_699_999_999_999_999_999


def test_pcap_agrees_with_dpkt():
    pkts, _ = read_all(io.BytesIO(PCAP_BLOB))
    ref = list(dpkt.pcap.Reader(io.BytesIO(PCAP_BLOB)))
    assert [p.data for p in pkts] == [bytes(d) for _, d in ref]


def test_pcap_link_type_ignores_fcs_bits():
    blob = b.pcap([(1, 0, frame(0))], linktype=0x14000000 | 1)
    _, src = read_all(io.BytesIO(blob))
    assert src.link_types == {0: 1}


def test_pcap_empty_capture_has_no_packets_and_no_issue():
    pkts, src = read_all(io.BytesIO(b.pcap([], linktype=276)))
    assert pkts == [] and src.issues == [] and src.link_types == {0: 276}


# ---------------------------------------------------------------------------- pcapng

def test_pcapng_sections_interfaces_resolutions():
    pkts, src = read_all(io.BytesIO(PCAPNG_BLOB))
    assert as_tuples(pkts) == PCAPNG_EXPECTED
    assert src.format == "pcapng"
    assert src.link_types == PCAPNG_LINKS
    assert src.blocks_skipped == 4                  # NRB, ISB, custom, DSB
    assert src.issues == []
    assert src.packets_read == len(PCAPNG_EXPECTED)


def test_pcapng_spb_limited_by_snaplen_and_padding():
    data = frame(0, 60)
    blob = b"".join([b.shb(E), b.idb(E, 1, snaplen=62), b.spb(E, data[:62], orig_len=len(data)),
                     b.spb(E, data[:61])])
    pkts, src = read_all(io.BytesIO(blob))
    assert [(p.data, p.orig_len) for p in pkts] == [(data[:62], len(data)), (data[:61], 61)]
    assert src.issues == []


def test_pcapng_epb_odd_lengths_and_options_do_not_leak():
    for n in range(0, 9):
        data = bytes(range(n))
        blob = b.shb(E) + b.idb(E, 101) + b.epb(E, 0, 5, data, options=b.option(E, 1, b"zz")
                                                + b.end_of_options(E))
        (pkt,), src = read_all(io.BytesIO(blob))
        assert pkt.data == data and pkt.ts_ns == 5000 and src.issues == []


def test_pcapng_big_endian_first_section():
    blob = b.shb(">") + b.idb(">", 1, tsresol=9) + b.epb(">", 0, TS_NS, frame(1))
    (pkt,), src = read_all(io.BytesIO(blob))
    assert (pkt.ts_ns, pkt.data) == (TS_NS, frame(1))


def test_pcapng_sections_restart_interface_numbering_and_timestamps():
    blob = b"".join([b.shb(E), b.idb(E, 1), b.epb(E, 0, 7, b"a"),
                     b.shb(E), b.idb(E, 1, tsresol=9), b.spb(E, b"b"), b.epb(E, 0, 7, b"c")])
    pkts, src = read_all(io.BytesIO(blob))
    assert as_tuples(pkts) == [(7000, 1, 0, b"a", 1), (0, 1, 1, b"b", 1), (7, 1, 1, b"c", 1)]
    assert src.link_types == {0: 1, 1: 1}


def test_pcapng_negative_tsoffset_and_idb_options_malformed():
    blob = b.shb(E) + b.idb(E, 1, tsoffset=-10) + b.epb(E, 0, 20_000_000, b"x")
    (pkt,), _ = read_all(io.BytesIO(blob))
    assert pkt.ts_ns == 20 * 10**9 - 10 * 10**9
    # an option running past the block end is ignored (defaults stay)
    bad_opts = struct.pack("<HH", 9, 200) + b"\x09\0\0\0"
    blob = b.shb(E) + b.block(E, 1, struct.pack("<HHI", 1, 0, 0) + bad_opts) + b.epb(E, 0, 3, b"y")
    (pkt,), src = read_all(io.BytesIO(blob))
    assert pkt.ts_ns == 3000 and src.issues == []


# ---------------------------------------------------------------------------- gzip, streams

def test_gzip_pcap_and_pcapng(tmp_path):
    for blob in (PCAP_BLOB, PCAPNG_BLOB):
        gz = gzip.compress(blob)
        path = tmp_path / "capture.bin"           # name says nothing: detection by magic
        path.write_bytes(gz)
        pkts, src = read_all(path)
        plain, _ = read_all(io.BytesIO(blob))
        assert as_tuples(pkts) == as_tuples(plain) and pkts
        assert src.compressed == "gzip" and src.issues == []
        assert src.total_bytes == len(gz) and src.bytes_read == len(gz)


def test_gzip_multi_member():
    blob = PCAPNG_BLOB
    gz = gzip.compress(blob[:100]) + gzip.compress(blob[100:])
    pkts, src = read_all(io.BytesIO(gz))
    assert as_tuples(pkts) == PCAPNG_EXPECTED and src.issues == []


class Dribble:
    """A non-seekable stream handing out 1-7 bytes per read (like a slow pipe)."""

    def __init__(self, data: bytes, read1: bool = True):
        self._data = data
        self._pos = 0
        self._n = 0
        if read1:
            self.read1 = self.read

    def read(self, n: int = -1) -> bytes:
        self._n += 1
        k = min(n if n >= 0 else 1 << 30, 1 + self._n % 7)
        out = self._data[self._pos:self._pos + k]
        self._pos += len(out)
        return out


@pytest.mark.parametrize("read1", [True, False])
@pytest.mark.parametrize("blob", [PCAP_BLOB, PCAPNG_BLOB, gzip.compress(PCAPNG_BLOB)],
                         ids=["pcap", "pcapng", "gzip"])
def test_dribbling_stream_gives_same_packets(blob, read1):
    pkts, src = read_all(Dribble(blob, read1))
    ref, _ = read_all(io.BytesIO(blob))
    assert pkts and as_tuples(pkts) == as_tuples(ref)
    assert src.issues == [] and src.total_bytes is None


def test_stdin_monkeypatched(monkeypatch):
    gz = gzip.compress(PCAP_BLOB)
    monkeypatch.setattr(sys, "stdin", types.SimpleNamespace(buffer=io.BytesIO(gz)))
    pkts, src = read_all("-")
    assert len(pkts) == len(PCAP_RECORDS) and src.name == "<stdin>" and src.issues == []


def test_stdin_pipe_subprocess():
    code = ("import sys; sys.path.insert(0, sys.argv[1]);"
            "from kafkasniff.capture import open_capture;"
            "s = open_capture('-');"
            "n = sum(1 for _ in s);"
            "print(n, s.format, len(s.issues), s.total_bytes, s.link_types)")
    out = subprocess.run([sys.executable, "-c", code, str(ROOT)], input=PCAPNG_BLOB,
                         capture_output=True, check=True, timeout=60).stdout.decode()
    assert out.split(None, 4) == [str(len(PCAPNG_EXPECTED)), "pcapng", "0", "None",
                                  str(PCAPNG_LINKS) + "\n"]


def test_close_semantics(tmp_path):
    path = tmp_path / "a.pcap"
    path.write_bytes(PCAP_BLOB)
    src = open_capture(path)
    it = iter(src)
    next(it)
    src.close()
    src.close()
    assert list(it) == []
    bio = io.BytesIO(PCAP_BLOB)
    with open_capture(bio) as src:
        assert len(list(src)) == 3
    assert not bio.closed
    assert "a.pcap" in repr(open_capture(path))


def test_read_error_becomes_issue():
    class Failing(io.RawIOBase):
        def __init__(self):
            self.calls = 0

        def readable(self):
            return True

        def read(self, n=-1):
            self.calls += 1
            if self.calls == 1:
                return PCAP_BLOB[:200]
            raise OSError(5, "Input/output error")

    pkts, src = read_all(Failing())
    assert len(pkts) == 1
    assert [(i.kind, i.severity) for i in src.issues] == [(IssueKind.CAPTURE_TRUNCATED,
                                                           Severity.WARNING)]
    assert "Input/output error" in src.issues[0].message


# ---------------------------------------------------------------------------- truncation

def _complete_packets_before(cut: int, ends: list[int], is_packet: list[bool]) -> int:
    return sum(1 for end, pkt in zip(ends, is_packet) if pkt and end <= cut)


def test_pcap_truncated_at_every_byte():
    ends = b.pcap_record_offsets(PCAP_BLOB)
    full, _ = read_all(io.BytesIO(PCAP_BLOB))
    for cut in range(len(PCAP_BLOB)):
        if cut < 4:
            with pytest.raises(CaptureError):
                open_capture(io.BytesIO(PCAP_BLOB[:cut]))
            continue
        pkts, src = read_all(io.BytesIO(PCAP_BLOB[:cut]))
        n = sum(1 for e in ends[1:] if e <= cut)
        assert as_tuples(pkts) == as_tuples(full[:n]), cut
        if cut in ends:
            assert src.issues == [], cut
        else:
            assert [(i.kind, i.severity) for i in src.issues] == [
                (IssueKind.CAPTURE_TRUNCATED, Severity.WARNING)], cut
            assert "offset" in src.issues[0].message
            assert src.issues[0].ts_ns == (full[n - 1].ts_ns if n else 0)


def test_pcapng_truncated_at_every_byte():
    ends = b.pcapng_block_offsets(PCAPNG_BLOB)
    starts = [0] + ends[:-1]
    is_packet = []
    e = "<"
    for s in starts:
        if PCAPNG_BLOB[s:s + 4] == b"\x0a\x0d\x0d\x0a":
            e = "<" if PCAPNG_BLOB[s + 8:s + 12] == b"\x4d\x3c\x2b\x1a" else ">"
        is_packet.append(struct.unpack_from(e + "I", PCAPNG_BLOB, s)[0] in PACKET_BLOCKS)
    assert sum(is_packet) == len(PCAPNG_EXPECTED)
    for cut in range(len(PCAPNG_BLOB)):
        if cut < 4:
            with pytest.raises(CaptureError):
                open_capture(io.BytesIO(PCAPNG_BLOB[:cut]))
            continue
        pkts, src = read_all(io.BytesIO(PCAPNG_BLOB[:cut]))
        n = _complete_packets_before(cut, ends, is_packet)
        assert as_tuples(pkts) == PCAPNG_EXPECTED[:n], cut
        if cut in ends:
            assert src.issues == [], cut
        else:
            assert [(i.kind, i.severity) for i in src.issues] == [
                (IssueKind.CAPTURE_TRUNCATED, Severity.WARNING)], cut


def test_gzip_truncated_at_every_byte():
    gz = gzip.compress(PCAPNG_BLOB)
    opened = 0
    for cut in range(len(gz)):
        try:
            src = open_capture(io.BytesIO(gz[:cut]))
        except CaptureError:
            continue
        opened += 1
        pkts = list(src)
        assert as_tuples(pkts) == PCAPNG_EXPECTED[:len(pkts)], cut
        assert len(src.issues) == 1, cut
        assert src.issues[0].kind in (IssueKind.CAPTURE_TRUNCATED, IssueKind.CAPTURE_BLOCK_INVALID)
    assert opened > len(gz) // 2      # most cuts open fine


def test_huge_record_lengths_do_not_allocate():
    blob = PCAP_BLOB + struct.pack("<IIII", 1, 0, 200 << 20, 200 << 20) + b"x" * 100
    ng = PCAPNG_BLOB + struct.pack(">II", 6, 100 << 20) + b"\0" * 100   # last section is BE
    for data in (blob, ng):
        tracemalloc.start()
        try:
            pkts, src = read_all(io.BytesIO(data))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert [i.kind for i in src.issues] == [IssueKind.CAPTURE_TRUNCATED]
        assert peak < 16 << 20
        assert pkts


# ---------------------------------------------------------------------------- invalid

def _invalid(data: bytes) -> tuple[list[CapturedPacket], PacketSource]:
    pkts, src = read_all(io.BytesIO(data))
    assert [(i.kind, i.severity) for i in src.issues] == [(IssueKind.CAPTURE_BLOCK_INVALID,
                                                           Severity.ERROR)]
    assert "offset" in src.issues[0].message
    return pkts, src


def test_pcap_record_over_sanity_bound():
    pkts, src = _invalid(PCAP_BLOB + struct.pack("<IIII", 1, 0, MAX_RECORD_BYTES + 1, 60)
                         + frame(9) + PCAP_BLOB[24:])
    assert len(pkts) == 3
    assert f"offset {len(PCAP_BLOB)}" in src.issues[0].message


@pytest.mark.parametrize("tail", [
    struct.pack("<II", 6, 13) + b"\0" * 20,                 # not a multiple of 4
    struct.pack("<II", 6, 8) + b"\0" * 20,                  # shorter than a block can be
    struct.pack("<II", 6, 28) + b"\0" * 20,                 # EPB shorter than its fixed part
    struct.pack("<II", 1, 16) + b"\0" * 20,                 # IDB shorter than its fixed part
    struct.pack("<II", 6, 0xFFFFFFF0) + b"\0" * 20,         # absurd length
    b.epb(E, 0, 1, b"abc")[:-4] + struct.pack("<I", 999),   # trailing length differs
    b.epb(E, 7, 1, b"abc"),                                 # undeclared interface
    b.block(E, 6, struct.pack("<IIIII", 0, 0, 0, 500, 500) + b"abcd"),  # caplen > block
    b.block(E, 2, struct.pack("<HHIIII", 0, 0, 0, 0, 500, 500) + b"abcd"),  # OPB too
    b.shb(E)[:8] + b"\x11\x22\x33\x44" + b.shb(E)[12:],       # bad byte-order magic
])
def test_pcapng_invalid_blocks(tail):
    head = b.shb(E) + b.idb(E, 1) + b.epb(E, 0, 1, frame(0))
    pkts, _ = _invalid(head + tail + b.epb(E, 0, 2, frame(1)))
    assert [p.data for p in pkts] == [frame(0)]


def test_pcapng_spb_without_interface():
    pkts, _ = _invalid(b.shb(E) + b.spb(E, b"abc"))
    assert pkts == []


@pytest.mark.parametrize("idb_opts, ts", [
    ({"tsoffset": -10**12}, 1),                     # negative after the interface offset
    ({"tsresol": 0}, 2**62),                        # seconds: far beyond 2^63 ns
    ({"tsoffset": 2**62}, 1),                       # offset alone beyond 2^63 ns
])
def test_pcapng_timestamp_out_of_range_skips_that_packet(idb_opts, ts):
    """Timestamps the rest of the tool cannot hold (int64 ns, datetime) are damage: that
    packet is skipped and counted, one issue says so, and reading goes on (it used to stop
    the whole file, uncounted)."""
    head = b.shb(E) + b.idb(E, 1) + b.idb(E, 1, **idb_opts) + b.epb(E, 0, 5, frame(0))
    bad = b.epb(E, 1, ts, frame(1))
    data = head + bad + b.epb(E, 0, 6, frame(2)) + b.epb(E, 1, ts, frame(3))
    src = open_capture(io.BytesIO(data))
    pkts = list(src)
    assert [p.ts_ns for p in pkts] == [5000, 6000]
    [issue] = src.issues
    assert "timestamp" in issue.message and issue.severity == "warning"
    assert src.damaged_bytes == 2 * len(bad)
    assert sum(src.accounting().values()) == len(data)


# ---------------------------------------------------------------------------- open errors

def test_garbage_text_file(tmp_path):
    path = tmp_path / "x.txt"
    path.write_bytes(b"Hello, world\n")
    with pytest.raises(CaptureError) as ei:
        open_capture(path)
    assert str(ei.value) == f"{path}: not a pcap or pcapng file (starts with 48 65 6c 6c)"


@pytest.mark.parametrize("content, fragment", [
    (b"", "empty file"),
    (b"\xd4\xc3", "too short"),
    (gzip.compress(b"Hello, world\n"), "gzip-compressed, but not a pcap or pcapng file "
                                        "(starts with 48 65 6c 6c)"),
    (gzip.compress(PCAP_BLOB)[:6], "gzip-compressed, but"),
    (gzip.compress(b"ab"), "gzip-compressed, but too short"),
    (b"\x0a\x0d\x0d\x0a" + b"\x1c\0\0\0" + b"\x11\x22\x33\x44" + b"\0" * 20, "byte-order magic"),
    (b"\x1f\x8b" + b"\xff" * 40, "gzip-compressed, but"),
])
def test_unreadable_contents(tmp_path, content, fragment):
    path = tmp_path / "in.pcap"
    path.write_bytes(content)
    with pytest.raises(CaptureError) as ei:
        open_capture(path)
    msg = str(ei.value)
    assert msg.startswith(f"{path}: ") and fragment in msg and "\n" not in msg


def test_missing_file_directory_and_bad_source(tmp_path):
    with pytest.raises(CaptureError, match="no such file"):
        open_capture(tmp_path / "nope.pcap")
    with pytest.raises(CaptureError, match="is a directory"):
        open_capture(tmp_path)
    with pytest.raises(CaptureError):
        open_capture(42)  # type: ignore[arg-type]


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0,
                    reason="running as root: file permissions do not stop reads")
def test_permission_denied(tmp_path):
    path = tmp_path / "secret.pcap"
    path.write_bytes(PCAP_BLOB)
    path.chmod(0)
    with pytest.raises(CaptureError, match="permission denied"):
        open_capture(path)


# ---------------------------------------------------------------------------- fuzz

def _read_or_capture_error(data: bytes, wrap=io.BytesIO) -> None:
    try:
        src = open_capture(wrap(data))
    except CaptureError as exc:
        assert "\n" not in str(exc)
        return
    pkts = list(src)
    stops = [i for i in src.issues if "reading goes on" not in i.message]
    assert len(stops) <= 1 and len(src.issues) - len(stops) <= 1
    assert src.packets_read == len(pkts)
    for p in pkts:
        assert isinstance(p.ts_ns, int) and isinstance(p.data, bytes)
    if wrap is io.BytesIO:
        total = len(gzip.decompress(data)) if data[:2] == b"\x1f\x8b" and not \
            [i for i in src.issues if "gzip" in i.message or "compressed" in i.message] \
            else None
        acc = src.accounting()
        assert min(acc.values()) >= 0 and acc["packets"] == sum(len(p.data) for p in pkts)
        if total is not None:
            assert sum(acc.values()) == total
        elif data[:2] != b"\x1f\x8b":
            assert sum(acc.values()) == len(data)


MAGICS = [b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d",
          b"\x0a\x0d\x0d\x0a\x1c\0\0\0\x4d\x3c\x2b\x1a",
          b"\x0a\x0d\x0d\x0a\0\0\0\x1c\x1a\x2b\x3c\x4d",
          b"\x1f\x8b", b""]

FUZZ = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(prefix=st.sampled_from(MAGICS), body=st.binary(max_size=400))
def test_random_garbage(prefix, body):
    _read_or_capture_error(prefix + body)


@FUZZ
@given(base=st.sampled_from([PCAP_BLOB, PCAPNG_BLOB, gzip.compress(PCAPNG_BLOB)]),
       edits=st.lists(st.tuples(st.sampled_from(["set", "insert", "delete"]),
                                st.integers(0, 10_000), st.integers(0, 255)), min_size=1,
                      max_size=6))
# corrupt gzip data whose decompressed part also holds an impossible block: one issue
@example(base=gzip.compress(PCAPNG_BLOB), edits=[("delete", 23, 3), ("set", 494, 18)])
def test_random_mutations(base, edits):
    data = bytearray(base)
    for op, pos, value in edits:
        pos %= len(data) + 1
        if op == "set" and pos < len(data):
            data[pos] = value
        elif op == "insert":
            data[pos:pos] = bytes([value]) * (1 + value % 5)
        elif op == "delete":
            del data[pos:pos + 1 + value % 9]
        if not data:
            data = bytearray(b"\0")
    _read_or_capture_error(bytes(data))
    _read_or_capture_error(bytes(data), wrap=lambda d: Dribble(d))


# ---------------------------------------------------------------------------- public captures

PUBLIC = Path("/work/shared/captures-public")
PUBLIC_FILES = ([PUBLIC / "ndpi" / "kafka.pcapng"] + sorted((PUBLIC / "deepflow").glob("*.pcap"))
                if PUBLIC.is_dir() else [])
TCPDUMP = "/usr/bin/tcpdump" if os.access("/usr/bin/tcpdump", os.X_OK) else None


@pytest.mark.skipif(not PUBLIC.is_dir(), reason=f"{PUBLIC} is absent (third-party captures)")
@pytest.mark.parametrize("path", PUBLIC_FILES, ids=lambda p: p.name)
def test_public_captures(path):
    from kafkasniff.capture import TcpSegment, decode_packet

    pkts, src = read_all(path)
    assert pkts and src.issues == [] and src.bytes_read == src.total_bytes == path.stat().st_size
    segs = [decode_packet(p) for p in pkts]
    assert all(isinstance(s, TcpSegment) for s in segs)
    if path.suffix == ".pcapng":
        assert src.format == "pcapng" and len(src.link_types) == 2
        assert {p.interface_id for p in pkts} == {0, 1}
    if TCPDUMP is None:
        pytest.skip("tcpdump not installed: packet count / timestamp comparison skipped")
    out = subprocess.run([TCPDUMP, "-r", str(path), "-nn", "-tt", "--nano"], capture_output=True,
                         check=True, timeout=60).stdout.decode().splitlines()
    assert len(pkts) == len(out)
    for pkt, seg, line in zip(pkts, segs, out):
        sec, frac = line.split(" ", 1)[0].split(".")
        assert pkt.ts_ns == int(sec) * 10**9 + int(frac)
        assert line.rstrip().endswith(f"length {len(seg.payload)}")


# ---------------------------------------------------------------------------- accounting

def _stream_bytes(path) -> bytes:
    raw = path.read_bytes()
    return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw


def _every_capture():
    from tests.conftest import CAPTURES, public_captures_dir
    found = sorted(CAPTURES.glob("*.pcap")) + sorted((CAPTURES / "regressions").glob("*"))
    pub = public_captures_dir()
    if pub is not None:
        found += sorted(p for p in pub.rglob("*") if p.suffix in (".pcap", ".pcapng"))
    return found


def test_every_byte_of_every_capture_is_accounted_for():
    """packets + format + skipped blocks + damaged records + unread = the stream's bytes, on
    every committed capture, every regression capture and the public ones."""
    for path in _every_capture():
        src = open_capture(path)
        for _ in src:
            pass
        acc = src.accounting()
        assert sum(acc.values()) == len(_stream_bytes(path)), (path.name, acc)
        assert min(acc.values()) >= 0, (path.name, acc)


@pytest.mark.parametrize("cut", [24, 40, 200, -7])
def test_damage_and_truncation_are_accounted_for(cut, tmp_path):
    """A file cut anywhere, garbage in the middle, the same gzip-compressed: the bytes after
    the damage are counted as unread, never lost."""
    from tests.conftest import CAPTURES
    data = (CAPTURES / "librdkafka_produce_consume.pcap").read_bytes()
    for blob in (data[:cut], data[:200] + b"\xff" * 64 + data[200:],
                 gzip.compress(data[:cut] + b"\x00" * 5)):
        src = open_capture(io.BytesIO(blob))
        pkts = list(src)
        acc = src.accounting()
        n = len(gzip.decompress(blob)) if blob[:2] == b"\x1f\x8b" else len(blob)
        assert sum(acc.values()) == n and acc["packets"] == sum(len(p.data) for p in pkts)


# ------------------------------------------------------------- records copied unchanged (split)

def split_all(data: bytes, n: int = 3, flush_bytes: int = 1 << 20, wrap=io.BytesIO):
    """``PacketSource.split_records`` over ``data`` routed by the first payload byte after the
    Ethernet/IP/TCP headers modulo ``n``: ``(per-output bytes, counts, writes, source)``."""
    outs: dict[int, list[bytes]] = {}
    writes = []

    def write(i: int, records: list[bytes]) -> None:
        assert records
        writes.append((i, sum(map(len, records))))
        outs.setdefault(i, []).extend(records)

    with open_capture(wrap(data)) as src:
        counts = src.split_records(lambda lt, rec, off: (len(rec) - off) % n, n, write, flush_bytes)
    return {i: b"".join(r) for i, r in outs.items()}, counts, writes, src


def issue_tuples(src):
    return [(i.kind, i.severity, i.message, i.ts_ns, i.length_bytes) for i in src.issues]


def assert_split_as_read(data: bytes, n: int = 3, wrap=io.BytesIO) -> list:
    """Every output, read back with the source's file header, holds the packets iteration
    routes there, in order; issues, counters and the byte accounting are iteration's."""
    full, it = read_all(wrap(data))
    outs, counts, _, src = split_all(data, n, wrap=wrap)
    for i in range(n):
        want = [p for p in full if len(p.data) % n == i]
        assert counts[i] == len(want)
        got = read_all(io.BytesIO(src.pcap_header + outs[i]))[0] if i in outs else []
        assert as_tuples(got) == as_tuples(want)
    assert issue_tuples(src) == issue_tuples(it)
    assert (src.packets_read, src.packet_bytes, src.accounting(), src.bytes_read) == \
        (it.packets_read, it.packet_bytes, it.accounting(), it.bytes_read)
    return full


@pytest.mark.parametrize("endian", ["<", ">"])
@pytest.mark.parametrize("nano", [False, True])
def test_split_records_copies_every_magic_unchanged(endian, nano):
    records = [(1_700_000_000 + k, 999_999 - k, frame(k, k * 7 % 50), 1514) for k in range(30)]
    blob = b.pcap(records, endian=endian, nano=nano, linktype=113)
    assert len(assert_split_as_read(blob)) == 30
    outs, _, _, src = split_all(blob)
    assert src.pcap_header == blob[:24]
    # the records are the source's bytes: together they are the file without its header
    offsets = b.pcap_record_offsets(blob, endian)
    recs = [blob[a:z] for a, z in zip(offsets, offsets[1:])]
    assert sorted(r for o in outs.values() for r in _records(o, endian)) == sorted(recs)


def _records(blob: bytes, endian: str) -> list[bytes]:
    offsets = b.pcap_record_offsets(b"\0" * 24 + blob, endian)
    return [blob[a - 24:z - 24] for a, z in zip(offsets, offsets[1:])]


def test_split_records_truncated_at_every_byte():
    for cut in range(24, len(PCAP_BLOB)):
        assert_split_as_read(PCAP_BLOB[:cut], 2)


def test_split_records_over_sanity_bound_and_gzip():
    assert len(assert_split_as_read(PCAP_BLOB + struct.pack("<IIII", 1, 0, MAX_RECORD_BYTES + 1,
                                                            60) + frame(9))) == 3
    assert_split_as_read(gzip.compress(PCAP_BLOB * 2)[:-9], 2)     # a cut gzip stream
    assert_split_as_read(PCAP_BLOB, 1, wrap=lambda d: io.BytesIO(gzip.compress(d)))


def test_split_records_dribbling_stream_and_flush_size():
    """Records that straddle reads, and outputs handed over in lists of about
    ``flush_bytes``."""
    records = [(1_700_000_000, k, frame(k, 200 + k)) for k in range(400)]
    blob = b.pcap(records)

    class Dribble(io.BytesIO):
        def read(self, n=-1):
            return super().read(min(n, 777) if n > 0 else 777)

    assert_split_as_read(blob, 4, wrap=Dribble)
    _, counts, writes, _ = split_all(blob, 4, flush_bytes=5000)
    assert sum(counts) == 400
    assert all(size >= 5000 for _, size in writes[:-4])     # the last list of each is shorter
    assert len(writes) > 30          # about 160 KB in lists of 5 000 bytes


def test_split_records_needs_a_pcap_from_its_start():
    with open_capture(io.BytesIO(PCAPNG_BLOB)) as src:
        with pytest.raises(ValueError, match="pcap"):
            src.split_records(lambda lt, rec, off: 0, 1, lambda i, r: None)
    outs, counts, _, src = split_all(PCAP_BLOB[:20])      # no whole file header
    assert outs == {} and counts == [0, 0, 0]
    assert [i.kind for i in src.issues] == [IssueKind.CAPTURE_TRUNCATED]


# --------------------------------------------------------------------------- probe_capture


def _pcap_bytes(n: int = 50) -> bytes:
    return b.pcap([(1_700_000_000 + i, i, frame(i, 700)) for i in range(n)])


def test_probe_capture_regular_file_returns_its_path(tmp_path):
    from kafkasniff.capture.pcapfile import probe_capture

    path = tmp_path / "x.pcap"
    path.write_bytes(_pcap_bytes())
    assert probe_capture(str(path)) == str(path)
    (tmp_path / "bad.pcap").write_bytes(b"hello, not a capture")
    with pytest.raises(CaptureError, match="bad.pcap: not a pcap or pcapng file"):
        probe_capture(str(tmp_path / "bad.pcap"))
    with pytest.raises(CaptureError, match="is a directory, not a capture file"):
        probe_capture(str(tmp_path))
    with pytest.raises(CaptureError, match="no such file"):
        probe_capture(str(tmp_path / "missing.pcap"))


@pytest.mark.parametrize("gz", [False, True])
def test_probe_capture_fifo_read_once_every_byte_kept(tmp_path, gz):
    """A FIFO is opened once: the stream returned replays what the check read, then reads
    on (issue 45, item 6); the writer is never cut off."""
    from kafkasniff.capture.pcapfile import probe_capture

    data = _pcap_bytes(400)
    if gz:
        data = gzip.compress(data)
    src = tmp_path / "x.pcap"
    src.write_bytes(data)
    fifo = tmp_path / "x.fifo"
    os.mkfifo(fifo)
    writer = subprocess.Popen(["sh", "-c", 'exec cat "$0" > "$1"', str(src), str(fifo)])
    try:
        stream = probe_capture(str(fifo))
        assert not isinstance(stream, str) and stream.name == str(fifo)
        want, _ = read_all(str(src))
        got, source = read_all(stream)
        stream.close()
        assert writer.wait(30) == 0
    finally:
        if writer.poll() is None:
            writer.kill()
    assert [(p.ts_ns, p.data) for p in got] == [(p.ts_ns, p.data) for p in want]
    assert not source.issues


def test_probe_capture_stream_not_a_capture():
    from kafkasniff.capture.pcapfile import probe_capture

    with pytest.raises(CaptureError, match=r"^<pipe>: not a pcap or pcapng file"):
        probe_capture(io.BytesIO(b"hello, world, not a capture"), "<pipe>")
    stream = probe_capture(io.BytesIO(_pcap_bytes(3)), "<pipe>")
    got, _ = read_all(stream)
    assert len(got) == 3
