"""Unit tests of kafkasniff.tcp.reassembly (every documented semantic)."""

from __future__ import annotations

import gc
import itertools
import subprocess
import sys

import pytest

from kafkasniff.capture.types import ACK, FIN, PSH, RST, SYN, TcpSegment
from kafkasniff.tcp import (
    StreamClosed,
    StreamData,
    StreamGap,
    TcpConnection,
    TcpReassembler,
)

MASK = 0xFFFFFFFF
A_IP, A_PORT = bytes([10, 0, 0, 1]), 50000
B_IP, B_PORT = bytes([10, 0, 0, 2]), 9092


def a2b(seq, payload=b"", flags=ACK, ack=0, ts=0, missing=0, port=A_PORT):
    return TcpSegment(ts, A_IP, port, B_IP, B_PORT, seq & MASK, ack & MASK, flags,
                      payload, missing)


def b2a(seq, payload=b"", flags=ACK, ack=0, ts=0, missing=0, port=A_PORT):
    return TcpSegment(ts, B_IP, B_PORT, A_IP, port, seq & MASK, ack & MASK, flags,
                      payload, missing)


class Streams:
    """Collects events; checks that every direction is contiguous (no overlap, no hole
    without a gap) and that each connection closes once, last."""

    def __init__(self) -> None:
        self.events: list = []
        self.pos: dict[tuple[int, int], int] = {}
        self.data: dict[tuple[int, int], bytearray] = {}
        self.gaps: dict[tuple[int, int], list[tuple[int, int, str]]] = {}
        self.closed: dict[int, str] = {}
        self.conns: dict[int, TcpConnection] = {}

    def add(self, events) -> list:
        for ev in events:
            self.events.append(ev)
            cid = ev.conn.conn_id
            assert cid not in self.closed, f"event after close: {ev}"
            self.conns.setdefault(cid, ev.conn)
            if isinstance(ev, StreamClosed):
                self.closed[cid] = ev.reason
                continue
            key = (cid, ev.direction)
            pos = self.pos.get(key, 0)
            assert ev.offset == pos, f"not contiguous: expected offset {pos}, got {ev}"
            if isinstance(ev, StreamData):
                assert len(ev.data) > 0
                self.data.setdefault(key, bytearray()).extend(ev.data)
                self.pos[key] = pos + len(ev.data)
            else:
                assert isinstance(ev, StreamGap)
                assert ev.length > 0
                self.gaps.setdefault(key, []).append((ev.offset, ev.length, ev.reason))
                self.pos[key] = pos + ev.length
        return list(events)

    def feed(self, r: TcpReassembler, *segs) -> list:
        out = []
        for s in segs:
            out += self.add(r.feed(s))
        return out

    def bytes(self, cid=0, d=0) -> bytes:
        return bytes(self.data.get((cid, d), b""))

    def gap_list(self, cid=0, d=0) -> list[tuple[int, int, str]]:
        return self.gaps.get((cid, d), [])


def handshake(r, s, isn_a=1000, isn_b=5000, ts=0):
    s.feed(r,
           a2b(isn_a, flags=SYN, ts=ts),
           b2a(isn_b, flags=SYN | ACK, ack=isn_a + 1, ts=ts + 1),
           a2b(isn_a + 1, flags=ACK, ack=isn_b + 1, ts=ts + 2))


# ---------------------------------------------------------------------------- basics


def test_in_order_both_directions_with_handshake():
    r, s = TcpReassembler(), Streams()
    handshake(r, s)
    assert s.events == []
    assert r.open_connections == 1
    ev = s.feed(r, a2b(1001, b"hello", ack=5001, ts=10))
    assert len(ev) == 1 and isinstance(ev[0], StreamData)
    e = ev[0]
    assert (e.direction, e.offset, e.data, e.ts_ns) == (0, 0, b"hello", 10)
    conn = e.conn
    assert conn.conn_id == 0 and conn.handshake_seen
    assert (conn.a_ip, conn.a_port, conn.b_ip, conn.b_port) == (A_IP, A_PORT, B_IP, B_PORT)
    assert conn.endpoint(0) == "10.0.0.1:50000" and conn.endpoint(1) == "10.0.0.2:9092"
    ev = s.feed(r, b2a(5001, b"world!", ack=1006, ts=11), a2b(1006, b"abc", ack=5007, ts=12))
    assert [(x.direction, x.offset, x.data) for x in ev] == [(1, 0, b"world!"), (0, 5, b"abc")]
    assert s.bytes(0, 0) == b"helloabc" and s.bytes(0, 1) == b"world!"
    assert conn.bytes == [8, 6]
    assert conn.segments == [4, 2]
    assert conn.first_ts_ns == 0 and conn.last_ts_ns == 12
    assert conn.gap_bytes == [0, 0] and conn.closed == ""
    assert r.stats.segments == 6 and r.stats.payload_bytes == 14
    assert r.stats.connections_opened == 1 and r.stats.gaps == 0


