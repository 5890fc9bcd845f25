"""Pipeline: finding Kafka on any port in connections joined mid-stream."""

from __future__ import annotations

import gc

from kafkasniff.capture.types import CapturedPacket
from kafkasniff.model import Exchange
from kafkasniff.pipeline import (
    DECODE_GC_THRESHOLD,
    Pipeline,
    PipelineOptions,
    tune_gc_for_decoding,
)
from tests.capture.builders import ether, ipv4, tcp_header
from tests.pairing.frames import (
    heartbeat_v0_response_body,
    metadata_v1_request,
    metadata_v1_response_body,
    request_stream,
    response,
)

CLIENT, BROKER = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
CPORT, BPORT = 40000, 30000          # no broker port: found by request-header detection


def packets(client: bytes, broker: bytes, segment: int) -> list[CapturedPacket]:
    """Both directions cut into ``segment``-byte packets, interleaved; no SYN (mid-stream)."""
    out = []
    seq = [1000, 5000]
    streams = [(client, CLIENT, BROKER, CPORT, BPORT), (broker, BROKER, CLIENT, BPORT, CPORT)]
    for k in range(0, max(len(client), len(broker)), segment):
        for d, (data, src, dst, sport, dport) in enumerate(streams):
            chunk = data[k:k + segment]
            if not chunk:
                continue
            frame = ether(ipv4(src, dst, tcp_header(sport, dport, seq[d], seq[1 - d]) + chunk))
            out.append(CapturedPacket(10**18 + len(out) * 1000, 1, frame, len(frame)))
            seq[d] += len(chunk)
    return out


def decode(pkts: list[CapturedPacket]) -> tuple[Pipeline, list]:
    pipe = Pipeline(PipelineOptions(ports=frozenset({9092})))
    out = [rec for pkt in pkts for rec in pipe.feed(pkt)]
    return pipe, out + pipe.finish()


def test_joined_mid_frame_in_tiny_segments_is_found_and_decoded():
    """The capture starts inside a request: two chained requests later in the stream show
    it is Kafka, however small the segments (each byte examined once, see
    ``Pipeline._chained_requests``), with the same result for every segment size."""
    cut = metadata_v1_request(1, ["orders", "payments"])[9:]
    reqs = request_stream(6, first_corr=2)
    answers = [response(2 + i, heartbeat_v0_response_body()) for i in range(6)]
    client = cut + b"".join(reqs)
    broker = response(1, metadata_v1_response_body())[5:] + b"".join(answers)
    results = set()
    for segment in (1, 3, 64, 1460):
        pipe, out = decode(packets(client, broker, segment))
        assert pipe.stats.kafka_connections == 1 and pipe.stats.other_connections == 0
        corrs = tuple(sorted(rec.correlation_id for rec in out
                             if type(rec) is Exchange and rec.request is not None))
        assert corrs == (2, 3, 4, 5, 6, 7), segment
        results.add(corrs)
    assert len(results) == 1


def test_other_traffic_joined_mid_stream_is_not_kafka():
    noise = bytes((i * 7919) % 251 for i in range(20_000))
    pipe, out = decode(packets(noise, noise[::-1], 50))
    assert pipe.stats.kafka_connections == 0 and pipe.stats.other_connections == 1
    assert out == []


def test_gaps_in_both_directions_do_not_keep_a_connection_undecided():
    """A connection on no broker port whose two directions both lose a segment before the
    detection window filled: the window can no longer grow, yet the connection must be
    decided (not buffered until it closes: its events would pile up without bound)."""
    noise = bytes((i * 7919) % 251 for i in range(400_000))
    pkts = packets(noise, noise[::-1], 1000)
    del pkts[2:4]                     # the second segment of each direction is never seen
    pipe = Pipeline(PipelineOptions(ports=frozenset({9092}), max_ooo_bytes=10_000))
    for pkt in pkts:
        pipe.feed(pkt)
    assert pipe.stats.other_connections == 1      # decided while the connection is open
    pipe.finish()
    assert pipe.stats.kafka_connections == 0 and pipe.stats.other_connections == 1


