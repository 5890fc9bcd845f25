"""TCP reassembly per connection and direction (sans-IO).

:class:`TcpReassembler` is fed :class:`~kafkasniff.capture.types.TcpSegment` values in
capture order and returns :data:`~kafkasniff.tcp.types.StreamEvent` lists: in-order bytes
(:class:`StreamData`), explicit holes with their exact length (:class:`StreamGap`) and the
end of a connection (:class:`StreamClosed`). It does no I/O and never raises on odd traffic.

A new connection is announced implicitly: the first event that carries a
:class:`TcpConnection` whose ``conn_id`` the caller has not seen yet. Every connection that
produced an event ends with exactly one :class:`StreamClosed`. A connection whose only
segments carried no payload (a SYN, a handshake, a FIN exchange) ends with a
:class:`StreamClosed` without any data event before it.

Conventions (RFC 9293):

* Stream offsets are Python ints (64-bit in practice) and never wrap: offset 0 is the
  first byte after the SYN (ISN + 1), or the first payload byte seen when the handshake
  was not captured. Sequence numbers are mapped to offsets through the signed 32-bit
  difference from the next expected sequence number, so ISNs near 2**32 and streams longer
  than 4 GiB work.
* A SYN and a FIN each consume one sequence number and are not data.
* Bytes already delivered or already buffered are never delivered again (the first copy
  wins); a copy with different bytes counts an overlap conflict.

Bounds (per direction unless said otherwise):

* out-of-order buffer: ``max_ooo_bytes`` payload bytes and ``max_ooo_segments`` segments;
  beyond that the hole before the lowest buffered segment is declared a gap
  (``"ooo_overflow"``).
* history of delivered bytes used to detect conflicting retransmissions: references to the
  most recent delivered chunks not yet acknowledged by the peer (an ACK drops the history
  below it), at most ``max_history_bytes`` (64 KiB by default)
  and at most that plus one chunk. Older retransmissions are counted, not compared. The
  history restarts after every gap (it always ends at the next expected offset).
* connection table: ``max_connections`` open connections; the least recently active one is
  evicted (drained, ``StreamClosed(reason="evicted")``).
* closed connections (FIN or RST) are remembered for ``closed_linger_ns`` of capture time
  (at most ``max_connections`` of them), so that trailing segments (retransmissions, the
  last ACK) are counted in ``segments_ignored`` instead of opening a mid-stream connection.
  A SYN on such a flow opens a new connection at once.

Choices worth knowing:

* Endpoint A is the SYN sender. When the first segment seen is a SYN-ACK (the SYN was
  missed), A is its receiver and A's stream starts at the SYN-ACK's ACK number
  (``handshake_seen`` stays False). Otherwise A is the sender of the first segment.
* A connection closes as soon as both FINs are seen (or on RST); holes still open then
  become ``"close"`` gaps.
* ACK-based loss detection: an ACK from one endpoint beyond what was delivered of the other
  direction declares every hole below it ``"lost"`` at once (clamped to that direction's
  FIN). An ACK exactly one beyond the delivered data with nothing buffered and no FIN seen
  is not taken as evidence: it is what the ACK of a FIN the capture missed looks like.
* A SYN or SYN-ACK on an open flow starts a new connection (``"port_reuse"``) unless it
  repeats the ISN already known for its sender (or the one its stream started from) and no
  FIN was seen. A SYN from the non-initiating side (simultaneous open) is treated as port
  reuse too.
"""

from __future__ import annotations

import struct
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from dataclasses import dataclass, fields

from kafkasniff.capture.types import ACK, FIN, RST, SYN, TcpSegment
from kafkasniff.tcp.types import (
    StreamClosed,
    StreamData,
    StreamEvent,
    StreamGap,
    TcpConnection,
)

try:
    import cython
except ImportError:     # plain Python (Cython is only needed to compile: docs/compiled.md)
    from kafkasniff.cythonstub import cython

__all__ = ["ReassemblyStats", "TcpReassembler"]

_MASK = 0xFFFFFFFF
_HALF = 0x80000000
_CTRL = SYN | FIN | RST


# StreamData is a frozen dataclass: its generated __init__ sets each field through
# object.__setattr__, which costs ~0.2 us per event. The in-order fast path fills the
# slots directly through their descriptors (same resulting object, checked by a test).
# Compiled, the setters are inline C functions of reassembly.pxd (kafkasniff/slotstore.pxd).
_STREAM_DATA_SLOTS = ("conn", "direction", "offset", "data", "ts_ns")
if not cython.compiled:
    _new = object.__new__   # compiled: slotstore.new_object, in the .pxd
    _sd_conn, _sd_direction, _sd_offset, _sd_data, _sd_ts = (
        getattr(StreamData, _f).__set__ for _f in _STREAM_DATA_SLOTS)
