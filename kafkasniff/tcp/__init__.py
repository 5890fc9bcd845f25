"""TCP reassembly: segments in, per-connection in-order byte streams out (sans-IO).

See :mod:`kafkasniff.tcp.reassembly` and :mod:`kafkasniff.tcp.types`.
"""

from kafkasniff.tcp.reassembly import ReassemblyStats, TcpReassembler
from kafkasniff.tcp.types import (
    StreamClosed,
    StreamData,
    StreamEvent,
    StreamGap,
    TcpConnection,
    format_endpoint,
)

__all__ = [
    "ReassemblyStats",
    "StreamClosed",
    "StreamData",
    "StreamEvent",
    "StreamGap",
    "TcpConnection",
    "TcpReassembler",
    "format_endpoint",
]
