"""The decode pipeline: packets in, exchanges and issues out.

``Pipeline`` is sans-IO (fed :class:`CapturedPacket` objects); :func:`analyze` drives it from
capture files. Stages (DESIGN.md "Data flow")::

    CapturedPacket -> decode_packet -> TcpSegment | Skipped
      -> TcpReassembler -> StreamData | StreamGap | StreamClosed
      -> Kafka detection (broker port, or request-header detection on any port)
      -> KafkaConnection (framing, decoding, pairing) -> Exchange | DecodeIssue

Finding Kafka: a connection is Kafka when one endpoint's port is in ``ports`` (that endpoint
is the broker), or, with ``detect``, when the first frames of one direction parse as Kafka
request headers (that direction's sender is the client). Other TCP connections are counted
and skipped.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from kafkasniff.capture.types import CapturedPacket, Skipped
from kafkasniff.issues import DecodeIssue, IssueKind, Severity
from kafkasniff.pairing.connection import KafkaConnection, PairingContext
from kafkasniff.pairing.exchange import Exchange
from kafkasniff.protocol.detect import looks_like_request_stream, request_validator
from kafkasniff.protocol.framing import ACCEPT, DEFAULT_MAX_FRAME_BYTES, NEED_MORE
from kafkasniff.protocol.schema import Definitions, load_definitions
from kafkasniff.tcp.types import StreamClosed, StreamData, StreamGap, TcpConnection

DEFAULT_PORTS = frozenset({9092})
DETECT_WINDOW_BYTES = 64 * 1024
EXPIRE_EVERY_NS = 1_000_000_000  # look for idle connections once per second of capture time


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
    """

    ports: frozenset[int] = DEFAULT_PORTS
    detect: bool = True
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    max_pending: int = 10_000
    max_connections: int = 50_000
    idle_timeout_s: int = 3600
    max_ooo_bytes: int = 4 * 1024 * 1024
    definitions_dir: str | None = None


@dataclass(slots=True)
class PipelineStats:
    """Counters of everything the pipeline saw (nothing is dropped without a count).

    Attributes:
        packets / packet_bytes: packets read and their captured bytes.
        skipped: packets skipped by reason (``non_ip``, ``non_tcp``, ``ip_fragment`` ...).
        tcp_segments: TCP segments handed to reassembly.
        kafka_connections / other_connections: TCP connections recognised as Kafka or not.
        other_bytes: payload bytes of non-Kafka connections.
        exchanges: exchanges by status.
        issues: issues by kind.
        first_ts_ns / last_ts_ns: time span of the packets.
    """

    packets: int = 0
    packet_bytes: int = 0
    skipped: Counter = field(default_factory=Counter)
    tcp_segments: int = 0
    kafka_connections: int = 0
    other_connections: int = 0
    other_bytes: int = 0
    exchanges: Counter = field(default_factory=Counter)
    issues: Counter = field(default_factory=Counter)
    first_ts_ns: int = 0
    last_ts_ns: int = 0


_GAP_KINDS = {
    "lost": (IssueKind.TCP_GAP, "lost before the capture saw them"),
    "close": (IssueKind.TCP_GAP, "still missing when the connection ended"),
    "ooo_overflow": (IssueKind.TCP_OOO_OVERFLOW, "out-of-order buffer full"),
    "snaplen": (IssueKind.PACKET_TRUNCATED, "cut by the capture's snaplen"),
}


class _NotKafka:
    __slots__ = ()


NOT_KAFKA = _NotKafka()
CLOSED = _NotKafka()


class _Undecided:
    """First bytes of a connection on no broker port, kept until it is recognised (bounded)."""

    __slots__ = ("events", "sizes", "data")

    def __init__(self) -> None:
        self.events: list = []
        self.sizes = [0, 0]
        self.data = [bytearray(), bytearray()]


