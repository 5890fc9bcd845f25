"""Kafka07Connection: framing both directions, 0.7 decoding, pairing in request order."""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import given, settings, strategies as st

from kafkasniff.issues import IssueKind, Severity
from kafkasniff.model import DecodeIssue, Exchange, ExchangeStatus
from kafkasniff.pairing.connection import PairingContext
from kafkasniff.pairing.legacy07 import Kafka07Connection
from kafkasniff.protocol.schema import load_definitions
from kafkasniff.tcp.types import TcpConnection
from tests.protocol.test_legacy07 import (
    SET,
    compressed,
    fetch,
    fetch_response,
    message,
    message_set,
    multifetch,
    multifetch_response,
    multiproduce,
    offsets,
    offsets_response,
    produce,
    response,
)

PAIRED = ExchangeStatus.PAIRED
NO_RESPONSE_EXPECTED = ExchangeStatus.NO_RESPONSE_EXPECTED
UNANSWERED = ExchangeStatus.UNANSWERED
ORPHAN_RESPONSE = ExchangeStatus.ORPHAN_RESPONSE

DEFS = load_definitions()
MS = 1_000_000


class Wire:
    """Feeds one Kafka07Connection the two directions of a conversation, tracking offsets."""

    def __init__(self, ctx: PairingContext | None = None, *, mid_stream: bool = False,
                 client_dir: int = 0) -> None:
        self.tcp = TcpConnection(conn_id=7, a_ip=bytes([10, 0, 0, 1]), a_port=40000,
                                 b_ip=bytes([10, 0, 0, 2]), b_port=9092, first_ts_ns=0,
                                 last_ts_ns=0, handshake_seen=not mid_stream)
        if client_dir == 1:
            self.tcp.a_port, self.tcp.b_port = 9092, 40000
        self.ctx = ctx or PairingContext.create(DEFS)
        self.conn = Kafka07Connection(self.ctx, self.tcp, client_dir, mid_stream)
        self.client_dir = client_dir
        self.offsets = [0, 0]

    def send(self, direction: int, data: bytes, ts: int, *, bytewise: bool = False) -> list:
        out = []
        chunks = [data[i:i + 1] for i in range(len(data))] if bytewise else [data]
        for chunk in chunks:
            out += self.conn.on_data(direction, self.offsets[direction], chunk, ts)
            self.offsets[direction] += len(chunk)
        return out

    def req(self, data: bytes, ts: int = 0, **kw) -> list:
        return self.send(self.client_dir, data, ts, **kw)

    def resp(self, data: bytes, ts: int = 0, **kw) -> list:
        return self.send(1 - self.client_dir, data, ts, **kw)

    def gap(self, direction: int, length: int, ts: int = 0) -> list:
        out = self.conn.on_gap(direction, self.offsets[direction], length, ts)
        self.offsets[direction] += length
        return out

    def close(self, ts: int = 10**9, end_of_capture: bool | str = True) -> list:
        return self.conn.on_close(ts, end_of_capture)


def exchanges(events) -> list[Exchange]:
    return [e for e in events if isinstance(e, Exchange)]


def issues_of(events) -> list[DecodeIssue]:
    out = [e for e in events if isinstance(e, DecodeIssue)]
    for ex in exchanges(events):
        out.extend(ex.issues)
    return out


def one(events) -> Exchange:
    [ex] = exchanges(events)
    assert [e for e in events if not isinstance(e, Exchange)] == []
    return ex


# =========================================================================== pairing


