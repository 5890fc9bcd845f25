"""kafkasniff.content.frames.ContentDecoder: the one frame-decoding path (headers, bodies,
redaction, record data, Kafka 0.7, SASL tokens, orphan guesses, exchange summaries).

Frames are hand-built with tests/pairing/frames.py (Kafka 0.8+), tests/protocol/encoder.py
(bodies from the definitions) and a small 0.7 encoder below."""

from __future__ import annotations

import zlib

import pytest

from kafkasniff.content.frames import ContentDecoder, ExchangeSummary
from kafkasniff.content.sasl import Redacted
from kafkasniff.errors import DecodeError
from kafkasniff.issues import IssueKind
from kafkasniff.protocol.primitives import RawRecords
from kafkasniff.protocol.schema import load_definitions

from tests.pairing.frames import (
    FETCH,
    HEARTBEAT,
    METADATA,
    PRODUCE,
    TOPIC_ID_ORDERS,
    TOPIC_ID_UNKNOWN,
    ZERO_ID,
    api_versions_v0_response_body,
    fetch_v4_response_body,
    heartbeat_v0_response_body,
    i16,
    i32,
    i64,
    metadata_v1_request,
    metadata_v1_response_body,
    metadata_v10_request_body,
    metadata_v10_response_body,
    produce_v3_request,
    produce_v3_response_body,
    request,
    string,
    tiny_batch,
    uuid_text,
)
from tests.protocol.encoder import encode

DEFS = load_definitions()
SASL_AUTHENTICATE = 36
ORDERS_ID = uuid_text(TOPIC_ID_ORDERS)
UNKNOWN_ID = uuid_text(TOPIC_ID_UNKNOWN)


@pytest.fixture
def content() -> ContentDecoder:
    return ContentDecoder(DEFS)


def payload(frame: bytes) -> bytes:
    """The frame payload (after the int32 size prefix)."""
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    return frame[4:]


def bad_client_id_request(api_key: int) -> bytes:
    """A request payload whose client_id claims 50 bytes but 3 follow."""
    return i16(api_key) + i16(1) + i32(5) + i16(50) + b"abc"


def metadata_v10_response(corr: int, **kw) -> bytes:
    """Payload of a Metadata v10 response: header v1 (tagged fields) then the body."""
    return i32(corr) + b"\x00" + metadata_v10_response_body(**kw)


def metadata_v10_request(corr: int, topics) -> bytes:
    return payload(request(METADATA, 10, corr, metadata_v10_request_body(topics), flexible=True))


# --------------------------------------------------------------------------- requests

def test_decode_request(content):
    """A whole request: header fields, body, plan, body offset after the client_id."""
    d = content.decode_request(payload(metadata_v1_request(7, topics=["orders", "pay"])))
    assert d.header == {"api_key": 3, "api_version": 1, "correlation_id": 7,
                        "client_id": "client-1"}
    assert d.body == {"topics": [{"name": "orders"}, {"name": "pay"}]}
    assert (d.complete, d.issues, d.raw_body, d.header_error) == (True, [], None, None)
    assert d.body_offset == 2 + 2 + 4 + 2 + len("client-1")
    assert (d.api_key, d.api_version, d.layout_version) == (3, 1, 1)
    assert d.plan is DEFS.plan("MetadataRequest", 1) and d.layout_body is d.body
    assert d.records is None and d.located == ()


def test_header_error_keeps_ids_and_raw_bytes(content):
    """A client_id running past the frame: header_error, api_key/version/correlation_id
    from the first 8 bytes, client_id None, the bytes after the first 8 kept raw."""
    raw = bad_client_id_request(METADATA)
    d = content.decode_request(raw)
    assert isinstance(d.header_error, DecodeError)
    assert d.header_error.field_path == "header.client_id" and d.header_error.offset == 8
    assert d.header == {"api_key": 3, "api_version": 1, "correlation_id": 5, "client_id": None}
    assert (d.api_key, d.api_version) == (3, 1)
    assert d.body is None and d.raw_body == raw[8:] and d.body_offset == 8
    assert d.complete is False and d.plan is None and d.layout_body is None


def test_header_error_of_sasl_authenticate_is_redacted(content):
    """For SaslAuthenticate (a secret-bearing API) the raw bytes become a Redacted marker
    of their size, unless show_secrets."""
    raw = bad_client_id_request(SASL_AUTHENTICATE)
    d = content.decode_request(raw)
    assert d.raw_body is None
    assert d.body == {"_raw_body": Redacted("undecoded body of a secret-bearing API", 5)}
    assert d.header["api_key"] == SASL_AUTHENTICATE and d.header_error is not None
    shown = ContentDecoder(DEFS, show_secrets=True).decode_request(raw)
    assert shown.body is None and shown.raw_body == raw[8:]


