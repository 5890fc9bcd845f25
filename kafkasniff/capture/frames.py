"""Finding a Kafka frame's bytes again in a capture, from its TCP sequence number.

Sinks that keep only compact summaries of exchanges (the TUI) decode a frame again when a user
asks for it. Every :class:`~kafkasniff.pairing.exchange.Message` carries ``seq`` (the TCP
sequence number of its first byte, the size prefix), ``first_ts_ns`` and ``frame_bytes``,
and its exchange the ``client`` and ``broker`` endpoints: that is a :class:`FrameRef`.

While the capture is read, a :class:`CaptureIndex` keeps a sparse index: a
:class:`~kafkasniff.capture.pcapfile.Checkpoint` (file offset, timestamp, reader state) every
N packets of every file (``open_capture(..., checkpoint_every=N)``). :class:`FrameFinder`
reopens the file at the last checkpoint before the frame's first byte, reads the packets of
that flow (sender to receiver) from there, places their payload bytes by sequence number
(modulo 2**32, so wrap-around is handled; the SYN's sequence number is skipped; the first copy
of a retransmitted byte wins, as in reassembly) and stops when the frame is whole. When bytes
are still missing it goes on while the flow makes progress (``horizon_ns`` of capture time
after the last byte placed), then restarts further back (segments reordered before the first
byte) before giving up: what was never captured is reported in :attr:`FoundFrame.missing`.

Files that cannot seek (gzip-compressed captures) are read again from their start, skipping
packets up to the checkpoint without decoding them: correct, but slower on large files.
Standard input cannot be read twice: callers keep a copy (the TUI spools it to a temporary
file while reading).
"""

from __future__ import annotations

import ipaddress
from array import array
from bisect import bisect_left
from dataclasses import dataclass, field

from kafkasniff.capture.packet import decode_packet
from kafkasniff.capture.pcapfile import Checkpoint, open_capture
from kafkasniff.capture.types import SYN, TcpSegment
from kafkasniff.errors import CaptureError

__all__ = ["CaptureIndex", "FoundFrame", "FrameFinder", "FrameRef", "parse_endpoint"]

_MASK = 0xFFFFFFFF
_HALF = 1 << 31
#: Packets between two checkpoints of a :class:`CaptureIndex` (``open_capture``'s
#: ``checkpoint_every``): trades index memory against packets read again per lookup.
DEFAULT_CHECKPOINT_EVERY = 256


def parse_endpoint(text: str) -> tuple[bytes, int]:
    """``"1.2.3.4:9092"`` / ``"[::1]:9092"`` -> (packed address, port).

    Raises ValueError on anything else.
    """
    host, _, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return ipaddress.ip_address(host).packed, int(port)


@dataclass(frozen=True, slots=True)
class FrameRef:
    """Where a frame was on the wire.

    Attributes:
        sender / receiver: ``"ip:port"`` of the endpoint that sent the frame and its peer
            (requests: client -> broker; responses: broker -> client).
        seq: TCP sequence number of the frame's first byte (its size prefix), 0..2**32-1.
        ts_ns: capture time of the frame's first byte (``Message.first_ts_ns``).
        frame_bytes: the frame's size on the wire (size prefix included).
    """

    sender: str
    receiver: str
    seq: int
    ts_ns: int
    frame_bytes: int


@dataclass(slots=True)
class FoundFrame:
    """A frame's bytes as found in the capture.

    Attributes:
        data: ``frame_bytes`` bytes (size prefix included); bytes never found are zero.
        missing: ``(start, end)`` byte ranges of ``data`` that were not found (gaps).
        packets_scanned: packets read to find it.
        last_ts_ns: capture time of the last packet that held bytes of the frame (0 when
            none was found).
    """

    data: bytes
    missing: list[tuple[int, int]] = field(default_factory=list)
    packets_scanned: int = 0
    last_ts_ns: int = 0

    @property
    def complete(self) -> bool:
        """Every byte was found."""
        return not self.missing


