#!/usr/bin/env python3
"""Write the regression captures of ``captures/regressions/``: crafted inputs that once broke
one of kafkasniff's promises (bounded memory and CPU, no secret in any output, every captured
byte accounted for).

Usage (no root needed, nothing is sent on a network)::

    .venv/bin/python captures/craft_regressions.py            # every regression capture
    .venv/bin/python captures/craft_regressions.py NAME...    # some of them
    .venv/bin/python captures/craft_regressions.py --list     # names and what each breaks

Each capture is small and deterministic (fixed times, ports, sequence numbers), built with
the encoder and TCP helpers of ``craft_captures.py`` (which imports nothing from kafkasniff);
``tests/captures/test_regressions.py`` says what kafkasniff must do with each, and every
regression capture is also an input of the secret-search, accounting and memory-cap tests.
Captures found by the fuzzer (``bench/bench_fuzz.py``) are committed here too, as
``fuzz-<hash>.pcap``, unchanged.
"""

from __future__ import annotations

import argparse
import struct
import sys
from collections.abc import Callable
from pathlib import Path

import craft_captures as cc

OUT = cc.CAPTURES / "regressions"
BASE_TS_NS = cc.BASE_TS_NS + 86_400 * 1_000_000_000     # 2024-01-02T00:00:00Z

#: name -> (what it broke, builder returning the file's bytes)
REGRESSIONS: dict[str, tuple[str, Callable[[], bytes]]] = {}


def regression(name: str, what: str):
    """Register a builder of ``regressions/<name>`` (the name carries the extension)."""
    def register(fn: Callable[[], bytes]) -> Callable[[], bytes]:
        REGRESSIONS[name] = (what, fn)
        return fn
    return register


class Conversation:
    """Client/broker TCP conversations in one pcap (connections opened with a handshake)."""

    def __init__(self, offset_s: int = 0) -> None:
        self.pcap = cc.Pcap()
        self.clock = cc.Clock(BASE_TS_NS + offset_s * 1_000_000_000)
        self.conns: dict[int, cc.TcpConn] = {}

    def connect(self, client_port: int) -> cc.TcpConn:
        conn = cc.TcpConn(self.pcap, self.clock, client_port, isn=client_port)
        conn.open()
        self.conns[client_port] = conn
        return conn

    def request(self, port: int, api_key: int, version: int, corr: int, body: bytes, *,
                client_id: str | bytes | None = "regression", header_version: int = 1) -> None:
        if isinstance(client_id, bytes):    # sent as they are (not UTF-8, perhaps)
            header = (cc.i16(api_key) + cc.i16(version) + cc.i32(corr) + cc.i16(len(client_id))
                      + client_id + (cc.tagged() if header_version >= 2 else b""))
        else:
            header = cc.request_header(api_key, version, corr, client_id, header_version)
        payload = header + body
        self.conns[port].send(True, cc.size_prefixed(payload))

    def response(self, port: int, corr: int, body: bytes, *, header_version: int = 0) -> None:
        self.conns[port].send(False, cc.size_prefixed(cc.response_header(corr, header_version)
                                                      + body), gap_ns=700_000)

    def bytes(self) -> bytes:
        for conn in self.conns.values():
            conn.close()
        out = [struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1)]
        for ts, frame in sorted(self.pcap.frames, key=lambda f: f[0]):
            out.append(struct.pack("<IIII", ts // 1_000_000_000, ts % 1_000_000_000,
                                   len(frame), len(frame)))
            out.append(frame)
        return b"".join(out)


# =========================================================================== exchanges lost

@regression("apiversions_future_error.pcap",
            "An ApiVersions request of a version above the definitions (v6), answered with "
            "UNSUPPORTED_VERSION (35) in a body that fits no v0 layout: the KIP-511 fallback "
            "tried the request's own version, which has no layout, and the exchange vanished "
            "behind an internal_error issue.")
def apiversions_future_error() -> bytes:
    c = Conversation()
    c.connect(50401)
    c.request(50401, 18, 6, 1, cc.compact_string("regression") + cc.compact_string("1.0")
              + cc.tagged(), header_version=2)
    # error 35, then an api_keys count of -2 (not v0's int32 count of 3-int16 entries)
    c.response(50401, 1, cc.i16(35) + cc.i32(-2) + b"\x00\x01")
    return c.bytes()