def test_fast_path_event_equals_constructed_event():
    r, s = TcpReassembler(), Streams()
    handshake(r, s)
    (e,) = r.feed(a2b(1001, b"x" * 10, ack=5001, ts=7, flags=ACK | PSH))
    ref = StreamData(e.conn, 0, 0, b"x" * 10, 7)
    assert e == ref and repr(e) == repr(ref) and hash(e) == hash(ref)


def test_unknown_flow_bare_segments_are_ignored():
    r = TcpReassembler()
    for seg in (a2b(1, flags=ACK), a2b(1, flags=FIN | ACK), a2b(1, flags=RST), b2a(1)):
        assert r.feed(seg) == []
    assert r.open_connections == 0
    assert r.stats.segments_ignored == 4 and r.stats.connections_opened == 0


def test_mid_stream_start():
    r, s = TcpReassembler(), Streams()
    # first segment seen is from B (the broker): B becomes endpoint A
    s.feed(r, b2a(777, b"resp", ack=4242, ts=5))
    conn = s.conns[0]
    assert not conn.handshake_seen
    assert (conn.a_ip, conn.a_port) == (B_IP, B_PORT)
    # ACKs for the other direction before it started are ignored (no gap)
    s.feed(r, b2a(781, b"more", ack=999_999, ts=6))
    assert s.gap_list(0, 1) == []
    s.feed(r, a2b(90000, b"req", ack=785, ts=7), a2b(90003, b"uest", ack=785, ts=8))
    assert s.bytes(0, 0) == b"respmore" and s.bytes(0, 1) == b"request"
    assert [(e.direction, e.offset) for e in s.events] == [(0, 0), (0, 4), (1, 0), (1, 3)]


def test_synack_first_makes_its_receiver_endpoint_a():
    r, s = TcpReassembler(), Streams()
    s.feed(r, b2a(5000, flags=SYN | ACK, ack=1001),
           a2b(1001, b"req", ack=5001), b2a(5001, b"resp", ack=1004))
    conn = s.conns[0]
    assert (conn.a_ip, conn.a_port) == (A_IP, A_PORT) and not conn.handshake_seen
    assert s.bytes(0, 0) == b"req" and s.bytes(0, 1) == b"resp"
    # the late SYN with the matching ISN belongs to the same connection
    s.feed(r, a2b(1000, flags=SYN))
    assert r.open_connections == 1 and conn.handshake_seen and s.closed == {}


def test_data_on_syn_is_delivered():
    r, s = TcpReassembler(), Streams()
    s.feed(r, a2b(100, b"tfo", flags=SYN), b2a(900, flags=SYN | ACK, ack=104),
           a2b(104, b"next", ack=901))
    assert s.bytes() == b"tfonext"
    assert s.events[0].offset == 0


# ---------------------------------------------------------------------------- ordering


def _segments(isn=1000, sizes=(3, 1, 4, 1, 5)):
    segs, off = [], 0
    for i, n in enumerate(sizes):
        payload = bytes((off + k) % 251 for k in range(n))
        segs.append((off, payload, a2b(isn + 1 + off, payload, ts=100 + i)))
        off += n
    return segs, off


@pytest.mark.parametrize("perm", list(itertools.permutations(range(5))))
def test_out_of_order_every_permutation(perm):
    segs, total = _segments()
    r, s = TcpReassembler(), Streams()
    handshake(r, s)
    for i in perm:
        s.feed(r, segs[i][2])
    assert s.bytes() == bytes(k % 251 for k in range(total))
    assert s.gap_list() == []
    # each delivered chunk keeps the timestamp of the segment that carried it
    by_off = {off: seg.ts_ns for off, _, seg in segs}
    for ev in s.events:
        assert ev.ts_ns == by_off[ev.offset]
    assert r.stats.retransmitted_bytes == 0 and r.stats.gaps == 0


def test_out_of_order_buffered_until_hole_filled():
    r, s = TcpReassembler(), Streams()
    handshake(r, s)
    assert s.feed(r, a2b(1006, b"world", ts=20)) == []
    ev = s.feed(r, a2b(1001, b"hello", ts=30))
    assert [(e.offset, e.data, e.ts_ns) for e in ev] == [(0, b"hello", 30), (5, b"world", 20)]


def test_same_stream_byte_by_byte():
    data = b"The quick brown fox jumps over the lazy dog" * 3
    r1, s1 = TcpReassembler(), Streams()
    handshake(r1, s1)
    s1.feed(r1, a2b(1001, data))
    r2, s2 = TcpReassembler(), Streams()
    handshake(r2, s2)
    for i in range(len(data)):
        s2.feed(r2, a2b(1001 + i, data[i:i + 1], ts=i))
    assert s1.bytes() == s2.bytes() == data
    assert len(s2.events) == len(data)
    # byte by byte, in reverse order (everything buffered, delivered at the end)
    r3, s3 = TcpReassembler(), Streams()
    handshake(r3, s3)
    for i in reversed(range(len(data))):
        s3.feed(r3, a2b(1001 + i, data[i:i + 1], ts=i))
    assert s3.bytes() == data


# ---------------------------------------------------------------------------- retransmissions


