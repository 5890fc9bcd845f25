"""The decode pipeline: packets in, records out. It only composes the stages.

``Pipeline`` is sans-IO (fed :class:`~kafkasniff.capture.types.CapturedPacket` objects);
:func:`analyze` drives it from capture files. Stages (docs/architecture.md)::

    CapturedPacket -> capture.packet.decode_frame     -> TcpSegment | Skipped
      -> tcp.reassembly.TcpReassembler                 -> StreamData | StreamGap | StreamClosed
           (both per packet in feeding.PacketFeeder, which hands an in-order chunk of a
           Kafka connection straight to it and every other event back here)
      -> classify.Classifier (per connection)          -> Kafka | Kafka 0.7 | TLS | other
      -> pairing.KafkaConnection / Kafka07Connection   -> Exchange | DecodeIssue
           (framing, pairing; content.ContentDecoder decodes each frame)
         tls.TlsConnection                             -> tls_connection issue

Per open TCP connection the pipeline keeps one state in :attr:`Pipeline.connections`
(undecided, Kafka, Kafka 0.7, TLS, other), keyed by connection id; nothing else.
"""

from __future__ import annotations

import gc
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Union

from kafkasniff.capture.types import CapturedPacket
from kafkasniff.classify import DEFAULT_PORTS, Classifier, FirstBytes
from kafkasniff.content.budgets import BudgetMeter, Budgets
from kafkasniff.content.summary import TopicRegistry
from kafkasniff.feeding import PacketFeeder
from kafkasniff.issues import IssueKind, Severity
from kafkasniff.model import (
    ConnectionKind,
    ConnectionSummary,
    DecodeIssue,
    Exchange,
    Record,
    TopicName,
)
from kafkasniff.pairing.base import PairingContext
from kafkasniff.pairing.connection import KafkaConnection
from kafkasniff.pairing.legacy07 import Kafka07Connection
from kafkasniff.protocol.framing import DEFAULT_MAX_FRAME_BYTES
from kafkasniff.protocol.schema import Definitions, load_definitions
from kafkasniff.tcp.reassembly import TcpReassembler
from kafkasniff.tcp.types import StreamClosed, StreamData, StreamGap, TcpConnection
from kafkasniff.tls.connection import TlsConnection, client_hello_direction
from kafkasniff.tls.decrypt import AppData

#: keys of :attr:`PipelineStats.bytes` for bytes understood: the headers of the capture file,
#: its records and blocks; link/IP/TCP headers (and link padding); Kafka frames (size prefix
#: included, as far as captured before a gap)
DECODED_BYTES = ("capture_format", "packet_headers", "kafka_frames", "tls_decrypted")
#: keys of :attr:`PipelineStats.bytes` for bytes skipped, each its own reason: packets that
#: are not TCP (by the reasons of ``skipped``), TCP payload already seen (retransmissions) or
#: after a connection ended, TCP connections that carry no Kafka, TLS connections, bytes
#: skipped finding a Kafka frame boundary, captured after a gap inside a frame, a frame size
#: prefix cut by the end of its stream, pcapng blocks not read, damaged packet records, the
#: rest of a file after damage stopped reading
SKIPPED_BYTES = ("packets_not_tcp", "tcp_retransmitted", "tcp_ignored", "non_kafka", "tls",
                 "kafka_resync", "kafka_after_gap", "kafka_truncated", "pcapng_blocks",
                 "damaged_records", "unread")


#: the collector's generation-0 threshold of a decoding process (CPython's default: 700)
DECODE_GC_THRESHOLD = 50_000


def tune_gc_for_decoding() -> None:
    """Let this process's cyclic garbage collector run about 70 times less often.

    Decoding allocates millions of short-lived containers (decoded bodies, exchanges, export
    rows). With CPython's default generation-0 threshold (700 allocations net of frees) the
    collector made 1,161 young and 9 full collections in ``stats`` of
    ``bench/data/big.pcap``, each full one traversing every live container (open
    connections, waiting requests, export's buffered rows): 1.6-2.0 s of a 28 s run, and
    6.0 s of a 49 s ``export``. At 10,000 it took 0.75 s and 2.2 s, and with the
    per-connection reference cycles gone too (a closed connection frees its state), 0.1 s
    and 1.6 s (docs/performance.md). The threshold is now 50,000: a ``--jobs`` decoder
    holds what it decoded until every decoder has passed its packet, and each young
    collection traversed those held exchanges again (0.35-0.65 s of a decoder's 5-7 s in
    ``stats --jobs 2`` of a 200,000-packet replayed capture, 0.04-0.4 s at 50,000; an
    ``export --jobs 1`` of it 0.34-0.43 s, 0.09-0.11 s). Decoding makes almost no cyclic
    garbage (about 1,500 objects collected in that whole export, most at start-up), so a
    larger young generation costs no memory worth counting. The thresholds of generations
    1 and 2 are kept, so cyclic garbage is still collected, in larger steps.

    Called by the command line (every command runs in a process of its own, and the
    ``--jobs`` and live decoder processes it forks inherit it) and by ``spark decode``'s
    tasks in their Python workers; a library user's process is left as it is. A threshold
    already higher, or a disabled collector (threshold 0), is left as it is.
    """
    g0, g1, g2 = gc.get_threshold()
    if 0 < g0 < DECODE_GC_THRESHOLD:
        gc.set_threshold(DECODE_GC_THRESHOLD, g1, g2)


