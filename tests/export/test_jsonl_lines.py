"""The JSON Lines rows of ``export --format jsonl``: written by orjson, byte for byte what
the standard library's ``json`` writes for the same row, then a newline, in UTF-8 (floats as
``1e-07`` and ``NaN``, rows orjson refuses handed to the standard library), every column in
the schema's order."""

from __future__ import annotations

import base64
import json
import math

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkasniff.export.schema import SCHEMAS, TIMESTAMP
from kafkasniff.export.writer import _iso_us, _jsonl_encoder


def stdlib_line(schema: pa.Schema, row: dict) -> str:
    """The line as the standard library writes it: the reference."""
    out = {}
    for f in schema:
        v = row.get(f.name)
        if v is not None:
            if f.type == TIMESTAMP:
                v = _iso_us(v)
            elif f.type == pa.binary():
                v = base64.b64encode(v).decode("ascii")
            elif pa.types.is_list(f.type) and pa.types.is_struct(f.type.value_type):
                bins = {c.name for c in f.type.value_type if c.type == pa.binary()}
                v = [{k: (base64.b64encode(x).decode("ascii") if k in bins and x is not None
                          else x) for k, x in item.items()} for item in v]
        out[f.name] = v
    return json.dumps(out, ensure_ascii=False, separators=(",", ":"))


_TEXT = (st.text(max_size=12) | st.text(st.characters(max_codepoint=0x20), max_size=4)
         | st.text(st.characters(min_codepoint=0x7F, max_codepoint=0x2030), max_size=4))
_FLOATS = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(
    [1e-07, 1e16, 1e22, 0.1, -0.0, 5e-324, math.nan, math.inf])


def _value(f: pa.Field):
    t = f.type
    if t == TIMESTAMP:
        return st.integers(0, 253_402_300_799_999_999)
    if t == pa.float64():
        return _FLOATS
    if t == pa.binary():
        return st.binary(max_size=30)
    if t == pa.string():
        return _TEXT
    if t == pa.bool_():
        return st.booleans()
    if pa.types.is_integer(t):          # beyond 64 bits: orjson refuses, json writes it
        return st.integers(-2 ** 63, 2 ** 63 - 1) | st.integers(-2 ** 70, 2 ** 70)
    if t == SCHEMAS["records"].field("headers").type:
        return st.lists(st.fixed_dictionaries(
            {"key": _TEXT, "value": st.none() | st.binary(max_size=10)}), max_size=3)
    if pa.types.is_list(t) and t.value_type == pa.string():
        return st.lists(_TEXT, max_size=3)
    return None                         # lists of other structs: not generated


def _rows(table: str):
    values = {f.name: _value(f) for f in SCHEMAS[table]}
    return st.fixed_dictionaries(
        {}, optional={name: st.none() | v for name, v in values.items() if v is not None}
        | {"not_a_column": st.integers()})


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["records", "exchanges", "partitions", "connections", "groups"])
       .flatmap(lambda t: st.tuples(st.just(t), _rows(t))))
def test_a_line_is_the_standard_librarys(table_row):
    table, row = table_row
    schema = SCHEMAS[table]
    assert _jsonl_encoder(schema)(row) == (stdlib_line(schema, row) + "\n").encode("utf-8")


def test_floats_keep_the_standard_librarys_text():
    schema = SCHEMAS["exchanges"]
    encode = _jsonl_encoder(schema)
    for value, text in ((1e-07, "1e-07"), (math.nan, "NaN"), (-math.inf, "-Infinity"),
                        (1e16, "1e+16"), (2.5, "2.5")):
        line = encode({"latency_ms": value}).decode("utf-8")
        assert f'"latency_ms":{text},' in line and line == stdlib_line(schema,
                                                                      {"latency_ms": value}) + "\n"
    assert list(json.loads(encode({"extra": 1}))) == schema.names
