"""Decoding Kafka record data: message sets (magic 0 and 1) and record batches (magic 2).

``records`` fields (Produce requests, Fetch/ShareFetch responses, FetchSnapshot responses)
hold a sequence of batches, each framed by ``int64 offset, int32 length``; the byte at
offset 16 is the magic that selects the format:

- magic 0/1 (Kafka protocol guide, "Message sets"; KIP-32 adds the magic 1 timestamp)::

      offset int64, message_size int32, crc uint32, magic int8, attributes int8,
      [timestamp int64 (magic 1)], key bytes, value bytes

  CRC32 (``zlib.crc32``) covers magic..end. Attributes: codec in bits 0-2, timestamp type
  in bit 3 (magic 1). A compressed message is a *wrapper*: its value is a compressed message
  set. For magic 1 the inner offsets are relative (KIP-31): absolute = wrapper offset -
  last inner relative offset + inner relative offset; for magic 0 they are absolute. With
  ``log_append_time`` on a magic 1 wrapper every inner message takes the wrapper's
  timestamp.

- magic 2 record batch (KIP-98), a 61-byte header::

      baseOffset int64, batchLength int32, partitionLeaderEpoch int32, magic int8,
      crc uint32, attributes int16, lastOffsetDelta int32, baseTimestamp int64,
      maxTimestamp int64, producerId int64, producerEpoch int16, baseSequence int32,
      recordCount int32, records...

  CRC32C covers attributes..end. Attributes: codec bits 0-2, timestamp type bit 3,
  transactional bit 4, control bit 5, delete horizon bit 6 (KIP-534: ``baseTimestamp`` is
  then the delete horizon). The records section (compressed as a whole when codec != 0)
  holds ``recordCount`` records::

      length varint, attributes int8, timestampDelta varlong, offsetDelta varint,
      keyLength varint, key, valueLength varint, value,
      headerCount varint, [headerKeyLength varint, headerKey, headerValueLength varint, value]

  (zig-zag varints, -1 length = null). With ``log_append_time`` every record's timestamp is
  the batch's ``maxTimestamp`` (as Kafka's consumers report it).

Control batches (transaction markers, KRaft records) are always decoded record by record:
the key is ``int16 version`` + ``ControlRecordTypeSchema`` (type int16: ABORT 0, COMMIT 1,
LEADER_CHANGE 2, SNAPSHOT_HEADER 3, SNAPSHOT_FOOTER 4, KRAFT_VERSION 5, KRAFT_VOTERS 6,
Kafka's ``ControlRecordType``). ABORT/COMMIT values are ``int16 version`` + ``EndTxnMarker``
at that version; the KRaft values (``LeaderChangeMessage``, ``SnapshotHeaderRecord``,
``SnapshotFooterRecord``, ``KRaftVersionRecord``, ``VotersRecord``) are written without a
prefix and start with their own ``Version`` field, which selects the layout. Versions above
the newest known are read as the newest (as Kafka does).

Decoding never raises on bad data and never loops more than the data allows; the
decompressions of one batch (a magic 0/1 wrapper's nested wrappers included) are bounded
together by ``max_uncompressed_bytes``.
"""

from __future__ import annotations

import dataclasses
import struct
import zlib
from dataclasses import dataclass
from functools import partial
from itertools import islice

from kafkasniff.frozen import fast_init
from kafkasniff.protocol.compression import (
    DEFAULT_MAX_BYTES,
    DecompressionError,
    DecompressionLimit,
    codec_name,
    decompress,
)
from kafkasniff.protocol.recordloop import Bad as _Bad
from kafkasniff.protocol.recordloop import v2_records

__all__ = ["Record", "Batch", "RecordIssue", "RecordSet", "decode_records",
           "CONTROL_TYPE_NAMES", "V2_HEADER_BYTES"]

_OFFSET_LENGTH = struct.Struct(">qi")
_V2_HEADER = struct.Struct(">qiibIhiqqqhii")  # the 61-byte record batch header
_LEGACY_HEADER = struct.Struct(">qiIbb")  # offset, message_size, crc, magic, attributes
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

V2_HEADER_BYTES = 61
_V2_MIN_LENGTH = V2_HEADER_BYTES - 12  # batchLength counts from partitionLeaderEpoch
_LEGACY_HEADER_BYTES = {0: 18, 1: 26}  # offset..attributes (+ timestamp for magic 1)
_LEGACY_MIN_SIZE = {0: 14, 1: 22}  # message_size: crc..attributes (+timestamp) + 2 lengths
_MAX_LEGACY_DEPTH = 3  # nested compressed wrappers (Kafka writes one level)
_V2_MIN_RECORD_BYTES = 7  # length, attributes, timestampDelta, offsetDelta, key, value, headers

CONTROL_TYPE_NAMES = {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER",
                      4: "SNAPSHOT_FOOTER", 5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}
# control type -> (data spec of the value, whether the value has an int16 version prefix)
_CONTROL_VALUE_SPECS = {0: ("EndTxnMarker", True), 1: ("EndTxnMarker", True),
                        2: ("LeaderChangeMessage", False), 3: ("SnapshotHeaderRecord", False),
                        4: ("SnapshotFooterRecord", False), 5: ("KRaftVersionRecord", False),
                        6: ("VotersRecord", False)}
