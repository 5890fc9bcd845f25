"""Values produced by TCP reassembly.

The reassembler groups segments into connections (:class:`TcpConnection`) and emits, per
connection and direction, in-order byte ranges (:class:`StreamData`), explicit holes
(:class:`StreamGap`) and the end of a connection (:class:`StreamClosed`).

Direction ``0`` is data sent by endpoint A, direction ``1`` by endpoint B. A is the endpoint
that sent the SYN when the handshake was captured, else the sender of the first segment seen.
Which side is the Kafka broker is decided later by the Kafka layer.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from kafkasniff.frozen import fast_init


def format_endpoint(ip: bytes, port: int) -> str:
    """``"1.2.3.4:9092"`` or ``"[::1]:9092"`` from a packed address and a port."""
    if len(ip) == 4:
        return f"{ip[0]}.{ip[1]}.{ip[2]}.{ip[3]}:{port}"
    return f"[{ipaddress.IPv6Address(ip)}]:{port}"


@dataclass(slots=True, eq=False)
class TcpConnection:
    """A TCP connection as seen in the capture (mutable; identity is ``conn_id``).

    Attributes:
        conn_id: unique, increasing id in the order connections were first seen.
        a_ip, a_port, b_ip, b_port: the two endpoints (A = SYN sender or first sender).
        first_ts_ns / last_ts_ns: first and last packet of the connection.
        handshake_seen: whether the SYN of A was captured (else the capture began mid-stream).
        bytes: payload bytes delivered per direction ``[a_to_b, b_to_a]``.
        gap_bytes: bytes lost in gaps per direction.
        segments: segments seen per direction.
        retransmitted_bytes: bytes seen again (either identical or conflicting) per direction.
        overlap_conflicts: retransmissions with different bytes (first copy wins).
        closed: ``""`` while open, else ``"fin"``, ``"rst"``, ``"idle"``, ``"evicted"``,
            ``"end_of_capture"`` or ``"port_reuse"``.
        closed_by: direction (0: A, 1: B) that sent the first FIN or RST, -1 if none.
        base_seq: per direction, the TCP sequence number of stream offset 0 (``-1`` until
            known): ``(base_seq[d] + offset) % 2**32`` locates a byte in the capture.
    """

    conn_id: int
    a_ip: bytes
    a_port: int
    b_ip: bytes
    b_port: int
    first_ts_ns: int
    last_ts_ns: int
    handshake_seen: bool = False
    bytes: list[int] = field(default_factory=lambda: [0, 0])
    gap_bytes: list[int] = field(default_factory=lambda: [0, 0])
    segments: list[int] = field(default_factory=lambda: [0, 0])
    retransmitted_bytes: list[int] = field(default_factory=lambda: [0, 0])
    overlap_conflicts: int = 0
    closed: str = ""
    closed_by: int = -1
    base_seq: list[int] = field(default_factory=lambda: [-1, -1])

    def seq_at(self, direction: int, offset: int) -> int:
        """TCP sequence number of stream ``offset`` of ``direction`` (-1 if not known)."""
        base = self.base_seq[direction]
        return (base + offset) & 0xFFFFFFFF if base >= 0 else -1

    def endpoint(self, direction: int) -> str:
        """``"ip:port"`` of the sender of ``direction`` (0: A, 1: B)."""
        if direction == 0:
            return format_endpoint(self.a_ip, self.a_port)
        return format_endpoint(self.b_ip, self.b_port)


@fast_init
@dataclass(frozen=True, slots=True)
class StreamData:
    """In-order bytes of one direction.

    Attributes:
        conn: the connection.
        direction: 0 (A to B) or 1 (B to A).
        offset: stream offset of ``data[0]`` (0 = first byte after the SYN, or the first
            byte seen when the handshake was not captured); 64-bit, never wraps.
        data: the bytes.
        ts_ns: capture time of the segment that carried them.
    """

    conn: TcpConnection
    direction: int
    offset: int
    data: bytes
    ts_ns: int


@fast_init
@dataclass(frozen=True, slots=True)
class StreamGap:
    """Bytes of one direction that were never captured.

    Attributes:
        conn, direction: as in :class:`StreamData`.
        offset: stream offset of the first missing byte.
        length: number of missing bytes (> 0).
        ts_ns: capture time at which the gap was declared.
        reason: ``"lost"`` (segments never seen), ``"snaplen"`` (payload cut by snaplen),
            ``"ooo_overflow"`` (out-of-order buffer limit forced a skip), ``"close"``
            (connection ended with data still missing).
    """

    conn: TcpConnection
    direction: int
    offset: int
    length: int
    ts_ns: int
    reason: str = "lost"


@fast_init
@dataclass(frozen=True, slots=True)
class StreamClosed:
    """The end of a connection (both directions). ``reason`` as :attr:`TcpConnection.closed`."""

    conn: TcpConnection
    ts_ns: int
    reason: str


StreamEvent = StreamData | StreamGap | StreamClosed
