"""The shared-memory channel between the capture process and a decoder."""

from __future__ import annotations

import multiprocessing as mp
import os
import struct

from kafkasniff.parallel.shm import EMPTY, Channel


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
