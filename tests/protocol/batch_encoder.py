"""Test-only encoder of Kafka record data: message sets (magic 0/1) and record batches (magic 2).

Written from the wire rules (Kafka protocol guide "Message sets", KIP-31, KIP-32, KIP-98,
KIP-534), independently of :mod:`kafkasniff.protocol.records`: its own zig-zag varints, its
own table-driven CRC32 / CRC32C; xxHash32 (LZ4 frame header checksums) from the xxhash
package. The compression libraries are used for the compressed payloads, with the framings
Kafka clients write: gzip, raw snappy (librdkafka) and *xerial* snappy (the Java client), LZ4 frames (and
the pre-0.10 frames whose header checksum covers the magic too, KAFKA-3160), zstd frames with
or without the content size.

Main entry points: :func:`record_batch` (magic 2), :func:`message_set` (magic 0/1, optionally
a compressed wrapper), :func:`compress`, :func:`control_key`, :func:`end_txn_marker_value`.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

import cramjam
import lz4.block
import lz4.frame
import xxhash
import zstandard

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


# --------------------------------------------------------------------------- checksums

def _crc_table(poly: int) -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32_TABLE = _crc_table(0xEDB88320)  # CRC-32 (ISO-HDLC), message sets magic 0/1
_CRC32C_TABLE = _crc_table(0x82F63B78)  # CRC-32C (Castagnoli), record batches magic 2


def _crc(table: list[int], data: bytes) -> int:
    c = 0xFFFFFFFF
    for b in data:
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def crc32(data: bytes) -> int:
    """CRC-32 as ``zlib.crc32`` computes it (table-driven, written here)."""
    return _crc(_CRC32_TABLE, data)


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), as Kafka's record batches use it."""
    return _crc(_CRC32C_TABLE, data)


def xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32 (the LZ4 frame format's header checksum), from the xxhash package."""
    return xxhash.xxh32_intdigest(data, seed)


# --------------------------------------------------------------------------- varints

def zigzag_varint(value: int) -> bytes:
    """Zig-zag varint/varlong (protobuf style), as record batches use them."""
    u = (value << 1) ^ (value >> 63) if value < 0 else value << 1
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


# --------------------------------------------------------------------------- compression

LZ4_MAGIC = b"\x04\x22\x4d\x18"


def lz4_frame_broken_hc(data: bytes, block_size: int = 64 * 1024) -> bytes:
    """An LZ4 frame as Kafka before 0.10 wrote it: the header checksum is computed over the
    magic and the descriptor instead of the descriptor only (KAFKA-3160). Independent 64 KiB
    blocks, no content size, no checksums."""
    flg, bd = 0x60, 0x40  # version 01, block independence; 64 KiB max block
    hc = (xxh32(LZ4_MAGIC + bytes([flg, bd])) >> 8) & 0xFF
    good = (xxh32(bytes([flg, bd])) >> 8) & 0xFF
    assert hc != good, "the broken header checksum happens to be right"
    out = bytearray(LZ4_MAGIC + bytes([flg, bd, hc]))
    for i in range(0, len(data), block_size):
        chunk = data[i:i + block_size]
        comp = lz4.block.compress(chunk, store_size=False)
        if len(comp) >= len(chunk):
            out += struct.pack("<I", len(chunk) | 0x80000000) + chunk  # stored uncompressed
        else:
            out += struct.pack("<I", len(comp)) + comp
    out += b"\x00\x00\x00\x00"  # end mark
    return bytes(out)


def xerial_snappy(data: bytes, block_size: int = 32 * 1024) -> bytes:
    """Snappy in the xerial framing the Java client writes: magic, version 1, compatible 1,
    then ``int32 length`` + raw snappy block for each block."""
    out = bytearray(b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1))
    for i in range(0, max(len(data), 1), block_size):
        block = bytes(cramjam.snappy.compress_raw(data[i:i + block_size]))
        out += struct.pack(">i", len(block)) + block
    return bytes(out)


def compress(codec: str, data: bytes, *, xerial: bool = False, lz4_broken_hc: bool = False,
             zstd_content_size: bool = True) -> bytes:
    """Compress ``data`` as a Kafka client would for ``codec``."""
    if codec == "none":
        return data
    if codec == "gzip":
        c = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        return c.compress(data) + c.flush()
    if codec == "snappy":
        return xerial_snappy(data) if xerial else bytes(cramjam.snappy.compress_raw(data))
    if codec == "lz4":
        if lz4_broken_hc:
            return lz4_frame_broken_hc(data)
        return lz4.frame.compress(data, block_size=lz4.frame.BLOCKSIZE_MAX64KB,
                                  content_checksum=False)
    if codec == "zstd":
        return zstandard.ZstdCompressor(write_content_size=zstd_content_size).compress(data)
    raise ValueError(f"unknown codec {codec}")


# --------------------------------------------------------------------------- magic 2

@dataclass
class Rec:
    """One record to encode (magic 2) or message (magic 0/1).

    ``offset_delta`` / ``timestamp_delta`` are relative to the batch (magic 2); for message
    sets ``offset`` and ``timestamp`` are used instead.
    """

    key: bytes | None = None
    value: bytes | None = None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    offset_delta: int = 0
    timestamp_delta: int = 0
    attributes: int = 0
    offset: int = 0
    timestamp: int | None = None


def _nullable_varbytes(b: bytes | None) -> bytes:
    return zigzag_varint(-1) if b is None else zigzag_varint(len(b)) + b