def test_identical_retransmission_of_delivered_data():
    r, s = TcpReassembler(), Streams()
    handshake(r, s)
    s.feed(r, a2b(1001, b"hello"), a2b(1006, b"world"))
    assert s.feed(r, a2b(1001, b"hello"), a2b(1006, b"world")) == []
    assert s.bytes() == b"helloworld"
    conn = s.conns[0]
    assert conn.retransmitted_bytes == [10, 0] and conn.overlap_conflicts == 0
    assert r.stats.retransmitted_segments == 2 and r.stats.retransmitted_bytes == 10
    assert conn.bytes == [10, 0]


def test_identical_retransmission_of_buffered_data():
    r, s = TcpReassembler(), Streams()
    handshake(r, s)
    s.feed(r, a2b(1006, b"world"), a2b(1006, b"world"))
    s.feed(r, a2b(1001, b"hello"))
    assert s.bytes() == b"helloworld"
    assert r.stats.retransmitted_bytes == 5 and r.stats.overlap_conflicts == 0


def test_overlap_conflict_with_delivered_data_first_copy_wins():
    r, s = TcpReassembler(), Streams()
    handshake(r, s)
    s.feed(r, a2b(1001, b"hello"))
    s.feed(r, a2b(1001, b"HELLO world"))
    assert s.bytes() == b"hello world"
    conn = s.conns[0]
    assert conn.overlap_conflicts == 1 and r.stats.overlap_conflicts == 1
    assert conn.retransmitted_bytes == [5, 0]


def test_overlap_conflict_with_buffered_data_first_copy_wins():
    r, s = TcpReassembler(), Streams()
    handshake(r, s)
    s.feed(r, a2b(1006, b"world"))
    s.feed(r, a2b(1004, b"XXWORLD!"))   # overlaps "world" with different bytes
    s.feed(r, a2b(1001, b"hel"))
    assert s.bytes() == b"helXXworld!"
    assert r.stats.overlap_conflicts == 1 and s.conns[0].overlap_conflicts == 1
    assert r.stats.retransmitted_bytes == 5


def test_overlap_spanning_several_buffered_segments():
    r, s = TcpReassembler(), Streams()
    handshake(r, s)
    s.feed(r, a2b(1003, b"cd"), a2b(1007, b"gh"))
    s.feed(r, a2b(1002, b"bcdefghij"))   # fills around both, identical where they overlap
    s.feed(r, a2b(1001, b"a"))
    assert s.bytes() == b"abcdefghij"
    assert r.stats.retransmitted_bytes == 4 and r.stats.overlap_conflicts == 0


def test_old_retransmission_beyond_history_counted_not_compared():
    r, s = TcpReassembler(max_history_bytes=8), Streams()
    handshake(r, s)
    for i in range(4):
        s.feed(r, a2b(1001 + 4 * i, b"%04d" % i))
    # offset 0..3 fell out of the 8-byte history: a different copy is not a conflict
    s.feed(r, a2b(1001, b"XXXX"))
    assert r.stats.overlap_conflicts == 0 and r.stats.retransmitted_bytes == 4
    # offset 12..15 is still in the history
    s.feed(r, a2b(1013, b"XXXX"))
    assert r.stats.overlap_conflicts == 1 and r.stats.retransmitted_bytes == 8
    assert s.bytes() == b"0000000100020003"


def test_partial_overlap_delivers_only_new_tail():
    r, s = TcpReassembler(), Streams()
    handshake(r, s)
    s.feed(r, a2b(1001, b"hello"))
    ev = s.feed(r, a2b(1004, b"lo world", ts=9))
    assert [(e.offset, e.data, e.ts_ns) for e in ev] == [(5, b" world", 9)]
    assert s.bytes() == b"hello world"
    assert s.conns[0].retransmitted_bytes == [2, 0] and r.stats.overlap_conflicts == 0


# ---------------------------------------------------------------------------- wrap-around


@pytest.mark.parametrize("isn", [2**32 - 1, 2**32 - 2, 2**32 - 6, 2**32 - 11, 0])
def test_sequence_wrap_around(isn):
    data = bytes(range(40))
    r, s = TcpReassembler(), Streams()
    handshake(r, s, isn_a=isn, isn_b=(isn + 7) & MASK)
    chunks = [data[i:i + 4] for i in range(0, 40, 4)]
    order = [1, 0, 3, 2, 5, 4, 6, 9, 8, 7]
    for i in order:
        s.feed(r, a2b(isn + 1 + 4 * i, chunks[i]))
    assert s.bytes() == data
    # ACK numbers across the wrap do not invent gaps
    s.feed(r, b2a(isn + 8, ack=isn + 1 + 40))
    assert s.gap_list() == []
    # a lost segment across the wrap is found by the peer's ACK with the right offset
    s.feed(r, a2b(isn + 1 + 50, b"z" * 5), b2a(isn + 8, ack=isn + 1 + 55))
    assert s.gap_list() == [(40, 10, "lost")]
    assert s.bytes() == data + b"z" * 5


