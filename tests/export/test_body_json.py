"""The exported JSON bodies (``request_json`` / ``response_json``): orjson where it gives the
standard library's bytes, the standard library where it would not (floats, values orjson
refuses)."""

from __future__ import annotations

import json
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkasniff.export.rows import _body_default, body_json, exchange_rows, float_sides
from kafkasniff.model import Exchange, ExchangeStatus, Message
from kafkasniff.protocol.schema import load_definitions


def message(body) -> Message:
    return Message(frame_bytes=10, first_ts_ns=1, last_ts_ns=1, stream_offset=0,
                   header={"correlation_id": 7}, body=body)


def stdlib(body) -> str:
    return json.dumps(body, ensure_ascii=False, default=_body_default, separators=(",", ":"))


# what decoders put in a body, and what orjson must hand back to the standard library:
# ints beyond 64 bits, lone surrogates, keys that are not strings
_leaves = (st.none() | st.booleans() | st.integers() | st.integers(-2**70, 2**70)
           | st.text() | st.text(st.characters(min_codepoint=0, max_codepoint=0x20))
           | st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), max_size=2)
           | st.binary(max_size=40) | st.builds(bytearray, st.binary(max_size=8)))
_trees = st.recursive(
    _leaves,
    lambda inner: (st.lists(inner, max_size=5) | st.tuples(inner, inner)
                   | st.dictionaries(st.text(max_size=8), inner, max_size=5)
                   | st.dictionaries(st.integers(0, 3), inner, max_size=2)),
    max_leaves=40)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.text(max_size=12), _trees, max_size=6))
def test_float_free_bodies_have_the_standard_librarys_bytes(body):
    assert body_json(message(body), floats=False) == stdlib(body)


def test_float_bodies_keep_the_standard_library():
    body = {"values": [{"key": "producer_byte_rate", "value": 1e-07},
                       {"key": "request_percentage", "value": math.nan},
                       {"key": "consumer_byte_rate", "value": 1e16}]}
    assert body_json(message(body)) == stdlib(body)
    assert '"value":1e-07' in body_json(message(body)) and "NaN" in body_json(message(body))


def test_float_sides_come_from_the_specs():
    defs = load_definitions()
    with_floats = {k: float_sides(defs, k) for k in defs.apis if any(float_sides(defs, k))}
    assert with_floats == {48: (False, True), 49: (True, False)}   # Describe/AlterClientQuotas
    assert float_sides(defs, 32767) == (True, True)                  # unknown: the safe side


def test_exported_quota_values_render_as_read_json_does():
    q = message({"entries": [{"entity": [], "ops": [{"key": "producer_byte_rate",
                                                      "value": 1e-07, "remove": False}]}]})
    r = message({"throttle_time_ms": 0, "entries": []})
    ex = Exchange(conn_id=3, client="10.0.0.1:40000", broker="10.0.0.2:9092",
                  status=ExchangeStatus.PAIRED, api_key=49, api_name="AlterClientQuotas",
                  api_version=1, correlation_id=7, client_id="c1", request=q, response=r,
                  latency_ns=5)
    row = exchange_rows(ex, "cap", "k")["exchanges"][0]
    assert row["request_json"] == stdlib(q.body) and '"value":1e-07' in row["request_json"]
    assert row["response_json"] == stdlib(r.body)
