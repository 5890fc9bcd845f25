#!/usr/bin/env python3
"""Write crafted, byte-exact Kafka captures for traffic no available client produces.

Usage (no root needed, nothing is sent on a network)::

    .venv/bin/python captures/craft_captures.py                 # every crafted capture
    .venv/bin/python captures/craft_captures.py crafted_sasl    # some of them
    .venv/bin/python captures/craft_captures.py --list
    .venv/bin/python captures/craft_captures.py --check         # tshark / tcpdump read-back
    .venv/bin/python captures/craft_captures.py --out /tmp/caps # elsewhere

Each capture is a set of complete TCP conversations (3-way handshake, data segments with
consistent seq/ack numbers and ACKs, FIN/ACK close) as Ethernet/IPv4/TCP frames in a
nanosecond pcap, with a ``NAME.truth.json`` listing exactly what was put inside: every
request and response (api key, version, correlation id, header versions), every record
(offsets, keys, values, headers, timestamps, codec, batch fields), the secrets that must
never reach any output (``secrets``) and the problems a decoder must report
(``expected_issues``).

The Kafka bytes come from the small encoder in this file, written from the JSON specs in
``/work/shared/kafka-protocol/messages/`` and the message-format documentation; it imports
nothing from kafkasniff on purpose (an independent second implementation). Packets are
built with dpkt (IPv4/TCP checksums) and written by this file (exact ns timestamps); checksums
come from the crc32c and xxhash packages; the truth files' JSON layout from ``_common.py``
(shared with ``make_captures.py``).

Everything is deterministic: fixed timestamps (from 2024-01-01T00:00:00Z), fixed ports,
sequence numbers, nonces and seeds. Re-running gives byte-identical files as long as the
compression libraries (zlib, cramjam snappy, python-lz4 block, zstandard) produce the same
output for the same input and level.

Captures:

* ``crafted_sasl``: SASL PLAIN, SCRAM-SHA-256 (real RFC 5802/7677 exchange), SaslHandshake
  v0 followed by raw (unframed-by-Kafka) SASL tokens (KIP-43), OAUTHBEARER, GSSAPI-looking
  tokens, a failed PLAIN login; broker port 9092.
* ``crafted_records``: Produce requests and Fetch responses with message sets magic 0/1
  (gzip, xerial snappy, raw snappy, lz4 incl. the pre-0.10 broken header checksum) and
  record batches magic 2 (every codec, headers, null key/value, idempotent/transactional
  batches, COMMIT/ABORT control batches, a truncated last batch, a wrong CRC, zstd with and
  without content size); port 9092.
* ``crafted_kafka07``: the Kafka 0.7 wire format (PRODUCE, FETCH, MULTIFETCH, MULTIPRODUCE,
  OFFSETS; no correlation ids, no api versions); port 9092.
* ``crafted_throttle``: quota throttling: Produce v7/v9 and Fetch v11/v12 responses with
  non-zero ``throttle_time_ms`` (and some with 0), KIP-219 timing; port 9092.

``--out DIR`` writes the files into ``DIR`` instead of ``captures/``.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import hashlib
import hmac
import json
import random
import shutil
import struct
import subprocess
import sys
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import crc32c as crc32c_lib
import dpkt
import xxhash

from _common import TRUTH_FORMAT, dump_truth, text_or_none

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = ROOT / "captures"
BASE_TS_NS = 1_704_067_200_000_000_000  # 2024-01-01T00:00:00Z
BASE_TS_MS = BASE_TS_NS // 1_000_000
BROKER_PORT = 9092
BROKER_IP = "192.0.2.1"  # TEST-NET-1 (RFC 5737)
CLIENT_IP = "192.0.2.10"
BROKER_MAC = bytes.fromhex("020000000001")
CLIENT_MAC = bytes.fromhex("020000000010")
MSS = 1448

API_NAMES = {0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 17: "SaslHandshake",
             18: "ApiVersions", 36: "SaslAuthenticate"}
CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


# =========================================================================== primitives


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def u32(v: int) -> bytes:
    return struct.pack(">I", v)


def boolean(v: bool) -> bytes:
    return b"\x01" if v else b"\x00"


def uvarint(v: int) -> bytes:
    if v < 0:
        raise ValueError(v)
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def varint(v: int) -> bytes:
    """Zig-zag varint (record fields, Kafka's ``varint``/``varlong``)."""
    return uvarint((v << 1) ^ (v >> 63))


def string(s: str | None) -> bytes:
    if s is None:
        return i16(-1)
    b = s.encode()
    return i16(len(b)) + b


def kbytes(b: bytes | None) -> bytes:
    if b is None:
        return i32(-1)
    return i32(len(b)) + b


def array(items: list[bytes] | None) -> bytes:
    if items is None:
        return i32(-1)
    return i32(len(items)) + b"".join(items)


def compact_string(s: str | None) -> bytes:
    if s is None:
        return uvarint(0)
    b = s.encode()
    return uvarint(len(b) + 1) + b


def compact_bytes(b: bytes | None) -> bytes:
    if b is None:
        return uvarint(0)
    return uvarint(len(b) + 1) + b


def compact_array(items: list[bytes] | None) -> bytes:
    if items is None:
        return uvarint(0)
    return uvarint(len(items) + 1) + b"".join(items)


def tagged(fields: dict[int, bytes] | None = None) -> bytes:
    """A tagged-field section: count, then (tag, size, data) in tag order."""
    fields = fields or {}
    out = uvarint(len(fields))
    for tag in sorted(fields):
        out += uvarint(tag) + uvarint(len(fields[tag])) + fields[tag]
    return out


def request_header(api_key: int, version: int, corr: int, client_id: str | None,
                   header_version: int) -> bytes:
    """Request header v0 (no client id), v1 (client id), v2 (v1 + tagged fields).

    The client id keeps its int16 length in v2 (it is not a compact string).
    """
    h = i16(api_key) + i16(version) + i32(corr)
    if header_version >= 1:
        h += string(client_id)
    if header_version >= 2:
        h += tagged()
    return h


def response_header(corr: int, header_version: int) -> bytes:
    return i32(corr) + (tagged() if header_version >= 1 else b"")


def size_prefixed(payload: bytes) -> bytes:
    return i32(len(payload)) + payload


def hex_or_none(b: bytes | None) -> str | None:
    return None if b is None else b.hex()


# =========================================================================== checksums


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), as in record batches v2 (the crc32c package)."""
    return crc32c_lib.crc32c(data)


def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32, used by LZ4 frames for their header checksum (the xxhash package)."""
    return xxhash.xxh32_intdigest(data, seed)


# =========================================================================== codecs


def gzip_compress(data: bytes) -> bytes:
    """One gzip member, level 6, mtime 0 (deterministic)."""
    return gzip.compress(data, compresslevel=6, mtime=0)


def snappy_raw(data: bytes) -> bytes:
    """Raw snappy block format (what librdkafka writes)."""
    import cramjam

    return bytes(cramjam.snappy.compress_raw(data))


def snappy_xerial(data: bytes, block_size: int = 32 * 1024) -> bytes:
    """xerial snappy-java framing (Java clients, kafka-python): 16-byte header, then
    int32-length-prefixed raw snappy blocks of at most ``block_size`` input bytes."""
    out = b"\x82SNAPPY\x00" + i32(1) + i32(1)
    for i in range(0, len(data), block_size):
        block = snappy_raw(data[i:i + block_size])
        out += i32(len(block)) + block
    return out


def lz4_frame(data: bytes, *, broken_header_checksum: bool = False,
              content_size: bool = False) -> bytes:
    """An LZ4 frame: independent 64 KiB blocks, no block/content checksums.

    ``broken_header_checksum``: the header checksum is computed over the magic number and
    the descriptor instead of the descriptor alone, as Kafka's KafkaLZ4BlockOutputStream
    did before 0.10 (KAFKA-3160; magic 0/1 message sets written by 0.8/0.9 clients).
    """
    import lz4.block

    magic = struct.pack("<I", 0x184D2204)
    flg = 0x40 | 0x20 | (0x08 if content_size else 0)  # version 01, block independence
    bd = 0x40  # 64 KiB max block size
    desc = bytes([flg, bd]) + (struct.pack("<Q", len(data)) if content_size else b"")
    hc = (xxh32(magic + desc if broken_header_checksum else desc) >> 8) & 0xFF
    out = magic + desc + bytes([hc])
    for i in range(0, len(data), 64 * 1024):
        chunk = data[i:i + 64 * 1024]
        block = lz4.block.compress(chunk, store_size=False)
        if len(block) >= len(chunk):
            out += struct.pack("<I", len(chunk) | 0x80000000) + chunk
        else:
            out += struct.pack("<I", len(block)) + block
    return out + struct.pack("<I", 0)  # end mark


def zstd_compress(data: bytes, *, content_size: bool = True) -> bytes:
    import zstandard

    return zstandard.ZstdCompressor(level=3, write_content_size=content_size,
                                    write_checksum=False).compress(data)


# =========================================================================== message sets


def legacy_message(offset: int, magic: int, key: bytes | None, value: bytes | None, *,
                   attributes: int = 0, timestamp: int | None = None) -> bytes:
    """One message (magic 0 or 1) with its log entry header (offset, size)."""
    body = i8(magic) + i8(attributes)
    if magic == 1:
        body += i64(timestamp if timestamp is not None else -1)
    body += kbytes(key) + kbytes(value)
    msg = u32(zlib.crc32(body)) + body
    return i64(offset) + i32(len(msg)) + msg


def varbytes(b: bytes | None) -> bytes:
    return varint(-1) if b is None else varint(len(b)) + b


def record_v2(offset_delta: int, timestamp_delta: int, key: bytes | None,
              value: bytes | None, headers: list[tuple[str, bytes | None]]) -> bytes:
    body = i8(0) + varint(timestamp_delta) + varint(offset_delta) + varbytes(key) \
        + varbytes(value) + varint(len(headers))
    for name, hv in headers:
        body += varbytes(name.encode()) + varbytes(hv)
    return varint(len(body)) + body


def record_batch(base_offset: int, records: list[dict[str, Any]], *, codec: int = 0,
                 compress: Callable[[bytes], bytes] | None = None,
                 producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
                 transactional: bool = False, control: bool = False,
                 log_append_time: int | None = None, partition_leader_epoch: int = 0,
                 wrong_crc: bool = False) -> tuple[bytes, dict[str, Any]]:
    """A record batch (magic 2). ``records``: dicts with offset_delta, timestamp_ms, key,
    value, headers. Returns the bytes and a description for the truth file."""
    base_ts = min(r["timestamp_ms"] for r in records)
    max_ts = max(r["timestamp_ms"] for r in records)
    raw = b"".join(record_v2(r["offset_delta"], r["timestamp_ms"] - base_ts, r["key"],
                             r["value"], r["headers"]) for r in records)
    payload = compress(raw) if compress else raw
    attrs = codec | (0x08 if log_append_time is not None else 0) \
        | (0x10 if transactional else 0) | (0x20 if control else 0)
    last_delta = max(r["offset_delta"] for r in records)
    after_crc = (i16(attrs) + i32(last_delta) + i64(base_ts)
                 + i64(log_append_time if log_append_time is not None else max_ts)
                 + i64(producer_id) + i16(producer_epoch) + i32(base_sequence)
                 + i32(len(records)) + payload)
    crc = crc32c(after_crc)
    wire_crc = crc ^ 0x5A5A5A5A if wrong_crc else crc
    batch_length = 4 + 1 + 4 + len(after_crc)
    data = i64(base_offset) + i32(batch_length) + i32(partition_leader_epoch) + i8(2) \
        + u32(wire_crc) + after_crc
    info = {"base_offset": base_offset, "batch_length": batch_length,
            "partition_leader_epoch": partition_leader_epoch, "magic": 2,
            "crc_on_wire": wire_crc, "crc_computed": crc, "crc_ok": not wrong_crc,
            "attributes": attrs, "compression": CODECS[codec],
            "timestamp_type": "LogAppendTime" if log_append_time is not None else "CreateTime",
            "is_transactional": transactional, "is_control": control,
            "last_offset_delta": last_delta, "base_timestamp": base_ts,
            "max_timestamp": log_append_time if log_append_time is not None else max_ts,
            "producer_id": producer_id, "producer_epoch": producer_epoch,
            "base_sequence": base_sequence, "record_count": len(records),
            "records_bytes_uncompressed": len(raw), "records_bytes_on_wire": len(payload),
            "total_bytes": len(data)}
    return data, info


