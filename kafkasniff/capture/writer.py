"""Streaming pcapng writer: :class:`CapturedPacket` values in, a pcapng file out.

``PcapNgWriter(dest)`` writes one Section Header Block, then for every distinct link type an
Interface Description Block (declared lazily, when the first packet of that link type comes)
with ``if_tsresol`` = 9 (nanosecond timestamps), and one Enhanced Packet Block per packet
with the exact integer ``ts_ns``, the captured bytes and the original length. Packets of
several link types go to one file (one interface each), so a capture's link types and
timestamps survive a split or a live ``--write`` unchanged: reading the file back with
:func:`kafkasniff.capture.open_capture` yields the same ``(ts_ns, link_type, data,
orig_len)`` values. ``interface_id`` is not preserved: packets are grouped per link type.

Format: https://datatracker.ietf.org/doc/draft-ietf-opsawg-pcapng/ (little-endian section,
version 1.0, section length -1 = unspecified, so the file can be streamed). Blocks are
buffered (``buffer_bytes``) and written in large writes; memory stays at one buffer.
"""

from __future__ import annotations

import os
import struct
from typing import IO

from kafkasniff.capture.types import CapturedPacket

__all__ = ["PcapNgWriter"]

_SHB = 0x0A0D0D0A
_IDB = 0x00000001
_EPB = 0x00000006
_BOM = 0x1A2B3C4D
_OPT_SHB_USERAPPL = 4
_OPT_IF_TSRESOL = 9
_U64_LIMIT = 1 << 64
_PADS = (b"", b"\0\0\0", b"\0\0", b"\0")

_epb_head = struct.Struct("<IIIIIII").pack   # type, length, iface, ts_hi, ts_lo, caplen, origlen
_u32 = struct.Struct("<I").pack
_ISB = 0x00000005                              # Interface Statistics Block
_DSB = 0x0000000A                              # Decryption Secrets Block


def _option(code: int, value: bytes) -> bytes:
    return struct.pack("<HH", code, len(value)) + value + b"\0" * (-len(value) % 4)


def _block(btype: int, body: bytes) -> bytes:
    body += b"\0" * (-len(body) % 4)
    total = 12 + len(body)
    return struct.pack("<II", btype, total) + body + _u32(total)


def isb_block(iface: int, ts_ns: int, start_ns: int, received: int | None,
              dropped: int | None, comment: str = "") -> bytes:
    """A pcapng Interface Statistics Block (little endian, for a nanosecond interface,
    draft-ietf-opsawg-pcapng section 4.6): ``isb_starttime`` ``start_ns``, ``isb_endtime``
    and the block time ``ts_ns``, ``isb_ifrecv`` / ``isb_ifdrop`` when not ``None``, an
    ``opt_comment``."""
    ts = max(0, ts_ns)
    opts = _option(2, struct.pack("<II", start_ns >> 32, start_ns & 0xFFFFFFFF))
    opts += _option(3, struct.pack("<II", ts >> 32, ts & 0xFFFFFFFF))
    if received is not None:
        opts += _option(4, struct.pack("<Q", received))
    if dropped is not None:
        opts += _option(5, struct.pack("<Q", dropped))
    if comment:
        opts += _option(1, comment.encode())
    opts += struct.pack("<HH", 0, 0)
    return _block(_ISB, struct.pack("<III", iface, ts >> 32, ts & 0xFFFFFFFF) + opts)


