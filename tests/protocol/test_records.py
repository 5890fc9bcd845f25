"""kafkasniff.protocol.records: message sets (magic 0/1) and record batches (magic 2).

Round trips through the independent test encoder (:mod:`tests.protocol.batch_encoder`),
damaged and truncated data, bombs, control records, and the real captures.
"""

from __future__ import annotations

import dataclasses
import json
import struct
import subprocess
import sys
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkasniff.protocol.records import (
    CONTROL_TYPE_NAMES,
    Batch,
    Record,
    RecordSet,
    decode_records,
)
from kafkasniff.protocol.schema import load_definitions
from tests.conftest import CAPTURES, decode_capture
from tests.protocol import batch_encoder as enc
from tests.protocol.encoder import encode, example_value
from tests.protocol.test_compression import bomb

I8 = st.integers(-128, 127)
I16 = st.integers(-(2 ** 15), 2 ** 15 - 1)
I32 = st.integers(-(2 ** 31), 2 ** 31 - 1)
I64 = st.integers(-(2 ** 63), 2 ** 63 - 1)
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
# (codec, encoder options): every framing real clients write; the pre-0.10 LZ4 header
# checksum (KAFKA-3160) only with magic 0, as Kafka wrote it (on magic 1 and 2 it is a
# spec_departure, tested apart)
FRAMINGS = [("none", {}), ("gzip", {}), ("snappy", {}), ("snappy", {"xerial": True}),
            ("lz4", {}), ("zstd", {}), ("zstd", {"zstd_content_size": False})]
FRAMINGS_MAGIC0 = [*FRAMINGS, ("lz4", {"lz4_broken_hc": True})]

nullable_bytes = st.none() | st.binary(max_size=40)
header = st.tuples(st.text(max_size=8), nullable_bytes)


# --------------------------------------------------------------------------- expectations

@dataclasses.dataclass
class Expected:
    """What decode_records must return for one encoded batch."""

    wire: bytes
    fields: dict  # Batch field -> value (records included)


def v2_expected(recs: list[enc.Rec], wire: bytes, wire_offset: int, *, codec: str,
                base_offset: int, base_timestamp: int, log_append_time: bool, **kw) -> Expected:
    raw = b"".join(enc.encode_record(r) for r in recs)
    max_ts = base_timestamp + max((r.timestamp_delta for r in recs), default=0)
    records = tuple(
        Record(base_offset + r.offset_delta,
               max_ts if log_append_time else base_timestamp + r.timestamp_delta,
               r.key, r.value, tuple(r.headers), r.attributes) for r in recs)
    fields = dict(
        magic=2, wire_offset=wire_offset, batch_bytes=len(wire), base_offset=base_offset,
        last_offset=base_offset + max((r.offset_delta for r in recs), default=0),
        record_count=len(recs), codec=codec,
        timestamp_type="log_append_time" if log_append_time else "create_time",
        base_timestamp_ms=base_timestamp, max_timestamp_ms=max_ts,
        producer_id=kw.get("producer_id", -1), producer_epoch=kw.get("producer_epoch", -1),
        base_sequence=kw.get("base_sequence", -1),
        partition_leader_epoch=kw.get("partition_leader_epoch", -1),
        transactional=kw.get("transactional", False), control=False,
        delete_horizon=kw.get("delete_horizon", False),
        crc=enc.crc32c(wire[21:]), crc_ok=True, compressed_bytes=len(wire) - 61,
        uncompressed_bytes=len(raw), partial=False, records=records, issues=())
    return Expected(wire, fields)


def legacy_expected(magic: int, recs: list[enc.Rec], wire: bytes, wire_offset: int, *,
                    codec: str, log_append_time: int | None = None) -> list[Expected]:
    if codec == "none":
        out = []
        pos = 0
        for r in recs:
            one = enc.message(magic, r.offset, r.key, r.value, r.attributes, r.timestamp)
            ts = r.timestamp if magic == 1 else None
            out.append(Expected(one, dict(
                magic=magic, wire_offset=wire_offset + pos, batch_bytes=len(one),
                base_offset=r.offset, last_offset=r.offset, record_count=1, codec="none",
                timestamp_type="create_time" if magic == 1 else None, base_timestamp_ms=ts,
                max_timestamp_ms=ts, crc=enc.crc32(one[16:]), crc_ok=True,
                compressed_bytes=len(r.value or b""), uncompressed_bytes=len(r.value or b""),
                records=(Record(r.offset, ts, r.key, r.value, (), r.attributes),))))
            pos += len(one)
        return out
    last = recs[-1].offset
    if magic == 1:  # inner offsets are relative: wrapper offset - last relative + relative
        offsets = [last - (len(recs) - 1) + i for i in range(len(recs))]
    else:
        offsets = [r.offset for r in recs]
    if magic == 1:
        wrapper_ts = log_append_time if log_append_time is not None else max(
            r.timestamp for r in recs)
    else:
        wrapper_ts = None
    value_len = struct.unpack_from(">i", wire, 12 + 4 + 2 + (8 if magic == 1 else 0) + 4)[0]
    inner_len = sum(26 + (8 if magic == 1 else 0) + len(r.key or b"") + len(r.value or b"")
                    for r in recs)
    records = tuple(
        Record(o, (log_append_time if log_append_time is not None else r.timestamp)
               if magic == 1 else None, r.key, r.value, (), r.attributes)
        for o, r in zip(offsets, recs))
    return [Expected(wire, dict(
        magic=magic, wire_offset=wire_offset, batch_bytes=len(wire), base_offset=offsets[0],
        last_offset=offsets[-1], record_count=len(recs), codec=codec,
        timestamp_type=("log_append_time" if log_append_time is not None else "create_time")
        if magic == 1 else None,
        base_timestamp_ms=wrapper_ts, max_timestamp_ms=wrapper_ts, crc=enc.crc32(wire[16:]),
        crc_ok=True, compressed_bytes=value_len, uncompressed_bytes=inner_len,
        records=records))]


