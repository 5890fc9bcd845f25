"""Test-only Kafka body encoder and hypothesis strategies, built from the decoding plans.

``encode(plan, value)`` is the exact inverse of the decoder conventions documented in
:mod:`kafkasniff.protocol.codegen`: dict keys are the plan's snake_case keys, uuids are
Kafka's base64url text, ``records`` are :class:`RawRecords`, tagged fields are written only
when their key is present, and ``_unknown_tagged_fields`` (``[{"tag", "data"}]``) are merged
with the known tagged fields in ascending tag order.

``value_strategy(plan)`` generates random valid values for a plan (small sizes, full integer
ranges, non-ASCII text, random presence of tagged fields, random unknown tags).

Only the Kafka wire rules are used here (not the decoder's code), so encoder and decoder are
two independent readings of the same rules.
"""

from __future__ import annotations

import base64
import struct

from hypothesis import strategies as st

from kafkasniff.protocol.codegen import UNKNOWN_TAGS_KEY
from kafkasniff.protocol.primitives import RawRecords
from kafkasniff.protocol.plans import FieldPlan, StructPlan

__all__ = ["encode", "encode_struct", "example_value", "field_offsets", "value_strategy",
           "UNKNOWN_TAGS_KEY", "INT_RANGES"]

_FIXED = {
    "int8": struct.Struct(">b"), "int16": struct.Struct(">h"), "int32": struct.Struct(">i"),
    "int64": struct.Struct(">q"), "uint16": struct.Struct(">H"), "uint32": struct.Struct(">I"),
    "float64": struct.Struct(">d"),
}
INT_RANGES = {
    "int8": (-(2 ** 7), 2 ** 7 - 1), "int16": (-(2 ** 15), 2 ** 15 - 1),
    "int32": (-(2 ** 31), 2 ** 31 - 1), "int64": (-(2 ** 63), 2 ** 63 - 1),
    "uint16": (0, 2 ** 16 - 1), "uint32": (0, 2 ** 32 - 1),
}
MAX_ARRAY = 3


# --------------------------------------------------------------------------- encoder