def test_request_shorter_than_eight_bytes(content):
    """No room for the ids: an empty header, the header error, nothing decoded."""
    d = content.decode_request(b"\x00\x03\x00")
    assert d.header == {} and d.body is None and d.raw_body == b""
    assert (d.api_key, d.api_version) == (-1, -1)
    assert "needs 8 bytes" in str(d.header_error)


def test_unknown_api_key_kept_raw(content):
    """An api_key the definitions do not know: header decoded, body raw, an
    unknown_api_key issue at the body offset."""
    d = content.decode_request(payload(request(999, 0, 4, b"body-bytes")))
    assert d.header["api_key"] == 999 and d.header["client_id"] == "client-1"
    assert d.body is None and d.raw_body == b"body-bytes" and d.plan is None
    [issue] = d.issues
    assert issue.kind == IssueKind.UNKNOWN_API_KEY and issue.offset == d.body_offset == 18


def test_invalid_utf8_client_id_is_a_spec_departure(content):
    raw = i16(HEARTBEAT) + i16(0) + i32(1) + i16(3) + b"a\xffb" + string("g") + i32(1) + \
        string("m")
    d = content.decode_request(raw)
    assert d.header["client_id"] == "a\\xffb"
    assert d.issues[0].kind == IssueKind.SPEC_DEPARTURE
    assert (d.issues[0].field_path, d.issues[0].offset) == ("header.client_id", 10)
    assert d.body == {"group_id": "g", "generation_id": 1, "member_id": "m"}


# --------------------------------------------------------------------------- responses

def test_decode_response(content):
    d = content.decode_response(i32(9) + heartbeat_v0_response_body(27), HEARTBEAT, 0)
    assert d.header == {"correlation_id": 9} and d.body == {"error_code": 27}
    assert (d.body_offset, d.api_key, d.api_version, d.complete) == (4, HEARTBEAT, 0, True)


def test_decode_flexible_response_header(content):
    d = content.decode_response(metadata_v10_response(11), METADATA, 10)
    assert d.header == {"correlation_id": 11} and d.body_offset == 5
    assert d.body["topics"][0]["topic_id"] == ORDERS_ID and d.issues == []


def test_decode_response_with_a_bad_flexible_header(content):
    """A v1 response header whose tagged-field count runs past the frame: header_error,
    the correlation_id, the bytes after it raw."""
    d = content.decode_response(i32(9) + b"\x05", METADATA, 10)
    assert isinstance(d.header_error, DecodeError)
    assert d.header_error.field_path == "header._tagged_fields"
    assert d.header == {"correlation_id": 9}
    assert d.body is None and d.raw_body == b"\x05" and d.body_offset == 4
    assert (d.api_key, d.api_version, d.complete) == (METADATA, 10, False)


def test_short_response_of_a_secret_api_is_redacted(content):
    d = content.decode_response(b"\x00\x00", SASL_AUTHENTICATE, 2)
    assert d.header == {"correlation_id": None} and d.raw_body is None
    assert d.body == {"_raw_body": Redacted("undecoded body of a secret-bearing API", 0)}


def test_sasl_authenticate_auth_bytes_redacted(content):
    """A decoded SaslAuthenticate request hides the PLAIN password unless show_secrets."""
    plan = DEFS.plan("SaslAuthenticateRequest", 1)
    body = encode(plan, {"auth_bytes": b"\x00alice\x00s3cret"})
    frame = payload(request(SASL_AUTHENTICATE, 1, 3, body))
    d = content.decode_request(frame, mechanism="PLAIN")
    token = d.body["auth_bytes"]
    assert token["username"] == "alice"
    assert token["password"] == Redacted("password", 6)
    shown = ContentDecoder(DEFS, show_secrets=True).decode_request(frame, mechanism="PLAIN")
    assert shown.body["auth_bytes"]["password"] == "s3cret"


# --------------------------------------------------------------------------- SASL tokens

def test_decode_sasl_token(content):
    """A raw KIP-43 token: described by its mechanism, secrets redacted, no header."""
    d = content.decode_sasl_token(b"\x00alice\x00s3cret", True, "PLAIN")
    assert d.header == {} and d.complete and d.body_offset == 0 and d.issues == []
    assert d.body["mechanism"] == "PLAIN" and d.body["direction"] == "client"
    assert d.body["username"] == "alice" and d.body["password"] == Redacted("password", 6)
    assert (d.api_key, d.plan) == (-1, None)
    opaque = content.decode_sasl_token(b"\x60\x82kerberos", True, "GSSAPI")
    assert opaque.body["message"] == "opaque" and isinstance(opaque.body["token"], Redacted)


# --------------------------------------------------------------------------- Kafka 0.7