_CONTROL_KEY_SPEC = "ControlRecordTypeSchema"

_NO_HEADERS: tuple = ()
_UNBOUNDED = 1 << 62


@fast_init
@dataclass(frozen=True, slots=True)
class Record:
    """One record of a magic 2 batch, or one (inner) message of a magic 0/1 message set.

    Attributes:
        offset: absolute offset (inner magic 1 offsets already made absolute, KIP-31).
        timestamp_ms: ms since the epoch; ``None`` for magic 0. With ``log_append_time``
            the batch's (wrapper's) timestamp, as Kafka reports it (KIP-32).
        key / value: the bytes, ``None`` when null.
        headers: ``((key, value), ...)``: key decoded as UTF-8 (invalid bytes
            backslash-escaped), value bytes or ``None`` (magic 2 only; ``()`` otherwise).
        attributes: signed int8: the record attributes (magic 2, unused by Kafka) or the
            message attributes (magic 0/1).
        control: for records of control batches, ``{"type": int, "type_name": "COMMIT" ...,
            "key": {"version", "type"}, "value": dict | None}`` (the value decoded with the
            data spec of that type, ``None`` for unknown types or undecodable values);
            ``None`` for ordinary records.
    """

    offset: int
    timestamp_ms: int | None
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    attributes: int
    control: dict | None = None


@dataclass(frozen=True, slots=True)
class RecordIssue:
    """A problem found in record data.

    Attributes:
        kind: ``crc_mismatch``, ``decompression_error``, ``decompression_limit``,
            ``truncated_batch`` (a batch length below the format's minimum),
            ``record_decode_error``, ``unknown_magic``, ``unknown_codec`` or
            ``spec_departure`` (decoded anyway: an LZ4 header checksum of pre-0.10 Kafka on
            magic 1 or 2).
        message: what was found, with expected and actual values.
        offset: byte offset inside the records field (for problems inside compressed data:
            the start of the compressed section; the message gives the decompressed offset).
    """

    kind: str
    message: str
    offset: int


@fast_init
@dataclass(frozen=True, slots=True)
class Batch:
    """A magic 2 record batch, or one top-level magic 0/1 message (a compressed wrapper is
    one Batch holding its inner messages).

    Attributes:
        magic: 0, 1 or 2.
        wire_offset: byte offset of the batch in the records field.
        batch_bytes: bytes of the batch in the data (12-byte offset/length prefix included;
            for a partial batch the bytes present).
        base_offset / last_offset: first and last offset (magic 2: from the header,
            ``baseOffset + lastOffsetDelta``; magic 0/1: of the first and last (inner)
            message; for a partial magic 0/1 wrapper both are the wrapper's offset).
        record_count: records (magic 2: the header's count) or messages (magic 0/1: 1, or the
            inner messages of a wrapper; 0 for a partial wrapper).
        codec: ``none``, ``gzip``, ``snappy``, ``lz4``, ``zstd`` or ``unknown(n)``.
        timestamp_type: ``create_time`` or ``log_append_time`` (attributes bit 3), ``None``
            for magic 0.
        base_timestamp_ms / max_timestamp_ms: magic 2: the header's baseTimestamp (the delete
            horizon when ``delete_horizon``) and maxTimestamp; magic 1: the (wrapper)
            message's timestamp for both; ``None`` for magic 0.
        producer_id / producer_epoch / base_sequence: magic 2 header (signed, -1 when none);
            ``None`` for magic 0/1.
        partition_leader_epoch: magic 2 header, ``None`` for magic 0/1.
        transactional / control / delete_horizon: attributes bits 4, 5, 6 (magic 2).
        crc: the stored CRC (unsigned 32-bit).
        crc_ok: whether it matches (CRC32C for magic 2, CRC32 for 0/1; for a wrapper also
            every inner message's CRC); ``None`` when not checked (partial batch, or
            ``verify_crc=False``).
        compressed_bytes: size of the records section (magic 2) or of the message value
            (magic 0/1), as on the wire (partial batch: the section bytes present, 0 for
            magic 0/1).
        uncompressed_bytes: the same after decompression (equal for codec none); ``None``
            when not decompressed (partial, unknown codec, decompression failed).
        partial: the data ends inside this batch (normal at the end of a Fetch response).
        records: every record when decoded with ``with_records=True`` (control batches:
            always), else ``None``; also ``None`` for partial batches. Records decoded before
            a ``record_decode_error`` are kept.
        issues: problems of this batch (also in :attr:`RecordSet.issues`).
    """

    magic: int
    wire_offset: int
    batch_bytes: int
    base_offset: int
    last_offset: int
    record_count: int
    codec: str
    timestamp_type: str | None
    base_timestamp_ms: int | None
    max_timestamp_ms: int | None
    producer_id: int | None
    producer_epoch: int | None
    base_sequence: int | None
    partition_leader_epoch: int | None
    transactional: bool
    control: bool
    delete_horizon: bool
    crc: int
    crc_ok: bool | None
    compressed_bytes: int
    uncompressed_bytes: int | None
    partial: bool
    records: tuple[Record, ...] | None
    issues: tuple[RecordIssue, ...] = ()


