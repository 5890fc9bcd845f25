"""Routing packets by connection to the decoders (runs in the capture process).

:func:`kafkasniff.capture.flows.partition` picks a frame's decoder by a symmetric hash of
its flow (both directions of a TCP connection go to the same decoder, as the kernel's
``PACKET_FANOUT_HASH`` does for the ring and socket backends). :class:`Dispatcher` packs
packets into one batch per decoder (a ``batch_header`` of kind ``KIND_RECORDS``, then per
packet a :data:`packet_record` followed by the frame bytes) and hands batches to the
bounded shared-memory channels of :mod:`kafkasniff.parallel.shm`, counting queue drops in
the shared counters (:mod:`kafkasniff.live.config`).

See :mod:`kafkasniff.live` for how the parts fit together.
"""

from __future__ import annotations

import struct
import time
from typing import Any, Callable

from kafkasniff.capture.flows import flow_hash, ip_offset, partition
from kafkasniff.capture.pcapfile import PACKED_RECORD
from kafkasniff.live.backends import KIND_RECORDS, KIND_SECRETS, KIND_SOURCE_END, batch_header
from kafkasniff.live.config import C_DISPATCHED, C_PACKETS, C_QUEUE_DROPS, LiveConfig

__all__ = [
    "Dispatcher",
    "packet_record",
]

#: the header of each packet in a ``KIND_RECORDS`` batch, followed by ``caplen`` frame
#: bytes: the records of ``--jobs`` batches (:data:`kafkasniff.capture.pcapfile.PACKED_RECORD`,
#: read back by the compiled :func:`~kafkasniff.capture.pcapfile.packed_records`): ``ts_ns``
#: (capture time, int64 ns since the epoch), ``caplen`` (bytes kept), ``orig_len`` (bytes on
#: the wire), the link type (pcap LINKTYPE_*) and an index, always 0 here; little-endian
packet_record = PACKED_RECORD
_rec_pack = packet_record.pack