def control_record(kind: str, coordinator_epoch: int) -> dict[str, Any]:
    """A transaction marker: key = version 0 + type (0 ABORT, 1 COMMIT), value =
    version 0 + coordinator epoch (ControlRecordTypeSchema / EndTxnMarker)."""
    return {"key": i16(0) + i16({"ABORT": 0, "COMMIT": 1}[kind]),
            "value": i16(0) + i32(coordinator_epoch), "headers": [],
            "control": {"type": kind, "coordinator_epoch": coordinator_epoch}}


# =========================================================================== pcap / TCP


class Pcap:
    """Frames with exact ns timestamps, written as a nanosecond pcap (link type Ethernet)."""

    def __init__(self) -> None:
        self.frames: list[tuple[int, bytes]] = []

    def add(self, ts_ns: int, frame: bytes) -> None:
        self.frames.append((ts_ns, frame))

    def write(self, path: Path) -> None:
        out = [struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1)]
        for ts, frame in sorted(self.frames, key=lambda f: f[0]):
            out.append(struct.pack("<IIII", ts // 1_000_000_000, ts % 1_000_000_000,
                                   len(frame), len(frame)))
            out.append(frame)
        path.write_bytes(b"".join(out))


class Clock:
    def __init__(self, start_ns: int) -> None:
        self.t = start_ns

    def tick(self, ns: int) -> int:
        self.t += ns
        return self.t


class TcpConn:
    """One TCP connection between CLIENT_IP:client_port and BROKER_IP:server_port."""

    def __init__(self, pcap: Pcap, clock: Clock, client_port: int,
                 server_port: int = BROKER_PORT, isn: int = 1000) -> None:
        self.pcap, self.clock = pcap, clock
        self.cport, self.sport = client_port, server_port
        self.seq = {True: isn * 1_000_003 % 2**32, False: (isn * 7_777_777 + 12345) % 2**32}
        self.ip_id = {True: 0x1000 + isn % 1000, False: 0x8000 + isn % 1000}
        self.packets = 0
        self.bytes = {True: 0, False: 0}

    def _emit(self, from_client: bool, flags: int, payload: bytes = b"",
              opts: bytes = b"", gap_ns: int = 20_000) -> None:
        src, dst = (CLIENT_IP, BROKER_IP) if from_client else (BROKER_IP, CLIENT_IP)
        sport, dport = (self.cport, self.sport) if from_client else (self.sport, self.cport)
        ack = self.seq[not from_client] if flags & dpkt.tcp.TH_ACK else 0
        tcp = dpkt.tcp.TCP(sport=sport, dport=dport, seq=self.seq[from_client], ack=ack,
                           flags=flags, win=65535 if flags & dpkt.tcp.TH_SYN else 2048,
                           opts=opts, data=payload)
        assert len(opts) % 4 == 0
        tcp.off = (20 + len(opts)) // 4
        ip = dpkt.ip.IP(src=_inet(src), dst=_inet(dst), p=dpkt.ip.IP_PROTO_TCP, ttl=64,
                        id=self.ip_id[from_client], df=1, data=tcp)
        ip.len = 20 + len(bytes(tcp))
        self.ip_id[from_client] = (self.ip_id[from_client] + 1) & 0xFFFF
        eth = dpkt.ethernet.Ethernet(src=CLIENT_MAC if from_client else BROKER_MAC,
                                     dst=BROKER_MAC if from_client else CLIENT_MAC,
                                     type=dpkt.ethernet.ETH_TYPE_IP, data=ip)
        self.pcap.add(self.clock.tick(gap_ns), bytes(eth))
        self.packets += 1
        self.seq[from_client] = (self.seq[from_client] + len(payload)
                                 + (1 if flags & (dpkt.tcp.TH_SYN | dpkt.tcp.TH_FIN) else 0)
                                 ) % 2**32

    def open(self) -> None:
        syn_opts = (b"\x02\x04" + struct.pack(">H", MSS + 12)  # MSS
                    + b"\x01\x01\x04\x02"  # NOP, NOP, SACK permitted
                    + b"\x01\x03\x03\x07")  # NOP, window scale 7
        self._emit(True, dpkt.tcp.TH_SYN, opts=syn_opts, gap_ns=1_000_000)
        self._emit(False, dpkt.tcp.TH_SYN | dpkt.tcp.TH_ACK, opts=syn_opts, gap_ns=40_000)
        self._emit(True, dpkt.tcp.TH_ACK, gap_ns=30_000)

    def send(self, from_client: bool, data: bytes, gap_ns: int = 200_000) -> None:
        """``data`` in MSS-sized segments (PSH on the last), then one ACK from the peer."""
        self.bytes[from_client] += len(data)
        chunks = [data[i:i + MSS] for i in range(0, len(data), MSS)] or [b""]
        for n, chunk in enumerate(chunks):
            flags = dpkt.tcp.TH_ACK | (dpkt.tcp.TH_PUSH if n == len(chunks) - 1 else 0)
            self._emit(from_client, flags, chunk, gap_ns=gap_ns if n == 0 else 5_000)
        self._emit(not from_client, dpkt.tcp.TH_ACK, gap_ns=25_000)

    def close(self, by_client: bool = True) -> None:
        fa = dpkt.tcp.TH_FIN | dpkt.tcp.TH_ACK
        self._emit(by_client, fa, gap_ns=500_000)
        self._emit(not by_client, fa, gap_ns=40_000)
        self._emit(by_client, dpkt.tcp.TH_ACK, gap_ns=30_000)


def _inet(addr: str) -> bytes:
    return bytes(int(x) for x in addr.split("."))


# =========================================================================== capture model


class Capture:
    """A crafted capture being built: pcap frames plus its truth."""

    def __init__(self, name: str, description: str, start_offset_s: int) -> None:
        self.name = name
        self.pcap = Pcap()
        self.clock = Clock(BASE_TS_NS + start_offset_s * 1_000_000_000)
        self.conns: dict[str, TcpConn] = {}
        self.conn_info: list[dict[str, Any]] = []
        self.truth: dict[str, Any] = {
            "format": TRUTH_FORMAT, "scenario": name, "description": description,
            "generated_by": "captures/craft_captures.py", "crafted": True,
            "pcap": f"{name}.pcap",
            "link_type": "Ethernet", "timestamp_precision": "ns",
            "broker_ip": BROKER_IP, "client_ip": CLIENT_IP,
            "broker_ports": [BROKER_PORT], "connections": [], "requests": [],
            "records": [], "secrets": [], "expected_issues": [], "notes": [],
        }
        self.corr: dict[str, int] = {}

    def connect(self, label: str, client_port: int, purpose: str) -> TcpConn:
        conn = TcpConn(self.pcap, self.clock, client_port, isn=client_port)
        conn.open()
        self.conns[label] = conn
        self.conn_info.append({"connection": label, "client_ip": CLIENT_IP,
                               "client_port": client_port, "broker_ip": BROKER_IP,
                               "broker_port": BROKER_PORT, "purpose": purpose,
                               "opened_ts_ns": self.clock.t})
        return conn

    def close(self, label: str, by_client: bool = True) -> None:
        conn = self.conns[label]
        conn.close(by_client)
        for c in self.conn_info:
            if c["connection"] == label:
                c.update(closed_by="client" if by_client else "broker",
                         closed_ts_ns=self.clock.t, packets=conn.packets,
                         client_to_broker_bytes=conn.bytes[True],
                         broker_to_client_bytes=conn.bytes[False])

    def next_corr(self, label: str) -> int:
        self.corr[label] = self.corr.get(label, 0) + 1
        return self.corr[label]

    def exchange(self, label: str, api_key: int, version: int, client_id: str | None,
                 body: bytes, response_body: bytes | None, *, req_hv: int, resp_hv: int,
                 summary: dict[str, Any] | None = None, latency_ns: int = 800_000,
                 corr: int | None = None, throttle_time_ms: int | None = None
                 ) -> dict[str, Any]:
        """Send one request (and its response unless ``response_body`` is None).

        ``throttle_time_ms``: when given, recorded as the response's ``throttle_time_ms``
        in the truth (the caller encoded the same value in ``response_body``)."""
        conn = self.conns[label]
        corr = self.next_corr(label) if corr is None else corr
        req = size_prefixed(request_header(api_key, version, corr, client_id, req_hv) + body)
        conn.send(True, req)
        entry: dict[str, Any] = {
            "connection": label, "client_port": conn.cport, "broker_port": conn.sport,
            "api_key": api_key, "api_name": API_NAMES.get(api_key, f"ApiKey{api_key}"),
            "api_version": version, "correlation_id": corr, "client_id": client_id,
            "request_header_version": req_hv,
            "response_header_version": resp_hv if response_body is not None else None,
            "expects_response": response_body is not None,
            "request_frame_bytes": len(req), "request_ts_ns": self.clock.t,
            "response": None}
        if response_body is not None:
            resp = size_prefixed(response_header(corr, resp_hv) + response_body)
            conn.send(False, resp, gap_ns=latency_ns)
            entry["response"] = {"response_frame_bytes": len(resp),
                                 "response_ts_ns": self.clock.t}
            if throttle_time_ms is not None:
                entry["response"]["throttle_time_ms"] = throttle_time_ms
        if summary:
            entry["content"] = summary
        self.truth["requests"].append(entry)
        return entry

    def secret(self, kind: str, value: bytes, where: str) -> None:
        self.truth["secrets"].append({"kind": kind, "where": where, "hex": value.hex(),
                                      "text": text_or_none(value)})

    def finish(self, out_dir: Path = CAPTURES) -> tuple[Path, Path]:
        """Write ``out_dir/NAME.pcap`` and ``out_dir/NAME.truth.json``; return both paths."""
        self.truth["connections"] = self.conn_info
        path = out_dir / f"{self.name}.pcap"
        self.pcap.write(path)
        self.truth["pcap_packets"] = len(self.pcap.frames)
        self.truth["pcap_bytes"] = path.stat().st_size
        tpath = out_dir / f"{self.name}.truth.json"
        tpath.write_text(dump_truth(self.truth))
        return path, tpath


# =========================================================================== shared messages


def api_versions_v3_request(software: str, version: str) -> bytes:
    return compact_string(software) + compact_string(version) + tagged()


API_RANGES = [(0, 3, 11), (1, 4, 17), (2, 1, 9), (3, 0, 12), (17, 0, 1), (18, 0, 4),
              (36, 0, 2)]


def api_versions_response(version: int) -> bytes:
    """ApiVersions response body (always after a v0 response header, KIP-511)."""
    if version >= 3:
        keys = compact_array([i16(k) + i16(lo) + i16(hi) + tagged() for k, lo, hi in API_RANGES])
        features = {
            0: compact_array([compact_string("metadata.version") + i16(1) + i16(20)
                              + tagged()]),
            1: i64(42),
            2: compact_array([compact_string("metadata.version") + i16(20) + i16(20)
                              + tagged()]),
        }
        return i16(0) + keys + i32(0) + tagged(features)
    body = i16(0) + array([i16(k) + i16(lo) + i16(hi) for k, lo, hi in API_RANGES])
    return body + (i32(0) if version >= 1 else b"")


def api_versions_summary(version: int) -> dict[str, Any]:
    s: dict[str, Any] = {"error_code": 0, "api_keys": [list(r) for r in API_RANGES],
                         "throttle_time_ms": 0 if version >= 1 else None}
    if version >= 3:
        s["tagged_fields"] = {"supported_features (tag 0)": [["metadata.version", 1, 20]],
                              "finalized_features_epoch (tag 1)": 42,
                              "finalized_features (tag 2)": [["metadata.version", 20, 20]]}
    return s


