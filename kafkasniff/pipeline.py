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

import itertools
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from kafkasniff.capture.types import CapturedPacket, Skipped
from kafkasniff.issues import DecodeIssue, IssueKind, Severity
from kafkasniff.pairing.connection import KafkaConnection, PairingContext
from kafkasniff.pairing.exchange import Exchange
from kafkasniff.protocol.detect import looks_like_request_stream
from kafkasniff.protocol.framing import ACCEPT, DEFAULT_MAX_FRAME_BYTES, NEED_MORE
from kafkasniff.protocol.schema import Definitions, load_definitions
from kafkasniff.protocol.legacy07 import looks_like_07_request_stream
from kafkasniff.protocol.tls import looks_like_tls, parse_hello
from kafkasniff.tcp.types import StreamClosed, StreamData, StreamGap, TcpConnection

DEFAULT_PORTS = frozenset({9092})
DETECT_WINDOW_BYTES = 64 * 1024
#: bytes of one direction held (as events) at most while a connection is undecided
UNDECIDED_MAX_BYTES = 4 * DETECT_WINDOW_BYTES
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
        with_records: decode every record (keys, values, headers) of record batches, not only
            the batch headers (``read --records``, ``export --records``).
        max_uncompressed_bytes: bound on one batch's decompressed size (default 64 MiB).
        show_secrets: keep SASL passwords, proofs and tokens instead of redacting them.
        wire_format: ``"auto"`` (recognise Kafka 0.8+ and the 0.7 wire format), ``"modern"``
            (0.8+ only) or ``"0.7"`` (force the pre-0.8 format).
        meta_records: also yield a :class:`ConnectionSummary` when each TCP connection ends
            and a :class:`TopicName` when a topic id is first seen with its name (exports).
        first_conn_id: id of the first connection (parallel decoders use disjoint ranges).
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