def write_uvarint(value: int) -> bytes:
    """Unsigned varint, little-endian base 128 (written here, not taken from the package)."""
    if value < 0:
        raise ValueError("uvarint must be >= 0")
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def uuid_to_str(raw: bytes) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 without padding (22 characters)."""
    assert len(raw) == 16
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def uuid_from_str(text: str) -> bytes:
    """Inverse of :func:`uuid_to_str`."""
    raw = base64.urlsafe_b64decode(text + "==")
    if len(raw) != 16 or uuid_to_str(raw) != text:
        raise ValueError(f"not a Kafka uuid: {text!r}")
    return raw


def _length(n: int, compact: bool, width: int) -> bytes:
    """A length/count prefix; ``n == -1`` is null."""
    if compact:
        return write_uvarint(n + 1)
    return struct.pack(">h" if width == 2 else ">i", n)


def _encode_value(f: FieldPlan, value, kind: str | None = None, nullable: bool | None = None,
                  lax: bool = False) -> bytes:
    kind = kind or f.kind
    nullable = f.nullable if nullable is None else nullable
    if value is None and kind in ("string", "bytes", "records", "array", "struct"):
        if not nullable and not (lax and kind != "struct"):
            raise ValueError(f"{f.key}: None in a non-nullable {kind}")
    if kind in _FIXED:
        if kind != "float64" and (type(value) is not int):
            raise TypeError(f"{f.key}: int expected, got {value!r}")
        return _FIXED[kind].pack(value)
    if kind == "bool":
        if not isinstance(value, bool):
            raise TypeError(f"{f.key}: bool expected, got {value!r}")
        return b"\x01" if value else b"\x00"
    if kind == "uuid":
        return uuid_from_str(value)
    if kind in ("string", "bytes", "records"):
        width = 2 if kind == "string" else 4
        if value is None:
            return _length(-1, f.compact, width)
        if kind == "string":
            if lax and isinstance(value, bytes):  # raw (possibly invalid UTF-8) string bytes
                raw = value
            else:
                raw = value.encode("utf-8")
        elif kind == "records":
            if not isinstance(value, RawRecords):
                raise TypeError(f"{f.key}: RawRecords expected, got {value!r}")
            raw = value.data
        else:
            raw = bytes(value)
        return _length(len(raw), f.compact, width) + raw
    if kind == "struct":
        if nullable:
            if f.tag is not None:  # tagged nullable struct: uvarint marker 0 = null, 1 = present
                if value is None:
                    return write_uvarint(0)
                return write_uvarint(1) + encode_struct(f.struct, value, lax=lax)
            if value is None:  # int8 marker -1 = null, 1 = present
                return b"\xff"
            return b"\x01" + encode_struct(f.struct, value, lax=lax)
        return encode_struct(f.struct, value, lax=lax)
    if kind == "array":
        if value is None:
            return _length(-1, f.compact, 4)
        out = [_length(len(value), f.compact, 4)]
        for item in value:
            if f.items == "struct":
                out.append(encode_struct(f.struct, item, lax=lax))
            else:  # array elements are never nullable
                out.append(_encode_value(f, item, kind=f.items, nullable=False, lax=lax))
        return b"".join(out)
    raise ValueError(f"{f.key}: unknown kind {kind}")


def encode_struct(plan: StructPlan, value: dict, *, lax: bool = False) -> bytes:
    """Encode one struct (or a whole body) ``value`` with ``plan``.

    ``lax=True`` lets a test write spec departures on purpose: ``None`` in a non-nullable
    string/bytes/records/array is written as a null length, and ``bytes`` given for a string
    are written as they are (e.g. invalid UTF-8).
    """
    allowed = {f.key for f in plan.fields}
    if plan.flexible:
        allowed |= {f.key for f in plan.tagged.values()} | {UNKNOWN_TAGS_KEY}
    extra = set(value) - allowed
    if extra:
        raise KeyError(f"{plan.name}: keys not in the plan: {sorted(extra)}")
    out = [_encode_value(f, value[f.key], lax=lax) for f in plan.fields]
    if plan.flexible:
        tagged: list[tuple[int, bytes]] = []
        for tag, f in plan.tagged.items():
            if f.key in value:
                tagged.append((tag, _encode_value(f, value[f.key], lax=lax)))
        for unk in value.get(UNKNOWN_TAGS_KEY, ()):
            if unk["tag"] in plan.tagged:
                raise ValueError(f"{plan.name}: unknown tag {unk['tag']} is a known tag")
            tagged.append((unk["tag"], bytes(unk["data"])))
        tagged.sort(key=lambda t: t[0])
        tags = [t for t, _ in tagged]
        if len(set(tags)) != len(tags):
            raise ValueError(f"{plan.name}: duplicate tags {tags}")
        out.append(write_uvarint(len(tagged)))
        for tag, data in tagged:
            out.append(write_uvarint(tag) + write_uvarint(len(data)) + data)
    return b"".join(out)


def encode(plan: StructPlan, value: dict, *, lax: bool = False) -> bytes:
    """Encode a message body ``value`` (as the decoders return it) with ``plan``."""
    return encode_struct(plan, value, lax=lax)


def field_offsets(plan: StructPlan, value: dict, start: int = 0) -> list[tuple[str, int, int]]:
    """``(key, start, end)`` of each untagged top-level field of ``encode(plan, value)``."""
    out = []
    pos = start
    for f in plan.fields:
        n = len(_encode_value(f, value[f.key]))
        out.append((f.key, pos, pos + n))
        pos += n
    return out


# --------------------------------------------------------------------------- example values

def example_value(plan: StructPlan, *, array_len: int = 2, unknown_tags: bool = True) -> dict:
    """A deterministic, non-trivial value for ``plan``: every field present and non-null,
    arrays of ``array_len`` elements, non-ASCII strings, every tagged field present, and one
    unknown tagged field per flexible struct (tag above the known ones)."""
    counter = [0]

    def nxt() -> int:
        counter[0] += 1
        return counter[0]

    def prim(kind: str):
        n = nxt()
        if kind in INT_RANGES:
            lo, hi = INT_RANGES[kind]
            return hi - n if n % 2 else lo + n
        return {
            "bool": n % 2 == 1, "float64": n + 0.25,
            "uuid": uuid_to_str(bytes((n + i) % 256 for i in range(16))),
            "string": f"s{n}-é☃", "bytes": bytes([n % 256, 0, 255]),
            "records": RawRecords(b"REC" + bytes([n % 256]) * 5),
        }[kind]

    def field(f: FieldPlan):
        if f.kind == "struct":
            return struct_(f.struct)
        if f.kind == "array":
            if f.items == "struct":
                return [struct_(f.struct) for _ in range(array_len)]
            return [prim(f.items) for _ in range(array_len)]
        return prim(f.kind)

    def struct_(p: StructPlan) -> dict:
        d = {f.key: field(f) for f in p.fields}
        if p.flexible:
            for _, f in sorted(p.tagged.items()):
                d[f.key] = field(f)
            if unknown_tags:
                d[UNKNOWN_TAGS_KEY] = [{"tag": max(p.tagged, default=-1) + 1 + nxt() % 3,
                                        "data": b"\xab\xcd"}]
        return d

    return struct_(plan)


# --------------------------------------------------------------------------- strategies

_UUIDS = st.binary(min_size=16, max_size=16).map(uuid_to_str)
_TEXT = st.text(max_size=6)  # hypothesis' default alphabet: all of Unicode but surrogates
_FLOATS = st.floats(allow_nan=False)
_BINARY = st.binary(max_size=8)
_RECORDS = st.binary(max_size=24).map(RawRecords)

_PRIM = {
    "bool": st.booleans(), "uuid": _UUIDS, "float64": _FLOATS, "string": _TEXT,
    "bytes": _BINARY, "records": _RECORDS,
}
for _k, (_lo, _hi) in INT_RANGES.items():
    _PRIM[_k] = st.integers(_lo, _hi)


def _field_strategy(f: FieldPlan, cache: dict) -> st.SearchStrategy:
    if f.kind in _PRIM:
        s = _PRIM[f.kind]
    elif f.kind == "struct":
        s = _struct_strategy(f.struct, cache)
    elif f.kind == "array":
        elem = _struct_strategy(f.struct, cache) if f.items == "struct" else _PRIM[f.items]
        s = st.lists(elem, max_size=MAX_ARRAY)
    else:
        raise ValueError(f"unknown kind {f.kind}")
    if f.nullable:
        s = st.none() | s
    return s


def _unknown_tags_strategy(plan: StructPlan) -> st.SearchStrategy:
    known = set(plan.tagged)
    tag = st.one_of(st.integers(0, 20), st.integers(0, 2 ** 31 - 1)).filter(lambda t: t not in known)
    return st.lists(st.tuples(tag, st.binary(max_size=6)), min_size=1, max_size=3,
                    unique_by=lambda t: t[0]).map(
        lambda items: [{"tag": t, "data": d} for t, d in sorted(items)])


def _struct_strategy(plan: StructPlan, cache: dict) -> st.SearchStrategy:
    key = id(plan)
    s = cache.get(key)
    if s is None:
        required = {f.key: _field_strategy(f, cache) for f in plan.fields}
        optional = {}
        if plan.flexible:
            optional = {f.key: _field_strategy(f, cache) for _, f in sorted(plan.tagged.items())}
            optional[UNKNOWN_TAGS_KEY] = _unknown_tags_strategy(plan)
        s = st.fixed_dictionaries(required, optional=optional or None)
        cache[key] = s
    return s


def value_strategy(plan: StructPlan) -> st.SearchStrategy:
    """Random valid decoded values for ``plan`` (what the decoders must give back)."""
    return _struct_strategy(plan, {})