@dataclass(slots=True)
class PipelineOptions:
    """Pipeline settings.

    Attributes:
        ports: broker ports; a connection with one endpoint on such a port is Kafka.
        detect: also recognise Kafka on any port by its request headers.
        max_frame_bytes: largest accepted Kafka frame payload (default 100 MiB).
        max_pending: requests waiting for a response per connection before the oldest is
            given up.
        max_connections: TCP connections tracked at once (least recently active evicted);
            with the other bounds this caps memory (see docs/architecture.md, "Memory").
        idle_timeout_s: connections idle this long (capture time) are closed.
        max_ooo_bytes: out-of-order bytes buffered per direction before declaring a gap.
        definitions_dir: generated definitions to use (``None``: the installed ones).
        with_records: decode every record (keys, values, headers) of record batches, not only
            the batch headers (``read --records``, ``export --records``).
        max_uncompressed_bytes: bound on one batch's decompressed size (default 64 MiB).
        show_secrets: keep SASL passwords, proofs and tokens instead of redacting them.
        wire_format: ``"auto"`` (recognise Kafka 0.8+ and the 0.7 wire format), ``"modern"``
            (0.8+ only) or ``"0.7"`` (force the pre-0.8 format).
        meta_records: also yield a :class:`ConnectionSummary` when each TCP connection ends
            and a :class:`TopicName` when a topic id is first seen with its name (exports).
        first_conn_id: id of the first connection (parallel decoders use disjoint ranges).
        budgets: decompressed bytes, decoded records, issues and pending-request bytes per
            frame and per capture (:class:`kafkasniff.content.budgets.Budgets`, documented
            defaults); what was spent and skipped is in :attr:`PipelineStats.budgets`.
        external_clock: idle connections are not looked for as packets are fed; the caller
            calls :meth:`Pipeline.expire` instead (the decoders of ``--jobs N``, which see
            only their share of the packets, expire on the reader's clock).
        tls_keylog: NSS key log files: TLS connections whose secrets they hold are decrypted
            and their Kafka decoded like plaintext (:mod:`kafkasniff.tls.decrypt`); the files
            are read again for new lines as connections need keys.
        tls_keylog_text: key log text, added to the files' (``spark decode`` reads the
            files on the driver and ships their text to the executors this way).
        tls_key_wait: a connection whose secret is not in the key log yet waits for it,
            holding its bytes (:class:`kafkasniff.tls.decrypt.KeyWait`: at most 64 MiB for
            all connections, 10 s of capture time each), instead of giving up at once
            (``live``, where clients append to their key log while the capture runs).
    """

    ports: frozenset[int] = DEFAULT_PORTS
    detect: bool = True
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    max_pending: int = 10_000
    max_connections: int = 50_000
    idle_timeout_s: int = 3600
    max_ooo_bytes: int = 4 * 1024 * 1024
    definitions_dir: str | None = None
    with_records: bool = False
    max_uncompressed_bytes: int = 64 * 1024 * 1024
    show_secrets: bool = False
    wire_format: str = "auto"
    meta_records: bool = False
    first_conn_id: int = 0
    budgets: Budgets = field(default_factory=Budgets)
    tls_keylog: tuple[str, ...] = ()
    tls_keylog_text: str = ""
    tls_key_wait: bool = False
    external_clock: bool = False