@regression("header_decode_error.pcap",
            "A request whose client_id length runs past its frame: the header_decode_error "
            "issue said nothing of the bytes it stood for (length_bytes 0).")
def header_decode_error() -> bytes:
    c = Conversation()
    conn = c.connect(50402)
    bad = cc.i16(3) + cc.i16(1) + cc.i32(7) + cc.i16(300) + b"short"     # client_id: 300 > 5
    conn.send(True, cc.size_prefixed(bad))
    c.request(50402, 3, 1, 8, cc.i32(0))                                  # Metadata v1, no topics
    c.response(50402, 8, cc.i32(0) + cc.i32(-1) + cc.i32(0))              # brokers, controller, topics
    return c.bytes()


def send_with_loss(conn: cc.TcpConn, data: bytes, lost: tuple[int, int]) -> None:
    """Client ``data`` in segments, the bytes ``data[lost[0]:lost[1]]`` never captured (their
    sequence numbers skipped), then the broker's ACK of everything (so the loss is known)."""
    import dpkt

    a, b = lost
    for start, end in ((0, a), (b, len(data))):
        if start == b:
            conn.seq[True] = (conn.seq[True] + (b - a)) % 2**32
        if end > start:
            conn._emit(True, dpkt.tcp.TH_ACK | dpkt.tcp.TH_PUSH, data[start:end], gap_ns=100_000)
    conn._emit(False, dpkt.tcp.TH_ACK, gap_ns=25_000)


@regression("segment_lost_inside_a_frame.pcap",
            "A 300-byte segment lost inside a 1,000-byte request: the captured bytes after the "
            "gap were discarded and reported as never captured (the request said 617 bytes "
            "missing where 300 were lost).")
def segment_lost_inside_a_frame() -> bytes:
    c = Conversation()
    conn = c.connect(50403)
    topics = [f"topic-{i:03d}-{'x' * 20}" for i in range(33)]
    body = cc.i32(len(topics)) + b"".join(cc.string(t) for t in topics)
    payload = cc.request_header(3, 1, 1, "regression", 1) + body
    frame = cc.size_prefixed(payload)
    assert len(frame) > 700, len(frame)
    send_with_loss(conn, frame, (300, 600))
    c.response(50403, 1, cc.i32(0) + cc.i32(-1) + cc.i32(0))
    return c.bytes()


# =========================================================================== pcapng

def _pcapng_block(btype: int, body: bytes) -> bytes:
    body += b"\0" * (-len(body) % 4)
    n = 12 + len(body)
    return struct.pack("<II", btype, n) + body + struct.pack("<I", n)


def _pcapng(c: Conversation, *, extra: Callable[[int], bytes] = lambda i: b"",
            iface_of: Callable[[int], int] = lambda i: 0, tsoffset_s: int = 0) -> bytes:
    """The conversation as pcapng: a section, interface 0 (Ethernet, microseconds) and
    interface 1 (the same, with ``if_tsoffset`` = ``tsoffset_s``); packet ``i`` goes on
    interface ``iface_of(i)``, preceded by the blocks ``extra(i)``."""
    for conn in c.conns.values():
        conn.close()
    shb = _pcapng_block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    idb = _pcapng_block(1, struct.pack("<HHI", 1, 0, 262144))
    opt = struct.pack("<HHq", 14, 8, tsoffset_s) + struct.pack("<HH", 0, 0)
    idb1 = _pcapng_block(1, struct.pack("<HHI", 1, 0, 262144) + opt)
    out = [shb, idb, idb1]
    for i, (ts, frame) in enumerate(sorted(c.pcap.frames, key=lambda f: f[0])):
        us = ts // 1000
        out.append(extra(i))
        out.append(_pcapng_block(6, struct.pack("<IIIII", iface_of(i), us >> 32,
                                                us & 0xFFFFFFFF, len(frame), len(frame))
                                 + frame))
    return b"".join(out)


def _metadata_exchanges(c: Conversation, port: int, n: int) -> None:
    c.connect(port)
    for corr in range(1, n + 1):
        c.request(port, 3, 1, corr, cc.i32(0))
        c.response(port, corr, cc.i32(0) + cc.i32(-1) + cc.i32(0))


@regression("pcapng_unknown_blocks.pcapng",
            "Blocks of types the reader does not know (0x99, a custom block 0xBAD, a "
            "Decryption Secrets Block) between the packets: skipped without a count.")
