"""The record loop of magic 2 batches (``kafkasniff/protocol/recordloop.py``) compiled and
as plain Python: the same records, and the same error at the same byte, on valid sections
and on every truncation and single-byte change of them (issue 14, docs/compiled.md).

The compiled module is the one ``kafkasniff`` imports; its ``.py`` source is loaded again
here under another name, so both run in this process. Skipped when the package was installed
without compiling (then both would be the same Python code).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkasniff.protocol import recordloop
from kafkasniff.protocol.records import Record, _RecordBuilder
from tests.protocol.batch_encoder import Rec, encode_record, zigzag_varint
from tests.support.as_python import as_python

pytestmark = pytest.mark.skipif(recordloop.__file__.endswith(".py"),
                                reason="recordloop is not compiled in this install")


PURE = as_python(recordloop)


def _outcome(module, buf, count: int, base_offset: int, base_ts: int, lat_ts):
    """``(records yielded, (message, pos) of the error or None)``; records as tuples of
    their fields (and their type), so that both modules' records compare."""
    out = []
    try:
        for r in module.v2_records(buf, 0, len(buf), count, base_offset, base_ts, lat_ts,
                                   _RecordBuilder, Record):
            out.append((type(r), r.offset, r.timestamp_ms, r.key, r.value, r.headers,
                        r.attributes, r.control, type(r.key), type(r.value)))
    except module.Bad as bad:
        return out, (bad.message, bad.pos)
    return out, None


def _same(buf, count, base_offset=100, base_ts=1_700_000_000_000, lat_ts=None):
    compiled = _outcome(recordloop, buf, count, base_offset, base_ts, lat_ts)
    pure = _outcome(PURE, buf, count, base_offset, base_ts, lat_ts)
    assert compiled == pure
    return compiled


_RECORDS = st.lists(st.builds(
    Rec,
    key=st.none() | st.binary(max_size=200),
    value=st.none() | st.binary(max_size=300),
    headers=st.lists(st.tuples(st.text(max_size=10), st.none() | st.binary(max_size=20)),
                     max_size=3),
    offset_delta=st.integers(-(2 ** 31), 2 ** 31 - 1),
    timestamp_delta=st.integers(-(2 ** 63), 2 ** 63 - 1),
    attributes=st.integers(-128, 127)), min_size=1, max_size=6)


def test_the_source_is_loaded_apart_from_the_compiled_module():
    assert PURE is not recordloop and PURE.__file__.endswith("recordloop.py")
    assert not PURE.cython.compiled


def test_valid_records_with_every_field_are_the_same():
    recs = [Rec(key=b"k", value=b"v" * 300, headers=[("h", b"x"), ("n", None)],
                offset_delta=i, timestamp_delta=i * 1000, attributes=-1) for i in range(5)]
    recs.append(Rec(key=None, value=None, offset_delta=2 ** 20, timestamp_delta=-(2 ** 40)))
    buf = b"".join(map(encode_record, recs))
    records, error = _same(buf, len(recs))
    assert error is None and len(records) == len(recs)
    assert records[0][1:8] == (100, 1_700_000_000_000, b"k", b"v" * 300,
                               (("h", b"x"), ("n", None)), -1, None)
    assert _same(buf, len(recs), lat_ts=5)[0][3][2] == 5     # log_append_time


def test_a_section_in_another_buffer_gives_bytes():
    buf = encode_record(Rec(key=b"key", value=b"value", headers=[("h", b"v")]))
    for wrapped in (bytearray(buf), memoryview(buf)):
        records, error = _same(wrapped, 1)
        assert error is None and records[0][3:6] == (b"key", b"value", (("h", b"v"),))
        assert records[0][8:] == (bytes, bytes)


@settings(max_examples=150, deadline=None)
@given(_RECORDS, st.integers(-1, 8), st.data())
def test_every_cut_and_changed_byte_gives_the_same_records_and_error(recs, count, data):
    buf = b"".join(map(encode_record, recs))
    _same(buf, count)
    cut = data.draw(st.integers(0, len(buf)))
    _same(buf[:cut], len(recs))
    at = data.draw(st.integers(0, len(buf) - 1))
    changed = bytearray(buf)
    changed[at] = data.draw(st.integers(0, 255))
    _same(bytes(changed), len(recs))
    _same(buf + b"\x00", len(recs))


def test_long_varints_and_departures_are_the_same():
    ok = encode_record(Rec(key=b"k", value=b"v"))
    cases = [
        zigzag_varint(2 ** 40) + ok[1:],                  # a length beyond int32
        b"\xff" * 11,                                    # a varint longer than 10 bytes
        ok[:1] + b"\x00" + b"\xff" * 11 + ok[3:],       # timestampDelta too long
        ok + ok,                                         # more records than the count
        b"",                                             # no record at all
    ]
    for buf in cases:                                    # each one an error
        assert _same(buf, 1)[1] is not None
    assert _same(ok, -1)[1] == ("negative record count -1", 0)