@dataclass(slots=True)
class PipelineStats:
    """Counters of everything the pipeline saw (nothing is dropped without a count).

    Attributes:
        packets / packet_bytes: packets read and their captured bytes.
        skipped: packets skipped by reason (``non_ip``, ``non_tcp``, ``ip_fragment`` ...).
        tcp_segments: TCP segments handed to reassembly.
        kafka_connections / other_connections: TCP connections recognised as Kafka or not.
        other_bytes: payload bytes of non-Kafka connections.
        tls_connections: connections that start with TLS (decrypted with a key log, or
            not decoded).
        tls_secrets_blocks: pcapng Decryption Secrets Blocks of TLS key log text read.
        kafka07_connections: Kafka connections in the 0.7 wire format.
        exchanges: exchanges by status.
        issues: issues by kind.
        first_ts_ns / last_ts_ns: time span of the packets.
        bytes: what became of every captured byte (see :data:`DECODED_BYTES` and
            :data:`SKIPPED_BYTES` for the keys); once the capture is read to its end
            (``Pipeline.finish``) the values add up to the captured bytes (the capture files'
            bytes, decompressed; for live capture, the packets' bytes).
        budgets: what the analysis spent of its budgets and what they skipped
            (:class:`kafkasniff.content.budgets.BudgetMeter`).
        pending_header_bytes: the TCP packets' link, IP and TCP header bytes not yet in the
            ledger's ``packet_headers`` (what :class:`~kafkasniff.feeding.PacketFeeder`
            counts per packet: an int attribute, 23 ns, where an item of a Counter cost
            175 ns); moved there whenever :attr:`bytes` is read.
    """

    packets: int = 0
    packet_bytes: int = 0
    skipped: Counter = field(default_factory=Counter)
    tcp_segments: int = 0
    kafka_connections: int = 0
    other_connections: int = 0
    other_bytes: int = 0
    tls_connections: int = 0
    tls_secrets_blocks: int = 0
    kafka07_connections: int = 0
    exchanges: Counter = field(default_factory=Counter)
    issues: Counter = field(default_factory=Counter)
    first_ts_ns: int = 0
    last_ts_ns: int = 0
    _ledger: Counter = field(default_factory=Counter)
    budgets: BudgetMeter = field(default_factory=BudgetMeter)
    pending_header_bytes: int = 0

    @property
    def bytes(self) -> Counter:
        """The byte ledger (see the class's attributes)."""
        n = self.pending_header_bytes
        if n:
            self.pending_header_bytes = 0
            self._ledger["packet_headers"] += n
        return self._ledger

    def to_dict(self) -> dict:
        """Every counter as plain JSON-able values (the counters by reason, status or kind
        as dicts, sorted by key); the ``pipeline`` object of ``stats --json``, the TUI and
        ``live``."""
        return {"packets": self.packets, "packet_bytes": self.packet_bytes,
                "skipped": dict(sorted(self.skipped.items())),
                "tcp_segments": self.tcp_segments,
                "kafka_connections": self.kafka_connections,
                "other_connections": self.other_connections, "other_bytes": self.other_bytes,
                "tls_connections": self.tls_connections,
                "tls_secrets_blocks": self.tls_secrets_blocks,
                "kafka07_connections": self.kafka07_connections,
                "exchanges": dict(sorted(self.exchanges.items())),
                "issues": dict(sorted(self.issues.items())),
                "first_ts_ns": self.first_ts_ns, "last_ts_ns": self.last_ts_ns,
                "bytes": {k: v for k, v in sorted(self.bytes.items()) if v},
                "budgets": self.budgets.to_dict()}

    def account_source(self, accounting: dict) -> None:
        """Add a capture file's own bytes (:meth:`PacketSource.accounting
        <kafkasniff.capture.pcapfile.PacketSource.accounting>`: ``format``,
        ``skipped_blocks``, ``damaged_records``, ``unread``, in bytes) to :attr:`bytes`."""
        b = self.bytes
        b["capture_format"] += accounting["format"]
        b["pcapng_blocks"] += accounting["skipped_blocks"]
        b["damaged_records"] += accounting["damaged_records"]
        b["unread"] += accounting["unread"]

    def merge(self, other: "PipelineStats") -> None:
        """Add the counters of ``other`` (another decoder's share of the same capture, see
        :mod:`kafkasniff.parallel`). The time span and ``tls_secrets_blocks`` are left
        alone: they belong to whoever read the capture."""
        self.packets += other.packets
        self.packet_bytes += other.packet_bytes
        self.skipped.update(other.skipped)
        self.tcp_segments += other.tcp_segments
        self.kafka_connections += other.kafka_connections
        self.other_connections += other.other_connections
        self.other_bytes += other.other_bytes
        self.tls_connections += other.tls_connections
        self.kafka07_connections += other.kafka07_connections
        self.exchanges.update(other.exchanges)
        self.issues.update(other.issues)
        self.bytes.update(other.bytes)
        self.budgets.merge(other.budgets)


def _conn_id_of_event(ev) -> int:
    return ev.conn.conn_id


_GAP_KINDS = {
    "lost": (IssueKind.TCP_GAP, "lost before the capture saw them"),
    "close": (IssueKind.TCP_GAP, "still missing when the connection ended"),
    "ooo_overflow": (IssueKind.TCP_OOO_OVERFLOW, "out-of-order buffer full"),
    "snaplen": (IssueKind.PACKET_TRUNCATED, "cut by the capture's snaplen"),
}