def test_long_stream_offsets_exceed_32_bits():
    r, s = TcpReassembler(max_history_bytes=0), Streams()
    handshake(r, s, isn_a=2**32 - 100)
    chunk = b"\0" * 60000
    seq = 2**32 - 99
    total = 0
    for _ in range(80_000):   # 4.8 GB of offsets in ~80k segments, no copying
        r.feed(a2b(seq, chunk))
        seq += len(chunk)
        total += len(chunk)
    (e,) = r.feed(a2b(seq, b"end"))
    assert e.offset == total > 2**32


# ---------------------------------------------------------------------------- FIN / RST


def test_fin_both_directions_closes_and_removes():
    r, s = TcpReassembler(), Streams()
    handshake(r, s)
    s.feed(r, a2b(1001, b"req", ack=5001), b2a(5001, b"resp", ack=1004))
    s.feed(r, a2b(1004, flags=FIN | ACK, ack=5005, ts=50))
    assert s.closed == {}
    # data after A's FIN is ignored and counted
    ignored = r.stats.segments_ignored
    s.feed(r, a2b(1005, b"late"))
    assert r.stats.segments_ignored == ignored + 1 and s.bytes(0, 0) == b"req"
    # B may still send (half-close), then FIN
    s.feed(r, b2a(5005, b"bye", ack=1005))
    ev = s.feed(r, b2a(5008, flags=FIN | ACK, ack=1005, ts=60))
    assert isinstance(ev[-1], StreamClosed) and ev[-1].reason == "fin" and ev[-1].ts_ns == 60
    conn = s.conns[0]
    assert conn.closed == "fin" and r.open_connections == 0
    assert s.bytes(0, 1) == b"respbye" and s.gap_list(0, 0) == s.gap_list(0, 1) == []
    assert r.stats.connections_closed == 1
    # the last ACK and a retransmission are trailing segments: ignored, no new connection
    ignored = r.stats.segments_ignored
    assert r.feed(a2b(1005, flags=ACK, ack=5012)) == []
    assert r.feed(b2a(5005, b"bye", ack=1005)) == []
    assert r.stats.segments_ignored == ignored + 2 and r.stats.connections_opened == 1


def test_fin_with_payload_and_ack_of_fin_is_not_a_gap():
    r, s = TcpReassembler(), Streams()
    handshake(r, s)
    s.feed(r, a2b(1001, b"last", flags=FIN | ACK | PSH, ack=5001))
    s.feed(r, b2a(5001, flags=ACK, ack=1006))     # ACKs data and the FIN
    assert s.gap_list() == []
    s.feed(r, b2a(5001, flags=FIN | ACK, ack=1006))
    assert s.closed == {0: "fin"} and s.bytes() == b"last"


def test_ack_of_unseen_fin_is_not_a_gap():
    r, s = TcpReassembler(), Streams()
    handshake(r, s)
    s.feed(r, a2b(1001, b"data", ack=5001))
    s.feed(r, b2a(5001, ack=1006))      # acks a FIN at 1005 that the capture missed
    assert s.gap_list() == []


def test_fin_with_hole_closes_with_close_gap():
    r, s = TcpReassembler(), Streams()
    handshake(r, s)
    s.feed(r, a2b(1001, b"ab"), a2b(1006, b"fg"), a2b(1008, flags=FIN | ACK))
    s.feed(r, b2a(5001, flags=FIN | ACK, ts=70))   # no ACK of A's data: hole stays open
    assert s.gap_list() == [(2, 3, "close")]
    assert s.bytes() == b"abfg" and s.closed == {0: "fin"}
    assert s.conns[0].gap_bytes == [3, 0]


def test_missing_bytes_before_fin_reported_at_close():
    r, s = TcpReassembler(), Streams()
    handshake(r, s)
    s.feed(r, a2b(1001, b"ab"), a2b(1010, flags=FIN | ACK), b2a(5001, flags=FIN | ACK))
    assert s.gap_list() == [(2, 7, "close")]


def test_buffered_data_beyond_a_later_fin_is_dropped():
    r, s = TcpReassembler(), Streams()
    handshake(r, s)
    s.feed(r, a2b(1004, b"defgh"), a2b(1020, b"zz"))     # buffered out of order
    s.feed(r, a2b(1007, flags=FIN | ACK))                 # FIN at offset 6: "gh", "zz" after it
    assert r.stats.segments_ignored == 1
    s.feed(r, a2b(1001, b"abc"))
    s.add(r.flush())
    assert s.bytes() == b"abcdef" and s.gap_list() == []
    assert s.conns[0].bytes == [6, 0]


def test_rst_closes_and_drains():
    r, s = TcpReassembler(), Streams()
    handshake(r, s)
    s.feed(r, a2b(1001, b"ab"), a2b(1005, b"ef"))
    ev = s.feed(r, b2a(5001, flags=RST, ts=99))
    assert [type(e) for e in ev] == [StreamGap, StreamData, StreamClosed]
    assert s.gap_list() == [(2, 2, "close")] and s.bytes() == b"abef"
    assert ev[-1].reason == "rst" and ev[-1].ts_ns == 99 and r.open_connections == 0
    # trailing data after the RST: ignored
    assert r.feed(a2b(1007, b"more")) == []
    assert r.stats.segments_ignored == 1


