#!/usr/bin/env python3
"""Write the captures of ``captures/regressions/wireshark_*.pcap``: the input patterns behind
known failures of Wireshark's Kafka dissector (an endless loop, a snappy Produce that did not
decompress, a double free on damaged LZ4), so kafkasniff is checked on each of them.

Usage (no root needed, nothing is sent on a network)::

    .venv/bin/python captures/craft_wireshark_patterns.py            # every capture
    .venv/bin/python captures/craft_wireshark_patterns.py NAME...    # some of them
    .venv/bin/python captures/craft_wireshark_patterns.py --list     # names and contents

Each capture is small and deterministic (fixed times, client ports 50500-50599, sequence
numbers), built with the TCP conversations of ``craft_regressions.py`` and the encoders of
``craft_captures.py`` (neither imports anything from kafkasniff);
``tests/captures/test_wireshark_patterns.py`` says what kafkasniff must do with each. Being
under ``regressions/``, they are also inputs of the byte-accounting tests.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Callable

import craft_captures as cc
import craft_regressions as cr

OUT = cc.CAPTURES / "regressions"

#: name -> (what it holds, builder returning the file's bytes)
PATTERNS: dict[str, tuple[str, Callable[[], bytes]]] = {}


def pattern(name: str, what: str):
    """Register a builder of ``regressions/<name>``."""
    def register(fn: Callable[[], bytes]) -> Callable[[], bytes]:
        PATTERNS[name] = (what, fn)
        return fn
    return register


# =========================================================================== tagged fields

#: tagged-field counts declared with nothing (or far too little) after them
HUGE_COUNT = 2**31            # uvarint 80 80 80 80 08: a negative int32 to a C dissector
MILLION = 1_000_000
#: zero-length tagged fields actually present in the frames where they fit: tags 0..n-1
#: (3-4 bytes each) and all tag 0 (2 bytes each)
MANY_ASCENDING = 20_000
MANY_ZEROS = 50_000
HEADER_ZEROS = 20_000


def zero_length_fields(n: int, *, ascending: bool) -> bytes:
    """A tagged-field section of ``n`` fields of size 0: tags 0..n-1 (valid KIP-482), or
    every tag 0 (``n`` then ``2n`` zero bytes: tags must ascend, they do not)."""
    if ascending:
        return cc.uvarint(n) + b"".join(cc.uvarint(t) + b"\x00" for t in range(n))
    return cc.uvarint(n) + bytes(2 * n)


def api_versions_v3_request() -> bytes:
    return cc.api_versions_v3_request("wireshark-17811", "1.0")


def metadata_v9_request() -> bytes:
    """Metadata v9 body for topic ``wireshark`` (auto-create and authorized ops off)."""
    return (cc.compact_array([cc.compact_string("wireshark") + cc.tagged()])
            + cc.boolean(False) + cc.boolean(False) + cc.boolean(False) + cc.tagged())


def metadata_v9_response(tags: bytes | None = None) -> bytes:
    """Metadata v9 response body: broker 1, no topic; ``tags`` replaces the body's final
    tagged-field section."""
    broker = (cc.i32(1) + cc.compact_string("broker1.kafka.test") + cc.i32(cc.BROKER_PORT)
              + cc.compact_string(None) + cc.tagged())
    return (cc.i32(0) + cc.compact_array([broker]) + cc.compact_string("wireshark-cluster")
            + cc.i32(1) + cc.compact_array([]) + cc.i32(-2147483648)
            + (cc.tagged() if tags is None else tags))


def api_versions_v3_response(tags: bytes | None = None) -> bytes:
    """ApiVersions v3 response body (header v0); ``tags`` replaces its final tagged-field
    section (the features, tags 0-2, by default)."""
    body = cc.api_versions_response(3)
    if tags is None:
        return body
    keys = cc.compact_array([cc.i16(k) + cc.i16(lo) + cc.i16(hi) + cc.tagged()
                             for k, lo, hi in cc.API_RANGES])
    return cc.i16(0) + keys + cc.i32(0) + tags


def request_header_v2(api_key: int, version: int, corr: int, tags: bytes) -> bytes:
    """Request header v2 whose tagged-field section is ``tags``."""
    return cc.i16(api_key) + cc.i16(version) + cc.i32(corr) + cc.string("wireshark") + tags


def raw_request(c: cr.Conversation, port: int, payload: bytes) -> None:
    c.conns[port].send(True, cc.size_prefixed(payload))


def raw_response(c: cr.Conversation, port: int, payload: bytes) -> None:
    c.conns[port].send(False, cc.size_prefixed(payload), gap_ns=700_000)


def metadata_v9_exchange(c: cr.Conversation, port: int, corr: int) -> None:
    """A well-formed Metadata v9 exchange (request header v2, response header v1)."""
    c.request(port, 3, 9, corr, metadata_v9_request(), client_id="wireshark", header_version=2)
    c.response(port, corr, metadata_v9_response(), header_version=1)


@pattern("wireshark_17811_tagged_field_loop.pcap",
         "Wireshark issue #17811 (the Kafka dissector looped on a tagged-field section): "
         "flexible requests and responses whose tagged-field count is huge. Connection 50500: "
         "ApiVersions v3 request, header v2 declaring 2^31 tagged fields in a 45-byte payload. "
         "50501: Metadata v9 request, header v2 holding 20,000 zero-length tagged fields "
         "(tags 0..19,999: valid). 50502: ApiVersions v3 response whose body declares "
         "1,000,000 tagged fields in a 63-byte payload. 50503: Metadata v9 response whose body "
         "holds 50,000 zero-length tagged fields, every tag 0 (100,000 zero bytes). 50504: "
         "Metadata v9 response, header v1 declaring 2^31 tagged fields in a 9-byte payload. "
         "50505: Metadata v9 request, header v2 holding 20,000 zero-length tagged fields, "
         "every tag 0. Each connection then has a well-formed Metadata v9 exchange.")
def tagged_field_loop() -> bytes:
    c = cr.Conversation(offset_s=1000)
    for port in range(50500, 50506):
        c.connect(port)
    # 50500: request header, huge count, tiny frame
    raw_request(c, 50500, request_header_v2(18, 3, 1, cc.uvarint(HUGE_COUNT))
                + api_versions_v3_request())
    c.response(50500, 1, api_versions_v3_response())
    metadata_v9_exchange(c, 50500, 2)
    # 50501: request header, many zero-length fields that fit
    raw_request(c, 50501, request_header_v2(3, 9, 1, zero_length_fields(MANY_ASCENDING,
                                                                      ascending=True))
                + metadata_v9_request())
    c.response(50501, 1, metadata_v9_response(), header_version=1)
    metadata_v9_exchange(c, 50501, 2)
    # 50502: response body, huge count, tiny frame
    c.request(50502, 18, 3, 1, api_versions_v3_request(), client_id="wireshark",
              header_version=2)
    c.response(50502, 1, api_versions_v3_response(cc.uvarint(MILLION)))
    metadata_v9_exchange(c, 50502, 2)
    # 50503: response body, many zero-length fields that fit (all tag 0)
    c.request(50503, 3, 9, 1, metadata_v9_request(), client_id="wireshark", header_version=2)
    c.response(50503, 1, metadata_v9_response(zero_length_fields(MANY_ZEROS, ascending=False)),
               header_version=1)
    metadata_v9_exchange(c, 50503, 2)
    # 50504: response header v1, huge count, tiny frame (no body after it)
    c.request(50504, 3, 9, 1, metadata_v9_request(), client_id="wireshark", header_version=2)
    raw_response(c, 50504, cc.i32(1) + cc.uvarint(HUGE_COUNT))
    metadata_v9_exchange(c, 50504, 2)
    # 50505: request header, many zero-length fields that fit, all tag 0
    raw_request(c, 50505, request_header_v2(3, 9, 1, zero_length_fields(HEADER_ZEROS,
                                                                      ascending=False))
                + metadata_v9_request())
    c.response(50505, 1, metadata_v9_response(), header_version=1)
    metadata_v9_exchange(c, 50505, 2)
    return c.bytes()


# =========================================================================== snappy

def snappy_values(b: int) -> list[bytes]:
    """The values of the 4 records of snappy set ``b``: ``snappy-<b>-0..2`` and 40 x
    ``snappy-<b>-long-`` (560 bytes: several xerial blocks of 64 bytes)."""
    return [f"snappy-{b}-{i}".encode() for i in range(3)] + [f"snappy-{b}-long-".encode() * 40]


SNAPPY_TS = 1_704_153_600_000        # 2024-01-02T00:00:00Z


def snappy_batch(b: int, compress: Callable[[bytes], bytes]) -> bytes:
    """A magic 2 record batch, snappy (codec 2), of the records of :func:`snappy_values`."""
    recs = [cc.rec(i, SNAPPY_TS + i, f"k{i}".encode(), v) for i, v in enumerate(snappy_values(b))]
    data, _ = cc.record_batch(0, recs, codec=2, compress=compress)
    return data


def snappy_legacy(b: int, magic: int, codec: str) -> bytes:
    """A magic 0/1 message set: one snappy wrapper (``snappy-xerial`` or ``snappy-raw``)
    around the records of :func:`snappy_values` (Produce view: inner offsets 0..n-1)."""
    msgs = [(f"k{i}".encode(), v, SNAPPY_TS + i if magic == 1 else None)
            for i, v in enumerate(snappy_values(b))]
    data, _, _ = cc.LegacySet.build(magic, msgs, 0, codec=codec, wire_offsets="from_zero")
    return data


def produce(c: cr.Conversation, port: int, version: int, corr: int, records: bytes,
            topic: str) -> None:
    """A Produce request (acks=1, partition 0 carrying ``records``) and its response."""
    body = cc.produce_request(version, None, 1, [(topic, [(0, records)])])
    c.request(port, 0, version, corr, body, client_id="wireshark")
    c.response(port, corr, cc.produce_response(version, [(topic, [(0, 100 * corr)])]))


def snappy_produces() -> list[tuple[int, int, str, bytes]]:
    """(port, Produce version, topic, records) of the snappy capture, in order."""
    return [
        (50510, 7, "snappy-v2-xerial", snappy_batch(0, cc.snappy_xerial)),
        (50510, 7, "snappy-v2-xerial-blocks",
         snappy_batch(1, lambda d: cc.snappy_xerial(d, block_size=64))),
        (50510, 7, "snappy-v2-raw", snappy_batch(2, cc.snappy_raw)),
        (50511, 2, "snappy-m1-xerial", snappy_legacy(3, 1, "snappy-xerial")),
        (50511, 2, "snappy-m1-raw", snappy_legacy(4, 1, "snappy-raw")),
        (50512, 0, "snappy-m0-xerial", snappy_legacy(5, 0, "snappy-xerial")),
        (50512, 0, "snappy-m0-raw", snappy_legacy(6, 0, "snappy-raw")),
        (50513, 7, "snappy-bad-xerial", snappy_batch(7, xerial_block_past_end)),
        (50513, 7, "snappy-bad-raw", snappy_batch(8, raw_claims_1gib)),
    ]


def xerial_block_past_end(data: bytes) -> bytes:
    """xerial framing whose first block length says 1,000,000 (the block is shorter)."""
    framed = cc.snappy_xerial(data)
    return framed[:16] + cc.i32(1_000_000) + framed[20:]


def raw_claims_1gib(data: bytes) -> bytes:
    """A raw snappy block whose length preamble claims 1 GiB (the rest is the real block
    after its own preamble)."""
    block = cc.snappy_raw(data)
    pos = 0
    while block[pos] & 0x80:
        pos += 1
    return cc.uvarint(2**30) + block[pos + 1:]


@pattern("wireshark_19105_snappy_produce.pcap",
         "Wireshark issue #19105 (a snappy-compressed Produce request was not decompressed): "
         "Produce requests with snappy data in both framings, xerial (snappy-java) and raw "
         "block (librdkafka), each answered. Port 50510: Produce v7, magic 2 batches (xerial, "
         "xerial in 64-byte blocks, raw). 50511: Produce v2, magic 1 wrappers (xerial, raw). "
         "50512: Produce v0, magic 0 wrappers (xerial, raw). Every set holds 4 records, keys "
         "k0..k3, values snappy-<n>-0..2 and snappy-<n>-long- x 40 (n: 0..6 in this order). "
         "50513: Produce v7, two damaged snappy batches: an xerial block length of 1,000,000 "
         "in a 200-byte section, a raw block whose length preamble claims 1 GiB.")
def snappy_produce() -> bytes:
    c = cr.Conversation(offset_s=1100)
    corr = {}
    for port, version, topic, records in snappy_produces():
        if port not in c.conns:
            c.connect(port)
        corr[port] = corr.get(port, 0) + 1
        produce(c, port, version, corr[port], records, topic)
    return c.bytes()


# =========================================================================== lz4

LZ4_TS = 1_704_153_600_000
LZ4_VALUE = b"lz4-ok-"


def lz4_records(n: int, value: bytes) -> bytes:
    """The records section of a magic 2 batch: ``n`` records, value ``value + str(i)``."""
    return b"".join(cc.record_v2(i, i, None, value + str(i).encode(), []) for i in range(n))


def lz4_batch(frame: bytes, n: int, base_offset: int = 0) -> bytes:
    """A magic 2 lz4 (codec 3) batch of ``n`` records whose compressed section is ``frame``
    (CRC32C correct, so only the LZ4 frame is damaged)."""
    return cr.raw_batch(frame, n, codec=3, last_offset_delta=n - 1, base_offset=base_offset)


def _lz4_header(flg: int, bd: int, content: int | None = None) -> bytes:
    """LZ4 frame magic + descriptor + a correct header checksum."""
    desc = bytes([flg, bd]) + (struct.pack("<Q", content) if content is not None else b"")
    return struct.pack("<I", 0x184D2204) + desc + bytes([(cc.xxh32(desc) >> 8) & 0xFF])


def _lz4_block(data: bytes) -> bytes:
    import lz4.block

    return lz4.block.compress(data, store_size=False)


def lz4_damaged() -> list[tuple[str, bytes]]:
    """(name, LZ4 frame) of each malformed frame, in capture order. Each is damaged from a
    frame of 3 records of value ``lz4-bad-<i>`` (48 bytes), except the last: a two-block
    frame of one 70,000-byte record whose second block starts with a match reaching before
    the block (only ``wrong_header_checksum`` still decompresses)."""
    section = lz4_records(3, b"lz4-bad-")
    good = cc.lz4_frame(section)
    block = _lz4_block(section)
    two_blocks = lz4_records(1, b"x" * 70_000)             # over one 64 KiB block
    second_bad = bytearray(cc.lz4_frame(two_blocks))
    first = struct.unpack_from("<I", second_bad, 7)[0] & 0x7FFFFFFF
    at = 7 + 4 + first + 4                                    # the second block's data
    second_bad[at:at + 4] = b"\x0f\xff\xff\xff"               # a match before the output start
    return [
        ("bad_magic", b"\x05" + good[1:]),
        ("wrong_header_checksum", good[:6] + bytes([good[6] ^ 0xFF]) + good[7:]),
        ("truncated", good[:7] + struct.pack("<I", len(block) + 500) + block),
        ("oversize_block_size", good[:7] + struct.pack("<I", 0x7FFFFFF0) + block
         + struct.pack("<I", 0)),
        ("block_over_max", _lz4_header(0x60, 0x40) + struct.pack("<I", 0x80010001)
         + bytes(0x10001) + struct.pack("<I", 0)),
        ("content_size_lies", _lz4_header(0x68, 0x40, 1_000_000) + struct.pack("<I", len(block))
         + block + struct.pack("<I", 0)),
        ("second_block_damaged", bytes(second_bad)),
    ]


def lz4_legacy(magic: int, codec: str, value: bytes) -> bytes:
    """A magic 0/1 message set: one lz4 wrapper (``codec``: ``lz4`` or ``lz4-kafka3160``)
    around 2 messages of value ``value + "0"`` and ``value + "1"``."""
    msgs = [(None, value + str(i).encode(), LZ4_TS + i if magic == 1 else None)
            for i in range(2)]
    data, _, _ = cc.LegacySet.build(magic, msgs, 0, codec=codec, wire_offsets="from_zero")
    return data


def lz4_legacy_bad_magic() -> bytes:
    """A magic 1 lz4 wrapper whose LZ4 frame starts with a wrong magic number."""
    inner = cc.legacy_message(0, 1, None, b"lz4-legacy-bad-0", timestamp=LZ4_TS)
    frame = cc.lz4_frame(inner)
    return cc.legacy_message(0, 1, None, b"\x05" + frame[1:], attributes=3, timestamp=LZ4_TS)


def lz4_legacy_3160_truncated() -> bytes:
    """A magic 0 lz4 wrapper with the pre-0.10 header checksum (KAFKA-3160) whose block size
    claims 500 bytes more than the frame holds (no end mark)."""
    inner = cc.legacy_message(0, 0, None, b"lz4-m0-3160-cut-0")
    frame = cc.lz4_frame(inner, broken_header_checksum=True)
    size = struct.unpack_from("<I", frame, 7)[0]
    block = frame[11:11 + (size & 0x7FFFFFFF)]
    return cc.legacy_message(0, 0, None, frame[:7] + struct.pack("<I", size + 500) + block,
                             attributes=3)


@pattern("wireshark_cve_2020_17498_lz4.pcap",
         "CVE-2020-17498 (Wireshark's Kafka dissector freed a buffer twice when an LZ4 "
         "decompression failed): lz4 (codec 3) record data whose LZ4 frame is damaged. Port "
         "50520: seven Produce v7 requests, one damaged magic 2 batch each (bad magic, wrong "
         "header checksum, truncated block, block size 0x7FFFFFF0, a stored block over the "
         "64 KiB maximum, content size 1,000,000 for 48 bytes, second block damaged), then one "
         "with a valid batch; each answered. 50521: a Fetch v11 response whose partition 0 "
         "holds the seven damaged batches then a valid one (offsets 0-23). 50522: Produce v0/v2 "
         "with magic 0 and magic 1 lz4 wrappers whose header checksum is the pre-0.10 one "
         "(KAFKA-3160), a valid magic 1 one, a magic 1 one with a bad frame magic and a "
         "KAFKA-3160 magic 0 one whose block runs past the frame.")
def lz4_damage() -> bytes:
    c = cr.Conversation(offset_s=1200)
    c.connect(50520)
    damaged = lz4_damaged()
    for corr, (name, frame) in enumerate(damaged, start=1):
        cr.produce_exchange(c, 50520, corr, [(0, lz4_batch(frame, 3))], topic=f"lz4-{name}")
    cr.produce_exchange(c, 50520, len(damaged) + 1,
                        [(0, lz4_batch(cc.lz4_frame(lz4_records(3, LZ4_VALUE)), 3))],
                        topic="lz4-valid")
    c.connect(50521)
    batches = [lz4_batch(frame, 3, base_offset=3 * i) for i, (_, frame) in enumerate(damaged)]
    batches.append(lz4_batch(cc.lz4_frame(lz4_records(3, LZ4_VALUE)), 3,
                             base_offset=3 * len(damaged)))
    cr.fetch_exchange(c, 50521, 1, [(0, b"".join(batches))], topic="lz4-fetch")
    c.connect(50522)
    produce(c, 50522, 0, 1, lz4_legacy(0, "lz4-kafka3160", b"lz4-m0-kafka3160-"), "lz4-m0-3160")
    produce(c, 50522, 2, 2, lz4_legacy(1, "lz4-kafka3160", b"lz4-m1-kafka3160-"), "lz4-m1-3160")
    produce(c, 50522, 2, 3, lz4_legacy(1, "lz4", b"lz4-m1-ok-"), "lz4-m1")
    produce(c, 50522, 2, 4, lz4_legacy_bad_magic(), "lz4-m1-bad-magic")
    produce(c, 50522, 0, 5, lz4_legacy_3160_truncated(), "lz4-m0-3160-truncated")
    return c.bytes()


def main(argv: list[str] | None = None) -> int:
    return cr.write_captures(PATTERNS, __doc__.split("\n\n")[0], OUT, argv)


if __name__ == "__main__":
    sys.exit(main())