def test_fetch_paired():
    w = Wire()
    assert w.req(fetch("orders", 2, 100, 5000), ts=1 * MS) == []
    ex = one(w.resp(fetch_response(0, message_set(message(b"a"), message(b"b"))), ts=3 * MS))
    assert ex.status == PAIRED
    assert (ex.api_key, ex.api_name, ex.api_version, ex.correlation_id, ex.client_id) == \
        (1, "FETCH (0.7)", -1, -1, None)
    assert ex.client == "10.0.0.1:40000" and ex.broker == "10.0.0.2:9092"
    assert ex.latency_ns == 2 * MS
    assert ex.topics == ("orders",) and ex.errors == () and ex.issues == ()
    assert ex.request.header == {"request_type": 1}
    assert ex.request.body == {"topic": "orders", "partition": 2, "offset": 100,
                               "max_size": 5000}
    assert ex.request.complete and ex.request.body_offset == 2
    assert ex.response.header == {"error_code": 0}
    assert [m["payload"] for m in ex.response.body["messages"]] == [b"a", b"b"]
    assert ex.request.frame_bytes == len(fetch("orders", 2, 100, 5000))


def test_client_in_direction_1():
    w = Wire(client_dir=1)
    w.req(offsets("orders", 0, -1, 1), ts=1)
    ex = one(w.resp(offsets_response(0, [42]), ts=2))
    assert ex.status == PAIRED and ex.response.body["offsets"] == [42]
    assert ex.client.endswith(":40000") and ex.broker.endswith(":9092")


def test_produce_expects_no_response():
    w = Wire()
    ex = one(w.req(produce("orders", 0, SET), ts=5))
    assert ex.status == NO_RESPONSE_EXPECTED and ex.response is None and ex.latency_ns is None
    assert ex.api_name == "PRODUCE (0.7)" and ex.topics == ("orders",)
    assert len(ex.request.body["messages"]) == 3
    ex = one(w.req(multiproduce(("a", 0, SET), ("b", 1, SET), ("a", 2, SET)), ts=6))
    assert ex.status == NO_RESPONSE_EXPECTED and ex.api_name == "MULTIPRODUCE (0.7)"
    assert ex.topics == ("a", "b")


def test_in_order_pairing_with_produce_in_between():
    w = Wire()
    out = w.req(fetch("t1", 0, 0), ts=1)
    out += w.req(produce("t2", 0, SET), ts=2)
    out += w.req(offsets("t3", 0, -2, 5), ts=3)
    out += w.req(multiproduce(("t4", 0, SET)), ts=4)
    out += w.req(multifetch(("t5", 0, 0, 100), ("t6", 1, 50, 100)), ts=5)
    assert [e.status for e in exchanges(out)] == [NO_RESPONSE_EXPECTED] * 2
    out = w.resp(fetch_response(1), ts=10)
    out += w.resp(offsets_response(0, [7, 0]), ts=11)
    out += w.resp(multifetch_response((0, message(b"m")), (3, b"")), ts=12)
    exs = exchanges(out)
    assert [e.api_name for e in exs] == ["FETCH (0.7)", "OFFSETS (0.7)", "MULTIFETCH (0.7)"]
    assert all(e.status == PAIRED for e in exs)
    assert exs[0].errors == ("OffsetOutOfRange",)
    assert exs[1].response.body["offsets"] == [7, 0]
    assert exs[2].errors == ("WrongPartition",) and exs[2].topics == ("t5", "t6")
    assert exs[2].response.body["fetches"][1]["topic"] == "t6"
    assert [e.latency_ns for e in exs] == [9, 8, 7]
    assert issues_of(out) == []
    assert w.close() == []


def test_byte_by_byte_matches_whole():
    conv = [
        (0, fetch("orders", 0, 0), 1), (1, fetch_response(0, message(b"x")), 2),
        (0, produce("orders", 1, compressed(1, SET)), 3),
        (0, multifetch(("a", 0, 0, 10), ("b", 0, 0, 10)), 4),
        (1, multifetch_response((0, b""), (1, compressed(2, SET))), 5),
        (0, offsets("a", 0, -1, 1), 6), (1, offsets_response(0, [3]), 7),
    ]

    def run(bytewise: bool):
        w = Wire()
        out = []
        for d, data, ts in conv:
            out += w.send(d, data, ts, bytewise=bytewise)
        out += w.close()
        return out

    whole, single = run(False), run(True)
    assert whole == single
    assert [e.status for e in exchanges(whole)] == [PAIRED, NO_RESPONSE_EXPECTED, PAIRED, PAIRED]
    assert issues_of(whole) == []


