"""``PairingConnection._exchange`` builds the Exchange with positional arguments (a class
called with keywords takes twice as long): every argument lands in the field of its name,
and a redacted body still drops what was derived from it."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

from kafkasniff.content.redaction import redacted_body
from kafkasniff.model import Exchange, Message, WireFormat
from kafkasniff.pairing.base import PairingConnection

_OPTIONAL = ("errors", "throttle_time_ms", "topics", "inferred", "assumed_version", "records",
             "record_fields", "wire_topics", "topic_ids", "wire_format")


def _conn():
    return SimpleNamespace(tcp=SimpleNamespace(conn_id=object()), client=object(),
                           broker=object(), tls=object(), exchanges=0)


def _message(body, first: int, last: int) -> Message:
    return Message(10, first, last, 0, {}, body, None, True, 0, 8, -1)


def test_every_argument_lands_in_its_field():
    conn = _conn()
    given = {name: object() for name in _OPTIONAL}
    request, response = _message({}, 1, 2), _message({}, 7, 9)
    head = dict(status=object(), api_key=18, api_name=object(), api_version=object(),
                correlation_id=object(), client_id=object())
    ex = PairingConnection._exchange(conn, *head.values(), request, response, [1, 2], **given)
    want = {**head, **given, "conn_id": conn.tcp.conn_id, "client": conn.client,
            "broker": conn.broker, "request": request, "response": response,
            "latency_ns": 5, "issues": (1, 2), "tls": conn.tls, "long_poll": False,
            "long_poll_rule": None}
    assert set(want) == {f.name for f in dataclasses.fields(Exchange)}
    for name, value in want.items():
        assert getattr(ex, name) is value or getattr(ex, name) == value, name
    assert conn.exchanges == 1


def test_defaults_are_the_exchanges():
    ex = PairingConnection._exchange(_conn(), "paired", 18, "ApiVersions", 3, 1, None, None,
                                     None, [])
    for f in dataclasses.fields(Exchange):
        if f.name in _OPTIONAL:
            assert getattr(ex, f.name) == f.default, f.name
    assert ex.wire_format is WireFormat.KAFKA and ex.latency_ns is None


def test_a_redacted_body_drops_what_was_derived_from_it():
    request = _message(redacted_body("SASL", 10), 1, 2)
    ex = PairingConnection._exchange(_conn(), "paired", 36, "SaslAuthenticate", 2, 1, None,
                                     request, _message({}, 3, 4), [], records=object(),
                                     topics=("t",), wire_topics=("t",), topic_ids=("i",),
                                     record_fields=(object(),), errors=("E",))
    assert (ex.records, ex.topics, ex.wire_topics, ex.topic_ids, ex.record_fields) == \
        (None, (), (), (), ())
    assert ex.errors == ("E",)
