"""Capture backends: where live packets come from.

Every backend delivers packets to a callback ``add(ts_ns, data, orig_len)`` from its
:meth:`read` method, which returns after at most ``timeout`` seconds without packets, or
after a budget of packets so that the caller can flush batches and publish counters. ``data``
may be a view into a kernel ring that is reused after ``read`` returns: ``add`` copies it.

* :class:`RingBackend` (default): an ``AF_PACKET`` socket with a ``TPACKET_V3`` receive ring
  mapped into our memory (``PACKET_RX_RING``; blocks of ``block_bytes``, ``ring_bytes`` in
  all). The kernel writes whole blocks of packets; a block is handed to us when full or after
  ``retire_ms``; reading a packet costs one ``struct`` unpack, no system call. Exact kernel
  counters come from ``PACKET_STATISTICS`` (packets accepted by the filter, packets dropped
  because the ring was full).
* :class:`SocketBackend` (``--backend socket``): the same socket without a ring, read with
  ``recvmsg_into`` into a preallocated buffer (``SO_RCVBUF`` forced to ``ring_bytes``;
  nanosecond timestamps from ``SO_TIMESTAMPNS``). Slower (one system call per packet); for
  kernels or sandboxes without ``PACKET_RX_RING``.
* :class:`StreamBackend` (``-r -``): a pcap/pcapng stream read with
  :func:`kafkasniff.capture.open_capture` (``tcpdump -i eth0 -w - | kafkasniff live -r -``),
  or a capture file (read at full speed). No kernel counters of ours (tcpdump prints its own).

Loopback shows each packet twice (leaving and arriving): on ``lo`` and ``-i any`` the BPF
prefix of :func:`kafkasniff.live.bpf.build_filter` rejects the outgoing copy (the socket
option ``PACKET_IGNORE_OUTGOING``, also set on ``lo``, does not apply to the sockets of a
fanout group; kernels before 4.20 without it get ``FLAG_SKIP_OUTGOING``). Cooked captures
(``-i any``) read from the network header on (``SOCK_DGRAM``) and get a
``LINKTYPE_LINUX_SLL2`` header built from the packet's ``sockaddr_ll`` (protocol, ifindex,
hatype, packet type, address), as libpcap writes it.

Standard library only (socket, mmap, struct, select, ctypes for ``SO_ATTACH_FILTER``).
"""

from __future__ import annotations

import errno
import mmap
import os
import select
import socket
import stat
import struct
import time
from typing import Callable

from kafkasniff.capture.pcapfile import (
    SLL2_HEADER,
    TPACKET3_HEADER_BYTES,
    tpacket_v3_packets,
)
from kafkasniff.live.bpf import (
    DROP_ALL,
    Interface,
    LiveError,
    attach_filter,
)

__all__ = [
    "Backend",
    "PermissionDenied",
    "RingBackend",
    "SocketBackend",
    "StreamBackend",
    "open_live",
    "permission_hint",
]

SOL_PACKET = 263
PACKET_ADD_MEMBERSHIP = 1
PACKET_RX_RING = 5
PACKET_STATISTICS = 6
PACKET_VERSION = 10
PACKET_IGNORE_OUTGOING = 23
TPACKET_V3 = 2
TP_STATUS_KERNEL = 0
TP_STATUS_USER = 1
ETH_P_ALL = 0x0003
SO_RCVBUFFORCE = 33
SO_TIMESTAMPNS = 35
SCM_TIMESTAMPNS = SO_TIMESTAMPNS
PACKET_TIMESTAMP = 17
SOF_TIMESTAMPING_SOFTWARE = 1 << 4

#: block descriptor: version, offset_to_priv, block_status, num_pkts, offset_to_first_pkt,
#: blk_len (the packets' headers: kafkasniff.capture.pcapfile.TPACKET3_HEADER)
_blk_hdr6 = struct.Struct("<IIIIII").unpack_from
_u32 = struct.Struct("<I").unpack_from
_zero_u32 = struct.Struct("<I").pack_into
_sll2 = SLL2_HEADER.pack
_tpacket_stats = struct.Struct("<III")     # tp_packets, tp_drops, tp_freeze_q_cnt (v3)
_timespec = struct.Struct("@qq")