# =========================================================================== crafted_sasl


def api_versions_v3(cap: Capture, label: str, client_id: str) -> None:
    """ApiVersions v3 as current clients open a connection (request header v2, response
    header v0, KIP-511)."""
    cap.exchange(label, 18, 3, client_id, api_versions_v3_request("crafted-client", "1.0.0"),
                 api_versions_response(3), req_hv=2, resp_hv=0,
                 summary={"client_software_name": "crafted-client",
                          "client_software_version": "1.0.0", **api_versions_summary(3)})


def sasl_handshake(cap: Capture, label: str, version: int, mechanism: str,
                   client_id: str) -> None:
    enabled = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI"]
    cap.exchange(label, 17, version, client_id, string(mechanism),
                 i16(0) + array([string(m) for m in enabled]), req_hv=1, resp_hv=0,
                 summary={"mechanism": mechanism, "response_error_code": 0,
                          "response_mechanisms": enabled})


def sasl_authenticate(cap: Capture, label: str, client_id: str, auth: bytes,
                      resp_auth: bytes, *, error_code: int = 0,
                      error_message: str | None = None, session_lifetime_ms: int = 0,
                      note: str = "") -> dict[str, Any]:
    """SaslAuthenticate v2 (flexible: request header v2, response header v1)."""
    body = compact_bytes(auth) + tagged()
    resp = i16(error_code) + compact_string(error_message) + compact_bytes(resp_auth) \
        + i64(session_lifetime_ms) + tagged()
    return cap.exchange(label, 36, 2, client_id, body, resp, req_hv=2, resp_hv=1, summary={
        "auth_bytes_len": len(auth), "response_error_code": error_code,
        "response_error_message": error_message, "response_auth_bytes_len": len(resp_auth),
        "response_auth_bytes_text": text_or_none(resp_auth),
        "session_lifetime_ms": session_lifetime_ms, "note": note})


def metadata_v9(cap: Capture, label: str, client_id: str, topic: str, *,
                partitions: int = 1, throttle_time_ms: int | None = None) -> None:
    """Metadata v9 for ``topic`` (``partitions`` partitions, all led by broker 1, leader
    epoch 5); ``throttle_time_ms`` (None: 0, not recorded in the truth)."""
    req = compact_array([compact_string(topic) + tagged()]) + boolean(False) \
        + boolean(False) + boolean(False) + tagged()
    broker = i32(1) + compact_string("broker1.kafka.test") + i32(BROKER_PORT) \
        + compact_string(None) + tagged()
    parts = [i16(0) + i32(p) + i32(1) + i32(5) + compact_array([i32(1)])
             + compact_array([i32(1)]) + compact_array([]) + tagged() for p in range(partitions)]
    tp = i16(0) + compact_string(topic) + boolean(False) + compact_array(parts) \
        + i32(-2147483648) + tagged()
    resp = i32(throttle_time_ms or 0) + compact_array([broker]) \
        + compact_string("crafted-cluster-0001") + i32(1) + compact_array([tp]) \
        + i32(-2147483648) + tagged()
    cap.exchange(label, 3, 9, client_id, req, resp, req_hv=2, resp_hv=1, summary={
        "topics": [topic], "allow_auto_topic_creation": False,
        "response_brokers": [[1, "broker1.kafka.test", BROKER_PORT, None]],
        "response_cluster_id": "crafted-cluster-0001", "response_controller_id": 1,
        "response_topics": [{"name": topic, "partitions": [
            {"partition": p, "leader": 1, "leader_epoch": 5, "replicas": [1], "isr": [1]}
            for p in range(partitions)]}]}, throttle_time_ms=throttle_time_ms)


def scram_exchange(user: str, password: str, client_nonce: str, server_nonce: str,
                   salt: bytes, iterations: int) -> dict[str, bytes]:
    """SCRAM-SHA-256 messages (RFC 5802, RFC 7677) with the real proof and signature."""
    b64 = base64.b64encode
    client_first_bare = f"n={user},r={client_nonce}".encode()
    client_first = b"n,," + client_first_bare
    nonce = client_nonce + server_nonce
    server_first = f"r={nonce},s={b64(salt).decode()},i={iterations}".encode()
    without_proof = f"c={b64(b'n,,').decode()},r={nonce}".encode()
    auth_message = client_first_bare + b"," + server_first + b"," + without_proof
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    stored_key = hashlib.sha256(client_key).digest()
    client_sig = hmac.new(stored_key, auth_message, hashlib.sha256).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, client_sig))
    server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()
    server_sig = hmac.new(server_key, auth_message, hashlib.sha256).digest()
    # self-check: the server's verification of the proof
    recovered = bytes(a ^ b for a, b in zip(proof, client_sig))
    assert hashlib.sha256(recovered).digest() == stored_key
    return {"client_first": client_first, "server_first": server_first,
            "client_final": without_proof + b",p=" + b64(proof),
            "server_final": b"v=" + b64(server_sig), "proof_b64": b64(proof),
            "server_signature_b64": b64(server_sig), "salted_password": salted,
            "auth_message": auth_message}


def jwt_hs256(header: dict[str, Any], claims: dict[str, Any], key: bytes) -> bytes:
    def b64url(b: bytes) -> bytes:
        return base64.urlsafe_b64encode(b).rstrip(b"=")

    signing_input = b64url(json.dumps(header, separators=(",", ":")).encode()) + b"." \
        + b64url(json.dumps(claims, separators=(",", ":")).encode())
    sig = hmac.new(key, signing_input, hashlib.sha256).digest()
    return signing_input + b"." + b64url(sig)


def der_length(n: int) -> bytes:
    if n < 0x80:
        return bytes([n])
    b = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(b)]) + b


KRB5_OID = bytes.fromhex("06092a864886f712010202")  # 1.2.840.113554.1.2.2


def gss_initial_token(tok_id: bytes, inner: bytes) -> bytes:
    """RFC 2743 InitialContextToken framing: 0x60, DER length, mech OID, token."""
    body = KRB5_OID + tok_id + inner
    return b"\x60" + der_length(len(body)) + body


def build_crafted_sasl() -> Capture:
    cap = Capture("crafted_sasl",
                  "Crafted SASL authentications to a broker on port 9092, one TCP connection "
                  "each: A PLAIN (SaslHandshake v1 + SaslAuthenticate v2) then Metadata v9; "
                  "B SCRAM-SHA-256 with a real RFC 5802/7677 exchange in two "
                  "SaslAuthenticate v2 rounds; C SaslHandshake v0 (PLAIN) followed by the "
                  "SASL token as a raw size-prefixed frame (not a Kafka request, KIP-43) and "
                  "the broker's empty raw answer, then ApiVersions v0; D OAUTHBEARER with an "
                  "RFC 7628 client response carrying a JWT; E GSSAPI-looking tokens (0x60 "
                  "ASN.1 framing, Kerberos OID, random bytes) in three rounds; F PLAIN with a "
                  "wrong password, answered SASL_AUTHENTICATION_FAILED (58), then the broker "
                  "closes. A, B, D, E, F open with ApiVersions v3 like current clients.",
                  start_offset_s=0)
    rng = random.Random(20240101)

    # ---- A: PLAIN, then Metadata
    cid = "crafted-sasl-plain"
    cap.connect("A", 50001, "SASL/PLAIN via SaslAuthenticate v2, then Metadata v9")
    api_versions_v3(cap, "A", cid)
    sasl_handshake(cap, "A", 1, "PLAIN", cid)
    plain = b"\x00alice\x00alice-secret-pw"
    sasl_authenticate(cap, "A", cid, plain, b"", session_lifetime_ms=3_600_000,
                      note="PLAIN message: authzid empty, authcid alice, password")
    cap.secret("password", b"alice-secret-pw", "A: SaslAuthenticate correlation 3 (PLAIN)")
    cap.secret("sasl_plain_message", plain, "A: SaslAuthenticate correlation 3 auth_bytes")
    metadata_v9(cap, "A", cid, "crafted-sasl-topic")
    cap.close("A")

    # ---- B: SCRAM-SHA-256
    cid = "crafted-sasl-scram"
    cap.connect("B", 50002, "SASL/SCRAM-SHA-256, two SaslAuthenticate v2 rounds")
    api_versions_v3(cap, "B", cid)
    sasl_handshake(cap, "B", 1, "SCRAM-SHA-256", cid)
    scram = scram_exchange("bob", "bob-scram-pw", "fyko+d2lbbFgONRv9qkxdawL",
                           "3rfcNHYJY1ZVvWVs7j", bytes.fromhex("5b2f6c6e8a3c4d1e9f0a7b6c"),
                           4096)
    sasl_authenticate(cap, "B", cid, scram["client_first"], scram["server_first"],
                      note="client-first-message / server-first-message")
    sasl_authenticate(cap, "B", cid, scram["client_final"], scram["server_final"],
                      session_lifetime_ms=3_600_000,
                      note="client-final-message (proof) / server-final-message (signature)")
    cap.secret("password", b"bob-scram-pw", "B: never on the wire; proof derived from it")
    cap.secret("scram_client_proof", scram["proof_b64"],
               "B: SaslAuthenticate correlation 4, after 'p='")
    cap.secret("scram_server_signature", scram["server_signature_b64"],
               "B: SaslAuthenticate correlation 4 response, after 'v='")
    cap.secret("scram_client_final_message", scram["client_final"],
               "B: SaslAuthenticate correlation 4 auth_bytes")
    cap.truth["scram"] = {
        "mechanism": "SCRAM-SHA-256", "user": "bob", "password_in_secrets": True,
        "client_nonce": "fyko+d2lbbFgONRv9qkxdawL", "server_nonce": "3rfcNHYJY1ZVvWVs7j",
        "salt_hex": "5b2f6c6e8a3c4d1e9f0a7b6c", "iterations": 4096,
        "client_first_message": scram["client_first"].decode(),
        "server_first_message": scram["server_first"].decode(),
        "client_final_message_without_proof": scram["client_final"].split(b",p=")[0].decode(),
        "note": "client-final and server-final are listed under secrets only"}
    cap.close("B")

    # ---- C: SaslHandshake v0 + raw token (KIP-43), then ApiVersions v0
    cid = "crafted-sasl-v0"
    cap.connect("C", 50003, "SaslHandshake v0, then raw size-prefixed SASL/PLAIN token "
                            "(no Kafka header) and the broker's raw empty answer, then "
                            "ApiVersions v0")
    sasl_handshake(cap, "C", 0, "PLAIN", cid)
    raw_token = b"\x00carol\x00carol-secret-pw"
    conn = cap.conns["C"]
    conn.send(True, size_prefixed(raw_token))
    t_req = cap.clock.t
    conn.send(False, size_prefixed(b""), gap_ns=600_000)
    cap.truth["raw_sasl_frames"] = [
        {"connection": "C", "direction": "client_to_broker", "after": "SaslHandshake v0 "
         "response (correlation 1)", "frame_bytes": 4 + len(raw_token),
         "size_field": len(raw_token), "ts_ns": t_req,
         "content": "PLAIN token (listed under secrets)"},
        {"connection": "C", "direction": "broker_to_client", "frame_bytes": 4,
         "size_field": 0, "ts_ns": cap.clock.t,
         "content": "empty token: authentication succeeded"}]
    cap.secret("password", b"carol-secret-pw", "C: raw SASL frame after SaslHandshake v0")
    cap.secret("sasl_plain_message", raw_token, "C: raw SASL frame after SaslHandshake v0")
    cap.exchange("C", 18, 0, cid, b"", api_versions_response(0), req_hv=1, resp_hv=0,
                 summary=api_versions_summary(0))
    cap.close("C")

    # ---- D: OAUTHBEARER
    cid = "crafted-sasl-oauth"
    cap.connect("D", 50004, "SASL/OAUTHBEARER (RFC 7628) via SaslAuthenticate v2")
    api_versions_v3(cap, "D", cid)
    sasl_handshake(cap, "D", 1, "OAUTHBEARER", cid)
    jwt = jwt_hs256({"alg": "HS256", "typ": "JWT"},
                    {"sub": "dave", "iss": "https://idp.kafka.test", "aud": "kafka",
                     "scope": "kafka.produce kafka.consume", "iat": 1704067200,
                     "exp": 1704070800}, b"crafted-jwt-signing-key")
    oauth = b"n,,\x01auth=Bearer " + jwt + b"\x01\x01"
    sasl_authenticate(cap, "D", cid, oauth, b"", session_lifetime_ms=3_540_000,
                      note="GS2 header n,, then kvpairs auth=Bearer <JWT>, ^A-separated")
    cap.secret("oauth_bearer_token", jwt, "D: SaslAuthenticate correlation 3 auth_bytes")
    cap.secret("oauth_jwt_signature", jwt.rsplit(b".", 1)[1],
               "D: last part of the JWT")
    cap.close("D")

    # ---- E: GSSAPI-looking tokens
    cid = "crafted-sasl-gssapi"
    cap.connect("E", 50005, "SASL/GSSAPI-looking tokens (random bytes in GSS framing)")
    api_versions_v3(cap, "E", cid)
    sasl_handshake(cap, "E", 1, "GSSAPI", cid)
    ap_req = gss_initial_token(b"\x01\x00", bytes(rng.getrandbits(8) for _ in range(600)))
    ap_rep = gss_initial_token(b"\x02\x00", bytes(rng.getrandbits(8) for _ in range(96)))
    wrap_srv = b"\x05\x04\x01\xff" + bytes(rng.getrandbits(8) for _ in range(44))
    wrap_cli = b"\x05\x04\x00\xff" + bytes(rng.getrandbits(8) for _ in range(52))
    sasl_authenticate(cap, "E", cid, ap_req, ap_rep,
                      note="AP-REQ-like initial context token / AP-REP-like answer")
    sasl_authenticate(cap, "E", cid, b"", wrap_srv,
                      note="empty client token / server wrap token (security layer offer)")
    sasl_authenticate(cap, "E", cid, wrap_cli, b"", session_lifetime_ms=36_000_000,
                      note="client wrap token (security layer choice) / empty: done")
    for what, tok in [("ap_req", ap_req), ("ap_rep", ap_rep), ("server_wrap", wrap_srv),
                      ("client_wrap", wrap_cli)]:
        cap.secret(f"gssapi_token_{what}", tok, "E: SaslAuthenticate auth_bytes")
    cap.close("E")

    # ---- F: failed PLAIN
    cid = "crafted-sasl-badpw"
    cap.connect("F", 50006, "SASL/PLAIN with a wrong password: SASL_AUTHENTICATION_FAILED, "
                            "broker closes")
    api_versions_v3(cap, "F", cid)
    sasl_handshake(cap, "F", 1, "PLAIN", cid)
    bad = b"\x00mallory\x00not-the-password"
    sasl_authenticate(cap, "F", cid, bad, b"", error_code=58,
                      error_message="Authentication failed: Invalid username or password",
                      note="error 58 SASL_AUTHENTICATION_FAILED")
    cap.secret("password", b"not-the-password", "F: SaslAuthenticate correlation 3 (PLAIN)")
    cap.secret("sasl_plain_message", bad, "F: SaslAuthenticate correlation 3 auth_bytes")
    cap.close("F", by_client=False)

    cap.truth["notes"] += [
        "Header versions follow the specs: SaslHandshake v0/v1 is never flexible (request "
        "header v1, response header v0); SaslAuthenticate v2 is flexible (request header v2 "
        "with an empty tagged-field section, client_id still int16-length; response header "
        "v1); ApiVersions v3 request header v2 but response header v0 (KIP-511); Metadata "
        "v9 flexible (v2/v1).",
        "Connection C: after SaslHandshake v0 the next client frame is the raw SASL token "
        "(int32 length + token, no api key/correlation id) and the broker answers with a raw "
        "int32-length token (here length 0). A decoder must not read them as Kafka "
        "requests/responses. They are listed in raw_sasl_frames, not in requests.",
        "secrets: every string in it (hex/text) must not appear in any decoder output, in "
        "any encoding (raw, hex, base64 of the raw bytes); kinds: passwords, PLAIN messages, "
        "SCRAM client proof / server signature / client-final message, OAuth JWT, GSSAPI "
        "tokens. bob's password never crosses the wire (SCRAM); it is listed so a test can "
        "check it does not appear either.",
        "The SCRAM values are a real, verifiable exchange (salted password = PBKDF2-HMAC-"
        "SHA-256(bob-scram-pw, salt, 4096)); GSSAPI tokens are random bytes in GSS-API "
        "framing, not real Kerberos.",
    ]
    return cap