@dataclass(slots=True)
class IndexedFile:
    """One capture file of a :class:`CaptureIndex`.

    Attributes:
        path: the file, as given to :func:`~kafkasniff.capture.pcapfile.open_capture`.
        seekable: ``PacketSource.seekable`` (else it is read again from its start).
        ts: the checkpoints' ``ts_ns`` (an ``array('q')``, for bisection).
        checkpoints: its checkpoints in file order.
    """

    path: str
    seekable: bool
    ts: array = field(default_factory=lambda: array("q"))
    checkpoints: list[Checkpoint] = field(default_factory=list)


class CaptureIndex:
    """Sparse index of the capture files of one analysis, in reading order.

    Files are one continuous capture (a connection may continue in the next file). Add a file
    with :meth:`add_file` before reading it and its checkpoints with :meth:`add_checkpoints`
    as they come (``PacketSource.checkpoints``); the index may be read (by a
    :class:`FrameFinder`) while it grows.
    """

    def __init__(self) -> None:
        self.files: list[IndexedFile] = []

    def add_file(self, path: str, seekable: bool) -> int:
        """Register the next capture file; returns its number."""
        self.files.append(IndexedFile(str(path), seekable))
        return len(self.files) - 1

    def add_checkpoints(self, file_no: int, checkpoints) -> None:
        """Append checkpoints (in file order) of file ``file_no``."""
        f = self.files[file_no]
        for cp in checkpoints:
            f.ts.append(cp.ts_ns)
            f.checkpoints.append(cp)

    def __len__(self) -> int:
        return sum(len(f.checkpoints) for f in self.files)

    def locate(self, ts_ns: int) -> tuple[int, int]:
        """``(file_no, checkpoint_no)`` of the last checkpoint strictly before ``ts_ns``
        (the first one of the first file when none is)."""
        best = (0, 0)
        for no, f in enumerate(self.files):
            if not f.checkpoints:
                continue
            i = bisect_left(f.ts, ts_ns)
            if i == 0:
                if no == 0:
                    return best
                break
            best = (no, i - 1)
        return best

    def back(self, pos: tuple[int, int], count: int) -> tuple[int, int]:
        """The checkpoint ``count`` places before ``pos`` (across files; clamped to the
        first checkpoint of the first file)."""
        no, i = pos
        while count > 0:
            if i >= count:
                return no, i - count
            count -= i + 1
            if no == 0:
                return 0, 0
            no -= 1
            i = max(0, len(self.files[no].checkpoints) - 1)
        return no, i


class _Cover:
    """Disjoint sorted ``[lo, hi)`` ranges already filled."""

    __slots__ = ("los", "his", "filled", "last_ts")

    def __init__(self) -> None:
        self.los: list[int] = []
        self.his: list[int] = []
        self.filled = 0            # bytes filled (the sum of hi - lo)
        self.last_ts = 0           # capture time of the packet that filled the last byte

    def add(self, lo: int, hi: int) -> list[tuple[int, int]]:
        """Mark ``[lo, hi)`` filled; returns the sub-ranges that were not filled before."""
        los, his = self.los, self.his
        i = bisect_left(his, lo + 1)        # first range whose end is after lo
        new = []
        cur = lo
        j = i
        while j < len(los) and los[j] < hi:
            if los[j] > cur:
                new.append((cur, los[j]))
            cur = max(cur, his[j])
            j += 1
        if cur < hi:
            new.append((cur, hi))
        if not new:
            return new
        # merge [lo, hi) with ranges i..j-1 (those overlapping) and touching neighbours
        nlo = min(lo, los[i]) if i < j else lo
        nhi = max(hi, his[j - 1]) if i < j else hi
        if i > 0 and his[i - 1] == nlo:
            i -= 1
            nlo = los[i]
        if j < len(los) and los[j] == nhi:
            nhi = his[j]
            j += 1
        los[i:j] = [nlo]
        his[i:j] = [nhi]
        self.filled += sum(b - a for a, b in new)
        return new

    def missing(self, total: int) -> list[tuple[int, int]]:
        out = []
        cur = 0
        for lo, hi in zip(self.los, self.his):
            if lo > cur:
                out.append((cur, lo))
            cur = max(cur, hi)
        if cur < total:
            out.append((cur, total))
        return out


