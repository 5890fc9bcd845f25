"""Streaming reader for pcap and pcapng capture files (optionally gzip-compressed).

``open_capture(source)`` sniffs the format from the first bytes (never from the file name)
and returns a :class:`PacketSource` that yields :class:`CapturedPacket` values one by one,
holding at most one read buffer (1 MiB, or one record if a record is larger) in memory, so
multi-GB files read with flat memory. Sources: a path, ``"-"`` for standard input (not
seekable: nothing here ever seeks), or a binary file object.

Formats:

* pcap (https://datatracker.ietf.org/doc/draft-ietf-opsawg-pcap/): all four magics
  (microsecond / nanosecond, little / big endian). The link type is the low 16 bits of the
  header's LinkType field (the upper bits carry FCS information).
* pcapng (https://datatracker.ietf.org/doc/draft-ietf-opsawg-pcapng/): any number of sections,
  each with its own byte order and its own interface list. Blocks read: SHB, IDB (link type,
  snaplen, ``if_tsresol`` in both the 10^-n and the 2^-n form, ``if_tsoffset``), EPB, SPB
  (interface 0, no timestamp: the last timestamp seen in the section is reused, else 0) and
  the obsolete Packet Block (type 2). Every other block (NRB, ISB, DSB, custom, ...) is skipped
  and counted in :attr:`PacketSource.blocks_skipped`. Interface ids are renumbered into
  global ids unique across sections (first interface of the file is 0, then in file order).
* gzip (RFC 1952, multi-member allowed) wrapping either of the above, decompressed as a
  stream.

Timestamps are exact integer nanoseconds since the epoch; no float is involved anywhere.

Damage inside a recognised file is never an exception: reading stops and one
:class:`~kafkasniff.issues.DecodeIssue` is appended to :attr:`PacketSource.issues`
(``capture_truncated`` when the file ends inside a record or block, or reading fails;
``capture_block_invalid`` for an impossible block length, a record larger than
:data:`MAX_RECORD_BYTES`, a packet naming an undeclared interface, a pcapng timestamp outside
0 .. 2^63-1 ns, or corrupt gzip data).
Only a source that cannot be read at all raises :class:`~kafkasniff.errors.CaptureError`.

Why our own reader rather than dpkt or scapy: dpkt's pcapng ``Reader`` honours only the first
interface of the first section (link type and timestamp resolution) and converts timestamps to
float seconds, losing nanoseconds; scapy's readers are several times slower per packet and
build full packet objects we do not need.

Opening: :func:`open_path` is how a path is opened (one-line errors); a FIFO or pipe is read
once, so a command that checks its inputs before it starts (the TUI) uses
:func:`probe_capture`, which hands such an input back as a stream that replays the bytes
the check read.

Seeking (used to find a frame's bytes again, :mod:`kafkasniff.capture.frames`): with
``checkpoint_every=N`` a source records a :class:`Checkpoint` (file offset, timestamp, reader
state) at its first packet and every N packets after it; ``open_capture(path,
start=checkpoint)`` reopens an uncompressed capture file and reads from that packet on. Gzip
streams and stdin cannot be reopened at an offset (their checkpoints still count packets).
"""

from __future__ import annotations

import gzip
import os
import stat
import struct
import sys
import zlib
from typing import IO, Callable, Iterator, NamedTuple

from kafkasniff.capture.types import CapturedPacket
from kafkasniff.errors import CaptureError
from kafkasniff.issues import IssueKind, Severity
from kafkasniff.model import DecodeIssue

try:
    import cython
except ImportError:     # plain Python (Cython is only needed to compile: docs/compiled.md)
    from kafkasniff.cythonstub import cython

__all__ = [
    "MAX_RECORD_BYTES",
    "PACKED_RECORD",
    "SLL2_HEADER",
    "SOCKADDR_LL",
    "TPACKET3_BLOCK",
    "TPACKET3_HEADER",
    "TPACKET3_HEADER_BYTES",
    "READ_CHUNK_BYTES",
    "Checkpoint",
    "PacketSource",
    "is_regular_file",
    "open_capture",
    "open_path",
    "probe_capture",
    "tpacket_v3_packets",
]

#: Size of one read from the underlying file.
READ_CHUNK_BYTES = 1 << 20
#: Sanity bound on one packet record's captured length / one pcapng block's length. Larger
#: values are garbage: reading stops with a ``capture_block_invalid`` issue.
MAX_RECORD_BYTES = 256 << 20
_MAX_BLOCK_BYTES = MAX_RECORD_BYTES + (1 << 16)

_GZIP_MAGIC = b"\x1f\x8b"
_PCAPNG_SHB = 0x0A0D0D0A
_PCAPNG_BOM = 0x1A2B3C4D
# pcap magic as it appears in the file -> (struct byte-order prefix, ns per fraction unit)
_PCAP_MAGICS = {
    b"\xd4\xc3\xb2\xa1": ("<", 1000),   # little endian, microseconds
    b"\xa1\xb2\xc3\xd4": (">", 1000),   # big endian, microseconds
    b"\x4d\x3c\xb2\xa1": ("<", 1),      # little endian, nanoseconds
    b"\xa1\xb2\x3c\x4d": (">", 1),      # big endian, nanoseconds
}
_PCAP_HEADER_BYTES = 24
# CapturedPacket is a frozen slotted dataclass whose __init__ sets each field through
# object.__setattr__: every packet loop of this module (pcap records, pcapng enhanced packet
# blocks, packed records, TPACKET_V3 blocks) makes its packets with _packet instead, which
# fills the slots directly (the same object, in half the time: tests/test_compiled.py
# checks): through the slot descriptors' setters in Python, at the slots' byte offsets
# (inline C of pcapfile.pxd) when compiled.
_PACKET_SLOTS = ("ts_ns", "link_type", "data", "orig_len", "interface_id")
if not cython.compiled:
    _new = object.__new__   # compiled: slotstore.new_object, in the .pxd
    _p_ts, _p_link, _p_data, _p_orig, _p_iface = (
        getattr(CapturedPacket, _f).__set__ for _f in _PACKET_SLOTS)

    def _packet(cls: type, ts_ns: int, link_type: int, data: bytes, orig_len: int,
                interface_id: int) -> CapturedPacket:
        """``cls(ts_ns, link_type, data, orig_len, interface_id)`` for ``cls``
        :class:`CapturedPacket`, its slots filled directly (compiled: pcapfile.pxd)."""
        pkt = _new(cls)
        _p_ts(pkt, ts_ns)
        _p_link(pkt, link_type)
        _p_data(pkt, data)
        _p_orig(pkt, orig_len)
        _p_iface(pkt, interface_id)
        return pkt
else:
    # the byte offsets of the slots _packet stores into (pcapfile.pxd)
    (
        _p_o_ts, _p_o_link, _p_o_data, _p_o_orig, _p_o_iface
    ) = (slot_offset(CapturedPacket, _f) for _f in _PACKET_SLOTS)  # noqa: F821 - in the .pxd
_PCAP_RECORD_HEADER_BYTES = 16

#: the header of one record as :meth:`PacketSource.pack_records` packs it (the records of
#: ``--jobs`` batches, :mod:`kafkasniff.parallel.wire`), read back by :func:`packed_records`:
#: ``ts_ns`` (int64 ns since the epoch), ``length`` (bytes that follow: the frame),
#: ``orig_len``, ``kind`` (the link type; negative kinds are the caller's) and the record's
#: index, little-endian; ``length`` bytes follow
PACKED_RECORD = struct.Struct("<qIIiQ")
_PACKED = PACKED_RECORD.size
if not cython.compiled:
    _pack = PACKED_RECORD.pack

    def _put(b: bytearray, ts: int, n: int, orig: int, kind: int, idx: int, src: bytes,
             start: int) -> None:
        """Append a packed record of ``src[start:start + n]`` to ``b`` (compiled: written
        in place by the inline C function of pcapfile.pxd)."""
        b += _pack(ts, n, orig, kind, idx)
        b += src[start:start + n] if start or n != len(src) else src

    # the record headers' integers (pcapfile.pxd reads them in place when compiled; the
    # record loops that read whole headers use struct as plain Python)
    def _le32(p: bytes, o: int) -> int:
        return int.from_bytes(p[o:o + 4], "little")

    def _be32(p: bytes, o: int) -> int:
        return int.from_bytes(p[o:o + 4], "big")

    def _le64(p: bytes, o: int) -> int:
        return int.from_bytes(p[o:o + 8], "little")