# =========================================================================== crafted_records


def rec(offset_delta: int, ts: int, key: bytes | None, value: bytes | None,
        headers: list[tuple[str, bytes | None]] | None = None) -> dict[str, Any]:
    return {"offset_delta": offset_delta, "timestamp_ms": ts, "key": key, "value": value,
            "headers": headers or []}


def record_truth(carried: dict[str, Any], topic: str, partition: int, offset: int | None,
                 key: bytes | None, value: bytes | None,
                 headers: list[tuple[str, bytes | None]], timestamp_ms: int | None,
                 timestamp_type: str | None, magic: int, compression: str,
                 **extra: Any) -> dict[str, Any]:
    return {"carried_in": carried, "topic": topic, "partition": partition, "offset": offset,
            "key_hex": hex_or_none(key), "key_text": text_or_none(key),
            "value_hex": hex_or_none(value), "value_text": text_or_none(value),
            "headers": [[n, hex_or_none(v)] for n, v in headers],
            "timestamp_ms": timestamp_ms, "timestamp_type": timestamp_type,
            "magic": magic, "compression": compression, **extra}


class LegacySet:
    """Builds a magic 0/1 message set (plain or one compressed wrapper) + its truth."""

    CODEC_FN: dict[str, tuple[int, Callable[[bytes], bytes]]] = {
        "gzip": (1, gzip_compress),
        "snappy-xerial": (2, snappy_xerial),
        "snappy-raw": (2, snappy_raw),
        "lz4": (3, lambda d: lz4_frame(d)),
        "lz4-kafka3160": (3, lambda d: lz4_frame(d, broken_header_checksum=True)),
    }

    @staticmethod
    def build(magic: int, msgs: list[tuple[bytes | None, bytes | None, int | None]],
              first_offset: int, *, codec: str = "none", wire_offsets: str = "absolute",
              log_append_time: int | None = None) -> tuple[bytes, list[dict[str, Any]],
                                                             dict[str, Any]]:
        """``msgs``: (key, value, timestamp). ``first_offset``: absolute offset of msgs[0].

        wire_offsets: "absolute" (broker view: fetch responses, old Produce clients that
        write the real offsets anyway) or "from_zero" (Produce requests: 0..n-1).
        For a magic 1 compressed wrapper the inner offsets are always relative 0..n-1 and
        the wrapper offset is the absolute (or, from_zero, n-1) offset of the last one
        (KIP-31); for magic 0 the inner offsets are absolute (or 0..n-1).
        """
        n = len(msgs)
        info: dict[str, Any] = {"magic": magic, "codec": codec, "message_count": n}
        recs: list[dict[str, Any]] = []
        if codec == "none":
            out = b""
            for i, (k, v, ts) in enumerate(msgs):
                off = first_offset + i if wire_offsets == "absolute" else i
                out += legacy_message(off, magic, k, v, timestamp=ts)
                recs.append({"key": k, "value": v, "timestamp_ms": ts if magic == 1 else None,
                             "timestamp_type": "CreateTime" if magic == 1 else None,
                             "offset": first_offset + i, "wire_offset": off})
            info["wrapper"] = None
            return out, recs, info
        codec_id, fn = LegacySet.CODEC_FN[codec]
        inner = b""
        for i, (k, v, ts) in enumerate(msgs):
            if magic == 1:
                off = i  # KIP-31: relative inner offsets
            else:
                off = first_offset + i if wire_offsets == "absolute" else i
            inner += legacy_message(off, magic, k, v, timestamp=ts)
            lat = log_append_time is not None
            recs.append({"key": k, "value": v,
                         "timestamp_ms": (log_append_time if lat else ts) if magic == 1
                         else None,
                         "timestamp_type": ("LogAppendTime" if lat else "CreateTime")
                         if magic == 1 else None,
                         "offset": first_offset + i, "wire_offset": off})
        compressed = fn(inner)
        wrapper_off = first_offset + n - 1 if wire_offsets == "absolute" else n - 1
        attrs = codec_id | (0x08 if log_append_time is not None else 0)
        wrapper_ts = None
        if magic == 1:
            wrapper_ts = log_append_time if log_append_time is not None else \
                max(ts for _, _, ts in msgs if ts is not None)
        out = legacy_message(wrapper_off, magic, None, compressed, attributes=attrs,
                             timestamp=wrapper_ts)
        info["wrapper"] = {"offset": wrapper_off, "attributes": attrs,
                           "timestamp": wrapper_ts,
                           "timestamp_type": None if magic == 0 else
                           ("LogAppendTime" if log_append_time is not None else "CreateTime"),
                           "compressed_bytes": len(compressed),
                           "uncompressed_bytes": len(inner),
                           "inner_offsets": [r["wire_offset"] for r in recs]}
        if codec == "lz4-kafka3160":
            info["wrapper"]["lz4_header_checksum"] = \
                "computed over magic+descriptor (KAFKA-3160), not the descriptor alone"
        return out, recs, info


def produce_request(version: int, transactional_id: str | None, acks: int,
                    topics: list[tuple[str, list[tuple[int, bytes]]]]) -> bytes:
    flex = version >= 9
    if flex:
        parts = lambda ps: compact_array([i32(p) + compact_bytes(r) + tagged() for p, r in ps])  # noqa: E731
        tdata = compact_array([compact_string(t) + parts(ps) + tagged() for t, ps in topics])
        body = compact_string(transactional_id) + i16(acks) + i32(30000) + tdata + tagged()
    else:
        tdata = array([string(t) + array([i32(p) + kbytes(r) for p, r in ps])
                       for t, ps in topics])
        body = (string(transactional_id) if version >= 3 else b"") + i16(acks) \
            + i32(30000) + tdata
    return body


def produce_response(version: int, topics: list[tuple[str, list[tuple[int, int]]]],
                     log_append_time: int = -1, *, throttle_time_ms: int = 0) -> bytes:
    """``topics``: (name, [(partition, base_offset)]), all error 0; ``log_append_time`` ms
    (-1: CreateTime topic); ``throttle_time_ms`` (v1+) the quota delay the broker reports."""
    assert version >= 1 or throttle_time_ms == 0
    flex = version >= 9

    def part(p: int, base: int) -> bytes:
        b = i32(p) + i16(0) + i64(base)
        if version >= 2:
            b += i64(log_append_time)
        if version >= 5:
            b += i64(0)  # log start offset
        if version >= 8:
            b += (compact_array([]) + compact_string(None)) if flex else \
                (array([]) + string(None))
        if flex:
            b += tagged()
        return b

    if flex:
        body = compact_array([compact_string(t) + compact_array([part(p, o) for p, o in ps])
                              + tagged() for t, ps in topics])
        return body + i32(throttle_time_ms) + tagged()
    body = array([string(t) + array([part(p, o) for p, o in ps]) for t, ps in topics])
    return body + (i32(throttle_time_ms) if version >= 1 else b"")