def msg07(data: bytes) -> bytes:
    """A 0.7 magic-0 message: int32 size, magic, crc32, payload."""
    body = b"\x00" + zlib.crc32(data).to_bytes(4, "big") + data
    return i32(len(body)) + body


def fetch07_payload(topic: str, partition: int, offset: int, max_size: int) -> bytes:
    return i16(1) + string(topic) + i32(partition) + i64(offset) + i32(max_size)


def test_decode_request_07(content):
    d = content.decode_request_07(fetch07_payload("orders", 2, 77, 1024))
    assert d.header == {"request_type": 1}
    assert d.body == {"topic": "orders", "partition": 2, "offset": 77, "max_size": 1024}
    assert (d.api_key, d.api_version, d.body_offset, d.complete) == (1, -1, 2, True)
    assert d.issues == [] and d.raw_body is None and d.plan is None


def test_decode_request_07_truncated(content):
    d = content.decode_request_07(fetch07_payload("orders", 2, 77, 1024)[:-3])
    assert d.complete is False
    assert [i.kind for i in d.issues] == [IssueKind.BODY_DECODE_ERROR]
    assert d.body["topic"] == "orders"


def test_decode_response_07(content):
    req = content.decode_request_07(fetch07_payload("orders", 0, 0, 1024))
    d = content.decode_response_07(i16(0) + msg07(b"hello") + msg07(b"world"), 1, req.body)
    assert d.header == {"error_code": 0} and d.complete and d.issues == []
    assert [m["payload"] for m in d.body["messages"]] == [b"hello", b"world"]
    assert (d.api_key, d.api_version, d.body_offset) == (1, -1, 2)
    err = content.decode_response_07(i16(3), 4, None)   # OFFSETS error answer
    assert err.header == {"error_code": 3} and err.body == {"error_code": 3}


def test_decode_response_07_shorter_than_an_error_code(content):
    d = content.decode_response_07(b"\x00", 1, None)
    assert d.complete is False
    assert [i.kind for i in d.issues] == [IssueKind.BODY_DECODE_ERROR]


# --------------------------------------------------------------------------- orphans

@pytest.mark.parametrize("api_key, version, body", [
    (METADATA, 1, metadata_v1_response_body()),
    (FETCH, 4, fetch_v4_response_body()),
    (18, 0, api_versions_v0_response_body()),
], ids=["metadata_v1", "fetch_v4", "api_versions_v0"])
def test_guess_response_inferred(content, api_key, version, body):
    """A response only one API's layouts fit is decoded as that API's newest fitting
    version."""
    g = content.guess_response(i32(77) + body)
    assert g.inferred and g.fitting_apis == (api_key,)
    assert g.versions[-1] == version
    assert (g.frame.api_key, g.frame.api_version, g.frame.layout_version) == (
        api_key, version, version)
    assert g.frame.header == {"correlation_id": 77} and g.frame.complete
    assert g.frame.plan is DEFS.plan(DEFS.apis[api_key].response, version)


def test_guess_response_several_versions_of_one_api(content):
    """Produce v2-v4 responses share one layout: inferred, decoded as the newest (v4)."""
    g = content.guess_response(i32(5) + produce_v3_response_body())
    assert g.fitting_apis == (PRODUCE,) and g.versions == (2, 3, 4)
    assert g.frame.api_version == 4
    assert g.frame.body["responses"][0]["name"] == "orders"


def test_guess_response_ambiguous(content):
    """A bare error code fits several APIs: not inferred, kept raw, the candidates listed."""
    g = content.guess_response(i32(8) + heartbeat_v0_response_body(0))
    assert not g.inferred and g.versions == ()
    assert HEARTBEAT in g.fitting_apis and len(g.fitting_apis) > 1
    assert g.frame.body is None and g.frame.raw_body == b"\x00\x00"
    assert g.frame.header == {"correlation_id": 8} and g.frame.api_key == -1


def test_guess_response_no_fit(content):
    g = content.guess_response(i32(1) + b"\xff\xff\xff")
    assert (g.inferred, g.fitting_apis) == (False, ())
    assert g.frame.raw_body == b"\xff\xff\xff" and g.frame.body_offset == 4


# --------------------------------------------------------------------------- summaries

def test_summarize_errors_throttle_topics(content):
    resp = content.decode_response(metadata_v10_response(
        1, topics=(("orders", TOPIC_ID_ORDERS, 0), ("bad", ZERO_ID, 3)), throttle_time_ms=250),
        METADATA, 10)
    s = content.summarize(METADATA, None, resp)
    assert s == ExchangeSummary(errors=("UNKNOWN_TOPIC_OR_PARTITION",), throttle_time_ms=250,
                                topics=("orders", "bad"), wire_topics=("orders", "bad"),
                                topic_ids=(ORDERS_ID,))


