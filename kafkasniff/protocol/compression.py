"""Kafka's compression codecs, decompressed with a bound on the output size.

Codec ids are Kafka's (the low 3 bits of a message/batch ``attributes``): 0 none, 1 gzip,
2 snappy, 3 lz4, 4 zstd. Libraries: ``zlib`` (gzip), ``cramjam`` (snappy), ``lz4``
(lz4 frame and block), ``zstandard`` (zstd).

Kafka specifics handled here:

- snappy: Kafka's Java client writes the *xerial* framing (``\\x82SNAPPY\\x00`` magic,
  version, compatible version, then ``int32 length`` + raw snappy blocks); librdkafka and
  others write raw snappy. Both are accepted.
- lz4: the LZ4 frame format; Kafka before 0.10 (message format magic 0) computed the frame
  header checksum over the wrong bytes (KAFKA-3160). Such frames fail the *header*
  checksum, so the frame is then read block by block without checking it (a wrong block or
  content checksum is damaged data, not this quirk); the caller learns it through
  ``quirks`` (record decoding reports it as a spec departure from magic 1 on).
- zstd: frames with or without the content size in their header; several frames and
  skippable frames are read (as zstd-jni's stream does).
- gzip: several concatenated members are read (as Java's ``GZIPInputStream`` does).

Every decompression stops at ``max_bytes`` of output (a decompression bomb raises
:class:`DecompressionLimit`, never exhausts memory): streaming decompressors are asked for at
most 1 MiB per step, so the peak is about ``max_bytes`` + 2 MiB plus a copy of the input.
Damaged data raises :class:`DecompressionError`.
"""

from __future__ import annotations

import struct
import threading
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
ZSTD_MAGIC = 0xFD2FB528
_ZSTD_BLOCK_MAX = 128 * 1024  # largest output of one zstd block
_STEP = 1024 * 1024  # largest output asked from a streaming decompressor in one call
_local = threading.local()  # per-thread zstd context (creating one costs ~8 us)


def _zstd_dctx() -> zstandard.ZstdDecompressor:
    dctx = getattr(_local, "zstd", None)
    if dctx is None:
        dctx = _local.zstd = zstandard.ZstdDecompressor()
    return dctx


class DecompressionError(KafkaSniffError):
    """Compressed data that cannot be decompressed (damaged, truncated, unknown codec)."""


class DecompressionLimit(DecompressionError):
    """Decompressed output would exceed the configured maximum (a possible bomb)."""


def codec_name(codec: int) -> str:
    """``"gzip"`` ... or ``"unknown(5)"``."""
    return CODEC_NAMES.get(codec, f"unknown({codec})")


def decompress(codec: int, data: bytes, max_bytes: int = DEFAULT_MAX_BYTES,
               quirks: list[str] | None = None) -> bytes:
    """Decompress ``data`` compressed with Kafka codec ``codec`` (the low 3 bits of a
    message/batch ``attributes``: 0 none, returned as is; 1 gzip; 2 snappy; 3 lz4; 4 zstd).

    Returns at most ``max_bytes`` bytes. Raises :class:`DecompressionLimit` when the output
    would be larger, :class:`DecompressionError` when the data is damaged or the codec
    unknown. ``quirks``: when a list is given, what was tolerated is appended to it (today:
    ``"lz4_header_checksum"``, an LZ4 header checksum over the wrong bytes, KAFKA-3160).
    """
    try:
        if codec == GZIP:
            return _gzip(data, max_bytes)
        if codec == SNAPPY:
            return _snappy(data, max_bytes)
        if codec == LZ4:
            return _lz4(data, max_bytes, quirks)
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
    # Output is produced in steps of at most _STEP bytes so a bomb stops near max_bytes
    # (one unbounded call would build the whole output, then copy it). Concatenated gzip
    # members are all read, as Java's GZIPInputStream does.
    chunks: list[bytes] = []
    total = 0
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)  # gzip header and trailer
    src = data
    while True:
        out = d.decompress(src, min(_STEP, max_bytes + 1 - total))
        total += len(out)
        _limit(total, max_bytes, "gzip")
        if out:
            chunks.append(out)
        if d.eof:
            rest = d.unused_data
            if rest[:2] != b"\x1f\x8b":  # no further member (trailing bytes are ignored)
                break
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            src = rest
            continue
        tail = d.unconsumed_tail
        if not out and len(tail) >= len(src):
            raise DecompressionError("gzip: data ends before the end of the stream")
        src = tail
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _snappy_raw(block: bytes, max_bytes: int) -> bytes:
    n = cramjam.snappy.decompress_raw_len(block)
    _limit(n, max_bytes, "snappy")
    return bytes(cramjam.snappy.decompress_raw(block))


def _snappy(data: bytes, max_bytes: int) -> bytes:
    if not data.startswith(XERIAL_MAGIC):
        return _snappy_raw(data, max_bytes)
    # xerial framing: 8-byte magic, int32 version, int32 compatible version, then blocks
    if len(data) < 16:
        raise DecompressionError("snappy (xerial): truncated header")
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


