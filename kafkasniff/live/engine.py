"""The live engine: one capture process, N decoder processes, the collector (main process).

::

    kernel: filter, PACKET_FANOUT_HASH -> N TPACKET_V3 rings (one per decoder)
      --(capture process: moves whole blocks)--> N bounded shared-memory queues
      --(decoder process i: Pipeline, render, export, topic-id sharing)--> result queue
      --(main process: collector)--> stdout lines / JSON Lines / stats / TUI source

* The **capture process** only moves bytes. With the ring backend the kernel has already
  partitioned packets by flow (a symmetric hash: both directions of a connection go to the
  same ring), and each retired block of ring ``i`` is copied as it is into decoder ``i``'s
  queue (:mod:`kafkasniff.live.shm`); a block whose queue is full stays in its ring until
  there is room (the ring is the second half of the buffer; when it overflows the kernel
  drops and counts). With the plain socket backend, socket ``i`` feeds decoder ``i`` in
  batches of ``<ts_ns, caplen, orig_len, link_type>`` + bytes; with a pcap stream the
  capture process hashes each packet's flow itself (:func:`partition`). Those batches are
  sent when they reach ``batch_bytes`` or are ``flush_ms`` old, and dropped (counted as
  *queue drops*) when the queue is full: the capture process never blocks. It also writes
  ``--write`` pcapng files and publishes its counters (packets, kernel received / dropped
  from ``PACKET_STATISTICS``, queue drops) in shared memory.
* Each **decoder process** runs a :class:`kafkasniff.pipeline.Pipeline` over the packets of
  its connections (reassembly and pairing are exact), renders exchanges and issues (console
  line or JSON), writes ``--export`` files, prepares the TUI's data, and sends text and its
  :class:`~kafkasniff.pipeline.PipelineStats` to the collector. Connection ids are made
  unique across decoders (decoder ``i`` numbers from ``i * CONN_ID_STRIDE``).
  Topic ids learnt from one connection name topics on others (Fetch v13+ carries ids learnt
  from Metadata on another connection, maybe decoded by another decoder): learnt ids are
  forwarded by the collector to the other decoders, and an exchange whose ids are not known
  yet is held back (at most ``topic_hold_s``) until another decoder reports learning them at
  or before the exchange's completion, so it shows the names ``kafkasniff read`` shows.
* The **collector** (main process) writes what decoders send, counts, prints periodic stats,
  and stops everything in order: on Ctrl-C / SIGTERM / ``--duration`` / ``-c`` it sets the stop
  event; the capture process swaps in a drop-everything filter (no new packet is accepted),
  reads what the kernel already holds (blocks retire within ``retire_ms``) and hands it all to
  the decoders, closes the pcapng file; decoders drain their queues, call
  ``Pipeline.finish()``, wait for each other (topic ids), send their last results; the
  collector flushes every output and prints the summary.

Nothing is lost silently: ``kernel_received = captured + kernel_drops`` and
``captured = decoded + queue_drops`` hold at the end, and every output shows the drops.
"""

from __future__ import annotations

import heapq
import multiprocessing as mp
import os
import queue as queue_mod
import signal
import struct
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

from kafkasniff.live.backends import (FLAG_COOKED, FLAG_SKIP_OUTGOING, KIND_RECORDS,
                                      KIND_TPACKET_V3, batch_header, block_packets,
                                      tp3_packet_header)

__all__ = [
    "CONN_ID_STRIDE",
    "LiveConfig",
    "LiveSession",
    "Snapshot",
]

#: decoder ``i`` numbers its TCP connections from ``i * CONN_ID_STRIDE``
CONN_ID_STRIDE = 1_000_000_000
#: whole exchanges each decoder hands to the terminal UI when the capture ends
KEPT_AT_END = 1000
#: at the end, how long a decoder waits for the others before releasing held exchanges
END_BARRIER_S = 10.0

# shared counters written by the capture process (int64 slots)
C_PACKETS = 0          # packets read from the backend
C_KERNEL_RECEIVED = 1  # accepted by the filter (PACKET_STATISTICS tp_packets)
C_KERNEL_DROPS = 2     # dropped by the kernel, ring or buffer full (tp_drops)
C_QUEUE_DROPS = 3      # packets in batches a full decoder queue could not take
C_DISPATCHED = 4       # packets handed to decoder queues
C_DONE = 5             # 1: the capture process has finished (sentinels sent)
C_WRITTEN = 6          # packets written to --write files
C_STARTED_NS = 7       # wall clock when capture started
C_RING_PENDING = 8     # packets waiting in the kernel rings (blocks handed over, not moved)
N_COUNTERS = 9

