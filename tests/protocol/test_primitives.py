"""kafkasniff.protocol.primitives: unsigned varints (KIP-482), zig-zag varints/varlongs, Kafka's
uuid text form, RawRecords. Expected bytes are written out by hand from the protobuf varint
rules, not produced by the functions under test."""

from __future__ import annotations

import base64

import pytest

from kafkasniff.protocol.primitives import (
    ZERO_UUID,
    RawRecords,
    read_uvarint,
    read_varint,
    uuid_from_str,
    uuid_to_str,
    write_uvarint,
    write_varint,
)

UVARINTS = [
    (0, b"\x00"),
    (1, b"\x01"),
    (127, b"\x7f"),
    (128, b"\x80\x01"),
    (300, b"\xac\x02"),
    (16383, b"\xff\x7f"),
    (16384, b"\x80\x80\x01"),
    (2 ** 31 - 1, b"\xff\xff\xff\xff\x07"),
    (2 ** 32 - 1, b"\xff\xff\xff\xff\x0f"),
    (2 ** 64 - 1, b"\xff" * 9 + b"\x01"),     # the longest accepted: 10 bytes
]

# zig-zag: 0->0, -1->1, 1->2, -2->3 ...
VARINTS = [
    (0, b"\x00"),
    (-1, b"\x01"),
    (1, b"\x02"),
    (-2, b"\x03"),
    (63, b"\x7e"),
    (-64, b"\x7f"),
    (64, b"\x80\x01"),
    (2 ** 31 - 1, b"\xfe\xff\xff\xff\x0f"),
    (-(2 ** 31), b"\xff\xff\xff\xff\x0f"),
    (2 ** 63 - 1, b"\xfe" + b"\xff" * 8 + b"\x01"),
    (-(2 ** 63), b"\xff" * 9 + b"\x01"),
]


# --------------------------------------------------------------------------- uvarint

@pytest.mark.parametrize("value, wire", UVARINTS)
def test_uvarint_known_encodings(value, wire):
    """write_uvarint gives the protobuf bytes; read_uvarint reads them back and the end."""
    assert write_uvarint(value) == wire
    assert read_uvarint(wire, 0) == (value, len(wire))


@pytest.mark.parametrize("value, wire", UVARINTS)
def test_uvarint_at_offset_with_trailing_data(value, wire):
    """Reading starts at ``pos`` and stops after the varint, whatever follows."""
    buf = b"\xaa\xbb" + wire + b"\xff\x80\x00"
    assert read_uvarint(buf, 2) == (value, 2 + len(wire))
    assert read_uvarint(bytearray(buf), 2) == (value, 2 + len(wire))
    assert read_uvarint(memoryview(buf), 2) == (value, 2 + len(wire))


def test_uvarint_non_minimal_encoding_is_accepted():
    """Overlong (padded) encodings of a small value decode to it."""
    assert read_uvarint(b"\x81\x80\x80\x00", 0) == (1, 4)


def test_uvarint_ten_byte_limit():
    """Ten bytes are accepted; a continuation bit on the tenth byte is an error."""
    assert read_uvarint(b"\x80" * 9 + b"\x00", 0) == (0, 10)
    with pytest.raises(ValueError, match="10 bytes"):
        read_uvarint(b"\x80" * 10 + b"\x00", 0)
    with pytest.raises(ValueError):
        read_uvarint(b"\xff" * 20, 0)


@pytest.mark.parametrize("wire", [b"", b"\x80", b"\xff\xff", b"\x80" * 9])
def test_uvarint_truncated_raises_index_error(wire):
    """A varint cut by the end of the buffer raises IndexError (the decoders rely on it)."""
    with pytest.raises(IndexError):
        read_uvarint(wire, 0)


def test_uvarint_byte_by_byte_prefixes():
    """Every strict prefix of a multi-byte varint is truncated; the whole one decodes."""
    wire = write_uvarint(2 ** 35 + 12345)
    assert len(wire) == 6
    for n in range(len(wire)):
        with pytest.raises(IndexError):
            read_uvarint(wire[:n], 0)
    assert read_uvarint(wire, 0) == (2 ** 35 + 12345, 6)


def test_write_uvarint_rejects_negative():
    with pytest.raises(ValueError):
        write_uvarint(-1)


# --------------------------------------------------------------------------- zig-zag

@pytest.mark.parametrize("value, wire", VARINTS)
def test_zigzag_known_encodings(value, wire):
    """write_varint zig-zags then varint-encodes; read_varint inverts it."""
    assert write_varint(value) == wire
    assert read_varint(wire, 0) == (value, len(wire))
    assert read_varint(b"\x00" + wire + b"\x7f", 1) == (value, 1 + len(wire))


def test_zigzag_round_trip_around_boundaries():
    for base in (0, 2 ** 6, 2 ** 13, 2 ** 20, 2 ** 31, 2 ** 62):
        for v in (base - 1, base, base + 1, -base - 1, -base, -base + 1):
            if -(2 ** 63) <= v < 2 ** 63:
                assert read_varint(write_varint(v), 0)[0] == v


# --------------------------------------------------------------------------- uuid

def test_uuid_to_str_is_url_safe_base64_without_padding():
    """Kafka's Uuid.toString: 22 characters of URL-safe base64, ``-``/``_`` not ``+``/``/``."""
    raw = bytes([0xFB, 0xFF, 0xBF] + list(range(13)))
    text = uuid_to_str(raw)
    assert len(text) == 22
    assert text == base64.urlsafe_b64encode(raw).decode().rstrip("=")
    assert text.startswith("-_-_")  # 0xfbffbf -> "+/+/" in standard base64
    assert "=" not in text and "+" not in text and "/" not in text
    assert uuid_from_str(text) == raw


def test_uuid_known_values():
    assert uuid_to_str(bytes(range(1, 17))) == "AQIDBAUGBwgJCgsMDQ4PEA"
    assert ZERO_UUID == uuid_to_str(bytes(16)) == "AAAAAAAAAAAAAAAAAAAAAA"


def test_uuid_texts_kept_are_bounded_and_every_buffer_gives_the_same_text():
    """The texts of recent uuids are kept (topic ids repeat in every Fetch): whatever was
    kept, or evicted, and whatever buffer holds the bytes, the text is the one
    ``base64.urlsafe_b64encode`` gives; at most ``_UUID_TEXT_MAX`` texts are kept."""
    import random

    from kafkasniff.protocol import primitives

    rng = random.Random(14)
    ids = [rng.randbytes(16) for _ in range(primitives._UUID_TEXT_MAX + 100)]
    for raw in ids + ids[:50] + ids[-50:]:
        want = base64.urlsafe_b64encode(raw).decode()[:22]
        for buf in (raw, bytearray(raw), memoryview(raw)):
            assert uuid_to_str(buf) == want
        assert len(primitives._UUID_TEXT) <= primitives._UUID_TEXT_MAX
    assert primitives._UUID_TEXT.get(ids[-1]) == uuid_to_str(ids[-1])


def test_uuid_from_str_rejects_wrong_length():
    with pytest.raises(ValueError):
        uuid_from_str("AQID")


# --------------------------------------------------------------------------- RawRecords

def test_raw_records_equality_and_size():
    """RawRecords compare and hash by bytes (not by offset), start undecoded."""
    a, b = RawRecords(b"abc", 10), RawRecords(b"abc", 99)
    assert a == b and hash(a) == hash(b) and a != RawRecords(b"abd")
    assert a.size_bytes == 3 and a.decoded is None and a.offset == 10
    assert RawRecords(b"").offset == -1
    assert repr(RawRecords(b"12345")) == "RawRecords(5 bytes)"