@fast_init
@dataclass(frozen=True, slots=True)
class RecordSet:
    """The decoded content of one ``records`` field.

    Attributes:
        size_bytes: length of the data.
        batches: the batches in wire order (a trailing partial batch included when its
            fixed header is complete).
        partial_tail_bytes: bytes of a trailing incomplete batch (0 if none). Not an issue
            here: a Fetch response may end inside a batch; callers decide.
        issues: every issue (the batches' included), in data order.
        decompressed_bytes: bytes produced by decompression (a limit reached counts the
            bytes allowed).
        not_decompressed: batches not decompressed because the call's
            ``max_total_uncompressed_bytes`` ran out.
        not_decoded: batches whose records were not decoded because the call's
            ``max_records`` ran out.
    """

    size_bytes: int
    batches: tuple[Batch, ...]
    partial_tail_bytes: int
    issues: tuple[RecordIssue, ...]
    decompressed_bytes: int = 0
    not_decompressed: int = 0
    not_decoded: int = 0


def _builder(cls: type) -> type:
    """A non-frozen slotted twin of frozen dataclass ``cls`` (same fields, same slots).

    Values are built with the twin and then given the class ``cls``: a frozen dataclass
    ``__init__`` sets each field through ``object.__setattr__`` (about 3x slower), which
    matters for millions of records. The slot layouts are identical, so the ``__class__``
    assignment is allowed and the result is an ordinary, frozen ``cls`` instance.
    """
    fields = [(f.name, f.type) if f.default is dataclasses.MISSING
              else (f.name, f.type, dataclasses.field(default=f.default))
              for f in dataclasses.fields(cls)]
    return dataclasses.make_dataclass(f"_{cls.__name__}Builder", fields, slots=True)


_RecordBuilder = _builder(Record)
_BatchBuilder = _builder(Batch)


def _new_record(offset, timestamp_ms, key, value, headers, attributes):
    r = _RecordBuilder(offset, timestamp_ms, key, value, headers, attributes)
    r.__class__ = Record
    return r


def _new_batch(*args) -> Batch:
    b = _BatchBuilder(*args)
    b.__class__ = Batch
    return b


def decode_records(data: bytes, *, with_records: bool = False, verify_crc: bool = True,
                   max_uncompressed_bytes: int = DEFAULT_MAX_BYTES, defs=None,
                   max_total_uncompressed_bytes: int | None = None,
                   max_records: int | None = None) -> RecordSet:
    """Decode the batches of a ``records`` field.

    Args:
        data: the field's bytes (message sets and/or record batches).
        with_records: decode every record (keys, values, headers; control records
            described). Otherwise only the batch headers are read (counts, offsets and
            timestamps come from them) and the records section is decompressed to measure
            it; control batches are summarised like any other.
        verify_crc: check CRC32C (magic 2) / CRC32 (magic 0/1).
        max_uncompressed_bytes: largest decompressed size accepted per batch (for a magic
            0/1 wrapper: its value and the nested wrappers inside, together); a larger one
            is a ``decompression_limit`` issue (bomb protection).
        defs: :class:`kafkasniff.protocol.schema.Definitions` for control records (default:
            the installed definitions, loaded on the first control record).
        max_total_uncompressed_bytes: bytes this call may decompress in all (the frame's and
            the capture's budgets, :mod:`kafkasniff.content.budgets`); ``None``: no bound.
        max_records: records this call may decode with ``with_records``; ``None``: no bound.
            Batches beyond either budget are summarised from their headers (their
            ``uncompressed_bytes`` or ``records`` are ``None``) and counted in
            :attr:`RecordSet.not_decompressed` / :attr:`RecordSet.not_decoded`, with no
            issue of their own: the caller reports the budget once.

    Returns a :class:`RecordSet`. Never raises on bad data: problems become
    :class:`RecordIssue` entries. An unknown magic or a batch length below the minimum stops
    the decoding (what follows cannot be framed). Memory: a batch of more than
    ``EAGER_RECORDS`` records holds its section's bytes, not its records
    (:class:`LazyRecords`).
    """
    if not isinstance(data, bytes):
        data = bytes(data)
    n = len(data)
    mv = memoryview(data)
    batches: list[Batch] = []
    issues: list[RecordIssue] = []
    partial_tail = 0
    pos = 0
    ctx = _Ctx(with_records, verify_crc, max_uncompressed_bytes, defs,
               _UNBOUNDED if max_total_uncompressed_bytes is None
               else max_total_uncompressed_bytes,
               _UNBOUNDED if max_records is None else max_records)
    while pos < n:
        rem = n - pos
        if rem < 17:  # offset, length, and (legacy crc | v2 leader epoch) up to the magic
            partial_tail = rem
            break
        base_offset, length = _OFFSET_LENGTH.unpack_from(data, pos)
        magic = data[pos + 16]
        if magic == 2:
            min_length = _V2_MIN_LENGTH
        elif magic == 0 or magic == 1:
            min_length = _LEGACY_MIN_SIZE[magic]
        else:
            issues.append(RecordIssue(
                "unknown_magic", f"unknown magic {magic if magic < 128 else magic - 256} at "
                f"byte {pos + 16} (expected 0, 1 or 2); the {rem} bytes from byte {pos} "
                f"cannot be framed", pos))
            break
        if length < min_length:
            issues.append(RecordIssue(
                "truncated_batch", f"magic {magic} batch at byte {pos}: length {length} is "
                f"below the minimum {min_length}; the {rem} bytes from byte {pos} cannot be "
                f"framed", pos))
            break
        end = pos + 12 + length
        if end > n:
            partial_tail = rem
            if magic == 2:
                if rem >= V2_HEADER_BYTES:
                    batches.append(_v2_partial(data, pos, rem))
            elif rem >= _LEGACY_HEADER_BYTES[magic]:
                batches.append(_legacy_partial(data, pos, rem, magic))
            break
        if magic == 2:
            batch = _v2_batch(data, mv, pos, end, ctx)
        else:
            batch = _legacy_batch(data, mv, pos, end, magic, ctx)
        batches.append(batch)
        if batch.issues:
            issues.extend(batch.issues)
        pos = end
    return RecordSet(n, tuple(batches), partial_tail, tuple(issues), ctx.decompressed,
                     ctx.not_decompressed, ctx.not_decoded)