def test_trailing_data_after_close_then_new_connection_after_linger():
    r, s = TcpReassembler(closed_linger_ns=1000), Streams()
    handshake(r, s)
    s.feed(r, a2b(1001, flags=RST, ts=10))
    assert s.feed(r, a2b(1001, b"late", ts=500)) == []
    # after the linger time the flow is forgotten: data opens a mid-stream connection
    ev = s.feed(r, a2b(70000, b"new", ts=5000))
    assert ev[0].conn.conn_id == 1 and not ev[0].conn.handshake_seen


def test_tombstones_answer_both_endpoints_and_are_bounded():
    r, s = TcpReassembler(max_connections=2), Streams()
    for i, port in enumerate((50001, 50002, 50003)):
        s.feed(r, a2b(1000, flags=SYN, port=port), b2a(5000, flags=SYN | ACK, ack=1001,
                                                         port=port))
        s.feed(r, a2b(1001, b"x", port=port), a2b(1002, flags=RST, ts=10 + i, port=port))
    assert s.closed == {0: "rst", 1: "rst", 2: "rst"}
    # the broker's trailing data on the last two flows: ignored, as is the client's
    assert s.feed(r, b2a(5001, b"late", port=50003), b2a(5001, b"late", port=50002),
                  a2b(1002, b"late", port=50003)) == []
    assert r.stats.segments_ignored == 3
    # only max_connections tombstones are kept: the oldest flow opens a mid-stream connection
    ev = s.feed(r, b2a(5001, b"late", port=50001))
    assert ev[0].conn.conn_id == 3 and not ev[0].conn.handshake_seen
    assert (ev[0].conn.a_port, ev[0].conn.b_port) == (B_PORT, 50001)


# ---------------------------------------------------------------------------- port reuse


def test_port_reuse_new_syn_different_isn_on_open_connection():
    r, s = TcpReassembler(), Streams()
    handshake(r, s)
    s.feed(r, a2b(1001, b"old"), a2b(1010, b"buffered"))
    ev = s.feed(r, a2b(300000, flags=SYN, ts=40))
    assert [type(e) for e in ev] == [StreamGap, StreamData, StreamClosed]
    assert ev[-1].reason == "port_reuse" and s.conns[0].closed == "port_reuse"
    s.feed(r, b2a(7000, flags=SYN | ACK, ack=300001), a2b(300001, b"new", ack=7001))
    assert s.bytes(1, 0) == b"new" and s.conns[1].handshake_seen
    assert r.open_connections == 1 and r.stats.connections_opened == 2


def test_retransmitted_syn_same_isn_is_same_connection():
    r, s = TcpReassembler(), Streams()
    s.feed(r, a2b(1000, flags=SYN), a2b(1000, flags=SYN))
    handshake(r, s)
    s.feed(r, a2b(1001, b"x"))
    assert r.stats.connections_opened == 1 and s.closed == {}
    assert r.stats.retransmitted_segments == 2     # two SYN copies after the first


def test_port_reuse_after_close_and_after_half_close():
    r, s = TcpReassembler(), Streams()
    handshake(r, s)
    s.feed(r, a2b(1001, flags=FIN | ACK), b2a(5001, flags=FIN | ACK, ack=1002))
    assert s.closed == {0: "fin"}
    # new SYN on the closed flow (tombstone): a new connection, no second close for conn 0
    handshake(r, s, isn_a=20000, isn_b=30000)
    s.feed(r, a2b(20001, b"second"))
    assert s.bytes(1, 0) == b"second" and s.conns[1].conn_id == 1
    # half-closed then SYN (even with the same ISN): port reuse
    s.feed(r, a2b(20007, flags=FIN | ACK))
    s.feed(r, a2b(20000, flags=SYN))
    assert s.closed[1] == "port_reuse" and r.open_connections == 1
    assert r.stats.connections_opened == 3


# ---------------------------------------------------------------------------- gaps


def test_lost_segment_gap_exact_at_flush():
    r, s = TcpReassembler(), Streams()
    handshake(r, s)
    s.feed(r, a2b(1001, b"0123"), a2b(1011, b"abc"), a2b(1020, b"xyz", ts=5))
    ev = s.add(r.flush(ts_ns=1234))
    assert s.gap_list() == [(4, 6, "close"), (13, 6, "close")]
    assert s.bytes() == b"0123abcxyz"
    assert ev[-1] == StreamClosed(s.conns[0], 1234, "end_of_capture")
    gap_ts = [e.ts_ns for e in ev if isinstance(e, StreamGap)]
    assert gap_ts == [1234, 1234]
    assert s.conns[0].gap_bytes == [12, 0] and r.stats.gap_bytes == 12 and r.stats.gaps == 2
    assert r.open_connections == 0