def test_summarize_resolves_topic_ids_learnt_from_a_metadata_response(content):
    """Topic ids of a request are shown as names once a response taught them; the wire
    topics and ids stay as carried."""
    req = content.decode_request(metadata_v10_request(
        2, topics=((TOPIC_ID_ORDERS, None), (TOPIC_ID_UNKNOWN, None))))
    before = content.summarize(METADATA, req, None)
    assert before.topics == (ORDERS_ID, UNKNOWN_ID)
    resp = content.decode_response(metadata_v10_response(1), METADATA, 10)
    content.summarize(METADATA, None, resp)           # teaches ORDERS_ID -> orders
    assert content.registry.names == {ORDERS_ID: "orders"}
    after = content.summarize(METADATA, req, None)
    assert after.topics == ("orders", UNKNOWN_ID)
    assert after.wire_topics == () and after.topic_ids == (ORDERS_ID, UNKNOWN_ID)
    assert after.errors == () and after.throttle_time_ms is None


def test_summarize_ignores_frames_without_a_plan_and_unknown_apis(content):
    raw = content.decode_request(bad_client_id_request(METADATA))
    assert content.summarize(METADATA, raw, None) == ExchangeSummary()
    req = content.decode_request(payload(metadata_v1_request(1)))
    assert content.summarize(999, req, None) == ExchangeSummary()
    assert content.summarize(METADATA, req, None).topics == ("orders",)


def test_resolved_topic_on_located_records(content):
    """Records under a topic id known to the registry carry its name for display."""
    content.summarize(METADATA, None,
                      content.decode_response(metadata_v10_response(1), METADATA, 10))
    plan = DEFS.plan("FetchResponse", 13)
    part = {"partition_index": 4, "error_code": 0, "high_watermark": 1,
            "last_stable_offset": 1, "log_start_offset": 0, "aborted_transactions": None,
            "preferred_read_replica": -1, "records": RawRecords(tiny_batch())}
    body = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic_id": ORDERS_ID, "partitions": [part]},
        {"topic_id": UNKNOWN_ID, "partitions": [dict(part, partition_index=1)]}]}
    d = content.decode_response(i32(3) + b"\x00" + encode(plan, body), FETCH, 13)
    assert d.issues == []
    assert [(loc.topic, loc.topic_id, loc.resolved_topic, loc.partition, loc.display_topic)
            for loc in d.located] == [
        (None, ORDERS_ID, "orders", 4, "orders"),
        (None, UNKNOWN_ID, None, 1, UNKNOWN_ID)]


# --------------------------------------------------------------------------- records

def test_records_summary_without_with_records(content):
    """Record batches are located and summarised; their records are not decoded."""
    d = content.decode_request(payload(produce_v3_request(1)))
    [loc] = d.located
    assert (loc.topic, loc.partition, loc.field_path) == (
        "orders", 0, "topic_data[0].partition_data[0].records")
    assert loc.records.data == tiny_batch()
    assert d.records.batches == 1 and d.records.records == 1 and d.records.codecs == ("none",)
    assert loc.records.decoded.batches[0].records is None


def test_with_records_decodes_every_record():
    d = ContentDecoder(DEFS, with_records=True).decode_request(payload(produce_v3_request(
        1, topics=(("orders", ((0, tiny_batch(b"v1")), (1, tiny_batch(b"v2", 5)))),))))
    recs = [loc.records.decoded.batches[0].records for loc in d.located]
    assert [[(r.offset, r.value) for r in rs] for rs in recs] == [[(0, b"v1")], [(5, b"v2")]]
    assert d.records.batches == 2 and d.records.first_offset == 0 and d.records.last_offset == 5


def test_cut_batch_in_a_request_is_an_issue(content):
    """A Produce request whose records end inside a batch: a truncated_batch issue at the
    frame offset where the batch starts."""
    batch = tiny_batch()
    d = content.decode_request(payload(produce_v3_request(
        1, topics=(("orders", ((0, batch[:-5]),)),))))
    [issue] = [i for i in d.issues if i.kind == IssueKind.TRUNCATED_BATCH]
    loc = d.located[0]
    assert issue.field_path == "topic_data[0].partition_data[0].records"
    assert issue.offset == loc.records.offset
    assert d.records.partial is True


def test_a_bug_while_decoding_a_body_keeps_the_frame(content, monkeypatch):
    """No exchange disappears behind an internal error: the body is kept raw with an
    internal_error issue, the header is decoded."""
    def broken(*args, **kwargs):
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(content.decoder, "decode", broken)
    frame = metadata_v1_request(7)
    d = content.decode_request(frame[4:])
    assert d.header["correlation_id"] == 7 and d.body is None and d.raw_body == frame[4 + 8 + 2 + 8:]
    [issue] = d.issues
    assert issue.kind == IssueKind.INTERNAL_ERROR and "ZeroDivisionError: boom" in issue.message