def encode_record(r: Rec) -> bytes:
    """One magic 2 record: varint length, then its fields."""
    body = bytearray()
    body += struct.pack(">b", r.attributes)
    body += zigzag_varint(r.timestamp_delta)
    body += zigzag_varint(r.offset_delta)
    body += _nullable_varbytes(r.key)
    body += _nullable_varbytes(r.value)
    body += zigzag_varint(len(r.headers))
    for hk, hv in r.headers:
        kb = hk.encode("utf-8")
        body += zigzag_varint(len(kb)) + kb
        body += _nullable_varbytes(hv)
    return zigzag_varint(len(body)) + bytes(body)


def record_batch(records: list[Rec], *, base_offset: int = 0, codec: str = "none",
                 base_timestamp: int = 0, max_timestamp: int | None = None,
                 log_append_time: bool = False, producer_id: int = -1, producer_epoch: int = -1,
                 base_sequence: int = -1, partition_leader_epoch: int = -1,
                 transactional: bool = False, control: bool = False,
                 delete_horizon: bool = False, last_offset_delta: int | None = None,
                 record_count: int | None = None, xerial: bool = False,
                 lz4_broken_hc: bool = False, zstd_content_size: bool = True,
                 codec_id: int | None = None, records_section: bytes | None = None,
                 crc: int | None = None) -> bytes:
    """A complete magic 2 record batch (61-byte header + records section).

    Defaults follow the records: ``last_offset_delta`` = the largest offset delta,
    ``record_count`` = ``len(records)``, ``max_timestamp`` = base + largest delta.
    ``codec_id`` overrides the attributes' codec bits, ``records_section`` the (compressed)
    section, ``crc`` the stored CRC (to build broken batches).
    """
    raw = b"".join(encode_record(r) for r in records)
    section = records_section if records_section is not None else compress(
        codec, raw, xerial=xerial, lz4_broken_hc=lz4_broken_hc,
        zstd_content_size=zstd_content_size)
    if last_offset_delta is None:
        last_offset_delta = max((r.offset_delta for r in records), default=0)
    if max_timestamp is None:
        max_timestamp = base_timestamp + max((r.timestamp_delta for r in records), default=0)
    attrs = (CODECS[codec] if codec_id is None else codec_id) & 0x07
    attrs |= (0x08 if log_append_time else 0) | (0x10 if transactional else 0)
    attrs |= (0x20 if control else 0) | (0x40 if delete_horizon else 0)
    after_crc = struct.pack(">hiqqqhii", attrs, last_offset_delta, base_timestamp, max_timestamp,
                            producer_id, producer_epoch, base_sequence,
                            len(records) if record_count is None else record_count) + section
    stored = crc32c(after_crc) if crc is None else crc
    body = struct.pack(">ibI", partition_leader_epoch, 2, stored) + after_crc
    return struct.pack(">qi", base_offset, len(body)) + body


def control_key(ctype: int, version: int = 0) -> bytes:
    """Control record key: int16 version + ControlRecordTypeSchema (int16 type)."""
    return struct.pack(">hh", version, ctype)


def end_txn_marker_value(coordinator_epoch: int, version: int = 0) -> bytes:
    """ABORT/COMMIT control record value: int16 version + EndTxnMarker (int32 epoch)."""
    return struct.pack(">hi", version, coordinator_epoch)


# --------------------------------------------------------------------------- magic 0 / 1

def _nullable_bytes32(b: bytes | None) -> bytes:
    return struct.pack(">i", -1) if b is None else struct.pack(">i", len(b)) + b


def message(magic: int, offset: int, key: bytes | None, value: bytes | None,
            attributes: int = 0, timestamp: int | None = None, crc: int | None = None) -> bytes:
    """One message with its ``offset, message_size`` prefix (magic 0 or 1)."""
    body = struct.pack(">bb", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp if timestamp is not None else -1)
    body += _nullable_bytes32(key) + _nullable_bytes32(value)
    stored = crc32(body) if crc is None else crc
    msg = struct.pack(">I", stored) + body
    return struct.pack(">qi", offset, len(msg)) + msg


def message_set(magic: int, records: list[Rec], *, codec: str = "none",
                log_append_time: int | None = None, wrapper_offset: int | None = None,
                xerial: bool = False, lz4_broken_hc: bool = False,
                zstd_content_size: bool = True) -> bytes:
    """A magic 0/1 message set.

    ``codec == "none"``: one message per record at ``Rec.offset`` (``Rec.timestamp`` for
    magic 1). Otherwise a single compressed wrapper holding the records as inner messages:
    magic 1 inner offsets are relative (0, 1, ...; KIP-31) and the wrapper's offset is the
    absolute offset of the last one (``wrapper_offset``, default ``records[-1].offset``);
    magic 0 inner offsets are the absolute ``Rec.offset``. ``log_append_time`` (magic 1
    wrappers) sets the timestamp type bit and the wrapper timestamp.
    """
    if codec == "none":
        return b"".join(message(magic, r.offset, r.key, r.value, r.attributes, r.timestamp)
                        for r in records)
    inner = b"".join(
        message(magic, i if magic == 1 else r.offset, r.key, r.value, r.attributes, r.timestamp)
        for i, r in enumerate(records))
    payload = compress(codec, inner, xerial=xerial, lz4_broken_hc=lz4_broken_hc,
                       zstd_content_size=zstd_content_size)
    attrs = CODECS[codec]
    ts = None
    if magic == 1:
        if log_append_time is not None:
            attrs |= 0x08
            ts = log_append_time
        else:
            ts = max((r.timestamp for r in records if r.timestamp is not None), default=-1)
    off = wrapper_offset if wrapper_offset is not None else records[-1].offset
    return message(magic, off, None, payload, attrs, ts)