def test_ack_based_gap_detection():
    r, s = TcpReassembler(), Streams()
    handshake(r, s)
    s.feed(r, a2b(1001, b"0123"))
    s.feed(r, a2b(1011, b"abc"))               # 1005..1010 never captured
    ev = s.feed(r, b2a(5001, ack=1014, ts=77))  # B got everything up to 1014
    assert [(type(e), e.offset) for e in ev] == [(StreamGap, 4), (StreamData, 10)]
    assert ev[0].length == 6 and ev[0].reason == "lost" and ev[0].ts_ns == 77
    # the lost bytes arrive late: counted as retransmitted, not delivered again
    assert s.feed(r, a2b(1005, b"456789")) == []
    assert r.stats.retransmitted_bytes == 6
    # ACK beyond everything we have: gap up to the ACK at once
    ev = s.feed(r, b2a(5001, ack=1030))
    assert s.gap_list()[-1] == (13, 16, "lost")
    # then data after it flows again
    s.feed(r, a2b(1030, b"ok"))
    assert s.bytes() == b"0123abcok"


def test_ack_declares_every_hole_below_it():
    r, s = TcpReassembler(), Streams()
    handshake(r, s)
    s.feed(r, a2b(1003, b"cd"), a2b(1007, b"gh"))
    s.feed(r, b2a(5001, ack=1011))
    assert s.gap_list() == [(0, 2, "lost"), (4, 2, "lost"), (8, 2, "lost")]
    assert s.bytes() == b"cdgh"


def test_ack_counts_only_for_the_opposite_direction():
    r, s = TcpReassembler(), Streams()
    handshake(r, s)
    s.feed(r, a2b(1001, b"abc", ack=5001))
    # A's ACK field far beyond A's own data must not create a gap in direction 0
    s.feed(r, a2b(1004, b"def", ack=5001 + 500))
    assert s.gap_list(0, 0) == []
    # ...it is about B's data: B's direction gets the gap
    assert s.gap_list(0, 1) == [(0, 500, "lost")]
    # the SYN's ACK field (no ACK flag) is ignored
    r2, s2 = TcpReassembler(), Streams()
    s2.feed(r2, a2b(1000, flags=SYN, ack=123456), b2a(5000, flags=SYN | ACK, ack=1001))
    assert s2.events == []


def test_ooo_overflow_by_segments():
    r, s = TcpReassembler(max_ooo_segments=3), Streams()
    handshake(r, s)
    s.feed(r, a2b(1001, b"a"))
    for i in range(3):
        assert s.feed(r, a2b(1003 + 2 * i, b"x")) == []
    ev = s.feed(r, a2b(1009, b"y", ts=8))
    assert ev[0] == StreamGap(s.conns[0], 0, 1, 1, 8, "ooo_overflow")
    assert isinstance(ev[1], StreamData) and ev[1].offset == 2
    assert r.stats.ooo_overflows == 1
    s.add(r.flush())
    assert s.bytes() == b"axxxy"
    assert [g[:2] for g in s.gap_list()] == [(1, 1), (3, 1), (5, 1), (7, 1)]


def test_ooo_overflow_by_bytes():
    r, s = TcpReassembler(max_ooo_bytes=10), Streams()
    handshake(r, s)
    s.feed(r, a2b(1011, b"0123456789"))
    assert s.events == []
    ev = s.feed(r, a2b(1021, b"A"))
    assert s.gap_list() == [(0, 10, "ooo_overflow")]
    assert s.bytes() == b"0123456789A" and r.stats.ooo_overflows == 1
    # a late copy of the skipped range is retransmitted data
    assert s.feed(r, a2b(1001, b"z" * 10)) == []


def test_snaplen_missing_bytes_in_order_and_out_of_order():
    r, s = TcpReassembler(), Streams()
    handshake(r, s)
    ev = s.feed(r, a2b(1001, b"head", missing=96, ts=3))
    assert [(type(e), e.offset) for e in ev] == [(StreamData, 0), (StreamGap, 4)]
    assert ev[1].length == 96 and ev[1].reason == "snaplen" and ev[1].ts_ns == 3
    # out of order: the truncated segment waits, then data + snaplen gap in order
    s.feed(r, a2b(1201, b"tail"))
    s.feed(r, a2b(1101, b"mid", missing=97))
    assert s.gap_list() == [(4, 96, "snaplen"), (103, 97, "snaplen")]
    assert s.bytes() == b"headmidtail"
    assert s.conns[0].gap_bytes == [193, 0]


def test_snaplen_opens_mid_stream_connection_without_captured_payload():
    r, s = TcpReassembler(), Streams()
    s.feed(r, a2b(1, b"", missing=50), a2b(51, b"x"))
    assert s.gap_list() == [(0, 50, "snaplen")] and s.bytes() == b"x"


# ---------------------------------------------------------------------------- bounds


def test_idle_expiry():
    r, s = TcpReassembler(idle_timeout_ns=100), Streams()
    handshake(r, s, ts=0)
    s.feed(r, a2b(1001, b"a", ts=10), a2b(1003, b"c", ts=20))
    s.feed(r, a2b(9, b"other", ts=150, port=1234))     # second connection, recent
    assert s.add(r.expire(100)) == []
    ev = s.add(r.expire(121))
    assert [type(e) for e in ev] == [StreamGap, StreamData, StreamClosed]
    assert ev[0].reason == "close" and ev[-1].reason == "idle" and ev[-1].ts_ns == 121
    assert s.conns[0].closed == "idle" and r.open_connections == 1
    assert s.add(r.expire(250)) == []
    assert s.add(r.expire(251))[-1].conn.conn_id == 1
    # data after idle expiry starts a new mid-stream connection
    ev = s.feed(r, a2b(1004, b"d", ts=300))
    assert ev[0].conn.conn_id == 2 and ev[0].offset == 0