DEFAULT_SNAPLEN = 262144
DEFAULT_RING_BYTES = 64 << 20
DEFAULT_BLOCK_BYTES = 1 << 20
DEFAULT_RETIRE_MS = 10


class PermissionDenied(LiveError):
    """No privilege to open a packet socket."""


def permission_hint(iface: str) -> str:
    """The one-line message for a missing CAP_NET_RAW."""
    import sys

    py = os.path.realpath(sys.executable)
    return (f"capturing on {iface} needs root or CAP_NET_RAW: run as root, or grant the "
            f"capability once with 'sudo setcap cap_net_raw+eip {py}', or pipe tcpdump: "
            f"'sudo tcpdump -i {iface} -U -w - | kafkasniff live -r -'")


AddFn = Callable[[int, object, int], None]


class Backend:
    """Interface of a packet source (see the module docstring).

    Attributes:
        name: what is captured (interface name, ``<stdin>``, a file name).
        link_type: LINKTYPE_* of the packets delivered.
        kind: ``ring``, ``socket`` or ``stream``.
        exhausted: a stream ended (no more packets will ever come).
        has_kernel_stats: :meth:`kernel_stats` is meaningful.
    """

    name = ""
    link_type = 1
    kind = ""
    exhausted = False
    has_kernel_stats = False

    def read(self, add: AddFn, timeout: float, budget: int = 4096) -> int:
        """Deliver ready packets to ``add``; wait at most ``timeout`` s if none is ready.
        Returns the number delivered (at most about ``budget``)."""
        raise NotImplementedError

    def stop_intake(self) -> None:
        """Accept no new packet (what is already held can still be read)."""

    def kernel_stats(self) -> tuple[int, int]:
        """``(received, dropped)`` since the start: packets the filter accepted and packets
        the kernel dropped for lack of room (cumulative)."""
        return (0, 0)

    def close(self) -> None:
        """Release the socket / ring / stream."""