_rec = struct.Struct("<qIIi")          # ts_ns, caplen, orig_len, link_type
_rec_pack = _rec.pack
_REC = _rec.size
_u32x2 = struct.Struct("!II").unpack_from
_u16x2 = struct.Struct("!HH").unpack_from
_VLAN = (0x8100, 0x88A8, 0x9100)


@dataclass
class LiveConfig:
    """Everything the engine needs (built by the ``live`` command).

    Attributes:
        workers: decoder processes.
        batch_bytes / flush_ms: a batch goes to its decoder when this big or this old.
        queue_bytes: shared memory for packets waiting for the decoders (all decoders);
            when a decoder's share is full, batches for it are dropped.
        block_when_full: wait for room instead of dropping (regular files, not live sources).
        pipeline: keyword arguments of :class:`kafkasniff.pipeline.PipelineOptions`.
        output: ``lines``, ``json``, ``count`` (an empty item per shown exchange, for ``-c``
            with the TUI) or ``none`` (decoders render nothing: TUI / summary only).
        color, with_records, value_bytes, show_issues: rendering, as ``read``.
        filters: ``dict(api=, client=, topic=, errors_only=, min_latency=)`` like ``read``.
        tui: decoders also send light exchanges, standalone issues and connection summaries
            (the terminal UI's data) and keep recent whole exchanges for its detail view.
        export: ``--export`` settings (``dir``, ``every_s``, ``rows``, ``capture``) or ``None``.
        topic_hold_s: how long an exchange with unknown topic ids waits for another decoder.
        write: ``--write`` settings (path, ring files, file size) or ``None``.
        retire_ms: ring block timeout (also the drain wait at stop).
    """

    workers: int = 2
    batch_bytes: int = 256 * 1024
    flush_ms: int = 20
    queue_bytes: int = 64 << 20
    block_when_full: bool = False
    pipeline: dict = field(default_factory=dict)
    output: str = "lines"
    color: bool = False
    with_records: bool = False
    value_bytes: int = 256
    show_issues: bool = True
    filters: dict = field(default_factory=dict)
    tui: bool = False
    topic_hold_s: float = 0.5
    write: dict | None = None
    export: dict | None = None
    retire_ms: int = 10


# --------------------------------------------------------------------------- partitioning