def fetch_request(version: int, topics: list[tuple[str, list[tuple[int, int]]]], *,
                  isolation: int = 0, max_wait: int = 500) -> bytes:
    """``topics``: (name, [(partition, fetch_offset)]); ``max_wait`` ms. Versions 0-12
    (v12 is flexible; v13+ name topics by id)."""
    assert version <= 12
    flex = version >= 12
    arr, st = (compact_array, compact_string) if flex else (array, string)
    tags = tagged() if flex else b""
    body = i32(-1) + i32(max_wait) + i32(1)
    if version >= 3:
        body += i32(52428800)
    if version >= 4:
        body += i8(isolation)
    if version >= 7:
        body += i32(0) + i32(-1)

    def part(p: int, off: int) -> bytes:
        b = i32(p)
        if version >= 9:
            b += i32(-1)  # current leader epoch
        b += i64(off)
        if version >= 12:
            b += i32(-1)  # last fetched epoch
        if version >= 5:
            b += i64(-1)  # log start offset (followers only)
        return b + i32(1048576) + tags

    body += arr([st(t) + arr([part(p, o) for p, o in ps]) + tags for t, ps in topics])
    if version >= 7:
        body += arr([])  # forgotten topics
    if version >= 11:
        body += st("")  # rack id
    return body + tags


def fetch_response(version: int,
                   topics: list[tuple[str, list[dict[str, Any]]]], *,
                   throttle_time_ms: int = 0) -> bytes:
    """Partitions: dicts with partition, high_watermark, last_stable_offset,
    aborted (list of (producer_id, first_offset)) and records (bytes). Versions 0-12 (v12
    flexible, no tagged partition fields); ``throttle_time_ms`` (v1+) the quota delay."""
    assert version <= 12 and (version >= 1 or throttle_time_ms == 0)
    flex = version >= 12
    arr, st = (compact_array, compact_string) if flex else (array, string)
    tags = tagged() if flex else b""
    body = i32(throttle_time_ms) if version >= 1 else b""
    if version >= 7:
        body += i16(0) + i32(0)

    def part(d: dict[str, Any]) -> bytes:
        b = i32(d["partition"]) + i16(d.get("error_code", 0)) + i64(d["high_watermark"])
        if version >= 4:
            b += i64(d.get("last_stable_offset", d["high_watermark"]))
        if version >= 5:
            b += i64(0)
        if version >= 4:
            aborted = d.get("aborted")
            b += arr(None if aborted is None else
                     [i64(pid) + i64(first) + tags for pid, first in aborted])
        if version >= 11:
            b += i32(-1)  # preferred read replica
        return b + (compact_bytes(d["records"]) if flex else kbytes(d["records"])) + tags

    return body + arr([st(t) + arr([part(d) for d in ps]) + tags for t, ps in topics]) + tags