def test_every_connection_has_a_summary_also_when_decided_at_its_end():
    """A short connection that closes before its first bytes say what it carries (no Kafka
    port, detection on) still gets its connection summary (the export's connections row)."""
    from kafkasniff.model import ConnectionSummary

    pkts = packets(b"hello there", b"general kenobi", 100)
    fin = ether(ipv4(CLIENT, BROKER, tcp_header(CPORT, BPORT, 1011, 5014, flags=0x11)))
    pkts.append(CapturedPacket(pkts[-1].ts_ns + 1000, 1, fin, len(fin)))
    pipe = Pipeline(PipelineOptions(ports=frozenset({9092}), meta_records=True))
    out = [rec for pkt in pkts for rec in pipe.feed(pkt)] + pipe.finish()
    [summary] = [rec for rec in out if type(rec) is ConnectionSummary]
    assert summary.kind == "other" and pipe.stats.other_connections == 1
    assert summary.bytes_to_broker + summary.bytes_to_client == 25


def _capture_files():
    from tests.capture.test_pcapfile import _every_capture
    return _every_capture()


def test_every_captured_byte_is_decoded_or_skipped_with_a_reason():
    """decoded + skipped-with-reason = captured, on every committed, regression and public
    capture: the capture file's bytes (format), packets not TCP, link/IP/TCP headers, TCP
    payload retransmitted or ignored, non-Kafka and TLS connections, Kafka frames, resync,
    bytes after a gap inside a frame, size prefixes cut, skipped blocks, the unread rest."""
    import gzip

    from kafkasniff.pipeline import DECODED_BYTES, SKIPPED_BYTES, analyze

    for path in _capture_files():
        pipe = Pipeline(PipelineOptions())
        for _ in analyze([path], pipeline=pipe):
            pass
        raw = path.read_bytes()
        total = len(gzip.decompress(raw)) if raw[:2] == b"\x1f\x8b" else len(raw)
        ledger = pipe.stats.bytes
        assert set(ledger) <= set(DECODED_BYTES) | set(SKIPPED_BYTES), set(ledger)
        assert sum(ledger.values()) == total, (path.name, dict(ledger))


def test_the_exchange_counters_count_every_exchange_returned():
    """``stats.exchanges`` (by status) counts exactly the exchanges the pipeline returned,
    on every committed, regression and public capture, whichever way a packet's records
    were routed (one in-order data event straight to its connection, or the general
    dispatch)."""
    from collections import Counter

    from kafkasniff.pipeline import analyze

    for path in _capture_files():
        pipe = Pipeline(PipelineOptions())
        got = Counter(rec.status for rec in analyze([path], pipeline=pipe)
                      if type(rec) is Exchange)
        assert Counter(pipe.stats.exchanges) == got, path.name


def test_a_connection_closed_by_the_packet_that_looks_for_idle_ones_stays_placed():
    # the packet that ends a connection is also where (once per second of capture time) the
    # pipeline looks for idle connections: first_seen_ns must still know the connection
    # (the rows export writes for its last records are keyed by it)
    t0 = 10**18
    c, b = b"\x0a\x00\x00\x01", b"\x0a\x00\x00\x02"
    segs = [(c, b, 40000, 9092, 1000, 0, 0x02, t0),
            (b, c, 9092, 40000, 5000, 1001, 0x12, t0 + 1000),
            (c, b, 40000, 9092, 1001, 5001, 0x10, t0 + 2000),
            (c, b, 40000, 9092, 1001, 5001, 0x14, t0 + 2 * 10**9)]   # RST, 2 s later
    pipe = Pipeline(PipelineOptions(meta_records=True))
    for src, dst, sp, dp, seq, ack, flags, ts in segs:
        frame = ether(ipv4(src, dst, tcp_header(sp, dp, seq, ack, flags)))
        out = pipe.feed(CapturedPacket(ts, 1, frame, len(frame)))
    assert any(getattr(r, "closed", None) == "rst" for r in out)
    assert pipe.first_seen_ns(0) == t0


def test_tune_gc_raises_generation_0_and_keeps_the_others(gc_threshold):
    gc.set_threshold(700, 7, 9)
    tune_gc_for_decoding()
    assert gc.get_threshold() == (DECODE_GC_THRESHOLD, 7, 9)
    gc.set_threshold(DECODE_GC_THRESHOLD * 3, 10, 10)     # already higher: kept
    tune_gc_for_decoding()
    assert gc.get_threshold() == (DECODE_GC_THRESHOLD * 3, 10, 10)
    gc.set_threshold(0, 10, 10)                            # collector disabled: kept
    tune_gc_for_decoding()
    assert gc.get_threshold() == (0, 10, 10)


