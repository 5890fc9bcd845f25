"""One captured packet through link/IP/TCP decoding and reassembly to its connection: the
per-packet path of :meth:`kafkasniff.pipeline.Pipeline.feed`.

Every packet of every command takes this path (``read``, ``stats``, ``export``, the
``--jobs`` decoders, live decoders, ``spark decode`` tasks), and most packets end in it: a
TCP segment whose in-order bytes go to a Kafka connection without completing a frame. As a
Python method it was the only Python frame per packet, and its attribute reads and counter
stores cost about as much as the compiled calls it makes on small packets
(docs/compiled.md). :class:`PacketFeeder` keeps what it needs in fields; compiled by Cython
(``feeding.pxd``) they are C fields, and the counters of a
:class:`~kafkasniff.pipeline.PipelineStats` and the fields of a
:class:`~kafkasniff.capture.types.CapturedPacket` and a
:class:`~kafkasniff.tcp.types.StreamData` are read and stored at their slots' byte offsets
(:mod:`kafkasniff.slotstore`). As plain Python the same code runs with attribute access.

Nothing here decides what a connection is: events other than one in-order chunk of a known
Kafka connection go back to the pipeline's ``dispatch``.
"""

from __future__ import annotations

from typing import Callable

from kafkasniff.capture.packet import decode_frame
from kafkasniff.capture.types import CapturedPacket, Skipped
from kafkasniff.pairing.connection import KafkaConnection
from kafkasniff.tcp.types import StreamData, TcpConnection

try:
    import cython
except ImportError:     # plain Python (Cython is only needed to compile: docs/compiled.md)
    from kafkasniff.cythonstub import cython

__all__ = ["EXPIRE_EVERY_NS", "PacketFeeder"]

#: look for idle connections once per second of capture time
EXPIRE_EVERY_NS = 1_000_000_000

#: the counters of the pipeline's stats the fast path stores into, in the order of the
#: offsets PacketFeeder keeps (compiled)
_STATS_SLOTS = ("packets", "packet_bytes", "first_ts_ns", "last_ts_ns", "tcp_segments",
                "pending_header_bytes")

if cython.compiled:
    # the byte offsets of the CapturedPacket, StreamData and TcpConnection slots the fast
    # path reads (_sg, in the .pxd)
    _pk_o_ts, _pk_o_link, _pk_o_data, _pk_o_orig = (
        slot_offset(CapturedPacket, _f)  # noqa: F821 - in the .pxd
        for _f in ("ts_ns", "link_type", "data", "orig_len"))
    _sd_o_conn, _sd_o_direction, _sd_o_offset, _sd_o_data, _sd_o_ts = (
        slot_offset(StreamData, _f)  # noqa: F821 - in the .pxd
        for _f in ("conn", "direction", "offset", "data", "ts_ns"))
    _tc_o_conn_id = slot_offset(TcpConnection, "conn_id")  # noqa: F821 - in the .pxd