# pcapng block types
_BT_OPB = 0x00000002
_BT_IDB = 0x00000001
_BT_SPB = 0x00000003
_BT_EPB = 0x00000006
#: names of the pcapng block types skipped (counted by name in the capture's skipped bytes)
_BLOCK_NAMES = {0x00000004: "nrb", 0x00000005: "isb", 0x0000000A: "dsb", 0x00000BAD: "custom",
                0x40000BAD: "custom"}
_BT_CUSTOM = (0x00000BAD, 0x40000BAD)
_BT_DSB = 0x0000000A
#: a Decryption Secrets Block's secrets type for TLS key log text ("TLSK")
TLS_KEY_LOG_SECRETS = 0x544C534B
# pcapng IDB options
_OPT_ENDOFOPT = 0
_OPT_IF_TSRESOL = 9
_OPT_IF_TSOFFSET = 14

_NS_PER_S = 1_000_000_000
# pcapng timestamps (64-bit count, any resolution, signed offset) can land outside what the
# rest of the tool handles (int64 ns: Parquet timestamps, datetime): such a packet is damage.
# pcap timestamps (32-bit seconds) always fit.
_TS_LIMIT_NS = 1 << 63


class Checkpoint(NamedTuple):
    """Where a packet starts in a capture file, to read again from it.

    A tuple ``(offset, ts_ns, packet_index, state)``: ``offset`` is the byte offset of the
    packet's record (pcap) or block (pcapng) in the file (in the decompressed stream for gzip
    sources, which cannot seek); ``ts_ns`` its timestamp; ``packet_index`` how many packets
    come before it; ``state`` what a pcapng reader needs to go on from there (byte order,
    the section's interfaces, last timestamp), ``None`` for pcap.
    """

    offset: int
    ts_ns: int
    packet_index: int
    state: tuple | None = None


class _Structs:
    """Precompiled structs for one byte order."""

    __slots__ = ("u32x2", "u32", "pcap_hdr", "pcap_rec", "epb", "opb", "idb", "opt", "i64", "u16")

    def __init__(self, e: str) -> None:
        self.u32x2 = struct.Struct(e + "II")
        self.u32 = struct.Struct(e + "I")
        self.u16 = struct.Struct(e + "H")
        self.pcap_hdr = struct.Struct(e + "HHiIII")    # vmaj vmin thiszone sigfigs snaplen network
        self.pcap_rec = struct.Struct(e + "IIII")      # sec frac caplen origlen
        self.epb = struct.Struct(e + "IIIII")          # iface ts_hi ts_lo caplen origlen
        self.opb = struct.Struct(e + "HHIIII")         # iface drops ts_hi ts_lo caplen origlen
        self.idb = struct.Struct(e + "HHI")            # linktype reserved snaplen
        self.opt = struct.Struct(e + "HH")             # option code, length
        self.i64 = struct.Struct(e + "q")


_LE = _Structs("<")
_BE = _Structs(">")


class _CountingReader:
    """A minimal read-only file object over ``raw`` that first replays ``prefix`` and counts
    the bytes handed out (so a gzip source can report its compressed position)."""

    def __init__(self, prefix: bytes, read: Callable[[int], bytes],
                 error: BaseException | None = None) -> None:
        self._prefix = prefix
        self._read = read
        self._error = error
        self.count = 0

    def read(self, n: int = -1) -> bytes:
        if self._error is not None and not self._prefix:
            exc, self._error = self._error, None
            raise exc
        if self._prefix:
            if n < 0 or n >= len(self._prefix):
                data, self._prefix = self._prefix, b""
            else:
                data, self._prefix = self._prefix[:n], self._prefix[n:]
        else:
            data = self._read(n if n >= 0 else READ_CHUNK_BYTES)
        self.count += len(data)
        return data

    def readable(self) -> bool:
        return True


def _reader_of(f: IO[bytes]) -> Callable[[int], bytes]:
    """The function that reads "what is available, at most n bytes" from ``f`` (``read1`` on
    buffered streams so that a pipe delivers packets as they come)."""
    read1 = getattr(f, "read1", None)
    return read1 if read1 is not None else f.read


def _hex4(data: bytes) -> str:
    return " ".join(f"{b:02x}" for b in data[:4])


_READ_ERRORS = (OSError, EOFError, zlib.error, ValueError)


def _read_head(read: Callable[[int], bytes], want: int) -> tuple[bytes, BaseException | None]:
    """Read until ``want`` bytes are there or the stream ends (pipes deliver in pieces).
    Returns the bytes and the read error that stopped reading early, if any."""
    parts: list[bytes] = []
    have = 0
    while have < want:
        try:
            chunk = read(READ_CHUNK_BYTES)
        except _READ_ERRORS as exc:
            return b"".join(parts), exc
        if not chunk:
            break
        parts.append(chunk)
        have += len(chunk)
    return b"".join(parts), None