class FrameFinder:
    """Finds frames again in the files of a :class:`CaptureIndex`.

    Args:
        index: the capture's sparse index.
        horizon_ns: how long (capture time) to keep reading after the last byte placed when
            bytes are still missing.
        backoff: how many checkpoints further back each retry starts (reordered segments).
        max_packets: bound on the packets read for one frame.
    """

    def __init__(self, index: CaptureIndex, *, horizon_ns: int = 2_000_000_000,
                 backoff: tuple[int, ...] = (0, 16, 256), max_packets: int = 5_000_000) -> None:
        self.index = index
        self.horizon_ns = horizon_ns
        self.backoff = backoff
        self.max_packets = max_packets

    def find(self, ref: FrameRef) -> FoundFrame | None:
        """The frame's bytes, or ``None`` when the reference cannot be located (unknown
        sequence number, empty index, unreadable file). Reads files; never raises on their
        content (a file that cannot be opened any more gives ``None``)."""
        if ref.seq < 0 or ref.frame_bytes <= 0 or not self.index.files:
            return None
        try:
            sip, sport = parse_endpoint(ref.sender)
            dip, dport = parse_endpoint(ref.receiver)
        except ValueError:
            return None
        size = ref.frame_bytes
        buf = bytearray(size)
        cover = _Cover()
        scanned = 0
        start = self.index.locate(ref.ts_ns)
        tried = set()
        try:
            for back in self.backoff:
                pos = self.index.back(start, back)
                if pos in tried:
                    continue
                tried.add(pos)
                scanned += self._scan(pos, ref, (sip, sport, dip, dport), buf, cover)
                if cover.filled == size or scanned >= self.max_packets:
                    break
        except (CaptureError, OSError):
            return None
        return FoundFrame(bytes(buf), cover.missing(size), scanned, cover.last_ts)

    def _packets(self, pos: tuple[int, int]):
        """Packets from checkpoint ``pos`` on, through the following files."""
        no, i = pos
        files = self.index.files
        for k in range(no, len(files)):
            f = files[k]
            cp = f.checkpoints[i] if k == no and i < len(f.checkpoints) else None
            if cp is not None and cp.packet_index and f.seekable:
                src = open_capture(f.path, start=cp)
                skip = 0
            else:
                src = open_capture(f.path)
                skip = cp.packet_index if cp is not None else 0
            with src:
                it = iter(src)
                for _ in range(skip):
                    if next(it, None) is None:
                        break
                yield from it

    def _scan(self, pos, ref: FrameRef, flow: tuple, buf: bytearray, cover: _Cover) -> int:
        sip, sport, dip, dport = flow
        size = len(buf)
        seq0 = ref.seq
        horizon = self.horizon_ns
        limit_ts = ref.ts_ns + horizon
        n = 0
        budget = self.max_packets
        for pkt in self._packets(pos):
            n += 1
            if pkt.ts_ns > limit_ts or n > budget:
                break
            seg = decode_packet(pkt)
            if type(seg) is not TcpSegment or seg.src_port != sport or seg.dst_port != dport \
                    or seg.src_ip != sip or seg.dst_ip != dip:
                continue
            payload = seg.payload
            if not payload:
                continue
            seq = seg.seq + 1 if seg.flags & SYN else seg.seq
            rel = (seq - seq0) & _MASK
            if rel >= _HALF:
                rel -= 1 << 32
            lo = rel if rel > 0 else 0
            hi = rel + len(payload)
            if hi > size:
                hi = size
            if lo >= hi:
                continue
            placed = cover.add(lo, hi)
            for a, b in placed:
                buf[a:b] = payload[a - rel:b - rel]
            if placed and pkt.ts_ns > cover.last_ts:
                cover.last_ts = pkt.ts_ns
            if cover.filled == size:
                break
            if pkt.ts_ns + horizon > limit_ts:
                limit_ts = pkt.ts_ns + horizon
        return n
