"""Values produced by the capture stage.

``CapturedPacket`` is what a packet source (pcap, pcapng, live) yields; ``decode_packet``
turns it into a :class:`TcpSegment` or a :class:`Skipped` with a reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkasniff.frozen import fast_init

# TCP flag bits (RFC 9293)
FIN = 0x01
SYN = 0x02
RST = 0x04
PSH = 0x08
ACK = 0x10
URG = 0x20


@fast_init
@dataclass(frozen=True, slots=True)
class CapturedPacket:
    """One captured link-layer frame.

    Attributes:
        ts_ns: capture time, integer nanoseconds since the Unix epoch (UTC).
        link_type: LINKTYPE_* value of the interface (1 Ethernet, 113 Linux SLL, 276 SLL2,
            0 BSD null, 108 OpenBSD loop, 101 raw IP, 228 IPv4, 229 IPv6).
        data: the captured bytes (``caplen`` long).
        orig_len: the frame's length on the wire; ``> len(data)`` when snaplen cut it.
        interface_id: pcapng interface index (0 for pcap and live).
    """

    ts_ns: int
    link_type: int
    data: bytes
    orig_len: int
    interface_id: int = 0


@fast_init
@dataclass(frozen=True, slots=True)
class TcpSegment:
    """One TCP segment with the IP endpoints it travelled between.

    Attributes:
        ts_ns: capture time, ns since epoch.
        src_ip / dst_ip: packed addresses, 4 bytes (IPv4) or 16 bytes (IPv6).
        src_port / dst_port: TCP ports.
        seq / ack: raw 32-bit sequence and acknowledgement numbers.
        flags: TCP flag bits (see ``FIN``, ``SYN``, ``RST``, ``ACK`` ... in this module).
        payload: the captured TCP payload bytes.
        missing_bytes: payload bytes the IP header announced but the capture does not hold
            (snaplen truncation); the reassembler turns them into a gap.
    """

    ts_ns: int
    src_ip: bytes
    src_port: int
    dst_ip: bytes
    dst_port: int
    seq: int
    ack: int
    flags: int
    payload: bytes
    missing_bytes: int = 0


@fast_init
@dataclass(frozen=True, slots=True)
class Skipped:
    """A packet that carries no TCP payload for us, with the reason (a counter name).

    Reasons: ``non_ip``, ``non_tcp``, ``ip_fragment``, ``unsupported_link_type``,
    ``malformed``, ``truncated_header``.
    """

    reason: str