def build_crafted_records() -> Capture:
    cap = Capture("crafted_records",
                  "Crafted record data on port 9092. Connection P0: Produce v0 with magic 0 "
                  "message sets (plain, gzip, xerial snappy, lz4 with the pre-0.10 broken "
                  "header checksum). P1: Produce v2 with magic 1 (plain, gzip, raw snappy, "
                  "lz4 frame; compressed wrappers with relative inner offsets, KIP-31). P2: "
                  "ApiVersions v3, Produce v3 with magic 2 batches for every codec (none, "
                  "gzip, raw snappy, xerial snappy, lz4, zstd with and without content size; "
                  "headers incl. null value and duplicate names, null key, null value), an "
                  "idempotent batch, a transactional Produce v3 and a flexible Produce v9. "
                  "F: Fetch v0 (magic 0 sets), Fetch v2 (magic 1 sets, one LogAppendTime "
                  "wrapper), Fetch v4 read_committed (transactional batches, COMMIT and "
                  "ABORT control batches with coordinator epoch, aborted-transactions list, a "
                  "truncated last batch), Fetch v4 with a batch whose CRC is wrong, Fetch v11 "
                  "(zstd without content size).",
                  start_offset_s=3600)
    cap.truth["topics"] = {}
    t0 = BASE_TS_MS + 3_600_000
    text = lambda s: s.encode()  # noqa: E731
    lorem = ("the quick brown fox jumps over the lazy dog; " * 6).encode()

    def add_records(carried: dict[str, Any], topic: str, partition: int,
                    recs: list[dict[str, Any]], magic: int, codec: str,
                    batch: dict[str, Any] | None = None, **extra: Any) -> None:
        for r in recs:
            e = record_truth(carried, topic, partition, r["offset"], r["key"], r["value"],
                             r.get("headers", []), r["timestamp_ms"], r["timestamp_type"],
                             magic, codec, **extra)
            if "wire_offset" in r:
                e["wire_offset"] = r["wire_offset"]
            if "offset_delta" in r:
                e["offset_delta"] = r["offset_delta"]
            if r.get("control"):
                e["control"] = r["control"]
            if batch is not None:
                e["batch"] = {k: batch[k] for k in (
                    "base_offset", "producer_id", "producer_epoch", "base_sequence",
                    "is_transactional", "is_control", "partition_leader_epoch",
                    "crc_ok")}
            cap.truth["records"].append(e)

    def v2_batch(base_offset: int, items: list[dict[str, Any]], codec: str,
                 **kw: Any) -> tuple[bytes, list[dict[str, Any]], dict[str, Any]]:
        codec_map = {"none": (0, None), "gzip": (1, gzip_compress),
                     "snappy-raw": (2, snappy_raw), "snappy-xerial": (2, snappy_xerial),
                     "lz4": (3, lambda d: lz4_frame(d)),
                     "zstd": (4, lambda d: zstd_compress(d, content_size=True)),
                     "zstd-no-content-size": (4, lambda d: zstd_compress(
                         d, content_size=False))}
        cid, fn = codec_map[codec]
        data, info = record_batch(base_offset, items, codec=cid, compress=fn, **kw)
        info["codec_variant"] = codec
        lat = kw.get("log_append_time")
        recs = [{**it, "offset": base_offset + it["offset_delta"],
                 "timestamp_ms": lat if lat is not None else it["timestamp_ms"],
                 "timestamp_type": "LogAppendTime" if lat is not None else "CreateTime"}
                for it in items]
        return data, recs, info

    def next_carrier(label: str, api_name: str, version: int) -> tuple[int, dict[str, Any]]:
        """The next correlation id on ``label`` and the ``carried_in`` of the records in
        that exchange (Produce requests, Fetch responses)."""
        corr = cap.next_corr(label)
        return corr, {"connection": label, "api_name": api_name, "api_version": version,
                      "correlation_id": corr,
                      "direction": "request" if api_name == "Produce" else "response"}

    batches_truth: list[dict[str, Any]] = []
    cap.truth["batches"] = batches_truth

    # ------------------------------------------------------------------ P0: Produce v0
    cap.connect("P0", 50101, "0.8/0.9-era producer: Produce v0, magic 0 message sets")
    topic = "crafted-m0"
    cap.truth["topics"][topic] = 4
    m0 = {
        0: ("none", [(text("m0-k0"), text("magic 0, plain, record 0"), None),
                     (None, text("magic 0, plain, null key"), None),
                     (text("m0-k2"), None, None)]),
        1: ("gzip", [(text(f"m0-gz-{i}"), text(f"magic 0 gzip {i} ") + lorem, None)
                     for i in range(3)]),
        2: ("snappy-xerial", [(text(f"m0-sx-{i}"), text(f"magic 0 xerial snappy {i} ")
                               + lorem, None) for i in range(3)]),
        3: ("lz4-kafka3160", [(text(f"m0-lz-{i}"), text(f"magic 0 lz4 (KAFKA-3160) {i} ")
                               + lorem, None) for i in range(3)]),
    }
    corr, carried = next_carrier("P0", "Produce", 0)
    parts = []
    stored0: dict[int, tuple[bytes, list[dict[str, Any]], dict[str, Any]]] = {}
    for p, (codec, msgs) in m0.items():
        data, recs, info = LegacySet.build(0, msgs, 0, codec=codec, wire_offsets="from_zero")
        parts.append((p, data))
        add_records(carried, topic, p, recs, 0, codec.split("-")[0],
                    codec_variant=codec, offset_source="produce response base_offset")
        batches_truth.append({"carried_in": carried, "topic": topic, "partition": p, **info})
        stored0[p] = LegacySet.build(0, msgs, 0, codec=codec, wire_offsets="absolute")
    cap.exchange("P0", 0, 0, "crafted-producer-v0", produce_request(0, None, 1, [(topic, parts)]),
                 produce_response(0, [(topic, [(p, 0) for p in m0])]), req_hv=1, resp_hv=0,
                 corr=corr, summary={"acks": 1, "timeout_ms": 30000,
                                     "partitions": {str(p): c for p, (c, _) in m0.items()},
                                     "response_base_offsets": {str(p): 0 for p in m0}})
    cap.close("P0")

    # ------------------------------------------------------------------ P1: Produce v2
    cap.connect("P1", 50102, "0.10-era producer: Produce v2, magic 1 message sets")
    topic = "crafted-m1"
    cap.truth["topics"][topic] = 4
    m1 = {
        0: ("none", [(text("m1-k0"), text("magic 1, plain, record 0"), t0 + 1),
                     (None, text("magic 1, plain, null key"), t0 + 2)]),
        1: ("gzip", [(text(f"m1-gz-{i}"), text(f"magic 1 gzip {i} ") + lorem, t0 + 10 + i)
                     for i in range(3)]),
        2: ("snappy-raw", [(text(f"m1-sr-{i}"), text(f"magic 1 raw snappy {i} ") + lorem,
                            t0 + 20 + i) for i in range(3)]),
        3: ("lz4", [(text(f"m1-lz-{i}"), text(f"magic 1 lz4 frame {i} ") + lorem, t0 + 30 + i)
                    for i in range(3)]),
    }
    base1 = {0: 100, 1: 200, 2: 300, 3: 400}  # existing log: offsets the broker assigns
    corr, carried = next_carrier("P1", "Produce", 2)
    parts = []
    for p, (codec, msgs) in m1.items():
        data, recs, info = LegacySet.build(1, msgs, base1[p], codec=codec,
                                           wire_offsets="from_zero")
        parts.append((p, data))
        add_records(carried, topic, p, recs, 1, codec.split("-")[0], codec_variant=codec,
                    offset_source="produce response base_offset")
        batches_truth.append({"carried_in": carried, "topic": topic, "partition": p, **info})
    cap.exchange("P1", 0, 2, "crafted-producer-v2",
                 produce_request(2, None, -1, [(topic, parts)]),
                 produce_response(2, [(topic, [(p, base1[p]) for p in m1])]), req_hv=1,
                 resp_hv=0, corr=corr,
                 summary={"acks": -1, "partitions": {str(p): c for p, (c, _) in m1.items()},
                          "response_base_offsets": {str(p): base1[p] for p in m1},
                          "response_log_append_time_ms": -1})
    cap.close("P1")

    # ------------------------------------------------------------------ P2: magic 2
    cap.connect("P2", 50103, "current producer: ApiVersions v3, Produce v3 / v9, magic 2")
    cap.exchange("P2", 18, 3, "crafted-producer-v3",
                 api_versions_v3_request("crafted-client", "1.0.0"), api_versions_response(3),
                 req_hv=2, resp_hv=0, summary=api_versions_summary(3))
    topic = "crafted-v2"
    cap.truth["topics"][topic] = 8
    hdrs = [("trace-id", b"trace-0001"), ("null-header", None), ("dup", b"first"),
            ("dup", b"second"), ("bin", b"\x00\x01\xfe\xff")]
    plain_items = [rec(0, t0 + 100, text("v2-k0"), text("magic 2 plain record 0"), hdrs),
                   rec(1, t0 + 101, None, text("magic 2 plain, null key"), [("k", b"")]),
                   rec(2, t0 + 105, text("v2-k2"), None, [("tombstone", b"yes")]),
                   rec(3, t0 + 99, text("v2-k3"), b"", [])]  # empty value, earlier ts
    codec_parts = ["none", "gzip", "snappy-raw", "snappy-xerial", "lz4", "zstd",
                   "zstd-no-content-size"]
    corr, carried = next_carrier("P2", "Produce", 3)
    parts = []
    stored2: dict[int, tuple[bytes, list[dict[str, Any]], dict[str, Any]]] = {}
    for p, codec in enumerate(codec_parts):
        items = plain_items if codec == "none" else [
            rec(i, t0 + 200 + 10 * p + i, text(f"v2-{codec}-{i}"),
                text(f"magic 2 {codec} record {i} ") + lorem, [("codec", codec.encode())])
            for i in range(3)]
        data, recs, info = v2_batch(0, items, codec)
        for r in recs:
            r["offset"] = 10 * p + r["offset_delta"]  # broker-assigned base 10*p
        parts.append((p, data))
        add_records(carried, topic, p, recs, 2, codec.split("-")[0], batch=info,
                    codec_variant=codec, offset_source="produce response base_offset")
        batches_truth.append({"carried_in": carried, "topic": topic, "partition": p, **info})
        stored2[p] = v2_batch(10 * p, items, codec)
    # partition 7: idempotent batch (producer id, epoch, base sequence), lz4
    idem_items = [rec(i, t0 + 300 + i, text(f"idem-{i}"), text(f"idempotent record {i}"),
                      [("seq", str(5 + i).encode())]) for i in range(2)]
    data, recs, info = v2_batch(0, idem_items, "lz4", producer_id=1001, producer_epoch=0,
                                base_sequence=5)
    for r in recs:
        r["offset"] = 70 + r["offset_delta"]
    parts.append((7, data))
    add_records(carried, topic, 7, recs, 2, "lz4", batch=info, codec_variant="lz4",
                offset_source="produce response base_offset", sequence_base=5)
    batches_truth.append({"carried_in": carried, "topic": topic, "partition": 7, **info})
    cap.exchange("P2", 0, 3, "crafted-producer-v3", produce_request(3, None, -1, [(topic, parts)]),
                 produce_response(3, [(topic, [(p, 10 * p) for p in range(8)])], t0 + 500),
                 req_hv=1, resp_hv=0, corr=corr,
                 summary={"acks": -1, "transactional_id": None,
                          "partitions": {**{str(p): c for p, c in enumerate(codec_parts)},
                                         "7": "lz4 idempotent (pid 1001, epoch 0, seq 5)"},
                          "response_base_offsets": {str(p): 10 * p for p in range(8)},
                          "response_log_append_time_ms": t0 + 500})

    # transactional Produce v3
    ttopic = "crafted-txn"
    cap.truth["topics"][ttopic] = 1
    corr, carried = next_carrier("P2", "Produce", 3)
    txn_items = [rec(i, t0 + 400 + i, text(f"txn1-{i}"), text(f"committed transaction record {i}"),
                     [("txn", b"1")]) for i in range(2)]
    data, recs, info = v2_batch(0, txn_items, "none", producer_id=4000, producer_epoch=2,
                                base_sequence=0, transactional=True)
    add_records(carried, ttopic, 0, recs, 2, "none", batch=info, codec_variant="none",
                offset_source="produce response base_offset", transaction="committed")
    batches_truth.append({"carried_in": carried, "topic": ttopic, "partition": 0, **info})
    cap.exchange("P2", 0, 3, "crafted-producer-v3",
                 produce_request(3, "crafted-tx", -1, [(ttopic, [(0, data)])]),
                 produce_response(3, [(ttopic, [(0, 0)])]), req_hv=1, resp_hv=0, corr=corr,
                 summary={"acks": -1, "transactional_id": "crafted-tx",
                          "producer_id": 4000, "producer_epoch": 2,
                          "response_base_offsets": {"0": 0}})

    # flexible Produce v9 (compact records), zstd
    corr, carried = next_carrier("P2", "Produce", 9)
    v9_items = [rec(i, t0 + 600 + i, text(f"v9-{i}"), text(f"flexible produce v9 record {i} ")
                    + lorem, [("v", b"9")]) for i in range(3)]
    data, recs, info = v2_batch(0, v9_items, "zstd")
    for r in recs:
        r["offset"] = 4 + r["offset_delta"]
    add_records(carried, topic, 0, recs, 2, "zstd", batch=info, codec_variant="zstd",
                offset_source="produce response base_offset")
    batches_truth.append({"carried_in": carried, "topic": topic, "partition": 0, **info})
    cap.exchange("P2", 0, 9, "crafted-producer-v3",
                 produce_request(9, None, -1, [(topic, [(0, data)])]),
                 produce_response(9, [(topic, [(0, 4)])]), req_hv=2, resp_hv=1, corr=corr,
                 summary={"acks": -1, "response_base_offsets": {"0": 4}})
    cap.close("P2")

    # ------------------------------------------------------------------ F: Fetch
    cap.connect("F", 50104, "consumer: Fetch v0, v2, v4 (read_committed), v4 (bad CRC), v11")
    cid = "crafted-consumer"

    # Fetch v0: magic 0 sets as a 0.9 broker stores them (absolute offsets)
    corr, carried = next_carrier("F", "Fetch", 0)
    fparts = []
    for p, (codec, msgs) in m0.items():
        data, recs, info = stored0[p]
        fparts.append({"partition": p, "high_watermark": len(msgs), "records": data})
        add_records(carried, "crafted-m0", p, recs, 0, codec.split("-")[0],
                    codec_variant=codec)
        batches_truth.append({"carried_in": carried, "topic": "crafted-m0", "partition": p,
                              **info})
    cap.exchange("F", 1, 0, cid, fetch_request(0, [("crafted-m0", [(p, 0) for p in m0])]),
                 fetch_response(0, [("crafted-m0", fparts)]), req_hv=1, resp_hv=0, corr=corr,
                 summary={"fetch_offsets": {str(p): 0 for p in m0},
                          "high_watermarks": {str(p): len(m0[p][1]) for p in m0}})

    # Fetch v2: magic 1 sets, wrapper offsets absolute (last inner), p3 LogAppendTime
    corr, carried = next_carrier("F", "Fetch", 2)
    fparts = []
    lat = t0 + 45
    for p, (codec, msgs) in m1.items():
        data, recs, info = LegacySet.build(1, msgs, base1[p], codec=codec,
                                           log_append_time=lat if p == 3 else None)
        fparts.append({"partition": p, "high_watermark": base1[p] + len(msgs),
                       "records": data})
        add_records(carried, "crafted-m1", p, recs, 1, codec.split("-")[0],
                    codec_variant=codec)
        batches_truth.append({"carried_in": carried, "topic": "crafted-m1", "partition": p,
                              **info})
    cap.exchange("F", 1, 2, cid,
                 fetch_request(2, [("crafted-m1", [(p, base1[p]) for p in m1])]),
                 fetch_response(2, [("crafted-m1", fparts)]), req_hv=1, resp_hv=0, corr=corr,
                 summary={"fetch_offsets": {str(p): base1[p] for p in m1},
                          "log_append_time_wrapper": {"partition": 3, "timestamp_ms": lat}})

    # Fetch v4 read_committed: transactions, control batches, truncated tail
    corr, carried = next_carrier("F", "Fetch", 4)
    log = b""
    pid, epoch = 4000, 2
    segs = [
        (0, txn_items, {"transactional": True, "base_sequence": 0}, "committed"),
        (2, [{**control_record("COMMIT", 7), "offset_delta": 0, "timestamp_ms": t0 + 450}],
         {"transactional": True, "control": True}, "marker"),
        (3, [rec(i, t0 + 460 + i, text(f"txn2-{i}"), text(f"aborted transaction record {i}"),
                 [("txn", b"2")]) for i in range(2)],
         {"transactional": True, "base_sequence": 2}, "aborted"),
        (5, [{**control_record("ABORT", 7), "offset_delta": 0, "timestamp_ms": t0 + 470}],
         {"transactional": True, "control": True}, "marker"),
    ]
    for base, items, kw, txn in segs:
        data, recs, info = v2_batch(base, items, "none", producer_id=pid,
                                    producer_epoch=epoch, **kw)
        log += data
        add_records(carried, ttopic, 0, recs, 2, "none", batch=info, codec_variant="none",
                    transaction=txn)
        batches_truth.append({"carried_in": carried, "topic": ttopic, "partition": 0, **info})
    txn_part = {"partition": 0, "high_watermark": 6, "last_stable_offset": 6,
                "aborted": [(pid, 3)], "records": log}
    # crafted-v2 partition 0: the stored plain batch + the v9 batch, cut inside the second
    d0, recs0, info0 = stored2[0]
    d9, recs9, info9 = v2_batch(4, v9_items, "zstd")
    cut = 61 + 20  # batch header (61 bytes) + 20 bytes of records
    truncated = d0 + d9[:cut]
    add_records(carried, topic, 0, recs0, 2, "none", batch=info0, codec_variant="none")
    batches_truth.append({"carried_in": carried, "topic": topic, "partition": 0, **info0})
    batches_truth.append({"carried_in": carried, "topic": topic, "partition": 0,
                          "truncated": True, "bytes_present": cut,
                          "full_batch": {k: info9[k] for k in ("base_offset", "batch_length",
                                                               "record_count",
                                                               "compression")}})
    cap.truth["expected_issues"].append({
        "kind": "truncated_batch", "normal": True, "connection": "F", "api_name": "Fetch",
        "api_version": 4, "correlation_id": corr, "topic": topic, "partition": 0,
        "base_offset": 4, "bytes_present": cut, "batch_bytes": len(d9),
        "note": "last batch of a Fetch response cut at the partition byte limit: normal "
                "traffic, its records (offsets 4-6) are not delivered"})
    vparts = [{"partition": 0, "high_watermark": 7, "last_stable_offset": 7, "aborted": None,
               "records": truncated}]
    # partitions 1-6: every codec as stored by the broker
    for p in range(1, 7):
        data, recs, info = stored2[p]
        vparts.append({"partition": p, "high_watermark": 10 * p + 3, "aborted": None,
                       "records": data})
        add_records(carried, topic, p, recs, 2, codec_parts[p].split("-")[0], batch=info,
                    codec_variant=codec_parts[p])
        batches_truth.append({"carried_in": carried, "topic": topic, "partition": p, **info})
    cap.exchange("F", 1, 4, cid,
                 fetch_request(4, [(ttopic, [(0, 0)]),
                                   (topic, [(p, 10 * p) for p in range(7)])], isolation=1),
                 fetch_response(4, [(ttopic, [txn_part]), (topic, vparts)]), req_hv=1,
                 resp_hv=0, corr=corr,
                 summary={"isolation_level": "read_committed",
                          "aborted_transactions": {ttopic: [[pid, 3]]},
                          "control_batches": [{"topic": ttopic, "partition": 0, "offset": 2,
                                               "type": "COMMIT", "coordinator_epoch": 7},
                                              {"topic": ttopic, "partition": 0, "offset": 5,
                                               "type": "ABORT", "coordinator_epoch": 7}],
                          "read_committed_visible": {ttopic: [0, 1]},
                          "truncated_last_batch": {"topic": topic, "partition": 0}})

    # Fetch v4 with a wrong CRC
    corr, carried = next_carrier("F", "Fetch", 4)
    bad_items = [rec(i, t0 + 700 + i, text(f"crc-{i}"), text(f"batch with a wrong crc {i}"), [])
                 for i in range(2)]
    data, recs, info = v2_batch(13, bad_items, "gzip", wrong_crc=True)
    add_records(carried, topic, 1, recs, 2, "gzip", batch=info, codec_variant="gzip")
    batches_truth.append({"carried_in": carried, "topic": topic, "partition": 1, **info})
    cap.truth["expected_issues"].append({
        "kind": "crc_mismatch", "normal": False, "algorithm": "crc32c", "connection": "F",
        "api_name": "Fetch", "api_version": 4, "correlation_id": corr, "topic": topic,
        "partition": 1, "base_offset": 13, "crc_on_wire": info["crc_on_wire"],
        "crc_computed": info["crc_computed"],
        "note": "deliberately corrupted stored CRC (computed ^ 0x5A5A5A5A); the batch body "
                "is intact, so its 2 records can still be decoded"})
    cap.exchange("F", 1, 4, cid, fetch_request(4, [(topic, [(1, 13)])]),
                 fetch_response(4, [(topic, [{"partition": 1, "high_watermark": 15,
                                              "aborted": None, "records": data}])]),
                 req_hv=1, resp_hv=0, corr=corr, summary={"wrong_crc_batch": {
                     "topic": topic, "partition": 1, "base_offset": 13}})

    # Fetch v11: zstd without content size, LogAppendTime batch
    corr, carried = next_carrier("F", "Fetch", 11)
    z_items = [rec(i, t0 + 800 + i, text(f"zstd-ncs-{i}"), text(f"zstd frame without content "
                                                              f"size {i} ") + lorem, [])
               for i in range(3)]
    data, recs, info = v2_batch(63, z_items, "zstd-no-content-size",
                                log_append_time=t0 + 900)
    add_records(carried, topic, 6, recs, 2, "zstd", batch=info,
                codec_variant="zstd-no-content-size")
    batches_truth.append({"carried_in": carried, "topic": topic, "partition": 6, **info})
    cap.exchange("F", 1, 11, cid, fetch_request(11, [(topic, [(6, 63)])]),
                 fetch_response(11, [(topic, [{"partition": 6, "high_watermark": 66,
                                               "aborted": [], "records": data}])]),
                 req_hv=1, resp_hv=0, corr=corr,
                 summary={"batch": "zstd without frame content size, LogAppendTime"})
    cap.close("F")

    cap.truth["notes"] += [
        "records: every record inside the capture, in wire order per message, with "
        "carried_in (connection, api, version, correlation id, request or response). "
        "offset is the absolute log offset (Produce requests: what the response's "
        "base_offset assigns; the request itself carries wire_offset / offset_delta). "
        "Control records carry 'control' {type, coordinator_epoch}; their key/value are the "
        "raw ControlRecordType / EndTxnMarker bytes.",
        "Magic 1 compressed wrappers: inner offsets relative 0..n-1 (KIP-31); wrapper offset "
        "n-1 in Produce requests and the absolute offset of the last inner message in Fetch "
        "responses; absolute offset = wrapper offset - (n-1) + inner offset. Wrapper "
        "timestamp = max inner timestamp (CreateTime) or the broker's LogAppendTime "
        "(attribute bit 3; then every inner record's timestamp is the wrapper's).",
        "Magic 0 wrappers: inner offsets 0..n-1 in the Produce request (from_zero) and "
        "absolute in the Fetch response; wrapper offset = offset of the last inner message.",
        "compression: codec family; codec_variant distinguishes snappy-raw / snappy-xerial, "
        "lz4 (correct frame header checksum) / lz4-kafka3160 (checksum over magic + "
        "descriptor), zstd / zstd-no-content-size. LZ4 frames here have no content size, no "
        "block or content checksum, independent 64 KiB blocks.",
        "read_committed: crafted-txn offsets 3-4 belong to the aborted transaction "
        "(aborted_transactions [[4000, 3]]) and must be filtered by a read_committed "
        "consumer; offsets 2 and 5 are control batches.",
        "batches: every message set / wrapper / record batch with its header fields "
        "(crc_on_wire, crc_computed, attributes, producer fields).",
    ]
    return cap


