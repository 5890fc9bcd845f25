"""Split a large capture by TCP connection into pcapng shards, streaming.

Every TCP connection must be decoded by one pipeline from its first packet to its last
(reassembly, framing and pairing are per connection), so a capture is cut by connection, not
by position: each packet goes to the shard the flow hash of
:mod:`kafkasniff.capture.flows` picks, the rule ``--jobs N`` routes packets to its decoders
by. It is symmetric in the two endpoints ``(ip, port)``, so both directions of a connection,
and a later connection on the same four-tuple, land in one shard. Frames that are not IP go
to shard 0; other IP packets (UDP, fragments) are hashed as well: every packet is read by
exactly one shard's pipeline, which counts it as the pipeline of the whole file would. With
``by_hosts`` (a TLS key log is given) the ports are left out of the hash: every connection
between two hosts goes to one shard, since a TLS 1.2 session resumed on a new connection is
decrypted with the secrets of the connection that made it (as ``--jobs`` does).

The capture is read once (:func:`kafkasniff.capture.open_capture`) and each shard is written
as it goes, so memory is a read buffer plus one write buffer per shard whatever the file
size. Only the headers the hash needs are read (no packet is decoded here: the shard's
pipeline does that); within a shard, packets keep the capture's order.

- A pcap capture (gzip allowed) is cut into pcap shards: every shard starts with the
  capture's own file header and holds its packet records byte for byte
  (:meth:`PacketSource.split_records <kafkasniff.capture.pcapfile.PacketSource.split_records>`,
  compiled: no packet object is made, and the shards are read back by the compiled pcap
  loop).
- A pcapng capture is cut into pcapng shards written with
  :class:`kafkasniff.capture.writer.PcapNgWriter`: they keep the packets' link types (one
  interface each), timestamps (ns) and original lengths, and the Decryption Secrets Blocks.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from kafkasniff.capture.flows import partition, router
from kafkasniff.capture.pcapfile import open_capture
from kafkasniff.capture.writer import PcapNgWriter
from kafkasniff.model import DecodeIssue

__all__ = [
    "SHARD_TARGET_BYTES",
    "SPLIT_THRESHOLD_BYTES",
    "SplitResult",
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


def shard_of(link_type: int, data, n: int, *, by_hosts: bool = False) -> int:
    """Shard (0 .. n-1) of a frame of pcap ``link_type``: its flow hash modulo ``n``
    (:func:`kafkasniff.capture.flows.partition`, what the split's router computes;
    ``by_hosts``: addresses only); 0 for a frame that is not IP."""
    return partition(link_type, data, n, not by_hosts)


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
                  *, stem: str | None = None, by_hosts: bool = False) -> SplitResult:
    """Split ``source`` into at most ``n`` shards under ``out_dir``, by connection: pcap
    shards of a pcap capture, pcapng shards of a pcapng capture (see the module docstring).

    Args:
        source: a pcap / pcapng capture path (gzip allowed).
        out_dir: directory for the shards (created).
        n: number of shards (>= 1).
        stem: file name prefix (default: the source's file name); shard ``i`` is
            ``<stem>.shard-<i>-of-<n>.pcap`` (``.pcapng``).
        by_hosts: every connection between two hosts in one shard (TLS decryption: see
            above).

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
    route = router(n, not by_hosts)

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
            if packets.format == "pcap":
                counts = _split_pcap(packets, out, stem, n, route, result.paths)
            else:
                for pkt in packets:
                    i = route(pkt.link_type, pkt.data)
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


def _split_pcap(packets, out: Path, stem: str, n: int, route, paths: dict[int, str]
                ) -> list[int]:
    """The records of a pcap capture, byte for byte, into pcap shards that start with its
    file header; fills ``paths`` (a shard that would be empty is not created) and returns
    the packets per shard."""
    files: dict[int, BinaryIO] = {}

    def write(i: int, records: list[bytes]) -> None:
        f = files.get(i)
        if f is None:
            path = out / f"{stem}.shard-{i}-of-{n}.pcap"
            f = files[i] = open(path, "wb")  # noqa: SIM115 - closed below
            f.write(packets.pcap_header)
            paths[i] = str(path)
        f.write(b"".join(records))

    try:
        return packets.split_records(route, n, write)
    finally:
        for f in files.values():
            f.close()