def pcapng_unknown_blocks() -> bytes:
    c = Conversation()
    _metadata_exchanges(c, 50411, 3)
    kinds = [b"", _pcapng_block(0x99, b"unknown block " * 3),
             _pcapng_block(0xBAD, struct.pack("<I", 32473) + b"custom"),
             _pcapng_block(0x0A, struct.pack("<II", 0x544C534B, 20) + b"CLIENT_RANDOM x y\n")]
    return _pcapng(c, extra=lambda i: kinds[i % len(kinds)])


@regression("pcapng_timestamp_out_of_range.pcapng",
            "Packets on an interface whose if_tsoffset (2^62 s) puts them beyond the "
            "timestamps the tool can hold, between good ones: the first stopped the whole "
            "file, uncounted, exit 0.")
def pcapng_timestamp_out_of_range() -> bytes:
    c = Conversation()
    _metadata_exchanges(c, 50412, 1)
    _metadata_exchanges(c, 50413, 1)
    n_first = 3 + 4      # handshake and the exchange of the first connection, in time order
    return _pcapng(c, iface_of=lambda i: 1 if i == n_first else 0, tsoffset_s=2**62)


# =========================================================================== memory and CPU

def raw_batch(section: bytes, count: int, *, codec: int = 0, control: bool = False,
              last_offset_delta: int = 0, base_offset: int = 0) -> bytes:
    """A magic 2 record batch around an already encoded (and compressed) records
    ``section`` whose header claims ``count`` records (CRC32C correct)."""
    attrs = codec | (0x30 if control else 0)      # control batches are transactional
    after_crc = (cc.i16(attrs) + cc.i32(last_offset_delta) + cc.i64(1_700_000_000_000)
                 + cc.i64(1_700_000_000_000) + cc.i64(4242 if control else -1)
                 + cc.i16(0 if control else -1) + cc.i32(-1) + cc.i32(count) + section)
    return (cc.i64(base_offset) + cc.i32(4 + 1 + 4 + len(after_crc)) + cc.i32(0) + cc.i8(2)
            + cc.u32(cc.crc32c(after_crc)) + after_crc)


def fetch_exchange(c: Conversation, port: int, corr: int,
                   partitions: list[tuple[int, bytes]], topic: str = "regression") -> None:
    """A Fetch v11 request for ``topic`` and its response carrying ``partitions``
    (index, records bytes)."""
    c.request(port, 1, 11, corr, cc.fetch_request(11, [(topic, [(p, 0) for p, _ in partitions])]))
    c.response(port, corr, cc.fetch_response(11, [(topic, [
        {"partition": p, "high_watermark": 2_000_000, "records": data}
        for p, data in partitions])]))


def produce_exchange(c: Conversation, port: int, corr: int,
                     partitions: list[tuple[int, bytes]], topic: str = "regression") -> None:
    """A Produce v7 request (acks=1) carrying ``partitions`` and its response."""
    c.request(port, 0, 7, corr, cc.produce_request(7, None, 1, [(topic, partitions)]))
    c.response(port, corr, cc.produce_response(7, [(topic, [(p, 0) for p, _ in partitions])]))


_COMMIT = cc.record_v2(0, 0, cc.i16(0) + cc.i16(1), cc.i16(0) + cc.i32(7), [])


@regression("control_batch_bomb.pcap",
            "Two zstd control batches of 1,000,000 records each in a few KB (transaction "
            "markers, then markers whose key is one byte): control batches were decoded "
            "record by record even without --records (stats went past 11 GB) with one "
            "record_decode_error issue per bad record.")
def control_batch_bomb() -> bytes:
    n = 1_000_000
    good = raw_batch(cc.zstd_compress(_COMMIT * n), n, codec=4, control=True)
    bad_record = cc.record_v2(0, 0, b"\x00", cc.i16(0) + cc.i32(7), [])
    bad = raw_batch(cc.zstd_compress(bad_record * n), n, codec=4, control=True,
                    base_offset=n)
    c = Conversation()
    c.connect(50404)
    fetch_exchange(c, 50404, 1, [(0, good), (1, bad)])
    return c.bytes()


@regression("records_1m.pcap",
            "A zstd batch of 1,000,000 small records in a Fetch response: export --records "
            "held every record of the batch as an object (1.23 GB).")
def records_1m() -> bytes:
    n = 1_000_000
    batch = raw_batch(cc.zstd_compress(cc.record_v2(0, 0, None, b"v", []) * n), n, codec=4)
    c = Conversation()
    c.connect(50405)
    fetch_exchange(c, 50405, 1, [(0, batch)])
    return c.bytes()