BROKER_9092 = bytes([10, 0, 0, 2])


def waiting_connections(n: int, first: int = 0, *, answered: bool = False,
                        t0: int = 10**18) -> list[CapturedPacket]:
    """``n`` connections to a broker on port 9092 (client ``10.1.x.y``, connection ``first``
    onwards), each a handshake and one Metadata v1 request whose answer never comes (with
    ``answered``: the answer, in a last packet of each connection)."""
    out = []
    t = t0
    for i in range(first, first + n):
        client, port = bytes([10, 1, i >> 8 & 0xFF, i & 0xFF]), 10000 + i % 50000
        isn, bsn = 1000 + i, 7000 + i
        req = metadata_v1_request(i, ["orders"])
        segs = [(client, BROKER_9092, port, 9092, isn, 0, 0x02, b""),
                (BROKER_9092, client, 9092, port, bsn, isn + 1, 0x12, b""),
                (client, BROKER_9092, port, 9092, isn + 1, bsn + 1, 0x18, req)]
        if answered:
            segs.append((BROKER_9092, client, 9092, port, bsn + 1, isn + 1 + len(req), 0x18,
                         response(i, metadata_v1_response_body())))
        for src, dst, sp, dp, seq, ack, flags, data in segs:
            frame = ether(ipv4(src, dst, tcp_header(sp, dp, seq, ack, flags) + data))
            out.append(CapturedPacket(t, 1, frame, len(frame)))
            t += 1000
    return out


def test_a_full_connection_table_costs_a_bounded_amount_per_connection():
    """Issue 45, item 4: connections that each wait for an answer, more of them than the
    connection table keeps. The oldest are evicted and freed (nothing of them stays), and
    each connection kept costs a bounded amount of memory: about 6 KB before (100,000 such
    connections took one process to 348 MB with 50,000 kept), now under 4.8 KB (measured
    with tracemalloc, compiled or not; docs/benchmarks.md, "Many connections at once")."""
    import tracemalloc

    pipe = Pipeline(PipelineOptions(max_connections=1000))
    for pkt in waiting_connections(50):   # the decoders and caches every connection shares
        pipe.feed(pkt)
    pkts = waiting_connections(3000, first=50)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for pkt in pkts:
            pipe.feed(pkt)
        del pkt
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert pipe.reassembly_stats.evictions == 2050 and len(pipe.connections) == 1000
    assert pipe.stats.issues["connection_evicted"] == 2050
    per_connection = grown / (1000 - 50)
    assert per_connection < 4800, per_connection


def test_many_orphans_of_the_same_answer_try_the_layouts_once():
    """Issue 45, item 4: the answers to requests that were not captured (connections the
    capture joined, or evicted from a full table) are each an orphan whose layout is
    inferred by trying every response layout (1.4 ms each: 37,500 of them took 54 s of
    ``stats`` on 100,000 connections). The same answer's bytes after its correlation_id are
    tried once; every orphan is inferred as before."""
    calls = []
    pipe = Pipeline(PipelineOptions())
    content = pipe.ctx.content
    candidates = content._orphan_candidates()
    assert len(candidates) > 100

    def counted(fn):
        def decode(payload, offset):
            calls.append(1)
            return fn(payload, offset)
        decode._layout = fn._layout
        return decode

    content._candidates = [(hv, counted(fn), aliases) for hv, fn, aliases in candidates]
    out = []
    for i, pkt in enumerate(waiting_connections(200, answered=True)):
        if i % 4 != 2:      # every request left out: each answer is an orphan
            out.extend(pipe.feed(pkt))
    out.extend(pipe.finish())
    orphans = [r for r in out if type(r) is Exchange]
    assert len(orphans) == 200
    assert {(e.status, e.api_name, e.api_version, e.inferred) for e in orphans} == \
        {("orphan_response", "Metadata", 1, True)}
    assert sorted(e.correlation_id for e in orphans) == list(range(200))
    assert len(calls) < len(candidates) + 2 * 200, len(calls)
