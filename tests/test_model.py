"""kafkasniff.model: the record values every sink consumes (status and kind strings, the
derived properties of an exchange, issue dicts, display topics, connection ids)."""

from __future__ import annotations

import json

import pytest

from kafkasniff.issues import IssueKind, Severity
from kafkasniff.model import (
    ConnectionKind,
    ConnectionSummary,
    DecodeIssue,
    Exchange,
    ExchangeStatus,
    LocatedRecords,
    Message,
    TopicName,
    WireFormat,
    connection_id_of,
)
from kafkasniff.protocol.primitives import RawRecords


def message(frame_bytes: int, first_ts_ns: int, last_ts_ns: int | None = None) -> Message:
    return Message(frame_bytes=frame_bytes, first_ts_ns=first_ts_ns,
                   last_ts_ns=first_ts_ns if last_ts_ns is None else last_ts_ns,
                   stream_offset=0, header={"correlation_id": 7}, body={})


def exchange(request: Message | None, response: Message | None, **kw) -> Exchange:
    fields = dict(conn_id=3, client="10.0.0.1:40000", broker="10.0.0.2:9092",
                  status=ExchangeStatus.PAIRED, api_key=3, api_name="Metadata", api_version=1,
                  correlation_id=7, client_id="c1", request=request, response=response,
                  latency_ns=None)
    fields.update(kw)
    return Exchange(**fields)


# --------------------------------------------------------------------------- enums

def test_exchange_status_strings_are_what_outputs_show():
    """Each ExchangeStatus is its documented string, and formats as that string."""
    assert [s.value for s in ExchangeStatus] == [
        "paired", "no_response_expected", "unanswered", "orphan_response"]
    assert str(ExchangeStatus.ORPHAN_RESPONSE) == "orphan_response"
    assert f"{ExchangeStatus.NO_RESPONSE_EXPECTED}" == "no_response_expected"
    assert ExchangeStatus("unanswered") is ExchangeStatus.UNANSWERED
    assert json.dumps({"s": ExchangeStatus.PAIRED}) == '{"s": "paired"}'


def test_wire_format_strings():
    """WireFormat values are ``kafka`` and ``kafka07``; exchanges default to ``kafka``."""
    assert [w.value for w in WireFormat] == ["kafka", "kafka07"]
    assert str(WireFormat.KAFKA07) == "kafka07"
    assert exchange(None, None).wire_format == "kafka"


def test_connection_kind_strings():
    """ConnectionKind values are ``kafka``, ``kafka07``, ``tls`` and ``other``."""
    assert [k.value for k in ConnectionKind] == ["kafka", "kafka07", "tls", "other"]
    assert str(ConnectionKind.TLS) == "tls" and ConnectionKind.OTHER == "other"


# --------------------------------------------------------------------------- Exchange

def test_exchange_ts_ns_is_the_request_first_byte():
    """ts_ns is the request's first byte even when the response came earlier in the data."""
    ex = exchange(message(100, 5_000, 6_000), message(40, 9_000))
    assert ex.ts_ns == 5_000


def test_exchange_ts_ns_falls_back_to_the_response_then_zero():
    """Without a request ts_ns is the response's first byte; with neither, 0."""
    assert exchange(None, message(40, 9_000, 9_500)).ts_ns == 9_000
    assert exchange(None, None).ts_ns == 0


def test_exchange_byte_counts():
    """request_bytes / response_bytes are the frames' sizes, 0 for a frame not captured."""
    ex = exchange(message(123, 1), message(45, 2))
    assert (ex.request_bytes, ex.response_bytes) == (123, 45)
    unanswered = exchange(message(77, 1), None, status=ExchangeStatus.UNANSWERED)
    assert (unanswered.request_bytes, unanswered.response_bytes) == (77, 0)
    orphan = exchange(None, message(31, 1), status=ExchangeStatus.ORPHAN_RESPONSE)
    assert (orphan.request_bytes, orphan.response_bytes) == (0, 31)


def test_exchange_is_frozen():
    """Records are immutable values."""
    ex = exchange(None, None)
    with pytest.raises(AttributeError):
        ex.api_key = 0  # type: ignore[misc]


