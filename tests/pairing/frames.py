"""Hand-built Kafka frames for the framing, detection and pairing tests.

Everything is written with ``struct`` from the Kafka wire rules (not with the package's
encoders), so the tests are an independent reading of the protocol:

- request frame  = int32 size + api_key int16 + api_version int16 + correlation_id int32
  + client_id (int16-length nullable string) [+ tagged fields uvarint, header v2] + body;
- response frame = int32 size + correlation_id int32 [+ tagged fields, header v1] + body.
"""

from __future__ import annotations

import base64
import struct

from kafkasniff.protocol.primitives import write_uvarint as uvarint

# api keys
PRODUCE, FETCH, METADATA, HEARTBEAT, API_VERSIONS = 0, 1, 3, 12, 18


# --------------------------------------------------------------------------- primitives

def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def boolean(v: bool) -> bytes:
    return b"\x01" if v else b"\x00"


def string(s: str | None) -> bytes:
    """int16-length string; ``None`` -> null (-1)."""
    if s is None:
        return i16(-1)
    b = s.encode()
    return i16(len(b)) + b


def cstring(s: str | None) -> bytes:
    """Compact string (uvarint length + 1); ``None`` -> 0."""
    if s is None:
        return b"\x00"
    b = s.encode()
    return uvarint(len(b) + 1) + b


def array(items: list[bytes] | None) -> bytes:
    """int32-count array of already-encoded items; ``None`` -> null (-1)."""
    if items is None:
        return i32(-1)
    return i32(len(items)) + b"".join(items)


def carray(items: list[bytes] | None) -> bytes:
    """Compact array (uvarint count + 1); ``None`` -> 0."""
    if items is None:
        return b"\x00"
    return uvarint(len(items) + 1) + b"".join(items)


def nbytes(b: bytes | None) -> bytes:
    """int32-length bytes / records; ``None`` -> null."""
    if b is None:
        return i32(-1)
    return i32(len(b)) + b


NO_TAGS = b"\x00"


def uuid_text(raw: bytes) -> str:
    """Kafka's Uuid.toString: URL-safe base64, no padding."""
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


TOPIC_ID_ORDERS = bytes(range(1, 17))
TOPIC_ID_UNKNOWN = bytes(range(100, 116))
ZERO_ID = bytes(16)


# --------------------------------------------------------------------------- frames

def frame(payload: bytes) -> bytes:
    return i32(len(payload)) + payload


def request_header(api_key: int, version: int, corr: int, client_id: str | None = "client-1",
                   flexible: bool = False) -> bytes:
    h = i16(api_key) + i16(version) + i32(corr) + string(client_id)
    return h + NO_TAGS if flexible else h


def request(api_key: int, version: int, corr: int, body: bytes = b"",
            client_id: str | None = "client-1", flexible: bool = False) -> bytes:
    """A whole request frame (size prefix included)."""
    return frame(request_header(api_key, version, corr, client_id, flexible) + body)


def response(corr: int, body: bytes = b"", flexible: bool = False) -> bytes:
    """A whole response frame (size prefix included)."""
    return frame(i32(corr) + (NO_TAGS if flexible else b"") + body)


# --------------------------------------------------------------------------- bodies

# ApiVersions
def api_versions_v0_response_body(error_code: int = 0,
                                  keys=((0, 0, 9), (1, 0, 13), (3, 0, 12))) -> bytes:
    return i16(error_code) + array([i16(k) + i16(lo) + i16(hi) for k, lo, hi in keys])


def api_versions_v3_request_body(name: str = "kafkasniff-test", version: str = "1.0") -> bytes:
    return cstring(name) + cstring(version) + NO_TAGS


def api_versions_v3_response_body(error_code: int = 0, keys=((0, 0, 9), (18, 0, 3)),
                                  throttle_time_ms: int = 0) -> bytes:
    return (i16(error_code) + carray([i16(k) + i16(lo) + i16(hi) + NO_TAGS for k, lo, hi in keys])
            + i32(throttle_time_ms) + NO_TAGS)


# Metadata v1
def metadata_v1_request_body(topics: list[str] | None) -> bytes:
    return array(None if topics is None else [string(t) for t in topics])


def metadata_v1_response_body(topics=(("orders", 0, ((0, 0, 1),)),),
                              brokers=((1, "broker-1", 9092, None),), controller_id: int = 1) -> bytes:
    """topics: (name, error_code, partitions((error_code, index, leader),))."""
    b = array([i32(n) + string(h) + i32(p) + string(r) for n, h, p, r in brokers])
    b += i32(controller_id)
    tops = []
    for name, err, parts in topics:
        pp = [i16(pe) + i32(idx) + i32(leader) + array([i32(leader)]) + array([i32(leader)])
              for pe, idx, leader in parts]
        tops.append(i16(err) + string(name) + boolean(False) + array(pp))
    return b + array(tops)


# Metadata v10 (flexible: request header v2, response header v1)
def metadata_v10_request_body(topics=((ZERO_ID, "orders"),)) -> bytes:
    """topics: (topic_id 16 bytes, name or None)."""
    return (carray([tid + cstring(name) + NO_TAGS for tid, name in topics])
            + boolean(True) + boolean(False) + boolean(False) + NO_TAGS)


