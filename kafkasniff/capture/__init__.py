"""Capture stage: packets in, TCP segments out.

``open_capture(source)`` streams :class:`CapturedPacket` values from a pcap / pcapng file
(gzip allowed; ``"-"`` is stdin); ``decode_packet(pkt)`` parses link, IP and TCP headers into a
:class:`TcpSegment` or a :class:`Skipped` with a reason. Both are pure Python with no
third-party dependency.
"""

from kafkasniff.capture.packet import (
    SKIP_REASONS,
    SUPPORTED_LINK_TYPES,
    decode_frame,
    decode_packet,
)
from kafkasniff.capture.pcapfile import MAX_RECORD_BYTES, PacketSource, open_capture
from kafkasniff.capture.types import (
    ACK,
    FIN,
    PSH,
    RST,
    SYN,
    URG,
    CapturedPacket,
    Skipped,
    TcpSegment,
)

__all__ = [
    "ACK",
    "FIN",
    "MAX_RECORD_BYTES",
    "PSH",
    "RST",
    "SKIP_REASONS",
    "SUPPORTED_LINK_TYPES",
    "SYN",
    "URG",
    "CapturedPacket",
    "PacketSource",
    "Skipped",
    "TcpSegment",
    "decode_frame",
    "decode_packet",
    "open_capture",
]