def _exc_text(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


class _Tally:
    """The packets a :class:`PacketSource` yielded and their captured bytes, in fields of
    their own: the compiled record loops add to them as C integers (pcapfile.pxd), where
    an attribute of the source cost a look-up by name in its ``__dict__`` (about 350
    instructions a packet for the two); the source's ``packets_read`` and ``packet_bytes``
    read and set them."""

    __slots__ = ("packets", "nbytes")

    def __init__(self) -> None:
        self.packets = 0
        self.nbytes = 0


class PacketSource:
    """A stream of :class:`CapturedPacket` from a pcap or pcapng file. Made by
    :func:`open_capture`; iterate it once. A context manager; :meth:`close` releases the file
    if it was opened here.

    Attributes:
        name: the source as named in messages (path, ``"<stdin>"``, or the file object's name).
        format: ``"pcap"`` or ``"pcapng"``.
        compressed: ``"gzip"`` or ``""``.
        packets_read: packets yielded so far.
        bytes_read: bytes read so far from the underlying file, including read-ahead of at most
            one read buffer (``READ_CHUNK_BYTES``); for gzip sources, compressed bytes read.
            Meant for a progress bar against ``total_bytes``.
        total_bytes: size of the underlying file from where reading started (compressed size
            for gzip), or ``None`` when unknown (pipes, sockets).
        link_types: global interface id -> LINKTYPE_* value, filled as interfaces are declared
            (pcap: ``{0: link_type}`` from the file header).
        pcap_header: a pcap file's 24-byte file header as read (``b""`` for pcapng).
        blocks_skipped: pcapng blocks of types not read (NRB, ISB, DSB, custom, ...).
        issues: :class:`DecodeIssue` records: the damage that stopped reading (at most one),
            and one issue for the packet blocks skipped as damaged (timestamps out of range).
        packet_bytes: captured bytes of the packets yielded (their data).
        skipped_block_bytes: bytes of the pcapng blocks not read, by block type name
            (``isb``, ``nrb``, ``dsb``, ``custom``, ``0x...``).
        damaged_bytes: bytes of packet records skipped as damaged (reading went on).
        unread_bytes: bytes after the place where damage stopped reading (the rest of the
            stream is read to count them, unless a read error ended it).

    :meth:`accounting` says where every byte of the (decompressed) stream went.
        checkpoints: :class:`Checkpoint` of the first packet and of every
            ``checkpoint_every``-th packet after it (empty unless ``checkpoint_every``).
        seekable: the source can be reopened at a checkpoint (an uncompressed regular file).
    """

    def __init__(
        self,
        *,
        name: str,
        fmt: str,
        read: Callable[[int], bytes],
        head: bytes,
        closers: list[Callable[[], object]],
        total_bytes: int | None,
        counter: _CountingReader | None,
        head_error: BaseException | None = None,
        checkpoint_every: int = 0,
        start: Checkpoint | None = None,
        seekable: bool = False,
    ) -> None:
        self._tally = _Tally()      # packets_read and packet_bytes
        self.name = name
        self.format = fmt
        self.compressed = "gzip" if counter is not None else ""
        self.total_bytes = total_bytes
        self.link_types: dict[int, int] = {}
        self.pcap_header = b""
        self.blocks_skipped = 0
        self.issues: list[DecodeIssue] = []
        self.skipped_block_bytes: dict[str, int] = {}
        #: ``on_secrets(secrets_type, data)`` is called for each pcapng Decryption Secrets
        #: Block (set before iterating); without it the blocks are skipped (counted)
        self.on_secrets: Callable[[int, bytes], None] | None = None
        self.damaged_bytes = 0
        self.unread_bytes = 0
        self._damaged_blocks = 0
        self.checkpoints: list[Checkpoint] = []
        self.seekable = seekable
        self._every = checkpoint_every
        self._start = start
        self._read = read
        self._head = head
        self._closers = closers
        self._counter = counter
        self._nread = len(head)     # raw bytes read (non-gzip)
        self._offset = 0            # stream offset of the current buffer's first byte
        self._eof = False
        self._read_failed = False
        self._last_ts_ns = 0
        self._closed = False
        self._pcap_header_ok = False
        if head_error is not None:
            self._read_error(head_error, len(head))
        if fmt == "pcap":
            self._parse_pcap_header()
        if start is not None:
            # the file was positioned at the checkpoint's offset by open_capture
            self._head = b""
            self._offset = self._nread = start.offset
            self.packets_read = start.packet_index
        self._iter: Iterator[CapturedPacket] = (
            self._iter_pcap() if fmt == "pcap" else self._iter_pcapng()
        )

    # ------------------------------------------------------------------ public API

    @property
    def packets_read(self) -> int:
        """Packets yielded so far (see the class's attributes)."""
        return self._tally.packets

    @packets_read.setter
    def packets_read(self, n: int) -> None:
        self._tally.packets = n

    @property
    def packet_bytes(self) -> int:
        """Captured bytes of the packets yielded (see the class's attributes)."""
        return self._tally.nbytes

    @packet_bytes.setter
    def packet_bytes(self, n: int) -> None:
        self._tally.nbytes = n

    @property
    def bytes_read(self) -> int:
        if self._counter is not None:
            return self._counter.count
        return self._nread

    def __iter__(self) -> Iterator[CapturedPacket]:
        return self._iter

    def accounting(self) -> dict[str, int]:
        """Where the bytes of the (decompressed) stream read so far went: ``packets``
        (:attr:`packet_bytes`), ``skipped_blocks`` (:attr:`skipped_block_bytes`, all types),
        ``damaged_records`` (:attr:`damaged_bytes`), ``unread`` (:attr:`unread_bytes`) and
        ``format``: everything else, the headers of the file, of every record and block, and
        the metadata blocks read (SHB, IDB). Once the packets are all read the values add up
        to the stream's bytes; while reading, ``format`` also holds the read-ahead."""
        skipped = sum(self.skipped_block_bytes.values())
        return {"packets": self.packet_bytes, "skipped_blocks": skipped,
                "damaged_records": self.damaged_bytes, "unread": self.unread_bytes,
                "format": self._nread - self.packet_bytes - skipped - self.damaged_bytes
                - self.unread_bytes}

    def __enter__(self) -> "PacketSource":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop iteration and close what :func:`open_capture` opened (not a file object or
        stdin passed in by the caller). Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._iter.close()  # type: ignore[attr-defined]
        self._head = b""
        for close in self._closers:
            try:
                close()
            except Exception:  # noqa: BLE001 - closing a broken stream must not raise
                pass

    def __repr__(self) -> str:
        return (f"PacketSource({self.name!r}, format={self.format!r}, "
                f"packets_read={self.packets_read}, issues={len(self.issues)})")

    # ------------------------------------------------------------------ buffering

    def _refill(self, buf: bytes, pos: int, need: int) -> bytes:
        """Return ``buf[pos:]`` extended by reads until it holds ``need`` bytes or the stream
        ends. Reads at most ``READ_CHUNK_BYTES`` at a time, so garbage lengths never allocate
        more than the file really holds."""
        self._offset += pos
        rest = buf[pos:] if pos else buf
        have = len(rest)
        if have >= need or self._eof:
            return rest
        parts = [rest]
        read = self._read
        while have < need:
            try:
                chunk = read(READ_CHUNK_BYTES)
            except _READ_ERRORS as exc:
                self._read_error(exc, self._offset + have)
                break
            if not chunk:
                self._eof = True
                break
            self._nread += len(chunk)
            parts.append(chunk)
            have += len(chunk)
        return b"".join(parts) if len(parts) > 1 else rest

    def _read_error(self, exc: BaseException, offset: int) -> None:
        """Record the error that ended reading after ``offset`` stream bytes."""
        self._eof = True
        self._read_failed = True
        if isinstance(exc, EOFError):     # gzip: compressed stream cut short
            kind, severity = IssueKind.CAPTURE_TRUNCATED, Severity.WARNING
            why = f"compressed stream ends early ({_exc_text(exc)})"
        elif self._counter is not None and not isinstance(exc, ValueError):
            kind, severity = IssueKind.CAPTURE_BLOCK_INVALID, Severity.ERROR
            why = f"corrupt gzip data ({_exc_text(exc)})"
        else:
            kind, severity = IssueKind.CAPTURE_TRUNCATED, Severity.WARNING
            why = f"read error ({_exc_text(exc)})"
        self._issue(kind, severity,
                    f"{self.name}: {why} after {self._offset_text(offset)}; reading stopped")

    def _offset_text(self, offset: int) -> str:
        if self._counter is not None:
            return f"byte offset {offset} of the decompressed stream"
        return f"byte offset {offset}"

    def _issue(self, kind: IssueKind, severity: Severity, message: str, length: int = 0) -> None:
        self.issues.append(DecodeIssue(kind=kind, severity=severity, message=message,
                                       ts_ns=self._last_ts_ns, length_bytes=length))

    def _truncated(self, pos: int, have: int, need: int, what: str) -> None:
        """The stream ended with ``have`` of ``need`` bytes of ``what`` at buffer ``pos``."""
        self.unread_bytes += have
        if self._read_failed:
            return  # the read error is the issue
        self._issue(IssueKind.CAPTURE_TRUNCATED, Severity.WARNING,
                    f"{self.name}: file ends inside {what} at "
                    f"{self._offset_text(self._offset + pos)} ({have} of {need} bytes present)",
                    length=have)

    def _invalid(self, buf: bytes, pos: int, why: str) -> None:
        """An impossible block or record at ``buf[pos]``: reading stops; the bytes from there
        to the end of the stream are read and counted as unread."""
        self.unread_bytes += len(buf) - pos + self._drain()
        if self._read_failed:
            return  # the read error (e.g. corrupt gzip data) is the issue
        self._issue(IssueKind.CAPTURE_BLOCK_INVALID, Severity.ERROR,
                    f"{self.name}: {why} at {self._offset_text(self._offset + pos)}; "
                    f"reading stopped")

    def _drain(self) -> int:
        """Read the rest of the stream (after damage stopped the parsing); its byte count."""
        n = 0
        read = self._read
        while not self._eof:
            try:
                chunk = read(READ_CHUNK_BYTES)
            except _READ_ERRORS:
                self._eof = True
                break
            if not chunk:
                self._eof = True
                break
            n += len(chunk)
            self._nread += len(chunk)
        return n

    def _damaged_block(self, blen: int, why: str) -> None:
        """A packet block skipped as damaged: counted; the first one is an issue."""
        self.damaged_bytes += blen
        self._damaged_blocks += 1
        if self._damaged_blocks == 1:
            self._issue(IssueKind.CAPTURE_BLOCK_INVALID, Severity.WARNING,
                        f"{self.name}: {why}; the packet is skipped and reading goes on (every "
                        f"such block is counted in the capture's skipped bytes)", length=blen)

    # ------------------------------------------------------------------ pcap

    def _parse_pcap_header(self) -> None:
        head = self._refill(self._head, 0, _PCAP_HEADER_BYTES)
        self._head = head
        if len(head) < _PCAP_HEADER_BYTES:
            self._truncated(0, len(head), _PCAP_HEADER_BYTES, "the pcap file header")
            return
        e, self._pcap_frac_ns = _PCAP_MAGICS[head[:4]]
        self.pcap_header = bytes(head[:_PCAP_HEADER_BYTES])
        self._s = _LE if e == "<" else _BE
        _vmaj, _vmin, _zone, _sigfigs, _snaplen, network = self._s.pcap_hdr.unpack_from(head, 4)
        self._link_type = network & 0xFFFF
        self.link_types[0] = self._link_type
        self._pcap_header_ok = True

    @cython.locals(p=cython.p_uchar, pos=cython.Py_ssize_t, end=cython.Py_ssize_t,
                   nxt=cython.Py_ssize_t, caplen=cython.Py_ssize_t, max_rec=cython.Py_ssize_t,
                   big=cython.bint, sec=cython.longlong, frac=cython.longlong,
                   origlen=cython.longlong, frac_ns=cython.longlong, ts=cython.longlong,
                   tally=_Tally)
    def _iter_pcap(self) -> Iterator[CapturedPacket]:
        if not self._pcap_header_ok:
            return
        tally = self._tally
        buf = self._head
        self._head = b""
        pos = _PCAP_HEADER_BYTES if self._start is None else 0
        end = len(buf)
        every = self._every
        cps = self.checkpoints
        rec = self._s.pcap_rec.unpack_from
        big = self._s is _BE
        link = self._link_type
        frac_ns = self._pcap_frac_ns
        max_rec = MAX_RECORD_BYTES
        packet = CapturedPacket
        ts = 0
        while True:
            p = buf
            # hot loop: records fully inside the buffer
            while pos + 16 <= end:
                if cython.compiled:     # the record header read in place, no tuple
                    sec, frac, caplen, origlen = _rec_header(p, pos, big)  # noqa: F821 - .pxd
                else:
                    sec, frac, caplen, origlen = rec(buf, pos)
                nxt = pos + 16 + caplen
                if nxt > end or caplen > max_rec:
                    break
                ts = sec * 1_000_000_000 + frac * frac_ns
                if every and not tally.packets % every:
                    cps.append(Checkpoint(self._offset + pos, ts, tally.packets))
                tally.packets += 1
                tally.nbytes += caplen
                yield _packet(packet, ts, link, buf[pos + 16:nxt], origlen, 0)
                pos = nxt
            self._last_ts_ns = ts
            buf = self._pcap_more(buf, pos, end)
            if buf is None:
                return
            pos = 0
            end = len(buf)

    def _pcap_more(self, buf: bytes, pos: int, end: int) -> bytes | None:
        """The pcap record loops' slow path, at ``buf[pos]`` where no whole record is left
        before ``end``: the rest of the buffer extended to hold the next record, or ``None``
        where reading ends (the end of the stream, or damage: then an issue)."""
        if pos + 16 <= end:
            caplen = self._s.pcap_rec.unpack_from(buf, pos)[2]
            if caplen > MAX_RECORD_BYTES:
                self._invalid(buf, pos, f"packet record with captured length {caplen} "
                                   f"(over the {MAX_RECORD_BYTES}-byte sanity bound)")
                return None
            need = 16 + caplen
            what = "a packet record"
        else:
            need = 16
            what = "a packet record header"
        buf = self._refill(buf, pos, need)
        have = len(buf)
        if have < need:
            if have:
                self._truncated(0, have, need, what)
            return None     # else a clean end of file (or a read error, already an issue)
        return buf

    @cython.locals(p=cython.p_uchar, pos=cython.Py_ssize_t, end=cython.Py_ssize_t,
                   nxt=cython.Py_ssize_t, caplen=cython.Py_ssize_t, last=cython.Py_ssize_t,
                   i=cython.Py_ssize_t, size=cython.Py_ssize_t, limit=cython.Py_ssize_t,
                   packets=cython.longlong, nbytes=cython.longlong, big=cython.bint,
                   max_rec=cython.Py_ssize_t)
    def split_records(self, route: Callable[[int, bytes, int], int], n: int,
                      write: Callable[[int, list[bytes]], None],
                      flush_bytes: int = READ_CHUNK_BYTES) -> list[int]:
        """Hand every packet record of a pcap source, unchanged, to one of ``n`` outputs.

        ``route(link_type, record, 16) -> 0 .. n-1`` picks the output of each packet from
        its record (the frame, as :class:`CapturedPacket` ``data``, is ``record[16:]``: a
        :func:`kafkasniff.capture.flows.router` routes it in place, without a copy).
        ``write(i, records)`` receives the records of output ``i`` in capture order, each
        its 16-byte record header and captured bytes as in the source, in lists of about
        ``flush_bytes``; the file header of an output with the same records is
        :attr:`pcap_header`. Reading, damage (issues), the counters and :meth:`accounting`
        are those of iterating the packets. Use instead of iterating, once.

        Returns:
            Packets routed to each output (a list of ``n`` counts).

        Raises:
            ValueError: the source is not pcap (pcapng blocks are not records to copy), or
                was opened at a checkpoint.
        """
        if self.format != "pcap" or self._start is not None:
            raise ValueError(f"{self.name}: split_records needs a pcap file read from its "
                             f"start (this is {self.format})")
        self._iter.close()  # type: ignore[attr-defined]
        counts = [0] * n
        parts: list[list[bytes]] = [[] for _ in range(n)]
        sizes = [0] * n
        if not self._pcap_header_ok:
            return counts
        buf = self._head
        self._head = b""
        pos = _PCAP_HEADER_BYTES
        end = len(buf)
        link = self._link_type
        big = self._s is _BE
        max_rec = MAX_RECORD_BYTES
        limit = flush_bytes
        while True:
            # the record loop reads the captured length in place (no tuple, no packet)
            p = buf
            packets = nbytes = 0
            last = -1
            while pos + 16 <= end:
                caplen = _be32(p, pos + 8) if big else _le32(p, pos + 8)
                nxt = pos + 16 + caplen
                if nxt > end or caplen > max_rec:
                    break
                rec = buf[pos:nxt]
                i = route(link, rec, 16)
                parts[i].append(rec)
                counts[i] += 1
                packets += 1
                nbytes += caplen
                size = sizes[i] + 16 + caplen
                if size >= limit:
                    write(i, parts[i])
                    parts[i] = []
                    size = 0
                sizes[i] = size
                last = pos
                pos = nxt
            self.packets_read += packets
            self.packet_bytes += nbytes
            if last >= 0:       # the time of the issues: the last record read
                sec, frac = self._s.pcap_rec.unpack_from(buf, last)[:2]
                self._last_ts_ns = sec * 1_000_000_000 + frac * self._pcap_frac_ns
            buf = self._pcap_more(buf, pos, end)
            if buf is None:
                break
            pos = 0
            end = len(buf)
        for i in range(n):
            if parts[i]:
                write(i, parts[i])
        return counts

    def pack_records(self, first_route: Callable[[], Callable[[int, bytes], int] | None],
                     bufs: list[bytearray], tick_kind: int, tick_every_ns: int,
                     state: list[int], limit: int, report_mask: int) -> Iterator[int]:
        """Append every packet of this source to one of the byte buffers ``bufs``, packed
        (what ``--jobs`` readers do with every capture).

        ``first_route()`` is called at the source's first packet (never without one: the
        pcapng secrets blocks before it are read by then) and gives ``route(link_type,
        frame) -> index`` into ``bufs``, or ``None`` for ``bufs[0]``. Packet ``i`` of the
        run (``state[0]`` counts them, from the index before this source's first packet)
        becomes a :data:`PACKED_RECORD` ``(ts_ns, caplen, orig_len, link_type, i)`` and its
        frame, appended to its buffer. Once a packet's time reaches the next tick
        (``state[3]``; the first packet's does), ``(ts_ns, 0, 0, tick_kind, i)`` goes to
        every buffer after the packet and the next tick is due ``tick_every_ns`` later.
        ``state`` is ``[index, ts_ns of the last packet, ts_ns of the first packet (0: none
        yet), next tick, packets of this source (0 at its start)]``, read at the start and
        written back at every yield and at the end.

        Yields after a packet: 1 when the buffer it went to holds ``limit`` bytes or more,
        2 when the count of this source's packets has no bit of ``report_mask`` set, 3 for
        both. Reading, damage (issues), the counters and :meth:`accounting` are those of
        iterating the packets. Use instead of iterating, once.

        A pcap file read from its start is packed by its record loop, without a
        :class:`CapturedPacket` for each record (compiled: the record headers read and the
        packed records written in C, the frame copied once, from the read buffer into the
        batch); pcapng, and pcap opened at a checkpoint, one packet object at a time.
        """
        if self.format == "pcap" and self._start is None:
            return self._pack_pcap(first_route, bufs, tick_kind, tick_every_ns, state, limit,
                                   report_mask)
        return self._pack_packets(first_route, bufs, tick_kind, tick_every_ns, state, limit,
                                  report_mask)

    def _pack_packets(self, first_route, bufs: list[bytearray], tick_kind: int,
                      every: int, state: list[int], lim: int, mask: int) -> Iterator[int]:
        """:meth:`pack_records` one :class:`CapturedPacket` at a time (any format)."""
        idx, ts, first_ts, next_tick, k = state
        route = None
        w = 0
        for pkt in self._iter:
            idx += 1
            ts = pkt.ts_ns
            data = pkt.data
            link = pkt.link_type
            if not k:
                route = first_route()
            if route is not None:
                w = route(link, data)
            b = bufs[w]
            _put(b, ts, len(data), pkt.orig_len, link, idx, data, 0)
            if not first_ts:
                first_ts = ts
            if ts >= next_tick:
                next_tick = ts + every
                tick = PACKED_RECORD.pack(ts, 0, 0, tick_kind, idx)
                for bb in bufs:
                    bb += tick
            k += 1
            code = 1 if len(b) >= lim else 0
            if not k & mask:
                code |= 2
            if code:
                state[:] = [idx, ts, first_ts, next_tick, k]
                yield code
        state[:] = [idx, ts, first_ts, next_tick, k]

    @cython.locals(p=cython.p_uchar, pos=cython.Py_ssize_t, end=cython.Py_ssize_t,
                   nxt=cython.Py_ssize_t, caplen=cython.Py_ssize_t, max_rec=cython.Py_ssize_t,
                   lim=cython.Py_ssize_t, w=cython.Py_ssize_t, idx=cython.longlong,
                   ts=cython.longlong, first_ts=cython.longlong, next_tick=cython.longlong,
                   every=cython.longlong, k=cython.longlong, mask=cython.longlong,
                   packets=cython.longlong, nbytes=cython.longlong, code=cython.int,
                   big=cython.bint, sec=cython.longlong, frac=cython.longlong,
                   origlen=cython.longlong, frac_ns=cython.longlong, link=cython.int)
    def _pack_pcap(self, first_route, bufs: list[bytearray], tick_kind: int,
                   tick_every_ns: int, state: list[int], limit: int, report_mask: int
                   ) -> Iterator[int]:
        """:meth:`pack_records` by the pcap record loop."""
        self._iter.close()  # type: ignore[attr-defined]
        if not self._pcap_header_ok:
            return
        buf = self._head
        self._head = b""
        pos = _PCAP_HEADER_BYTES
        end = len(buf)
        rec = self._s.pcap_rec.unpack_from
        big = self._s is _BE
        link = self._link_type
        frac_ns = self._pcap_frac_ns
        max_rec = MAX_RECORD_BYTES
        lim = limit
        mask = report_mask
        every = tick_every_ns
        idx, last_ts, first_ts, next_tick, k = state
        ts = 0
        w = 0
        route = None
        while True:
            packets = nbytes = 0
            p = buf
            while pos + 16 <= end:
                if cython.compiled:     # the record header read in place, no tuple
                    sec, frac, caplen, origlen = _rec_header(p, pos, big)  # noqa: F821 - .pxd
                else:
                    sec, frac, caplen, origlen = rec(buf, pos)
                nxt = pos + 16 + caplen
                if nxt > end or caplen > max_rec:
                    break
                ts = sec * 1_000_000_000 + frac * frac_ns
                idx += 1
                packets += 1
                nbytes += caplen
                if not k:
                    route = first_route()
                if route is not None:
                    w = route(link, buf[pos + 16:nxt])
                b = bufs[w]
                _put(b, ts, caplen, origlen, link, idx, buf, pos + 16)
                pos = nxt
                if not first_ts:
                    first_ts = ts
                if ts >= next_tick:
                    next_tick = ts + every
                    tick = PACKED_RECORD.pack(ts, 0, 0, tick_kind, idx)
                    for bb in bufs:
                        bb += tick
                k += 1
                code = 0
                if len(b) >= lim:
                    code = 1
                if not k & mask:
                    code |= 2
                if code:
                    self.packets_read += packets
                    self.packet_bytes += nbytes
                    packets = nbytes = 0
                    state[:] = [idx, ts, first_ts, next_tick, k]
                    yield code
            self.packets_read += packets
            self.packet_bytes += nbytes
            self._last_ts_ns = ts
            state[:] = [idx, ts if k else last_ts, first_ts, next_tick, k]
            buf = self._pcap_more(buf, pos, end)
            if buf is None:
                return
            pos = 0
            end = len(buf)

    # ------------------------------------------------------------------ pcapng

    @cython.locals(tally=_Tally)
    def _iter_pcapng(self) -> Iterator[CapturedPacket]:
        tally = self._tally
        buf = self._head
        self._head = b""
        pos = 0
        end = len(buf)
        max_block = _MAX_BLOCK_BYTES
        s = _LE
        # per section: list of (global_id, link_type, snaplen, kind, factor, offset_ns)
        # kind 0: ts * factor; 1: ts // factor; 2: (ts * 10**9) >> factor
        ifaces: list[tuple[int, int, int, int, int, int]] = []
        have_section = False
        packet = CapturedPacket
        every = self._every
        cps = self.checkpoints
        ifaces_t: tuple = ()
        if self._start is not None:
            big, ifaces_t, self._last_ts_ns = self._start.state
            s = _BE if big else _LE
            ifaces = list(ifaces_t)
            for gid, link, *_rest in ifaces:
                self.link_types[gid] = link
            have_section = True
        while True:
            if pos + 12 > end:
                buf = self._refill(buf, pos, 12)
                pos = 0
                end = len(buf)
                if end < 12:
                    if end == 0:
                        return  # clean end of file (or a read error, already an issue)
                    self._truncated(0, end, 12, "a pcapng block header")
                    return
            btype, blen = s.u32x2.unpack_from(buf, pos)
            if btype == _PCAPNG_SHB:
                bom = buf[pos + 8:pos + 12]
                if bom == b"\x4d\x3c\x2b\x1a":
                    s = _LE
                elif bom == b"\x1a\x2b\x3c\x4d":
                    s = _BE
                else:
                    self._invalid(buf, pos, f"pcapng section header with bad byte-order magic "
                                       f"{_hex4(bom)}")
                    return
                blen = s.u32.unpack_from(buf, pos + 4)[0]
                min_len = 28
            elif not have_section:
                self._invalid(buf, pos, f"pcapng block type 0x{btype:08x} before any section "
                                        f"header")
                return
            elif btype == _BT_EPB or btype == _BT_OPB:
                min_len = 32
            elif btype == _BT_IDB:
                min_len = 20
            elif btype == _BT_SPB:
                min_len = 16
            else:
                min_len = 12
            if blen < min_len or blen & 3 or blen > max_block:
                self._invalid(buf, pos, f"pcapng block type 0x{btype:08x} with impossible length "
                                   f"{blen}")
                return
            nxt = pos + blen
            if nxt > end:
                buf = self._refill(buf, pos, blen)
                pos = 0
                end = len(buf)
                nxt = blen
                if end < blen:
                    self._truncated(0, end, blen, f"a pcapng block (type 0x{btype:08x})")
                    return
            if s.u32.unpack_from(buf, nxt - 4)[0] != blen:
                self._invalid(buf, pos, f"pcapng block type 0x{btype:08x}: trailing length "
                                   f"{s.u32.unpack_from(buf, nxt - 4)[0]} differs from "
                                   f"leading length {blen}")
                return

            if btype == _BT_EPB or btype == _BT_OPB:
                if btype == _BT_EPB:
                    iface, ts_hi, ts_lo, caplen, origlen = s.epb.unpack_from(buf, pos + 8)
                else:
                    iface, _drops, ts_hi, ts_lo, caplen, origlen = s.opb.unpack_from(buf, pos + 8)
                if caplen > blen - 32:
                    self._invalid(buf, pos, f"packet block with captured length {caplen} larger "
                                       f"than its block (length {blen})")
                    return
                if iface >= len(ifaces):
                    self._invalid(buf, pos, f"packet block for interface {iface}, but the section "
                                       f"declares {len(ifaces)} interface(s)")
                    return
                gid, link, _snap, kind, factor, off_ns = ifaces[iface]
                ts = (ts_hi << 32) | ts_lo
                if kind == 0:
                    ts = ts * factor + off_ns
                elif kind == 1:
                    ts = ts // factor + off_ns
                else:
                    ts = ((ts * 1_000_000_000) >> factor) + off_ns
                if not 0 <= ts < _TS_LIMIT_NS:
                    self._damaged_block(blen, f"packet block with timestamp {ts} ns, outside 0 "
                                              f".. 2^63-1 (interface {iface}: bad if_tsresol / "
                                              f"if_tsoffset?) at "
                                              f"{self._offset_text(self._offset + pos)}")
                    pos = nxt
                    continue
                if every and not tally.packets % every:
                    cps.append(Checkpoint(self._offset + pos, ts, tally.packets,
                                          (s is _BE, ifaces_t, self._last_ts_ns)))
                self._last_ts_ns = ts
                tally.packets += 1
                tally.nbytes += caplen
                yield _packet(packet, ts, link, buf[pos + 28:pos + 28 + caplen], origlen, gid)
            elif btype == _BT_SPB:
                if not ifaces:
                    self._invalid(buf, pos, "simple packet block, but the section declares no "
                                       "interface")
                    return
                gid, link, snap, _k, _f, _o = ifaces[0]
                origlen = s.u32.unpack_from(buf, pos + 8)[0]
                caplen = min(origlen, blen - 16)
                if snap:
                    caplen = min(caplen, snap)
                if every and not tally.packets % every:
                    cps.append(Checkpoint(self._offset + pos, self._last_ts_ns, tally.packets,
                                          (s is _BE, ifaces_t, self._last_ts_ns)))
                tally.packets += 1
                tally.nbytes += caplen
                yield _packet(packet, self._last_ts_ns, link, buf[pos + 12:pos + 12 + caplen],
                              origlen, gid)
            elif btype == _BT_IDB:
                link, _res, snap = s.idb.unpack_from(buf, pos + 8)
                kind, factor, off_ns = self._idb_options(buf, pos + 16, nxt - 4, s)
                gid = len(self.link_types)
                self.link_types[gid] = link
                ifaces.append((gid, link, snap, kind, factor, off_ns))
                ifaces_t = tuple(ifaces)
            elif btype == _PCAPNG_SHB:
                have_section = True
                ifaces = []
                ifaces_t = ()
                self._last_ts_ns = 0
            elif btype == _BT_DSB and self.on_secrets is not None and blen >= 20 and \
                    16 + s.u32.unpack_from(buf, pos + 12)[0] <= blen - 4:
                # Decryption Secrets Block: secrets type, length, secrets (pcapng 4.7)
                stype, slen = s.u32x2.unpack_from(buf, pos + 8)
                self.on_secrets(stype, bytes(buf[pos + 16:pos + 16 + slen]))
            else:
                self.blocks_skipped += 1
                name = _BLOCK_NAMES.get(btype)
                if name is None:
                    name = "custom" if btype in _BT_CUSTOM else f"0x{btype:08x}"
                self.skipped_block_bytes[name] = self.skipped_block_bytes.get(name, 0) + blen
            pos = nxt

    @staticmethod
    def _idb_options(buf: bytes, p: int, oend: int, s: _Structs) -> tuple[int, int, int]:
        """(kind, factor, offset_ns) of an interface from its if_tsresol / if_tsoffset options.
        Malformed options end option parsing (the defaults stay)."""
        resol = 6
        offset_s = 0
        opt = s.opt.unpack_from
        while p + 4 <= oend:
            code, olen = opt(buf, p)
            if code == _OPT_ENDOFOPT:
                break
            vend = p + 4 + olen
            if vend > oend:
                break
            if code == _OPT_IF_TSRESOL and olen >= 1:
                resol = buf[p + 4]
            elif code == _OPT_IF_TSOFFSET and olen == 8:
                offset_s = s.i64.unpack_from(buf, p + 4)[0]
            p = p + 4 + ((olen + 3) & ~3)
        off_ns = offset_s * _NS_PER_S
        if resol & 0x80:
            return 2, resol & 0x7F, off_ns
        if resol <= 9:
            return 0, 10 ** (9 - resol), off_ns
        return 1, 10 ** (resol - 9), off_ns


@cython.locals(p=cython.p_uchar, pos=cython.Py_ssize_t, end=cython.Py_ssize_t,
               n=cython.Py_ssize_t, ts=cython.longlong, orig=cython.longlong,
               kind=cython.longlong, idx=cython.ulonglong)
def packed_records(buf: bytes, off: int = 0) -> Iterator[tuple[int, int, object]]:
    """The records :meth:`PacketSource.pack_records` packed into ``buf`` (``bytes``), from
    ``off`` to its end, in order, as ``(kind, index, item)``: for a packet (``kind`` >= 0,
    its link type) ``item`` is its :class:`CapturedPacket` (``interface_id`` 0); for the
    caller's negative kinds it is ``(ts_ns, payload bytes)``. Compiled, the headers are read
    in place and each packet filled by inline C setters (what a ``--jobs`` decoder, and a
    live decoder for the batches of the socket backend and ``live -r``, does with every
    packet).

    Raises:
        ValueError: a record's header or bytes run past the end of ``buf`` (the records
            before it were yielded).
    """
    end = len(buf)
    pos = off
    p = buf
    unpack = PACKED_RECORD.unpack_from
    packet = CapturedPacket
    while pos < end:
        if pos + _PACKED > end:
            raise ValueError(f"a packed record header cut at byte {pos} of {end}")
        if cython.compiled:
            ts = cython.cast(cython.longlong, _le64(p, pos))
            n = _le32(p, pos + 8)
            orig = _le32(p, pos + 12)
            kind = cython.cast(cython.int, _le32(p, pos + 16))
            idx = _le64(p, pos + 20)
        else:
            ts, n, orig, kind, idx = unpack(buf, pos)
        pos += _PACKED
        if pos + n > end:
            raise ValueError(f"a packed record of {n} bytes cut at byte {end} (from {pos})")
        data = buf[pos:pos + n]
        pos += n
        if kind >= 0:
            yield kind, idx, _packet(packet, ts, kind, data, orig, 0)
        else:
            yield kind, idx, (ts, data)


#: a packet's header in a TPACKET_V3 block of a ``PACKET_RX_RING`` (``struct tpacket3_hdr``
#: of linux/if_packet.h, little-endian as on the hosts live capture runs on): tp_next_offset,
#: tp_sec, tp_nsec, tp_snaplen, tp_len, tp_status, tp_mac, tp_net
TPACKET3_HEADER = struct.Struct("<IIIIIIHH")
#: TPACKET_ALIGN(sizeof(struct tpacket3_hdr)): where a packet's ``sockaddr_ll`` starts
TPACKET3_HEADER_BYTES = 48
#: a TPACKET_V3 block descriptor's fields before the packets: version, offset_to_priv,
#: block_status, num_pkts, offset_to_first_pkt (``struct tpacket_hdr_v1`` after its version)
TPACKET3_BLOCK = struct.Struct("<IIIII")
#: ``struct sockaddr_ll`` (packet(7)): family, protocol (network order, kept raw), ifindex,
#: hatype, pkttype, halen, addr[8]
SOCKADDR_LL = struct.Struct("<H2siHBB8s")
#: the LINKTYPE_LINUX_SLL2 header libpcap writes for cooked captures: protocol (raw), 2
#: reserved bytes, ifindex, hatype, pkttype, halen, addr[8], big-endian
SLL2_HEADER = struct.Struct(">2s2xIHBB8s")
_PACKET_OUTGOING = 4


@cython.locals(p=cython.p_uchar, off=cython.Py_ssize_t, end=cython.Py_ssize_t,
               num=cython.Py_ssize_t, i=cython.Py_ssize_t, nxt=cython.Py_ssize_t,
               snap=cython.Py_ssize_t, start=cython.Py_ssize_t, ts=cython.longlong,
               length=cython.longlong)
def tpacket_v3_packets(buf: bytes, base: int, link_type: int, cooked: bool = False,
                       skip_outgoing: bool = False) -> Iterator[CapturedPacket]:
    """The packets of the TPACKET_V3 ring block at ``buf[base:]`` (``bytes``: a block as the
    kernel wrote it, copied out of the ring), in order, as :class:`CapturedPacket`
    (``ts_ns`` from tp_sec/tp_nsec, ``data`` the tp_snaplen bytes at tp_mac, ``orig_len``
    tp_len, ``interface_id`` 0); linux/if_packet.h, packet(7).

    ``cooked``: the ring reads from the network header on (``SOCK_DGRAM``, ``-i any``): each
    packet gets the LINKTYPE_LINUX_SLL2 header libpcap would write, built from its
    ``sockaddr_ll`` (``orig_len`` counts its 20 bytes; ``link_type`` should be 276).
    ``skip_outgoing``: packets of type PACKET_OUTGOING are left out (loopback's second copy,
    where the socket option cannot drop it). Compiled, the headers are read in place and
    each packet filled by the setters of the pcap record loop (what a live decoder does with
    every packet).

    Raises:
        ValueError: a packet header or its bytes run past the end of ``buf``, or a packet
            before the last has no next offset (the packets before it were yielded).
    """
    end = len(buf)
    p = buf
    if base + TPACKET3_BLOCK.size > end:
        raise ValueError(f"a TPACKET_V3 block header cut at byte {end}")
    _, _, _, num, first = TPACKET3_BLOCK.unpack_from(buf, base)
    off = base + first
    hdr = TPACKET3_HEADER.unpack_from
    packet = CapturedPacket
    # the bytes read of each packet's header: tpacket3_hdr, and its sockaddr_ll when needed
    addr_end = TPACKET3_HEADER_BYTES + SOCKADDR_LL.size if cooked or skip_outgoing \
        else TPACKET3_HEADER.size
    for i in range(num):
        if off < base or off + addr_end > end:
            raise ValueError(f"packet {i} of a TPACKET_V3 block at byte {off} of {end}")
        if cython.compiled:
            nxt = _le32(p, off)
            ts = _le32(p, off + 4) * 1_000_000_000 + _le32(p, off + 8)
            snap = _le32(p, off + 12)
            length = _le32(p, off + 16)
            start = off + (p[off + 24] | p[off + 25] << 8)
        else:
            nxt, sec, nsec, snap, length, _, mac, _ = hdr(buf, off)
            ts = sec * 1_000_000_000 + nsec
            start = off + mac
        if start + snap > end:
            raise ValueError(f"packet {i} of a TPACKET_V3 block: {snap} bytes at byte "
                             f"{start}, past its end ({end})")
        keep = True
        if cooked or skip_outgoing:
            _, proto, ifindex, hatype, pkttype, halen, addr = SOCKADDR_LL.unpack_from(
                buf, off + TPACKET3_HEADER_BYTES)
            keep = not (skip_outgoing and pkttype == _PACKET_OUTGOING)  # loopback's 2nd copy
        if keep and cooked:
            yield _packet(packet, ts, link_type,
                          SLL2_HEADER.pack(proto, ifindex, hatype, pkttype, halen, addr)
                          + buf[start:start + snap], length + SLL2_HEADER.size, 0)
        elif keep:
            yield _packet(packet, ts, link_type, buf[start:start + snap], length, 0)
        if not nxt and i + 1 < num:     # the kernel leaves it 0 on the last packet only
            raise ValueError(f"packet {i} of {num} of a TPACKET_V3 block has no next offset")
        off += nxt


def open_capture(source: str | os.PathLike[str] | IO[bytes], *, checkpoint_every: int = 0,
                 start: Checkpoint | None = None,
                 on_secrets: Callable[[int, bytes], None] | None = None) -> PacketSource:
    """Open a pcap or pcapng capture (optionally gzip-compressed) for streaming.

    Args:
        source: a path (``str`` or ``os.PathLike``), ``"-"`` for standard input
            (``sys.stdin.buffer``; read without seeking), or a binary file object (only
            ``read``/``read1`` is used; it is not closed by :meth:`PacketSource.close`).
        checkpoint_every: record a :class:`Checkpoint` at the first packet and every this
            many packets (``PacketSource.checkpoints``); 0: none.
        start: a checkpoint recorded earlier on the same file: read from that packet on
            (the file is positioned with ``seek``; only uncompressed, seekable sources).
        on_secrets: called as ``on_secrets(secrets_type, data)`` for each pcapng
            Decryption Secrets Block, before the packets after it
            (:data:`TLS_KEY_LOG_SECRETS`: NSS key log text); its bytes then count as
            format, not as skipped blocks.

    Returns:
        A :class:`PacketSource` yielding :class:`CapturedPacket` values.

    Raises:
        CaptureError: the source cannot be read at all (missing, unreadable, empty, or not a
            pcap/pcapng/gzip file), with a one-line message naming the source and why, e.g.
            ``x.txt: not a pcap or pcapng file (starts with 48 65 6c 6c)``; or ``start`` was
            given for a source that cannot seek (gzip, pipe).
    """
    closers: list[Callable[[], object]] = []
    if isinstance(source, (str, os.PathLike)) and os.fspath(source) == "-":
        name = "<stdin>"
        stdin_buffer = getattr(sys.stdin, "buffer", None)
        if stdin_buffer is None:
            raise CaptureError(f"{name}: no binary standard input to read from")
        f: IO[bytes] = stdin_buffer
    elif isinstance(source, (str, os.PathLike)):
        name = _path_name(source)
        f = open_path(name)
        closers.append(f.close)
    elif hasattr(source, "read"):
        f = source
        name = str(getattr(source, "name", "") or "<stream>")
    else:
        raise CaptureError(f"{source!r}: not a path, '-', or a binary file object")
    try:
        packets = _open_stream(f, name, closers, checkpoint_every, start)
    except BaseException:
        for close in closers:
            close()
        raise
    packets.on_secrets = on_secrets
    return packets


def _path_name(source: str | os.PathLike[str]) -> str:
    name = os.fspath(source)
    return os.fsdecode(name) if isinstance(name, bytes) else name


def open_path(path: str | os.PathLike[str]) -> IO[bytes]:
    """A capture path opened for reading (unbuffered binary), the one way every reader opens
    one: a file, a named FIFO (this waits for its writer, as ``tcpdump -r`` does), a
    ``/dev/fd/N`` pipe (``<(cat x.pcap)``), a character device. Raises
    :class:`~kafkasniff.errors.CaptureError` with a one-line message naming the path:
    ``no such file``, ``is a directory, not a capture file``, ``permission denied``,
    ``cannot open: ...``."""
    name = _path_name(path)
    try:
        return open(name, "rb", buffering=0)  # noqa: SIM115 - the caller closes it
    except FileNotFoundError:
        raise CaptureError(f"{name}: no such file") from None
    except IsADirectoryError:
        raise CaptureError(f"{name}: is a directory, not a capture file") from None
    except PermissionError:
        raise CaptureError(f"{name}: permission denied") from None
    except OSError as exc:
        raise CaptureError(f"{name}: cannot open: {_exc_text(exc)}") from None


def is_regular_file(path: str | os.PathLike[str]) -> bool:
    """``path`` names a regular file (it can be opened and read again); False for ``"-"``,
    FIFOs, pipes, devices, directories and paths that do not exist."""
    if not isinstance(path, (str, os.PathLike)) or os.fspath(path) == "-":
        return False
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


class _Replay:
    """A stream that can be read only once (stdin, a named FIFO, a ``/dev/fd/N`` pipe) whose
    first bytes are read twice: what is read before :meth:`rewind` is kept and handed out
    again after it (the check of :func:`probe_capture`); then reads go to the stream."""

    def __init__(self, f: IO[bytes], name: str, owned: bool) -> None:
        self.name = name
        self._f = f
        self._owned = owned
        self._read = _reader_of(f)
        self._kept: list[bytes] | None = []
        self._again = b""

    def read(self, n: int = -1) -> bytes:
        if self._again:
            if n is None or n < 0 or n >= len(self._again):
                data, self._again = self._again, b""
            else:
                data, self._again = self._again[:n], self._again[n:]
            return data
        data = self._read(n if n is not None and n >= 0 else READ_CHUNK_BYTES)
        if self._kept is not None:
            self._kept.append(data)
        return data

    read1 = read

    def rewind(self) -> None:
        """Hand out the bytes read so far again; keep nothing from here on."""
        self._again = b"".join(self._kept or ()) + self._again
        self._kept = None

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._f.fileno()

    def close(self) -> None:
        """Close the stream if :func:`probe_capture` opened it (not stdin or a caller's)."""
        self._again = b""
        if self._owned:
            self._f.close()


def probe_capture(source: str | os.PathLike[str] | IO[bytes],
                  name: str | None = None) -> str | IO[bytes]:
    """Check that ``source`` is a capture before a command starts its work (the TUI, before
    it takes the terminal), without losing a byte of it.

    A regular file is opened, its first bytes checked, and closed: its path is returned (it
    can be opened again). Anything else, ``"-"`` (standard input), a named FIFO, a
    ``/dev/fd/N`` pipe (``<(cat x.pcap)``), a character device or a binary file object
    (``name`` names it in messages), can be read only once: it is opened here once and
    returned as a binary stream that hands out again the bytes the check read; read that
    stream (once; :func:`open_capture` takes it) and never the path again. Reading a FIFO
    twice lost its first bytes and killed its writer with SIGPIPE.

    Raises:
        CaptureError: as :func:`open_capture` (missing, a directory, unreadable, empty, not
            a capture).
    """
    owned = False
    if isinstance(source, (str, os.PathLike)):
        path = _path_name(source)
        if path == "-":
            f = getattr(sys.stdin, "buffer", None)
            if f is None:
                raise CaptureError("<stdin>: no binary standard input to read from")
            name = "<stdin>"
        elif is_regular_file(path):
            open_capture(path).close()
            return path
        else:
            f = open_path(path)
            owned = True
            name = path
    elif hasattr(source, "read"):
        f = source
        name = name or str(getattr(source, "name", "") or "<stream>")
    else:
        raise CaptureError(f"{source!r}: not a path, '-', or a binary file object")
    replay = _Replay(f, name, owned)
    try:
        open_capture(replay).close()
    except BaseException:
        replay.close()
        raise
    replay.rewind()
    return replay


def _size_from_here(f: IO[bytes]) -> int | None:
    """Bytes from the current position to the end of a regular file, else None."""
    try:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            return None
        return max(0, st.st_size - f.tell())
    except (OSError, AttributeError, ValueError):
        pass
    try:
        if getattr(f, "seekable", None) and f.seekable():
            cur = f.tell()
            end = f.seek(0, os.SEEK_END)
            f.seek(cur)
            return max(0, end - cur)
    except (OSError, AttributeError, ValueError):
        pass
    return None


def _seekable(f: IO[bytes]) -> bool:
    try:
        return bool(f.seekable()) and stat.S_ISREG(os.fstat(f.fileno()).st_mode)
    except (OSError, AttributeError, ValueError):
        return False


def _open_stream(f: IO[bytes], name: str, closers: list[Callable[[], object]],
                 checkpoint_every: int = 0, start: Checkpoint | None = None) -> PacketSource:
    total = _size_from_here(f)
    seekable = _seekable(f)
    read = _reader_of(f)
    head, err = _read_head(read, 24)
    if not head:
        if err is not None:
            raise CaptureError(f"{name}: cannot read: {_exc_text(err)}")
        raise CaptureError(f"{name}: empty file")
    counter = None
    kind = ""
    if head[:2] == _GZIP_MAGIC:
        kind = "gzip-compressed, but "
        counter = _CountingReader(head, read, err)
        gz = gzip.GzipFile(fileobj=counter, mode="rb")  # type: ignore[arg-type]
        closers.insert(0, gz.close)
        read = gz.read1
        head, err = _read_head(read, 24)
        if len(head) < 4 and err is not None:
            raise CaptureError(f"{name}: {kind}cannot be decompressed: {_exc_text(err)}")
    if len(head) < 4:
        raise CaptureError(f"{name}: {kind}too short to be a capture file ({len(head)} bytes)")
    if head[:4] in _PCAP_MAGICS:
        fmt = "pcap"
    elif head[:4] == b"\x0a\x0d\x0d\x0a":
        fmt = "pcapng"
        bom = head[8:12]
        if len(bom) == 4 and bom not in (b"\x4d\x3c\x2b\x1a", b"\x1a\x2b\x3c\x4d"):
            raise CaptureError(f"{name}: {kind}starts like pcapng but has a bad byte-order "
                               f"magic ({_hex4(bom)})")
    else:
        raise CaptureError(f"{name}: {kind}not a pcap or pcapng file (starts with "
                           f"{_hex4(head)})")
    if counter is not None:
        seekable = False
    if start is not None:
        if not seekable:
            raise CaptureError(f"{name}: cannot read from a checkpoint (not an uncompressed, "
                               f"seekable file)")
        if (start.state is None) != (fmt == "pcap"):
            raise CaptureError(f"{name}: checkpoint of another capture format")
        f.seek(start.offset)
        if fmt == "pcap":
            head = head[:_PCAP_HEADER_BYTES]
        err = None
    return PacketSource(name=name, fmt=fmt, read=read, head=head, closers=closers,
                        total_bytes=total, counter=counter, head_error=err,
                        checkpoint_every=checkpoint_every, start=start, seekable=seekable)