_MIB = 1024 * 1024
_ZEROS_60M = None


def _zero_batch(base_offset: int) -> bytes:
    """A zstd batch whose records section decompresses to 60 MiB (under the 64 MiB batch
    limit) in about 2 KB."""
    global _ZEROS_60M
    if _ZEROS_60M is None:
        _ZEROS_60M = cc.zstd_compress(bytes(60 * _MIB))
    return raw_batch(_ZEROS_60M, 1, codec=4, base_offset=base_offset)


@regression("decompression_per_frame.pcap",
            "One Produce request with 8 zstd batches of 60 MiB each (8 x 2 KB): every batch "
            "passed the per-batch limit, nothing bounded the frame (480 MiB decompressed).")
def decompression_per_frame() -> bytes:
    c = Conversation()
    c.connect(50406)
    produce_exchange(c, 50406, 1, [(p, _zero_batch(p)) for p in range(8)])
    return c.bytes()


@regression("decompression_per_capture.pcap",
            "60 Produce requests with 4 zstd batches of 60 MiB each: 500 KB of capture "
            "decompressed to 14 GB, with no issue (nothing bounded the capture).")
def decompression_per_capture() -> bytes:
    c = Conversation()
    c.connect(50407)
    for corr in range(1, 61):
        produce_exchange(c, 50407, corr, [(p, _zero_batch(p)) for p in range(4)])
    return c.bytes()


@regression("pending_requests_one_way.pcap",
            "200 Produce requests of 2 KB on a connection whose responses were not captured: "
            "pending requests were bounded by count only, so a one-way capture held every "
            "request's bytes (a 524 MB one-way capture used 531 MB).")
def pending_requests_one_way() -> bytes:
    c = Conversation()
    c.connect(50408)
    batch = raw_batch(b"".join(cc.record_v2(i, 0, None, bytes(40), [])
                               for i in range(45)), 45, last_offset_delta=44)
    for corr in range(1, 201):
        c.request(50408, 0, 7, corr, cc.produce_request(7, None, 1, [("regression",
                                                                       [(0, batch)])]))
    return c.bytes()


@regression("resync_zeros.pcap.gz",
            "8 MiB of zeros inside a client stream, between two requests (a 100 KB gzip "
            "file): resync checked every offset in Python, at 4.5 MB/s (a 2 MB gzip of zeros "
            "took 5 minutes).")
def resync_zeros() -> bytes:
    import gzip

    c = Conversation()
    conn = c.connect(50410)
    c.request(50410, 3, 1, 1, cc.i32(0))
    c.response(50410, 1, cc.i32(0) + cc.i32(-1) + cc.i32(0))
    conn.send(True, cc.i32(-1) + bytes(8 * 1024 * 1024), gap_ns=1_000)
    c.request(50410, 3, 1, 2, cc.i32(0))
    c.response(50410, 2, cc.i32(0) + cc.i32(-1) + cc.i32(0))
    return gzip.compress(c.bytes(), compresslevel=9, mtime=0)


@regression("record_count_implausible.pcap",
            "A batch claiming 2^31-1 records holding one: it was counted as 2,147,483,647 "
            "records, with no issue.")
def record_count_implausible() -> bytes:
    batch = raw_batch(cc.record_v2(0, 0, None, b"value", []), 2**31 - 1)
    c = Conversation()
    c.connect(50409)
    produce_exchange(c, 50409, 1, [(0, batch)])
    return c.bytes()


# =========================================================================== terminal output

#: what a hostile peer puts into a name: CSI sequences (clear screen, red), OSC 0 (window
#: title), OSC 52 (a clipboard write, base64 of "rm -rf ~"), BEL, CR, a C1 CSI (U+009B), DEL,
#: a bidi override (U+202E) and a line feed that forges an output line of its own
HOSTILE_TAIL = ("\x1b[2J\x1b[31m\x1b]0;pwned-title\x07\x1b]52;c;cm0gLXJmIH4=\x07\x07\r"
                "\x9b6n\x7f\u202egnp.exe\nkafkasniff: forged line")


def hostile(name: str) -> str:
    """``name`` followed by :data:`HOSTILE_TAIL` (every name of the capture is different, so
    a test can tell which output each came from)."""
    return name + HOSTILE_TAIL