@dataclass(slots=True)
class PipelineStats:
    """Counters of everything the pipeline saw (nothing is dropped without a count).

    Attributes:
        packets / packet_bytes: packets read and their captured bytes.
        skipped: packets skipped by reason (``non_ip``, ``non_tcp``, ``ip_fragment`` ...).
        tcp_segments: TCP segments handed to reassembly.
        kafka_connections / other_connections: TCP connections recognised as Kafka or not.
        other_bytes: payload bytes of non-Kafka connections.
        tls_connections: connections that start with TLS (not decoded).
        kafka07_connections: Kafka connections in the 0.7 wire format.
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
    tls_connections: int = 0
    kafka07_connections: int = 0
    exchanges: Counter = field(default_factory=Counter)
    issues: Counter = field(default_factory=Counter)
    first_ts_ns: int = 0
    last_ts_ns: int = 0

    def to_dict(self) -> dict:
        """Every counter as plain JSON-able values (the counters by reason, status or kind
        as dicts); the ``pipeline`` object of ``stats --json``, the TUI and ``live``."""
        return {"packets": self.packets, "packet_bytes": self.packet_bytes,
                "skipped": dict(self.skipped), "tcp_segments": self.tcp_segments,
                "kafka_connections": self.kafka_connections,
                "other_connections": self.other_connections, "other_bytes": self.other_bytes,
                "tls_connections": self.tls_connections,
                "kafka07_connections": self.kafka07_connections,
                "exchanges": dict(self.exchanges), "issues": dict(self.issues),
                "first_ts_ns": self.first_ts_ns, "last_ts_ns": self.last_ts_ns}


_GAP_KINDS = {
    "lost": (IssueKind.TCP_GAP, "lost before the capture saw them"),
    "close": (IssueKind.TCP_GAP, "still missing when the connection ended"),
    "ooo_overflow": (IssueKind.TCP_OOO_OVERFLOW, "out-of-order buffer full"),
    "snaplen": (IssueKind.PACKET_TRUNCATED, "cut by the capture's snaplen"),
}


@dataclass(frozen=True, slots=True)
class ConnectionSummary:
    """One TCP connection, when it ended (``meta_records`` option).

    Attributes:
        conn_id: the pipeline's connection id (order of first packet).
        kind: ``kafka``, ``kafka07``, ``tls`` or ``other``.
        client / broker: ``"ip:port"``; for ``other`` connections the SYN sender (or first
            sender) and its peer.
        first_ts_ns / last_ts_ns: first and last packet.
        handshake_seen: the SYN was captured (False: the capture began mid-stream).
        closed: ``fin``, ``rst``, ``idle``, ``evicted``, ``port_reuse``, ``end_of_capture``.
        bytes_to_broker / bytes_to_client: TCP payload bytes delivered each way.
        segments: TCP segments both ways.
        gap_bytes: bytes never captured, both ways.
        retransmitted_bytes / overlap_conflicts: retransmissions, and those with other bytes.
        exchanges / unanswered / orphans: Kafka exchanges of the connection.
        tls: ``{"client_hello": ..., "server_hello": ...}`` for TLS connections.
        sasl: the SASL session (mechanism, username, state ...) when there was one.
    """

    conn_id: int
    kind: str
    client: str
    broker: str
    first_ts_ns: int
    last_ts_ns: int
    handshake_seen: bool
    closed: str
    bytes_to_broker: int
    bytes_to_client: int
    segments: int
    gap_bytes: int
    retransmitted_bytes: int
    overlap_conflicts: int
    exchanges: int
    unanswered: int
    orphans: int
    tls: dict | None
    sasl: dict | None


@dataclass(frozen=True, slots=True)
class TopicName:
    """A topic id seen with its name for the first time (``meta_records`` option)."""

    topic_id: str
    name: str
    ts_ns: int


class _NotKafka:
    __slots__ = ()


NOT_KAFKA = _NotKafka()
CLOSED = _NotKafka()


class _Undecided:
    """First bytes of a connection, kept (bounded) until they say what it carries.

    ``client_dir`` is known (0/1) when one endpoint is on a broker port, else -1.
    ``scanned`` / ``later``: state of the mid-frame search per direction (see
    :meth:`Pipeline._chained_requests`).
    """

    __slots__ = ("events", "sizes", "data", "client_dir", "scanned", "later")

    def __init__(self, client_dir: int = -1) -> None:
        self.client_dir = client_dir
        self.events: list = []
        self.sizes = [0, 0]
        self.data = [bytearray(), bytearray()]
        self.scanned = [0, 0]
        self.later: list[list[tuple[int, int]]] = [[], []]


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
        o = self.options
        self.ctx = PairingContext.create(self.defs, max_frame_bytes=o.max_frame_bytes,
                                         max_pending=o.max_pending, with_records=o.with_records,
                                         max_uncompressed_bytes=o.max_uncompressed_bytes,
                                         show_secrets=o.show_secrets)
        self.reassembler = TcpReassembler(max_ooo_bytes=self.options.max_ooo_bytes,
                                          max_connections=self.options.max_connections,
                                          idle_timeout_ns=self.options.idle_timeout_s * 10**9,
                                          first_conn_id=self.options.first_conn_id)
        self.ctx.summarizer.registry.record_learned = o.meta_records
        self._decode_packet = decode_packet
        self.stats = PipelineStats()
        self._validator = self.ctx.request_validator()
        self._next_expire_ns = 0

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
            if app is NOT_KAFKA:
                if type(ev) is StreamData:
                    self.stats.other_bytes += len(ev.data)
                elif type(ev) is StreamClosed and self.options.meta_records:
                    out.append(self._summary(conn, "other", 0, None))
                continue
            if app is CLOSED:
                continue
            if type(app) is _Tls:
                out.extend(self._tls_event(conn, app, ev))
                if type(ev) is StreamClosed and self.options.meta_records:
                    out.append(self._summary(conn, "tls", max(app.client_dir, 0), None))
                continue
            if type(app) is _Undecided:
                out.extend(self._decide(conn, app, ev))
                continue
            out.extend(self._to_kafka(app, ev))
        if self.options.meta_records:
            learned = self.ctx.summarizer.registry.learned
            if learned:
                ts = self.stats.last_ts_ns
                out.extend(TopicName(tid, name, ts) for tid, name in learned)
                learned.clear()
        st = self.stats
        for rec in out:
            t = type(rec)
            if t is ConnectionSummary or t is TopicName:
                continue
            if t is Exchange:
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
        if self.options.meta_records:
            sasl = getattr(app, "sasl", None)
            out.append(self._summary(conn, "kafka" if type(app) is KafkaConnection else "kafka07",
                                     app.client_dir, app,
                                     sasl.to_json() if sasl is not None else None))
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
            conn.app = _Undecided(client_dir=1 if a_broker else 0)
        elif self.options.detect:
            conn.app = _Undecided(client_dir=-1)
        else:
            conn.app = NOT_KAFKA
            self.stats.other_connections += 1
        return conn.app

    def _make_kafka(self, conn: TcpConnection, client_dir: int, wire: str = "modern"):
        mid = not conn.handshake_seen
        if wire == "0.7":
            from kafkasniff.pairing.legacy07 import Kafka07Connection

            app = Kafka07Connection(self.ctx, conn, client_dir, mid_stream=mid)
            self.stats.kafka07_connections += 1
        else:
            app = KafkaConnection(self.ctx, conn, client_dir, mid_stream=mid)
        conn.app = app
        self.stats.kafka_connections += 1
        return app

    def _decide(self, conn: TcpConnection, app: _Undecided, ev) -> list:
        """Buffer the first bytes of a connection until they say what it carries: Kafka (and
        which side is the client), Kafka 0.7, TLS, or something else."""
        app.events.append(ev)
        t = type(ev)
        if t is StreamData:
            if ev.offset == app.sizes[ev.direction] and app.sizes[ev.direction] < DETECT_WINDOW_BYTES:
                app.data[ev.direction] += ev.data
            app.sizes[ev.direction] += len(ev.data)
        elif t is StreamGap:
            app.sizes[ev.direction] = max(app.sizes[ev.direction], ev.offset + ev.length)
        data, sizes = app.data, app.sizes
        # decide now when the window is full, or can no longer fill: both directions broken
        # by a gap, or one of them carried far more than the window (its events are held)
        final = t is StreamClosed or \
            max(len(data[0]), len(data[1])) >= DETECT_WINDOW_BYTES or \
            max(sizes) >= UNDECIDED_MAX_BYTES or \
            (sizes[0] > len(data[0]) and sizes[1] > len(data[1]))
        kind, client_dir = self._detect(conn, app, final)
        if kind == "wait":
            return []
        if kind == "tls":
            tls = _Tls(app.client_dir, bytes(app.data[0]), bytes(app.data[1]))
            conn.app = tls
            self.stats.tls_connections += 1
            if app.client_dir < 0:
                self.stats.other_connections += 1
            return self._tls_closed(conn, tls, ev) if t is StreamClosed else []
        if kind == "other":
            conn.app = NOT_KAFKA
            self.stats.other_connections += 1
            self.stats.other_bytes += sum(len(e.data) for e in app.events if type(e) is StreamData)
            return []
        kafka = self._make_kafka(conn, client_dir, "0.7" if kind == "kafka07" else "modern")
        out: list = []
        if kafka.mid_stream:
            out.append(kafka.issue(
                IssueKind.MID_STREAM_START, "the connection was already open when the capture "
                "started (no handshake seen): framing starts tentatively at the first byte",
                severity=Severity.INFO, ts_ns=conn.first_ts_ns))
        for e in app.events:
            out.extend(self._to_kafka(kafka, e))
        return out

    def _detect(self, conn: TcpConnection, app: _Undecided, final: bool) -> tuple[str, int]:
        """``(kind, client direction)``; kind is ``kafka``, ``kafka07``, ``tls``, ``other`` or
        ``wait`` (more bytes needed)."""
        for d in (0, 1):
            data = app.data[d]
            if data and (looks_like_tls(bytes(data[:5 + 4])) or
                         (not conn.handshake_seen and _tls_record_header(data))):
                return "tls", -1
        wire = self.options.wire_format
        known = app.client_dir
        waiting = False
        for d in ((known,) if known >= 0 else (0, 1)):
            data = bytes(app.data[d])
            if not data:
                waiting = True
                continue
            # 0.7 first: its check is exact (sizes must add up to the frame), while the 0.8+
            # check accepts a 0.7 FETCH whose topic is 1-4 bytes long (read as a version)
            if wire != "modern":
                v = looks_like_07_request_stream(data)
                if v == ACCEPT:
                    return "kafka07", d
                waiting |= v == NEED_MORE
            if wire != "0.7":
                v = looks_like_request_stream(self.defs, data, self._validator)
                if v == ACCEPT:
                    return "kafka", d
                waiting |= v == NEED_MORE
        if waiting and not final:
            return "wait", -1
        if known >= 0:  # on a broker port: Kafka, even if its first bytes do not parse
            return ("kafka07" if wire == "0.7" else "kafka"), known
        if not conn.handshake_seen and wire != "0.7":
            # joined mid-frame: look for two chained plausible requests inside the window
            for d in (0, 1):
                if self._chained_requests(app, d):
                    return "kafka", d
        return ("other", -1) if final else ("wait", -1)

    def _chained_requests(self, app: _Undecided, d: int) -> bool:
        """Does a plausible request start at some offset ``pos >= 1`` of direction ``d``'s
        first bytes, followed by a second plausible request whose header is in the window?

        Incremental, so that a connection arriving in many small segments costs linear, not
        quadratic, time: each call examines only the offsets new since the previous call,
        plus the offsets that more bytes could still turn into a match (``app.later``, as
        ``(bytes needed, offset)``); the others are settled, since a validator's REJECT
        depends only on bytes already present.
        """
        data = app.data[d]
        n = len(data)
        done = app.scanned[d]
        if n == done:
            return False
        app.scanned[d] = n
        validate = self._validator
        keep = [e for e in app.later[d] if e[0] > n]
        retry = [pos for need, pos in app.later[d] if need <= n]
        for pos in itertools.chain(retry, range(max(1, done - 14), n - 14)):
            verdict = validate(data, pos, False)
            if verdict == ACCEPT:
                nxt = pos + 4 + int.from_bytes(data[pos:pos + 4], "big", signed=True)
                if nxt + 14 > n:
                    keep.append((nxt + 14, pos))
                    continue
                verdict = validate(data, nxt, False)
                if verdict == ACCEPT:
                    return True
            if verdict == NEED_MORE:
                keep.append((n + 1, pos))
        app.later[d] = keep
        return False

    def _summary(self, conn: TcpConnection, kind: str, client_dir: int, app,
                 sasl: dict | None = None) -> ConnectionSummary:
        b = conn.bytes
        return ConnectionSummary(
            conn.conn_id, kind, conn.endpoint(client_dir), conn.endpoint(1 - client_dir),
            conn.first_ts_ns, conn.last_ts_ns, conn.handshake_seen, conn.closed,
            b[client_dir], b[1 - client_dir], conn.segments[0] + conn.segments[1],
            conn.gap_bytes[0] + conn.gap_bytes[1],
            conn.retransmitted_bytes[0] + conn.retransmitted_bytes[1], conn.overlap_conflicts,
            getattr(app, "exchanges", 0), getattr(app, "unanswered", 0),
            getattr(app, "orphans", 0), conn.tls, sasl)

    def _tls_event(self, conn: TcpConnection, tls: "_Tls", ev) -> list:
        """Keep the first bytes of each direction of a TLS connection until its hellos parse;
        report the connection when it closes."""
        if type(ev) is StreamData:
            buf = tls.data[ev.direction]
            if len(buf) < TLS_HELLO_BYTES and ev.offset == len(buf):
                buf += ev.data[:TLS_HELLO_BYTES - len(buf)]
            return []
        if type(ev) is StreamClosed:
            return self._tls_closed(conn, tls, ev)
        return []

    def _tls_closed(self, conn: TcpConnection, tls: "_Tls", ev) -> list:
        if tls.client_dir < 0:
            return []  # TLS on no broker port: counted, not reported as a Kafka connection
        client = parse_hello(bytes(tls.data[tls.client_dir]))
        server = parse_hello(bytes(tls.data[1 - tls.client_dir]))
        parts = []
        if client is not None:
            parts.append(f"client offers {client.version()}")
            if client.sni:
                parts.append(f"SNI {client.sni}")
            if client.alpn:
                parts.append("ALPN " + ",".join(client.alpn))
        if server is not None:
            parts.append(f"server selected {server.version()}")
        msg = "TLS connection (not decoded as Kafka)" + (": " + ", ".join(parts) if parts else "")
        conn.tls = {"client_hello": client.to_json() if client else None,
                    "server_hello": server.to_json() if server else None}
        issue = DecodeIssue(IssueKind.TLS_CONNECTION, Severity.INFO, msg, conn.first_ts_ns,
                            conn.conn_id, conn.endpoint(tls.client_dir),
                            conn.endpoint(1 - tls.client_dir))
        return [issue]


_TLS_CONTENT_TYPES = (20, 21, 22, 23)
TLS_HELLO_BYTES = 16 * 1024


def _tls_record_header(data) -> bool:
    """A TLS record header (any content type) at the start of ``data``: what a connection
    joined mid-stream shows (application data records)."""
    return len(data) >= 5 and data[0] in _TLS_CONTENT_TYPES and data[1] == 3 and data[2] <= 4 \
        and 0 < (data[3] << 8 | data[4]) <= 2**14 + 2048


class _Tls:
    """A TLS connection on a broker port (or found by detection): its first bytes per
    direction, to read the ClientHello and ServerHello."""

    __slots__ = ("client_dir", "data")

    def __init__(self, client_dir: int, data0: bytes, data1: bytes) -> None:
        self.client_dir = client_dir
        self.data = [bytearray(data0[:TLS_HELLO_BYTES]), bytearray(data1[:TLS_HELLO_BYTES])]


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