# --------------------------------------------------------------------------- DecodeIssue

def test_decode_issue_to_dict_has_every_attribute():
    """to_dict carries every attribute, under its own name, with kind/severity as str."""
    issue = DecodeIssue(IssueKind.TRAILING_BYTES, Severity.WARNING, "3 trailing bytes",
                        ts_ns=1_700_000_000_123_456_789, connection_id=12,
                        client="10.0.0.1:40000", broker="[::1]:9092", direction="response",
                        stream_offset=4096, length_bytes=3, field_path="topics[0].name",
                        frame_offset=57, correlation_id=-5, api_key=1, api_version=11)
    d = issue.to_dict()
    assert d == {
        "kind": "trailing_bytes", "severity": "warning", "message": "3 trailing bytes",
        "ts_ns": 1_700_000_000_123_456_789, "connection_id": 12, "client": "10.0.0.1:40000",
        "broker": "[::1]:9092", "direction": "response", "stream_offset": 4096,
        "length_bytes": 3, "field_path": "topics[0].name", "frame_offset": 57,
        "correlation_id": -5, "api_key": 1, "api_version": 11,
    }
    assert type(d["kind"]) is str and type(d["severity"]) is str
    assert set(d) == set(DecodeIssue.__slots__)
    json.dumps(d)  # JSON-ready


def test_decode_issue_defaults_in_to_dict():
    """Unknown values are the documented defaults (-1, "", 0, None)."""
    d = DecodeIssue("tcp_gap", "info", "m").to_dict()
    assert d == {"kind": "tcp_gap", "severity": "info", "message": "m", "ts_ns": 0,
                 "connection_id": -1, "client": "", "broker": "", "direction": "",
                 "stream_offset": -1, "length_bytes": 0, "field_path": "",
                 "frame_offset": -1, "correlation_id": None, "api_key": None,
                 "api_version": None}


# --------------------------------------------------------------------------- LocatedRecords

@pytest.mark.parametrize("topic, resolved, topic_id, shown", [
    ("orders", "payments", "AQIDBAUGBwgJCgsMDQ4PEA", "orders"),     # wire name first
    (None, "payments", "AQIDBAUGBwgJCgsMDQ4PEA", "payments"),       # then resolved name
    (None, None, "AQIDBAUGBwgJCgsMDQ4PEA", "AQIDBAUGBwgJCgsMDQ4PEA"),  # then the id
    (None, None, None, "?"),                                         # else ?
    ("", None, "AQIDBAUGBwgJCgsMDQ4PEA", "AQIDBAUGBwgJCgsMDQ4PEA"),  # empty name is no name
])
def test_located_records_display_topic_precedence(topic, resolved, topic_id, shown):
    """display_topic: the wire name, else the resolved name, else the id, else ``?``."""
    loc = LocatedRecords(topic, topic_id, 0, "topics[0].partitions[0].records",
                         RawRecords(b""), resolved_topic=resolved)
    assert loc.display_topic == shown


# --------------------------------------------------------------------------- connection ids

def test_connection_id_of_each_record_type():
    """Exchanges and summaries give conn_id, issues connection_id, topic names -1."""
    ex = exchange(None, None, conn_id=41)
    summary = ConnectionSummary(
        conn_id=42, kind=ConnectionKind.KAFKA, client="a:1", broker="b:2", first_ts_ns=1,
        last_ts_ns=2, handshake_seen=True, closed="fin", bytes_to_broker=10, bytes_to_client=20,
        segments=4, gap_bytes=0, retransmitted_bytes=0, overlap_conflicts=0, exchanges=1,
        unanswered=0, orphans=0, tls=None, sasl=None)
    issue = DecodeIssue("tcp_gap", "warning", "gap", connection_id=43)
    capture_issue = DecodeIssue("capture_truncated", "error", "file cut")
    name = TopicName("AQIDBAUGBwgJCgsMDQ4PEA", "orders", 5)
    assert [connection_id_of(r) for r in (ex, summary, issue, capture_issue, name)] == [
        41, 42, 43, -1, -1]
