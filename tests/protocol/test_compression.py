"""kafkasniff.protocol.compression: every codec and framing, damaged data, bombs."""

from __future__ import annotations

import gzip
import struct
import tracemalloc
import zlib
from functools import lru_cache

import cramjam
import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkasniff.protocol.compression import (
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    DecompressionError,
    DecompressionLimit,
    codec_name,
    decompress,
)
from tests.protocol import batch_encoder as enc

CODEC_IDS = {"gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}
# (codec, encoder options) for every framing a Kafka client writes
FRAMINGS = [
    ("gzip", {}),
    ("snappy", {}),
    ("snappy", {"xerial": True}),
    ("lz4", {}),
    ("lz4", {"lz4_broken_hc": True}),
    ("zstd", {}),
    ("zstd", {"zstd_content_size": False}),
]
FRAMING_IDS = [c + "".join(f"-{k}={v}" for k, v in o.items()) for c, o in FRAMINGS]
TEXT = b"".join(b'{"id": %d, "user": "user-%d", "event": "click", "payload": "%s"}\n'
                % (i, i * 7919 % 1000, b"x" * (i % 50)) for i in range(3000))
LIMIT = 8 * 2 ** 20


def comp(codec: str, data: bytes, opts: dict) -> bytes:
    return enc.compress(codec, data, **opts)


# --------------------------------------------------------------------------- round trips

@pytest.mark.parametrize(("codec", "opts"), FRAMINGS, ids=FRAMING_IDS)
@pytest.mark.parametrize("data", [b"", b"a", TEXT, bytes(range(256)) * 1000],
                         ids=["empty", "one", "text", "binary"])
def test_round_trip(codec, opts, data):
    assert decompress(CODEC_IDS[codec], comp(codec, data, opts)) == data


@pytest.mark.parametrize(("codec", "opts"), FRAMINGS, ids=FRAMING_IDS)
@given(data=st.binary(max_size=3000))
@settings(max_examples=30, deadline=None)
def test_round_trip_random(codec, opts, data):
    assert decompress(CODEC_IDS[codec], comp(codec, data, opts)) == data


def test_none_is_identity():
    assert decompress(NONE, b"abc") == b"abc"


def test_xerial_snappy_many_blocks():
    framed = enc.xerial_snappy(TEXT, block_size=1000)
    assert framed.startswith(b"\x82SNAPPY\x00")
    assert decompress(SNAPPY, framed) == TEXT


def test_lz4_broken_header_checksum_is_accepted():
    """KAFKA-3160: Kafka < 0.10 computed the LZ4 frame header checksum over magic+descriptor."""
    frame = enc.lz4_frame_broken_hc(TEXT)
    with pytest.raises(RuntimeError, match="headerChecksum"):
        lz4.frame.decompress(frame)  # the library alone refuses it
    assert decompress(LZ4, frame) == TEXT


@pytest.mark.parametrize("kind", ["content", "block"])
def test_lz4_damaged_payload_checksum_is_an_error(kind):
    """Only the header checksum may be wrong; a content/block checksum mismatch is damage."""
    frame = bytearray(lz4.frame.compress(TEXT, content_checksum=kind == "content",
                                         block_checksum=kind == "block", block_linked=False,
                                         block_size=lz4.frame.BLOCKSIZE_MAX64KB))
    frame[-1 if kind == "content" else -5] ^= 0xFF
    with pytest.raises(DecompressionError):
        decompress(LZ4, bytes(frame))


@pytest.mark.parametrize("content_size", [True, False])
def test_zstd_with_and_without_content_size(content_size):
    frame = zstandard.ZstdCompressor(write_content_size=content_size,
                                     write_checksum=True).compress(TEXT)
    assert (zstandard.frame_content_size(frame) >= 0) is content_size
    assert decompress(ZSTD, frame) == TEXT


@pytest.mark.parametrize("content_size", [True, False])
def test_zstd_several_frames_and_skippable_frames(content_size):
    c = zstandard.ZstdCompressor(write_content_size=content_size)
    skippable = struct.pack("<II", 0x184D2A5E, 3) + b"abc"
    data = c.compress(b"first ") + skippable + c.compress(TEXT)
    assert decompress(ZSTD, data) == b"first " + TEXT


def test_zstd_skippable_frame_before_a_sized_frame():
    sized = zstandard.ZstdCompressor(write_content_size=True).compress(TEXT)
    skippable = struct.pack("<II", 0x184D2A50, 3) + b"abc"
    assert decompress(ZSTD, skippable + sized) == TEXT
    assert decompress(ZSTD, sized + skippable) == TEXT


def test_gzip_several_members():
    assert decompress(GZIP, gzip.compress(b"one ") + gzip.compress(TEXT)) == b"one " + TEXT


def test_exact_limit():
    for codec, opts in FRAMINGS:
        data = comp(codec, TEXT, opts)
        assert decompress(CODEC_IDS[codec], data, len(TEXT)) == TEXT
        with pytest.raises(DecompressionLimit):
            decompress(CODEC_IDS[codec], data, len(TEXT) - 1)


# --------------------------------------------------------------------------- damaged data

@pytest.mark.parametrize(("codec", "opts"), FRAMINGS, ids=FRAMING_IDS)
def test_truncated_input_is_an_error(codec, opts):
    data = comp(codec, TEXT, opts)
    cuts = sorted({1, 2, 5, 10, 17, 20, len(data) // 3, len(data) // 2, len(data) - 5,
                   len(data) - 1})
    for cut in cuts:
        with pytest.raises(DecompressionError):
            decompress(CODEC_IDS[codec], data[:cut])


@pytest.mark.parametrize("codec", [GZIP, LZ4, ZSTD])
def test_empty_input_is_an_error(codec):
    with pytest.raises(DecompressionError):
        decompress(codec, b"")


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
@given(data=st.binary(max_size=200))
@settings(max_examples=100, deadline=None)
def test_garbage_raises_only_decompression_errors(codec, data):
    try:
        decompress(codec, data, 2 ** 20)
    except DecompressionError:
        pass


@pytest.mark.parametrize(("codec", "opts"), FRAMINGS, ids=FRAMING_IDS)
@given(data=st.data())
@settings(max_examples=40, deadline=None)
def test_mutated_frames_raise_only_decompression_errors(codec, opts, data):
    frame = bytearray(comp(codec, TEXT[:5000], opts))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(frame) - 1))
        frame[i] = data.draw(st.integers(0, 255))
    try:
        out = decompress(CODEC_IDS[codec], bytes(frame), 2 ** 20)
    except DecompressionError:
        return
    assert len(out) <= 2 ** 20