class IssueLister:
    """The ``capture_issues`` budget: at most ``limit`` standalone issues of each kind are
    listed; the others stay counted in ``stats.issues`` and the first one dropped of each
    kind becomes one ``budget_exhausted`` issue saying so (docs/budgets.md).

    Args:
        limit: issues listed per kind.
        stats: the :class:`PipelineStats` whose ``budgets`` meter counts what was skipped and
            whose ``issues`` count the ``budget_exhausted`` issues.
    """

    __slots__ = ("limit", "stats", "listed")

    def __init__(self, limit: int, stats: PipelineStats) -> None:
        self.limit = limit
        self.stats = stats
        self.listed: Counter = Counter()

    def count(self, kind: str) -> bool:
        """Count one more issue of ``kind``; True when it is beyond the budget (call
        :meth:`over_budget` on the records it came with)."""
        n = self.listed[kind] = self.listed[kind] + 1
        return n > self.limit

    def over_budget(self, out: list) -> list:
        """``out`` (records whose issues were all passed to :meth:`count`) without the
        issues beyond the budget, the first dropped one of each kind replaced by a
        ``budget_exhausted`` issue."""
        limit = self.limit
        meter = self.stats.budgets
        seen: Counter = Counter()
        kept = []
        # how many of each kind were listed before this batch of records
        before = Counter(self.listed)
        for rec in out:
            if type(rec) is DecodeIssue:
                before[rec.kind] -= 1
        for rec in out:
            if type(rec) is not DecodeIssue:
                kept.append(rec)
                continue
            seen[rec.kind] += 1
            if before[rec.kind] + seen[rec.kind] <= limit:
                kept.append(rec)
                continue
            meter.skipped["capture_issues"] += 1
            if meter.first_report(f"capture_issues:{rec.kind}"):
                budget = DecodeIssue(IssueKind.BUDGET_EXHAUSTED, Severity.WARNING,
                                     f"budget capture_issues ({limit} per kind) spent: later "
                                     f"{rec.kind} issues are counted (stats) but not listed; "
                                     f"raise it with --budget capture_issues=N", rec.ts_ns,
                                     rec.connection_id, rec.client, rec.broker)
                self.stats.issues[budget.kind] += 1
                kept.append(budget)
        return kept


class _Undecided:
    """A connection the classifier is still watching: its first bytes, and the stream
    events held (bounded by the classifier's window) until the verdict."""

    __slots__ = ("tcp", "first", "events")

    def __init__(self, tcp: TcpConnection, first: FirstBytes) -> None:
        self.tcp = tcp
        self.first = first
        self.events: list = []


class _Other:
    """A connection that carries something else than Kafka (counted, not decoded)."""

    __slots__ = ("tcp",)

    def __init__(self, tcp: TcpConnection) -> None:
        self.tcp = tcp


#: what the pipeline keeps per open TCP connection, by connection id
ConnectionState = Union[_Undecided, KafkaConnection, Kafka07Connection, TlsConnection, _Other]


