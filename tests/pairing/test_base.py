"""kafkasniff.pairing.base: the shared context, issues located on a connection, close
reasons, body issues of damaged frames, messages and exchanges. KafkaConnection is the
concrete connection; frames come from tests/pairing/frames.py."""

from __future__ import annotations

import pytest

from kafkasniff.issues import IssueKind, Severity
from kafkasniff.model import Exchange, ExchangeStatus
from kafkasniff.pairing.base import SEVERITY, PairingContext
from kafkasniff.pairing.connection import KafkaConnection
from kafkasniff.protocol.framing import ACCEPT, Frame
from kafkasniff.protocol.lenient import BodyIssue
from kafkasniff.protocol.schema import load_definitions
from kafkasniff.tcp.types import TcpConnection

from .frames import (
    heartbeat_v0_request,
    heartbeat_v0_response_body,
    metadata_v1_request,
    produce_v3_request,
    response,
)

DEFS = load_definitions()
CLIENT_IP, BROKER_IP = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])


def tcp(client_dir: int = 0) -> TcpConnection:
    """A TCP connection whose client (port 40000) is A when client_dir is 0, else B."""
    if client_dir == 0:
        return TcpConnection(7, CLIENT_IP, 40000, BROKER_IP, 9092, 0, 0, handshake_seen=True)
    return TcpConnection(7, BROKER_IP, 9092, CLIENT_IP, 40000, 0, 0, handshake_seen=True)


def connection(client_dir: int = 0, ctx: PairingContext | None = None) -> KafkaConnection:
    return KafkaConnection(ctx or PairingContext.create(DEFS), tcp(client_dir), client_dir,
                           False)


# --------------------------------------------------------------------------- context

def test_create_passes_content_options_to_the_content_decoder():
    """with_records, max_uncompressed_bytes and show_secrets configure the content
    decoder; the other keywords set the context's fields."""
    ctx = PairingContext.create(DEFS, with_records=True, max_uncompressed_bytes=4096,
                                show_secrets=True, max_frame_bytes=1000, max_pending=3,
                                infer_orphans=False)
    c = ctx.content
    assert (c.with_records, c.max_uncompressed_bytes, c.show_secrets) == (True, 4096, True)
    assert c.defs is DEFS and ctx.defs is DEFS
    assert (ctx.max_frame_bytes, ctx.max_pending, ctx.infer_orphans) == (1000, 3, False)


def test_create_defaults():
    ctx = PairingContext.create(DEFS)
    assert (ctx.content.with_records, ctx.content.show_secrets) == (False, False)
    assert ctx.max_pending == 10_000 and ctx.infer_orphans is True


def test_create_rejects_unknown_options():
    with pytest.raises(TypeError):
        PairingContext.create(DEFS, no_such_option=1)


def test_with_records_reaches_decoded_exchanges():
    """The context's content options are what a connection decodes with."""
    for with_records, expect_records in ((True, True), (False, False)):
        conn = connection(ctx=PairingContext.create(DEFS, with_records=with_records))
        [ex] = conn.on_data(0, 0, produce_v3_request(1, acks=0), 10) + conn.on_close(20, True)
        batch = ex.record_fields[0].records.decoded.batches[0]
        assert (batch.records is not None) is expect_records


def test_request_validator_is_shared():
    ctx = PairingContext.create(DEFS)
    v = ctx.request_validator()
    assert ctx.request_validator() is v
    assert v(metadata_v1_request(1), 0, False) == ACCEPT


# --------------------------------------------------------------------------- issues

@pytest.mark.parametrize("kind", list(SEVERITY))
def test_issue_default_severity_of_each_kind(kind):
    assert connection().issue(kind, "m").severity == SEVERITY[kind]


def test_issue_severity_defaults_and_override():
    conn = connection()
    assert conn.issue(IssueKind.BODY_DECODE_ERROR, "m").severity == Severity.ERROR
    assert conn.issue(IssueKind.RESYNC, "m").severity == Severity.WARNING
    assert conn.issue(IssueKind.TCP_GAP, "m").severity == Severity.WARNING  # not listed
    assert conn.issue(IssueKind.BODY_DECODE_ERROR, "m", severity=Severity.INFO).severity == \
        Severity.INFO


@pytest.mark.parametrize("client_dir", [0, 1])
def test_issue_direction_naming_and_location(client_dir):
    """The client's direction is "request", the other "response", -1 is ""; the issue is
    located on the connection's endpoints."""
    conn = connection(client_dir)
    req = conn.issue(IssueKind.TRAILING_BYTES, "t", direction=client_dir, ts_ns=5,
                     stream_offset=100, length_bytes=3, field_path="a.b", frame_offset=9,
                     correlation_id=4, api_key=3, api_version=1)
    assert req.direction == "request"
    assert conn.issue("x", "m", direction=1 - client_dir).direction == "response"
    assert conn.issue("x", "m").direction == ""
    assert (req.connection_id, req.client, req.broker) == (7, "10.0.0.1:40000", "10.0.0.2:9092")
    assert (req.ts_ns, req.stream_offset, req.length_bytes, req.field_path, req.frame_offset,
            req.correlation_id, req.api_key, req.api_version) == (5, 100, 3, "a.b", 9, 4, 3, 1)


# --------------------------------------------------------------------------- close reasons