def test_unknown_codec():
    for codec in (5, 6, 7, -1):
        with pytest.raises(DecompressionError, match="unknown compression codec"):
            decompress(codec, b"abc")
    assert codec_name(5) == "unknown(5)"
    assert [codec_name(c) for c in range(5)] == ["none", "gzip", "snappy", "lz4", "zstd"]


def test_truncated_xerial_header():
    with pytest.raises(DecompressionError):
        decompress(SNAPPY, b"\x82SNAPPY\x00\x00\x00")


# --------------------------------------------------------------------------- bombs

def _zeros(total: int, step: int = 2 ** 24):
    z = bytes(min(step, total))
    for _ in range(total // len(z)):
        yield z


@lru_cache(maxsize=None)
def bomb(codec: str, size: int = 2 ** 30, variant: str = "") -> bytes:
    """``size`` zero bytes compressed (streaming: never ``size`` bytes in memory)."""
    if codec == "gzip":
        c = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        return b"".join([c.compress(z) for z in _zeros(size)] + [c.flush()])
    if codec == "lz4":
        c = lz4.frame.LZ4FrameCompressor(block_size=lz4.frame.BLOCKSIZE_MAX64KB)
        return c.begin() + b"".join(c.compress(z) for z in _zeros(size)) + c.flush()
    if codec == "zstd":
        if variant == "sized":
            return zstandard.ZstdCompressor().compress(bytes(size))
        o = zstandard.ZstdCompressor().compressobj()
        return b"".join([o.compress(z) for z in _zeros(size)] + [o.flush()])
    if codec == "snappy":
        raw = bytes(cramjam.snappy.compress_raw(bytes(size)))
        if variant == "xerial":
            return b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", len(raw)) + raw
        return raw
    raise ValueError(codec)


BOMBS = [("gzip", 2 ** 28, ""), ("lz4", 2 ** 30, ""), ("zstd", 2 ** 30, ""),
         ("zstd", 2 ** 26, "sized"), ("snappy", 2 ** 26, ""), ("snappy", 2 ** 26, "xerial")]


@pytest.mark.parametrize(("codec", "size", "variant"), BOMBS,
                         ids=[f"{c}-{s >> 20}MiB{'-' + v if v else ''}" for c, s, v in BOMBS])
def test_bomb_stops_at_the_limit_with_bounded_memory(codec, size, variant):
    data = bomb(codec, size, variant)
    assert len(data) * 20 < size  # a small batch that claims a lot
    tracemalloc.start()
    try:
        with pytest.raises(DecompressionLimit, match="exceeds the limit"):
            decompress(CODEC_IDS[codec], data, LIMIT)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 * LIMIT, f"peak {peak / 2 ** 20:.1f} MiB"


def test_zstd_context_is_reusable_after_errors_and_per_thread():
    """The zstd decompression context is cached per thread; a failed or stopped
    decompression must not leak into the next one."""
    import threading

    good = zstandard.ZstdCompressor(write_content_size=False).compress(TEXT)
    sized = zstandard.ZstdCompressor().compress(TEXT)
    with pytest.raises(DecompressionLimit):
        decompress(ZSTD, bomb("zstd", 2 ** 30), LIMIT)
    assert decompress(ZSTD, good) == TEXT
    damaged = bytearray(good)
    damaged[len(damaged) // 2] ^= 0xFF
    with pytest.raises(DecompressionError):
        decompress(ZSTD, bytes(damaged))
    assert decompress(ZSTD, good) == TEXT and decompress(ZSTD, sized) == TEXT
    results = []

    def work():
        results.append(all(decompress(ZSTD, good) == TEXT for _ in range(50)))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [True] * 4
