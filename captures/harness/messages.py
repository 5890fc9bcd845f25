"""Sample records several scenarios send: (key, value, headers) tuples covering keys, null
keys, empty and null values, binary keys/values/headers, a null-valued header, duplicate
header names and a 300-byte value."""

from __future__ import annotations

#: 10 order records (JSON-ish values), sent by librdkafka_produce_consume, kafka_python,
#: aiokafka
ORDER_MESSAGES: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]] = [
    (b"order-0001", b'{"order":1,"item":"widget","qty":3}',
     [("trace-id", b"trace-0001"), ("source", b"kafkasniff")]),
    (b"order-0002", b'{"order":2,"item":"gadget","qty":1}', [("trace-id", b"trace-0002")]),
    (b"order-0003", b'{"order":3,"item":"sprocket","qty":12}', []),
    (None, b"no-key-order-0004", [("null-key", b"yes")]),
    (b"order-0005", b"", [("empty-value", b"yes")]),
    (b"order-0006", None, [("tombstone", b"yes")]),
    (b"order-0007", b'{"order":7,"item":"\xc3\xa9clair","qty":2}', []),
    (None, b"no-key-order-0008", []),
    (b"order-0009", b"x" * 300, [("big", b"300 bytes")]),
    (b"order-0010", b'{"order":10}', [("dup", b"first"), ("dup", b"second")]),
]
#: 10 event records (binary keys, values and headers), sent by the same scenarios
EVENT_MESSAGES: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]] = [
    (b"event-01", bytes(range(0, 256, 5)), [("bin-header", b"\x00\x01\x02\xff")]),
    (b"event-02", b"\x00\xff\x00\xfe\x80\x81", [("null-header", None)]),
    (b"\x00\x01binary-key", b"binary key, text value", []),
    (b"event-04", b"click", [("user", b"u-42"), ("session", b"s-9")]),
    (b"event-05", b"view", []),
    (None, b"\xde\xad\xbe\xef", [("null-key", b"yes")]),
    (b"event-07", b"purchase", [("amount", b"19.99")]),
    (b"event-08", "unicode \u2603 snowman".encode(), []),
    (b"event-09", b"", []),
    (b"event-10", b"last event", [("last", b"true")]),
]