class PacketFeeder:
    """Feeds packets to a pipeline's TCP reassembler and routes the events.

    Args:
        stats: the pipeline's :class:`~kafkasniff.pipeline.PipelineStats` (counted in:
            ``packets``, ``packet_bytes``, ``first_ts_ns``, ``last_ts_ns``,
            ``tcp_segments``, the header bytes of TCP packets, ``skipped`` and the byte
            ledger's ``packets_not_tcp``).
        reassembler: the :class:`~kafkasniff.tcp.reassembly.TcpReassembler`.
        connections: conn_id -> connection state (read only here: an in-order chunk of a
            :class:`~kafkasniff.pairing.connection.KafkaConnection` goes straight to its
            ``on_data``).
        closed: the pipeline's connections closed during the last call (cleared at each
            call).
        account: ``account(records) -> records``, for what ``on_data`` returned.
        dispatch: ``dispatch(events) -> records``, for every other event list.
        expire: ``expire(ts_ns) -> records``, called once per :data:`EXPIRE_EVERY_NS` of
            capture time.
        next_expire_ns: capture time (ns) of the first ``expire`` call (``1 << 62``: never,
            the caller expires).
    """

    def __init__(self, stats, reassembler, connections: dict, closed: dict,
                 account: Callable, dispatch: Callable, expire: Callable,
                 next_expire_ns: int) -> None:
        self.stats = stats
        self.reassembler = reassembler
        self.connections = connections
        self.closed = closed
        self.account = account
        self.dispatch = dispatch
        self.expire = expire
        self.next_expire_ns = next_expire_ns
        if cython.compiled:
            offsets = [slot_offset(type(stats), f)  # noqa: F821 - in the .pxd
                       for f in _STATS_SLOTS]
            # the counters are stored at their offsets only into this exact class's slots
            self.fast = -1 not in offsets
            (self.o_packets, self.o_packet_bytes, self.o_first_ts, self.o_last_ts,
             self.o_segments, self.o_headers) = offsets

    def feed(self, pkt: CapturedPacket) -> list:
        """Process one packet (what :meth:`kafkasniff.pipeline.Pipeline.feed` does).

        Args:
            pkt: a :class:`~kafkasniff.capture.types.CapturedPacket` (``ts_ns`` in ns since
                the epoch, ``data`` the captured bytes of a frame of ``link_type``).

        Returns:
            The :data:`~kafkasniff.model.Record` list the packet completed, in order
            (often empty; the list may be the reassembler's own, the caller's to keep).

        Nothing is raised for a packet's content: one that is not TCP (or cut, or
        malformed) is counted in ``stats.skipped`` and its bytes in the ledger's
        ``packets_not_tcp``; TCP oddities are the reassembler's counts and gaps (RFC 9293),
        Kafka ones the connection's issues. No Kafka spec applies here: the Kafka protocol
        starts in the connection the bytes are handed to."""
        closed = self.closed
        if closed:
            closed.clear()
        st = self.stats
        if cython.compiled and self.fast and type(pkt) is CapturedPacket:
            data = _sg(pkt, _pk_o_data, "data")  # noqa: F821 - in the .pxd
            ts_ns = _sg(pkt, _pk_o_ts, "ts_ns")  # noqa: F821
            link_type = _sg(pkt, _pk_o_link, "link_type")  # noqa: F821
            orig_len = _sg(pkt, _pk_o_orig, "orig_len")  # noqa: F821
            _count_packet(self, st, len(data), ts_ns)  # noqa: F821
        else:
            data = pkt.data
            ts_ns = pkt.ts_ns
            link_type = pkt.link_type
            orig_len = pkt.orig_len
            st.packets += 1
            st.packet_bytes += len(data)
            if not st.first_ts_ns:
                st.first_ts_ns = ts_ns
            st.last_ts_ns = ts_ns
        seg = decode_frame(link_type, data, orig_len, ts_ns)
        if type(seg) is Skipped:
            st.skipped[seg.reason] += 1
            st.bytes["packets_not_tcp"] += len(data)
            out = []
        else:
            # the packet's link, IP and TCP header bytes go to the ledger when it is read
            if cython.compiled and self.fast:
                _count_segment(self, st, len(data) - len(seg.payload))  # noqa: F821
            else:
                st.tcp_segments += 1
                st.pending_header_bytes += len(data) - len(seg.payload)
            events = self.reassembler.feed(seg)
            if not events:
                out = events        # the reassembler's own fresh empty list: no new one
            elif len(events) == 1 and type(ev := events[0]) is StreamData:
                # the common case: in-order bytes of a Kafka connection (most of them
                # complete no frame and return nothing; topic ids are learnt only while an
                # exchange is made, which ``out`` holds)
                if cython.compiled:
                    conn = _sg(ev, _sd_o_conn, "conn")  # noqa: F821
                    app = self.connections.get(
                        _sg(conn, _tc_o_conn_id, "conn_id")  # noqa: F821
                        if type(conn) is TcpConnection else conn.conn_id)
                else:
                    app = self.connections.get(ev.conn.conn_id)
                if type(app) is KafkaConnection:
                    if cython.compiled:
                        out = app.on_data(_sg(ev, _sd_o_direction, "direction"),  # noqa: F821
                                          _sg(ev, _sd_o_offset, "offset"),  # noqa: F821
                                          _sg(ev, _sd_o_data, "data"),  # noqa: F821
                                          _sg(ev, _sd_o_ts, "ts_ns"))  # noqa: F821
                    else:
                        out = app.on_data(ev.direction, ev.offset, ev.data, ev.ts_ns)
                    if out:
                        out = self.account(out)
                else:
                    out = self.dispatch(events)
            else:
                out = self.dispatch(events)
        if ts_ns >= self.next_expire_ns:
            self.next_expire_ns = ts_ns + EXPIRE_EVERY_NS
            expired = self.expire(ts_ns)
            if expired:
                out.extend(expired)
        return out
