"""KafkaConnection: framing both directions, header and body decoding, pairing by correlation_id."""

from __future__ import annotations

import pytest

from kafkasniff.issues import IssueKind, Severity
from kafkasniff.model import DecodeIssue, Exchange, ExchangeStatus
from kafkasniff.pairing.connection import KafkaConnection, PairingContext
from kafkasniff.protocol.primitives import RawRecords
from kafkasniff.protocol.schema import load_definitions
from kafkasniff.tcp.types import TcpConnection

from .frames import (
    API_VERSIONS,
    HEARTBEAT,
    METADATA,
    PRODUCE,
    TOPIC_ID_ORDERS,
    TOPIC_ID_UNKNOWN,
    ZERO_ID,
    api_versions_v0_request,
    api_versions_v0_response_body,
    api_versions_v3_request_body,
    api_versions_v3_response_body,
    cstring,
    fetch_v4_request,
    fetch_v4_response_body,
    heartbeat_v0_request,
    heartbeat_v0_request_body,
    heartbeat_v0_response_body,
    i16,
    i32,
    metadata_v1_request,
    metadata_v1_response_body,
    metadata_v10_request_body,
    metadata_v10_response_body,
    produce_v3_request,
    produce_v3_response_body,
    request,
    response,
    string,
    tiny_batch,
    uuid_text,
)

PAIRED = ExchangeStatus.PAIRED
NO_RESPONSE_EXPECTED = ExchangeStatus.NO_RESPONSE_EXPECTED
UNANSWERED = ExchangeStatus.UNANSWERED
ORPHAN_RESPONSE = ExchangeStatus.ORPHAN_RESPONSE

DEFS = load_definitions()


def SHOWN_CTX() -> PairingContext:
    """A context that shows what the redaction rule would hide (orphans decoded by guess,
    bodies decoded under another layout): the tests of that decoding read the bodies."""
    return PairingContext.create(DEFS, show_secrets=True)


