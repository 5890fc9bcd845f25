"""The reader of ``--jobs N``: reads the captures, routes packets by connection to N decoder
processes, and merges what they finish into ``--jobs 1``'s order.

::

    capture files (pcap, pcapng, gzip, stdin)
      -> reader (this process): packet index, flow hash -> batches in shared memory
      -> decoder i (kafkasniff.parallel.worker): Pipeline, held records completed once every
         decoder has passed their packet (global connection ids, topic ids learnt elsewhere)
      -> reader: records merged by order key, issues under the capture_issues budget,
         the command's output; statistics merged at the end

The reader keeps the capture's clock: the index of each packet, idle-connection ticks once
per second of capture time (where ``--jobs 1`` looks for idle connections), the first and
last packet times, the capture files' own bytes and damage, and the pcapng Decryption
Secrets Blocks (sent to every decoder in place). After each round of batches every decoder
reports how far it has decoded, which connections it opened (by packet index) and which
topic ids it learnt; once all have passed a packet, the reader gives each decoder the global
ids of its connections opened up to there and forwards the others' topic ids
(:class:`~kafkasniff.parallel.wire.Control`). Memory stays bounded: the queues are bounded
and a decoder holds only the records of the packets between the slowest decoder and itself.

A decoder that fails or dies ends the run with :class:`DecoderFailed`; the reader never
waits on a dead decoder.
"""

from __future__ import annotations

import heapq
import multiprocessing as mp
import os
import pickle
import sys
from bisect import bisect_right
from dataclasses import dataclass, replace
from multiprocessing.connection import wait
from typing import Callable

from kafkasniff.capture.flows import router
from kafkasniff.capture.pcapfile import TLS_KEY_LOG_SECRETS, open_capture
from kafkasniff.errors import KafkaSniffError
from kafkasniff.feeding import EXPIRE_EVERY_NS
from kafkasniff.parallel.shm import Channel
from kafkasniff.parallel.wire import (
    END,
    END_INDEX,
    SECRETS,
    SOURCE,
    TICK,
    Control,
    batch_header,
    record_header,
)
from kafkasniff.parallel.worker import decoder_main
from kafkasniff.pipeline import IssueLister, PipelineOptions, PipelineStats

__all__ = ["DecoderFailed", "JobsResult", "default_jobs", "run_jobs"]

#: a decoder's batch is sent when it holds this many bytes (every decoder's batch goes then)
BATCH_BYTES = 256 * 1024
#: shared memory per decoder for batches not decoded yet (the reader is several times faster
#: than a decoder: a deeper queue only holds more records back, see worker.py)
QUEUE_BYTES = 4 << 20
#: shared memory per decoder for controls not read yet
CONTROL_BYTES = 4 << 20
#: how long the reader waits for a decoder that sent its results to end before terminating it
DONE_EXIT_S = 2.0
_LAST_KEY = (END_INDEX + 1,)


class DecoderFailed(KafkaSniffError):
    """A decoder process raised an exception or died; the run's output is incomplete."""