def flow_hash(d, off: int) -> int:
    """Symmetric hash of the IP addresses and TCP/UDP ports of the packet whose IP header
    starts at ``off`` (the same for both directions of a connection); 0 when not IP."""
    try:
        v = d[off] >> 4
        if v == 4:
            a, b = _u32x2(d, off + 12)
            h = a ^ b
            if d[off + 9] in (6, 17) and not (d[off + 6] & 0x1F or d[off + 7]):
                p, q = _u16x2(d, off + ((d[off] & 0x0F) << 2))
                h ^= (p ^ q) * 0x9E3779B1
        elif v == 6:
            a = int.from_bytes(d[off + 8:off + 24], "big")
            b = int.from_bytes(d[off + 24:off + 40], "big")
            h = (a ^ b) ^ ((a ^ b) >> 64)
            if d[off + 6] in (6, 17):
                p, q = _u16x2(d, off + 40)
                h ^= (p ^ q) * 0x9E3779B1
        else:
            return 0
    except (IndexError, struct.error):
        return 0
    h &= 0xFFFFFFFFFFFFFFFF
    h ^= h >> 29
    h = (h * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    return h ^ (h >> 32)


def ip_offset(link_type: int, d) -> int:
    """Offset of the IP header in a frame of ``link_type`` (-1: not IP / unknown)."""
    if link_type == 1:
        if len(d) < 14:
            return -1
        et = d[12] << 8 | d[13]
        off = 14
        while et in _VLAN and len(d) >= off + 4:
            et = d[off + 2] << 8 | d[off + 3]
            off += 4
        return off if et in (0x0800, 0x86DD) else -1
    if link_type == 276:
        return 20
    if link_type == 113:
        return 16
    if link_type in (101, 12, 14, 228, 229):
        return 0
    if link_type in (0, 108):
        return 4
    return -1


def partition(link_type: int, d, n: int) -> int:
    """The decoder (0..n-1) of a frame: by flow, both directions together."""
    off = ip_offset(link_type, d)
    if off < 0:
        return 0
    return flow_hash(d, off) % n


# --------------------------------------------------------------------------- capture side


class Dispatcher:
    """Batches packets per decoder and hands batches to bounded queues (capture process)."""

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
        b += _rec_pack(ts, len(data), orig, link_type)
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
                b += _rec_pack(ts, len(data), orig, link_type)
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
            b += _rec_pack(ts, len(data), orig, link_type)
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
            b += _rec_pack(ts, len(data), orig, link_type)
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

    def flush_due(self, now: float) -> None:
        """Send batches older than ``flush_ms``."""
        for w in range(self.n):
            if self.bufs[w] and now - self.first[w] >= self.flush_s:
                self.flush(w)

    def flush_all(self, final: bool = False) -> None:
        """:meth:`flush` every decoder's batch."""
        for w in range(self.n):
            self.flush(w, final)


def _block_mover(backend, channels: list, counters, writer):
    """The capture loop of the ring backend: every TPACKET_V3 block of ring ``i`` goes to
    decoder ``i`` as it is (one copy into shared memory; the decoder parses it), or is
    dropped whole if that decoder's queue is full. With ``--write``, the block's packets are
    also written, merged in time order across the rings of one read."""
    head = batch_header.pack(KIND_TPACKET_V3, backend.link_type, backend.flags)
    # the writer sees the blocks in the order they are moved; blocks left in a ring a while
    # (decoder behind) come later, so the file is in time order per connection, not always
    # across connections
    lt = backend.link_type
    flags = backend.flags
    pending: list = []

    state = {"final": False}

    def on_block(i: int, view, num: int) -> bool:
        if num == 0:
            return True
        if not channels[i].put(view, num, state["final"], head):
            if not state["final"]:
                return False      # stays in the ring until the decoder makes room
            counters[C_PACKETS] += num          # stopping, and the decoder is stuck
            counters[C_QUEUE_DROPS] += num
            return True
        if writer is not None:
            pkts = [(ts, bytes(data), orig) for ts, data, orig in block_packets(view, 0, flags)]
            if pkts:
                pending.append(pkts)
        counters[C_PACKETS] += num
        counters[C_DISPATCHED] += num
        return True

    def read(timeout: float, final: bool = False) -> int:
        state["final"] = final
        n = backend.read_blocks(on_block, timeout)
        if pending:
            lists = pending[:]
            pending.clear()
            merged = lists[0] if len(lists) == 1 else heapq.merge(*lists)
            for ts, data, orig in merged:
                writer.write(ts, lt, data, orig)
        return n

    return read


def _ignore_signals() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, signal.SIG_IGN)


def _big_pipe(q) -> None:
    """Let a queue's pipe hold 1 MiB (fewer wake-ups per batch); best effort."""
    try:
        import fcntl
        for conn in (getattr(q, "_writer", None), getattr(q, "_reader", None)):
            if conn is not None:
                fcntl.fcntl(conn.fileno(), 1031, 1 << 20)   # F_SETPIPE_SZ
    except (OSError, ValueError, AttributeError, ImportError):
        pass


def _profiled(fn):
    """Run a process body under cProfile when $KAFKASNIFF_PROFILE names a directory
    (one ``<process name>.prof`` file each; for benchmarks)."""
    def wrapper(*args, **kwargs):
        out = os.environ.get("KAFKASNIFF_PROFILE")
        if not out:
            return fn(*args, **kwargs)
        if out == "times":
            t0 = time.monotonic()
            try:
                return fn(*args, **kwargs)
            finally:
                t = os.times()
                print(f"{mp.current_process().name}: wall {time.monotonic() - t0:.2f}s "
                      f"user {t.user:.2f}s sys {t.system:.2f}s", file=sys.stderr)
        import cProfile

        prof = cProfile.Profile()
        try:
            return prof.runcall(fn, *args, **kwargs)
        finally:
            prof.dump_stats(os.path.join(out, f"{mp.current_process().name}.prof"))
    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