def test_orphan_response():
    w = Wire(PairingContext.create(DEFS, show_secrets=True))
    ex = one(w.resp(fetch_response(2, b"abc"), ts=4))
    assert ex.status == ORPHAN_RESPONSE and ex.api_key == -1 and ex.api_name == "Unknown (0.7)"
    assert ex.request is None and ex.response.raw_body == b"abc" and ex.response.body is None
    assert ex.response.header == {"error_code": 2} and ex.errors == ("InvalidMessage",)
    [issue] = ex.issues
    assert issue.kind == IssueKind.ORPHAN_RESPONSE and issue.severity == Severity.WARNING
    assert issue.direction == "response"


def test_orphan_response_is_redacted_by_default():
    ex = one(Wire().resp(fetch_response(2, b"abc"), ts=4))
    assert ex.response.raw_body is None
    assert ex.response.body["_redacted_body"].size_bytes == 3
    assert ex.errors == ("InvalidMessage",)


def test_every_body_of_a_connection_that_speaks_sasl_is_redacted():
    """--wire-format 0.7 on a SASL connection: its frames are 0.8+ SaslHandshake /
    SaslAuthenticate requests, so every 0.7 body on it is redacted (server tokens printed)."""
    w = Wire()
    handshake = struct.pack(">ihhi", 4 + 2 + 2 + 4 + 2 + 5, 17, 1, 1) + b"\x00\x05PLAIN"
    w.req(handshake, ts=1)
    ex = one(w.resp(fetch_response(0, b"server-token-secret"), ts=2))
    assert "server-token-secret" not in repr(ex)
    assert ex.response.raw_body is None and "_redacted_body" in ex.response.body


@pytest.mark.parametrize("reason,closed_by,severity", [
    (True, -1, Severity.INFO), ("idle", -1, Severity.INFO), ("fin", 0, Severity.INFO),
    ("fin", 1, Severity.WARNING), ("evicted", -1, Severity.WARNING),
])
def test_unanswered_at_close(reason, closed_by, severity):
    w = Wire()
    w.req(fetch("orders", 0, 0), ts=1)
    w.req(offsets("orders", 0, -1, 1), ts=2)
    w.tcp.closed_by = closed_by
    out = w.close(end_of_capture=reason)
    exs = exchanges(out)
    assert [e.status for e in exs] == [UNANSWERED, UNANSWERED]
    assert [e.api_key for e in exs] == [1, 4]
    for e in exs:
        [i] = e.issues
        assert i.kind == IssueKind.UNANSWERED_REQUEST and i.severity == severity
        assert i.api_key == e.api_key and i.direction == "request"


def test_partial_frame_at_close():
    w = Wire()
    w.req(fetch("orders", 0, 0), ts=1)
    frame = fetch_response(0, message(b"abcdef"))
    w.resp(frame[:-3], ts=2)
    out = w.close()
    ex = exchanges(out)[0]
    assert ex.status == PAIRED and ex.response.missing_bytes == 3 and not ex.response.complete
    kinds = [i.kind for i in issues_of(out)]
    assert IssueKind.FRAME_TRUNCATED in kinds and IssueKind.BODY_DECODE_ERROR not in kinds


def test_crc_mismatch_is_reported_on_the_exchange():
    w = Wire()
    bad = message(b"payload", crc=1)
    ex = one(w.req(produce("orders", 0, message_set(message(b"ok"), bad)), ts=1))
    [i] = ex.issues
    assert i.kind == "crc_mismatch" and i.severity == Severity.WARNING
    assert i.api_key == 0 and i.field_path == "messages[1].crc" and i.frame_offset > 0
    assert ex.request.body["messages"][1]["crc_ok"] is False


