"""How record keys and values are described (kafkasniff.output.values)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkasniff.output.values import _describe, describe_bytes, short


def test_text_json_hex_and_null():
    assert describe_bytes(None) is None
    assert describe_bytes(b"hello\tworld\n") == {"size_bytes": 12, "text": "hello\tworld\n"}
    assert describe_bytes(b'{"a": [1, 2]}') == {"size_bytes": 13, "json": {"a": [1, 2]}}
    assert describe_bytes(b"\xff\x01") == {"size_bytes": 2, "hex": "ff01"}
    assert describe_bytes(b"\x01\x02") == {"size_bytes": 2, "hex": "0102"}  # unprintable


def test_capped_values_say_so():
    d = describe_bytes(b"x" * 300, 8)
    assert d == {"size_bytes": 300, "text": "x" * 8, "truncated": True}
    assert short(d) == "'xxxxxxxx'(300B)"
    assert describe_bytes(b"x" * 300, 0) == {"size_bytes": 300, "text": "x" * 300}


def test_schema_registry_frame():
    d = describe_bytes(b"\x00\x00\x00\x00\x07" + b'{"id": 1}')
    assert d == {"size_bytes": 14, "schema_id": 7, "payload": {"size_bytes": 9, "json": {"id": 1}}}
    assert short(d) == '[schema 7]{"id":1}'


def test_crafted_values_do_not_recurse_without_end():
    # schema frames inside schema frames: only the outer one is recognised
    nested = b"\x00\x00\x00\x00\x01" * 5000
    d = describe_bytes(nested)
    assert d["schema_id"] == 1 and "schema_id" not in d["payload"]
    assert d["payload"]["size_bytes"] == len(nested) - 5
    # JSON nested deeper than Python's recursion limit is shown as text
    deep = b"[" * 5000 + b"]" * 5000
    assert describe_bytes(deep, 0) == {"size_bytes": 10000, "text": deep.decode()}
    json.dumps(describe_bytes(nested, 0))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80) | st.sampled_from([b'{"a": [1, 2]}', b"\x00\x00\x00\x00\x07hi",
                                                 b"\t\r\n", b"\xff\xfe", b""]),
       st.sampled_from([0, 4, 64, 256]), st.booleans())
def test_cached_descriptions_equal_fresh_ones(data, max_bytes, schema_frame):
    # bytes of up to 64 are described once per content: the cached dict is the fresh one,
    # whatever was described before (a bytearray of the same content is never cached)
    first = describe_bytes(data, max_bytes, schema_frame=schema_frame)
    fresh = _describe(data, max_bytes, schema_frame)
    assert first == fresh
    assert describe_bytes(bytearray(data), max_bytes, schema_frame=schema_frame) == fresh
    again = describe_bytes(data, max_bytes, schema_frame=schema_frame)
    assert again == fresh and (again is first) == (len(data) <= 64)
