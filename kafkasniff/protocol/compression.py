"""Kafka's compression codecs, decompressed with a bound on the output size.

Codec ids are Kafka's (the low 3 bits of a message/batch ``attributes``): 0 none, 1 gzip,
2 snappy, 3 lz4, 4 zstd. Libraries: ``zlib`` (gzip), ``cramjam`` (snappy), ``lz4``
(lz4 frame and block), ``zstandard`` (zstd).

Kafka specifics handled here:

- snappy: Kafka's Java client writes the *xerial* framing (``\\x82SNAPPY\\x00`` magic,
  version, compatible version, then ``int32 length`` + raw snappy blocks); librdkafka and
  others write raw snappy. Both are accepted.
- lz4: the LZ4 frame format; Kafka before 0.10 (message format magic 0) computed the frame
  header checksum over the wrong bytes (KAFKA-3160). Such frames fail the checksum, so the
  frame is then read block by block without checking it.
- zstd: frames with or without the content size in their header.

Every decompression stops at ``max_bytes`` of output (a decompression bomb raises
:class:`DecompressionLimit`, never exhausts memory). Damaged data raises
:class:`DecompressionError`.
"""

from __future__ import annotations

import struct
import zlib

import cramjam
import lz4.block
import lz4.frame
import zstandard

from kafkasniff.errors import KafkaSniffError

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
DEFAULT_MAX_BYTES = 64 * 1024 * 1024

XERIAL_MAGIC = b"\x82SNAPPY\x00"
LZ4_MAGIC = b"\x04\x22\x4d\x18"
_I32 = struct.Struct(">i")
_U32LE = struct.Struct("<I")
_LZ4_BLOCK_MAX = {4: 64 * 1024, 5: 256 * 1024, 6: 1024 * 1024, 7: 4 * 1024 * 1024}


class DecompressionError(KafkaSniffError):
    """Compressed data that cannot be decompressed (damaged, truncated, unknown codec)."""


class DecompressionLimit(DecompressionError):
    """Decompressed output would exceed the configured maximum (a possible bomb)."""


def codec_name(codec: int) -> str:
    """``"gzip"`` ... or ``"unknown(5)"``."""
    return CODEC_NAMES.get(codec, f"unknown({codec})")


def decompress(codec: int, data: bytes, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """Decompress ``data`` compressed with Kafka codec ``codec``.

    Returns at most ``max_bytes`` bytes. Raises :class:`DecompressionLimit` when the output
    would be larger, :class:`DecompressionError` when the data is damaged or the codec
    unknown.
    """
    try:
        if codec == GZIP:
            return _gzip(data, max_bytes)
        if codec == SNAPPY:
            return _snappy(data, max_bytes)
        if codec == LZ4:
            return _lz4(data, max_bytes)
        if codec == ZSTD:
            return _zstd(data, max_bytes)
        if codec == NONE:
            return data
    except DecompressionError:
        raise
    except Exception as exc:  # noqa: BLE001 - every library error means damaged data
        raise DecompressionError(f"{codec_name(codec)}: {type(exc).__name__}: {exc}") from None
    raise DecompressionError(f"unknown compression codec {codec}")


def _limit(n: int, max_bytes: int, codec: str) -> None:
    if n > max_bytes:
        raise DecompressionLimit(f"{codec}: decompressed size exceeds the limit of "
                                 f"{max_bytes} bytes")


def _gzip(data: bytes, max_bytes: int) -> bytes:
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)  # gzip header and trailer
    out = d.decompress(data, max_bytes + 1)
    _limit(len(out), max_bytes, "gzip")
    if not d.eof:
        raise DecompressionError("gzip: data ends before the end of the stream")
    return out


def _snappy_raw(block: bytes, max_bytes: int) -> bytes:
    n = cramjam.snappy.decompress_raw_len(block)
    _limit(n, max_bytes, "snappy")
    return bytes(cramjam.snappy.decompress_raw(block))


def _snappy(data: bytes, max_bytes: int) -> bytes:
    if not data.startswith(XERIAL_MAGIC):
        return _snappy_raw(data, max_bytes)
    # xerial framing: 8-byte magic, int32 version, int32 compatible version, then blocks
    pos = 16
    out = bytearray()
    while pos < len(data):
        if pos + 4 > len(data):
            raise DecompressionError("snappy (xerial): truncated block length")
        n = _I32.unpack_from(data, pos)[0]
        pos += 4
        if n < 0 or pos + n > len(data):
            raise DecompressionError("snappy (xerial): block runs past the data")
        out += _snappy_raw(data[pos:pos + n], max_bytes - len(out))
        pos += n
    return bytes(out)


def _lz4(data: bytes, max_bytes: int) -> bytes:
    if not data.startswith(LZ4_MAGIC):
        raise DecompressionError("lz4: not an LZ4 frame (bad magic)")
    try:
        d = lz4.frame.LZ4FrameDecompressor()
        out = d.decompress(data, max_length=max_bytes + 1)
    except RuntimeError as exc:
        if "checksum" not in str(exc).lower():
            raise
        return _lz4_blocks(data, max_bytes)  # pre-0.10 Kafka: wrong header checksum
    _limit(len(out), max_bytes, "lz4")
    if not d.eof:
        raise DecompressionError("lz4: data ends before the end of the frame")
    return out


def _lz4_blocks(data: bytes, max_bytes: int) -> bytes:
    """Read an LZ4 frame block by block, ignoring the header checksum (KAFKA-3160)."""
    if len(data) < 7:
        raise DecompressionError("lz4: truncated frame header")
    flg, bd = data[4], data[5]
    if flg >> 6 != 1:
        raise DecompressionError(f"lz4: unsupported frame version {flg >> 6}")
    pos = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0) + 1  # sizes, dict id, HC
    block_max = _LZ4_BLOCK_MAX.get((bd >> 4) & 0x07, 4 * 1024 * 1024)
    block_checksum = bool(flg & 0x10)
    out = bytearray()
    while True:
        if pos + 4 > len(data):
            raise DecompressionError("lz4: data ends before the end mark")
        size = _U32LE.unpack_from(data, pos)[0]
        pos += 4
        if size == 0:
            return bytes(out)
        raw = size & 0x80000000
        size &= 0x7FFFFFFF
        if pos + size > len(data):
            raise DecompressionError("lz4: block runs past the data")
        block = data[pos:pos + size]
        pos += size + (4 if block_checksum else 0)
        chunk = block if raw else lz4.block.decompress(block, uncompressed_size=block_max)
        _limit(len(out) + len(chunk), max_bytes, "lz4")
        out += chunk


def _zstd(data: bytes, max_bytes: int) -> bytes:
    size = zstandard.frame_content_size(data)
    if size >= 0:  # the frame says how large it is: check before allocating
        _limit(size, max_bytes, "zstd")
        out = zstandard.ZstdDecompressor().decompress(data)
        if len(out) != size:
            raise DecompressionError(f"zstd: {len(out)} bytes decompressed, frame says {size}")
        return out
    # no content size: feed small slices so one step cannot produce more than a few MB
    # (a 4-byte RLE block expands to at most 128 KiB)
    out = bytearray()
    d = zstandard.ZstdDecompressor().decompressobj()
    pos = 0
    while pos < len(data) and not d.eof:
        out += d.decompress(data[pos:pos + 256])
        pos += 256
        _limit(len(out), max_bytes, "zstd")
    if not d.eof:
        raise DecompressionError("zstd: data ends before the end of the frame")
    return bytes(out)