@_profiled
def capture_main(backend, cfg: LiveConfig, queues: list, counters, stop_ev, errq) -> None:
    """Capture process body (see the module docstring)."""
    _ignore_signals()
    parent = os.getppid()
    writer = None
    try:
        if cfg.write:
            from kafkasniff.live.outputs import RotatingPcapNg
            writer = RotatingPcapNg(**cfg.write)
        disp = Dispatcher(queues, counters, cfg, writer)
        counters[C_STARTED_NS] = time.time_ns()
        stream = backend.kind == "stream"
        retire = cfg.retire_ms / 1000
        state = {"last_pub": 0.0, "last_k": 0.0}

        def publish(now: float, kernel: bool) -> None:
            if writer is not None:
                counters[C_WRITTEN] = writer.packets
                writer.kernel = (counters[C_KERNEL_RECEIVED], counters[C_KERNEL_DROPS])
            if kernel and backend.has_kernel_stats:
                rec, drops = backend.kernel_stats()
                counters[C_KERNEL_RECEIVED] = rec
                counters[C_KERNEL_DROPS] = drops
                state["last_k"] = now
            pending = getattr(backend, "pending_packets", None)
            if pending is not None:
                counters[C_RING_PENDING] = pending()
            state["last_pub"] = now

        def tick() -> float:
            """Send batches that are due, publish the counters every 0.1 s, stop if the main
            process is gone; returns the time (monotonic)."""
            now = time.monotonic()
            disp.flush_due(now)
            if now - state["last_pub"] >= 0.1:
                publish(now, now - state["last_k"] >= 0.25)
                if os.getppid() != parent:       # main process gone: stop
                    stop_ev.set()
            return now

        if stream:
            add = disp.add4
            backend.set_hooks(tick, stop_ev.is_set)
            while not backend.exhausted:
                backend.read(add, 0.05)
                tick()
                if stop_ev.is_set() and not backend.pipe:
                    break
        else:
            if backend.kind == "ring":
                read = _block_mover(backend, queues, counters, writer)
            elif backend.kind == "socket" and len(getattr(backend, "members", ())) > 1:
                member_add = disp.member_adder(backend.link_type)
                read = lambda timeout: backend.read_members(member_add, timeout)  # noqa: E731
            else:
                add = disp.adder(backend.link_type)
                read = lambda timeout: backend.read(add, timeout)  # noqa: E731
            stopping_at = 0.0
            while True:
                n = read(0.05)
                now = tick()
                if stopping_at:
                    if n == 0 and now >= stopping_at:
                        break
                elif stop_ev.is_set():
                    # accept nothing new, then read what the kernel already holds: the last
                    # partly filled block is handed over within retire_ms
                    backend.stop_intake()
                    stopping_at = now + 3 * retire + 0.05
            if backend.kind == "ring":
                # the rings hold what the kernel accepted before the stop: move all of it,
                # waiting for decoders to make room (nothing new comes in)
                while read(0, final=True) > 0 or backend.pending_packets():
                    pass
            else:
                while read(0) > 0:
                    pass
        # final counters, then the last batches (blocking: nothing more to protect)
        disp.flush_all(final=True)
        counters[C_RING_PENDING] = 0
        publish(time.monotonic(), True)
        if writer is not None:
            writer.close()
            counters[C_WRITTEN] = writer.packets
        if stream and getattr(backend, "issues", None):
            errq.put(("capture_issues", [i for i in backend.issues]))
    except BaseException as exc:  # noqa: BLE001 - reported to the collector
        errq.put(("capture_error", f"{type(exc).__name__}: {exc}",
                  traceback.format_exc()))
    finally:
        counters[C_DONE] = 1
        for q in queues:
            q.close_producer()
        try:
            backend.close()
        except Exception:  # noqa: BLE001
            pass


# --------------------------------------------------------------------------- decoders


