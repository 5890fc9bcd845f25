"""What the parts of the live engine share: :class:`LiveConfig`, the capture process's
shared counter slots, connection-id ranges, end-of-capture limits, :func:`default_workers`.

See :mod:`kafkasniff.live` for how the parts fit together.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

__all__ = [
    "CONN_ID_STRIDE",
    "C_DISPATCHED",
    "C_DONE",
    "C_KERNEL_DROPS",
    "C_KERNEL_RECEIVED",
    "C_PACKETS",
    "C_PACKETS_AT_STATS",
    "C_QUEUE_DROPS",
    "C_RING_PENDING",
    "C_STARTED_NS",
    "C_WRITTEN",
    "END_BARRIER_S",
    "KEPT_AT_END",
    "LiveConfig",
    "N_COUNTERS",
    "default_workers",
]

#: decoder ``i`` numbers its TCP connections from ``i * CONN_ID_STRIDE``
CONN_ID_STRIDE = 1_000_000_000
#: whole exchanges each decoder hands to the terminal UI when the capture ends
KEPT_AT_END = 1000
#: at the end, how long a decoder waits for the others before releasing held exchanges
END_BARRIER_S = 10.0

# shared counters written by the capture process (int64 slots of a RawArray("q", N_COUNTERS))
C_PACKETS = 0          # packets read from the backend
C_KERNEL_RECEIVED = 1  # accepted by the filter (PACKET_STATISTICS tp_packets)
C_KERNEL_DROPS = 2     # dropped by the kernel, ring or buffer full (tp_drops)
C_QUEUE_DROPS = 3      # packets in batches a full decoder queue could not take
C_DISPATCHED = 4       # packets handed to decoder queues
C_DONE = 5             # 1: the capture process has finished (sentinels sent)
C_WRITTEN = 6          # packets written to --write files
C_STARTED_NS = 7       # wall clock when capture started
C_RING_PENDING = 8     # packets waiting in the kernel rings (blocks handed over, not moved)
C_PACKETS_AT_STATS = 9  # C_PACKETS when the kernel counters were last read (just before)
N_COUNTERS = 10


@dataclass
class LiveConfig:
    """Everything the engine needs (built by the ``live`` command).

    Attributes:
        workers: decoder processes.
        batch_bytes / flush_ms: a batch goes to its decoder when this big (bytes) or this
            old (milliseconds).
        queue_bytes: shared memory for packets waiting for the decoders (bytes, all decoders);
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
        topic_hold_s: how long an exchange with unknown topic ids waits for another decoder
            (seconds).
        write: ``--write`` settings (path, ring files, file size) or ``None``.
        retire_ms: ring block timeout in milliseconds (also the drain wait at stop).
        metrics: ``--metrics-port``: the settings decoders count metrics with
            (:meth:`kafkasniff.metrics.families.ExchangeMetrics.settings`), or ``None``.
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
    metrics: dict | None = None


def default_workers() -> int:
    """Decoder processes by default: one per core, at most 4 (at least 1)."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, min(4, n))