LEGACY_DEFAULTS = dict(producer_id=None, producer_epoch=None, base_sequence=None,
                       partition_leader_epoch=None, transactional=False, control=False,
                       delete_horizon=False, partial=False, issues=())


def check(batch: Batch, exp: Expected, with_records: bool = True) -> None:
    want = dict(LEGACY_DEFAULTS) if exp.fields["magic"] != 2 else {}
    want.update(exp.fields)
    if not with_records:
        want["records"] = None
    assert type(batch) is Batch
    got = {f.name: getattr(batch, f.name) for f in dataclasses.fields(Batch)}
    assert got == want


# --------------------------------------------------------------------------- strategies

@st.composite
def v2_records(draw, max_records=6):
    n = draw(st.integers(1, max_records))
    deltas = sorted(draw(st.lists(st.integers(0, 2 ** 31 - 1), min_size=n, max_size=n,
                                  unique=True)))
    return [enc.Rec(key=draw(nullable_bytes), value=draw(nullable_bytes),
                    headers=draw(st.lists(header, max_size=3)), offset_delta=d,
                    timestamp_delta=draw(st.integers(-(2 ** 40), 2 ** 40)),
                    attributes=draw(I8))
            for d in deltas]


@st.composite
def v2_batch(draw):
    codec, opts = draw(st.sampled_from(FRAMINGS))
    recs = draw(v2_records())
    kw = dict(base_offset=draw(st.integers(0, 2 ** 62)),
              base_timestamp=draw(st.integers(-1, 2 ** 45)),
              log_append_time=draw(st.booleans()), producer_id=draw(I64),
              producer_epoch=draw(I16), base_sequence=draw(I32),
              partition_leader_epoch=draw(I32), transactional=draw(st.booleans()),
              delete_horizon=draw(st.booleans()))
    wire = enc.record_batch(recs, codec=codec, **opts, **kw)
    return lambda at: [v2_expected(recs, wire, at, codec=codec, **kw)]


@st.composite
def legacy_set(draw):
    magic = draw(st.sampled_from([0, 1]))
    codec, opts = draw(st.sampled_from(FRAMINGS_MAGIC0 if magic == 0 else FRAMINGS))
    n = draw(st.integers(1, 5))
    first = draw(st.integers(0, 2 ** 40))
    recs = [enc.Rec(key=draw(nullable_bytes), value=draw(nullable_bytes), offset=first + i,
                    timestamp=draw(st.integers(-1, 2 ** 45)) if magic == 1 else None,
                    attributes=draw(st.sampled_from([0, 0x08])) if magic == 1 and codec == "none"
                    else 0)
            for i in range(n)]
    lat = draw(st.none() | st.integers(0, 2 ** 45)) if magic == 1 and codec != "none" else None
    wire = enc.message_set(magic, recs, codec=codec, log_append_time=lat, **opts)
    return lambda at: legacy_expected(magic, recs, wire, at, codec=codec, log_append_time=lat)


def _fix_legacy_ts_type(exps: list[Expected]) -> list[Expected]:
    for e in exps:
        r = e.fields["records"]
        if e.fields["magic"] == 1 and e.fields["codec"] == "none" and r[0].attributes & 0x08:
            e.fields["timestamp_type"] = "log_append_time"
    return exps


@st.composite
def record_data(draw, max_batches=4):
    makers = draw(st.lists(v2_batch() | legacy_set(), min_size=1, max_size=max_batches))
    exps: list[Expected] = []
    at = 0
    for make in makers:
        for e in _fix_legacy_ts_type(make(at)):
            exps.append(e)
            at += len(e.wire)
    return b"".join(e.wire for e in exps), exps


# --------------------------------------------------------------------------- round trips

@given(record_data())
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_round_trip_every_field(data_exps):
    data, exps = data_exps
    rs = decode_records(data, with_records=True)
    assert rs.size_bytes == len(data) and rs.partial_tail_bytes == 0 and rs.issues == ()
    assert len(rs.batches) == len(exps)
    for b, e in zip(rs.batches, exps):
        check(b, e)
        assert all(type(r) is Record for r in b.records)
    light = decode_records(data)
    for b, e in zip(light.batches, exps):
        check(b, e, with_records=False)