class PcapNgWriter:
    """Write packets to a pcapng file as they come.

    Args:
        dest: a path (``str`` / ``os.PathLike``; created or truncated, closed by
            :meth:`close`) or a binary file object with ``write`` (flushed, not closed, by
            :meth:`close`).
        snaplen: the interfaces' snap length (0: no limit, the default). Written as is;
            packets are never cut here.
        application: the ``shb_userappl`` option (the writing application's name).
        buffer_bytes: bytes collected before a write to ``dest``.

    Attributes:
        packets_written: packets written so far.
        bytes_written: bytes handed to ``dest`` so far, including the buffered ones.
        link_types: interface id -> link type, in the order interfaces were declared.

    Use as a context manager, or call :meth:`close`. ``write`` raises ``ValueError`` for a
    timestamp outside 0 .. 2^64-1 ns, a link type outside 0 .. 65535 or a write after close.
    """

    def __init__(self, dest: str | os.PathLike[str] | IO[bytes], *, snaplen: int = 0,
                 application: str | None = None, buffer_bytes: int = 1 << 20) -> None:
        if isinstance(dest, (str, os.PathLike)):
            self._f: IO[bytes] = open(dest, "wb")  # noqa: SIM115 - closed in close()
            self._own = True
        elif hasattr(dest, "write"):
            self._f = dest
            self._own = False
        else:
            raise TypeError(f"{dest!r}: not a path or a binary file object")
        self.name = str(getattr(self._f, "name", "") or "<stream>")
        self.snaplen = snaplen
        self.packets_written = 0
        self.bytes_written = 0
        self.link_types: dict[int, int] = {}
        self._iface: dict[int, int] = {}   # link type -> interface id
        self._buf: list[bytes] = []
        self._buffered = 0
        self._limit = buffer_bytes
        self._closed = False
        if application is None:
            from kafkasniff import __version__
            application = f"kafkasniff {__version__}"
        opts = _option(_OPT_SHB_USERAPPL, application.encode()) + struct.pack("<HH", 0, 0)
        self._put(_block(_SHB, struct.pack("<IHHq", _BOM, 1, 0, -1) + opts))

    # ------------------------------------------------------------------ writing

    def write(self, pkt: CapturedPacket) -> None:
        """Append one packet (its ``ts_ns``, ``link_type``, ``data`` and ``orig_len``)."""
        self.write_packet(pkt.ts_ns, pkt.link_type, pkt.data, pkt.orig_len)

    def write_packet(self, ts_ns: int, link_type: int, data: bytes,
                     orig_len: int | None = None) -> None:
        """Append one packet from its fields.

        Args:
            ts_ns: capture time, integer ns since the epoch (0 .. 2^64-1).
            link_type: LINKTYPE_* value (0 .. 65535); its interface is declared on first use.
            data: the captured bytes.
            orig_len: the frame's length on the wire (default ``len(data)``).

        Raises:
            ValueError: a timestamp or link type out of range, or a write after close.
        """
        if self._closed:
            raise ValueError(f"{self.name}: write after close")
        iface = self._iface.get(link_type)
        if iface is None:
            iface = self._declare(link_type)
        if not 0 <= ts_ns < _U64_LIMIT:
            raise ValueError(f"{self.name}: timestamp {ts_ns} ns outside 0 .. 2^64-1")
        caplen = len(data)
        if orig_len is None:
            orig_len = caplen
        pad = _PADS[caplen & 3]
        total = 32 + caplen + len(pad)
        buf = self._buf
        buf.append(_epb_head(_EPB, total, iface, ts_ns >> 32, ts_ns & 0xFFFFFFFF, caplen,
                             orig_len & 0xFFFFFFFF))
        buf.append(data)
        buf.append(pad + _u32(total) if pad else _u32(total))
        self.packets_written += 1
        self.bytes_written += total
        self._buffered += total
        if self._buffered >= self._limit:
            self._drain()

    def write_secrets(self, secrets_type: int, data: bytes) -> None:
        """Append a Decryption Secrets Block (draft-ietf-opsawg-pcapng section 4.7):
        ``secrets_type`` (``0x544c534b``: TLS key log text) and the secrets ``data``; it
        applies to the packets after it.

        Raises:
            ValueError: a write after close.
        """
        if self._closed:
            raise ValueError(f"{self.name}: write after close")
        self._put(_block(_DSB, struct.pack("<II", secrets_type, len(data)) + data))

    def _declare(self, link_type: int) -> int:
        if not 0 <= link_type <= 0xFFFF:
            raise ValueError(f"{self.name}: link type {link_type} outside 0 .. 65535")
        iface = len(self._iface)
        opts = _option(_OPT_IF_TSRESOL, b"\x09") + struct.pack("<HH", 0, 0)
        self._put(_block(_IDB, struct.pack("<HHI", link_type, 0, self.snaplen) + opts))
        self._iface[link_type] = iface
        self.link_types[iface] = link_type
        return iface

    def _put(self, block: bytes) -> None:
        self._buf.append(block)
        self._buffered += len(block)
        self.bytes_written += len(block)

    def _drain(self) -> None:
        if self._buf:
            self._f.write(b"".join(self._buf))
            self._buf = []
            self._buffered = 0

    def flush(self) -> None:
        """Write the buffered blocks and flush ``dest`` (a reader then sees every packet)."""
        if self._closed:
            return
        self._drain()
        self._f.flush()

    def close(self) -> None:
        """Flush, and close ``dest`` if it was opened here. Idempotent."""
        if self._closed:
            return
        try:
            self._drain()
            self._f.flush()
        finally:
            self._closed = True
            if self._own:
                self._f.close()

    def __enter__(self) -> "PcapNgWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PcapNgWriter({self.name!r}, packets_written={self.packets_written})"