#: the names of ``hostile_names.pcap`` (the tests read them from here)
HOSTILE = {
    "client_id": hostile("client"),
    "consumer_client_id": hostile("consumer"),
    "topic": hostile("topic"),
    "topic2": hostile("other-topic"),
    "header_key": hostile("header"),
    "group_id": hostile("group"),
    "member_id": hostile("member"),
    "group_instance_id": hostile("instance"),
    "assignor": hostile("assignor"),
    "group_state": hostile("Stable"),
    "client_host": hostile("/192.0.2.10"),
    "coordinator_host": hostile("coordinator"),
    "record_value": "value\r\nkafkasniff: forged record line",
    # JSON allows DEL, C1 and format characters raw inside its strings
    "record_json": '{"m": "json\x9b6n\x7f\u202egnp.exe\\u001b[2J"}',
}
#: the TLS server name (the SNI is read as ASCII: no C1 or bidi character can come of it)
HOSTILE_SNI = b"sni\x1b[2J\x1b]0;pwned-title\x07\x1b]52;c;cm0gLXJmIH4=\x07\r\x7f\nforged.example"


def kstring(v: str | bytes | None) -> bytes:
    """A Kafka ``string``: ``str`` as UTF-8; ``bytes`` as they are (not UTF-8, perhaps)."""
    return cc.i16(len(v)) + v if isinstance(v, bytes) else cc.string(v)