def test_records_are_frozen_records():
    data = enc.record_batch([enc.Rec(b"k", b"v", [("h", None)])])
    r = decode_records(data, with_records=True).batches[0].records[0]
    assert type(r) is Record
    assert r == Record(0, 0, b"k", b"v", (("h", None),), 0)
    assert hash(r) == hash(Record(0, 0, b"k", b"v", (("h", None),), 0))
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.offset = 3
    b = decode_records(data).batches[0]
    assert type(b) is Batch and b == decode_records(data).batches[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.crc = 0
    assert decode_records(bytearray(data)) == decode_records(memoryview(data)) == \
        decode_records(data)


def test_v2_example():
    recs = [enc.Rec(b"key", b"value", [("a", b"1"), ("b", None)], 0, 0),
            enc.Rec(None, None, [], 1, 5, attributes=-1),
            enc.Rec(b"", b"", [("\u00e9", b"")], 2, -3)]
    data = enc.record_batch(recs, base_offset=100, base_timestamp=1_700_000_000_000,
                            producer_id=7, producer_epoch=2, base_sequence=10,
                            partition_leader_epoch=4, transactional=True, codec="zstd")
    b = decode_records(data, with_records=True).batches[0]
    assert (b.base_offset, b.last_offset, b.record_count) == (100, 102, 3)
    assert (b.producer_id, b.producer_epoch, b.base_sequence) == (7, 2, 10)
    assert b.transactional and not b.control and b.codec == "zstd" and b.crc_ok
    assert [r.offset for r in b.records] == [100, 101, 102]
    assert [r.timestamp_ms for r in b.records] == [1_700_000_000_000, 1_700_000_000_005,
                                                   1_699_999_999_997]
    assert b.records[0].headers == (("a", b"1"), ("b", None))
    assert b.records[1].key is None and b.records[1].value is None
    assert b.records[1].attributes == -1
    assert b.records[2].key == b"" and b.records[2].headers == (("\u00e9", b""),)


def test_invalid_utf8_header_key_is_backslash_escaped():
    # a record built by hand with a header key of invalid UTF-8
    body = b"\x00" + enc.zigzag_varint(0) + enc.zigzag_varint(0) + b"\x02k\x02v" + \
        enc.zigzag_varint(1) + enc.zigzag_varint(2) + b"\xff\xfe" + enc.zigzag_varint(-1)
    section = enc.zigzag_varint(len(body)) + body
    data = enc.record_batch([enc.Rec()], records_section=section)
    b = decode_records(data, with_records=True).batches[0]
    assert b.issues == ()
    assert b.records[0].headers == (("\\xff\\xfe", None),)


def test_magic1_wrapper_relative_offsets_and_log_append_time():
    recs = [enc.Rec(b"a", b"1", timestamp=10), enc.Rec(b"b", b"2", timestamp=20),
            enc.Rec(None, b"3", timestamp=15)]
    data = enc.message_set(1, recs, codec="gzip", wrapper_offset=500)
    b = decode_records(data, with_records=True).batches[0]
    assert [r.offset for r in b.records] == [498, 499, 500]
    assert (b.base_offset, b.last_offset, b.record_count) == (498, 500, 3)
    assert [r.timestamp_ms for r in b.records] == [10, 20, 15]
    assert b.timestamp_type == "create_time" and b.max_timestamp_ms == 20
    lat = enc.message_set(1, recs, codec="snappy", wrapper_offset=9, log_append_time=777)
    b = decode_records(lat, with_records=True).batches[0]
    assert b.timestamp_type == "log_append_time"
    assert [r.timestamp_ms for r in b.records] == [777, 777, 777]
    assert [r.offset for r in b.records] == [7, 8, 9]


def test_magic0_wrapper_absolute_offsets():
    recs = [enc.Rec(b"a", b"1", offset=40), enc.Rec(b"b", b"2", offset=41)]
    b = decode_records(enc.message_set(0, recs, codec="lz4", lz4_broken_hc=True),
                       with_records=True).batches[0]
    assert [r.offset for r in b.records] == [40, 41]
    assert [r.timestamp_ms for r in b.records] == [None, None]
    assert b.timestamp_type is None and b.issues == () and b.crc_ok


def test_nested_legacy_wrappers_are_flattened_up_to_a_depth():
    inner = enc.message_set(1, [enc.Rec(b"a", b"1", timestamp=1),
                                enc.Rec(b"b", b"2", timestamp=2)], codec="gzip")
    # a wrapper whose inner message set holds another wrapper (Kafka writes one level)
    outer_inner = enc.message(1, 0, None, enc.compress("gzip", inner), attributes=1,
                              timestamp=2)
    data = enc.message(1, 1, None, enc.compress("gzip", outer_inner), attributes=1,
                       timestamp=2)
    b = decode_records(data, with_records=True).batches[0]
    assert b.issues == ()
    assert [r.key for r in b.records] == [b"a", b"b"]
    assert [r.offset for r in b.records] == [0, 1]
    deep = data
    for _ in range(4):
        deep = enc.message(1, 0, None, enc.compress("gzip", deep), attributes=1, timestamp=2)
    b = decode_records(deep, with_records=True).batches[0]
    assert [i.kind for i in b.issues] == ["record_decode_error"]
    assert "nested" in b.issues[0].message


def test_nested_wrappers_share_the_batch_decompression_limit():
    """Nested wrappers are decompressed within what the batch's limit leaves: repeated
    nested bombs cannot multiply the work."""
    nested = [enc.message_set(0, [enc.Rec(None, b"x" * 80_000, offset=i)], codec="gzip")
              for i in range(3)]
    data = enc.message(0, 2, None, enc.compress("gzip", b"".join(nested)), attributes=1)
    b = decode_records(data, with_records=True, max_uncompressed_bytes=200_000).batches[0]
    assert [i.kind for i in b.issues] == ["decompression_limit"]
    assert "nested" in b.issues[0].message and "200000" in b.issues[0].message
    assert [r.offset for r in b.records] == [0, 1]
    ok = decode_records(data, with_records=True, max_uncompressed_bytes=300_000).batches[0]
    assert ok.issues == () and [r.offset for r in ok.records] == [0, 1, 2]


# --------------------------------------------------------------------------- damaged data

def _three_batches() -> list[bytes]:
    return [enc.record_batch([enc.Rec(b"k0", b"v0"), enc.Rec(b"k1", b"v1", offset_delta=1)],
                             base_offset=0),
            enc.record_batch([enc.Rec(b"k2", b"x" * 100, [("h", b"1")])], base_offset=2,
                             codec="gzip"),
            enc.record_batch([enc.Rec(b"k3", b"v3")], base_offset=3, codec="lz4")]


@pytest.mark.parametrize("where", ["payload", "stored_crc", "attributes"])
def test_crc_mismatch_and_decoding_goes_on(where):
    parts = _three_batches()
    bad = bytearray(parts[0])
    index = {"payload": len(bad) - 3, "stored_crc": 18, "attributes": 22}[where]
    bad[index] ^= 0x40 if where == "attributes" else 0x01  # delete horizon bit
    stored = struct.unpack_from(">I", bad, 17)[0]
    data = bytes(bad) + parts[1] + parts[2]
    rs = decode_records(data, with_records=True)
    assert len(rs.batches) == 3
    assert [b.crc_ok for b in rs.batches] == [False, True, True]
    assert [i.kind for i in rs.issues] == ["crc_mismatch"]
    issue = rs.issues[0]
    assert issue.offset == 0
    assert f"{enc.crc32c(bytes(bad[21:])):#010x}" in issue.message
    assert f"{stored:#010x}" in issue.message
    assert rs.batches[0].crc == stored
    assert rs.batches[2].records[0].key == b"k3"
    off = decode_records(data, verify_crc=False)
    assert [b.crc_ok for b in off.batches] == [None, None, None] and off.issues == ()


def test_legacy_crc_mismatch():
    good = enc.message(1, 5, b"k", b"v", timestamp=3)
    bad = bytearray(good)
    bad[-1] ^= 0xFF
    rs = decode_records(bytes(bad) + good, with_records=True)
    assert [b.crc_ok for b in rs.batches] == [False, True]
    assert [i.kind for i in rs.issues] == ["crc_mismatch"]
    assert f"{enc.crc32(bytes(bad[16:])):#010x}" in rs.issues[0].message


def test_legacy_inner_crc_mismatch():
    inner = bytearray(enc.message(1, 0, b"k", b"v", timestamp=3))
    inner[-1] ^= 0xFF
    data = enc.message(1, 0, None, enc.compress("gzip", bytes(inner)), attributes=1,
                       timestamp=3)
    b = decode_records(data, with_records=True).batches[0]
    assert b.crc_ok is False
    assert [i.kind for i in b.issues] == ["crc_mismatch"]
    assert "inner" in b.issues[0].message


def _multi_batch_set() -> tuple[bytes, list[tuple[int, int, int]]]:
    """A small set mixing formats; returns data and (start, end, fixed header size)."""
    parts = [
        (enc.record_batch([enc.Rec(b"a", b"1"), enc.Rec(None, b"2", offset_delta=1)],
                          base_offset=10, codec="snappy"), 61),
        (enc.message_set(1, [enc.Rec(b"b", b"3", offset=12, timestamp=5)]), 26),
        (enc.message_set(0, [enc.Rec(b"c", b"4", offset=13), enc.Rec(b"d", b"5", offset=14)],
                         codec="gzip"), 18),
        (enc.record_batch([enc.Rec(b"e", b"6", [("x", None)])], base_offset=15), 61),
    ]
    spans = []
    at = 0
    for wire, hdr in parts:
        spans.append((at, at + len(wire), hdr))
        at += len(wire)
    return b"".join(w for w, _ in parts), spans


def test_truncated_at_every_byte():
    data, spans = _multi_batch_set()
    full = decode_records(data, with_records=True)
    assert full.issues == () and len(full.batches) == len(spans)
    assert [(b.wire_offset, b.wire_offset + b.batch_bytes) for b in full.batches] == [
        (a, e) for a, e, _ in spans]
    for cut in range(len(data) + 1):
        rs = decode_records(data[:cut], with_records=True)
        assert rs.issues == (), cut
        assert rs.size_bytes == cut
        complete = [b for b in rs.batches if not b.partial]
        n_complete = sum(1 for b in full.batches if b.wire_offset + b.batch_bytes <= cut)
        assert complete == list(full.batches[:n_complete]), cut
        tail_start = (full.batches[n_complete].wire_offset
                      if n_complete < len(full.batches) else len(data))
        assert rs.partial_tail_bytes == (cut - tail_start if cut > tail_start else 0), cut
        partial = [b for b in rs.batches if b.partial]
        if rs.partial_tail_bytes:
            hdr = spans[n_complete][2]
            assert len(partial) == (1 if rs.partial_tail_bytes >= hdr else 0), cut
            if partial:
                p, f = partial[0], full.batches[n_complete]
                assert rs.batches[-1] is p
                assert p.batch_bytes == rs.partial_tail_bytes
                assert (p.magic, p.wire_offset, p.codec, p.crc) == (f.magic, f.wire_offset,
                                                                    f.codec, f.crc)
                assert p.crc_ok is None and p.records is None and p.uncompressed_bytes is None
                if p.magic == 2:
                    assert (p.base_offset, p.last_offset, p.record_count) == (
                        f.base_offset, f.last_offset, f.record_count)
        else:
            assert not partial


def test_mutations_never_raise():
    data, _ = _multi_batch_set()

    @given(st.data())
    @settings(max_examples=500, deadline=None)
    def run(d):
        buf = bytearray(data)
        for _ in range(d.draw(st.integers(1, 6))):
            op = d.draw(st.sampled_from(["set", "insert", "delete"]))
            i = d.draw(st.integers(0, max(len(buf) - 1, 0)))
            if op == "set" and buf:
                buf[i] = d.draw(st.integers(0, 255))
            elif op == "insert":
                buf[i:i] = d.draw(st.binary(min_size=1, max_size=8))
            elif buf:
                del buf[i:i + d.draw(st.integers(1, 8))]
        _check_invariants(bytes(buf), decode_records(bytes(buf), with_records=True,
                                                     max_uncompressed_bytes=2 ** 20))
    run()


@given(st.binary(max_size=300))
@settings(max_examples=300, deadline=None)
def test_random_bytes_never_raise(data):
    _check_invariants(data, decode_records(data, with_records=True))


@given(st.binary(min_size=4, max_size=200), st.integers(0, 2 ** 31 - 1), st.booleans())
@settings(max_examples=300, deadline=None)
def test_random_records_sections_never_raise(section, count, control):
    data = enc.record_batch([], records_section=section, record_count=count, control=control)
    rs = decode_records(data, with_records=True)
    _check_invariants(data, rs)
    assert len(rs.batches) == 1 and rs.batches[0].crc_ok


def _check_invariants(data: bytes, rs: RecordSet) -> None:
    assert isinstance(rs, RecordSet) and rs.size_bytes == len(data)
    end = 0
    for b in rs.batches:
        assert b.wire_offset == end or b.partial
        end = b.wire_offset + b.batch_bytes
        assert end <= len(data)
        if b.records is not None:
            assert all(type(r) is Record for r in b.records)
    assert rs.partial_tail_bytes <= len(data)
    kinds = {"crc_mismatch", "decompression_error", "decompression_limit", "truncated_batch",
             "record_decode_error", "unknown_magic", "unknown_codec"}
    assert all(i.kind in kinds and 0 <= i.offset <= len(data) for i in rs.issues)
    in_batches = [i for b in rs.batches for i in b.issues]
    assert list(rs.issues[:len(in_batches)]) == in_batches
    assert all(i.kind in ("unknown_magic", "truncated_batch")
               for i in rs.issues[len(in_batches):])


def test_unknown_magic_stops():
    good = enc.record_batch([enc.Rec(b"k", b"v")])
    bad = bytearray(good)
    bad[16] = 3
    rs = decode_records(good + bytes(bad) + good)
    assert len(rs.batches) == 1
    assert [i.kind for i in rs.issues] == ["unknown_magic"]
    assert rs.issues[0].offset == len(good) and "magic 3" in rs.issues[0].message
    assert rs.partial_tail_bytes == 0


def test_length_below_minimum_stops():
    good = enc.record_batch([enc.Rec(b"k", b"v")])
    bad = bytearray(good)
    struct.pack_into(">i", bad, 8, 20)
    rs = decode_records(good + bytes(bad))
    assert len(rs.batches) == 1
    assert [i.kind for i in rs.issues] == ["truncated_batch"]
    assert "minimum 49" in rs.issues[0].message
    neg = bytearray(enc.message(0, 0, b"k", b"v"))
    struct.pack_into(">i", neg, 8, -5)
    assert [i.kind for i in decode_records(bytes(neg)).issues] == ["truncated_batch"]


def test_unknown_codec():
    data = enc.record_batch([enc.Rec(b"k", b"v")], codec_id=6)
    b = decode_records(data, with_records=True).batches[0]
    assert b.codec == "unknown(6)" and b.uncompressed_bytes is None and b.records is None
    assert [i.kind for i in b.issues] == ["unknown_codec"]
    legacy = enc.message(1, 0, None, b"xx", attributes=5, timestamp=1)
    b = decode_records(legacy, with_records=True).batches[0]
    assert b.codec == "unknown(5)" and [i.kind for i in b.issues] == ["unknown_codec"]


def test_decompression_error():
    data = enc.record_batch([enc.Rec(b"k", b"v")], codec="zstd",
                            records_section=b"\x28\xb5\x2f\xfdgarbage")
    nxt = enc.record_batch([enc.Rec(b"k", b"v")], base_offset=1)
    rs = decode_records(data + nxt, with_records=True)
    b = rs.batches[0]
    assert [i.kind for i in rs.issues] == ["decompression_error"]
    assert rs.issues[0].offset == 61
    assert b.uncompressed_bytes is None and b.records is None and b.crc_ok
    assert rs.batches[1].records[0].offset == 1


@pytest.mark.parametrize(("problem", "expected"), [
    ("count_too_high", "ends after 2 of 3 records"),
    ("count_too_low", "bytes after the 1 records"),
    ("varint_overflow", "varint longer than 10 bytes"),
    ("int32_overflow", "overflows int32"),
    ("length_past_end", "does not fit"),
    ("header_count", "header count"),
    ("key_past_record", "key length 10 runs past the end of the record"),
    ("trailing_in_record", "fields end at byte"),
])
def test_record_decode_errors_keep_earlier_records(problem, expected):
    r0 = enc.encode_record(enc.Rec(b"k0", b"v0", offset_delta=0))
    r1 = enc.encode_record(enc.Rec(b"k1", b"v1", offset_delta=1))
    count = 2
    if problem == "count_too_high":
        section, count = r0 + r1, 3
    elif problem == "count_too_low":
        section, count = r0 + r1, 1
    elif problem == "varint_overflow":
        section = r0 + b"\xff" * 11
    elif problem == "int32_overflow":
        section = r0 + b"\xff\xff\xff\xff\x7f"
    elif problem == "length_past_end":
        section = r0 + enc.zigzag_varint(100) + b"\x00" * 10
    elif problem == "header_count":
        body = b"\x00\x00\x02" + b"\x00\x00" + enc.zigzag_varint(1000)
        section = r0 + enc.zigzag_varint(len(body)) + body
    elif problem == "key_past_record":
        body = b"\x00\x00\x02" + enc.zigzag_varint(10) + b"ab" + b"\x00\x00"
        section = r0 + enc.zigzag_varint(len(body)) + body
    else:
        body = b"\x00\x00\x02" + enc.zigzag_varint(2) + b"ab" + b"\x00\x00" + b"zz"
        section = r0 + enc.zigzag_varint(len(body)) + body
    for codec in ("none", "gzip"):
        data = enc.record_batch([], records_section=enc.compress(codec, section),
                                codec=codec, record_count=count)
        b = decode_records(data, with_records=True).batches[0]
        assert [i.kind for i in b.issues] == ["record_decode_error"], b.issues
        assert expected in b.issues[0].message
        n_ok = 2 if problem == "count_too_high" else 1
        assert [r.key for r in b.records] == [b"k0", b"k1"][:n_ok]
        if codec == "gzip":
            assert b.issues[0].offset == 61 and "decompressed" in b.issues[0].message


# --------------------------------------------------------------------------- bombs

LIMIT = 8 * 2 ** 20


@pytest.mark.parametrize(("codec", "size"), [("zstd", 2 ** 30), ("lz4", 2 ** 30),
                                             ("gzip", 2 ** 28)])
def test_decompression_bomb(codec, size):
    section = bomb(codec, size)
    data = enc.record_batch([enc.Rec(b"k", b"v")], codec=codec, records_section=section)
    nxt = enc.record_batch([enc.Rec(b"k", b"v")], base_offset=1, codec=codec)
    legacy = enc.message(1, 2, None, section, attributes=enc.CODECS[codec], timestamp=1)
    records_field = data + nxt + legacy
    tracemalloc.start()
    try:
        rs = decode_records(records_field, with_records=True, max_uncompressed_bytes=LIMIT)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 * LIMIT, f"peak {peak / 2 ** 20:.1f} MiB"
    assert [i.kind for i in rs.issues] == ["decompression_limit", "decompression_limit"]
    assert str(LIMIT) in rs.issues[0].message
    assert rs.batches[0].uncompressed_bytes is None and rs.batches[0].records is None
    assert rs.batches[1].records[0].offset == 1


# --------------------------------------------------------------------------- control records

def test_control_type_mapping():
    """Kafka's ControlRecordType (clients/.../record/ControlRecordType.java)."""
    assert CONTROL_TYPE_NAMES == {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE",
                                  3: "SNAPSHOT_HEADER", 4: "SNAPSHOT_FOOTER",
                                  5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}


def _control_batch(key: bytes | None, value: bytes | None, **kw) -> bytes:
    return enc.record_batch([enc.Rec(key, value)], control=True, **kw)


@pytest.mark.parametrize(("ctype", "name"), [(0, "ABORT"), (1, "COMMIT")])
def test_transaction_markers(ctype, name):
    data = _control_batch(enc.control_key(ctype), enc.end_txn_marker_value(42),
                          transactional=True, producer_id=9, producer_epoch=1, base_offset=7)
    rs = decode_records(data, with_records=True)
    b = rs.batches[0]
    assert rs.issues == () and b.control and b.transactional and b.producer_id == 9
    (r,) = b.records
    assert r.control == {"type": ctype, "type_name": name, "key": {"version": 0, "type": ctype},
                         "value": {"version": 0, "coordinator_epoch": 42}}
    assert r.offset == 7 and r.key == enc.control_key(ctype)


def test_newer_control_versions_are_read_as_the_newest():
    data = _control_batch(enc.control_key(1, version=3) + b"\x00\x01",
                          enc.end_txn_marker_value(5, version=2) + b"more")
    b = decode_records(data, with_records=True).batches[0]
    assert b.issues == ()
    assert b.records[0].control == {"type": 1, "type_name": "COMMIT",
                                    "key": {"version": 3, "type": 1},
                                    "value": {"version": 2, "coordinator_epoch": 5}}


def _kraft_value(name: str, version: int) -> tuple[bytes, dict]:
    plan = load_definitions().plan(name, version)
    value = example_value(plan, unknown_tags=False)
    value["version"] = version
    return encode(plan, value), value


@pytest.mark.parametrize(("ctype", "spec", "version"), [
    (2, "LeaderChangeMessage", 0), (2, "LeaderChangeMessage", 1),
    (3, "SnapshotHeaderRecord", 0), (4, "SnapshotFooterRecord", 0),
    (5, "KRaftVersionRecord", 0), (6, "VotersRecord", 0)])
def test_kraft_control_records(ctype, spec, version):
    raw, value = _kraft_value(spec, version)
    b = decode_records(_control_batch(enc.control_key(ctype), raw), with_records=True).batches[0]
    assert b.issues == ()
    c = b.records[0].control
    assert c["type"] == ctype and c["type_name"] == CONTROL_TYPE_NAMES[ctype]
    assert c["value"] == value


def test_unknown_control_type_is_kept_raw():
    b = decode_records(_control_batch(enc.control_key(42), b"\x00\x00xyz"),
                       with_records=True).batches[0]
    assert b.issues == ()
    r = b.records[0]
    assert r.control == {"type": 42, "type_name": "UNKNOWN", "key": {"version": 0, "type": 42},
                         "value": None}
    assert r.value == b"\x00\x00xyz"


@pytest.mark.parametrize(("key", "value", "expected"), [
    (None, b"\x00\x00\x00\x00\x00\x01", "key is null"),
    (b"\x00", b"\x00\x00\x00\x00\x00\x01", "key is 1 bytes"),
    (enc.control_key(1), None, "COMMIT value is null"),
    (enc.control_key(0), b"\x00\x00\x00", "EndTxnMarker v0"),
    (enc.control_key(1), b"\x00\x00\x00\x00\x00\x01\x09", "1 bytes after the value"),
    (enc.control_key(1, version=-1), b"\x00\x00\x00\x00\x00\x01", "below the lowest"),
])
def test_bad_control_records(key, value, expected):
    data = _control_batch(key, value)
    rs = decode_records(data, with_records=True)
    assert [i.kind for i in rs.issues] == ["record_decode_error"]
    assert expected in rs.issues[0].message
    assert rs.batches[0].records[0].control is not None


def test_control_batches_in_a_compressed_batch():
    recs = [enc.Rec(enc.control_key(1), enc.end_txn_marker_value(3), offset_delta=0),
            enc.Rec(enc.control_key(0), enc.end_txn_marker_value(4), offset_delta=1)]
    data = enc.record_batch(recs, control=True, transactional=True, codec="snappy")
    b = decode_records(data, with_records=True).batches[0]
    assert [r.control["type_name"] for r in b.records] == ["COMMIT", "ABORT"]
    assert [r.control["value"]["coordinator_epoch"] for r in b.records] == [3, 4]


def test_control_batches_are_summarised_without_records():
    """Control batches are decoded record by record only when records are asked for (a
    compressed control batch of a million records once cost 11 GB without --records)."""
    data = _control_batch(None, b"\x00\x00\x00\x00\x00\x01")   # a key that does not decode
    rs = decode_records(data)
    b = rs.batches[0]
    assert b.control and b.record_count == 1 and b.records is None and rs.issues == ()


def test_bad_control_records_are_one_issue_per_batch():
    recs = [enc.Rec(b"\x00", b"\x00\x00\x00\x00\x00\x01", offset_delta=i) for i in range(50)]
    rs = decode_records(enc.record_batch(recs, control=True), with_records=True)
    assert [i.kind for i in rs.issues] == ["record_decode_error"]
    assert "50 of 50 control records do not decode" in rs.issues[0].message
    assert len(rs.batches[0].records) == 50


# --------------------------------------------------------------------------- real captures

def _records_fields(capture: str):
    """(direction, topic, partition, RawRecords) of every Produce request / Fetch response."""
    path = CAPTURES / f"{capture}.pcap"
    truth = json.loads((CAPTURES / f"{capture}.truth.json").read_text())
    dec = decode_capture(path, ports=frozenset(truth["broker_ports"]))
    out = []
    for ex in dec.exchanges:
        if ex.api_key == 0 and ex.request is not None and ex.request.body:
            for td in ex.request.body["topic_data"]:
                for pd in td["partition_data"]:
                    out.append(("produce", td["name"], pd["index"], pd["records"]))
        elif ex.api_key == 1 and ex.response is not None and ex.response.body:
            for tr in ex.response.body["responses"]:
                for p in tr["partitions"]:
                    if p["records"] is not None and p["records"].data:
                        out.append(("fetch", tr.get("topic"), p["partition_index"],
                                    p["records"]))
    return truth, out


def _truth_record(t: dict) -> tuple:
    return (t["offset"], t["timestamp_ms"],
            None if t["key_hex"] is None else bytes.fromhex(t["key_hex"]),
            None if t["value_hex"] is None else bytes.fromhex(t["value_hex"]),
            tuple((k, None if v is None else bytes.fromhex(v)) for k, v in t["headers"]))


def test_real_librdkafka_compression():
    truth, fields = _records_fields("librdkafka_compression")
    produced = {}
    for t in truth["produced"]:
        produced.setdefault(t["partition"], []).append(_truth_record(t))
    by_partition = {int(p): c for p, c in truth["compression_by_partition"].items()}
    seen = {"produce": set(), "fetch": set()}
    for direction, _topic, partition, raw in fields:
        rs = decode_records(raw.data, with_records=True)
        assert rs.issues == () and rs.partial_tail_bytes == 0
        for b in rs.batches:
            assert b.crc_ok is True and b.magic == 2
            if partition not in by_partition or b.codec == "none":
                continue  # ks-compressed partitions only (the consumer's input topic aside)
            assert b.codec == by_partition[partition]
            assert b.uncompressed_bytes > b.compressed_bytes
            got = [(r.offset, r.timestamp_ms, r.key, r.value, r.headers) for r in b.records]
            assert got == produced[partition]
            seen[direction].add(partition)
    assert seen == {"produce": {0, 1, 2, 3}, "fetch": {0, 1, 2, 3}}


def test_real_librdkafka_transactions():
    truth, fields = _records_fields("librdkafka_transactions")
    produced = {(t["partition"], t["offset"]): _truth_record(t) for t in truth["produced"]}
    markers: dict[int, list[str]] = {}
    data_seen = set()
    for direction, _topic, partition, raw in fields:
        rs = decode_records(raw.data, with_records=True)
        for b in rs.batches:
            if b.control:
                # librdkafka's mock writes its markers with CRC 0 and timestamps 0: a real
                # departure that must show as a crc_mismatch
                assert direction == "fetch" and b.crc == 0 and b.crc_ok is False
                assert [i.kind for i in b.issues] == ["crc_mismatch"]
                (r,) = b.records
                assert r.control["value"] == {"version": 0, "coordinator_epoch": 0}
                markers.setdefault(partition, []).append((b.base_offset,
                                                          r.control["type_name"]))
                continue
            assert b.crc_ok is True and b.issues == ()
            if b.transactional:
                assert b.producer_id >= 0 and b.producer_epoch >= 0
                for r in b.records:
                    if direction == "produce":  # offsets are the broker's to assign
                        assert (r.timestamp_ms, r.key, r.value, r.headers) in [
                            t[1:] for t in produced.values()]
                        continue
                    key = (partition, r.offset)
                    assert (r.offset, r.timestamp_ms, r.key, r.value, r.headers) == produced[key]
                    data_seen.add(key)
    assert data_seen == set(produced)
    expected = {m["partition"]: m["markers"] for m in truth["expected_control_records"]}
    got = {p: [name for _, name in sorted(set(v))] for p, v in markers.items()}
    assert got == expected


def test_offsets_beyond_int64_are_reported_and_decoding_goes_on():
    top = 2**63 - 1
    data = enc.record_batch([enc.Rec(value=b"v", offset_delta=5)], base_offset=top)
    rs = decode_records(data, with_records=True)
    assert [i.kind for i in rs.issues] == ["record_decode_error"]
    assert "beyond the int64 offsets" in rs.issues[0].message
    assert rs.batches[0].records[0].offset == top + 5


def test_a_control_record_repeated_is_described_once(monkeypatch):
    """A crafted control batch repeating one record a million times cost 17 us a record
    (the fuzzer's one hang): each distinct (key, value) is decoded once per batch."""
    from kafkasniff.protocol import records as rec
    from kafkasniff.protocol.schema import load_definitions

    calls = []
    real = rec._control
    monkeypatch.setattr(rec, "_control", lambda d, k, v: calls.append(k) or real(d, k, v))
    key = struct.pack(">hh", 0, 1)                      # version 0, COMMIT
    value = struct.pack(">hi", 0, 7)                    # version 0, coordinator_epoch 7
    plain = [rec.Record(i, 0, key, value, (), 0) for i in range(5000)]
    out = list(rec._controls(load_definitions(), iter(plain), []))
    assert len(out) == 5000 and len(calls) == 1
    assert out[-1].control["type_name"] == "COMMIT" and out[-1].offset == 4999


@pytest.mark.parametrize("magic", [1, 2])
def test_the_pre_0_10_lz4_header_checksum_is_a_departure_from_magic_1_on(magic):
    """Kafka wrote the wrong LZ4 header checksum (KAFKA-3160) only with magic 0 and rejects
    it from magic 1 on: decoded anyway, with a spec_departure (it passed silently)."""
    recs = [enc.Rec(key=b"k", value=b"v" * 50, offset=0, timestamp=1 if magic == 1 else None)]
    wire = (enc.message_set(1, recs, codec="lz4", lz4_broken_hc=True) if magic == 1
            else enc.record_batch(recs, codec="lz4", lz4_broken_hc=True))
    b = decode_records(wire, with_records=True)
    [issue] = b.issues
    assert issue.kind == "spec_departure" and "KAFKA-3160" in issue.message
    assert [r.value for batch in b.batches for r in batch.records] == [b"v" * 50]
    # magic 0 with that checksum is how Kafka wrote it: no issue
    assert decode_records(enc.message_set(0, [dataclasses.replace(recs[0], timestamp=None)],
                                          codec="lz4", lz4_broken_hc=True)).issues == ()


def test_the_crc32c_package_is_imported_at_the_first_batch_checked():
    """Starting a decoding process does not import the crc32c package (its ``__init__``
    pulls in ``importlib.metadata``: 40 ms of every start); the first record batch checked
    does, and its CRC is the package's."""
    code = (
        "import sys\n"
        "import kafkasniff.cli, kafkasniff.pipeline\n"
        "from kafkasniff.protocol import records\n"
        "before = [m for m in ('crc32c', 'importlib.metadata') if m in sys.modules]\n"
        "got = records.decode_records(bytes.fromhex(sys.argv[1]))\n"
        "print(before, 'crc32c' in sys.modules, got.batches[0].crc_ok,\n"
        "      records._crc32c is sys.modules['crc32c'].crc32c)\n")
    wire = enc.record_batch([enc.Rec(b"k", b"v", [], 0, 0)])
    out = subprocess.run([sys.executable, "-c", code, wire.hex()], capture_output=True,
                         text=True, check=True).stdout
    assert out.split() == ["[]", "True", "True", "True"]