class _Ctx:
    """Options and budgets of one decode_records call. ``budget``: decompressed bytes the
    current magic 0/1 wrapper's nested wrappers may still produce; ``total_left``: bytes
    the call may still decompress; ``records_left``: records it may still decode;
    ``not_decompressed`` / ``not_decoded``: batches left undecompressed / with records
    undecoded because ``total_left`` / ``records_left`` ran out; ``decompressed``: bytes
    decompressed."""

    __slots__ = ("with_records", "verify_crc", "max_bytes", "defs", "budget", "total_left",
                 "records_left", "not_decompressed", "not_decoded", "decompressed")

    def __init__(self, with_records: bool, verify_crc: bool, max_bytes: int, defs,
                 total_left: int, records_left: int) -> None:
        self.with_records = with_records
        self.verify_crc = verify_crc
        self.max_bytes = max_bytes
        self.defs = defs
        self.budget = max_bytes
        self.total_left = total_left
        self.records_left = records_left
        self.not_decompressed = 0
        self.not_decoded = 0
        self.decompressed = 0

    def allowance(self) -> int:
        """Bytes the next decompression may produce (0: none is attempted)."""
        return max(0, min(self.max_bytes, self.total_left))

    def spend(self, n: int) -> None:
        self.total_left -= n
        self.decompressed += n


# --------------------------------------------------------------------------- magic 2

def _ts_type(attributes: int) -> str:
    return "log_append_time" if attributes & 0x08 else "create_time"


def _v2_partial(data: bytes, pos: int, rem: int) -> Batch:
    (base_offset, _length, leader_epoch, magic, crc, attrs, last_delta, base_ts, max_ts,
     producer_id, producer_epoch, base_sequence, count) = _V2_HEADER.unpack_from(data, pos)
    return _new_batch(magic, pos, rem, base_offset, base_offset + last_delta, count,
                      codec_name(attrs & 0x07), _ts_type(attrs), base_ts, max_ts, producer_id,
                      producer_epoch, base_sequence, leader_epoch, bool(attrs & 0x10),
                      bool(attrs & 0x20), bool(attrs & 0x40), crc, None,
                      rem - V2_HEADER_BYTES, None, True, None)


_INT64_MAX = (1 << 63) - 1


def _crc32c(data) -> int:
    """CRC-32C of ``data`` (a bytes-like object) by the crc32c package, imported at the first
    record batch checked: its ``__init__`` reads its own version through
    ``importlib.metadata`` (with ``email``, ``zipfile`` and ``argparse``: 40 ms of every
    process start), which a process that checks no batch (``--help``, the Spark driver, a
    capture without record data) does without. This function replaces itself with the
    package's on the first call."""
    global _crc32c
    from crc32c import crc32c

    _crc32c = crc32c
    return crc32c(data)


