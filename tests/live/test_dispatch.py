"""Routing packets to decoders by connection: the symmetric flow hash, link offsets, the
dispatcher."""

from __future__ import annotations

import random
import struct

from kafkasniff.capture.flows import flow_hash, ip_offset, partition
from kafkasniff.capture.pcapfile import packed_records
from kafkasniff.live.config import C_DISPATCHED, C_PACKETS, C_QUEUE_DROPS, N_COUNTERS, LiveConfig
from kafkasniff.live.dispatch import Dispatcher
from tests.capture import builders as b


def _frame(src, sport, dst, dport):
    return b.ether(b.ipv4(src, dst, b.tcp_header(sport=sport, dport=dport)))


def test_flow_hash_is_symmetric_ipv4_and_ipv6():
    rnd = random.Random(1)
    for _ in range(200):
        a = bytes(rnd.randrange(256) for _ in range(4))
        c = bytes(rnd.randrange(256) for _ in range(4))
        p, q = rnd.randrange(1, 65536), rnd.randrange(1, 65536)
        f1, f2 = _frame(a, p, c, q), _frame(c, q, a, p)
        assert flow_hash(f1, ip_offset(1, f1)) == flow_hash(f2, ip_offset(1, f2))
    a6, c6 = bytes(15) + b"\x01", bytes(range(16))
    f1 = b.ether(b.ipv6(a6, c6, b.tcp_header(sport=1234, dport=9092)), ethertype=0x86DD)
    f2 = b.ether(b.ipv6(c6, a6, b.tcp_header(sport=9092, dport=1234)), ethertype=0x86DD)
    assert flow_hash(f1, 14) == flow_hash(f2, 14)


def test_partition_spreads_loopback_connections():
    """All on 127.0.0.1 (the worst case): connections still spread over the decoders."""
    lo = bytes([127, 0, 0, 1])
    seen = [0, 0, 0]
    for port in range(40000, 40300):
        seen[partition(1, _frame(lo, port, lo, 9092), 3)] += 1
    assert min(seen) > 50


def test_ip_offset_per_link_type():
    f = _frame(bytes(4), 1, bytes(4), 2)
    assert ip_offset(1, f) == 14
    assert ip_offset(1, b"\x00" * 12 + b"\x81\x00\x00\x01\x08\x00" + bytes(40)) == 18
    assert ip_offset(276, b"") == 20 and ip_offset(113, b"") == 16
    assert ip_offset(101, b"") == 0 and ip_offset(0, b"") == 4
    assert ip_offset(1, b"\x00" * 12 + b"\x08\x06" + bytes(40)) == -1   # ARP
    assert partition(1, b"\x00" * 12 + b"\x08\x06" + bytes(40), 4) == 0


class _Refuse:
    def put(self, batch, count, block=False, head=b""):
        return False


class _Take:
    def __init__(self):
        self.batches = []

    def put(self, batch, count, block=False, head=b""):
        self.batches.append((bytes(head) + bytes(batch), count))
        return True


def test_dispatcher_counts_queue_drops():
    counters = [0] * N_COUNTERS
    take, refuse = _Take(), _Refuse()
    d = Dispatcher([take, refuse], counters, LiveConfig(workers=2, batch_bytes=1 << 20))
    add = d.adder(1)
    lo = bytes([127, 0, 0, 1])
    sent = [0, 0]
    for port in range(30000, 30200):
        f = _frame(lo, port, lo, 9092)
        sent[partition(1, f, 2)] += 1
        add(1_700_000_000_000_000_000 + port, memoryview(f), len(f))
    d.flush_all()
    assert counters[C_PACKETS] == 200
    assert counters[C_DISPATCHED] == sent[0]
    assert counters[C_QUEUE_DROPS] == sent[1]
    # the batch format: <kind, link type, flags>, then <ts, caplen, orig_len, link_type,
    # index 0> + bytes per packet, what the decoders read with packed_records
    batch, count = take.batches[0]
    assert count == sent[0]
    assert struct.unpack_from("<HHI", batch) == (1, 0, 0)
    ts, cap, orig, lt, idx = struct.unpack_from("<qIIiQ", batch, 8)
    assert lt == 1 and cap == orig and ts > 0 and idx == 0
    got = [(kind, idx, pkt.data) for kind, idx, pkt in packed_records(batch, 8)]
    assert len(got) == count
    assert all(kind == 1 and idx == 0 and partition(1, data, 2) == 0 for kind, idx, data in got)