def _bind_all(sock: socket.socket) -> None:
    """Bind a packet socket to every interface (ifindex 0), which Python's ``bind`` cannot
    express: ``bind(2)`` through ctypes with a raw ``sockaddr_ll``."""
    import ctypes
    import ctypes.util

    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    # sockaddr_ll: family, protocol (network order), ifindex, hatype, pkttype, halen, addr[8]
    addr = struct.pack("<H2siHBB8s", socket.AF_PACKET, ETH_P_ALL.to_bytes(2, "big"), 0, 0, 0,
                       0, b"")
    buf = ctypes.create_string_buffer(addr, len(addr))
    if libc.bind(sock.fileno(), buf, len(addr)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


PACKET_FANOUT = 18
PACKET_FANOUT_HASH = 0
#: batch kinds on the way to the decoders (first 8 bytes of a batch: kind, link type, flags)
KIND_RECORDS = 1          # <ts_ns, caplen, orig_len, link_type> + bytes, repeated
KIND_TPACKET_V3 = 2       # one TPACKET_V3 block as the kernel wrote it
KIND_SECRETS = 3          # a pcapng Decryption Secrets Block: <u32 secrets type> + its data
KIND_SOURCE_END = 4       # the end of a -r stream: pickled (issues, accounting), decoder 0
FLAG_COOKED = 1           # build an SLL2 header from each packet's sockaddr_ll
FLAG_SKIP_OUTGOING = 2    # skip PACKET_OUTGOING copies (loopback, kernels before 4.20)
batch_header = struct.Struct("<HHI")


def _software_timestamps(sock: socket.socket) -> None:
    """Time packets by the kernel's software receive timestamp where it has one.

    A packet socket without it is timed when the kernel hands it the packet
    (``tpacket_rcv``: ``ktime_get_real``), after every capture served before it ran its
    filter and copied the packet (tens of µs for a 64 KiB loopback frame): two captures of
    one packet then differ by that. ``SO_TIMESTAMPNS`` turns on the kernel's receive
    timestamps (``net_enable_timestamp``): a packet arriving from a device is stamped once,
    in ``netif_receive_skb`` / ``netif_rx``, and ``tpacket_rcv`` prefers that stamp
    (``PACKET_TIMESTAMP`` ``SOF_TIMESTAMPING_SOFTWARE`` asks for it on kernels before that
    preference), for every capture on the host, tcpdump included: their timestamps are the
    same. Packets carrying a transmit delivery time (TCP sent on this host: loopback, and the
    outgoing copies on any interface) get no receive stamp and are still timed on hand-over.
    Best effort: a kernel refusing either option keeps the hand-over time."""
    for level, opt, value in ((socket.SOL_SOCKET, SO_TIMESTAMPNS, 1),
                              (SOL_PACKET, PACKET_TIMESTAMP, SOF_TIMESTAMPING_SOFTWARE)):
        try:
            sock.setsockopt(level, opt, value)
        except OSError:
            pass


class _Member:
    """One ``AF_PACKET`` socket of a backend (with its ring in ring mode)."""

    def __init__(self, iface: Interface, ring: bool, block_bytes: int, nblocks: int,
                 retire_ms: int) -> None:
        kind = socket.SOCK_DGRAM if iface.cooked else socket.SOCK_RAW
        try:
            self.sock = socket.socket(socket.AF_PACKET, kind, 0)
        except PermissionError:
            raise PermissionDenied(permission_hint(iface.name)) from None
        except OSError as exc:
            raise LiveError(f"cannot open a packet socket: {exc.strerror or exc}") from None
        self.mm = None
        self.mv = None
        self.cur = 0
        self.received = 0
        self.dropped = 0
        self.block_bytes = block_bytes
        self.nblocks = nblocks
        try:
            # nothing gets in until the real filter is attached (after bind and fanout join)
            attach_filter(self.sock, DROP_ALL)
            _software_timestamps(self.sock)
            self.skip_outgoing = False
            if iface.loopback:
                try:
                    self.sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
                except OSError:        # kernel < 4.20: skip them by packet type
                    self.skip_outgoing = True
            if ring:
                self.sock.setsockopt(SOL_PACKET, PACKET_VERSION, TPACKET_V3)
                frame = 2048
                req = struct.pack("<7I", block_bytes, nblocks, frame,
                                  (block_bytes // frame) * nblocks, retire_ms, 0, 0)
                self.sock.setsockopt(SOL_PACKET, PACKET_RX_RING, req)
                self.mm = mmap.mmap(self.sock.fileno(), block_bytes * nblocks, mmap.MAP_SHARED,
                                    mmap.PROT_READ | mmap.PROT_WRITE)
                self.mv = memoryview(self.mm)
        except OSError as exc:
            self.close()
            if ring:
                raise LiveError(f"cannot set up a {(block_bytes * nblocks) >> 20} MB TPACKET_V3 "
                                f"ring: {exc.strerror or exc} (try a smaller -B, or --backend "
                                f"socket)") from None
            raise LiveError(f"cannot set up the packet socket: {exc.strerror or exc}") from None
        except BaseException:
            self.close()
            raise

    def bind(self, iface: Interface) -> None:
        try:
            if iface.index == 0:
                _bind_all(self.sock)
            else:
                self.sock.bind((iface.name, ETH_P_ALL))
        except OSError as exc:
            if exc.errno == errno.ENODEV:
                raise LiveError(f"interface {iface.name} disappeared") from None
            if exc.errno == errno.ENETDOWN:
                raise LiveError(f"interface {iface.name} is down") from None
            raise LiveError(f"cannot bind to {iface.name}: {exc.strerror or exc}") from None

    def stats(self) -> tuple[int, int]:
        # reading PACKET_STATISTICS resets the kernel's counters: accumulate here
        raw = self.sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, _tpacket_stats.size)
        packets, drops, _ = _tpacket_stats.unpack(raw[:_tpacket_stats.size].ljust(12, b"\0"))
        # tp_packets counts every packet the filter accepted, dropped ones included
        self.received += packets
        self.dropped += drops
        return self.received, self.dropped

    def close(self) -> None:
        if self.mv is not None:
            try:
                self.mv.release()
            except ValueError:
                pass
            self.mv = None
        if self.mm is not None:
            try:
                self.mm.close()
            except (BufferError, ValueError):
                pass
            self.mm = None
        self.sock.close()


class _PacketSockets(Backend):
    """What the ring and the plain socket backends share: ``fanout`` sockets on one
    interface in a ``PACKET_FANOUT_HASH`` group (the kernel sends both directions of a flow
    to the same socket: ``__skb_get_hash_symmetric``), so that socket ``i`` feeds decoder
    ``i``; the filter, loopback handling and kernel statistics (summed over the sockets)."""

    has_kernel_stats = True
    ring = False

    def __init__(self, iface: Interface, bpf: list, snaplen: int, fanout: int,
                 block_bytes: int = 0, nblocks: int = 0, retire_ms: int = DEFAULT_RETIRE_MS
                 ) -> None:
        self.iface = iface
        self.name = iface.name
        self.snaplen = snaplen
        self.link_type = iface.link_type
        self.cooked = iface.cooked
        self.fanout = max(1, fanout)
        self.members: list[_Member] = []
        try:
            group = (os.getpid() ^ id(self)) & 0xFFFF
            for _ in range(self.fanout):
                m = _Member(iface, self.ring, block_bytes, nblocks, retire_ms)
                self.members.append(m)
                m.bind(iface)
                if self.fanout > 1:
                    try:
                        m.sock.setsockopt(SOL_PACKET, PACKET_FANOUT,
                                          group | (PACKET_FANOUT_HASH << 16))
                    except OSError as exc:
                        raise LiveError(f"cannot join a PACKET_FANOUT group: "
                                        f"{exc.strerror or exc} (try --workers 1)") from None
            for m in self.members:
                attach_filter(m.sock, bpf)
            for m in self.members:       # start counting from here
                m.stats()
                m.received = m.dropped = 0
        except BaseException:
            self.close()
            raise
        self.skip_outgoing = any(m.skip_outgoing for m in self.members)
        self.flags = (FLAG_COOKED if self.cooked else 0) | \
            (FLAG_SKIP_OUTGOING if self.skip_outgoing else 0)
        self._poll = select.poll()
        self._fd_member = {}
        for i, m in enumerate(self.members):
            self._poll.register(m.sock.fileno(), select.POLLIN | select.POLLERR)
            self._fd_member[m.sock.fileno()] = i

    def kernel_stats(self) -> tuple[int, int]:
        rec = drops = 0
        for m in self.members:
            r, d = m.stats()
            rec += r
            drops += d
        return rec, drops

    def stop_intake(self) -> None:
        for m in self.members:
            try:
                attach_filter(m.sock, DROP_ALL)
            except OSError:
                pass

    def close(self) -> None:
        for m in self.members:
            m.close()
        self.members = []

    def release_in_parent(self) -> None:
        """After fork: the capture process owns the sockets; the parent lets go of its
        copies (closing them here does not affect the child's)."""
        for m in self.members:
            m.close()


class RingBackend(_PacketSockets):
    """``AF_PACKET`` + ``TPACKET_V3`` mmap rings, one per decoder (see the module docstring).

    Args:
        iface: from :func:`kafkasniff.live.bpf.resolve_interface`.
        bpf: the filter program (:func:`kafkasniff.live.bpf.build_filter`).
        snaplen: bytes kept per packet.
        ring_bytes: ring memory in all (split between the rings, whole blocks, at least 2
            blocks each).
        block_bytes: block size (a power of two, larger than a packet).
        retire_ms: a partly filled block is handed over after this long.
        fanout: rings (= decoders), in one ``PACKET_FANOUT_HASH`` group.

    Raises:
        PermissionDenied: no CAP_NET_RAW. LiveError: the rings cannot be set up.
    """

    kind = "ring"
    ring = True

    def __init__(self, iface: Interface, bpf: list, snaplen: int = DEFAULT_SNAPLEN,
                 ring_bytes: int = DEFAULT_RING_BYTES, block_bytes: int = DEFAULT_BLOCK_BYTES,
                 retire_ms: int = DEFAULT_RETIRE_MS, fanout: int = 1) -> None:
        need = snaplen + 256 + TPACKET3_HEADER_BYTES
        while block_bytes < need:
            block_bytes <<= 1
        block_bytes = max(mmap.PAGESIZE, block_bytes)
        nblocks = max(2, ring_bytes // max(1, fanout) // block_bytes)
        self.block_bytes = block_bytes
        self.nblocks = nblocks
        self.ring_bytes = block_bytes * nblocks * max(1, fanout)
        super().__init__(iface, bpf, snaplen, fanout, block_bytes, nblocks, retire_ms)

    def read_blocks(self, on_block: Callable[[int, memoryview, int], bool], timeout: float,
                    budget: int = 64) -> int:
        """Hand every ready block to ``on_block(ring index, block view, packets)`` (the view
        is valid during the call only), waiting at most ``timeout`` s if none is ready.
        ``on_block`` returns False when it cannot take the block now: the block stays in
        its ring (the kernel keeps filling the others; when a ring is full, the kernel drops
        and counts). Returns the packets handed over."""
        members = self.members
        bsize = self.block_bytes
        nblocks = self.nblocks
        got = 0
        blocks = 0
        deadline = 0.0
        while True:
            ready = False
            for i, m in enumerate(members):
                mm = m.mm
                while blocks < budget:
                    boff = m.cur * bsize
                    if not _u32(mm, boff + 8)[0] & TP_STATUS_USER:
                        break
                    ready = True
                    _, _, _, num, _first, blen = _blk_hdr6(mm, boff)
                    if not on_block(i, m.mv[boff:boff + max(blen, 48)], num):
                        break                    # its decoder is behind: leave it there
                    _zero_u32(mm, boff + 8, TP_STATUS_KERNEL)   # hand the block back
                    m.cur = (m.cur + 1) % nblocks
                    got += num
                    blocks += 1
            if got or timeout <= 0 or blocks >= budget:
                return got
            now = time.monotonic()
            if not deadline:
                deadline = now + timeout
            elif now >= deadline:
                return got
            if ready:
                time.sleep(0.0005)               # blocks wait for decoders to make room
            else:
                self._poll.poll(max(1, int((deadline - now) * 1000)))

    def read(self, add: AddFn, timeout: float, budget: int = 4096) -> int:
        """Per-packet reading (all rings): ``add(ts_ns, data, orig_len)``."""
        def on_block(_i, view, _num):
            for ts, data, orig in block_packets(view, 0, self.flags):
                add(ts, data, orig)
            return True
        return self.read_blocks(on_block, timeout)

    def pending_packets(self) -> int:
        """Packets in blocks handed to us and not read yet (all rings)."""
        n = 0
        for m in self.members:
            for k in range(self.nblocks):
                boff = ((m.cur + k) % self.nblocks) * self.block_bytes
                if not _u32(m.mm, boff + 8)[0] & TP_STATUS_USER:
                    break
                n += _blk_hdr6(m.mm, boff)[3]
        return n


def block_packets(buf, base: int, flags: int):
    """``(ts_ns, data, orig_len)`` of every packet of the TPACKET_V3 block at ``buf[base:]``
    (a block of the ring, ``bytes`` or a view of it), cooked headers built and outgoing copies
    skipped as ``flags`` say (``FLAG_COOKED``, ``FLAG_SKIP_OUTGOING``): the capture process's
    per-packet reads, walked by :func:`kafkasniff.capture.pcapfile.tpacket_v3_packets` (the
    decoders' walk). Raises ``ValueError`` for a block cut short."""
    if type(buf) is not bytes:
        buf = bytes(buf)    # a view of the ring (its used part), copied once: the walk reads bytes
    for p in tpacket_v3_packets(buf, base, 0, bool(flags & FLAG_COOKED),
                                bool(flags & FLAG_SKIP_OUTGOING)):
        yield p.ts_ns, p.data, p.orig_len


class SocketBackend(_PacketSockets):
    """Plain ``AF_PACKET`` sockets read packet by packet (``--backend socket``), one per
    decoder in a fanout group; ``SO_RCVBUF`` forced to ``ring_bytes`` split between them."""

    kind = "socket"

    def __init__(self, iface: Interface, bpf: list, snaplen: int = DEFAULT_SNAPLEN,
                 ring_bytes: int = DEFAULT_RING_BYTES, fanout: int = 1, **_: object) -> None:
        super().__init__(iface, bpf, snaplen, fanout)
        per = max(1 << 20, ring_bytes // self.fanout)
        try:
            for m in self.members:
                try:
                    m.sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, per)
                except OSError:
                    m.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, per)
                m.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
                m.sock.setblocking(False)
        except BaseException:
            self.close()
            raise
        self.rcvbuf = self.members[0].sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        self.buf = bytearray(snaplen)
        self.view = memoryview(self.buf)
        self._ancsize = socket.CMSG_SPACE(_timespec.size)
        self._ifindex: dict[str, int] = {}

    def read_members(self, add: Callable[[int, int, object, int], None], timeout: float,
                     budget: int = 4096) -> int:
        """``add(socket index, ts_ns, data, orig_len)`` for every waiting packet."""
        bufs = [self.view]
        anc = self._ancsize
        view = self.view
        cooked = self.cooked
        skip_out = self.skip_outgoing
        n = 0
        waited = False
        while True:
            progress = False
            for i, m in enumerate(self.members):
                recv = m.sock.recvmsg_into
                while n < budget:
                    try:
                        nbytes, ancdata, _flags, addr = recv(bufs, anc, socket.MSG_TRUNC)
                    except (BlockingIOError, InterruptedError):
                        break
                    progress = True
                    pkttype = addr[2]      # (ifname, proto, pkttype, hatype, haddr)
                    if skip_out and pkttype == 4:
                        continue
                    ts = 0
                    for level, typ, data in ancdata:
                        if level == socket.SOL_SOCKET and typ == SCM_TIMESTAMPNS:
                            sec, nsec = _timespec.unpack_from(data)
                            ts = sec * 1_000_000_000 + nsec
                    if not ts:
                        ts = time.time_ns()
                    cap = min(nbytes, len(view))
                    if cooked:
                        haddr = addr[4][:8]
                        ifindex = self._ifindex.get(addr[0])
                        if ifindex is None:
                            try:
                                ifindex = socket.if_nametoindex(addr[0])
                            except OSError:
                                ifindex = 0
                            self._ifindex[addr[0]] = ifindex
                        head = _sll2(addr[1].to_bytes(2, "big"), ifindex, addr[3], pkttype,
                                     len(haddr), haddr.ljust(8, b"\0"))
                        add(i, ts, head + view[:cap], nbytes + 20)
                    else:
                        add(i, ts, view[:cap], nbytes)
                    n += 1
            if n or waited or timeout <= 0 or n >= budget:
                return n
            if not progress:
                self._poll.poll(int(timeout * 1000))
                waited = True

    def read(self, add: AddFn, timeout: float, budget: int = 4096) -> int:
        return self.read_members(lambda _i, ts, data, orig: add(ts, data, orig), timeout,
                                 budget)


class _StopReading(Exception):
    """Raised inside the stream reader to end reading at stop time."""


class _IdleAwareStdin:
    """A binary reader over a file descriptor for :func:`open_capture`: ``read1`` waits with
    ``select`` in short steps, calling ``on_idle`` while nothing comes (so batches are still
    flushed while the producer is quiet) and ending the stream when ``stopping()`` says so
    and nothing more is immediately readable."""

    def __init__(self, fd: int, name: str) -> None:
        self.fd = fd
        self.name = name
        self.on_idle: Callable[[], None] = lambda: None
        self.stopping: Callable[[], bool] = lambda: False

    def read1(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            n = 1 << 20
        while True:
            stop = self.stopping()
            ready, _, _ = select.select([self.fd], [], [], 0 if stop else 0.05)
            if ready:
                return os.read(self.fd, n)
            if stop:
                raise _StopReading()
            self.on_idle()

    read = read1

    def readable(self) -> bool:
        return True


class StreamBackend(Backend):
    """Packets from a pcap/pcapng stream (stdin, a named FIFO, a ``/dev/fd/N`` pipe) or
    file, through ``open_capture``.

    Args:
        source: ``"-"`` (stdin) or a path (a FIFO or pipe is read like stdin).
        fd: the descriptor ``"-"`` reads (stdin, or a duplicate of it when the terminal UI
            takes stdin back for the keyboard).

    Raises:
        kafkasniff.errors.CaptureError: not a capture (one-line message).
    """

    kind = "stream"

    def __init__(self, source: str, fd: int = 0) -> None:
        from kafkasniff.capture.pcapfile import is_regular_file, open_capture, open_path

        #: ``on_secrets(secrets_type, data)`` for the stream's pcapng Decryption Secrets
        #: Blocks (set in the capture process: the dispatcher sends them to every decoder)
        self.on_secrets: Callable[[int, bytes], None] | None = None
        self._file = None
        if source == "-" or not is_regular_file(source):
            # stdin, a named FIFO, a /dev/fd/N pipe: read as stdin is (batches flushed while
            # the writer is quiet, an orderly stop while it writes nothing); a path is
            # opened once (a directory or a missing file: one-line CaptureError)
            if source != "-":
                self._file = open_path(source)
                fd = self._file.fileno()
            self.name = "<stdin>" if source == "-" else source
            self.reader = _IdleAwareStdin(fd, self.name)
            try:
                self.packets = open_capture(self.reader, on_secrets=self._secrets)
            except BaseException:
                if self._file is not None:
                    self._file.close()
                raise
            self.pipe = not stat.S_ISREG(os.fstat(fd).st_mode)
        else:
            self.name = source
            self.reader = None
            self.packets = open_capture(source, on_secrets=self._secrets)
            self.pipe = False
        self._iter = iter(self.packets)
        self.link_type = self.packets.link_types.get(0, 1)
        self.exhausted = False
        #: the stream was read to its end (not cut short by a stop): its accounting is whole
        self.ended = False
        self.issues = self.packets.issues

    def _secrets(self, secrets_type: int, data: bytes) -> None:
        if self.on_secrets is not None:
            self.on_secrets(secrets_type, data)

    def set_hooks(self, on_idle: Callable[[], None], stopping: Callable[[], bool]) -> None:
        """Called in the capture process: what to do while stdin is quiet, and when to end."""
        if self.reader is not None:
            self.reader.on_idle = on_idle
            self.reader.stopping = stopping

    def read(self, add4: Callable, timeout: float, budget: int = 4096) -> int:
        """``add4(ts_ns, data, orig_len, link_type)``: streams may mix link types."""
        n = 0
        it = self._iter
        try:
            for pkt in it:
                add4(pkt.ts_ns, pkt.data, pkt.orig_len, pkt.link_type)
                n += 1
                if n >= budget:
                    return n
        except _StopReading:
            self.exhausted = True
            return n
        self.exhausted = self.ended = True
        return n

    def source_end(self) -> tuple[list, dict | None]:
        """What the end of the stream reports, as ``read`` does at the end of a file: the
        damage met (:class:`~kafkasniff.issues.DecodeIssue` list) and, when the stream was
        read to its end, where its bytes went (:meth:`PacketSource.accounting
        <kafkasniff.capture.pcapfile.PacketSource.accounting>`; ``None`` after a stop)."""
        return list(self.issues), (self.packets.accounting() if self.ended else None)

    def close(self) -> None:
        try:
            self.packets.close()
        except Exception:  # noqa: BLE001
            pass
        if self._file is not None:
            self._file.close()


def open_live(iface: Interface, bpf: list, backend: str = "ring",
              snaplen: int = DEFAULT_SNAPLEN, ring_bytes: int = DEFAULT_RING_BYTES,
              block_bytes: int = DEFAULT_BLOCK_BYTES, fanout: int = 1) -> _PacketSockets:
    """Open the ``ring`` (default) or ``socket`` backend on ``iface`` with ``fanout``
    sockets (one per decoder)."""
    if backend == "socket":
        return SocketBackend(iface, bpf, snaplen, ring_bytes, fanout=fanout)
    return RingBackend(iface, bpf, snaplen, ring_bytes, block_bytes, fanout=fanout)
