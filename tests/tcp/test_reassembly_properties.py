"""Property tests of TCP reassembly: random streams, segmentations, reorderings,
duplicates, drops and ISNs (including near 2**32)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkasniff.capture.types import ACK, FIN, PSH, SYN, TcpSegment
from kafkasniff.tcp import StreamClosed, StreamData, TcpReassembler

from .test_reassembly import A_IP, A_PORT, B_IP, B_PORT, MASK, Streams

ISNS = st.one_of(
    st.sampled_from([0, 1, 2**31 - 1, 2**31, 2**32 - 1, 2**32 - 2, 2**32 - 50, 2**32 - 700]),
    st.integers(0, 2**32 - 1),
)


def _merge(ranges):
    out = []
    for s, e in sorted(ranges):
        if s >= e:
            continue
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [tuple(x) for x in out]


def _complement(covered, total):
    gaps, pos = [], 0
    for s, e in covered:
        if s > pos:
            gaps.append((pos, s))
        pos = max(pos, e)
    if pos < total:
        gaps.append((pos, total))
    return gaps


def _direction_items(rnd, d, data, *, drop_p, dup_p, window, corrupt_p, same_bounds):
    """Wire items of one direction: (d, start, end, payload | None for FIN, dropped).

    A duplicate has its own boundaries (it may cover neighbours) unless ``same_bounds``.
    """
    n = len(data)
    cuts = sorted(rnd.sample(range(1, n), rnd.randint(0, min(n - 1, 40)))) if n > 1 else []
    bounds = [0, *cuts, n] if n else [0]
    items = []
    for s, e in zip(bounds, bounds[1:]):
        dropped = rnd.random() < drop_p
        items.append((d, s, e, data[s:e], dropped))
        if not dropped and rnd.random() < dup_p:
            # a retransmission with its own boundaries, possibly repackaged or different
            rs, re_ = s, e
            if not same_bounds:
                rs = rnd.randint(max(0, s - 8), s)
                re_ = rnd.randint(e, min(n, e + 8))
            payload = data[rs:re_]
            if rnd.random() < corrupt_p:
                payload = bytes(b ^ 0xFF for b in payload)
            items.append((d, rs, re_, payload, False))
    items.append((d, n, n, None, False))      # FIN, never dropped
    # reorder within a window: sort by position + jitter
    keyed = [(i + rnd.uniform(0, window), i, it) for i, it in enumerate(items)]
    return [it for _, _, it in sorted(keyed)]


def _run(seed, data_a, data_b, isn_a, isn_b, *, drop_p=0.0, dup_p=0.0, window=1,
         corrupt_p=0.0, acks=False, b_fin_last=True):
    rnd = random.Random(seed)
    # With ACKs and drops, a duplicate covering a dropped neighbour may legitimately come
    # after the ACK that declared that neighbour lost (then it is not delivered): keep
    # duplicates on their original boundaries there so the expected output stays simple.
    same_bounds = acks and drop_p > 0
    wires = [
        _direction_items(rnd, 0, data_a, drop_p=drop_p, dup_p=dup_p, window=window,
                         corrupt_p=corrupt_p, same_bounds=same_bounds),
        _direction_items(rnd, 1, data_b, drop_p=drop_p, dup_p=dup_p, window=window,
                         corrupt_p=corrupt_p, same_bounds=same_bounds),
    ]
    b_fin = wires[1].pop(next(i for i, it in enumerate(wires[1]) if it[3] is None))
    # interleave the two directions randomly, keeping each direction's order
    order = [0] * len(wires[0]) + [1] * len(wires[1])
    rnd.shuffle(order)
    its = [iter(wires[0]), iter(wires[1])]
    merged = [next(its[d]) for d in order]
    if b_fin_last:
        merged.append(b_fin)

    isn = (isn_a, isn_b)
    peer = {(A_IP, A_PORT): (B_IP, B_PORT), (B_IP, B_PORT): (A_IP, A_PORT)}
    ends = [(A_IP, A_PORT), (B_IP, B_PORT)]
    received: list[list[tuple[int, int]]] = [[], []]   # what each receiver got (wire)
    fin_passed = [False, False]
    lens = (len(data_a), len(data_b))
    first_copy: list[dict[int, int]] = [{}, {}]
    fed_bytes = [0, 0]

    def ack_for(d):   # ACK number that the receiver of direction d sends
        if not acks:
            return (isn[d] + 1) & MASK
        pos = 0
        for s, e in _merge(received[d]):
            if s > pos:
                break
            pos = max(pos, e)
        if pos == lens[d] and fin_passed[d]:
            pos += 1
        return (isn[d] + 1 + pos) & MASK

    def seg(d, start, payload, flags, ts):
        src, dst = ends[d], peer[ends[d]]
        return TcpSegment(ts, src[0], src[1], dst[0], dst[1], (isn[d] + 1 + start) & MASK,
                          ack_for(1 - d), flags, payload)

    r, s = TcpReassembler(), Streams()
    s.feed(r, TcpSegment(0, A_IP, A_PORT, B_IP, B_PORT, isn_a, 0, SYN, b""),
           TcpSegment(1, B_IP, B_PORT, A_IP, A_PORT, isn_b, (isn_a + 1) & MASK, SYN | ACK,
                      b""))
    ts = 10
    for d, start, end, payload, dropped in merged:
        ts += 1
        if payload is None:
            fin_passed[d] = True
            s.feed(r, seg(d, start, b"", FIN | ACK, ts))
            continue
        received[d].append((start, end))
        if dropped:
            continue
        for k, b in enumerate(payload):
            first_copy[d].setdefault(start + k, b)
        fed_bytes[d] += len(payload)
        s.feed(r, seg(d, start, payload, ACK | PSH, ts))
        if acks and rnd.random() < 0.3:    # a pure ACK from the receiver
            ts += 1
            src, dst = peer[ends[d]], ends[d]
            s.feed(r, TcpSegment(ts, src[0], src[1], dst[0], dst[1],
                                 (isn[1 - d] + 1) & MASK, ack_for(d), ACK, b""))
    s.add(r.flush(ts + 1))

    # every connection closed exactly once; one connection only
    assert list(s.closed) == [0]
    assert isinstance(s.events[-1], StreamClosed)
    conn = s.conns[0]
    results = []
    for d, data in ((0, data_a), (1, data_b)):
        fed = [(st_, en) for dd, st_, en, p, drop in merged
               if dd == d and p is not None and not drop]
        covered = _merge(fed)
        # without B's FIN, nothing tells how long B's stream was: no trailing gap
        total = len(data) if d == 0 or b_fin_last else (covered[-1][1] if covered else 0)
        expected_gaps = _complement(covered, total)
        got_gaps = _merge((o, o + n) for o, n, _ in s.gap_list(0, d))
        assert got_gaps == expected_gaps
        expected = bytes(first_copy[d][i] for cs, ce in covered for i in range(cs, ce))
        assert s.bytes(0, d) == expected
        assert conn.bytes[d] == len(expected)
        assert conn.gap_bytes[d] == sum(e - s_ for s_, e in expected_gaps)
        results.append((covered, fed_bytes[d]))
    # every captured payload byte is delivered, retransmitted or ignored (nothing silently)
    delivered = sum(len(ev.data) for ev in s.events if isinstance(ev, StreamData))
    assert r.stats.payload_bytes == delivered + r.stats.retransmitted_bytes + \
        r.stats.ignored_bytes
    return r, s, results


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32), data_a=st.binary(max_size=600),
       data_b=st.binary(max_size=300), isn_a=ISNS, isn_b=ISNS,
       window=st.integers(1, 8), dup_p=st.sampled_from([0.0, 0.3, 1.0]),
       b_fin_last=st.booleans())
def test_reorder_and_duplicates_reassemble_exactly(seed, data_a, data_b, isn_a, isn_b,
                                                   window, dup_p, b_fin_last):
    r, s, results = _run(seed, data_a, data_b, isn_a, isn_b, dup_p=dup_p, window=window,
                         acks=True, b_fin_last=b_fin_last)
    assert s.bytes(0, 0) == data_a and s.bytes(0, 1) == data_b
    assert s.gap_list(0, 0) == [] and s.gap_list(0, 1) == []
    fed = sum(f for _, f in results)
    assert r.stats.retransmitted_bytes == fed - len(data_a) - len(data_b)
    assert r.stats.overlap_conflicts == 0 and r.stats.gaps == 0
    assert s.closed[0] == ("fin" if b_fin_last else "end_of_capture")


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32), data_a=st.binary(min_size=1, max_size=600),
       isn_a=ISNS, window=st.integers(1, 6))
def test_conflicting_copies_first_copy_wins(seed, data_a, isn_a, window):
    # _run checks the output against the first copy fed of every byte
    _run(seed, data_a, b"", isn_a, 7, dup_p=0.7, corrupt_p=0.5, window=window, acks=True)


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32), data_a=st.binary(max_size=600),
       data_b=st.binary(max_size=300), isn_a=ISNS, isn_b=ISNS,
       window=st.integers(1, 8), drop_p=st.sampled_from([0.1, 0.3, 0.7]),
       dup_p=st.sampled_from([0.0, 0.3]), b_fin_last=st.booleans())
def test_dropped_segments_become_exact_gaps_without_acks(seed, data_a, data_b, isn_a, isn_b,
                                                         window, drop_p, dup_p, b_fin_last):
    r, s, _ = _run(seed, data_a, data_b, isn_a, isn_b, drop_p=drop_p, dup_p=dup_p,
                   window=window, acks=False, b_fin_last=b_fin_last)
    # without ACK evidence, holes are only declared when the connection ends
    assert all(reason == "close" for d in (0, 1) for _, _, reason in s.gap_list(0, d))


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32), data_a=st.binary(max_size=600),
       data_b=st.binary(max_size=300), isn_a=ISNS, isn_b=ISNS,
       window=st.integers(1, 8), drop_p=st.sampled_from([0.1, 0.3, 0.7]),
       dup_p=st.sampled_from([0.0, 0.3]))
def test_dropped_segments_with_acks_become_exact_gaps(seed, data_a, data_b, isn_a, isn_b,
                                                      window, drop_p, dup_p):
    _run(seed, data_a, data_b, isn_a, isn_b, drop_p=drop_p, dup_p=dup_p, window=window,
         acks=True)
