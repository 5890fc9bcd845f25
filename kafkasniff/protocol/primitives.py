"""Kafka wire primitives shared by the decoders.

Unsigned varints (KIP-482, protobuf style, little-endian base-128), zig-zag varints and
varlongs (record batches), Kafka's textual UUID form, and the raw-records wrapper.
"""

from __future__ import annotations

import base64
from binascii import b2a_base64


def read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    """Read an unsigned varint (at most 5 bytes for 32-bit values, accepted up to 10).

    Returns ``(value, new_pos)``. Raises IndexError at the end of the buffer and
    ValueError when the varint is longer than 10 bytes.
    """
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    value = b & 0x7F
    shift = 7
    pos += 1
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Read a zig-zag signed varint/varlong (record batch fields). Returns ``(value, new_pos)``."""
    raw, pos = read_uvarint(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def write_uvarint(value: int) -> bytes:
    """Encode an unsigned varint (used by test encoders and crafted captures)."""
    if value < 0:
        raise ValueError("uvarint must be >= 0")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def write_varint(value: int) -> bytes:
    """Encode a zig-zag signed varint/varlong."""
    return write_uvarint((value << 1) ^ (value >> 63))


#: uuid bytes -> text, for the topic ids every Fetch and Metadata repeats; emptied when full
_UUID_TEXT: dict[bytes, str] = {}
_UUID_TEXT_MAX = 4096
_URL_SAFE = bytes.maketrans(b"+/", b"-_")


def _format_uuid(raw) -> str:
    return b2a_base64(raw, newline=False)[:22].translate(_URL_SAFE).decode("ascii")


def uuid_to_str(raw: bytes) -> str:
    """Kafka's textual UUID: URL-safe base64 of the 16 bytes, no padding (``Uuid.toString``).

    ``raw``: the bytes (``bytes``, or any buffer of them; a length other than 16 gives
    the first 22 characters of its base64, as before). The texts of the last 4,096
    distinct ``bytes`` uuids are kept (a hand-kept dict: ``functools.lru_cache`` needs a
    wrapper for unhashable buffers, measured slower): a topic id is formatted once, not
    once per partition list it appears in. Raises ``TypeError`` for an object that is not
    a buffer."""
    if type(raw) is not bytes:      # a buffer that is no dict key: formatted, not kept
        return _format_uuid(raw)
    text = _UUID_TEXT.get(raw)
    if text is None:
        text = _format_uuid(raw)
        if len(_UUID_TEXT) >= _UUID_TEXT_MAX:
            _UUID_TEXT.clear()
        _UUID_TEXT[raw] = text
    return text


def uuid_from_str(text: str) -> bytes:
    """Inverse of :func:`uuid_to_str`. Raises ValueError on a malformed string."""
    raw = base64.urlsafe_b64decode(text + "==")
    if len(raw) != 16:
        raise ValueError(f"not a Kafka uuid: {text!r}")
    return raw


ZERO_UUID = uuid_to_str(bytes(16))


class RawRecords:
    """The bytes of a ``records`` field (message sets or record batches).

    Attributes:
        data: the field's bytes, exactly as on the wire.
        offset: offset of ``data`` in the frame payload (-1 if unknown).
        decoded: the :class:`kafkasniff.protocol.records.RecordSet` once decoded, else None.
    """

    __slots__ = ("data", "offset", "decoded")

    def __init__(self, data: bytes, offset: int = -1) -> None:
        self.data = data
        self.offset = offset
        self.decoded = None

    @property
    def size_bytes(self) -> int:
        """Length of the records data in bytes."""
        return len(self.data)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RawRecords) and other.data == self.data

    def __hash__(self) -> int:
        return hash(self.data)

    def __repr__(self) -> str:
        return f"RawRecords({len(self.data)} bytes)"