def test_expire_follows_activity_not_creation():
    r, s = TcpReassembler(idle_timeout_ns=100), Streams()
    s.feed(r, a2b(1, b"x", ts=0, port=1), a2b(1, b"y", ts=10, port=2))
    s.feed(r, a2b(2, b"x", ts=90, port=1))
    ev = s.add(r.expire(120))
    assert [e.conn.a_port for e in ev] == [2]


def test_eviction_least_recently_active():
    r, s = TcpReassembler(max_connections=2), Streams()
    s.feed(r, a2b(1, b"a", ts=1, port=1), a2b(1, b"b", ts=2, port=2))
    s.feed(r, a2b(2, b"a", ts=3, port=1))      # port 1 is now the most recent
    s.feed(r, a2b(5, b"buf", ts=4, port=2))    # port 2 buffers out-of-order data...
    s.feed(r, a2b(2, b"a", ts=5, port=1))      # ...and port 1 stays the most recent (retrans)
    ev = s.feed(r, a2b(1, b"c", ts=6, port=3))
    assert [type(e) for e in ev] == [StreamGap, StreamData, StreamClosed, StreamData]
    assert ev[2].reason == "evicted" and ev[2].conn.a_port == 2
    assert ev[0].reason == "close" and ev[1].data == b"buf"
    assert ev[3].conn.a_port == 3
    assert r.stats.evictions == 1 and r.open_connections == 2
    assert s.conns[1].closed == "evicted"


def test_flush_default_timestamps_and_order():
    r, s = TcpReassembler(), Streams()
    s.feed(r, a2b(1, b"a", ts=5, port=2), a2b(1, b"b", ts=7, port=1))
    s.feed(r, a2b(10, b"z", ts=8, port=2))
    ev = s.add(r.flush())
    closes = [(e.conn.conn_id, e.ts_ns, e.reason) for e in ev if isinstance(e, StreamClosed)]
    assert closes == [(0, 8, "end_of_capture"), (1, 7, "end_of_capture")]
    assert s.gap_list(0, 0) == [(1, 8, "close")]
    assert r.open_connections == 0 and r.flush() == []


def test_stats_as_dict():
    r = TcpReassembler()
    d = r.stats.as_dict()
    assert set(d) >= {"segments", "payload_bytes", "connections_opened", "connections_closed",
                      "retransmitted_segments", "retransmitted_bytes", "overlap_conflicts",
                      "gaps", "gap_bytes", "ooo_overflows", "evictions", "segments_ignored"}
    assert all(v == 0 for v in d.values())