def test_decompression_error_is_an_error():
    w = Wire()
    ex = one(w.req(produce("orders", 0, message(b"garbage", codec=2)), ts=1))
    [i] = ex.issues
    assert i.kind == "decompression_error" and i.severity == Severity.ERROR


def test_decompression_bound_from_context():
    ctx = PairingContext.create(DEFS, max_uncompressed_bytes=1000)
    w = Wire(ctx)
    ex = one(w.req(produce("orders", 0, compressed(1, message(b"z" * 5000))), ts=1))
    assert [i.kind for i in ex.issues] == ["decompression_error"]


def test_unknown_request_type():
    w = Wire()
    out = w.req(b"\x00\x00\x00\x04\x00\x09ab", ts=1)
    [i] = out
    assert isinstance(i, DecodeIssue) and i.kind == IssueKind.HEADER_DECODE_ERROR


def test_pending_overflow():
    ctx = PairingContext.create(DEFS, max_pending=2)
    w = Wire(ctx)
    out = []
    for n in range(3):
        out += w.req(fetch("orders", 0, n), ts=n)
    [ex] = exchanges(out)
    assert ex.status == UNANSWERED and ex.request.body["offset"] == 0
    assert ex.issues[0].kind == IssueKind.PENDING_OVERFLOW
    exs = exchanges(w.resp(fetch_response(0), ts=10) + w.resp(fetch_response(0), ts=11))
    assert [e.request.body["offset"] for e in exs] == [1, 2]


# =========================================================================== gaps and resync


def test_gap_inside_response_keeps_sync():
    w = Wire()
    w.req(fetch("orders", 0, 0), ts=1)
    w.req(fetch("orders", 0, 99), ts=2)
    frame = fetch_response(0, message(b"a" * 50))
    out = w.resp(frame[:20], ts=3)
    out += w.gap(1, 10, ts=4)
    out += w.resp(frame[30:], ts=5)
    out += w.resp(fetch_response(1), ts=6)
    exs = exchanges(out)
    assert [e.status for e in exs] == [PAIRED, PAIRED]
    # the damaged frame holds the bytes before the gap; only the gap's 10 bytes are missing
    assert exs[0].response.missing_bytes == 10
    assert exs[0].request.body["offset"] == 0 and not exs[0].response.complete
    assert exs[1].request.body["offset"] == 99 and exs[1].errors == ("OffsetOutOfRange",)
    kinds = [i.kind for i in issues_of(out)]
    assert kinds == [IssueKind.FRAME_DAMAGED]


def test_broker_gap_between_frames_gives_up_waiting_requests():
    w = Wire()
    w.req(fetch("orders", 0, 1), ts=1)
    w.req(fetch("orders", 0, 2), ts=2)
    out = w.gap(1, 40, ts=3)
    exs = exchanges(out)
    assert [e.status for e in exs] == [UNANSWERED, UNANSWERED]
    assert all(e.issues[-1].severity == Severity.WARNING for e in exs)
    assert "lost" in exs[0].issues[-1].message
    # a late response to a given-up request arrives before the next request: orphan
    out = w.resp(b"\xab" * 7 + fetch_response(0, message(b"late")), ts=4)
    out += w.req(offsets("orders", 0, -1, 1), ts=5)
    out += w.resp(offsets_response(0, [10]), ts=6)
    out += w.req(fetch("orders", 0, 3), ts=7)
    out += w.resp(fetch_response(0, message(b"ok")), ts=8)
    exs = exchanges(out)
    assert [e.status for e in exs] == [ORPHAN_RESPONSE, PAIRED, PAIRED]
    assert exs[1].response.body["offsets"] == [10]
    assert exs[2].response.body["messages"][0]["payload"] == b"ok"
    assert IssueKind.RESYNC in [i.kind for i in issues_of(out)]