def metadata_v10_response_body(topics=(("orders", TOPIC_ID_ORDERS, 0),), throttle_time_ms: int = 0
                               ) -> bytes:
    """topics: (name, topic_id 16 bytes, error_code); one partition each."""
    b = i32(throttle_time_ms)
    b += carray([i32(1) + cstring("broker-1") + i32(9092) + cstring(None) + NO_TAGS])
    b += cstring("cluster-x") + i32(1)
    tops = []
    for name, tid, err in topics:
        part = (i16(0) + i32(0) + i32(1) + i32(0) + carray([i32(1)]) + carray([i32(1)])
                + carray([]) + NO_TAGS)
        tops.append(i16(err) + cstring(name) + tid + boolean(False) + carray([part])
                    + i32(-2147483648) + NO_TAGS)
    b += carray(tops)
    b += i32(-2147483648) + NO_TAGS
    return b


def tiny_batch(value: bytes = b"rec", base_offset: int = 0) -> bytes:
    """A valid magic 2 record batch holding one record (no key, no headers, uncompressed)."""
    import crc32c

    def zz(n: int) -> bytes:  # zig-zag varint
        n = (n << 1) ^ (n >> 63)
        out = b""
        while n >= 0x80:
            out += bytes([(n & 0x7F) | 0x80])
            n >>= 7
        return out + bytes([n])

    body = b"\x00" + zz(0) + zz(0) + zz(-1) + zz(len(value)) + value + zz(0)
    record = zz(len(body)) + body
    after_crc = (struct.pack(">hiqqqhii", 0, 0, 1000, 1000, -1, -1, -1, 1) + record)
    head = struct.pack(">iB", 0, 2)  # partition leader epoch, magic
    crc = struct.pack(">I", crc32c.crc32c(after_crc))
    batch = head + crc + after_crc
    return struct.pack(">qi", base_offset, len(batch)) + batch


# Produce v3
def produce_v3_request_body(acks: int = -1, topics=(("orders", ((0, tiny_batch()),)),),
                            transactional_id: str | None = None, timeout_ms: int = 30000) -> bytes:
    """topics: (name, ((partition index, records bytes or None),))."""
    tds = [string(name) + array([i32(idx) + nbytes(rec) for idx, rec in parts])
           for name, parts in topics]
    return string(transactional_id) + i16(acks) + i32(timeout_ms) + array(tds)


def produce_v3_response_body(topics=(("orders", ((0, 0),)),), throttle_time_ms: int = 0) -> bytes:
    """topics: (name, ((index, error_code),))."""
    rs = [string(name) + array([i32(idx) + i16(err) + i64(42) + i64(-1) for idx, err in parts])
          for name, parts in topics]
    return array(rs) + i32(throttle_time_ms)


# Fetch v4
def fetch_v4_request_body(topics=(("orders", (0,)),)) -> bytes:
    ts = [string(name) + array([i32(p) + i64(0) + i32(1 << 20) for p in parts])
          for name, parts in topics]
    return i32(-1) + i32(500) + i32(1) + i32(50 << 20) + i8(0) + array(ts)


def fetch_v4_response_body(topics=(("orders", ((0, 0),)),), throttle_time_ms: int = 0) -> bytes:
    """topics: (name, ((partition_index, error_code),)); empty records."""
    rs = [string(name) + array([i32(p) + i16(err) + i64(10) + i64(10) + array(None) + nbytes(b"")
                                for p, err in parts])
          for name, parts in topics]
    return i32(throttle_time_ms) + array(rs)


# Heartbeat v0
def heartbeat_v0_request_body(group: str = "g1", generation: int = 3, member: str = "m-1") -> bytes:
    return string(group) + i32(generation) + string(member)


def heartbeat_v0_response_body(error_code: int = 0) -> bytes:
    return i16(error_code)


# --------------------------------------------------------------------------- whole frames

def api_versions_v0_request(corr: int, client_id: str | None = "client-1") -> bytes:
    return request(API_VERSIONS, 0, corr, b"", client_id)


def metadata_v1_request(corr: int, topics: list[str] | None = ("orders",)) -> bytes:
    return request(METADATA, 1, corr, metadata_v1_request_body(
        None if topics is None else list(topics)))


def heartbeat_v0_request(corr: int) -> bytes:
    return request(HEARTBEAT, 0, corr, heartbeat_v0_request_body())


def produce_v3_request(corr: int, acks: int = -1, **kw) -> bytes:
    return request(PRODUCE, 3, corr, produce_v3_request_body(acks, **kw))


def fetch_v4_request(corr: int, **kw) -> bytes:
    return request(FETCH, 4, corr, fetch_v4_request_body(**kw))


def request_stream(n: int, first_corr: int = 1) -> list[bytes]:
    """``n`` varied, well-formed request frames (a plausible client stream)."""
    makers = [api_versions_v0_request, metadata_v1_request, heartbeat_v0_request,
              produce_v3_request, fetch_v4_request]
    return [makers[i % len(makers)](first_corr + i) for i in range(n)]