class Dispatcher:
    """Batches packets per decoder and hands batches to bounded queues (capture process).

    Args:
        queues: one channel per decoder (:class:`kafkasniff.parallel.shm.Channel`:
            ``put(batch, count, block, head) -> bool``, False when full).
        counters: the shared int64 counters (slots ``C_*`` of :mod:`kafkasniff.live.config`):
            ``C_PACKETS``, ``C_DISPATCHED`` and ``C_QUEUE_DROPS`` are counted here, per batch.
        cfg: ``batch_bytes``, ``flush_ms`` and ``block_when_full`` are used.
        writer: ``--write`` (:class:`kafkasniff.live.outputs.RotatingPcapNg`) or ``None``:
            every packet added is also written there.
    """

    def __init__(self, queues: list, counters, cfg: LiveConfig, writer=None) -> None:
        self.queues = queues
        self.n = len(queues)
        self.c = counters
        self.batch_bytes = cfg.batch_bytes
        self.flush_s = cfg.flush_ms / 1000
        self.block = cfg.block_when_full
        self.bufs = [bytearray() for _ in queues]
        self.head = batch_header.pack(KIND_RECORDS, 0, 0)
        self.counts = [0] * self.n
        self.first = [0.0] * self.n          # monotonic time of each batch's first packet
        self.writer = writer

    def add4(self, ts: int, data, orig: int, link_type: int) -> None:
        """One packet (copied: ``data`` may be a view into the ring)."""
        n = self.n
        w = 0 if n == 1 else partition(link_type, data, n)
        b = self.bufs[w]
        if not b:
            self.first[w] = time.monotonic()
        b += _rec_pack(ts, len(data), orig, link_type, 0)
        b += data
        self.counts[w] += 1
        if self.writer is not None:
            self.writer.write(ts, link_type, bytes(data), orig)
        if len(b) >= self.batch_bytes:
            self.flush(w)

    def adder(self, link_type: int) -> Callable[[int, Any, int], None]:
        """A fast ``add(ts, data, orig)`` for a backend of one link type."""
        bufs = self.bufs
        counts = self.counts
        first = self.first
        n = self.n
        limit = self.batch_bytes
        flush = self.flush
        writer = self.writer
        off_fn = ip_offset
        fh = flow_hash
        mono = time.monotonic

        if n == 1 and writer is None:
            b0 = bufs
            def add(ts, data, orig):
                b = b0[0]
                if not b:
                    first[0] = mono()
                b += _rec_pack(ts, len(data), orig, link_type, 0)
                b += data
                counts[0] += 1
                if len(b) >= limit:
                    flush(0)
            return add

        def add(ts, data, orig):
            if n == 1:
                w = 0
            else:
                off = off_fn(link_type, data)
                w = 0 if off < 0 else fh(data, off) % n
            b = bufs[w]
            if not b:
                first[w] = mono()
            b += _rec_pack(ts, len(data), orig, link_type, 0)
            b += data
            counts[w] += 1
            if writer is not None:
                writer.write(ts, link_type, bytes(data), orig)
            if len(b) >= limit:
                flush(w)
        return add

    def member_adder(self, link_type: int) -> Callable[[int, int, Any, int], None]:
        """``add(i, ts, data, orig)``: a packet of socket ``i`` (already partitioned by the
        kernel's fanout) for decoder ``i``."""
        bufs = self.bufs
        counts = self.counts
        first = self.first
        limit = self.batch_bytes
        flush = self.flush
        writer = self.writer
        mono = time.monotonic

        def add(i, ts, data, orig):
            b = bufs[i]
            if not b:
                first[i] = mono()
            b += _rec_pack(ts, len(data), orig, link_type, 0)
            b += data
            counts[i] += 1
            if writer is not None:
                writer.write(ts, link_type, bytes(data), orig)
            if len(b) >= limit:
                flush(i)
        return add

    def flush(self, w: int, final: bool = False) -> None:
        """Hand decoder ``w``'s batch to its queue (waiting for room when ``final`` or
        ``block_when_full``); its packets count as dispatched, or as queue drops."""
        b = self.bufs[w]
        if not b:
            return
        cnt = self.counts[w]
        self.counts[w] = 0
        c = self.c
        c[C_PACKETS] += cnt
        if self.queues[w].put(b, cnt, final or self.block, self.head):
            c[C_DISPATCHED] += cnt
        else:
            c[C_QUEUE_DROPS] += cnt
        del b[:]        # copied into the channel: reuse the buffer

    def add_secrets(self, secrets_type: int, data: bytes) -> None:
        """A pcapng Decryption Secrets Block of the stream: every decoder gets it after the
        packets before it (their batches are sent first). Never written to ``--write``
        files: key material goes into no output."""
        self.flush_all(final=True)
        head = batch_header.pack(KIND_SECRETS, 0, 0)
        for q in self.queues:
            q.put(struct.pack("<I", secrets_type) + data, 0, True, head)

    def add_source_end(self, issues: list, accounting: dict | None) -> None:
        """The end of a ``-r`` stream: its damage (``capture_truncated`` ...) and its own
        bytes (file header, record headers, what damage left unread) go to decoder 0 after
        every packet, which reports them as ``read`` does at the end of a file (standalone
        issues in every output, the byte ledger)."""
        if not issues and not accounting:
            return
        import pickle

        self.flush_all(final=True)
        self.queues[0].put(pickle.dumps((issues, accounting)), 0, True,
                           batch_header.pack(KIND_SOURCE_END, 0, 0))

    def flush_due(self, now: float) -> None:
        """Send batches older than ``flush_ms``."""
        for w in range(self.n):
            if self.bufs[w] and now - self.first[w] >= self.flush_s:
                self.flush(w)

    def flush_all(self, final: bool = False) -> None:
        """:meth:`flush` every decoder's batch."""
        for w in range(self.n):
            self.flush(w, final)