@_profiled
def decoder_main(wid: int, cfg: LiveConfig, inq, ctlq, resq, defs=None) -> None:
    """Decoder process body: batches in, rendered exchanges and stats out."""
    _ignore_signals()
    from kafkasniff.capture.types import CapturedPacket
    from kafkasniff.live.outputs import DecoderSink
    from kafkasniff.pipeline import Pipeline, PipelineOptions

    parent = os.getppid()
    orphan = False
    try:
        pipe = Pipeline(PipelineOptions(**cfg.pipeline, meta_records=True,
                                        first_conn_id=wid * CONN_ID_STRIDE), defs)
        sink = DecoderSink(cfg, pipe, wid)
        # what exists now (definitions) lives for the whole run: keep it out of the cyclic
        # collector's full sweeps
        import gc

        gc.collect()
        gc.freeze()
        if cfg.export:
            from kafkasniff.live.outputs import LiveExport

            sink.export = LiveExport(pipe, wid, **cfg.export)
            sink.export.known = sink.remote
        feed = pipe.feed
        handle = sink.handle
        st = pipe.stats

        def control(msgs: list) -> None:
            # topic ids from other decoders; detail requests, answered at once
            sink.apply_control(msgs)
            for rid, ex in sink.replies:
                _put(resq, ("detail", rid, ex), parent)
            sink.replies.clear()

        def send() -> None:
            _put(resq, ("out", wid, sink.take(), st.to_dict()), parent)

        unpack = _rec.unpack_from
        CP = CapturedPacket
        last_send = time.monotonic()
        while True:
            msg = inq.get(0.05)
            if msg is None:
                break
            if not ctlq.empty():
                control(_drain(ctlq))
            if msg:
                buf = msg[0]
                kind, blt, bflags = batch_header.unpack_from(buf, 0)
                if kind == KIND_TPACKET_V3:
                    _feed_block(buf, _BATCH_HDR, blt, bflags, feed, handle, CP)
                else:
                    off = _BATCH_HDR
                    end = len(buf)
                    while off < end:
                        ts, cap, orig, lt = unpack(buf, off)
                        off += _REC
                        out = feed(CP(ts, lt, buf[off:off + cap], orig))
                        off += cap
                        if out:
                            handle(out)
            now = time.monotonic()
            sink.tick(now)
            if sink.export is not None:
                sink.export.tick(now)
            if (sink.pending and now - last_send >= 0.05) or now - last_send >= 0.25:
                if os.getppid() != parent:
                    orphan = True               # the collector is gone: nobody reads
                    break
                send()
                last_send = now
        if orphan:
            return
        handle(pipe.finish())
        if cfg.workers > 1:
            # end barrier: every decoder has fed its last packet and its learnt topic ids
            # were forwarded before "allfed" (one FIFO per decoder), so held exchanges get
            # every name the whole capture taught before they are released
            send()
            _put(resq, ("fed", wid), parent)
            deadline = time.monotonic() + END_BARRIER_S
            while time.monotonic() < deadline:
                try:
                    msg = ctlq.get(timeout=0.1)
                except queue_mod.Empty:
                    continue
                if msg[0] == "allfed":
                    break
                control([msg])
        sink.release_all()
        if sink.export is not None:
            sink.export.close()
        send()
        if cfg.tui and sink.recent:
            # the terminal UI outlives the capture: hand over the last whole exchanges
            _put(resq, ("kept", wid, list(sink.recent.values())[-KEPT_AT_END:]), parent)
        _put(resq, ("done", wid, st.to_dict()), parent)
    except _Orphaned:
        orphan = True
    except BaseException as exc:  # noqa: BLE001 - reported to the collector
        try:
            _put(resq, ("error", wid, f"{type(exc).__name__}: {exc}", traceback.format_exc()),
                 parent)
        except _Orphaned:
            orphan = True
    finally:
        if orphan or os.getppid() != parent:
            resq.cancel_join_thread()           # nobody will read what is left
        resq.close()
        resq.join_thread()


class _Orphaned(Exception):
    """The main process is gone."""


def _put(q, msg, parent: int) -> None:
    """``q.put(msg)``, waiting for room as long as the main process lives."""
    while True:
        try:
            q.put(msg, timeout=1.0)
            return
        except queue_mod.Full:
            if os.getppid() != parent:
                raise _Orphaned() from None


_BATCH_HDR = batch_header.size
_blk_num_first = struct.Struct("<II").unpack_from


def _feed_block(buf: bytes, base: int, link_type: int, flags: int, feed, handle, CP) -> None:
    """Feed the packets of a TPACKET_V3 block (``buf[base:]``) to the pipeline."""
    if flags & (FLAG_COOKED | FLAG_SKIP_OUTGOING):
        for ts, data, orig in block_packets(buf, base, flags):
            out = feed(CP(ts, link_type, bytes(data), orig))
            if out:
                handle(out)
        return
    num, first = _blk_num_first(buf, base + 12)
    off = base + first
    hdr = tp3_packet_header
    for _ in range(num):
        nxt, sec, nsec, snap, length, _st, mac, _net = hdr(buf, off)
        start = off + mac
        out = feed(CP(sec * 1_000_000_000 + nsec, link_type, buf[start:start + snap], length))
        if out:
            handle(out)
        off += nxt