class Pipeline:
    """Packets -> exchanges and issues (sans-IO).

    Args:
        options: :class:`PipelineOptions`.
        defs: definitions to decode with (default: loaded from ``options.definitions_dir``).

    ``feed(packet)`` and ``finish()`` return lists of :class:`Exchange` and
    :class:`DecodeIssue`; ``stats`` counts everything.
    """

    def __init__(self, options: PipelineOptions | None = None, defs: Definitions | None = None):
        from kafkasniff.capture.packet import decode_packet
        from kafkasniff.tcp.reassembly import TcpReassembler

        self.options = options or PipelineOptions()
        self.defs = defs or load_definitions(self.options.definitions_dir)
        self.ctx = PairingContext.create(self.defs, max_frame_bytes=self.options.max_frame_bytes,
                                         max_pending=self.options.max_pending)
        self.reassembler = TcpReassembler(max_ooo_bytes=self.options.max_ooo_bytes,
                                          max_connections=self.options.max_connections,
                                          idle_timeout_ns=self.options.idle_timeout_s * 10**9)
        self._decode_packet = decode_packet
        self.stats = PipelineStats()
        self._validator = request_validator(self.defs)
        self._next_expire_ns = 0
        self._new_issues: list[DecodeIssue] = []

    # ------------------------------------------------------------------ feeding
    def feed(self, pkt: CapturedPacket) -> list:
        """Process one packet; returns the exchanges and issues it completed."""
        st = self.stats
        st.packets += 1
        st.packet_bytes += len(pkt.data)
        if not st.first_ts_ns:
            st.first_ts_ns = pkt.ts_ns
        st.last_ts_ns = pkt.ts_ns
        seg = self._decode_packet(pkt)
        if type(seg) is Skipped:
            st.skipped[seg.reason] += 1
            return []
        st.tcp_segments += 1
        events = self.reassembler.feed(seg)
        out = self._dispatch(events) if events else []
        if pkt.ts_ns >= self._next_expire_ns:
            self._next_expire_ns = pkt.ts_ns + EXPIRE_EVERY_NS
            expired = self.reassembler.expire(pkt.ts_ns)
            if expired:
                out.extend(self._dispatch(expired))
        return out

    def finish(self) -> list:
        """End of input: close every connection (unanswered requests, partial frames)."""
        return self._dispatch(self.reassembler.flush(self.stats.last_ts_ns or None))

    def feed_issue(self, issue: DecodeIssue) -> DecodeIssue:
        """Count an issue raised outside the pipeline (capture file damage) and return it."""
        self.stats.issues[issue.kind] += 1
        return issue

    # ------------------------------------------------------------------ dispatch
    def _dispatch(self, events: list) -> list:
        out: list = []
        for ev in events:
            conn = ev.conn
            app = conn.app
            if app is None:
                app = self._classify(conn, ev)
            if self._new_issues:
                out.extend(self._new_issues)
                self._new_issues.clear()
            if app is NOT_KAFKA:
                if type(ev) is StreamData:
                    self.stats.other_bytes += len(ev.data)
                continue
            if app is CLOSED:
                continue
            if type(app) is _Undecided:
                out.extend(self._undecided(conn, app, ev))
                continue
            out.extend(self._to_kafka(app, ev))
        st = self.stats
        for rec in out:
            if type(rec) is Exchange:
                st.exchanges[rec.status] += 1
                for iss in rec.issues:
                    st.issues[iss.kind] += 1
            else:
                st.issues[rec.kind] += 1
        return out

    def _to_kafka(self, app: KafkaConnection, ev) -> list:
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
        assert t is StreamClosed
        out = app.on_close(ev.ts_ns, ev.reason)
        conn = app.tcp
        conn.app = CLOSED  # drop the Kafka state; late events of this connection are ignored
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

    def _classify(self, conn: TcpConnection, ev) -> object:
        ports = self.options.ports
        a_broker = conn.a_port in ports
        b_broker = conn.b_port in ports
        if a_broker != b_broker:
            return self._make_kafka(conn, client_dir=1 if a_broker else 0)
        if not self.options.detect:
            conn.app = NOT_KAFKA
            self.stats.other_connections += 1
            return NOT_KAFKA
        conn.app = _Undecided()
        return conn.app

    def _make_kafka(self, conn: TcpConnection, client_dir: int) -> KafkaConnection:
        mid = not conn.handshake_seen
        app = KafkaConnection(self.ctx, conn, client_dir, mid_stream=mid)
        conn.app = app
        self.stats.kafka_connections += 1
        if mid:
            self._new_issues.append(app.issue(
                IssueKind.MID_STREAM_START, "the connection was already open when the capture "
                "started (no handshake seen): framing starts tentatively at the first byte",
                severity=Severity.INFO, ts_ns=conn.first_ts_ns))
        return app

    def _undecided(self, conn: TcpConnection, app: _Undecided, ev) -> list:
        out = self._decide(conn, app, ev)
        if self._new_issues:
            out[:0] = self._new_issues
            self._new_issues.clear()
        return out

    def _decide(self, conn: TcpConnection, app: _Undecided, ev) -> list:
        """Buffer the first bytes of a connection until one direction looks like requests."""
        app.events.append(ev)
        t = type(ev)
        if t is StreamData:
            if ev.offset == app.sizes[ev.direction] and app.sizes[ev.direction] < DETECT_WINDOW_BYTES:
                app.data[ev.direction] += ev.data
            app.sizes[ev.direction] += len(ev.data)
        elif t is StreamGap:
            app.sizes[ev.direction] = max(app.sizes[ev.direction], ev.offset + ev.length)
        verdict, client_dir = self._detect(conn, app, final=t is StreamClosed)
        if verdict == NEED_MORE and t is not StreamClosed:
            if max(len(app.data[0]), len(app.data[1])) < DETECT_WINDOW_BYTES:
                return []
            verdict, client_dir = self._detect(conn, app, final=True)
        if verdict != ACCEPT:
            conn.app = NOT_KAFKA
            self.stats.other_connections += 1
            self.stats.other_bytes += sum(len(e.data) for e in app.events if type(e) is StreamData)
            return []
        kafka = self._make_kafka(conn, client_dir)
        out: list = []
        for e in app.events:
            out.extend(self._to_kafka(kafka, e))
        return out

    def _detect(self, conn: TcpConnection, app: _Undecided, final: bool) -> tuple[int, int]:
        """(ACCEPT | REJECT | NEED_MORE, client direction)."""
        order = (0, 1)
        waiting = False
        for d in order:
            data = bytes(app.data[d])
            if not data:
                waiting = True
                continue
            v = looks_like_request_stream(self.defs, data, self._validator)
            if v == ACCEPT:
                return ACCEPT, d
            if v == NEED_MORE:
                waiting = True
        if waiting and not final:
            return NEED_MORE, -1
        if not conn.handshake_seen:
            # joined mid-frame: look for two chained plausible requests inside the window
            for d in order:
                data = bytes(app.data[d])
                for pos in range(1, max(0, len(data) - 14)):
                    if self._validator(data, pos, False) == ACCEPT and \
                            looks_like_request_stream(self.defs, data[pos:], self._validator) == ACCEPT:
                        size = int.from_bytes(data[pos:pos + 4], "big", signed=True)
                        if pos + 4 + size + 14 <= len(data):  # the chain was really checked
                            return ACCEPT, d
        return (NEED_MORE, -1) if not final else (0, -1)


def analyze(sources: Iterable, options: PipelineOptions | None = None,
            pipeline: Pipeline | None = None, on_progress=None) -> Iterator[Exchange | DecodeIssue]:
    """Decode capture files (paths, ``"-"`` for stdin, or binary file objects) in order.

    Yields exchanges and issues as they complete. Files are one continuous capture
    (connections continue across rotated files). Raises
    :class:`kafkasniff.errors.CaptureError` when a source cannot be read at all.
    ``on_progress(bytes_read, total_bytes)`` is called every few thousand packets.
    """
    from kafkasniff.capture.pcapfile import open_capture

    pipe = pipeline or Pipeline(options)
    for src in sources:
        with open_capture(src) as packets:
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
    yield from pipe.finish()