def default_jobs() -> int:
    """Decoder processes by default: the usable cores (at least 1)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


@dataclass
class JobsResult:
    """What :func:`run_jobs` returns.

    Attributes:
        stats: the whole capture's :class:`~kafkasniff.pipeline.PipelineStats` (every
            decoder's merged, the reader's time span, file bytes and secrets blocks).
        results: each decoder's :meth:`Output.result <kafkasniff.parallel.worker.Output>`,
            by decoder index.
    """

    stats: PipelineStats
    results: list


def decoder_options(options: PipelineOptions, jobs: int) -> PipelineOptions:
    """A decoder's pipeline options: the reader's clock, meta records on (topic ids and
    connections are shared), standalone issues all passed on (the reader applies the
    ``capture_issues`` budget in capture order), the capture-wide decompression and record
    budgets shared evenly."""
    b = options.budgets

    def share(v: int) -> int:
        return max(1, v // jobs) if v > 0 else 0

    return replace(options, external_clock=True, meta_records=True, first_conn_id=0,
                   budgets=replace(b, capture_issues=0,
                                   capture_uncompressed_bytes=share(
                                       b.capture_uncompressed_bytes),
                                   capture_records=share(b.capture_records)))


def run_jobs(sources: list, options: PipelineOptions, jobs: int, mode: str, spec: dict,
             on_item: Callable[[tuple], bool | None], on_progress=None,
             source_names: list[str] | None = None) -> JobsResult:
    """Decode ``sources`` (paths, ``"-"`` or binary file objects; one continuous capture)
    with ``jobs`` decoder processes.

    Args:
        options: the pipeline options, as for ``--jobs 1``.
        jobs: decoder processes (>= 1).
        mode / spec: what decoders do with completed records
            (:func:`kafkasniff.parallel.worker.make_output`: ``read``, ``stats``,
            ``export``).
        on_item: called in ``--jobs 1``'s order with each item decoders pass on:
            ``("e", text or None, bad)`` (``read``'s exchanges) and ``("i", issue, capture,
            conn_first_ts_ns, fallback_ts_ns)`` (standalone issues, after the
            ``capture_issues`` budget); returning True stops the run (``read -c``).
        on_progress: ``on_progress(bytes_read, total_bytes)`` every few thousand packets.
        source_names: the ``capture`` name of each source (``export``).

    Returns the merged statistics and each decoder's result; when ``on_item`` stopped the
    run, the statistics of the reader only and ``results`` empty.

    Raises:
        kafkasniff.errors.CaptureError: a source cannot be read.
        DecoderFailed: a decoder failed or died.
    """
    run = _Run(options, jobs, mode, spec, on_item)
    try:
        run.start()
        run.read(sources, on_progress, source_names)
        return run.finish()
    except _Stop:
        return JobsResult(run.stats, [])
    finally:
        run.close()


class _Stop(Exception):
    """``on_item`` asked to stop."""


class _Run:
    def __init__(self, options: PipelineOptions, jobs: int, mode: str, spec: dict,
                 on_item) -> None:
        self.options = options
        self.n = jobs
        self.mode = mode
        self.spec = spec
        self.on_item = on_item
        self.stats = PipelineStats()
        self.lister = IssueLister(options.budgets.limit("capture_issues"), self.stats)
        self.procs: list = []
        self.chans: list = []
        self.ctls: list = []
        self.recvs: list = []
        self.clock = [-1] * jobs            # each decoder's progress (packet index)
        self.sent_clock = [0] * jobs        # the clock of the last batch sent to each
        self.done_upto = [-1] * jobs        # records up to this index completed and sent
        self.items: list[list] = [[] for _ in range(jobs)]
        self.own: list = []                 # the reader's items (capture file damage)
        # the packet index of each connection a decoder opened and that has no global id yet
        # (those given one are dropped: a capture of a million connections kept them all)
        self.opens: list[list[int]] = [[] for _ in range(jobs)]
        self.assigned = [0] * jobs          # of opens[w], how many were given a global id
        self.next_gid = 0
        self.upto = -1
        self.pending: list[Control | None] = [None] * jobs
        self.results: list = [None] * jobs
        self.done = [False] * jobs
        self.stopped = False
        # TLS 1.2 sessions resumed on a new connection are decrypted with the master secret
        # of the connection that made them: with decryption on, all connections between
        # two hosts go to one decoder
        self.by_hosts = bool(options.tls_keylog or options.tls_keylog_text)
        self.dispatched = False             # the first packet was routed (first_route)
        self.route = None

    # ------------------------------------------------------------------ processes
    def start(self) -> None:
        from kafkasniff.protocol.schema import load_definitions

        defs = load_definitions(self.options.definitions_dir)   # shared by fork
        dopts = decoder_options(self.options, self.n)
        ctx = mp.get_context("fork")
        sys.stdout.flush()
        sys.stderr.flush()
        for w in range(self.n):
            chan = Channel(QUEUE_BYTES)
            ctl = Channel(CONTROL_BYTES)
            recv, send = ctx.Pipe(duplex=False)
            p = ctx.Process(target=decoder_main, name=f"kafkasniff-decoder-{w}",
                            args=(w, dopts, defs, self.mode, self.spec, chan, ctl, send),
                            daemon=True)
            p.start()
            send.close()
            self.procs.append(p)
            self.chans.append(chan)
            self.ctls.append(ctl)
            self.recvs.append(recv)

    def close(self) -> None:
        for w, p in enumerate(self.procs):
            if self.done[w]:
                # it sent its results and is ending by itself: a SIGTERM now would run its
                # failure path (abort the output, format a traceback) for nothing
                p.join(DONE_EXIT_S)
        for p in self.procs:
            if p.is_alive():
                p.terminate()
        for p in self.procs:
            p.join(2)
            if p.is_alive():
                p.kill()
                p.join(1)
        for r in self.recvs:
            r.close()
        for c in self.chans + self.ctls:
            for fd in (c.rfd, c.wfd):
                try:
                    os.close(fd)
                except OSError:
                    pass
            c.mm.close()

    def failed(self, w: int, why: str) -> DecoderFailed:
        return DecoderFailed(f"decoder process {w + 1} of {self.n} {why}: the output is "
                             f"incomplete")

    # ------------------------------------------------------------------ reading
    def read(self, sources: list, on_progress, names) -> None:
        n = self.n
        bufs = [bytearray(batch_header.size) for _ in range(n)]
        self.bufs = bufs
        pack = record_header.pack
        limit = BATCH_BYTES
        st = self.stats
        idx = -1
        next_expire = 0
        first_ts = 0
        ts = 0
        for si, src in enumerate(sources):
            if names is not None:
                self.broadcast(pack(0, len(names[si].encode()), 0, SOURCE, max(idx, 0)) +
                               names[si].encode())
            with open_capture(src, on_secrets=self.secrets) as packets:
                state = [idx, ts, first_ts, next_expire, 0]
                for code in packets.pack_records(self.first_route, bufs, TICK,
                                                 EXPIRE_EVERY_NS, state, limit, 0x1FFF):
                    if code & 1:
                        self.round(state[0])
                    if code & 2 and on_progress is not None:
                        on_progress(packets.bytes_read, packets.total_bytes)
                        self.service(0)
                idx, ts, first_ts, next_expire, _ = state
                self._source_end(packets, names, si, idx, ts)
        st.first_ts_ns = first_ts
        st.last_ts_ns = ts
        self.broadcast(pack(ts, 0, 0, END, max(idx, 0)))
        self.round(max(idx, 0))
        while not all(self.done):
            self.service(0.5)

    def first_route(self):
        """The route of every packet to its decoder (``None``: one decoder), made at the
        run's first packet: pcapng secrets blocks before it put all connections between
        two hosts on one decoder (see :meth:`secrets`)."""
        if not self.dispatched:
            self.dispatched = True
            self.route = router(self.n, not self.by_hosts) if self.n > 1 else None
        return self.route

    def _source_end(self, packets, names, si: int, idx: int, ts: int) -> None:
        """A capture file read to its end: its damage (issues) and its own bytes."""
        st = self.stats
        capture = names[si] if names is not None else ""
        for j, issue in enumerate(packets.issues):
            st.issues[issue.kind] += 1
            self.own.append(((max(idx, 0), 2, 0, j), ("f", issue, capture, None, ts)))
        st.account_source(packets.accounting())

    def secrets(self, secrets_type: int, data: bytes) -> None:
        """A pcapng Decryption Secrets Block: every decoder gets it in place."""
        if secrets_type == TLS_KEY_LOG_SECRETS:
            self.stats.tls_secrets_blocks += 1
            if not self.dispatched:
                self.by_hosts = True        # before the first packet: see read()
        body = secrets_type.to_bytes(4, "little") + bytes(data)
        self.broadcast(record_header.pack(0, len(body), 0, SECRETS, 0) + body)

    def broadcast(self, rec: bytes) -> None:
        for b in self.bufs:
            b += rec

    def round(self, clock: int) -> None:
        """Send every decoder its batch, stamped with ``clock``."""
        for w, b in enumerate(self.bufs):
            batch_header.pack_into(b, 0, clock)
            self.put(w, b)
            self.sent_clock[w] = clock
            del b[batch_header.size:]
        self.service(0)

    def put(self, w: int, batch) -> None:
        chan = self.chans[w]
        if len(batch) > chan.capacity:
            raise KafkaSniffError(f"a batch of {len(batch)} bytes does not fit the decoder "
                                  f"queue ({chan.capacity} bytes)")
        while not chan.put(batch, 0, False):
            self.service(0.01)

    # ------------------------------------------------------------------ decoders' reports
    def service(self, timeout: float) -> None:
        """Read the decoders' reports (waiting up to ``timeout`` seconds for one), send the
        controls due and hand over the items that are in order."""
        live = [r for w, r in enumerate(self.recvs) if not self.done[w]]
        if not live:
            return
        ready = wait(live, timeout)
        for r in ready:
            w = self.recvs.index(r)
            try:
                msg = pickle.loads(r.recv_bytes())
            except (EOFError, OSError):
                self.procs[w].join(1)
                code = self.procs[w].exitcode
                why = f"was killed by signal {-code}" if code is not None and code < 0 else \
                    f"exited unexpectedly (exit code {code})"
                raise self.failed(w, why) from None
            self.handle(msg)
        if not ready:
            for w, p in enumerate(self.procs):
                if not self.done[w] and not p.is_alive() and not self.recvs[w].poll():
                    raise self.failed(w, f"exited unexpectedly (exit code {p.exitcode})")
        self.send_controls()
        self.emit_ready()

    def handle(self, msg: tuple) -> None:
        kind, w = msg[0], msg[1]
        if kind == "progress":
            _, _, clock, opens, learned, items, upto = msg
            self.clock[w] = clock
            self.opens[w].extend(opens)
            if learned:
                for v in range(self.n):
                    if v != w:
                        self.control(v).learned.extend(learned)
            if items:
                self.items[w].extend(items)
            self.done_upto[w] = upto
            self.advance()
        elif kind == "done":
            _, _, stats, result = msg
            self.done[w] = True
            self.results[w] = (stats, result)
        elif kind == "error":
            _, _, message, tb = msg
            sys.stderr.write(tb)
            raise self.failed(w, f"failed ({message})")

    def control(self, w: int) -> Control:
        c = self.pending[w]
        if c is None:
            c = self.pending[w] = Control(self.upto)
        return c

    def advance(self) -> None:
        """Every decoder passed packet ``min(clock)``: give out the global ids of the
        connections opened up to it, in the order of their packets."""
        upto = min(self.clock)
        if upto <= self.upto:
            return
        self.upto = upto
        heads = []
        for w in range(self.n):
            ops = self.opens[w]
            a = self.assigned[w]
            if a < len(ops) and ops[a] <= upto:
                heads.append((ops[a], w))
        heapq.heapify(heads)
        new: list[list[int]] = [[] for _ in range(self.n)]
        while heads:
            _, w = heapq.heappop(heads)
            new[w].append(self.next_gid)
            self.next_gid += 1
            a = self.assigned[w] = self.assigned[w] + 1
            ops = self.opens[w]
            if a < len(ops) and ops[a] <= upto:
                heapq.heappush(heads, (ops[a], w))
        for w in range(self.n):
            c = self.control(w)
            c.upto = upto
            c.conn_ids.extend(new[w])
            if self.assigned[w]:
                del self.opens[w][:self.assigned[w]]
                self.assigned[w] = 0

    def send_controls(self) -> None:
        for w, c in enumerate(self.pending):
            if c is None or self.done[w]:
                continue
            body = pickle.dumps(c, protocol=pickle.HIGHEST_PROTOCOL)
            if len(body) > self.ctls[w].capacity:
                raise KafkaSniffError(f"a control message of {len(body)} bytes does not fit "
                                      f"the control queue")
            if self.ctls[w].put(body, 0, False):
                self.pending[w] = None

    # ------------------------------------------------------------------ merging
    def emit_ready(self) -> None:
        """Hand over, in order, the items every decoder has completed."""
        upto = min(self.done_upto)
        if upto < 0:
            return
        cut_key = (upto, 9, END_INDEX, END_INDEX)
        streams = []
        for q in self.items + [self.own]:
            if q:
                k = bisect_right(q, cut_key, key=_key)
                if k:
                    streams.append(q[:k])
                    del q[:k]
        if not streams:
            return
        merged = streams[0] if len(streams) == 1 else heapq.merge(*streams, key=_key)
        deliver = self.deliver
        for _, item in merged:
            if deliver(item):
                raise _Stop

    def deliver(self, item: tuple):
        kind = item[0]
        if kind == "i":
            issue = item[1]
            if self.lister.count(issue.kind):
                kept = self.lister.over_budget([issue])
                if not kept:
                    return None
                item = (kind, kept[0]) + item[2:]
        elif kind == "f":
            item = ("i",) + item[1:]
        return self.on_item(item)

    def finish(self) -> JobsResult:
        self.emit_ready()
        for stats, _ in self.results:
            self.stats.merge(stats)
        return JobsResult(self.stats, [r for _, r in self.results])


def _key(entry: tuple) -> tuple:
    return entry[0]