# =========================================================================== crafted_kafka07


def msg07(magic: int, payload: bytes, codec: int = 0) -> bytes:
    """A Kafka 0.7 message: int32 length, int8 magic, [int8 attributes if magic 1],
    int32 crc32(payload), payload."""
    body = i8(magic) + (i8(codec) if magic == 1 else b"") + u32(zlib.crc32(payload)) + payload
    return i32(len(body)) + body


def build_crafted_kafka07() -> Capture:
    cap = Capture("crafted_kafka07",
                  "Crafted Kafka 0.7 wire format on port 9092 (pre-0.8: requests are int32 "
                  "length, int16 request type, topic, partition, ...; no api version, no "
                  "correlation id, no client id; responses are int32 length + int16 error "
                  "code; offsets are byte positions in the partition log). Connection "
                  "producer: PRODUCE (one magic 0 message), PRODUCE (a magic 1 gzip-"
                  "compressed message set), MULTIPRODUCE (2 topic-partitions); PRODUCE has no "
                  "response. Connection consumer: OFFSETS earliest and latest, FETCH, "
                  "MULTIFETCH (2 fetches), FETCH out of range (error 1).",
                  start_offset_s=7200)
    cap.truth["kafka_version"] = "0.7"
    cap.truth["requests_07"] = cap.truth.pop("requests")
    cap.truth["messages"] = cap.truth.pop("records")
    types = {0: "PRODUCE", 1: "FETCH", 2: "MULTIFETCH", 3: "MULTIPRODUCE", 4: "OFFSETS"}
    logs: dict[tuple[str, int], bytes] = {}
    msg_truth = cap.truth["messages"]

    def append(topic: str, partition: int, mset: bytes, carried: dict[str, Any],
               described: list[dict[str, Any]]) -> None:
        key = (topic, partition)
        pos = len(logs.get(key, b""))
        logs[key] = logs.get(key, b"") + mset
        for d in described:
            msg_truth.append({"carried_in": carried, "topic": topic, "partition": partition,
                              "byte_offset": pos + d["pos"], **d["fields"]})

    def describe(messages: list[tuple[int, bytes, int]],
                 inner: dict[int, list[tuple[int, bytes]]] | None = None
                 ) -> tuple[bytes, list[dict[str, Any]]]:
        """(magic, payload, codec) -> message set bytes + per-message truth."""
        out, desc = b"", []
        for idx, (magic, payload, codec) in enumerate(messages):
            m = msg07(magic, payload, codec)
            fields: dict[str, Any] = {
                "magic": magic, "attributes": codec if magic == 1 else None,
                "compression": {0: "none", 1: "gzip", 2: "snappy"}[codec],
                "crc32": zlib.crc32(payload), "message_bytes": len(m),
                "payload_hex": payload.hex() if codec == 0 else None,
                "payload_text": text_or_none(payload) if codec == 0 else None}
            if codec and inner and idx in inner:
                fields["compressed_payload_bytes"] = len(payload)
                fields["inner_messages"] = [
                    {"magic": im, "attributes": 0, "payload_hex": ip.hex(),
                     "payload_text": text_or_none(ip), "crc32": zlib.crc32(ip)}
                    for im, ip in inner[idx]]
            desc.append({"pos": len(out), "fields": fields})
            out += m
        return out, desc

    def send07(label: str, rtype: int, body: bytes, response: bytes | None,
               summary: dict[str, Any]) -> dict[str, Any]:
        conn = cap.conns[label]
        req = size_prefixed(i16(rtype) + body)
        conn.send(True, req)
        entry = {"connection": label, "client_port": conn.cport, "broker_port": conn.sport,
                 "request_type": rtype, "request_name": types[rtype],
                 "request_frame_bytes": len(req), "request_ts_ns": cap.clock.t,
                 "expects_response": response is not None, "response": None, **summary}
        if response is not None:
            resp = size_prefixed(response)
            conn.send(False, resp, gap_ns=700_000)
            entry["response"] = {"response_frame_bytes": len(resp),
                                 "response_ts_ns": cap.clock.t}
        cap.truth["requests_07"].append(entry)
        return entry

    def topic_part(topic: str, partition: int) -> bytes:
        return string(topic) + i32(partition)

    # ---- producer
    cap.connect("producer", 51001, "0.7 producer: PRODUCE x2, MULTIPRODUCE")

    def carried(label: str) -> dict[str, Any]:
        return {"connection": label, "request_index": len(cap.truth["requests_07"])}

    def served(topic: str, partition: int, carried_in: dict[str, Any]) -> None:
        """List the messages of topic/partition again, as carried by a response."""
        for m in list(msg_truth):
            if m["topic"] == topic and m["partition"] == partition \
                    and "direction" not in m["carried_in"]:
                msg_truth.append({**m, "carried_in": {**carried_in, "direction": "response"}})

    def produce07(messages: list[tuple[int, bytes, int]],
                  inner: dict[int, list[tuple[int, bytes]]] | None = None,
                  **summary: Any) -> None:
        """A PRODUCE of one message set to k07-events/0 (PRODUCE has no response)."""
        mset, desc = describe(messages, inner)
        append("k07-events", 0, mset, carried("producer"), desc)
        send07("producer", 0, topic_part("k07-events", 0) + i32(len(mset)) + mset, None,
               {"topic": "k07-events", "partition": 0, "message_set_bytes": len(mset),
                "message_count": len(messages), **summary})

    produce07([(0, b"hello from kafka 0.7 (magic 0 message)", 0)])
    inner = [(1, f"compressed event {i}: ".encode() + b"kafka 0.7 gzip " * 4)
             for i in range(3)]
    gz = gzip_compress(b"".join(msg07(m, p) for m, p in inner))
    produce07([(1, gz, 1)], {0: inner}, compressed_wrapper="gzip, 3 inner magic-1 messages")
    entries = []
    mp_truth = []
    c = carried("producer")
    for topic, part, payloads in [("k07-events", 1, [b"multiproduce event A", b"event B"]),
                                  ("k07-logs", 0, [b"multiproduce log line"])]:
        mset, desc = describe([(1, p, 0) for p in payloads])
        append(topic, part, mset, c, desc)
        entries.append(topic_part(topic, part) + i32(len(mset)) + mset)
        mp_truth.append({"topic": topic, "partition": part, "message_set_bytes": len(mset),
                         "message_count": len(payloads)})
    send07("producer", 3, i16(len(entries)) + b"".join(entries), None,
           {"produces": mp_truth})
    cap.close("producer")

    # ---- consumer
    cap.connect("consumer", 51002, "0.7 consumer: OFFSETS, FETCH, MULTIFETCH")
    end0 = len(logs[("k07-events", 0)])
    send07("consumer", 4, topic_part("k07-events", 0) + i64(-2) + i32(10),
           i16(0) + i32(1) + i64(0),
           {"topic": "k07-events", "partition": 0, "time": -2, "max_offsets": 10,
            "response_error_code": 0, "response_offsets": [0]})
    send07("consumer", 4, topic_part("k07-events", 0) + i64(-1) + i32(1),
           i16(0) + i32(1) + i64(end0),
           {"topic": "k07-events", "partition": 0, "time": -1, "max_offsets": 1,
            "response_error_code": 0, "response_offsets": [end0]})
    served("k07-events", 0, carried("consumer"))
    data = logs[("k07-events", 0)]
    send07("consumer", 1, topic_part("k07-events", 0) + i64(0) + i32(1048576),
           i16(0) + data,
           {"topic": "k07-events", "partition": 0, "offset": 0, "max_size": 1048576,
            "response_error_code": 0, "response_message_set_bytes": len(data),
            "response_next_offset": end0})
    fetches = [("k07-events", 1), ("k07-logs", 0)]
    c = carried("consumer")
    body = i16(len(fetches))
    resp = i16(0)
    mf = []
    for topic, part in fetches:
        body += topic_part(topic, part) + i64(0) + i32(65536)
        data = logs[(topic, part)]
        resp += i32(2 + len(data)) + i16(0) + data
        mf.append({"topic": topic, "partition": part, "offset": 0, "max_size": 65536,
                   "response_error_code": 0, "response_message_set_bytes": len(data)})
        served(topic, part, c)
    send07("consumer", 2, body, resp, {"fetches": mf})
    send07("consumer", 1, topic_part("k07-events", 0) + i64(end0 + 1000) + i32(1048576),
           i16(1), {"topic": "k07-events", "partition": 0, "offset": end0 + 1000,
                    "max_size": 1048576, "response_error_code": 1,
                    "response_error_name": "OffsetOutOfRange",
                    "response_message_set_bytes": 0})
    cap.close("consumer")
    for m in msg_truth:
        m["carried_in"].setdefault("direction", "request")
    cap.truth["logs"] = {f"{t}/{p}": {"end_byte_offset": len(b)} for (t, p), b in logs.items()}
    cap.truth["notes"] += [
        "requests_07 lists the 0.7 requests in wire order per connection (there is no "
        "correlation id: responses come back in request order; PRODUCE and MULTIPRODUCE have "
        "no response). request_type: 0 PRODUCE, 1 FETCH, 2 MULTIFETCH, 3 MULTIPRODUCE, 4 "
        "OFFSETS.",
        "Layouts used: PRODUCE = type, topic (int16 len), partition int32, message-set size "
        "int32, messages; FETCH = type, topic, partition, offset int64, max size int32; "
        "MULTIFETCH = type, int16 count, count x (topic, partition, offset, max size); "
        "MULTIPRODUCE = type, int16 count, count x (topic, partition, size, messages); "
        "OFFSETS = type, topic, partition, time int64 (-1 latest, -2 earliest), max offsets "
        "int32. Responses: FETCH = error int16 + messages; MULTIFETCH = error int16, then "
        "per fetch int32 size (error + messages), int16 error, messages; OFFSETS = error, "
        "int32 count, int64 offsets.",
        "messages: each message with its byte_offset in the partition log (0.7 offsets are "
        "byte positions; the next offset is byte_offset + 4 + length). Messages served in "
        "responses are listed again with carried_in.direction = response. The gzip wrapper's "
        "payload is a gzip member holding a message set of 3 magic 1 messages (attributes 0).",
        "tshark has no 0.7 dissector: decoding this port as Kafka shows nonsense; that is "
        "expected.",
    ]
    return cap