@pytest.mark.parametrize("reason, closed_by, severity, why", [
    (True, -1, Severity.INFO, "the capture ended"),
    ("end_of_capture", 1, Severity.INFO, "the capture ended"),
    ("idle", -1, Severity.INFO, "the connection went idle (no packet for the idle timeout)"),
    ("evicted", -1, Severity.WARNING, "the connection table was full (connection evicted)"),
    ("fin", 0, Severity.INFO, "the client closed the connection"),
    ("fin", 1, Severity.WARNING, "the broker closed the connection"),
    ("rst", 0, Severity.INFO, "the client closed the connection"),
    ("rst", 1, Severity.WARNING, "the broker closed the connection"),
    ("rst", -1, Severity.WARNING, "the connection ended (rst)"),
    ("port_reuse", -1, Severity.WARNING, "the connection ended (port_reuse)"),
    (False, -1, Severity.WARNING, "the connection ended (fin)"),
])
def test_close_reason(reason, closed_by, severity, why):
    """(severity, why) of requests left waiting, for each TCP close reason (client_dir 0)."""
    conn = connection(0)
    conn.tcp.closed_by = closed_by
    assert conn._close_reason(reason) == (severity, why)


def test_close_reason_follows_the_client_side():
    """With the client on B (client_dir 1) a FIN from B is the client's."""
    conn = connection(1)
    conn.tcp.closed_by = 1
    assert conn._close_reason("fin") == (Severity.INFO, "the client closed the connection")
    conn.tcp.closed_by = 0
    assert conn._close_reason("fin") == (Severity.WARNING, "the broker closed the connection")


def test_unanswered_request_on_broker_fin():
    """End to end: a request waiting when the broker closes is unanswered, warning."""
    conn = connection(0)
    assert conn.on_data(0, 0, heartbeat_v0_request(9), 1_000) == []
    conn.tcp.closed_by = 1
    [ex] = conn.on_close(2_000, "fin")
    assert isinstance(ex, Exchange) and ex.status == ExchangeStatus.UNANSWERED
    [issue] = ex.issues
    assert issue.kind == IssueKind.UNANSWERED_REQUEST and issue.severity == Severity.WARNING
    assert issue.message == ("Heartbeat v0 correlation_id 9: no response before the broker "
                             "closed the connection")
    assert (issue.direction, issue.correlation_id, issue.api_key) == ("request", 9, 12)
    assert conn.unanswered == 1 and conn.exchanges == 1


# --------------------------------------------------------------------------- body issues

ISSUES = [
    BodyIssue(IssueKind.BODY_DECODE_ERROR, "need 4 bytes", "topics[0].name", 30),
    BodyIssue(IssueKind.SPEC_DEPARTURE, "null", "topics[1].name", 40),
    BodyIssue(IssueKind.TRAILING_BYTES, "5 trailing bytes", "", 45),
]


def test_body_issues_of_a_whole_frame():
    """Every body issue is located: frame time and stream offset, field path, frame
    offset, ids; trailing bytes get their length (payload length minus offset)."""
    conn = connection(0)
    frame = Frame(size=50, payload=bytes(50), stream_offset=1000, first_ts_ns=77,
                  last_ts_ns=88)
    out = conn._body_issues(ISSUES, frame, 0, 12, 3, 1)
    assert [(i.kind, i.field_path, i.frame_offset, i.length_bytes) for i in out] == [
        (IssueKind.BODY_DECODE_ERROR, "topics[0].name", 30, 0),
        (IssueKind.SPEC_DEPARTURE, "topics[1].name", 40, 0),
        (IssueKind.TRAILING_BYTES, "", 45, 5),
    ]
    for i in out:
        assert (i.ts_ns, i.stream_offset, i.direction, i.correlation_id, i.api_key,
                i.api_version) == (77, 1000, "request", 12, 3, 1)
    assert [i.severity for i in out] == [Severity.ERROR, Severity.WARNING, Severity.WARNING]


def test_body_issues_of_a_frame_with_missing_bytes():
    """A frame cut by a gap or the capture's end: its decode error and trailing bytes are
    explained by that loss and dropped; other departures are kept."""
    conn = connection(1)
    frame = Frame(size=80, payload=bytes(50), stream_offset=0, first_ts_ns=1, last_ts_ns=2,
                  missing_bytes=30)
    out = conn._body_issues(ISSUES, frame, 0, None, None, None)
    assert [(i.kind, i.direction, i.frame_offset) for i in out] == [
        (IssueKind.SPEC_DEPARTURE, "response", 40)]


# --------------------------------------------------------------------------- messages

def test_message_and_exchange_of_real_frames():
    """Frames become Messages (size prefix counted, sequence number located) and a paired
    exchange has its latency from request last byte to response first byte."""
    conn = connection(0)
    conn.tcp.base_seq = [5000, 2 ** 32 - 2]
    req = heartbeat_v0_request(3)
    assert conn.on_data(0, 0, req[:10], 100) == []
    assert conn.on_data(0, 10, req[10:], 150) == []
    [ex] = conn.on_data(1, 0, response(3, heartbeat_v0_response_body(27)), 400)
    assert ex.status == ExchangeStatus.PAIRED and ex.latency_ns == 250
    assert (ex.request.frame_bytes, ex.request.first_ts_ns, ex.request.last_ts_ns) == (
        len(req), 100, 150)
    assert ex.request.seq == 5000 and ex.response.seq == 2 ** 32 - 2
    assert ex.response.frame_bytes == 4 + 4 + 2 and ex.response.body == {"error_code": 27}
    assert ex.errors == ("REBALANCE_IN_PROGRESS",)
    assert (ex.conn_id, ex.client, ex.broker) == (7, "10.0.0.1:40000", "10.0.0.2:9092")
    assert conn.exchanges == 1
