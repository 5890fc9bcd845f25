"""The capture process of the live engine: it only moves bytes.

With the ring backend the kernel has already partitioned packets by flow (one TPACKET_V3
ring per decoder), and each retired block of ring ``i`` is copied as it is into decoder
``i``'s shared-memory channel (:func:`_block_mover`); a block whose channel is full stays
in its ring until there is room. With the plain socket backend and with pcap streams,
packets go through a :class:`~kafkasniff.live.dispatch.Dispatcher` (batches, queue drops).
It also writes ``--write`` pcapng files, publishes its counters in shared memory, and at
stop swaps in a drop-everything filter and drains what the kernel already holds.

See :mod:`kafkasniff.live` for how the parts fit together.
"""

from __future__ import annotations

import heapq
import os
import time
import traceback

from kafkasniff.live.backends import KIND_TPACKET_V3, batch_header, block_packets
from kafkasniff.live.config import (C_DISPATCHED, C_DONE, C_KERNEL_DROPS, C_KERNEL_RECEIVED,
                                    C_PACKETS, C_PACKETS_AT_STATS, C_QUEUE_DROPS,
                                    C_RING_PENDING, C_STARTED_NS, C_WRITTEN, LiveConfig)
from kafkasniff.live.dispatch import Dispatcher
from kafkasniff.live.messages import CaptureFailed
from kafkasniff.live.procs import ignore_signals, profiled

__all__ = ["capture_main"]


@profiled
def capture_main(backend, cfg: LiveConfig, queues: list, counters, stop_ev, errq) -> None:
    """Capture process body: read packets from ``backend`` until ``stop_ev`` is set (then
    drain what the kernel holds) or the stream ends, hand them to the decoders' channels,
    write ``--write`` files, publish the counters.

    Args:
        backend: an opened backend (:mod:`kafkasniff.live.backends`), inherited by fork.
        cfg: the :class:`~kafkasniff.live.config.LiveConfig`.
        queues: one :class:`kafkasniff.parallel.shm.Channel` per decoder (closed at the end,
            which ends the decoders).
        counters: the shared int64 counters (``C_*`` of :mod:`kafkasniff.live.config`),
            written here about every 0.1 s (the kernel's with them); ``C_DONE`` is
            set to 1 when the process ends, whatever the reason.
        stop_ev: the stop event (set by the collector; set here too when the main process
            disappears).
        errq: the error queue: :class:`~kafkasniff.live.messages.CaptureFailed` when this
            body raises (nothing propagates). The damage of a ``-r`` stream and its own bytes
            go to decoder 0 (:meth:`~kafkasniff.live.dispatch.Dispatcher.add_source_end`).
    """
    ignore_signals()
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
        state = {"last_pub": 0.0}
        if writer is not None and backend.has_kernel_stats:
            # each file's statistics blocks read the kernel's counters when it is closed:
            # after every packet it holds was read, so they never count fewer
            writer.kernel_stats = backend.kernel_stats

        def publish(now: float) -> None:
            """The counters as of one moment: the kernel's are read after the packets were
            counted (``C_PACKETS_AT_STATS``), so that received >= packets in every stats
            line, as in the final summary."""
            packets = counters[C_PACKETS]
            if backend.has_kernel_stats:
                rec, drops = backend.kernel_stats()
                counters[C_KERNEL_RECEIVED] = rec
                counters[C_KERNEL_DROPS] = drops
            counters[C_PACKETS_AT_STATS] = packets
            if writer is not None:
                counters[C_WRITTEN] = writer.packets
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
                publish(now)
                if os.getppid() != parent:       # main process gone: stop
                    stop_ev.set()
            return now

        if stream:
            add = disp.add4
            backend.set_hooks(tick, stop_ev.is_set)
            backend.on_secrets = disp.add_secrets
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
                    tick()          # the counters stay current (the stop's progress lines)
            else:
                while read(0) > 0:
                    tick()
        if stream:
            # as read does at the end of a file: the stream's damage and its own bytes
            disp.add_source_end(*backend.source_end())
        # final counters, then the last batches (blocking: nothing more to protect)
        disp.flush_all(final=True)
        if writer is not None:
            writer.close()
        publish(time.monotonic())
        counters[C_RING_PENDING] = 0
    except BaseException as exc:  # noqa: BLE001 - reported to the collector
        errq.put(CaptureFailed(f"{type(exc).__name__}: {exc}", traceback.format_exc()))
    finally:
        counters[C_DONE] = 1
        for q in queues:
            q.close_producer()
        try:
            backend.close()
        except Exception:  # noqa: BLE001
            pass


def _block_mover(backend, channels: list, counters, writer):
    """The capture loop of the ring backend: every TPACKET_V3 block of ring ``i`` goes to
    decoder ``i`` as it is (one copy into shared memory; the decoder parses it). A block
    whose decoder queue is full stays in its ring until there is room; only in the final
    drain (stopping) is a block its stuck decoder cannot take dropped whole (queue drops).
    With ``--write``, the block's packets are also written, merged in time order across the
    rings of one read. Returns ``read(timeout, final=False) -> blocks read``."""
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