class Pipeline:
    """Packets -> records (sans-IO): the stages of the module docstring, composed.

    Args:
        options: :class:`PipelineOptions`.
        defs: definitions to decode with (default: loaded from ``options.definitions_dir``).

    ``feed(packet)`` and ``finish()`` return lists of :data:`~kafkasniff.model.Record`
    (exchanges and issues; connection summaries and topic names with ``meta_records``);
    ``stats`` counts everything. ``topics`` is the topic-id registry every connection
    shares; :meth:`first_seen_ns` gives a connection's first packet time.

    Raises ValueError for an unknown ``wire_format``.
    """

    def __init__(self, options: PipelineOptions | None = None, defs: Definitions | None = None):
        self.options = options or PipelineOptions()
        self.defs = defs or load_definitions(self.options.definitions_dir)
        o = self.options
        self.ctx = PairingContext.create(self.defs, max_frame_bytes=o.max_frame_bytes,
                                         max_pending=o.max_pending, with_records=o.with_records,
                                         max_uncompressed_bytes=o.max_uncompressed_bytes,
                                         show_secrets=o.show_secrets, budgets=o.budgets)
        self.classifier = Classifier(self.defs, self.ctx.request_validator(), ports=o.ports,
                                     detect=o.detect, wire_format=o.wire_format)
        self.keylog = None
        self.key_wait = None
        if o.tls_keylog or o.tls_keylog_text:
            from kafkasniff.tls.decrypt import KeyWait
            from kafkasniff.tls.keylog import KeyLog

            self.keylog = KeyLog(list(o.tls_keylog))
            self.keylog.add_text(o.tls_keylog_text)
            self.key_wait = KeyWait() if o.tls_key_wait else None
        self._reassembler = TcpReassembler(max_ooo_bytes=o.max_ooo_bytes,
                                           max_connections=o.max_connections,
                                           idle_timeout_ns=o.idle_timeout_s * 10**9,
                                           first_conn_id=o.first_conn_id)
        self.topics.record_learned = o.meta_records
        #: the registry's list of newly learnt (topic id, name) pairs; empty unless
        #: ``meta_records`` (drained into TopicName records by _account)
        self._learned = self.topics.learned
        self.stats = PipelineStats(budgets=self.ctx.content.meter)
        self.lister = IssueLister(o.budgets.limit("capture_issues"), self.stats)
        self.connections: dict[int, ConnectionState] = {}
        self._closed: dict[int, TcpConnection] = {}     # closed during the last call
        # external_clock: never due (the caller calls expire). The feeder holds the stats,
        # the reassembler and both connection tables: none of them is ever replaced
        self._feeder = PacketFeeder(self.stats, self._reassembler, self.connections,
                                    self._closed, self._account, self._dispatch, self._expire,
                                    1 << 62 if o.external_clock else 0)
        # the feeder's bound method itself, not the method below calling it: one Python
        # call a packet less (the feeder runs compiled, kafkasniff.feeding). The feeder
        # holds this pipeline's bound methods: the two form a reference cycle, which the
        # cycle collector frees (a pipeline lives as long as its capture's decoding)
        self.feed = self._feeder.feed

    @property
    def topics(self) -> TopicRegistry:
        """Topic id -> name, learnt from every connection's responses so far."""
        return self.ctx.content.registry

    def first_seen_ns(self, conn_id: int) -> int | None:
        """First packet time of connection ``conn_id`` while it is open, or when it closed
        during the last :meth:`feed` / :meth:`finish` call (so that every record that call
        returned can be placed); ``None`` for another id."""
        state = self.connections.get(conn_id)
        if state is not None:
            return state.tcp.first_ts_ns
        tcp = self._closed.get(conn_id)
        return tcp.first_ts_ns if tcp is not None else None

    # ------------------------------------------------------------------ feeding
    def feed(self, pkt: CapturedPacket) -> list[Record]:
        """Process one packet; returns the records it completed.

        :meth:`kafkasniff.feeding.PacketFeeder.feed` does it (an instance's ``feed`` is
        that method itself)."""
        return self._feeder.feed(pkt)

    def expire(self, ts_ns: int) -> list[Record]:
        """Close the connections idle for ``idle_timeout_s`` at capture time ``ts_ns``, in
        connection id order; returns their last records. :meth:`feed` calls it once per
        second of capture time (on any packet), unless ``external_clock``."""
        if self._closed:
            self._closed.clear()
        return self._expire(ts_ns)

    def _expire(self, ts_ns: int) -> list[Record]:
        """:meth:`expire` within a :meth:`feed` call (the connections that call closed stay
        known to :meth:`first_seen_ns`)."""
        expired = self._reassembler.expire(ts_ns)
        if not expired:
            return []
        expired.sort(key=_conn_id_of_event)     # stable: each connection's events in order
        return self._dispatch(expired)

    @property
    def reassembly_stats(self):
        """The TCP reassembler's counters (:class:`kafkasniff.tcp.reassembly.ReassemblyStats`;
        ``connections_opened`` is how many connection ids were given out)."""
        return self._reassembler.stats

    def finish(self) -> list[Record]:
        """End of input: close every connection (unanswered requests, partial frames)."""
        self._closed.clear()
        out = self._dispatch(self._reassembler.flush(self.stats.last_ts_ns or None))
        self._account_tcp()
        return out

    def account_source(self, accounting: dict) -> None:
        """Add a capture file's own bytes (:meth:`PacketSource.accounting
        <kafkasniff.capture.pcapfile.PacketSource.accounting>`, read to its end) to
        :attr:`PipelineStats.bytes`; its packets' bytes were counted as they were fed."""
        self.stats.account_source(accounting)

    def _account_tcp(self) -> None:
        """TCP payload the reassembler did not deliver (retransmitted, ignored)."""
        t = self._reassembler.stats
        b = self.stats.bytes
        b["tcp_retransmitted"] = t.retransmitted_bytes
        b["tcp_ignored"] = t.ignored_bytes

    def open(self, source, **kwargs):
        """Open ``source`` (a path, ``"-"`` or a binary file object) with
        :func:`kafkasniff.capture.pcapfile.open_capture` (``kwargs`` go to it), its pcapng
        Decryption Secrets Blocks (pcapng 4.7) given to :meth:`add_secrets`: every command
        that feeds this pipeline opens its captures here. Returns the
        :class:`~kafkasniff.capture.pcapfile.PacketSource`; raises
        :class:`kafkasniff.errors.CaptureError` as ``open_capture`` does."""
        from kafkasniff.capture.pcapfile import open_capture

        return open_capture(source, on_secrets=self.add_secrets, **kwargs)

    def add_secrets(self, secrets_type: int, data: bytes) -> None:
        """Secrets of a pcapng Decryption Secrets Block (pcapng 4.7): TLS key log text
        (type ``TLSK``) joins the key log (one is made when ``tls_keylog`` gave none), so
        that the TLS connections after it are decrypted; other types are ignored."""
        from kafkasniff.capture.pcapfile import TLS_KEY_LOG_SECRETS

        if secrets_type != TLS_KEY_LOG_SECRETS:
            return
        if self.keylog is None:
            from kafkasniff.tls.keylog import KeyLog

            self.keylog = KeyLog()
        self.keylog.add_text(data)
        self.stats.tls_secrets_blocks += 1

    def feed_issue(self, issue: DecodeIssue) -> DecodeIssue:
        """Count an issue raised outside the pipeline (capture file damage) and return it."""
        self.stats.issues[issue.kind] += 1
        return issue

    # ------------------------------------------------------------------ dispatch
    def _dispatch(self, events: list) -> list[Record]:
        out: list = []
        table = self.connections
        for ev in events:
            conn = ev.conn
            state = table.get(conn.conn_id)
            if state is None:
                state = self._open(conn)
            t = type(state)
            if t is KafkaConnection or t is Kafka07Connection:
                out.extend(self._to_kafka(state, ev))
            elif t is _Undecided:
                out.extend(self._decide(state, ev))
            elif t is _Other:
                if type(ev) is StreamData:
                    self.stats.other_bytes += len(ev.data)
                    self.stats.bytes["non_kafka"] += len(ev.data)
                elif type(ev) is StreamClosed:
                    out.extend(self._to_other(state, ev))
            else:  # TlsConnection
                out.extend(self._to_tls(state, ev))
        return self._account(out)

    def _account(self, out: list) -> list[Record]:
        """The records one call produced, counted in :attr:`stats`, with the topic names
        learnt meanwhile (``meta_records``) and the issues beyond the listing budget left
        out."""
        learned = self._learned
        if learned:
            ts = self.stats.last_ts_ns
            out.extend(TopicName(tid, name, ts) for tid, name in learned)
            learned.clear()
        st = self.stats
        over = False
        for rec in out:
            t = type(rec)
            if t is Exchange:
                st.exchanges[rec.status] += 1
                for iss in rec.issues:
                    st.issues[iss.kind] += 1
            elif t is DecodeIssue:
                st.issues[rec.kind] += 1
                if self.lister.count(rec.kind):
                    over = True
        return self.lister.over_budget(out) if over else out

    def _open(self, conn: TcpConnection) -> ConnectionState:
        """A connection seen for the first time: start classifying it."""
        first = self.classifier.start(conn.a_port, conn.b_port, not conn.handshake_seen)
        if type(first) is FirstBytes:
            state = _Undecided(conn, first)
        else:
            state = _Other(conn)
            self.stats.other_connections += 1
        self.connections[conn.conn_id] = state
        return state

    def _close(self, conn: TcpConnection) -> None:
        """Forget a connection's state (its first packet time stays known until the next
        call, see :meth:`first_seen_ns`)."""
        self.connections.pop(conn.conn_id, None)
        self._closed[conn.conn_id] = conn

    def _decide(self, state: _Undecided, ev) -> list:
        """Hold the first events of a connection until the classifier's verdict, then hand
        them to the connection's new state."""
        state.events.append(ev)
        t = type(ev)
        first = state.first
        if t is StreamData:
            verdict = first.on_data(ev.direction, ev.offset, ev.data)
        elif t is StreamGap:
            verdict = first.on_gap(ev.direction, ev.offset, ev.length)
        else:
            verdict = first.on_close()
        if verdict is None:
            return []
        conn = state.tcp
        kind = verdict.kind
        st = self.stats
        if kind is ConnectionKind.TLS:
            tls = TlsConnection(conn, verdict.client_dir, (bytes(first.data[0]),
                                                           bytes(first.data[1])))
            self.connections[conn.conn_id] = tls
            st.tls_connections += 1
            if self.keylog is not None:
                client_dir = verdict.client_dir if verdict.client_dir >= 0 else \
                    client_hello_direction(first.data)
                if client_dir >= 0:
                    tls.decrypt_with(self.keylog, KafkaConnection(
                        self.ctx, conn, client_dir, mid_stream=not conn.handshake_seen),
                        self.key_wait)
                    if verdict.client_dir < 0:
                        # not on a broker port: Kafka only if the plaintext is, by the
                        # rules that find plaintext Kafka on any port
                        tls.first = FirstBytes(self.classifier, -1, False)
                    out: list = []
                    for e in state.events:
                        out.extend(self._to_tls(tls, e))
                    return out
            st.bytes["tls"] += sum(len(e.data) for e in state.events if type(e) is StreamData)
            if verdict.client_dir < 0:
                st.other_connections += 1
            return self._to_tls(tls, ev) if t is StreamClosed else []
        if kind is ConnectionKind.OTHER:
            other = self.connections[conn.conn_id] = _Other(conn)
            st.other_connections += 1
            held = sum(len(e.data) for e in state.events if type(e) is StreamData)
            st.other_bytes += held
            st.bytes["non_kafka"] += held
            return self._to_other(other, ev) if t is StreamClosed else []
        if kind is ConnectionKind.KAFKA07:
            kafka = Kafka07Connection(self.ctx, conn, verdict.client_dir,
                                      mid_stream=not conn.handshake_seen)
            st.kafka07_connections += 1
        else:
            kafka = KafkaConnection(self.ctx, conn, verdict.client_dir,
                                    mid_stream=not conn.handshake_seen)
        self.connections[conn.conn_id] = kafka
        st.kafka_connections += 1
        out: list = []
        if kafka.mid_stream:
            out.append(kafka.issue(
                IssueKind.MID_STREAM_START, "the connection was already open when the capture "
                "started (no handshake seen): framing starts tentatively at the first byte",
                severity=Severity.INFO, ts_ns=conn.first_ts_ns))
        for e in state.events:
            out.extend(self._to_kafka(kafka, e))
        return out

    def _to_kafka(self, app: KafkaConnection | Kafka07Connection, ev) -> list:
        t = type(ev)
        if t is StreamData:
            return app.on_data(ev.direction, ev.offset, ev.data, ev.ts_ns)
        if t is StreamGap:
            kind, why = _GAP_KINDS.get(ev.reason, (IssueKind.TCP_GAP, ev.reason))
            out = [app.issue(kind, f"{ev.length} bytes never captured ({why})",
                             severity=Severity.WARNING, ts_ns=ev.ts_ns, direction=ev.direction,
                             stream_offset=ev.offset, length_bytes=ev.length)]
            out.extend(app.on_gap(ev.direction, ev.offset, ev.length, ev.ts_ns))
            return out
        out = app.on_close(ev.ts_ns, ev.reason)
        conn = app.tcp
        self._close(conn)
        b = self.stats.bytes
        for framer in app.made_framers():
            b["kafka_frames"] += framer.framed_bytes
            b["kafka_resync"] += framer.resync_bytes
            b["kafka_after_gap"] += framer.after_gap_bytes
            b["kafka_truncated"] += framer.truncated_bytes
        if self.options.meta_records:
            sasl = getattr(app, "sasl", None)
            kind = ConnectionKind.KAFKA if type(app) is KafkaConnection else ConnectionKind.KAFKA07
            out.append(self._summary(conn, kind, app.client_dir, app,
                                     sasl=sasl.to_json() if sasl is not None else None))
        if ev.reason == "evicted":
            out.append(app.issue(IssueKind.CONNECTION_EVICTED,
                                 f"connection table full ({self.options.max_connections} "
                                 f"connections): the least recently active one was closed",
                                 severity=Severity.WARNING, ts_ns=ev.ts_ns))
        if conn.overlap_conflicts:
            out.append(app.issue(IssueKind.TCP_OVERLAP_CONFLICT,
                                 f"{conn.overlap_conflicts} retransmitted segment(s) carried "
                                 f"different bytes than the first copy (first copy kept)",
                                 severity=Severity.WARNING, ts_ns=ev.ts_ns))
        return out

    def _to_other(self, other: _Other, ev: StreamClosed) -> list:
        conn = other.tcp
        self._close(conn)
        if self.options.meta_records:
            return [self._summary(conn, ConnectionKind.OTHER, 0)]
        return []

    def _to_tls(self, tls: TlsConnection, ev) -> list:
        if tls.kafka is not None:
            return self._to_tls_decrypted(tls, ev)
        t = type(ev)
        if t is StreamData:
            tls.on_data(ev.direction, ev.offset, ev.data)
            self.stats.bytes["tls"] += len(ev.data)
            return []
        if t is not StreamClosed:
            return []
        conn = tls.tcp
        self._close(conn)
        out: list = tls.on_close()
        if self.options.meta_records:
            out.append(self._summary(conn, ConnectionKind.TLS, max(tls.client_dir, 0),
                                     tls=tls.info))
        return out

    def _to_tls_decrypted(self, tls: TlsConnection, ev) -> list:
        """A TLS connection with a key log: records decrypted, the Kafka inside decoded by
        the connection's inner :class:`KafkaConnection` (plaintext offsets, the capture time
        of the packet that completed each record). The byte ledger counts capture bytes: the
        TLS records decrypted (``tls_decrypted``) and not (``tls``); the inner framing works
        on plaintext and stays out of it."""
        t = type(ev)
        kafka = tls.kafka
        out: list = []
        if t is StreamData:
            results = tls.decryptor.feed(tls.side(ev.direction), ev.data, ev.ts_ns)
        elif t is StreamGap:
            results = tls.decryptor.on_gap(tls.side(ev.direction), ev.length, ev.ts_ns)
        else:
            results = tls.decryptor.finish()
        if kafka.tls is None and results:
            kafka.tls = tls.decryptor.session()
        for r in results:
            if type(r) is AppData:
                if tls.first is not None:
                    out.extend(self._confirm_tls(tls, r))
                elif not tls.not_kafka:
                    out.extend(kafka.on_data(tls.stream_direction(r.direction), r.offset,
                                             r.data, r.ts_ns))
            else:
                out.append(kafka.issue(
                    IssueKind.TLS_UNDECRYPTED, f"TLS: {r.message}",
                    severity=Severity.INFO if r.kind == "alert" else Severity.WARNING,
                    ts_ns=r.ts_ns, direction=tls.stream_direction(r.direction)
                    if r.direction >= 0 else -1))
        if t is not StreamClosed:
            return out
        if tls.first is not None:
            out.extend(self._confirm_tls(tls, None))
        if not tls.not_kafka:
            out.extend(kafka.on_close(ev.ts_ns, ev.reason))
        conn = tls.tcp
        self._close(conn)
        dec = tls.decryptor
        b = self.stats.bytes
        b["tls_decrypted"] += sum(dec.decrypted_bytes)
        b["tls"] += sum(dec.undecrypted_bytes)
        if self.options.meta_records and tls.not_kafka:
            tls.read_hellos()
            out.append(self._summary(conn, ConnectionKind.TLS, kafka.client_dir,
                                     tls=tls.info | dec.info()))
        elif self.options.meta_records:
            tls.read_hellos()
            sasl = kafka.sasl
            out.append(self._summary(conn, ConnectionKind.KAFKA, kafka.client_dir, kafka,
                                     tls=tls.info | dec.info(),
                                     sasl=sasl.to_json() if sasl is not None else None))
        return out

    def _confirm_tls(self, tls: TlsConnection, r: AppData | None) -> list:
        """TLS found by its ClientHello on a port that is not a broker's: its plaintext
        ``r`` (``None``: the connection ended) goes to the classifier's
        :class:`~kafkasniff.classify.FirstBytes`, held until the verdict. Kafka sent by
        the TLS client: the held plaintext goes to the Kafka connection. Anything else: the
        connection is not Kafka (its records still count as decrypted), its plaintext is
        dropped and it counts as another connection."""
        first = tls.first
        if r is None:
            verdict = first.on_close()
        else:
            tls.held.append(r)
            verdict = first.on_data(tls.stream_direction(r.direction), r.offset, r.data)
        if verdict is None:
            return []
        held, tls.held, tls.first = tls.held, [], None
        kafka = tls.kafka
        if verdict.kind is not ConnectionKind.KAFKA or verdict.client_dir != kafka.client_dir:
            tls.not_kafka = True
            self.stats.other_connections += 1
            return []
        out: list = []
        for h in held:
            out.extend(kafka.on_data(tls.stream_direction(h.direction), h.offset, h.data,
                                     h.ts_ns))
        return out

    @staticmethod
    def _summary(conn: TcpConnection, kind: ConnectionKind, client_dir: int, app=None, *,
                 tls: dict | None = None, sasl: dict | None = None) -> ConnectionSummary:
        b = conn.bytes
        return ConnectionSummary(
            conn.conn_id, kind, conn.endpoint(client_dir), conn.endpoint(1 - client_dir),
            conn.first_ts_ns, conn.last_ts_ns, conn.handshake_seen, conn.closed,
            b[client_dir], b[1 - client_dir], conn.segments[0] + conn.segments[1],
            conn.gap_bytes[0] + conn.gap_bytes[1],
            conn.retransmitted_bytes[0] + conn.retransmitted_bytes[1], conn.overlap_conflicts,
            app.exchanges if app is not None else 0, app.unanswered if app is not None else 0,
            app.orphans if app is not None else 0, tls, sasl)


def analyze(sources: Iterable, options: PipelineOptions | None = None,
            pipeline: Pipeline | None = None, on_progress=None) -> Iterator[Exchange | DecodeIssue]:
    """Decode capture files (paths, ``"-"`` for stdin, or binary file objects) in order.

    Yields exchanges and issues as they complete. Files are one continuous capture
    (connections continue across rotated files). Raises
    :class:`kafkasniff.errors.CaptureError` when a source cannot be read at all.
    ``on_progress(bytes_read, total_bytes)`` is called every few thousand packets.
    """
    pipe = pipeline or Pipeline(options)
    for src in sources:
        with pipe.open(src) as packets:
            n = 0
            feed = pipe.feed
            for pkt in packets:
                out = feed(pkt)
                if out:
                    yield from out
                n += 1
                if on_progress is not None and not n & 0x1FFF:
                    on_progress(packets.bytes_read, packets.total_bytes)
            for issue in packets.issues:
                yield pipe.feed_issue(issue)
            pipe.account_source(packets.accounting())
    yield from pipe.finish()