def _v2_batch(data: bytes, mv: memoryview, pos: int, end: int, ctx: _Ctx) -> Batch:
    (base_offset, _length, leader_epoch, magic, crc, attrs, last_delta, base_ts, max_ts,
     producer_id, producer_epoch, base_sequence, count) = _V2_HEADER.unpack_from(data, pos)
    issues: list[RecordIssue] = []
    crc_ok = None
    if ctx.verify_crc:
        actual = _crc32c(mv[pos + 21:end])
        crc_ok = actual == crc
        if not crc_ok:
            issues.append(RecordIssue(
                "crc_mismatch", f"record batch at byte {pos} (base offset {base_offset}): "
                f"CRC32C of the batch is {actual:#010x}, stored CRC is {crc:#010x}", pos))
    if base_offset + last_delta > _INT64_MAX:
        issues.append(RecordIssue(
            "record_decode_error", f"record batch at byte {pos}: base offset {base_offset} + "
            f"last offset delta {last_delta} is beyond the int64 offsets Kafka uses", pos))
    codec = attrs & 0x07
    control = bool(attrs & 0x20)
    start = pos + V2_HEADER_BYTES
    section = end - start
    uncompressed = None
    buf = None  # buffer holding the records section, and its bounds
    rpos = rend = 0
    if codec == 0:
        uncompressed = section
        buf, rpos, rend = data, start, end
    elif codec <= 4:
        allowed = ctx.allowance()
        if allowed:
            quirks: list[str] = []
            try:
                buf = decompress(codec, data[start:end], allowed, quirks)
            except DecompressionLimit as exc:
                if allowed == ctx.max_bytes:
                    issues.append(RecordIssue("decompression_limit", f"record batch at byte "
                                              f"{pos} (base offset {base_offset}): {exc}",
                                              start))
                else:  # the call's budget ran out, not the batch's limit
                    ctx.not_decompressed += 1
                ctx.spend(allowed)
            except DecompressionError as exc:
                issues.append(RecordIssue("decompression_error", f"record batch at byte {pos} "
                                          f"(base offset {base_offset}): {exc}", start))
            else:
                uncompressed = rend = len(buf)
                ctx.spend(uncompressed)
                if quirks:
                    issues.append(RecordIssue("spec_departure", _LZ4_HC_DEPARTURE.format(
                        where=f"record batch at byte {pos} (base offset {base_offset})"),
                        start))
        else:
            ctx.not_decompressed += 1
    else:
        issues.append(RecordIssue("unknown_codec", f"record batch at byte {pos} (base offset "
                                  f"{base_offset}): unknown compression codec {codec} "
                                  f"(attributes {attrs:#06x})", pos + 21))
    if uncompressed is not None and not 0 <= count <= uncompressed // _V2_MIN_RECORD_BYTES \
            and not (count == 0 and uncompressed == 0):
        issues.append(RecordIssue(
            "record_decode_error", f"record batch at byte {pos} (base offset {base_offset}): "
            f"record count {count} cannot fit the {uncompressed} bytes of the records section "
            f"(a record takes at least {_V2_MIN_RECORD_BYTES} bytes)", pos + 57))
    records = None
    if buf is not None and ctx.with_records:
        if min(count, (rend - rpos) // _V2_MIN_RECORD_BYTES) > ctx.records_left:
            ctx.not_decoded += 1
        else:
            lat_ts = max_ts if attrs & 0x08 else None
            defs = _control_defs(ctx) if control else None
            factory = partial(_v2_stream, buf, rpos, rend, count, base_offset, base_ts, lat_ts,
                              defs)
            try:
                records, n = _collect(factory, ctx, pos, issues)
            except _Bad as bad:
                where = bad.pos if codec == 0 else start
                inside = "" if codec == 0 else f" (byte {bad.pos} of the decompressed records)"
                records, n = bad.records, len(bad.records)
                issues.append(RecordIssue("record_decode_error", f"record batch at byte {pos} "
                                          f"(base offset {base_offset}): {bad.message}{inside}; "
                                          f"{n} of {count} records decoded", where))
            if type(records) is not tuple:
                records = LazyRecords(factory, n)
    return _new_batch(magic, pos, end - pos, base_offset, base_offset + last_delta, count,
                      codec_name(codec), _ts_type(attrs), base_ts, max_ts, producer_id,
                      producer_epoch, base_sequence, leader_epoch, bool(attrs & 0x10), control,
                      bool(attrs & 0x40), crc, crc_ok, section, uncompressed, False, records,
                      tuple(issues))


def _v2_stream(buf, pos: int, end: int, count: int, base_offset: int, base_ts: int,
               lat_ts: int | None, defs, problems: list | None = None):
    """The records of a batch (:func:`~kafkasniff.protocol.recordloop.v2_records`); with
    ``defs`` control records are described, and ``(offset, problem)`` of those that do not
    decode go to ``problems``."""
    records = v2_records(buf, pos, end, count, base_offset, base_ts, lat_ts, _RecordBuilder,
                         Record)
    if defs is None:
        return records
    return _controls(defs, records, problems)


def _controls(defs, records, problems: list | None):
    # a real control batch holds one record; a crafted one may repeat the same record a
    # million times: each distinct (key, value) is decoded once (the description is shared)
    # each record is new (the record loop makes one per yield, never shared): its control
    # slot is set in place through the slot's descriptor, not copied into another Record
    seen: dict = {}
    set_control = _SET_CONTROL
    for r in records:
        kv = (r.key, r.value)
        got = seen.get(kv)
        if got is None:
            got = _control(defs, r.key, r.value)
            if len(seen) < 256:
                seen[kv] = got
        control, problem = got
        if problem and problems is not None:
            problems.append((r.offset, problem))
        set_control(r, control)
        yield r


_SET_CONTROL = Record.__dict__["control"].__set__


_LZ4_HC_DEPARTURE = ("{where}: LZ4 frame header checksum computed over the wrong bytes, as "
                     "Kafka before 0.10 wrote it for magic 0 (KAFKA-3160); Kafka rejects it "
                     "from magic 1 on (decoded anyway)")

#: a batch with at most this many records keeps them as a tuple; a larger one is a
#: :class:`LazyRecords`
EAGER_RECORDS = 4096


def _collect(factory, ctx: _Ctx, batch_pos: int, issues: list) -> tuple:
    """Run through a batch's records once (``factory(problems)`` yields them): count them,
    check control records (one issue for all the control records of the batch that do not
    decode), keep them when they are few.

    Returns ``(tuple of the records, count)`` for at most ``EAGER_RECORDS`` records, else
    ``(None, count)`` (the caller makes a :class:`LazyRecords`). Raises ``_Bad`` with the
    records before the departure in its ``records`` attribute.
    """
    kept: list | None = []
    problems: list = []
    n = 0
    try:
        for r in factory(problems):
            n += 1
            if kept is not None:
                if n > EAGER_RECORDS:
                    kept = None
                else:
                    kept.append(r)
    except _Bad as bad:
        bad.records = tuple(kept) if kept is not None else LazyRecords(factory, n)
        raise
    finally:
        ctx.records_left -= n
        if problems:
            offset, problem = problems[0]
            more = f"{len(problems)} of {n} control records do not decode; the first: " \
                if len(problems) > 1 else ""
            issues.append(RecordIssue(
                "record_decode_error", f"{more}control record at offset {offset} (batch at "
                f"byte {batch_pos}): {problem}", batch_pos))
    return (tuple(kept), n) if kept is not None else (None, n)


class LazyRecords:
    """The records of a large batch (more than ``EAGER_RECORDS``), decoded again on each
    iteration from the batch's records section instead of held as objects: a batch of a
    million records costs its bytes, not a million :class:`Record` objects.

    A read-only sequence of :class:`Record`: ``len()``, truth value, iteration (in wire
    order, the records decoded before a ``record_decode_error``), indexing (by iterating;
    use iteration for more than a few). Equal to a tuple or another ``LazyRecords`` with
    the same records.
    """

    __slots__ = ("_factory", "_n")

    def __init__(self, factory, n: int) -> None:
        self._factory = factory
        self._n = n

    def __len__(self) -> int:
        return self._n

    def __bool__(self) -> bool:
        return self._n > 0

    def __iter__(self):
        return islice(self._factory(None), self._n)

    def __getitem__(self, i: int) -> Record:
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError(i)
        return next(islice(self._factory(None), i, None))

    def __eq__(self, other) -> bool:
        if isinstance(other, (tuple, LazyRecords)):
            return len(other) == self._n and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None

    def __repr__(self) -> str:
        return f"LazyRecords({self._n} records)"


# --------------------------------------------------------------------------- control records

def _decode_data(defs, name: str, version: int, buf: bytes, pos: int) -> tuple[dict, str | None]:
    """Decode ``buf[pos:]`` with data spec ``name`` read at ``version`` (clamped to the newest
    known). Returns ``(value, problem or None)``."""
    versions = defs.message_versions(name)
    if version < versions[0]:
        return {}, f"{name} version {version} is below the lowest known {versions[0]}"
    newer = version > versions[-1]
    use = versions[-1] if newer else version
    try:
        value, end = defs.compiled(name, use)(buf, pos)
    except Exception:  # noqa: BLE001 - the lenient interpreter says where and why
        from kafkasniff.protocol.lenient import decode_lenient
        res = decode_lenient(defs.plan(name, use), buf, pos)
        why = "; ".join(i.message for i in res.issues) or "does not decode"
        return res.value, f"{name} v{use}: {why}"
    if end != len(buf) and not newer:
        return value, f"{name} v{use}: {len(buf) - end} bytes after the value"
    return value, None


def _control_defs(ctx: _Ctx):
    if ctx.defs is None:
        from kafkasniff.protocol.schema import load_definitions
        ctx.defs = load_definitions()
    return ctx.defs


def _control(defs, key: bytes | None, value: bytes | None) -> tuple[dict, str | None]:
    if key is None or len(key) < 4:
        return ({"type": -1, "type_name": "UNKNOWN", "key": None, "value": None},
                f"control record key is {'null' if key is None else f'{len(key)} bytes'} "
                f"(expected int16 version + int16 type)")
    version = _I16.unpack_from(key, 0)[0]
    kval, problem = _decode_data(defs, _CONTROL_KEY_SPEC, version, key, 2)
    ctype = kval.get("type", -1)
    control = {"type": ctype, "type_name": CONTROL_TYPE_NAMES.get(ctype, "UNKNOWN"),
               "key": {"version": version, **kval}, "value": None}
    if problem:
        return control, f"key: {problem}"
    spec = _CONTROL_VALUE_SPECS.get(ctype)
    if spec is None:  # a type this version of Kafka's specs does not know: kept raw
        return control, None
    name, prefixed = spec
    if value is None or len(value) < 2:
        return control, (f"{control['type_name']} value is "
                         f"{'null' if value is None else f'{len(value)} bytes'}")
    vversion = _I16.unpack_from(value, 0)[0]
    if prefixed:
        vval, problem = _decode_data(defs, name, vversion, value, 2)
        control["value"] = {"version": vversion, **vval}
    else:  # the spec's own leading Version field selects the layout
        vval, problem = _decode_data(defs, name, vversion, value, 0)
        control["value"] = vval
    return control, (f"value: {problem}" if problem else None)


# --------------------------------------------------------------------------- magic 0 and 1

def _legacy_partial(data: bytes, pos: int, rem: int, magic: int) -> Batch:
    offset, _size, crc, magic, attrs = _LEGACY_HEADER.unpack_from(data, pos)
    ts = _I64.unpack_from(data, pos + 18)[0] if magic == 1 else None
    codec = attrs & 0x07
    return _new_batch(magic, pos, rem, offset, offset, 0 if codec else 1, codec_name(codec),
                      _ts_type(attrs) if magic == 1 else None, ts, ts, None, None, None, None,
                      False, False, False, crc, None, 0, None, True, None)


def _legacy_fields(buf, pos: int, end: int, magic: int) -> tuple:
    """Parse the message at ``buf[pos:end]`` (``end`` from its size). Returns
    ``(offset, crc, attributes, timestamp, key, value, value_start)``; raises _Bad."""
    offset, _size, crc, _magic, attrs = _LEGACY_HEADER.unpack_from(buf, pos)
    p = pos + 18
    ts = None
    if magic == 1:
        ts = _I64.unpack_from(buf, p)[0]
        p += 8
    n = _I32.unpack_from(buf, p)[0]
    p += 4
    if n < -1 or p + max(n, 0) + 4 > end:
        raise _Bad(f"message at byte {pos}: key length {n} does not fit the message", p - 4)
    key = None if n < 0 else buf[p:p + n]
    p += max(n, 0)
    n = _I32.unpack_from(buf, p)[0]
    p += 4
    if n < -1 or p + max(n, 0) != end:
        raise _Bad(f"message at byte {pos}: value length {n} does not end the message "
                   f"({end - p} bytes left)", p - 4)
    value = None if n < 0 else buf[p:p + n]
    return offset, crc, attrs if attrs < 128 else attrs - 256, ts, key, value, p


def _legacy_batch(data: bytes, mv: memoryview, pos: int, end: int, magic: int,
                  ctx: _Ctx) -> Batch:
    offset, _size, crc, _magic, attrs = _LEGACY_HEADER.unpack_from(data, pos)
    issues: list[RecordIssue] = []
    crc_ok = None
    if ctx.verify_crc:
        actual = zlib.crc32(mv[pos + 16:end])
        crc_ok = actual == crc
        if not crc_ok:
            issues.append(RecordIssue(
                "crc_mismatch", f"magic {magic} message at byte {pos} (offset {offset}): CRC32 "
                f"of the message is {actual:#010x}, stored CRC is {crc:#010x}", pos))
    codec = attrs & 0x07
    ts_type = _ts_type(attrs) if magic == 1 else None
    ts = _I64.unpack_from(data, pos + 18)[0] if magic == 1 else None
    try:
        _, _, sattrs, _, key, value, vstart = _legacy_fields(data, pos, end, magic)
    except _Bad as bad:
        issues.append(RecordIssue("record_decode_error", bad.message, bad.pos))
        return _new_batch(magic, pos, end - pos, offset, offset, 0, codec_name(codec), ts_type,
                          ts, ts, None, None, None, None, False, False, False, crc, crc_ok, 0,
                          None, False, () if ctx.with_records else None, tuple(issues))
    vlen = 0 if value is None else len(value)
    base = last = offset
    count = 1
    uncompressed = None
    records = None
    if codec == 0:
        uncompressed = vlen
        if ctx.with_records:
            records = (_new_record(offset, ts, key, value, _NO_HEADERS, sattrs),)
    elif codec > 4:
        issues.append(RecordIssue("unknown_codec", f"magic {magic} message at byte {pos} "
                                  f"(offset {offset}): unknown compression codec {codec} "
                                  f"(attributes {attrs:#04x})", pos + 17))
    else:
        count = 0
        inner = None
        allowed = ctx.allowance()
        if not allowed:
            ctx.not_decompressed += 1
        else:
            quirks = []
            try:
                inner = decompress(codec, value or b"", allowed, quirks)
            except DecompressionLimit as exc:
                if allowed == ctx.max_bytes:
                    issues.append(RecordIssue("decompression_limit", f"magic {magic} message "
                                              f"at byte {pos} (offset {offset}): {exc}",
                                              vstart))
                else:
                    ctx.not_decompressed += 1
                ctx.spend(allowed)
            except DecompressionError as exc:
                issues.append(RecordIssue("decompression_error", f"magic {magic} message at "
                                          f"byte {pos} (offset {offset}): {exc}", vstart))
        if inner is not None and quirks and magic >= 1:     # magic 0: the Kafka of then
            issues.append(RecordIssue("spec_departure", _LZ4_HC_DEPARTURE.format(
                where=f"magic {magic} message at byte {pos} (offset {offset})"), vstart))
        if inner is not None:
            uncompressed = len(inner)
            ctx.spend(uncompressed)
            nested_budget = ctx.budget = allowed - uncompressed  # shared by nested wrappers
            lat_ts = ts if magic == 1 and attrs & 0x08 else None
            problems: list[tuple[str, str]] = []
            keep = ctx.with_records
            if keep and uncompressed // _LEGACY_MIN_SIZE[magic] > ctx.records_left:
                keep = False
                ctx.not_decoded += 1
            kept: list | None = [] if keep else None
            for r in _legacy_inner(inner, offset, magic, lat_ts, ctx, 1, problems):
                if not count:
                    base = r.offset
                last = r.offset
                count += 1
                if kept is not None:
                    if count > EAGER_RECORDS:
                        kept = None
                    else:
                        kept.append(r)
            for kind, message in problems:
                issues.append(RecordIssue(kind, f"magic {magic} wrapper at byte {pos} (offset "
                                          f"{offset}): {message}", vstart))
                if kind == "crc_mismatch":
                    crc_ok = False
            if keep:
                ctx.records_left -= count
                records = tuple(kept) if kept is not None else LazyRecords(
                    partial(_legacy_again, inner, offset, magic, lat_ts, ctx, nested_budget),
                    count)
    return _new_batch(magic, pos, end - pos, base, last, count, codec_name(codec), ts_type, ts,
                      ts, None, None, None, None, False, False, False, crc, crc_ok, vlen,
                      uncompressed, False, records, tuple(issues))


def _legacy_again(inner: bytes, offset: int, magic: int, lat_ts: int | None, ctx: _Ctx,
                  budget: int, _problems):
    """The records of a large wrapper again (a :class:`LazyRecords` factory): its nested
    wrappers are decompressed again within the same budget, CRCs are not checked again."""
    again = _Ctx(False, False, ctx.max_bytes, ctx.defs, _UNBOUNDED, _UNBOUNDED)
    again.budget = budget
    return _legacy_inner(inner, offset, magic, lat_ts, again, 1, [])


def _legacy_inner(buf: bytes, wrapper_offset: int, wrapper_magic: int, lat_ts: int | None,
                  ctx: _Ctx, depth: int, problems: list):
    """Yield the messages of the inner message set of a compressed wrapper (Records,
    absolute offsets); problems go to ``problems`` as ``(kind, message)``. Nested wrappers
    are decompressed within ``ctx.budget`` (what the batch's limit leaves), which they use
    up: repeated nested bombs cannot multiply the work."""
    n = len(buf)
    frames = []  # (pos, end, stored offset)
    pos = 0
    while pos < n:
        if n - pos < 17:
            problems.append(("record_decode_error", f"inner message set ends with {n - pos} "
                             f"bytes that do not hold a message header"))
            break
        ioffset, size = _OFFSET_LENGTH.unpack_from(buf, pos)
        imagic = buf[pos + 16]
        if imagic != wrapper_magic:
            problems.append(("record_decode_error", f"inner message at byte {pos} of the "
                             f"decompressed data has magic {imagic}, the wrapper {wrapper_magic}"))
            break
        if size < _LEGACY_MIN_SIZE[imagic] or pos + 12 + size > n:
            problems.append(("record_decode_error", f"inner message at byte {pos} of the "
                             f"decompressed data: size {size} does not fit the {n - pos - 12} "
                             f"bytes left"))
            break
        frames.append((pos, pos + 12 + size, ioffset))
        pos += 12 + size
    if not frames:
        return
    last_rel = frames[-1][2]
    for fpos, fend, ioffset in frames:
        absolute = wrapper_offset - last_rel + ioffset if wrapper_magic == 1 else ioffset
        try:
            _, crc, attrs, ts, key, value, _ = _legacy_fields(buf, fpos, fend, wrapper_magic)
        except _Bad as bad:
            problems.append(("record_decode_error",
                             f"inner {bad.message} (of the decompressed data)"))
            return
        if ctx.verify_crc:
            actual = zlib.crc32(memoryview(buf)[fpos + 16:fend])
            if actual != crc:
                problems.append(("crc_mismatch", f"inner message at byte {fpos} of the "
                                 f"decompressed data (offset {absolute}): CRC32 is "
                                 f"{actual:#010x}, stored CRC is {crc:#010x}"))
        codec = attrs & 0x07
        if codec:
            if depth >= _MAX_LEGACY_DEPTH:
                problems.append(("record_decode_error", f"compressed messages nested more "
                                 f"than {_MAX_LEGACY_DEPTH} deep"))
                return
            try:
                nested = decompress(codec, value or b"", ctx.budget)
            except DecompressionLimit as exc:
                problems.append(("decompression_limit", f"nested message: {exc} (what the "
                                 f"batch's limit of {ctx.max_bytes} bytes leaves)"))
                ctx.spend(max(ctx.budget, 0))
                return
            except DecompressionError as exc:
                problems.append(("decompression_error", f"nested message: {exc}"))
                return
            ctx.budget -= len(nested)
            ctx.spend(len(nested))
            nested_lat = lat_ts
            if lat_ts is None and wrapper_magic == 1 and attrs & 0x08:
                nested_lat = ts
            yield from _legacy_inner(nested, absolute, wrapper_magic, nested_lat, ctx,
                                     depth + 1, problems)
            continue
        yield _new_record(absolute, ts if lat_ts is None else lat_ts, key, value,
                          _NO_HEADERS, attrs)