class Wire:
    """Feeds one KafkaConnection the two directions of a conversation, tracking offsets."""

    def __init__(self, ctx: PairingContext | None = None, *, mid_stream: bool = False,
                 client_dir: int = 0, start: tuple[int, int] = (0, 0)) -> None:
        self.tcp = TcpConnection(conn_id=1, a_ip=bytes([127, 0, 0, 1]), a_port=40000,
                                 b_ip=bytes([127, 0, 0, 1]), b_port=9092, first_ts_ns=0,
                                 last_ts_ns=0, handshake_seen=not mid_stream)
        self.ctx = ctx or PairingContext.create(DEFS)
        self.conn = KafkaConnection(self.ctx, self.tcp, client_dir, mid_stream)
        if mid_stream:
            for d in (0, 1):
                self.conn.framers[d].base = start[d]
        self.client_dir = client_dir
        self.offsets = list(start)

    def _send(self, direction: int, data: bytes, ts: int | list[int]) -> list:
        out = []
        tss = ts if isinstance(ts, list) else [ts]
        # split into len(tss) chunks, one timestamp each
        n = len(tss)
        bounds = [len(data) * i // n for i in range(n + 1)]
        for i in range(n):
            chunk = data[bounds[i]:bounds[i + 1]]
            out += self.conn.on_data(direction, self.offsets[direction], chunk, tss[i])
            self.offsets[direction] += len(chunk)
        return out

    def req(self, data: bytes, ts: int | list[int] = 0) -> list:
        return self._send(self.client_dir, data, ts)

    def resp(self, data: bytes, ts: int | list[int] = 0) -> list:
        return self._send(1 - self.client_dir, data, ts)

    def gap(self, direction: int, length: int, ts: int = 0) -> list:
        out = self.conn.on_gap(direction, self.offsets[direction], length, ts)
        self.offsets[direction] += length
        return out

    def close(self, ts: int = 10**9, end_of_capture: bool = True) -> list:
        return self.conn.on_close(ts, end_of_capture)


def exchanges(events) -> list[Exchange]:
    return [e for e in events if isinstance(e, Exchange)]


def one(events) -> Exchange:
    [ex] = exchanges(events)
    assert [e for e in events if not isinstance(e, Exchange)] == []
    return ex


def kinds(ex: Exchange) -> list[str]:
    return [i.kind for i in ex.issues]


def paired(w: Wire, req: bytes, resp: bytes) -> Exchange:
    assert w.req(req, 100) == []
    ex = one(w.resp(resp, 200))
    assert ex.status == PAIRED
    return ex


# --------------------------------------------------------------------------- pairing

def test_pipelined_requests_pair_in_order_with_latency():
    w = Wire()
    assert w.req(api_versions_v0_request(1), [100, 110]) == []
    assert w.req(metadata_v1_request(2, ["orders"]), [120, 130, 140]) == []
    assert w.req(produce_v3_request(3, acks=1), 150) == []
    out = w.resp(response(1, api_versions_v0_response_body()), [400, 401])
    out += w.resp(response(2, metadata_v1_response_body()), [500, 510])
    out += w.resp(response(3, produce_v3_response_body()), 600)
    ex = exchanges(out)
    assert [e.correlation_id for e in ex] == [1, 2, 3]
    assert [e.status for e in ex] == [PAIRED] * 3
    assert [(e.api_key, e.api_name, e.api_version) for e in ex] == [
        (API_VERSIONS, "ApiVersions", 0), (METADATA, "Metadata", 1), (PRODUCE, "Produce", 3)]
    assert [e.latency_ns for e in ex] == [400 - 110, 500 - 140, 600 - 150]
    assert [(e.request.first_ts_ns, e.request.last_ts_ns) for e in ex] == [
        (100, 110), (120, 140), (150, 150)]
    assert [(e.response.first_ts_ns, e.response.last_ts_ns) for e in ex] == [
        (400, 401), (500, 510), (600, 600)]
    # each response decoded with its own request's api_key and version
    assert ex[0].response.body["api_keys"][0] == {"api_key": 0, "min_version": 0,
                                                   "max_version": 9}
    assert ex[1].response.body["brokers"][0]["host"] == "broker-1"
    assert ex[1].request.body == {"topics": [{"name": "orders"}]}
    assert ex[2].response.body["responses"][0]["partition_responses"][0]["base_offset"] == 42
    assert all(e.issues == () and e.response.complete and e.request.complete for e in ex)
    assert all(e.client_id == "client-1" and e.client == "127.0.0.1:40000"
               and e.broker == "127.0.0.1:9092" for e in ex)
    assert ex[1].request.frame_bytes == len(metadata_v1_request(2, ["orders"]))
    assert w.close() == []


def test_whole_conversation_fed_byte_by_byte():
    reqs = [api_versions_v0_request(1), heartbeat_v0_request(2), fetch_v4_request(3)]
    resps = [response(1, api_versions_v0_response_body()), response(2, heartbeat_v0_response_body(27)),
             response(3, fetch_v4_response_body())]
    w = Wire()
    out = []
    for r in reqs:
        for i in range(len(r)):
            out += w.req(r[i:i + 1], 1000 + w.offsets[0])
    for r in resps:
        for i in range(len(r)):
            out += w.resp(r[i:i + 1], 5000 + w.offsets[1])
    ex = exchanges(out)
    assert [e.api_name for e in ex] == ["ApiVersions", "Heartbeat", "Fetch"]
    assert ex[0].request.first_ts_ns == 1000 and ex[0].request.last_ts_ns == 1000 + len(reqs[0]) - 1
    assert ex[0].latency_ns == 5000 - (1000 + len(reqs[0]) - 1)
    assert ex[1].errors == ("REBALANCE_IN_PROGRESS",)
    assert ex[2].request.stream_offset == len(reqs[0]) + len(reqs[1])
    assert ex[2].response.stream_offset == len(resps[0]) + len(resps[1])


def test_responses_out_of_order_still_pair_by_correlation_id():
    w = Wire()
    w.req(heartbeat_v0_request(10) + metadata_v1_request(11), 1)
    out = w.resp(response(11, metadata_v1_response_body()) + response(10, heartbeat_v0_response_body()), 2)
    ex = exchanges(out)
    assert [(e.correlation_id, e.api_name, e.status) for e in ex] == [
        (11, "Metadata", PAIRED), (10, "Heartbeat", PAIRED)]


def test_client_in_direction_one():
    w = Wire(client_dir=1)
    ex = paired(w, heartbeat_v0_request(4), response(4, heartbeat_v0_response_body()))
    assert ex.client == "127.0.0.1:9092" and ex.broker == "127.0.0.1:40000"
    assert ex.api_name == "Heartbeat"


# --------------------------------------------------------------------------- acks=0, unanswered

def test_produce_acks_0_expects_no_response():
    w = Wire()
    out = w.req(produce_v3_request(7, acks=0), 50)
    out += w.close()
    ex = one(out)
    assert ex.status == NO_RESPONSE_EXPECTED
    assert ex.response is None and ex.latency_ns is None
    assert ex.api_name == "Produce" and ex.correlation_id == 7
    assert ex.request.body["acks"] == 0
    records = ex.request.body["topic_data"][0]["partition_data"][0]["records"]
    assert records == RawRecords(tiny_batch())
    assert ex.records.records == 1 and ex.records.batches == 1
    assert ex.topics == ("orders",)
    assert ex.issues == ()                   # in particular: not unanswered


def test_produce_acks_0_is_settled_once_a_later_request_is_answered():
    w = Wire()
    out = w.req(produce_v3_request(7, acks=0), 50)
    out += w.req(heartbeat_v0_request(8), 60)
    out += w.resp(response(8, heartbeat_v0_response_body()), 70)
    ex = exchanges(out)
    assert [(e.correlation_id, e.status) for e in ex] == [(7, NO_RESPONSE_EXPECTED), (8, PAIRED)]
    assert all(e.issues == () for e in ex)
    assert w.close() == []


def test_produce_acks_1_waits_for_its_response():
    w = Wire()
    assert w.req(produce_v3_request(7, acks=1), 50) == []
    assert one(w.resp(response(7, produce_v3_response_body()), 90)).status == PAIRED


@pytest.mark.parametrize("end_of_capture,severity", [(True, Severity.INFO),
                                                     (False, Severity.WARNING)])
def test_pending_requests_at_close_are_unanswered(end_of_capture, severity):
    w = Wire()
    w.req(heartbeat_v0_request(1) + metadata_v1_request(2), 10)
    w.req(api_versions_v0_request(3), 20)
    one(w.resp(response(2, metadata_v1_response_body()), 30))
    out = w.close(99, end_of_capture=end_of_capture)
    ex = exchanges(out)
    assert len(ex) == len(out) == 2
    assert sorted(e.correlation_id for e in ex) == [1, 3]
    for e in ex:
        assert e.status == UNANSWERED
        assert e.response is None and e.latency_ns is None and e.request is not None
        [issue] = e.issues
        assert issue.kind == IssueKind.UNANSWERED_REQUEST
        assert issue.severity == severity
        assert issue.correlation_id == e.correlation_id
        assert issue.api_key == e.api_key and issue.direction == "request"
    assert w.close() == []


def test_response_truncated_at_close_still_pairs():
    w = Wire()
    w.req(metadata_v1_request(5), 1)
    resp = response(5, metadata_v1_response_body())
    assert w.resp(resp[:-6], 2) == []
    out = w.close(3)
    ex = one([e for e in out if isinstance(e, Exchange)])
    assert ex.status == PAIRED
    assert ex.response.missing_bytes == 6 and not ex.response.complete
    # the cut is the exchange's issue, naming it (it was standalone, its ids null)
    assert [e for e in out if isinstance(e, DecodeIssue)] == []
    [cut] = [i for i in ex.issues if i.kind == IssueKind.FRAME_TRUNCATED]
    assert cut.direction == "response" and cut.length_bytes == 6
    assert (cut.correlation_id, cut.api_key, cut.api_version) == (5, ex.api_key, 1)
    # the body error is explained by the truncation, not reported again
    assert IssueKind.BODY_DECODE_ERROR not in kinds(ex)


def test_request_truncated_at_close_names_its_request():
    w = Wire()
    req = metadata_v1_request(9)
    assert w.req(req[:-3], 1) == []
    out = w.close(2)
    [cut] = [e for e in out if isinstance(e, DecodeIssue) and e.kind == IssueKind.FRAME_TRUNCATED]
    assert (cut.correlation_id, cut.api_version, cut.direction) == (9, 1, "request")


# --------------------------------------------------------------------------- orphans

def test_an_orphan_decoded_by_guess_is_redacted_by_default():
    """Its bytes may be anything (a SCRAM server message once showed): the body is one
    marker with its size, and nothing derived from it (topics, records) is kept."""
    ex = one(Wire().resp(response(42, metadata_v1_response_body()), 5))
    assert ex.inferred and ex.api_name == "Metadata"
    marker = ex.response.body["_redacted_body"]
    assert marker.what == "orphan response decoded by guessing its layout"
    assert marker.size_bytes == ex.response.frame_bytes - 4 - ex.response.body_offset
    assert ex.topics == () and ex.records is None and ex.record_fields == ()


def test_an_orphan_kept_raw_is_redacted_by_default():
    ex = one(Wire().resp(response(43, b"\x00\x00\x00\x00v=server-signature-bytes"), 5))
    assert ex.status == ORPHAN_RESPONSE and not ex.inferred
    assert ex.response.raw_body is None
    assert "_redacted_body" in ex.response.body

def test_orphan_response_inferred_when_one_layout_fits():
    w = Wire(PairingContext.create(DEFS, show_secrets=True))
    body = metadata_v1_response_body()
    ex = one(w.resp(response(42, body), 5))
    assert ex.status == ORPHAN_RESPONSE
    assert ex.request is None and ex.latency_ns is None and ex.client_id is None
    assert ex.inferred is True
    assert (ex.api_key, ex.api_name, ex.api_version) == (METADATA, "Metadata", 1)
    assert ex.response.body["topics"][0]["name"] == "orders"
    assert ex.response.raw_body is None
    assert ex.topics == ("orders",)
    [issue] = ex.issues
    assert issue.kind == IssueKind.ORPHAN_RESPONSE
    assert issue.severity == Severity.WARNING
    assert issue.correlation_id == 42 and issue.direction == "response"
    assert "Metadata" in issue.message


def test_orphan_response_kept_raw_when_many_layouts_fit():
    w = Wire(SHOWN_CTX())
    body = heartbeat_v0_response_body(0)       # 2 bytes: fits many APIs
    ex = one(w.resp(response(43, body), 5))
    assert ex.status == ORPHAN_RESPONSE
    assert ex.inferred is False
    assert ex.api_key == -1 and ex.api_version == -1 and ex.api_name == "Unknown"
    assert ex.response.body is None
    assert ex.response.raw_body == body
    assert ex.errors == () and ex.topics == ()
    [issue] = ex.issues
    assert issue.kind == IssueKind.ORPHAN_RESPONSE and issue.severity == Severity.WARNING


def test_orphan_response_kept_raw_when_no_layout_fits():
    w = Wire(SHOWN_CTX())
    body = b"\xff" * 3
    ex = one(w.resp(response(44, body), 5))
    assert ex.inferred is False and ex.response.raw_body == body


def test_orphan_inference_can_be_disabled():
    w = Wire(PairingContext.create(DEFS, infer_orphans=False, show_secrets=True))
    ex = one(w.resp(response(42, metadata_v1_response_body()), 5))
    assert ex.status == ORPHAN_RESPONSE and ex.inferred is False
    assert ex.response.raw_body == metadata_v1_response_body()


def test_response_to_an_answered_request_is_an_orphan():
    w = Wire()
    paired(w, heartbeat_v0_request(1), response(1, heartbeat_v0_response_body()))
    ex = one(w.resp(response(1, heartbeat_v0_response_body()), 300))
    assert ex.status == ORPHAN_RESPONSE


def test_mid_stream_first_response_is_an_info_orphan():
    w = Wire(mid_stream=True, start=(5000, 7000))
    ex = one(w.resp(response(900, metadata_v1_response_body()), 5))
    assert ex.status == ORPHAN_RESPONSE and ex.inferred
    assert ex.response.stream_offset == 7000
    [issue] = ex.issues
    assert issue.severity == Severity.INFO


def test_mid_stream_request_direction_resyncs_and_pairs():
    first = metadata_v1_request(1)
    drop = 7
    w = Wire(mid_stream=True, start=(drop, 0))
    out = w.req(first[drop:] + heartbeat_v0_request(2), 10)
    [resync] = out
    assert isinstance(resync, DecodeIssue)
    assert resync.kind == IssueKind.RESYNC
    assert resync.severity == Severity.INFO          # expected when joining mid-stream
    assert resync.length_bytes == len(first) - drop
    assert resync.direction == "request"
    ex = one(w.resp(response(2, heartbeat_v0_response_body()), 20))
    assert ex.status == PAIRED and ex.api_name == "Heartbeat"


def test_resync_after_sync_is_a_warning():
    w = Wire()
    paired(w, heartbeat_v0_request(1), response(1, heartbeat_v0_response_body()))
    w.gap(0, 5)
    rest = heartbeat_v0_request(2)
    out = w.req(rest[5:] + heartbeat_v0_request(3), 500)
    issues = [e for e in out if isinstance(e, DecodeIssue)]
    assert [i.kind for i in issues] == [IssueKind.RESYNC]
    assert issues[0].severity == Severity.WARNING


def test_response_direction_resyncs_on_a_pending_correlation_id():
    w = Wire()
    w.req(heartbeat_v0_request(1) + heartbeat_v0_request(2), 1)
    lost = response(1, heartbeat_v0_response_body())
    w.gap(1, 3)
    out = w.resp(lost[3:] + response(2, heartbeat_v0_response_body(25)), 5)
    ex = exchanges(out)
    assert [(e.correlation_id, e.status) for e in ex] == [(2, PAIRED)]
    assert ex[0].errors == ("UNKNOWN_MEMBER_ID",)
    issues = [e for e in out if isinstance(e, DecodeIssue)]
    assert [i.kind for i in issues] == [IssueKind.RESYNC]
    assert issues[0].length_bytes == len(lost) - 3
    [unanswered] = w.close()
    assert unanswered.correlation_id == 1 and unanswered.status == UNANSWERED


# --------------------------------------------------------------------------- duplicates, bounds

def test_duplicate_correlation_id_pairs_fifo():
    w = Wire()
    assert w.req(metadata_v1_request(5), 1) == []
    assert w.req(heartbeat_v0_request(5), 2) == []
    out = w.resp(response(5, metadata_v1_response_body()) + response(5, heartbeat_v0_response_body(27)), 3)
    first, second = exchanges(out)
    assert (first.api_name, first.status, kinds(first)) == ("Metadata", PAIRED, [])
    assert first.response.body["topics"][0]["name"] == "orders"
    assert (second.api_name, second.status) == ("Heartbeat", PAIRED)
    assert second.response.body == {"error_code": 27}
    assert kinds(second) == [IssueKind.DUPLICATE_CORRELATION_ID]
    assert second.issues[0].correlation_id == 5
    assert w.close() == []


def test_pending_bound_gives_up_the_oldest():
    w = Wire(PairingContext.create(DEFS, max_pending=3))
    for corr in (1, 2, 3):
        assert w.req(heartbeat_v0_request(corr), corr) == []
    ex = one(w.req(heartbeat_v0_request(4), 4))
    assert ex.status == UNANSWERED and ex.correlation_id == 1
    assert kinds(ex) == [IssueKind.PENDING_OVERFLOW]
    assert ex.issues[0].severity == Severity.WARNING
    out = w.resp(b"".join(response(c, heartbeat_v0_response_body()) for c in (1, 2, 3, 4)), 9)
    ex = exchanges(out)
    assert [(e.correlation_id, e.status) for e in ex] == [
        (1, ORPHAN_RESPONSE), (2, PAIRED), (3, PAIRED), (4, PAIRED)]
    assert w.close() == []


def test_pending_bound_with_duplicates_counts_every_request():
    w = Wire(PairingContext.create(DEFS, max_pending=2))
    w.req(heartbeat_v0_request(1), 1)
    w.req(heartbeat_v0_request(1), 2)
    ex = one(w.req(heartbeat_v0_request(2), 3))
    assert ex.status == UNANSWERED and ex.request.first_ts_ns == 1
    assert [e.status for e in exchanges(w.close())] == [UNANSWERED, UNANSWERED]


# --------------------------------------------------------------------------- summary fields

def test_errors_top_level_and_per_partition():
    w = Wire()
    ex = paired(w, heartbeat_v0_request(1), response(1, heartbeat_v0_response_body(6)))
    assert ex.errors == ("NOT_LEADER_OR_FOLLOWER",)
    body = produce_v3_response_body(
        topics=(("orders", ((0, 0), (1, 6), (2, 3))), ("payments", ((0, 6),))),
        throttle_time_ms=250)
    ex = paired(w, produce_v3_request(2, acks=-1), response(2, body))
    assert ex.errors == ("NOT_LEADER_OR_FOLLOWER", "UNKNOWN_TOPIC_OR_PARTITION")
    assert ex.throttle_time_ms == 250
    assert ex.topics == ("orders", "payments")


def test_no_errors_and_no_throttle_field():
    w = Wire()
    ex = paired(w, api_versions_v0_request(1), response(1, api_versions_v0_response_body()))
    assert ex.errors == ()
    assert ex.throttle_time_ms is None           # ApiVersions v0 has no throttle_time_ms
    ex = paired(w, fetch_v4_request(2), response(2, fetch_v4_response_body(throttle_time_ms=0)))
    assert ex.throttle_time_ms == 0 and ex.errors == ()


def test_fetch_partition_errors_and_topics():
    w = Wire()
    req = fetch_v4_request(3, topics=(("orders", (0, 1)), ("audit", (0,))))
    body = fetch_v4_response_body(topics=(("orders", ((0, 0), (1, 1))), ("audit", ((0, 75),))),
                                  throttle_time_ms=12)
    ex = paired(w, req, response(3, body))
    assert DEFS.error_name(1) == "OFFSET_OUT_OF_RANGE"
    assert ex.errors == ("OFFSET_OUT_OF_RANGE", DEFS.error_name(75))
    assert ex.throttle_time_ms == 12
    assert ex.topics == ("orders", "audit")


def test_topics_from_request_only_when_unanswered():
    w = Wire()
    w.req(metadata_v1_request(1, ["a", "b"]), 1)
    [ex] = exchanges(w.close())
    assert ex.topics == ("a", "b")


def test_topic_ids_resolved_through_an_earlier_metadata_v10_response():
    w = Wire()
    md_req = request(METADATA, 10, 1, metadata_v10_request_body(((ZERO_ID, "orders"),)),
                     flexible=True)
    md_resp = response(1, metadata_v10_response_body(
        (("orders", TOPIC_ID_ORDERS, 0), ("payments", bytes(range(50, 66)), 0)),
        throttle_time_ms=3), flexible=True)
    ex = paired(w, md_req, md_resp)
    assert ex.issues == ()
    assert ex.throttle_time_ms == 3
    assert ex.response.body["topics"][0]["topic_id"] == uuid_text(TOPIC_ID_ORDERS)
    assert ex.topics == ("orders", "payments")     # the zero uuid of the request is ignored
    assert uuid_text(ZERO_ID) not in ex.topics
    # a later request naming topics by id only
    by_id = request(METADATA, 10, 2, metadata_v10_request_body(
        ((TOPIC_ID_ORDERS, None), (TOPIC_ID_UNKNOWN, None))), flexible=True)
    w.req(by_id, 300)
    [ex2] = exchanges(w.close())
    assert ex2.status == UNANSWERED
    assert ex2.topics == ("orders", uuid_text(TOPIC_ID_UNKNOWN))


def test_topic_ids_learnt_on_one_connection_resolve_on_another():
    ctx = PairingContext.create(DEFS)
    w1, w2 = Wire(ctx), Wire(ctx)
    paired(w1, request(METADATA, 10, 1, metadata_v10_request_body(()), flexible=True),
           response(1, metadata_v10_response_body(), flexible=True))
    w2.req(request(METADATA, 10, 1, metadata_v10_request_body(((TOPIC_ID_ORDERS, None),)),
                   flexible=True), 1)
    [ex] = exchanges(w2.close())
    assert ex.topics == ("orders",)


# --------------------------------------------------------------------------- decode problems

def test_unknown_api_key_request_and_its_response_are_kept_raw():
    w = Wire()
    key = 999
    assert key not in DEFS.apis
    req_body = b"\x01\x02\x03\x04\x05"
    resp_body = b"\x00\x00\x09\x09"
    ex = paired(w, request(key, 2, 8, req_body), response(8, resp_body))
    assert ex.api_key == key and ex.api_version == 2
    assert ex.api_name == DEFS.api_name(key)
    assert ex.request.body is None and ex.request.raw_body == req_body
    assert ex.response.body is None and ex.response.raw_body == resp_body
    assert ex.request.header["client_id"] == "client-1"
    assert not ex.request.complete
    assert IssueKind.UNKNOWN_API_KEY in kinds(ex)
    issue = ex.issues[0]
    assert issue.kind == IssueKind.UNKNOWN_API_KEY
    assert issue.api_key == key and issue.direction == "request"
    assert ex.errors == () and ex.topics == () and ex.throttle_time_ms is None


def test_version_above_the_max_is_decoded_as_the_newest():
    info = DEFS.apis[HEARTBEAT]
    v = info.max_version + 2
    assert info.is_flexible(info.max_version)
    w = Wire(SHOWN_CTX())
    # Heartbeat v4 layout: compact strings, group_instance_id nullable, tagged fields
    body = cstring("g1") + i32(5) + cstring("m-1") + cstring(None) + b"\x00"
    resp_body = i32(7) + i16(22) + b"\x00"       # throttle_time_ms, error_code, tags
    ex = paired(w, request(HEARTBEAT, v, 1, body, flexible=True),
                response(1, resp_body, flexible=True))
    assert ex.api_version == v
    assert ex.assumed_version == info.max_version
    assert ex.request.body == {"group_id": "g1", "generation_id": 5, "member_id": "m-1",
                               "group_instance_id": None}
    assert ex.response.body == {"throttle_time_ms": 7, "error_code": 22}
    assert ex.throttle_time_ms == 7
    assert ex.errors == (DEFS.error_name(22),)
    assert set(kinds(ex)) == {IssueKind.UNSUPPORTED_VERSION}
    for issue in ex.issues:
        assert issue.api_version == v and issue.severity == Severity.WARNING
        assert str(info.max_version) in issue.message


def test_trailing_bytes_after_a_request_body():
    w = Wire()
    body = heartbeat_v0_request_body()
    req = request(HEARTBEAT, 0, 1, body + b"\xde\xad\xbe")
    ex = paired(w, req, response(1, heartbeat_v0_response_body()))
    [issue] = ex.issues
    assert issue.kind == IssueKind.TRAILING_BYTES
    header_len = 2 + 2 + 4 + 2 + len("client-1")
    assert issue.frame_offset == header_len + len(body)
    assert issue.length_bytes == 3
    assert issue.direction == "request" and issue.correlation_id == 1
    assert ex.request.body == {"group_id": "g1", "generation_id": 3, "member_id": "m-1"}
    assert ex.request.body_offset == header_len


def test_trailing_bytes_after_a_response_body():
    w = Wire()
    ex = paired(w, heartbeat_v0_request(1), response(1, heartbeat_v0_response_body() + b"\x00"))
    [issue] = ex.issues
    assert issue.kind == IssueKind.TRAILING_BYTES
    assert issue.frame_offset == 4 + 2 and issue.length_bytes == 1
    assert issue.direction == "response"


def test_truncated_request_body_is_a_decode_error_with_field_path():
    w = Wire()
    # the array says two topics, only one is there
    body = i32(2) + string("orders")
    req = request(METADATA, 1, 1, body)
    ex = paired(w, req, response(1, metadata_v1_response_body()))
    errs = [i for i in ex.issues if i.kind == IssueKind.BODY_DECODE_ERROR]
    assert len(errs) == 1
    assert errs[0].field_path.startswith("topics")
    assert errs[0].severity == Severity.ERROR
    header_len = 2 + 2 + 4 + 2 + len("client-1")
    assert header_len <= errs[0].frame_offset <= header_len + len(body)
    assert not ex.request.complete
    assert ex.request.body is not None                      # partial decode kept
    assert ex.response.complete and ex.response.body["controller_id"] == 1


def test_truncated_response_body_field_path():
    w = Wire()
    body = metadata_v1_response_body()[:-3]
    ex = paired(w, metadata_v1_request(1), response(1, body))
    [err] = ex.issues
    assert err.kind == IssueKind.BODY_DECODE_ERROR
    assert err.field_path.startswith("topics[0].partitions[0]")
    assert err.direction == "response"
    assert not ex.response.complete


def test_api_versions_kip_511_unsupported_version_answer():
    """ApiVersions v3 request; the broker does not know v3 and answers UNSUPPORTED_VERSION
    (35) in the v0 body layout, with response header v0."""
    w = Wire(SHOWN_CTX())
    req = request(API_VERSIONS, 3, 1, api_versions_v3_request_body(), flexible=True)
    resp = response(1, api_versions_v0_response_body(35, ((18, 0, 2),)))
    ex = paired(w, req, resp)
    assert ex.issues == ()
    assert ex.api_version == 3
    assert ex.response.body == {"error_code": 35, "api_keys": [
        {"api_key": 18, "min_version": 0, "max_version": 2}]}
    assert ex.errors == ("UNSUPPORTED_VERSION",)
    assert ex.request.body["client_software_name"] == "kafkasniff-test"


def test_api_versions_v3_normal_answer_uses_response_header_v0():
    w = Wire()
    req = request(API_VERSIONS, 3, 1, api_versions_v3_request_body(), flexible=True)
    ex = paired(w, req, response(1, api_versions_v3_response_body(throttle_time_ms=5)))
    assert ex.issues == ()
    assert ex.response.body_offset == 4
    assert ex.throttle_time_ms == 5


def test_flexible_request_and_response_headers():
    w = Wire()
    req = request(METADATA, 10, 1, metadata_v10_request_body(((ZERO_ID, "orders"),)),
                  flexible=True)
    ex = paired(w, req, response(1, metadata_v10_response_body(), flexible=True))
    assert ex.response.body_offset == 5
    assert ex.request.body_offset == 2 + 2 + 4 + 2 + len("client-1") + 1


def test_header_decode_error_for_a_tiny_request():
    w = Wire()
    # size 8: api_key, version, correlation_id but no room for the client_id length
    # it names its request (api_key, version, correlation_id): kept, so its response pairs
    assert w.req(i32(8) + i16(HEARTBEAT) + i16(0) + i32(1), 1) == []
    [ex] = exchanges(w.resp(response(1, heartbeat_v0_response_body()), 2))
    assert (ex.correlation_id, ex.api_key, ex.status) == (1, HEARTBEAT, PAIRED)
    [issue] = ex.issues
    assert issue.kind == IssueKind.HEADER_DECODE_ERROR
    assert issue.severity == Severity.ERROR and issue.direction == "request"
    assert issue.correlation_id == 1 and issue.length_bytes == 12


def test_header_decode_error_without_a_correlation_id_stands_alone():
    w = Wire()
    [issue] = w.req(i32(6) + i16(HEARTBEAT) + i16(0) + b"\x00\x01", 1)
    assert issue.kind == IssueKind.HEADER_DECODE_ERROR and issue.correlation_id is None


def test_request_gap_inside_a_body_keeps_pairing():
    w = Wire()
    first = metadata_v1_request(1, ["orders", "payments", "audit"])
    cut = 4 + 18 + 4 + 3                          # inside the first topic name
    w.req(first[:cut], 1)
    out = w.gap(0, 6, 2)
    out += w.req(first[cut + 6:] + heartbeat_v0_request(2), 3)
    issues = [e for e in out if isinstance(e, DecodeIssue)]
    assert [i.kind for i in issues] == [IssueKind.FRAME_DAMAGED]
    assert issues[0].direction == "request" and issues[0].length_bytes == 6
    out = w.resp(response(1, metadata_v1_response_body()) + response(2, heartbeat_v0_response_body()), 4)
    ex = exchanges(out)
    assert [(e.correlation_id, e.status) for e in ex] == [(1, PAIRED), (2, PAIRED)]
    assert ex[0].request.missing_bytes == 6        # the gap only: the rest was captured
    assert not ex[0].request.complete
    assert IssueKind.BODY_DECODE_ERROR not in kinds(ex[0])
    assert ex[1].issues == ()


def test_pending_overflow_gives_up_the_oldest_even_with_duplicate_ids():
    """max_pending=2: corr 5 (t1), 6 (t2), 5 again (t3) -> t1 given up; then 7 (t4) -> the
    oldest still waiting is corr 6 (t2), not the second corr 5 (t3)."""
    w = Wire(PairingContext.create(DEFS, max_pending=2))
    out = w.req(heartbeat_v0_request(5), 1) + w.req(heartbeat_v0_request(6), 2)
    out += w.req(heartbeat_v0_request(5), 3) + w.req(heartbeat_v0_request(7), 4)
    ex = exchanges(out)
    assert [(e.correlation_id, e.request.first_ts_ns) for e in ex] == [(5, 1), (6, 2)]
    assert all(kinds(e)[-1] == IssueKind.PENDING_OVERFLOW for e in ex)


def test_pending_overflow_skips_requests_answered_meanwhile():
    """While over the bound, answers arriving out of order are skipped when giving up the
    oldest: max_pending=3; 1-4 -> 1 given up; 3 answered; 5; 6 -> 2 given up; 7 -> 4 (3 was
    answered), and the rest still pair."""
    w = Wire(PairingContext.create(DEFS, max_pending=3))
    given_up = []
    for corr in (1, 2, 3, 4):
        given_up += exchanges(w.req(heartbeat_v0_request(corr), corr))
    [ex3] = exchanges(w.resp(response(3, heartbeat_v0_response_body()), 10))
    assert ex3.status == PAIRED and ex3.correlation_id == 3
    for corr in (5, 6, 7):
        given_up += exchanges(w.req(heartbeat_v0_request(corr), 10 + corr))
    assert [(e.correlation_id, e.status) for e in given_up] == [
        (1, UNANSWERED), (2, UNANSWERED), (4, UNANSWERED)]
    out = w.resp(b"".join(response(c, heartbeat_v0_response_body()) for c in (5, 6, 7)), 20)
    assert [(e.correlation_id, e.status) for e in exchanges(out)] == [
        (5, PAIRED), (6, PAIRED), (7, PAIRED)]
    assert w.close() == []


def test_request_with_a_damaged_header_still_pairs():
    w = Wire()
    first = metadata_v1_request(1)
    w.req(first[:15], 1)                     # size, api_key, version, corr, 1 byte of client_id
    w.gap(0, 6, 2)
    w.req(first[21:], 3)
    ex = one(w.resp(response(1, metadata_v1_response_body()), 4))
    assert ex.status == PAIRED and ex.api_name == "Metadata"


def test_raw_sasl_tokens_waiting_for_the_broker_are_bounded():
    """Raw KIP-43 client tokens the broker never answers: beyond max_pending the oldest is
    given up as an unanswered SaslToken exchange, like requests."""
    from kafkasniff.content.sasl import SaslSession

    w = Wire(PairingContext.create(DEFS, max_pending=2))
    w.conn.sasl = SaslSession()
    w.conn.sasl.begin_raw_phase("PLAIN")
    tokens = [b"\x00user%d\x00secret" % i for i in range(3)]
    assert w.req(i32(len(tokens[0])) + tokens[0], 1) == []
    assert w.req(i32(len(tokens[1])) + tokens[1], 2) == []
    ex = one(w.req(i32(len(tokens[2])) + tokens[2], 3))
    assert (ex.api_name, ex.status, ex.response) == ("SaslToken", UNANSWERED, None)
    assert ex.request.first_ts_ns == 1
    assert [e.request.first_ts_ns for e in exchanges(w.close())] == [2, 3]


def test_secret_response_with_a_bad_header_keeps_its_body_redacted():
    """SaslAuthenticate v2 whose response header (flexible: tagged fields) cannot be decoded:
    the body is kept raw, and raw bytes of a secret-bearing API are redacted like any other
    undecoded body of one."""
    from kafkasniff.content.sasl import Redacted

    w = Wire()
    secret = b"server-final-v=c2VjcmV0LXNpZ25hdHVyZQ=="
    req = request(36, 2, 7, bytes([len(b"token") + 1]) + b"token" + b"\x00", flexible=True)
    assert w.req(req, 100) == []
    # correlation_id, then a tagged-field count far beyond the bytes left
    out = w.resp(i32(4 + 5 + len(secret)) + i32(7) + b"\xff\xff\xff\xff\x07" + secret, 200)
    ex = one(out)
    assert ex.status == PAIRED
    assert any(i.kind == IssueKind.HEADER_DECODE_ERROR for i in ex.issues)
    assert ex.response.raw_body is None
    assert isinstance(ex.response.body["_raw_body"], Redacted)


def test_client_id_not_utf8_is_a_spec_departure():
    w = Wire()
    raw = i16(HEARTBEAT) + i16(0) + i32(5) + i16(3) + b"c\xff\xfe" + heartbeat_v0_request_body()
    ex = paired(w, i32(len(raw)) + raw, response(5, heartbeat_v0_response_body()))
    assert ex.client_id == "c\\xff\\xfe"
    [issue] = [i for i in ex.issues if i.field_path == "header.client_id"]
    assert issue.kind == IssueKind.SPEC_DEPARTURE and issue.frame_offset == 10
    assert issue.direction == "request"
