"""The live engine's parts: flow partitioning, the shared-memory channel, batching and
queue-drop accounting (no capture permission needed)."""

from __future__ import annotations

import multiprocessing as mp
import os
import random
import struct

from kafkasniff.live.collector import merge_stats
from kafkasniff.live.config import C_DISPATCHED, C_PACKETS, C_QUEUE_DROPS, N_COUNTERS, LiveConfig
from kafkasniff.live.dispatch import Dispatcher, flow_hash, ip_offset, partition
from kafkasniff.live.shm import EMPTY, Channel

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


def test_channel_round_trip_wrap_and_full():
    ch = Channel(4096 * 4)
    assert ch.get(0) is EMPTY
    batches = [os.urandom(n) for n in (1000, 5000, 3000, 7000, 6000, 2000)]
    got = []
    for i, data in enumerate(batches):
        assert ch.put(data, i)
        got.append(ch.get(0))
    assert got == [(d, i) for i, d in enumerate(batches)]
    # fill without consuming: refused once full, accepted again after a get
    n = 0
    while ch.put(b"x" * 3000, 1):
        n += 1
    assert 4 <= n <= 5 and ch.backlog_bytes() <= ch.capacity   # batches never straddle the end
    assert ch.get(0) == (b"x" * 3000, 1)
    assert ch.put(b"y" * 3000, 1)
    assert not ch.put(b"z" * (ch.capacity + 1), 1)
    for _ in range(n):
        assert ch.get(0)[1] == 1
    assert ch.get(0) is EMPTY
    ch.close_producer()
    assert ch.get(0) is None


def _consume(ch, out):
    total = 0
    while True:
        m = ch.get(1.0)
        if m is None:
            break
        if m:
            total += m[1]
            out.put(struct.unpack_from("<Q", m[0])[0])
    out.put(("total", total))


def test_channel_between_processes():
    ctx = mp.get_context("fork")
    ch = Channel(1 << 16)
    out = ctx.Queue()
    p = ctx.Process(target=_consume, args=(ch, out))
    p.start()
    for i in range(2000):
        assert ch.put(struct.pack("<Q", i) + bytes(i % 3000), 1, block=True)
    ch.close_producer()
    seen = [out.get(timeout=10) for _ in range(2001)]
    p.join(10)
    assert seen[:-1] == list(range(2000))
    assert seen[-1] == ("total", 2000)


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
    # the batch format: <kind, link type, flags>, then <ts, caplen, orig_len, link_type> +
    # bytes per packet
    batch, count = take.batches[0]
    assert count == sent[0]
    assert struct.unpack_from("<HHI", batch) == (1, 0, 0)
    ts, cap, orig, lt = struct.unpack_from("<qIIi", batch, 8)
    assert lt == 1 and cap == orig and ts > 0


def test_merge_stats():
    a = {"packets": 3, "exchanges": {"paired": 2}, "issues": {"x": 1}, "first_ts_ns": 5,
         "last_ts_ns": 9, "skipped": {}}
    c = {"packets": 4, "exchanges": {"paired": 1, "unanswered": 1}, "issues": {},
         "first_ts_ns": 2, "last_ts_ns": 7, "skipped": {"non_tcp": 1}}
    m = merge_stats([a, {}, c])
    assert m["packets"] == 7 and m["exchanges"] == {"paired": 3, "unanswered": 1}
    assert m["first_ts_ns"] == 2 and m["last_ts_ns"] == 9 and m["skipped"] == {"non_tcp": 1}


def _echo(inq, outq, n):
    for _ in range(n):
        outq.put(inq.get(timeout=10))


def test_messages_are_frozen_and_cross_processes():
    """Every inter-process message is a frozen, slotted dataclass that a multiprocessing
    queue carries unchanged (pickled both ways through a child process)."""
    import dataclasses

    import pytest

    from kafkasniff.live import messages

    samples = [
        messages.DecoderOutput(1, [("e", "line")], [("id", "orders", 5)], [("c", None)],
                               {"packets": 3}),
        messages.DetailReply(7, None), messages.DecoderFed(2),
        messages.KeptExchanges(0, []), messages.DecoderDone(1, {"packets": 3}),
        messages.DecoderFailed(0, "ValueError: x", "Traceback ..."),
        messages.TopicIdsLearned([("id", "orders", 5)]), messages.AllFed(),
        messages.DetailRequest(7, (1_000_000_001, 4, 123)),
        messages.CaptureFailed("OSError: y", "Traceback ..."), messages.CaptureIssues([]),
    ]
    assert {type(m).__name__ for m in samples} == set(messages.__all__)
    for msg in samples:
        assert not hasattr(msg, "__dict__")
        if dataclasses.fields(msg):
            with pytest.raises(dataclasses.FrozenInstanceError):
                setattr(msg, dataclasses.fields(msg)[0].name, None)
    ctx = mp.get_context("fork")
    inq, outq = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=_echo, args=(inq, outq, len(samples)))
    p.start()
    for msg in samples:
        inq.put(msg)
    back = [outq.get(timeout=10) for _ in samples]
    p.join(10)
    assert [type(m) for m in back] == [type(m) for m in samples] and back == samples