def _lz4(data: bytes, max_bytes: int, quirks: list[str] | None = None) -> bytes:
    if not data.startswith(LZ4_MAGIC):
        raise DecompressionError("lz4: not an LZ4 frame (bad magic)")
    # python-lz4 allocates max_length bytes per call: ask for _STEP at a time, not max_bytes;
    # the input is walked through a memoryview (no copy of the unconsumed input per call)
    chunks: list[bytes] = []
    total = 0
    src = memoryview(data)
    ctx = lz4.frame.create_decompression_context()
    try:
        while True:
            out, used, end = lz4.frame.decompress_chunk(
                ctx, src, max_length=min(_STEP, max_bytes + 1 - total))
            src = src[used:]
            total += len(out)
            _limit(total, max_bytes, "lz4")
            chunks.append(out)
            if end:
                break
            if not src and not out:
                raise DecompressionError("lz4: data ends before the end of the frame")
    except RuntimeError as exc:
        # only the *header* checksum is wrong in pre-0.10 Kafka frames; a wrong block or
        # content checksum means damaged data
        if "headerchecksum" not in str(exc).lower():
            raise
        if quirks is not None:
            quirks.append("lz4_header_checksum")
        return _lz4_blocks(data, max_bytes)  # pre-0.10 Kafka: wrong header checksum
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


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


def _zstd_scan(data: bytes) -> tuple[list[int], list[int], int, bool]:
    """Walk the frames and block headers of zstd ``data`` (RFC 8878) without decompressing.

    Returns ``(cuts, bounds, content_size, single)``: offsets that end a block (or a frame),
    an upper bound on the output of each piece ``data[cuts[i-1]:cuts[i]]``, the total content
    size when every frame declares it (else -1), and whether there is exactly one frame and
    no skippable frame (``ZstdDecompressor.decompress`` reads only such data).
    Raises DecompressionError when the data is not zstd or ends inside a frame.
    """
    n = len(data)
    pos = 0
    cuts: list[int] = []
    bounds: list[int] = []
    content = 0
    frames = 0
    skippable = False
    while pos < n:
        if pos + 4 > n:
            raise DecompressionError(f"zstd: truncated frame magic at byte {pos}")
        magic = _U32LE.unpack_from(data, pos)[0]
        if magic & 0xFFFFFFF0 == 0x184D2A50:  # skippable frame
            if pos + 8 > n:
                raise DecompressionError(f"zstd: truncated skippable frame at byte {pos}")
            pos += 8 + _U32LE.unpack_from(data, pos + 4)[0]
            if pos > n:
                raise DecompressionError("zstd: skippable frame runs past the data")
            cuts.append(pos)
            bounds.append(0)
            skippable = True
            continue
        if magic != ZSTD_MAGIC:
            raise DecompressionError(f"zstd: bad frame magic {magic:#010x} at byte {pos}")
        frames += 1
        if pos + 5 > n:
            raise DecompressionError("zstd: truncated frame header")
        fhd = data[pos + 4]
        fcs_flag, single_segment = fhd >> 6, (fhd >> 5) & 1
        fcs_len = (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
        hdr = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[fhd & 3]
        if pos + hdr + fcs_len > n:
            raise DecompressionError("zstd: truncated frame header")
        if fcs_len and content >= 0:
            fcs = int.from_bytes(data[pos + hdr:pos + hdr + fcs_len], "little")
            content += fcs + 256 if fcs_len == 2 else fcs
        else:
            content = -1
        pos += hdr + fcs_len
        while True:
            if pos + 3 > n:
                raise DecompressionError("zstd: data ends before the end of the frame")
            bh = data[pos] | data[pos + 1] << 8 | data[pos + 2] << 16
            btype, bsize = (bh >> 1) & 3, bh >> 3
            if btype == 3:
                raise DecompressionError(f"zstd: reserved block type at byte {pos}")
            pos += 3 + (1 if btype == 1 else bsize)
            if pos > n:
                raise DecompressionError("zstd: data ends before the end of the frame")
            bounds.append(_ZSTD_BLOCK_MAX if btype == 2 else bsize)
            if bh & 1:  # last block, then the optional content checksum
                if fhd & 0x04:
                    pos += 4
                    if pos > n:
                        raise DecompressionError("zstd: truncated content checksum")
                cuts.append(pos)
                break
            cuts.append(pos)
    if not frames:
        raise DecompressionError("zstd: no frame")
    return cuts, bounds, content, frames == 1 and not skippable


def _zstd(data: bytes, max_bytes: int) -> bytes:
    cuts, bounds, size, single = _zstd_scan(data)
    if size >= 0:  # the frames say how large they are: check before allocating
        _limit(size, max_bytes, "zstd")
        if single:
            out = _zstd_dctx().decompress(data)
            if len(out) != size:
                raise DecompressionError(f"zstd: {len(out)} bytes decompressed, frame says {size}")
            return out
    # feed whole blocks, grouped so that one call cannot produce more than about _STEP
    # bytes (a 4-byte RLE block expands to 128 KiB): a bomb stops near max_bytes
    d = _zstd_dctx().decompressobj(read_across_frames=True)
    chunks: list[bytes] = []
    total = 0
    start = 0
    bound = 0
    last = len(cuts) - 1
    for i, cut in enumerate(cuts):
        bound += bounds[i]
        if bound < _STEP and i != last:
            continue
        out = d.decompress(data[start:cut])
        start, bound = cut, 0
        total += len(out)
        _limit(total, max_bytes, "zstd")
        if out:
            chunks.append(out)
    if size >= 0 and total != size:
        raise DecompressionError(f"zstd: {total} bytes decompressed, frames say {size}")
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)