def test_broker_gap_with_request_sent_during_hunt():
    w = Wire()
    w.req(fetch("orders", 0, 1), ts=1)
    assert [e.status for e in exchanges(w.gap(1, 30, ts=2))] == [UNANSWERED]
    w.req(offsets("orders", 0, -1, 1), ts=3)      # sent after the gap: still waits
    out = w.resp(offsets_response(0, [5]), ts=4)
    ex = exchanges(out)[0]
    assert ex.status == PAIRED and ex.api_key == 4


def test_hunt_skips_a_response_of_the_wrong_layout():
    w = Wire()
    w.req(fetch("orders", 0, 1), ts=1)
    w.gap(1, 30, ts=2)
    w.req(offsets("orders", 0, -1, 1), ts=3)
    # a FETCH-shaped answer (to the given-up fetch) cannot answer the OFFSETS request: the
    # broker-side hunt skips it
    late = fetch_response(0, message(b"late fetch data"))
    assert exchanges(w.resp(late, ts=4)) == []
    out = w.resp(offsets_response(0, [5]), ts=5)
    ex = exchanges(out)[0]
    assert ex.status == PAIRED and ex.response.body["offsets"] == [5]
    [resync] = [i for i in issues_of(out) if i.kind == IssueKind.RESYNC]
    assert resync.length_bytes >= len(late) and resync.severity == Severity.WARNING


def test_implausible_response_size_loses_sync():
    w = Wire()
    w.req(fetch("orders", 0, 1), ts=1)
    out = w.resp(b"\xff\xff\xff\xff" + b"\x00" * 10, ts=2)
    assert [e.status for e in exchanges(out)] == [UNANSWERED]
    w.req(fetch("orders", 0, 2), ts=3)
    out = w.resp(fetch_response(0, message(b"x")), ts=4)
    assert [e.status for e in exchanges(out)] == [PAIRED]
    assert IssueKind.RESYNC in [i.kind for i in issues_of(out)]


def test_sync_lost_and_regained_in_one_segment():
    w = Wire()
    w.req(fetch("orders", 0, 1), ts=1)
    w.req(fetch("orders", 0, 2), ts=5)
    # junk (implausible size), then a response, all in one segment: both waiting requests
    # ended before the junk began, so both are given up and the response is an orphan
    out = w.resp(b"\xff\xff\xff\xff\x00\x00" + fetch_response(0, message(b"x")), ts=6)
    assert [e.status for e in exchanges(out)] == [UNANSWERED, UNANSWERED, ORPHAN_RESPONSE]
    w.req(fetch("orders", 0, 3), ts=7)
    ex = one(w.resp(fetch_response(0), ts=8))
    assert ex.status == PAIRED and ex.request.body["offset"] == 3


def test_client_gap_inside_a_request_keeps_it():
    w = Wire()
    lost = fetch("orders", 0, 2)
    out = w.req(lost[:10], ts=3)
    out += w.gap(0, len(lost) - 10, ts=3)
    out += w.resp(fetch_response(0, message(b"x")), ts=4)
    ex = exchanges(out)[0]
    assert ex.status == PAIRED and ex.request.missing_bytes == len(lost) - 10
    assert ex.request.header == {"request_type": 1} and ex.request.body == {}  # topic cut
    kinds = [i.kind for i in issues_of(out)]
    assert kinds == [IssueKind.FRAME_DAMAGED]


def test_client_gap_between_requests():
    w = Wire()
    out = w.req(fetch("orders", 0, 1), ts=1)
    out += w.resp(fetch_response(0), ts=2)
    out += w.gap(0, len(fetch("orders", 0, 2)), ts=3)     # a whole request lost
    # the lost request's answer comes before the next captured request: orphan
    out += w.resp(fetch_response(0, message(b"for the lost one")), ts=4)
    out += w.req(fetch("orders", 0, 3), ts=5)
    out += w.resp(fetch_response(0, message(b"three")), ts=6)
    out += w.close()
    exs = exchanges(out)
    assert [e.status for e in exs] == [PAIRED, ORPHAN_RESPONSE, PAIRED]
    assert exs[2].request.body["offset"] == 3
    assert exs[2].response.body["messages"][0]["payload"] == b"three"
    assert exs[1].issues[0].severity == Severity.WARNING