# =========================================================================== crafted_throttle


def build_crafted_throttle() -> Capture:
    cap = Capture("crafted_throttle",
                  "Crafted quota throttling on port 9092, one connection T of one client "
                  "(client_id crafted-throttled-client): ApiVersions v3 and Metadata v9 "
                  "(throttle 0), five Produce requests of one record batch each (v7 "
                  "non-flexible, then v9 flexible) answered with throttle_time_ms 0, 120, "
                  "250, 0 and 1000, then Fetch v11 (throttle 80), Fetch v12 (flexible, "
                  "throttle 300) and an empty long-poll Fetch v12 (throttle 0, answered after "
                  "its 500 ms MaxWaitMs). As with KIP-219 brokers, every throttled response "
                  "is sent at once and the client sends its next request only after the "
                  "throttle time.",
                  start_offset_s=10800)
    label, cid, topic = "T", "crafted-throttled-client", "crafted-quota"
    cap.truth["topics"] = {topic: 2}
    t0 = BASE_TS_MS + 10_800_000
    batches_truth: list[dict[str, Any]] = []
    cap.truth["batches"] = batches_truth
    cap.connect(label, 50201, "client under a quota: ApiVersions v3, Metadata v9, Produce v7/v9, "
                              "Fetch v11/v12")

    def wait_out(throttle_ms: int) -> None:
        """The client's back-off (KIP-219): nothing is sent on the connection until the
        throttle time after the response has passed."""
        cap.clock.tick(throttle_ms * 1_000_000)

    def add_records(carried: dict[str, Any], partition: int, base_offset: int,
                    items: list[dict[str, Any]], info: dict[str, Any]) -> None:
        for it in items:
            cap.truth["records"].append(record_truth(
                carried, topic, partition, base_offset + it["offset_delta"], it["key"],
                it["value"], it["headers"], it["timestamp_ms"], "CreateTime", 2, "none",
                codec_variant="none", offset_delta=it["offset_delta"],
                batch={"base_offset": info["base_offset"], "crc_ok": True,
                       "record_count": info["record_count"]}))
        batches_truth.append({"carried_in": carried, "topic": topic, "partition": partition,
                              **info})

    cap.exchange(label, 18, 3, cid, api_versions_v3_request("crafted-client", "1.0.0"),
                 api_versions_response(3), req_hv=2, resp_hv=0,
                 summary=api_versions_summary(3), throttle_time_ms=0)
    metadata_v9(cap, label, cid, topic, partitions=2, throttle_time_ms=0)

    # ------------------------------------------------------------------ Produce v7 / v9
    log: dict[int, list[tuple[int, list[dict[str, Any]]]]] = {0: [], 1: []}  # base, items
    produces = [(7, 0, 0), (7, 0, 120), (9, 1, 250), (9, 1, 0), (9, 0, 1000)]
    for n, (version, p, throttle) in enumerate(produces):
        corr = cap.next_corr(label)
        carried = {"connection": label, "api_name": "Produce", "api_version": version,
                   "correlation_id": corr, "direction": "request"}
        items = [rec(i, t0 + 100 * n + i, f"quota-{n}-{i}".encode(),
                     f"produce {n} under a quota, record {i}".encode(),
                     [("produce", str(n).encode())]) for i in range(2)]
        base = sum(len(x) for _, x in log[p])
        data, info = record_batch(0, items)  # the client writes base offset 0
        add_records(carried, p, base, items, info)
        log[p].append((base, items))
        flex = version >= 9
        cap.exchange(label, 0, version, cid,
                     produce_request(version, None, -1, [(topic, [(p, data)])]),
                     produce_response(version, [(topic, [(p, base)])], throttle_time_ms=throttle),
                     req_hv=2 if flex else 1, resp_hv=1 if flex else 0, corr=corr,
                     throttle_time_ms=throttle,
                     summary={"acks": -1, "timeout_ms": 30000, "partition": p,
                              "record_count": len(items), "response_base_offsets": {str(p): base},
                              "response_throttle_time_ms": throttle})
        wait_out(throttle)

    # ------------------------------------------------------------------ Fetch v11 / v12
    # (version, partition, fetch offset, throttle, latency): the last one finds no new
    # record and is answered when its MaxWaitMs (500 ms) expires
    fetches = [(11, 0, 0, 80, 800_000), (12, 1, 0, 300, 800_000), (12, 0, 6, 0, 500_000_000)]
    for version, p, offset, throttle, latency in fetches:
        corr = cap.next_corr(label)
        carried = {"connection": label, "api_name": "Fetch", "api_version": version,
                   "correlation_id": corr, "direction": "response"}
        hwm = sum(len(x) for _, x in log[p])
        records = b""
        for base, items in log[p]:
            if base >= offset:
                data, info = record_batch(base, items)  # as the broker stores it
                records += data
                add_records(carried, p, base, items, info)
        flex = version >= 12
        cap.exchange(label, 1, version, cid, fetch_request(version, [(topic, [(p, offset)])]),
                     fetch_response(version, [(topic, [{"partition": p, "high_watermark": hwm,
                                                        "aborted": None, "records": records}])],
                                    throttle_time_ms=throttle),
                     req_hv=2 if flex else 1, resp_hv=1 if flex else 0, corr=corr,
                     latency_ns=latency, throttle_time_ms=throttle,
                     summary={"max_wait_ms": 500, "fetch_offsets": {str(p): offset},
                              "high_watermarks": {str(p): hwm},
                              "record_count": sum(len(x) for b, x in log[p] if b >= offset),
                              "response_throttle_time_ms": throttle})
        wait_out(throttle)
    cap.close(label)

    cap.truth["notes"] += [
        "Every response's throttle time is requests[].response.throttle_time_ms (also "
        "content.response_throttle_time_ms for Produce and Fetch): ApiVersions 0, Metadata 0, "
        "Produce 0, 120, 250, 0, 1000, Fetch 80, 300, 0 ms. Throttled exchanges (throttle > 0): "
        "Produce 3 of 5 (total 1370 ms, max 1000), Fetch 2 of 3 (total 380 ms, max 300), 5 in "
        "all (1750 ms).",
        "KIP-219 (Produce v6+, Fetch v8+): the broker answers a request over quota at once "
        "with the throttle time and then mutes the connection for that long; the client also "
        "waits it out. Here each response comes 0.8 ms after its request (the empty Fetch: "
        "500 ms, its MaxWaitMs) and the client's next request follows throttle_time_ms later, "
        "so latencies do not contain the throttle time.",
        "records: the records of each Produce request (offset = response base_offset + "
        "offset_delta) and of each Fetch response (the same batches as the broker stores "
        "them, base offset absolute); every batch uncompressed, magic 2, CreateTime.",
        "Header versions: Produce v7 and Fetch v11 request header v1 / response header v0; "
        "Produce v9 and Fetch v12 (flexible) request header v2 / response header v1; "
        "ApiVersions v3 request header v2 / response header v0 (KIP-511).",
    ]
    return cap


# =========================================================================== main / check


BUILDERS: dict[str, Callable[[], Capture]] = {
    "crafted_sasl": build_crafted_sasl,
    "crafted_records": build_crafted_records,
    "crafted_kafka07": build_crafted_kafka07,
    "crafted_throttle": build_crafted_throttle,
}


def check(name: str, out_dir: Path = CAPTURES) -> dict[str, Any]:
    """Read back with tcpdump (and tshark's Kafka dissector for 0.8+ captures)."""
    pcap = out_dir / f"{name}.pcap"
    truth = json.loads((out_dir / f"{name}.truth.json").read_text())
    summary: dict[str, Any] = {"pcap_bytes": pcap.stat().st_size}
    if shutil.which("tcpdump"):
        r = subprocess.run(["tcpdump", "-r", str(pcap), "-n", "-nn"], capture_output=True,
                           text=True)
        summary["tcpdump_packets"] = len(r.stdout.splitlines())
        if r.returncode != 0 or summary["tcpdump_packets"] != truth["pcap_packets"]:
            raise SystemExit(f"{name}: tcpdump -r failed: {r.stderr[-500:]}")
    if shutil.which("tshark"):
        base = ["tshark", "-r", str(pcap), "-n", "-o", "tcp.check_checksum:TRUE",
                "-o", "ip.check_checksum:TRUE", "-d", f"tcp.port=={BROKER_PORT},kafka"]
        out = subprocess.run(base + ["-V"], capture_output=True, text=True).stdout
        summary["tshark_malformed"] = out.count("Malformed Packet")
        summary["tshark_expert_warnings"] = sum(
            1 for ln in out.splitlines() if "[Expert Info (Warning" in ln
            or "[Expert Info (Error" in ln)
        bad = subprocess.run(base + ["-Y", "tcp.checksum.status == 0 or ip.checksum.status == 0"
                                     " or tcp.analysis.flags"],
                             capture_output=True, text=True).stdout
        summary["tcp_problems"] = len(bad.splitlines())
        if name != "crafted_kafka07":
            f = subprocess.run(base + ["-T", "fields", "-e", "kafka.api_key",
                                       "-e", "kafka.api_version", "-e", "kafka.correlation_id",
                                       "-e", "tcp.dstport"], capture_output=True,
                               text=True).stdout
            seen = []
            for line in f.splitlines():
                keys, vers, corrs, dport = line.split("\t")
                if keys and int(dport) == BROKER_PORT:
                    seen += list(zip(map(int, keys.split(",")), map(int, vers.split(",")),
                                     map(int, corrs.split(","))))
            want = [(r["api_key"], r["api_version"], r["correlation_id"])
                    for r in truth["requests"]]
            summary["tshark_requests"] = len(seen)
            missing = [w for w in want if w not in seen]
            summary["tshark_extra_frames_as_requests"] = [s for s in seen if s not in want]
            if missing:
                raise SystemExit(f"{name}: requests not seen by tshark: {missing}")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("captures", nargs="*", help="capture names (default: all)")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--check", action="store_true", help="only read back existing files")
    parser.add_argument("--out", type=Path, default=CAPTURES, metavar="DIR",
                        help="directory the captures are written to / read back from "
                             "(default: captures/; created if missing)")
    args = parser.parse_args(argv)
    out_dir: Path = args.out.resolve()
    if args.list:
        print("\n".join(BUILDERS))
        return 0
    unknown = [n for n in args.captures if n not in BUILDERS]
    if unknown:
        parser.error(f"unknown capture(s): {', '.join(unknown)}")
    for name in args.captures or list(BUILDERS):
        if not args.check:
            out_dir.mkdir(parents=True, exist_ok=True)
            pcap, truth = BUILDERS[name]().finish(out_dir)
            print(f"{name}: wrote {pcap} ({pcap.stat().st_size} bytes), {truth.name}")
        print(name, json.dumps(check(name, out_dir)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