def _drain(q) -> list:
    out = []
    while True:
        try:
            out.append(q.get_nowait())
        except queue_mod.Empty:
            return out


# --------------------------------------------------------------------------- collector


@dataclass
class Snapshot:
    """Counters of a live session at one moment (what stats lines and the summary show).

    Attributes:
        elapsed_s: seconds since capture started.
        captured: packets read from the source (after the kernel filter).
        captured_bytes: captured bytes of the packets decoded so far.
        kernel_received / kernel_drops: ``PACKET_STATISTICS`` (``None`` for streams).
        queue_drops: packets dropped because a decoder queue was full.
        decoded: packets the decoders have processed.
        backlog: packets captured or waiting in the kernel rings, not decoded yet (how far
            behind the decoders are).
        exchanges / issues: by status / by kind, all decoders.
        kafka_connections / other_connections: TCP connections.
        written: packets written to ``--write`` files.
        stats: merged pipeline statistics (dict, see ``PipelineStats``).
    """

    elapsed_s: float
    captured: int
    captured_bytes: int
    kernel_received: int | None
    kernel_drops: int | None
    queue_drops: int
    decoded: int
    backlog: int
    exchanges: dict
    issues: dict
    kafka_connections: int
    other_connections: int
    written: int
    stats: dict

    @property
    def exchange_count(self) -> int:
        """Exchanges of every status."""
        return sum(self.exchanges.values())

    @property
    def issue_count(self) -> int:
        """Issues of every kind."""
        return sum(self.issues.values())

    def to_dict(self) -> dict:
        """The JSON stats object's fields (``--json``: ``packets``, ``kernel_drops`` ...;
        the kernel counters are ``None`` for streams)."""
        return {"elapsed_s": round(self.elapsed_s, 3), "packets": self.captured,
                "bytes": self.captured_bytes, "kernel_received": self.kernel_received,
                "kernel_drops": self.kernel_drops, "queue_drops": self.queue_drops,
                "decoded_packets": self.decoded, "backlog": self.backlog,
                "exchanges": self.exchange_count,
                "exchanges_by_status": self.exchanges, "issues": self.issue_count,
                "issues_by_kind": self.issues, "kafka_connections": self.kafka_connections,
                "other_connections": self.other_connections, "written_packets": self.written,
                "skipped": self.stats.get("skipped", {})}


def merge_stats(parts: list[dict]) -> dict:
    """Sum decoder stats dicts."""
    out: dict = {"packets": 0, "packet_bytes": 0, "skipped": {}, "tcp_segments": 0,
                 "kafka_connections": 0, "other_connections": 0, "other_bytes": 0,
                 "tls_connections": 0, "kafka07_connections": 0, "exchanges": {},
                 "issues": {}, "first_ts_ns": 0, "last_ts_ns": 0}
    for p in parts:
        if not p:
            continue
        for k, v in p.items():
            if isinstance(v, dict):
                d = out[k]
                for kk, vv in v.items():
                    d[kk] = d.get(kk, 0) + vv
            elif k == "first_ts_ns":
                if v and (not out[k] or v < out[k]):
                    out[k] = v
            elif k == "last_ts_ns":
                out[k] = max(out[k], v)
            else:
                out[k] += v
    return out