def test_core_imports_no_io_or_ui_modules():
    code = ("import sys, kafkasniff.tcp; "
            "bad = [m for m in ('socket', 'dpkt', 'scapy', 'textual', 'pyarrow', 'pyspark') "
            "if m in sys.modules]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def _state_objects() -> int:
    """Reassembler connection states (``_Conn``, ``_Dir``) alive in this process."""
    return sum(type(o).__name__ in ("_Conn", "_Dir") for o in gc.get_objects())


@pytest.mark.parametrize("how", ["fin", "rst", "idle", "end_of_capture", "port_reuse"])
def test_a_closed_connection_is_freed_without_the_garbage_collector(how, collector_off):
    """A connection's state is freed when it closes, not left as a reference cycle for the
    collector (which would carry it through every generation first)."""
    before = _state_objects()
    r, s = TcpReassembler(), Streams()
    handshake(r, s)
    s.feed(r, a2b(1001, b"req", ack=5001), b2a(5001, b"resp", ack=1004))
    assert _state_objects() == before + 3
    if how == "fin":
        s.feed(r, a2b(1004, flags=FIN | ACK, ack=5005), b2a(5005, flags=FIN | ACK, ack=1005))
    elif how == "rst":
        s.feed(r, a2b(1004, flags=RST))
    elif how == "idle":
        s.add(r.expire(10 ** 15))
    elif how == "end_of_capture":
        s.add(r.flush())
    else:   # a new SYN on the same endpoints: the old connection is closed
        s.feed(r, a2b(90000, flags=SYN, ts=10))
    assert s.closed == {0: how}
    assert _state_objects() == before + (3 if how == "port_reuse" else 0)


def test_feed_returns_a_new_list_each_call():
    """The pipeline hands an empty result on as its own (and may extend it): an empty
    result shared between calls would carry one packet's records into the next."""
    r, s = TcpReassembler(), Streams()
    handshake(r, s)
    first = r.feed(a2b(1001, ack=5001, ts=3))
    second = r.feed(a2b(1001, ack=5001, ts=4))
    assert first == [] and second == [] and first is not second


def test_a_segment_of_another_class_is_read_by_attribute():
    """The compiled fast path reads the slots of exactly TcpSegment at their offsets; an
    instance of another class (here a subclass whose ``payload`` is a property) is read
    through attribute look-up, as in plain Python."""

    class Shouting(TcpSegment):
        __slots__ = ()

        @property
        def payload(self):
            return TcpSegment.payload.__get__(self).upper()

    def shouting(seg: TcpSegment) -> Shouting:
        out = object.__new__(Shouting)
        for name in TcpSegment.__slots__:
            getattr(TcpSegment, name).__set__(out, getattr(seg, name))
        return out

    r, s = TcpReassembler(), Streams()
    s.feed(r, a2b(1000, flags=SYN, ts=1), b2a(5000, flags=SYN | ACK, ack=1001, ts=2),
           a2b(1001, ack=5001, ts=3))
    s.feed(r, shouting(a2b(1001, b"hello", ack=5001, ts=4)), a2b(1006, b"abc", ack=5001, ts=5))
    assert s.bytes(0, 0) == b"HELLOabc"


# ---------------------------------------------------------------------------- many connections


def _open_in_order(r: TcpReassembler) -> list[int]:
    """Connection ids of the open connections, least recently active first, checking the
    reassembler's list of them (each linked both ways, counted)."""
    ids, prev, st = [], None, r._oldest
    while st is not None:
        assert st.older is prev
        ids.append(st.conn.conn_id)
        prev, st = st, st.newer
    assert r._newest is prev and len(ids) == r.open_connections
    return ids


def _history(r: TcpReassembler) -> int:
    total, st = 0, r._oldest
    while st is not None:
        total += sum(ds.hist_bytes for ds in st.dirs)
        st = st.newer
    return total


def test_open_connections_are_ordered_by_activity_and_history_is_summed_as_it_changes():
    """Issue 45, item 4: the open connections' activity order (what eviction and the idle
    timeout follow) and the history total (what the history budget checks once per second
    of capture time: it was a sum over every open connection each time) are kept as
    segments come; here checked against a plain model after every segment of connections
    opened, active in turn, acknowledged, cut by gaps, closed, evicted and expired."""
    import random

    rnd = random.Random(45)
    r, s = TcpReassembler(max_connections=6, max_history_bytes=40,
                          max_history_total_bytes=100), Streams()
    model: list[int] = []          # conn ids, least recently active first
    seqs: dict[int, list[int]] = {}
    port_of: dict[int, int] = {}
    ts = 0
    for step in range(3000):
        ts += 1000
        port = 40000 + rnd.randrange(12)
        cid = next((c for c, p in port_of.items() if p == port and c in model), None)
        if cid is None:
            out = s.feed(r, a2b(1000, flags=SYN, ts=ts, port=port))
            cid = r.stats.connections_opened - 1
            for ev in out:
                if isinstance(ev, StreamClosed) and ev.conn.conn_id in model:
                    model.remove(ev.conn.conn_id)
            model.append(cid)
            port_of[cid] = port
            seqs[cid] = [1001, 5001]
            s.feed(r, b2a(5000, flags=SYN | ACK, ack=1001, ts=ts, port=port))
        else:
            a, b = seqs[cid]
            what = rnd.randrange(10)
            if what < 4:
                n = rnd.randrange(1, 30)
                s.feed(r, a2b(a, b"x" * n, ack=b, ts=ts, port=port))
                seqs[cid][0] += n
            elif what < 7:
                n = rnd.randrange(1, 30)
                behind = rnd.randrange(2) * rnd.randrange(a - 1000 + 1)    # ACKs all or less
                s.feed(r, b2a(b, b"y" * n, ack=a - behind, ts=ts, port=port))
                seqs[cid][1] += n
            elif what == 7:            # a hole: bytes lost, declared by the peer's ACK
                s.feed(r, a2b(a + 5, b"z", ack=b, ts=ts, port=port))
                s.feed(r, b2a(b, ack=a + 6, ts=ts, port=port))
                seqs[cid][0] += 6
            elif what == 8:
                s.feed(r, a2b(a, flags=FIN | ACK, ack=b, ts=ts, port=port),
                       b2a(b, flags=FIN | ACK, ack=a + 1, ts=ts, port=port))
                model.remove(cid)
                port_of.pop(cid)
            else:
                s.feed(r, a2b(a, flags=RST, ts=ts, port=port))
                model.remove(cid)
                port_of.pop(cid)
            if cid in model:
                model.remove(cid)
                model.append(cid)
        if step % 500 == 499:
            for ev in s.add(r.expire(ts - 3000 + r.idle_timeout_ns)):
                if isinstance(ev, StreamClosed):
                    model.remove(ev.conn.conn_id)
        assert _open_in_order(r) == model, step
        assert r.history_bytes() == _history(r), step
    assert r.stats.evictions > 100 and r.history_bytes() <= 100 + 2 * 40 * 6
    s.add(r.flush())
    assert r.open_connections == 0 and r._oldest is None and r.history_bytes() == 0