else:
    # the byte offsets of the slots the setters of the .pxd store into
    (
        _sd_o_conn, _sd_o_direction, _sd_o_offset, _sd_o_data, _sd_o_ts
    ) = (slot_offset(StreamData, _f) for _f in _STREAM_DATA_SLOTS)  # noqa: F821 - in the .pxd
    # the byte offsets of the TcpSegment slots the fast path reads (_sg, in the .pxd)
    (
        _sg_o_ts, _sg_o_src_ip, _sg_o_src_port, _sg_o_dst_ip, _sg_o_dst_port, _sg_o_seq,
        _sg_o_ack, _sg_o_flags, _sg_o_payload, _sg_o_missing
    ) = (slot_offset(TcpSegment, _f) for _f in (  # noqa: F821 - in the .pxd
        "ts_ns", "src_ip", "src_port", "dst_ip", "dst_port", "seq", "ack", "flags", "payload",
        "missing_bytes"))


def _sdiff(a: int, b: int) -> int:
    """Signed 32-bit difference ``a - b`` of two sequence numbers."""
    return ((a - b + _HALF) & _MASK) - _HALF


@dataclass(slots=True)
class ReassemblyStats:
    """Global counters of a :class:`TcpReassembler` (all monotonically increasing).

    Attributes:
        segments: segments fed.
        payload_bytes: captured payload bytes fed (``len(seg.payload)``, retransmissions
            included).
        connections_opened / connections_closed: connections created / ended (any reason).
        retransmitted_segments: segments carrying at least one byte (or a SYN) already
            delivered or buffered.
        retransmitted_bytes: such bytes.
        overlap_conflicts: segments whose retransmitted bytes differed from the kept copy.
        gaps / gap_bytes: :class:`StreamGap` events emitted and their total length.
        ooo_overflows: gaps forced by the out-of-order buffer limits.
        evictions: connections closed because the table was full.
        segments_ignored: segments that produced nothing: pure ACK/FIN/RST of unknown flows,
            segments of recently closed connections, data after a FIN (a repeated SYN or
            SYN-ACK counts as retransmitted, one with another ISN is a port reuse).
        ignored_bytes: captured payload bytes neither delivered nor retransmitted: carried
            by segments of recently closed connections or by a RST, or beyond a FIN. Every
            payload byte fed is delivered (``StreamData``), retransmitted or ignored.
    """

    segments: int = 0
    payload_bytes: int = 0
    connections_opened: int = 0
    connections_closed: int = 0
    retransmitted_segments: int = 0
    retransmitted_bytes: int = 0
    overlap_conflicts: int = 0
    gaps: int = 0
    gap_bytes: int = 0
    ooo_overflows: int = 0
    evictions: int = 0
    segments_ignored: int = 0
    ignored_bytes: int = 0

    def as_dict(self) -> dict[str, int]:
        """Counter name to value."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


if cython.compiled:
    # the byte offsets of the TcpConnection and ReassemblyStats slots the fast path counts
    # in (_count, in the .pxd)
    _tc_o_last_ts, _tc_o_segments, _tc_o_bytes = (
        slot_offset(TcpConnection, _f) for _f in ("last_ts_ns", "segments", "bytes"))  # noqa: F821
    _rs_o_segments, _rs_o_payload = (
        slot_offset(ReassemblyStats, _f) for _f in ("segments", "payload_bytes"))  # noqa: F821


class _Dir:
    """Reassembly state of one direction (the bytes sent by one endpoint)."""

    __slots__ = (
        "st", "conn", "d", "other", "started", "base", "nseq", "nxt", "fast", "fin_off",
        "syn_isn", "starts", "ooo", "ooo_bytes", "hist", "hist_bytes",
    )

    def __init__(self, st: _Conn, d: int) -> None:
        self.st = st
        self.conn = st.conn
        self.d = d
        self.other: _Dir = self
        self.started = False
        self.base = 0            # sequence number of stream offset 0
        self.nseq = 0            # sequence number of offset ``nxt``
        self.nxt = 0             # next offset to deliver (everything before: delivered or gap)
        self.fast = False        # started, no FIN seen, nothing buffered
        self.fin_off: int | None = None
        self.syn_isn = -1        # the sender's SYN's sequence number (-1: no SYN seen)
        # the out-of-order buffer, made at its first entry (most directions never need one;
        # an open connection's state is what a full connection table holds 50,000 times)
        self.starts: list[int] | None = None                # buffered entry starts, sorted
        self.ooo: list[tuple[int, int, bytes | None, int]] | None = None  # (start, end,
        #                                                                   data|None, ts)
        self.ooo_bytes = 0
        # delivered chunks ending at nxt (a list: few items, small), made at the first
        # delivery and dropped (None) when the peer has acknowledged all of it
        self.hist: list[bytes] | None = None
        self.hist_bytes = 0

    def start(self, seq: int) -> None:
        self.started = True
        self.base = self.nseq = seq & _MASK
        self.conn.base_seq[self.d] = self.base
        self.nxt = 0
        self.fast = self.fin_off is None and not self.ooo


class _Conn:
    """One open connection: its :class:`TcpConnection` and its two directions. The flow
    table's two keys (A to B, B to A) are made again from the endpoints when it closes.

    The open connections form a list from the least to the most recently active
    (``older``, ``newer``): moving one to the end, evicting the oldest and closing one are a
    few pointer stores, with no table entry of their own (an ``OrderedDict`` entry cost about
    100 bytes a connection, and a full table holds 50,000 of them)."""

    __slots__ = ("conn", "dirs", "older", "newer")

    def __init__(self, conn: TcpConnection) -> None:
        self.conn = conn
        self.dirs = (_Dir(self, 0), _Dir(self, 1))
        self.dirs[0].other = self.dirs[1]
        self.dirs[1].other = self.dirs[0]
        self.older: _Conn | None = None
        self.newer: _Conn | None = None


class TcpReassembler:
    """Reassembles the TCP byte streams of many connections (sans-IO).

    Args:
        max_ooo_bytes: out-of-order payload bytes buffered per direction.
        max_ooo_segments: out-of-order segments buffered per direction.
        max_connections: open connections kept; the least recently active is evicted.
        idle_timeout_ns: :meth:`expire` closes connections idle longer than this.
        max_history_bytes: delivered bytes kept (as references) per direction to compare
            retransmissions against; 0 disables the comparison for delivered data.
        closed_linger_ns: how long (capture time) a FIN/RST-closed flow is remembered so
            that its trailing segments are ignored.
        first_conn_id: the id of the first connection (several reassemblers working on
            parts of one capture use disjoint ranges).
        max_history_total_bytes: budget for the retransmission history of all connections
            together; :meth:`expire` drops the history of the least recently active
            connections beyond it (their later retransmissions are counted, not compared).

    Feed segments in capture order with :meth:`feed`; call :meth:`expire` now and then
    (e.g. once per second of capture time) and :meth:`flush` at the end of the capture.
    Statistics are in :attr:`stats`.
    """

    def __init__(
        self,
        *,
        max_ooo_bytes: int = 4 * 2**20,
        max_ooo_segments: int = 2048,
        max_connections: int = 100_000,
        idle_timeout_ns: int = 3600 * 10**9,
        max_history_bytes: int = 64 * 1024,
        closed_linger_ns: int = 60 * 10**9,
        max_history_total_bytes: int = 32 * 2**20,
        first_conn_id: int = 0,
    ) -> None:
        if max_connections < 1:
            raise ValueError("max_connections must be >= 1")
        self.max_ooo_bytes = max_ooo_bytes
        self.max_ooo_segments = max_ooo_segments
        self.max_connections = max_connections
        self.idle_timeout_ns = idle_timeout_ns
        self.max_history_bytes = max_history_bytes
        self.closed_linger_ns = closed_linger_ns
        self.max_history_total_bytes = max_history_total_bytes
        self.stats = ReassemblyStats()
        self._flows: dict[tuple, _Dir] = {}          # 4-tuple (sender first) -> sender's _Dir
        # the open connections, least recently active first (see _Conn), and their number
        self._oldest: _Conn | None = None
        self._newest: _Conn | None = None
        self._open_count = 0
        # tombstones of FIN/RST-closed flows, oldest first: _tomb_key(A, B) -> close ts (one
        # compact key per pair of endpoints, the same both ways, not the two flow tuples: a
        # busy capture keeps up to max_connections of them, 649 -> 162 bytes each)
        self._closed: OrderedDict[bytes, int] = OrderedDict()
        self._next_id = first_conn_id
        self.hist_total = 0     # bytes of every direction's history (hist_bytes), summed

    # ------------------------------------------------------------------ public API

    @property
    def open_connections(self) -> int:
        """Number of connections currently open (in the table)."""
        return self._open_count

    @cython.locals(ds=_Dir, od=_Dir, flags=cython.long, x=cython.longlong, n=cython.Py_ssize_t,
                   off=cython.longlong, hb=cython.longlong, limit=cython.longlong,
                   d=cython.Py_ssize_t, hist=list, st=_Conn, ack=cython.longlong,
                   seqn=cython.longlong, missing=cython.longlong, exact=cython.bint)
    def feed(self, seg: TcpSegment) -> list[StreamEvent]:
        """Process one segment; return the events it caused, in order, in a new list each
        call (the caller may keep and extend it, empty or not).

        Events may concern several connections (an eviction, a port reuse closes the old
        connection before the new one's events).
        """
        # compiled, an exact TcpSegment's slots are read at their byte offsets (_sg, in the
        # .pxd): each attribute look-up by name cost about 150 instructions
        exact = cython.compiled and type(seg) is TcpSegment
        if exact:
            key = (_sg(seg, _sg_o_src_ip, "src_ip"),                        # noqa: F821
                   _sg(seg, _sg_o_src_port, "src_port"),                    # noqa: F821
                   _sg(seg, _sg_o_dst_ip, "dst_ip"),                        # noqa: F821
                   _sg(seg, _sg_o_dst_port, "dst_port"))                    # noqa: F821
        else:
            key = (seg.src_ip, seg.src_port, seg.dst_ip, seg.dst_port)
        ds = self._flows.get(key)
        if ds is not None:
            if exact:
                flags = _sg(seg, _sg_o_flags, "flags")                         # noqa: F821
                missing = _sg(seg, _sg_o_missing, "missing_bytes")             # noqa: F821
                ack = _sg(seg, _sg_o_ack, "ack")                               # noqa: F821
                seqn = _sg(seg, _sg_o_seq, "seq")                              # noqa: F821
                payload = _sg(seg, _sg_o_payload, "payload")                   # noqa: F821
                ts = _sg(seg, _sg_o_ts, "ts_ns")                               # noqa: F821
            else:
                flags, missing, ack, seqn = seg.flags, seg.missing_bytes, seg.ack, seg.seq
                payload, ts = seg.payload, seg.ts_ns
            if not flags & _CTRL and not missing:
                if flags & ACK:
                    od = ds.other
                    if od.started:
                        x = (ack - od.nseq) & _MASK
                        if x and x < _HALF:
                            return self._feed_slow(seg, ds)
                if payload:
                    if ds.fast and seqn == ds.nseq:
                        # fast path: in-order data
                        n = len(payload)
                        off = ds.nxt
                        ds.nxt = off + n
                        ds.nseq = (ds.nseq + n) & _MASK
                        hist = ds.hist
                        if hist is None:
                            hist = ds.hist = []
                        hist.append(payload)
                        hb = ds.hist_bytes + n
                        limit = self.max_history_bytes
                        while hb - len(hist[0]) >= limit:
                            hb -= len(hist.pop(0))
                            if not hist:
                                break
                        self.hist_total += hb - ds.hist_bytes
                        ds.hist_bytes = hb
                        conn = ds.conn
                        d = ds.d
                        stats = self.stats
                        if cython.compiled and type(conn) is TcpConnection \
                                and type(stats) is ReassemblyStats:
                            _count(conn, stats, d, n, ts)   # noqa: F821 - in the .pxd
                        else:
                            conn.last_ts_ns = ts
                            conn.segments[d] += 1
                            conn.bytes[d] += n
                            stats.segments += 1
                            stats.payload_bytes += n
                        st = ds.st
                        if st is not self._newest:
                            _touch(self, st)
                        ev = _new(StreamData)
                        _sd_conn(ev, conn)
                        _sd_direction(ev, d)
                        _sd_offset(ev, off)
                        _sd_data(ev, payload)
                        _sd_ts(ev, ts)
                        return [ev]
                else:
                    # fast path: pure ACK (or empty segment) on a known flow
                    conn = ds.conn
                    stats = self.stats
                    if cython.compiled and type(conn) is TcpConnection \
                            and type(stats) is ReassemblyStats:
                        _count(conn, stats, ds.d, 0, ts)    # noqa: F821 - in the .pxd
                    else:
                        conn.last_ts_ns = ts
                        conn.segments[ds.d] += 1
                        stats.segments += 1
                    st = ds.st
                    if st is not self._newest:
                        _touch(self, st)
                    return []
        return self._feed_slow(seg, ds)

    def expire(self, now_ns: int) -> list[StreamEvent]:
        """Close connections idle for more than ``idle_timeout_ns`` at ``now_ns``.

        Each is drained (buffered data delivered, holes as gaps with reason ``"close"``)
        and ends with ``StreamClosed(reason="idle", ts_ns=now_ns)``. Also forgets closed
        flows older than ``closed_linger_ns`` and enforces ``max_history_total_bytes``.
        Cost: proportional to what is expired (and, over the history budget, to the
        connections whose history is dropped), not to the connections open.
        """
        out: list[StreamEvent] = []
        limit = now_ns - self.idle_timeout_ns
        while self._oldest is not None:
            st = self._oldest
            if st.conn.last_ts_ns >= limit:
                break
            self._close(st, now_ns, "idle", out)
        closed = self._closed
        limit = now_ns - self.closed_linger_ns
        while closed:
            tkey = next(iter(closed))
            if closed[tkey] >= limit:
                break
            del closed[tkey]
        self._trim_history()
        return out

    def history_bytes(self) -> int:
        """Bytes currently referenced by the retransmission history of all connections (a
        running total: :meth:`expire` reads it once per second of capture time, where a sum
        over a full table of open connections cost 50,000 steps each time)."""
        return self.hist_total

    def _trim_history(self) -> None:
        """Keep the history of all connections under ``max_history_total_bytes``, dropping it
        from the least recently active connections first."""
        excess = self.hist_total - self.max_history_total_bytes
        if excess <= 0:
            return
        st = self._oldest
        while st is not None:
            for ds in st.dirs:
                if ds.hist_bytes:
                    excess -= ds.hist_bytes
                    self._drop_history(ds)
            if excess <= 0:
                return
            st = st.newer

    def _drop_history(self, ds: _Dir) -> None:
        """Forget the history of direction ``ds`` (later retransmissions of it are counted,
        not compared)."""
        self.hist_total -= ds.hist_bytes
        ds.hist = None
        ds.hist_bytes = 0

    def flush(self, ts_ns: int | None = None) -> list[StreamEvent]:
        """End of capture: drain and close every open connection (in ``conn_id`` order).

        Buffered data is delivered, holes become gaps with reason ``"close"``, then
        ``StreamClosed(reason="end_of_capture")``. ``ts_ns`` is the time stamped on the
        gaps and closes; ``None`` uses each connection's last packet time.
        """
        out: list[StreamEvent] = []
        opened = []
        st = self._oldest
        while st is not None:
            opened.append(st)
            st = st.newer
        for st in sorted(opened, key=lambda s: s.conn.conn_id):
            self._close(st, st.conn.last_ts_ns if ts_ns is None else ts_ns,
                        "end_of_capture", out)
        self._closed.clear()
        return out

    # ------------------------------------------------------------------ slow path

    def _feed_slow(self, seg: TcpSegment, ds: _Dir | None) -> list[StreamEvent]:
        stats = self.stats
        stats.segments += 1
        stats.payload_bytes += len(seg.payload)
        out: list[StreamEvent] = []
        flags = seg.flags
        ts = seg.ts_ns
        if ds is None:
            closed = self._closed
            tomb = None
            if closed:     # the tombstone of this flow, whichever endpoint sent the segment
                tkey = _tomb_key(seg.src_ip, seg.src_port, seg.dst_ip, seg.dst_port)
                tomb = closed.get(tkey)
                if tomb is not None and ts - tomb > self.closed_linger_ns:
                    del closed[tkey]
                    tomb = None
            if flags & SYN:
                if tomb is not None:
                    del closed[tkey]
                ds = self._open(seg, out)
            elif tomb is not None or not (seg.payload or seg.missing_bytes > 0):
                stats.segments_ignored += 1
                stats.ignored_bytes += len(seg.payload)
                return out
            else:
                ds = self._open(seg, out)
        elif flags & SYN:
            ds = self._on_syn(seg, ds, out)
        self._process(seg, ds, out)
        return out

    def _open(self, seg: TcpSegment, out: list[StreamEvent]) -> _Dir:
        """Create a connection for ``seg``; return the _Dir of its sender."""
        if self._open_count >= self.max_connections:
            victim = self._oldest
            self.stats.evictions += 1
            self._close(victim, seg.ts_ns, "evicted", out)
        flags = seg.flags
        synack = (flags & (SYN | ACK)) == (SYN | ACK)
        if synack:   # A is the receiver of the SYN-ACK: the endpoint that sent the SYN
            a_ip, a_port, b_ip, b_port = seg.dst_ip, seg.dst_port, seg.src_ip, seg.src_port
        else:
            a_ip, a_port, b_ip, b_port = seg.src_ip, seg.src_port, seg.dst_ip, seg.dst_port
        conn = TcpConnection(
            conn_id=self._next_id, a_ip=a_ip, a_port=a_port, b_ip=b_ip, b_port=b_port,
            first_ts_ns=seg.ts_ns, last_ts_ns=seg.ts_ns,
            handshake_seen=bool(flags & SYN) and not synack,
        )
        self._next_id += 1
        st = _Conn(conn)
        self._flows[(a_ip, a_port, b_ip, b_port)] = st.dirs[0]
        self._flows[(b_ip, b_port, a_ip, a_port)] = st.dirs[1]
        # the newest of the open connections
        newest = self._newest
        if newest is None:
            self._oldest = st
        else:
            newest.newer = st
            st.older = newest
        self._newest = st
        self._open_count += 1
        self.stats.connections_opened += 1
        ds = st.dirs[1 if synack else 0]
        if flags & SYN:
            ds.syn_isn = seg.seq
            ds.start(seg.seq + 1)
            if synack:
                ds.other.start(seg.ack)
        return ds

    def _on_syn(self, seg: TcpSegment, ds: _Dir, out: list[StreamEvent]) -> _Dir:
        """A SYN on a known open flow: same connection (returns ds) or a new connection
        (port reuse: closes the old one, returns the new sender _Dir)."""
        st = ds.st
        seq = seg.seq
        half_closed = st.dirs[0].fin_off is not None or st.dirs[1].fin_off is not None
        consistent = False
        if not half_closed:
            if ds.syn_isn >= 0:
                consistent = ds.syn_isn == seq
            elif ds.started:
                consistent = ds.base == ((seq + 1) & _MASK)
            else:
                consistent = bool(seg.flags & ACK)  # SYN-ACK completing our view of B
        if not consistent:
            self._close(st, seg.ts_ns, "port_reuse", out)
            return self._open(seg, out)
        if ds.syn_isn < 0:
            ds.syn_isn = seq
            if not ds.started:
                ds.start(seq + 1)
            if seg.flags & ACK:
                if not ds.other.started:
                    ds.other.start(seg.ack)
            elif ds.d == 0:
                st.conn.handshake_seen = True
        else:
            self.stats.retransmitted_segments += 1
        return ds

    def _process(self, seg: TcpSegment, ds: _Dir, out: list[StreamEvent]) -> None:
        """Everything but connection lookup/creation: counters, ACK, RST, data, FIN."""
        st = ds.st
        conn = st.conn
        ts = seg.ts_ns
        flags = seg.flags
        conn.last_ts_ns = ts
        conn.segments[ds.d] += 1
        if st is not self._newest:
            _touch(self, st)
        if flags & ACK:
            self._on_ack(ds.other, seg.ack, ts, out)
        if flags & (RST | FIN) and conn.closed_by < 0:
            conn.closed_by = ds.d
        if flags & RST:
            self.stats.ignored_bytes += len(seg.payload)
            self._close(st, ts, "rst", out)
            return
        payload = seg.payload
        missing = seg.missing_bytes if seg.missing_bytes > 0 else 0
        seq = (seg.seq + 1) & _MASK if flags & SYN else seg.seq
        n = len(payload) + missing
        if not (n or flags & FIN):
            return
        if not ds.started:
            ds.start(seq)
        off = ds.nxt + _sdiff(seq, ds.nseq)
        if n:
            self._ingest(ds, off, payload, missing, ts, out)
        if flags & FIN:
            if ds.fin_off is None:
                fin_off = off + n
                if fin_off < ds.nxt:
                    fin_off = ds.nxt
                ds.fin_off = fin_off
                ds.fast = False
                self._trim_beyond_fin(ds)
            if st.dirs[0].fin_off is not None and st.dirs[1].fin_off is not None:
                self._close(st, ts, "fin", out)

    def _on_ack(self, od: _Dir, ack: int, ts: int, out: list[StreamEvent]) -> None:
        """ACK-based loss detection for direction ``od`` (the data the ACK acknowledges)."""
        if not od.started:
            return
        x = _sdiff(ack, od.nseq)
        if x <= 0:
            # the peer holds everything below nxt + x: drop the history of those bytes (a
            # retransmission of acknowledged data is rare), so the history is bounded by the
            # unacknowledged window instead of max_history_bytes per direction
            hist = od.hist
            if hist:
                acked_off = od.nxt + x
                start = od.nxt - od.hist_bytes
                while hist and start + len(hist[0]) <= acked_off:
                    n0 = len(hist.pop(0))
                    start += n0
                    od.hist_bytes -= n0
                    self.hist_total -= n0
                if not hist:
                    od.hist = None
            return
        if x == 1 and od.fin_off is None and not od.ooo:
            return   # may acknowledge a FIN the capture did not see: not evidence of data
        acked = od.nxt + x
        if od.fin_off is not None and acked > od.fin_off:
            acked = od.fin_off
        # every hole below ``acked`` was received by the peer: declare each one
        while od.nxt < acked:
            limit = acked
            if od.starts and limit > od.starts[0]:
                limit = od.starts[0]
            self._gap(od, limit - od.nxt, ts, "lost", out)
            self._drain_front(od, out)
        od.fast = od.fin_off is None and not od.ooo

    def _ingest(self, ds: _Dir, off: int, data: bytes, missing: int, ts: int,
                out: list[StreamEvent]) -> None:
        """Add the segment range [off, off+len(data)+missing) to direction ``ds``."""
        stats = self.stats
        end = off + len(data) + missing
        fin = ds.fin_off
        if fin is not None and end > fin:
            stats.segments_ignored += 1
            if off >= fin:
                stats.ignored_bytes += len(data)
                return
            if off + len(data) > fin:
                stats.ignored_bytes += off + len(data) - fin
                data = data[: fin - off]
                missing = 0
            else:
                missing = fin - off - len(data)
            end = fin
        pieces: list[tuple[int, int, bytes | None]] = []
        if data:
            pieces.append((off, off + len(data), data))
        if missing:
            pieces.append((off + len(data), end, None))
        nxt = ds.nxt
        retrans = 0
        conflict = False
        if off < nxt:
            trimmed = []
            for s, e, b in pieces:
                if s < nxt:
                    k = min(e, nxt) - s
                    retrans += k
                    if b is not None and self._hist_conflict(ds, s, b[:k]):
                        conflict = True
                    if e <= nxt:
                        continue
                    s, b = nxt, (b[k:] if b is not None else None)
                trimmed.append((s, e, b))
            pieces = trimmed
        if pieces:
            if pieces[0][0] == nxt and not ds.ooo:
                # in order, nothing buffered: deliver directly
                for s, e, b in pieces:
                    if b is None:
                        self._gap(ds, e - s, ts, "snaplen", out)
                    else:
                        self._deliver(ds, b, ts, out)
            else:
                r, c = self._buffer(ds, pieces, ts)
                retrans += r
                conflict = conflict or c
                self._drain_front(ds, out)
                self._enforce_limits(ds, ts, out)
            ds.fast = ds.fin_off is None and not ds.ooo
        if retrans:
            conn = ds.conn
            stats.retransmitted_segments += 1
            stats.retransmitted_bytes += retrans
            conn.retransmitted_bytes[ds.d] += retrans
            if conflict:
                stats.overlap_conflicts += 1
                conn.overlap_conflicts += 1

    def _buffer(self, ds: _Dir, pieces: list[tuple[int, int, bytes | None]],
                ts: int) -> tuple[int, bool]:
        """Insert pieces (all >= nxt) into the out-of-order buffer; bytes already buffered
        are kept (first copy wins). Returns (bytes already buffered, conflict seen)."""
        starts = ds.starts
        ooo = ds.ooo
        if ooo is None:
            starts = ds.starts = []
            ooo = ds.ooo = []
        retrans = 0
        conflict = False
        new: list[tuple[int, int, bytes | None, int]] = []
        for s, e, b in pieces:
            i = bisect_right(starts, s) - 1
            if i < 0 or ooo[i][1] <= s:
                i += 1
            cur = s
            while i < len(ooo) and ooo[i][0] < e:
                es, ee, eb, _ = ooo[i]
                if cur < es:
                    new.append((cur, es, None if b is None else b[cur - s: es - s], ts))
                lo = max(cur, es)
                hi = min(e, ee)
                if hi > lo:
                    retrans += hi - lo
                    if (b is not None and eb is not None
                            and b[lo - s: hi - s] != eb[lo - es: hi - es]):
                        conflict = True
                if ee > cur:
                    cur = ee
                i += 1
            if cur < e:
                new.append((cur, e, None if b is None else b[cur - s:], ts))
        for entry in new:
            j = bisect_left(starts, entry[0])
            starts.insert(j, entry[0])
            ooo.insert(j, entry)
            if entry[2] is not None:
                ds.ooo_bytes += entry[1] - entry[0]
        return retrans, conflict

    def _drain_front(self, ds: _Dir, out: list[StreamEvent]) -> None:
        """Deliver buffered entries contiguous with ``nxt``."""
        starts = ds.starts
        ooo = ds.ooo
        while starts and starts[0] == ds.nxt:
            del starts[0]
            s, e, b, ts = ooo.pop(0)
            if b is None:
                self._gap(ds, e - s, ts, "snaplen", out)
            else:
                ds.ooo_bytes -= e - s
                self._deliver(ds, b, ts, out)

    def _enforce_limits(self, ds: _Dir, ts: int, out: list[StreamEvent]) -> None:
        while ds.ooo and (ds.ooo_bytes > self.max_ooo_bytes
                          or len(ds.ooo) > self.max_ooo_segments):
            self.stats.ooo_overflows += 1
            self._gap(ds, ds.starts[0] - ds.nxt, ts, "ooo_overflow", out)
            self._drain_front(ds, out)

    def _trim_beyond_fin(self, ds: _Dir) -> None:
        fin = ds.fin_off
        ooo = ds.ooo
        dropped = False
        while ooo and ooo[-1][1] > fin:
            s, e, b, t = ooo[-1]
            dropped = True
            if b is not None:
                ds.ooo_bytes -= e - s
                self.stats.ignored_bytes += e - max(s, fin)
            if s >= fin:
                ooo.pop()
                ds.starts.pop()
            else:
                nb = None if b is None else b[: fin - s]
                if nb is not None:
                    ds.ooo_bytes += fin - s
                ooo[-1] = (s, fin, nb, t)
                break
        if dropped:
            self.stats.segments_ignored += 1

    def _hist_conflict(self, ds: _Dir, off: int, data: bytes) -> bool:
        """Whether ``data`` at ``off`` (< nxt) differs from delivered bytes still in the
        history."""
        hist = ds.hist
        if not hist:
            return False
        end = off + len(data)
        pos_end = ds.nxt
        for chunk in reversed(hist):
            cstart = pos_end - len(chunk)
            lo = max(off, cstart)
            hi = min(end, pos_end)
            if hi > lo and data[lo - off: hi - off] != chunk[lo - cstart: hi - cstart]:
                return True
            if cstart <= off:
                break
            pos_end = cstart
        return False

    # ------------------------------------------------------------------ emitters

    def _deliver(self, ds: _Dir, data: bytes, ts: int, out: list[StreamEvent]) -> None:
        n = len(data)
        off = ds.nxt
        out.append(StreamData(ds.conn, ds.d, off, data, ts))
        ds.nxt = off + n
        ds.nseq = (ds.base + off + n) & _MASK
        ds.conn.bytes[ds.d] += n
        hist = ds.hist
        if hist is None:
            hist = ds.hist = []
        hist.append(data)
        hb = ds.hist_bytes + n
        limit = self.max_history_bytes
        while hist and hb - len(hist[0]) >= limit:
            hb -= len(hist.pop(0))
        self.hist_total += hb - ds.hist_bytes
        ds.hist_bytes = hb

    def _gap(self, ds: _Dir, length: int, ts: int, reason: str,
             out: list[StreamEvent]) -> None:
        off = ds.nxt
        out.append(StreamGap(ds.conn, ds.d, off, length, ts, reason))
        ds.nxt = off + length
        ds.nseq = (ds.base + off + length) & _MASK
        ds.conn.gap_bytes[ds.d] += length
        if ds.hist is not None:
            self._drop_history(ds)
        self.stats.gaps += 1
        self.stats.gap_bytes += length

    def _close(self, st: _Conn, ts: int, reason: str, out: list[StreamEvent]) -> None:
        """Drain both directions, emit StreamClosed, remove the connection."""
        for ds in st.dirs:
            while ds.ooo:
                hole = ds.starts[0] - ds.nxt
                if hole > 0:
                    self._gap(ds, hole, ts, "close", out)
                self._drain_front(ds, out)
            if ds.fin_off is not None and ds.fin_off > ds.nxt:
                self._gap(ds, ds.fin_off - ds.nxt, ts, "close", out)
            ds.fast = False
            if ds.hist is not None:
                self._drop_history(ds)
        conn = st.conn
        conn.closed = reason
        out.append(StreamClosed(conn, ts, reason))
        self.stats.connections_closed += 1
        flows = self._flows
        for key in ((conn.a_ip, conn.a_port, conn.b_ip, conn.b_port),
                    (conn.b_ip, conn.b_port, conn.a_ip, conn.a_port)):
            if flows.get(key) in st.dirs:
                del flows[key]
        # out of the list of open connections
        older, newer = st.older, st.newer
        if older is not None or newer is not None or self._oldest is st:
            if older is None:
                self._oldest = newer
            else:
                older.newer = newer
            if newer is None:
                self._newest = older
            else:
                newer.older = older
            st.older = st.newer = None
            self._open_count -= 1
        if reason in ("fin", "rst") and self.closed_linger_ns > 0:
            closed = self._closed
            # one tombstone per pair of endpoints: the latest close, either way round
            tkey = _tomb_key(conn.a_ip, conn.a_port, conn.b_ip, conn.b_port)
            closed.pop(tkey, None)
            closed[tkey] = ts
            while len(closed) > self.max_connections:
                closed.popitem(last=False)
        # the connection's state is a reference cycle (each direction points at the
        # connection and at the other direction): cut, it is freed now, not by a collection
        # that would first carry it through every generation
        for ds in st.dirs:
            ds.other = None
            ds.st = None


@cython.locals(older=_Conn, newer=_Conn, newest=_Conn)
def _touch(r: TcpReassembler, st: _Conn) -> None:
    """Make the open connection ``st`` (not the most recently active one) the most recently
    active one of ``r``."""
    older, newer = st.older, st.newer       # newer: not None, st is not the newest
    if older is None:
        r._oldest = newer
    else:
        older.newer = newer
    newer.older = older
    newest = r._newest
    newest.newer = st
    st.older = newest
    st.newer = None
    r._newest = st


_PORT = struct.Struct("!H").pack


def _tomb_key(ip1: bytes, port1: int, ip2: bytes, port2: int) -> bytes:
    """The tombstone key of the connection between two endpoints, the same whichever is
    given first: each endpoint as its packed address and 2-byte port, in sorted order (12
    bytes for IPv4, 36 for IPv6)."""
    a = ip1 + _PORT(port1)
    b = ip2 + _PORT(port2)
    return a + b if a <= b else b + a