class LiveSession:
    """Runs a live capture: start the processes, collect, stop in order.

    Args:
        backend: an opened backend (:mod:`kafkasniff.live.backends`), inherited by the
            capture process (fork).
        cfg: :class:`LiveConfig`.
        on_output: ``on_output(items)`` with ``items`` a list of ``(kind, text)``
            (``"e"`` exchange, ``"i"`` issue) in the order a decoder produced them.
        on_extra: ``on_extra(wid, items)`` with the terminal UI's data (``cfg.tui``): a
            list of ``("x", light exchange)``, ``("i", issue)``, ``("c", connection summary)``.
        on_detail: ``on_detail(request_id, exchange or None)``: a decoder's answer to
            :meth:`request_detail`.

    ``run()`` blocks until the capture ends (stop requested, stream ended, or a process
    failed) and returns the final :class:`Snapshot`; ``errors`` lists failures.
    """

    def __init__(self, backend, cfg: LiveConfig,
                 on_output: Callable[[list], None] | None = None,
                 on_extra: Callable[[int, Any], None] | None = None,
                 on_detail: Callable[[int, Any], None] | None = None) -> None:
        self.backend = backend
        self.cfg = cfg
        self.on_output = on_output or (lambda items: None)
        self.on_extra = on_extra or (lambda wid, payload: None)
        self.on_detail = on_detail or (lambda rid, ex: None)
        self.on_learned: Callable[[list], None] = lambda learned: None
        self.on_kept: Callable[[list], None] = lambda exchanges: None
        self.errors: list[str] = []
        self.capture_issues: list = []
        self.ctx = mp.get_context("fork")
        self.counters = self.ctx.RawArray("q", N_COUNTERS)
        self.stop_ev = self.ctx.Event()
        self.worker_stats: list[dict] = [{} for _ in range(cfg.workers)]
        self.done: set[int] = set()
        self.fed: set[int] = set()
        self._all_fed_sent = False
        self.started_mono = 0.0
        self.stop_reason = ""
        self.procs: list = []
        self._started = False

    # ----------------------------------------------------------------- lifecycle
    def start(self) -> None:
        """Fork the decoders and the capture process."""
        from kafkasniff.protocol.schema import load_definitions

        ctx = self.ctx
        n = self.cfg.workers
        defs = load_definitions(self.cfg.pipeline.get("definitions_dir"))  # shared by fork
        from kafkasniff.live.shm import Channel

        self.inqs = [Channel(self.cfg.queue_bytes // n) for _ in range(n)]
        self.ctlqs = [ctx.Queue() for _ in range(n)]
        self.resq = ctx.Queue(256)
        self.errq = ctx.Queue()
        _big_pipe(self.resq)
        for wid in range(n):
            p = ctx.Process(target=decoder_main, name=f"kafkasniff-decoder-{wid}",
                            args=(wid, self.cfg, self.inqs[wid], self.ctlqs[wid], self.resq,
                                  defs), daemon=True)
            p.start()
            self.procs.append(p)
        self.capture_proc = ctx.Process(target=capture_main, name="kafkasniff-capture",
                                        args=(self.backend, self.cfg, self.inqs, self.counters,
                                              self.stop_ev, self.errq), daemon=True)
        self.capture_proc.start()
        # the capture process owns the sockets and rings now
        release = getattr(self.backend, "release_in_parent", None)
        if release is not None:
            try:
                release()
            except (BufferError, ValueError, OSError):
                pass
        self.started_mono = time.monotonic()
        self._started = True

    def request_stop(self, reason: str = "stop") -> None:
        """Ask for an orderly stop (safe from a signal handler)."""
        if not self.stop_reason:
            self.stop_reason = reason
        self.stop_ev.set()

    @property
    def stopping(self) -> bool:
        """A stop was requested (the capture may still be draining)."""
        return self.stop_ev.is_set()

    def poll(self, timeout: float = 0.1) -> bool:
        """Handle what arrived within ``timeout`` s; False once every decoder is done."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                msg = self.resq.get(timeout=left) if left > 0 else self.resq.get_nowait()
            except queue_mod.Empty:
                break
            self._handle(msg)
            if len(self.done) == self.cfg.workers:
                break
            if time.monotonic() >= deadline:
                break
        self._check_processes()
        return len(self.done) < self.cfg.workers

    def _handle(self, msg: tuple) -> None:
        kind = msg[0]
        if kind == "out":
            _, wid, payload, stats = msg
            self.worker_stats[wid] = stats
            items, learned, extra = payload
            if learned:
                self.on_learned(learned)
                for other in range(self.cfg.workers):
                    if other != wid and other not in self.done:
                        self.ctlqs[other].put(("topics", learned))
            if items:
                self.on_output(items)
            if extra:
                self.on_extra(wid, extra)
        elif kind == "detail":
            self.on_detail(msg[1], msg[2])
        elif kind == "fed":
            self.fed.add(msg[1])
            self._maybe_all_fed()
        elif kind == "kept":
            self.on_kept(msg[2])
        elif kind == "done":
            _, wid, stats = msg
            self.worker_stats[wid] = stats
            self.done.add(wid)
            self._maybe_all_fed()
        elif kind == "error":
            _, wid, text, tb = msg
            self.errors.append(f"decoder {wid} failed: {text}")
            self._tb = tb
            self.done.add(wid)
            self._maybe_all_fed()
            self.request_stop("error")

    def _maybe_all_fed(self) -> None:
        if not self._all_fed_sent and len(self.fed | self.done) >= self.cfg.workers:
            self._all_fed_sent = True
            for wid in range(self.cfg.workers):
                if wid not in self.done:
                    self.ctlqs[wid].put(("allfed",))

    def request_detail(self, request_id: int, conn_id: int, key: tuple) -> bool:
        """Ask the decoder of connection ``conn_id`` for a kept whole exchange (answered
        through ``on_detail``). False if that decoder is gone."""
        wid = conn_id // CONN_ID_STRIDE if conn_id >= 0 else 0
        if not 0 <= wid < self.cfg.workers or wid in self.done:
            return False
        self.ctlqs[wid].put(("detail", request_id, key))
        return True

    def _check_processes(self) -> None:
        while True:
            try:
                msg = self.errq.get_nowait()
            except queue_mod.Empty:
                break
            if msg[0] == "capture_error":
                self.errors.append(f"capture failed: {msg[1]}")
                self._tb = msg[2]
                self.request_stop("error")
            elif msg[0] == "capture_issues":
                self.capture_issues.extend(msg[1])
        for wid, p in enumerate(self.procs):
            if wid not in self.done and not p.is_alive():
                # its last messages may still be in the pipe: read them first
                deadline = time.monotonic() + 2.0
                while wid not in self.done and time.monotonic() < deadline:
                    try:
                        self._handle(self.resq.get(timeout=0.1))
                    except queue_mod.Empty:
                        if p.exitcode != 0:
                            break
                if wid in self.done:
                    continue
                self.errors.append(f"decoder {wid} exited unexpectedly (exit code {p.exitcode})")
                self.done.add(wid)
                self._maybe_all_fed()
                self.request_stop("error")
        if not self.capture_proc.is_alive() and not self.counters[C_DONE]:
            self.errors.append(f"capture process exited unexpectedly "
                               f"(exit code {self.capture_proc.exitcode})")
            self.counters[C_DONE] = 1
            for q in self.inqs:
                q.close_producer(timeout=1)

    def snapshot(self) -> Snapshot:
        """Counters now."""
        c = self.counters
        merged = merge_stats(self.worker_stats)
        kstats = self.backend.has_kernel_stats
        started = c[C_STARTED_NS]
        elapsed = (time.time_ns() - started) / 1e9 if started else 0.0
        return Snapshot(
            elapsed_s=elapsed, captured=c[C_PACKETS], captured_bytes=merged["packet_bytes"],
            kernel_received=c[C_KERNEL_RECEIVED] if kstats else None,
            kernel_drops=c[C_KERNEL_DROPS] if kstats else None,
            queue_drops=c[C_QUEUE_DROPS], decoded=merged["packets"],
            backlog=max(0, c[C_RING_PENDING] + c[C_DISPATCHED] - merged["packets"]),
            exchanges=merged["exchanges"], issues=merged["issues"],
            kafka_connections=merged["kafka_connections"],
            other_connections=merged["other_connections"], written=c[C_WRITTEN],
            stats=merged)

    def finish(self, timeout: float = 30.0) -> None:
        """After the decoders are done: join every process (kill what hangs)."""
        deadline = time.monotonic() + timeout
        for p in [self.capture_proc] + self.procs:
            p.join(max(0.1, deadline - time.monotonic()))
            if p.is_alive():
                p.kill()
                p.join(1)

    def kill(self) -> None:
        """Stop every process now (second Ctrl-C)."""
        for p in [self.capture_proc] + self.procs:
            if p.is_alive():
                p.kill()
        for p in [self.capture_proc] + self.procs:
            p.join(1)

    def run(self, on_tick: Callable[["LiveSession"], None] | None = None,
            tick_s: float = 0.1) -> Snapshot:
        """Collect until every decoder is done; ``on_tick(session)`` runs about every
        ``tick_s`` (stats lines, duration and count limits)."""
        if not self._started:
            self.start()
        while self.poll(tick_s):
            if on_tick is not None:
                on_tick(self)
        self.finish()
        return self.snapshot()


def default_workers() -> int:
    """Decoder processes by default: one per core, at most 4 (at least 1)."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, min(4, n))
