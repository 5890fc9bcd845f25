"""Split a large capture by TCP connection into pcapng shards, streaming.

Every TCP connection must be decoded by one pipeline from its first packet to its last
(reassembly, framing and pairing are per connection), so a capture is cut by connection, not
by position: each packet goes to shard ``crc32(flow key) % n``, where the flow key is the
connection's two endpoints ``(ip, port)`` in sorted order (both directions of a connection,
and a later connection on the same four-tuple, land in the same shard). Packets that are not
TCP (ARP, UDP, IP fragments, unparsable frames) go to shard 0, where the pipeline counts
them as it would in the whole file.

The capture is read once, packet by packet (:func:`kafkasniff.capture.open_capture`), and
each shard is written as it goes with :class:`kafkasniff.capture.writer.PcapNgWriter`, so
memory is a read buffer plus one write buffer per shard whatever the file size. Shards keep
the packets' original link types (one pcapng interface each), timestamps (ns) and original
lengths; within a shard, packets keep the capture's order.

Damage in the source (a truncated last record, a bad block) stops reading as it would stop
``export``: the issues are returned in :attr:`SplitResult.issues` so that the caller records
them once, for the original file.

Nothing here imports PySpark: :mod:`kafkasniff.spark.decode` runs :func:`split_capture` inside
Spark tasks (the task receives the path; input and output must be on storage every executor
sees).
"""

from __future__ import annotations

import math
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from kafkasniff.capture.packet import decode_packet
from kafkasniff.capture.pcapfile import open_capture
from kafkasniff.capture.types import TcpSegment
from kafkasniff.capture.writer import PcapNgWriter
from kafkasniff.model import DecodeIssue

__all__ = [
    "SHARD_TARGET_BYTES",
    "SPLIT_THRESHOLD_BYTES",
    "SplitResult",
    "flow_key",
    "shard_count",
    "shard_of",
    "split_capture",
]

#: Captures smaller than this are decoded whole (one task), not split.
SPLIT_THRESHOLD_BYTES = 64 << 20
#: A large capture is split into ``ceil(size / SHARD_TARGET_BYTES)`` shards.
SHARD_TARGET_BYTES = 64 << 20
#: Upper bound on the shards of one capture (open files while splitting).
MAX_SHARDS = 1024


def flow_key(seg: TcpSegment) -> bytes:
    """The connection's endpoints, sorted: ``min(a, b) + max(a, b)`` where an endpoint is its
    packed address followed by the 2-byte port (the same key for both directions)."""
    a = seg.src_ip + seg.src_port.to_bytes(2, "big")
    b = seg.dst_ip + seg.dst_port.to_bytes(2, "big")
    return a + b if a <= b else b + a


def shard_of(seg: object, n: int) -> int:
    """Shard (0 .. n-1) of a decoded packet: ``crc32(flow_key) % n`` for a
    :class:`TcpSegment`, 0 for anything else (a ``Skipped``)."""
    if type(seg) is not TcpSegment:
        return 0
    return zlib.crc32(flow_key(seg)) % n    # type: ignore[arg-type]


def shard_count(size_bytes: int, shards: int | None = None, *,
                threshold_bytes: int = SPLIT_THRESHOLD_BYTES,
                target_bytes: int = SHARD_TARGET_BYTES) -> int:
    """How many shards a capture of ``size_bytes`` is cut into.

    ``shards`` given: exactly that many (1: not split), whatever the size. Otherwise 1 below
    ``threshold_bytes``, else ``ceil(size / target_bytes)`` (at least 2, at most
    :data:`MAX_SHARDS`).
    """
    if shards is not None:
        if shards < 1:
            raise ValueError(f"shards must be >= 1, not {shards}")
        return min(shards, MAX_SHARDS)
    if size_bytes < threshold_bytes:
        return 1
    return max(2, min(MAX_SHARDS, math.ceil(size_bytes / target_bytes)))


@dataclass
class SplitResult:
    """What :func:`split_capture` wrote.

    Attributes:
        source: the capture that was split.
        shards: the number of shards asked for (``n``).
        paths: shard index -> pcapng path, for the shards that received packets.
        packets: shard index -> packets written there.
        packets_read: packets read from the source (= sum of ``packets``).
        bytes_read: bytes read from the source file.
        issues: damage found in the source (reading stopped there).
    """

    source: str
    shards: int
    paths: dict[int, str] = field(default_factory=dict)
    packets: dict[int, int] = field(default_factory=dict)
    packets_read: int = 0
    bytes_read: int = 0
    issues: list[DecodeIssue] = field(default_factory=list)


def split_capture(source: str | os.PathLike[str], out_dir: str | os.PathLike[str], n: int,
                  *, stem: str | None = None) -> SplitResult:
    """Split ``source`` into at most ``n`` pcapng shards under ``out_dir``, by connection.

    Args:
        source: a pcap / pcapng capture path (gzip allowed).
        out_dir: directory for the shards (created).
        n: number of shards (>= 1).
        stem: file name prefix (default: the source's file name); shard ``i`` is
            ``<stem>.shard-<i>-of-<n>.pcapng``.

    Returns:
        A :class:`SplitResult`. Shards that would be empty are not created.

    Raises:
        CaptureError: the source cannot be read at all.
        ValueError: ``n < 1``.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, not {n}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = stem or Path(source).name
    result = SplitResult(source=os.fspath(source), shards=n)
    writers: dict[int, PcapNgWriter] = {}
    counts = [0] * n
    decode = decode_packet
    crc32 = zlib.crc32
    seg_type = TcpSegment

    secrets: list[tuple[int, bytes]] = []

    def writer(i: int) -> PcapNgWriter:
        path = out / f"{stem}.shard-{i}-of-{n}.pcapng"
        w = writers[i] = PcapNgWriter(path)
        for block in secrets:
            w.write_secrets(*block)
        result.paths[i] = str(path)
        return w

    def on_secrets(secrets_type: int, data: bytes) -> None:
        # every shard gets the Decryption Secrets Blocks that came before its packets
        secrets.append((secrets_type, data))
        for w in writers.values():
            w.write_secrets(secrets_type, data)

    try:
        with open_capture(source, on_secrets=on_secrets) as packets:
            for pkt in packets:
                seg = decode(pkt)
                # shard_of(seg, n) inlined (per packet, with the locals above)
                if type(seg) is seg_type:
                    a = seg.src_ip + seg.src_port.to_bytes(2, "big")
                    b = seg.dst_ip + seg.dst_port.to_bytes(2, "big")
                    i = crc32(a + b if a <= b else b + a) % n
                else:
                    i = 0
                w = writers.get(i)
                if w is None:
                    w = writer(i)
                w.write(pkt)
                counts[i] += 1
            result.issues = list(packets.issues)
            result.bytes_read = packets.bytes_read
            result.packets_read = packets.packets_read
    finally:
        for w in writers.values():
            w.close()
    result.packets = {i: counts[i] for i in sorted(result.paths)}
    return result