def test_client_gap_answers_keep_request_order():
    """After a client-side gap, a request sent before the gap still pairs first."""
    w = Wire()
    w.req(fetch("orders", 0, 1), ts=1)
    w.gap(0, 30, ts=2)
    w.req(offsets("orders", 0, -1, 1), ts=3)
    exs = exchanges(w.resp(fetch_response(0, message(b"answer to offset 1")), ts=4))
    assert [e.status for e in exs] == [PAIRED] and exs[0].api_key == 1
    exs = exchanges(w.resp(offsets_response(0, [9]), ts=5))
    assert [e.status for e in exs] == [PAIRED] and exs[0].api_key == 4


def test_mid_stream_start():
    w = Wire(mid_stream=True)
    tail = fetch_response(0, message(b"older"))
    # the broker side begins inside an old response, the client side inside an old request
    out = w.resp(tail[9:], ts=1)
    out += w.resp(fetch_response(0, message(b"old")), ts=2)
    out += w.req(fetch("orders", 0, 0)[7:], ts=3)
    out += w.req(fetch("orders", 0, 5), ts=4)
    out += w.resp(fetch_response(0, message(b"new")), ts=5)
    out += w.close()
    exs = exchanges(out)
    assert [e.status for e in exs] == [ORPHAN_RESPONSE, PAIRED]
    assert exs[0].issues[0].severity == Severity.INFO
    assert exs[1].request.body["offset"] == 5
    resyncs = [i for i in issues_of(out) if i.kind == IssueKind.RESYNC]
    assert resyncs and all(i.severity == Severity.INFO for i in resyncs)


def test_mid_stream_request_without_answer_then_paired():
    w = Wire(mid_stream=True)
    w.req(offsets("orders", 0, -1, 1), ts=1)
    ex = one(w.resp(offsets_response(0, [1, 2]), ts=2))
    assert ex.status == PAIRED and ex.response.body["offsets"] == [1, 2]


# =========================================================================== robustness


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1), st.binary(max_size=80), st.booleans()),
                max_size=12), st.booleans())
def test_random_bytes_never_raise(chunks, mid_stream):
    w = Wire(mid_stream=mid_stream)
    out = []
    ts = 0
    for d, data, gap in chunks:
        ts += 1
        if gap:
            out += w.gap(d, len(data) + 1, ts)
        else:
            out += w.send(d, data, ts)
    out += w.close()
    assert not [i for i in issues_of(out) if i.kind == IssueKind.INTERNAL_ERROR]


def test_mutated_conversations_never_raise():
    rnd = random.Random(1)
    base = [
        (0, fetch("orders", 0, 0)), (1, fetch_response(0, message(b"x"))),
        (0, produce("orders", 1, compressed(1, SET))),
        (0, multifetch(("a", 0, 0, 10), ("b", 0, 0, 10))),
        (1, multifetch_response((0, b""), (1, compressed(2, SET)))),
        (0, offsets("a", 0, -1, 1)), (1, offsets_response(0, [3])), (1, response(0)),
    ]
    for _ in range(300):
        w = Wire(mid_stream=rnd.random() < 0.3)
        out = []
        for ts, (d, data) in enumerate(base):
            data = bytearray(data)
            for _ in range(rnd.randrange(3)):
                data[rnd.randrange(len(data))] = rnd.randrange(256)
            if rnd.random() < 0.1:
                out += w.gap(d, rnd.randrange(1, 20), ts)
            out += w.send(d, bytes(data), ts, bytewise=rnd.random() < 0.2)
        out += w.close()
        assert not [i for i in issues_of(out) if i.kind == IssueKind.INTERNAL_ERROR]
        # every request is accounted for exactly once
        assert all(isinstance(e, (Exchange, DecodeIssue)) for e in out)