def consumer_subscription(topics: list[str | bytes]) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics, user_data null."""
    return cc.i16(0) + cc.array([kstring(t) for t in topics]) + cc.kbytes(None)


def consumer_assignment(parts: list[tuple[str | bytes, list[int]]]) -> bytes:
    """ConsumerProtocolAssignment v0: version, (topic, partitions) pairs, user_data null."""
    return cc.i16(0) + cc.array([kstring(t) + cc.array([cc.i32(p) for p in ps])
                                 for t, ps in parts]) + cc.kbytes(None)


def tls_client_hello(sni: bytes) -> bytes:
    """A TLS 1.2/1.3 ClientHello record (one cipher suite) with ``sni`` as its server name."""
    name = cc.i8(0) + struct.pack(">H", len(sni)) + sni
    server_name = struct.pack(">H", len(name)) + name
    versions = b"\x04\x03\x04\x03\x03"
    exts = (struct.pack(">HH", 0, len(server_name)) + server_name
            + struct.pack(">HH", 43, len(versions)) + versions)
    body = (b"\x03\x03" + bytes(range(32)) + b"\x00" + b"\x00\x02\x13\x01" + b"\x01\x00"
            + struct.pack(">H", len(exts)) + exts)
    hs = b"\x01" + len(body).to_bytes(3, "big") + body
    return b"\x16\x03\x01" + struct.pack(">H", len(hs)) + hs


@regression("hostile_names.pcap",
            "Names chosen by a peer carrying terminal controls (CSI, OSC 0 window title, OSC 52 "
            "clipboard write, BEL, CR, C1 CSI, DEL, bidi override, a line feed forging a "
            "line): client_id, topics (Metadata, Produce, Fetch, OffsetCommit), a record "
            "header key, a consumer group (group, member and instance ids, assignor, state, "
            "client host, coordinator host) and a TLS server name reached the terminal raw "
            "in read, stats, groups and live lines.")
def hostile_names() -> bytes:
    return hostile_names_capture(HOSTILE, HOSTILE_SNI)


def hostile_names_capture(names: dict[str, str | bytes], sni: bytes) -> bytes:
    """The capture of ``hostile_names.pcap`` with other names: ``names`` has the keys of
    :data:`HOSTILE` (Kafka strings may be ``bytes``, sent as they are; ``header_key``,
    ``record_value`` and ``record_json`` are ``str``), ``sni`` the TLS server name. The
    property test of the text outputs builds it with random names."""
    h = names
    s = kstring
    topic, topic2 = h["topic"], h["topic2"]
    c = Conversation()
    # a producer and a reader: Metadata, Produce, Fetch (record header key and value)
    c.connect(50420)
    cid = h["client_id"]
    c.request(50420, 3, 1, 1, cc.array([s(topic), s(topic2)]), client_id=cid)
    c.response(50420, 1, cc.array([cc.i32(1) + cc.string(cc.BROKER_IP) + cc.i32(9092)
                                   + cc.string(None)]) + cc.i32(1)
               + cc.array([cc.i16(0) + s(t) + cc.boolean(False) + cc.array([
                   cc.i16(0) + cc.i32(p) + cc.i32(1) + cc.array([cc.i32(1)])
                   + cc.array([cc.i32(1)]) for p in range(2)]) for t in (topic, topic2)]))
    batch, _ = cc.record_batch(0, [
        cc.rec(0, 1_700_000_000_000, b"key", h["record_value"].encode(),
               [(h["header_key"], b"header-value")]),
        cc.rec(1, 1_700_000_000_000, b"json", h["record_json"].encode())])
    # Produce v7 (acks=1), Fetch v11: cc.produce_request / fetch_request's layouts, the topic
    # a Kafka string that may be bytes
    c.request(50420, 0, 7, 2, cc.string(None) + cc.i16(1) + cc.i32(30000)
              + cc.array([s(topic) + cc.array([cc.i32(0) + cc.kbytes(batch)])]),
              client_id=cid)
    c.response(50420, 2, cc.array([s(topic) + cc.array([
        cc.i32(0) + cc.i16(0) + cc.i64(0) + cc.i64(-1) + cc.i64(0)])]) + cc.i32(0))
    c.request(50420, 1, 11, 3, cc.i32(-1) + cc.i32(500) + cc.i32(1) + cc.i32(52428800)
              + cc.i8(0) + cc.i32(0) + cc.i32(-1) + cc.array([s(topic) + cc.array([
                  cc.i32(0) + cc.i32(-1) + cc.i64(0) + cc.i64(-1) + cc.i32(1048576)])])
              + cc.array([]) + cc.string(""), client_id=cid)
    c.response(50420, 3, cc.i32(0) + cc.i16(0) + cc.i32(0) + cc.array([s(topic) + cc.array([
        cc.i32(0) + cc.i16(0) + cc.i64(10) + cc.i64(10) + cc.i64(0) + cc.array(None)
        + cc.i32(-1) + cc.kbytes(batch)])]))
    # a classic consumer group: FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
    # OffsetCommit, DescribeGroups
    c.connect(50421)
    cid = h["consumer_client_id"]
    group, member, instance, assignor = (h["group_id"], h["member_id"],
                                         h["group_instance_id"], h["assignor"])
    subscription = consumer_subscription([topic, topic2])
    assignment = consumer_assignment([(topic, [0]), (topic2, [0, 1])])
    c.request(50421, 10, 2, 1, s(group) + cc.i8(0), client_id=cid)
    c.response(50421, 1, cc.i32(0) + cc.i16(0) + cc.string(None) + cc.i32(1)
               + s(h["coordinator_host"]) + cc.i32(9092))
    c.request(50421, 11, 5, 2, s(group) + cc.i32(10_000) + cc.i32(30_000)
              + cc.string("") + s(instance) + cc.string("consumer")
              + cc.array([s(assignor) + cc.kbytes(subscription)]), client_id=cid)
    c.response(50421, 2, cc.i32(0) + cc.i16(0) + cc.i32(1) + s(assignor)
               + s(member) + s(member)
               + cc.array([s(member) + s(instance) + cc.kbytes(subscription)]))
    c.request(50421, 14, 3, 3, s(group) + cc.i32(1) + s(member)
              + s(instance) + cc.array([s(member) + cc.kbytes(assignment)]),
              client_id=cid)
    c.response(50421, 3, cc.i32(0) + cc.i16(0) + cc.kbytes(assignment))
    c.request(50421, 12, 3, 4, s(group) + cc.i32(1) + s(member)
              + s(instance), client_id=cid)
    c.response(50421, 4, cc.i32(0) + cc.i16(0))
    c.request(50421, 8, 7, 5, s(group) + cc.i32(1) + s(member)
              + s(instance) + cc.array([s(topic) + cc.array([
                  cc.i32(0) + cc.i64(1) + cc.i32(-1) + cc.string(None)])]), client_id=cid)
    c.response(50421, 5, cc.i32(0) + cc.array([s(topic)
                                               + cc.array([cc.i32(0) + cc.i16(0)])]))
    c.request(50421, 15, 4, 6, cc.array([s(group)]) + cc.boolean(False),
              client_id=cid)
    c.response(50421, 6, cc.i32(0) + cc.array([
        cc.i16(0) + s(group) + s(h["group_state"]) + cc.string("consumer")
        + s(assignor) + cc.array([
            s(member) + s(instance) + s(cid)
            + s(h["client_host"]) + cc.kbytes(subscription) + cc.kbytes(assignment)])
        + cc.i32(-2**31)]))
    # a TLS connection whose ClientHello names a hostile server (the tls_connection issue)
    conn = c.connect(50422)
    conn.send(True, tls_client_hello(sni))
    return c.bytes()


# =========================================================================== secrets

#: every secret the SASL regression captures carry (the secret-search test reads it)
SECRETS = {
    "sasl_scram_orphan.pcap": [b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="],
    "sasl_plain_api_key_99.pcap": [b"secret-password-99"],
    "sasl_plain_api_key_18.pcap": [b"secret-password-18"],
}


def sasl_handshake_v1(c: Conversation, port: int, corr: int) -> None:
    c.request(port, 17, 1, corr, cc.string("PLAIN"))
    c.response(port, corr, cc.i16(0) + cc.array([cc.string("PLAIN")]))


@regression("sasl_scram_orphan.pcap",
            "A SaslAuthenticate response carrying a SCRAM server-final message, its request "
            "not captured: the orphan's body, kept raw or decoded by guess, printed the "
            "server signature with default options.")
def sasl_scram_orphan() -> bytes:
    c = Conversation()
    c.connect(50410)
    [final] = SECRETS["sasl_scram_orphan.pcap"]
    c.response(50410, 4, cc.i16(0) + cc.string(None) + cc.kbytes(final) + cc.i64(0))
    c.request(50410, 3, 1, 5, cc.i32(0))                                  # Metadata v1
    c.response(50410, 5, cc.i32(0) + cc.i32(-1) + cc.i32(0))
    return c.bytes()


def _damaged_plain(api_key: int) -> bytes:
    c = Conversation()
    port = 50411 if api_key == 99 else 50412
    c.connect(port)
    sasl_handshake_v1(c, port, 1)
    [password] = SECRETS[f"sasl_plain_api_key_{api_key}.pcap"]
    token = b"\x00alice\x00" + password
    if api_key == 18:
        # SaslAuthenticate v2 (flexible) whose api_key byte reads 18 and version byte 3:
        # ApiVersions v3 reads the token as client_software_name
        c.request(port, 18, 3, 2, cc.compact_bytes(token) + cc.tagged(), header_version=2)
        c.response(port, 2, cc.i16(0) + cc.compact_string(None) + cc.compact_bytes(b"")
                   + cc.i64(0) + cc.tagged(), header_version=1)
    else:
        # SaslAuthenticate v1 whose api_key byte was damaged on the way to the capture
        c.request(port, api_key, 1, 2, cc.kbytes(token))
        c.response(port, 2, cc.i16(0) + cc.string(None) + cc.kbytes(b"") + cc.i64(0))
    return c.bytes()


@regression("sasl_plain_api_key_99.pcap",
            "A SaslAuthenticate v1 request carrying a PLAIN password, its api_key damaged to "
            "99 (unknown): the raw body printed the password in read --json and the exports.")
def sasl_plain_api_key_99() -> bytes:
    return _damaged_plain(99)


@regression("sasl_plain_api_key_18.pcap",
            "A SaslAuthenticate v2 request, its api_key damaged to 18 (ApiVersions, v3): the "
            "token decoded as client_software_name and printed the password.")
def sasl_plain_api_key_18() -> bytes:
    return _damaged_plain(18)


def write_captures(registry: dict[str, tuple[str, Callable[[], bytes]]], description: str,
                   out: Path, argv: list[str] | None = None) -> int:
    """The command line of a capture-writing script: ``[NAME...] [--list] [--out DIR]``
    writes the captures ``registry`` builds (name -> (what it holds, builder)). Returns the
    exit status."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("names", nargs="*", help="captures to write (default: all)")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--out", type=Path, default=out, help="output directory")
    args = ap.parse_args(argv)
    if args.list:
        for name, (what, _) in registry.items():
            print(f"{name}: {what}")
        return 0
    unknown = [n for n in args.names if n not in registry]
    if unknown:
        ap.error(f"unknown capture(s): {', '.join(unknown)}")
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.names or list(registry):
        data = registry[name][1]()
        (args.out / name).write_bytes(data)
        print(f"{name}: {len(data)} bytes")
    return 0


def main(argv: list[str] | None = None) -> int:
    return write_captures(REGRESSIONS, __doc__.split("\n\n")[0], OUT, argv)


if __name__ == "__main__":
    sys.exit(main())
