"""Link-layer, IPv4/IPv6 and TCP header parsing: :class:`CapturedPacket` -> :class:`TcpSegment`.

This is the hot path of the whole tool (one call per captured packet), so it uses
precompiled :class:`struct.Struct` ``unpack_from`` calls, no intermediate objects, a fused
fast path for the common Ethernet + IPv4 + TCP frame, and module-level :class:`Skipped`
singletons (one per reason) for everything that carries no TCP segment.

Link types (LINKTYPE_* values, https://www.tcpdump.org/linktypes.html):

* 1 Ethernet, with 802.1Q (0x8100) and QinQ (0x88a8, 0x9100) tags nested to any depth;
* 113 Linux cooked v1 (16-byte header, protocol at offset 14), 276 Linux cooked v2 (20-byte
  header, protocol at offset 0);
* 0 BSD null/loopback (4-byte address family in the capturing host's byte order: both orders
  accepted; 2 is IPv4, 24/28/30 are IPv6), 108 OpenBSD loopback (family in network order);
* 101 raw IP, and its aliases 12 and 14 (the IP version nibble decides), 228 IPv4, 229 IPv6.

IP: IPv4 options are skipped; the IPv4 total length / IPv6 payload length trims link-layer
padding and trailers (an Ethernet frame padded to 60 bytes adds nothing to the payload); a
length of 0 (TSO/GSO captures, IPv6 jumbograms) means "up to the end of the frame". IPv6
extension headers hop-by-hop (0), routing (43), destination options (60), mobility (135),
HIP (139), shim6 (140) and AH (51, with its own length rule) are walked. IPv4 fragments (MF set
or a fragment offset) and IPv6 fragment headers (other than atomic fragments, RFC 6946) of TCP
are skipped as ``ip_fragment``; fragments of other protocols count as ``non_tcp``.

TCP: options are skipped by the data offset; ``missing_bytes`` is the number of payload bytes
the IP length announces beyond the captured bytes (snaplen cut), which the reassembler turns
into a gap.

Skip reasons (``Skipped.reason``, also counter names):

* ``non_ip`` - the link layer carries something else (ARP, LLDP, ...);
* ``non_tcp`` - IP, but not TCP (UDP, ICMP, ESP, ...);
* ``ip_fragment`` - a fragment of a TCP packet (not reassembled);
* ``unsupported_link_type`` - a link type not listed above;
* ``malformed`` - inconsistent lengths, wrong IP version, bad TCP data offset; also an IP
  length longer than the frame was on the wire;
* ``truncated_header`` - the capture ends before the end of the TCP header (snaplen too
  small, or a runt frame).
"""

from __future__ import annotations

import struct

from kafkasniff.capture.types import CapturedPacket, Skipped, TcpSegment

try:
    import cython
except ImportError:     # plain Python (Cython is only needed to compile: docs/compiled.md)
    from kafkasniff.cythonstub import cython

__all__ = [
    "SKIP_IP_FRAGMENT",
    "SKIP_MALFORMED",
    "SKIP_NON_IP",
    "SKIP_NON_TCP",
    "SKIP_REASONS",
    "SKIP_TRUNCATED_HEADER",
    "SKIP_UNSUPPORTED_LINK_TYPE",
    "SUPPORTED_LINK_TYPES",
    "decode_frame",
    "decode_packet",
]

SKIP_NON_IP = Skipped("non_ip")
SKIP_NON_TCP = Skipped("non_tcp")
SKIP_IP_FRAGMENT = Skipped("ip_fragment")
SKIP_UNSUPPORTED_LINK_TYPE = Skipped("unsupported_link_type")
SKIP_MALFORMED = Skipped("malformed")
SKIP_TRUNCATED_HEADER = Skipped("truncated_header")
#: Every reason a packet is skipped, in a stable order (for counters).
SKIP_REASONS = ("non_ip", "non_tcp", "ip_fragment", "unsupported_link_type", "malformed",
                "truncated_header")

LINKTYPE_NULL = 0
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW_12 = 12
LINKTYPE_RAW_14 = 14
LINKTYPE_RAW = 101
LINKTYPE_LOOP = 108
LINKTYPE_LINUX_SLL = 113
LINKTYPE_IPV4 = 228
LINKTYPE_IPV6 = 229
LINKTYPE_LINUX_SLL2 = 276
#: Link types :func:`decode_frame` understands.
SUPPORTED_LINK_TYPES = frozenset({
    LINKTYPE_NULL, LINKTYPE_ETHERNET, LINKTYPE_RAW_12, LINKTYPE_RAW_14, LINKTYPE_RAW,
    LINKTYPE_LOOP, LINKTYPE_LINUX_SLL, LINKTYPE_IPV4, LINKTYPE_IPV6, LINKTYPE_LINUX_SLL2,
})

_ETH_IPV4 = 0x0800
_ETH_IPV6 = 0x86DD
_ETH_VLAN = frozenset({0x8100, 0x88A8, 0x9100})
_AF_INET6 = frozenset({24, 28, 30})   # BSD, FreeBSD/DragonFly, Darwin
_IPPROTO_TCP = 6
# IPv6 extension headers with the (len + 1) * 8 length rule
_IPV6_EXT = frozenset({0, 43, 60, 135, 139, 140})
_IPV6_AH = 51
_IPV6_FRAGMENT = 44

_u16 = struct.Struct("!H").unpack_from
_u32le = struct.Struct("<I").unpack_from
_u32be = struct.Struct("!I").unpack_from
# Ethernet (no tag) + IPv4 fixed header: ethertype, ver_ihl, total_len, frag, proto, src, dst
_eth_ipv4 = struct.Struct("!12xHBxH2xHxB2x4s4s").unpack_from
# IPv4 fixed header: ver_ihl, total_len, frag, proto, src, dst
_ipv4 = struct.Struct("!BxH2xHxB2x4s4s").unpack_from
# IPv6 fixed header: ver_tc_flow (first byte), payload_len, next_header, src, dst
_ipv6 = struct.Struct("!B3xHBx16s16s").unpack_from
# TCP: src_port, dst_port, seq, ack, data offset byte, flags byte
_tcp = struct.Struct("!HHIIBB").unpack_from

# TcpSegment is a frozen slotted dataclass: its generated __init__ sets each of its ten fields
# through object.__setattr__ (about 1 us of the 3 us a packet costs here). The fast path
# fills the slots directly instead (the same object: tests/test_compiled.py checks): through
# the slot descriptors' setters in Python, through inline C functions of packet.pxd when
# compiled.
_SEGMENT_SLOTS = ("ts_ns", "src_ip", "src_port", "dst_ip", "dst_port", "seq", "ack", "flags",
                  "payload", "missing_bytes")
if not cython.compiled:
    _new = object.__new__   # compiled: slotstore.new_object, in the .pxd
    (_s_ts, _s_src_ip, _s_src_port, _s_dst_ip, _s_dst_port, _s_seq, _s_ack, _s_flags,
     _s_payload, _s_missing) = (getattr(TcpSegment, _f).__set__ for _f in _SEGMENT_SLOTS)

    def _sub(data: bytes, start: int, end: int) -> bytes:
        """``data[start:end]`` (compiled: a ``bytes`` made from the buffer, packet.pxd)."""
        return data[start:end]
else:
    # the byte offsets of the slots the setters of the .pxd store into
    (
        _s_o_ts, _s_o_src_ip, _s_o_src_port, _s_o_dst_ip, _s_o_dst_port, _s_o_seq, _s_o_ack,
        _s_o_flags, _s_o_payload, _s_o_missing
    ) = (slot_offset(TcpSegment, _f) for _f in _SEGMENT_SLOTS)  # noqa: F821 - in the .pxd


def decode_packet(pkt: CapturedPacket) -> TcpSegment | Skipped:
    """Parse one captured frame down to its TCP segment.

    Args:
        pkt: a captured frame (any supported ``link_type``).

    Returns:
        A :class:`TcpSegment` (packed 4- or 16-byte addresses, raw seq/ack, flag bits, the
        captured payload and ``missing_bytes``), or one of the module's :class:`Skipped`
        singletons. Never raises on packet content.
    """
    return decode_frame(pkt.link_type, pkt.data, pkt.orig_len, pkt.ts_ns)


@cython.locals(caplen=cython.Py_ssize_t, etype=cython.long, ver_ihl=cython.long,
               total_len=cython.long, frag=cython.long, proto=cython.long, doff=cython.long,
               hend=cython.Py_ssize_t, ip_end=cython.Py_ssize_t)
def decode_frame(link_type: int, data: bytes, orig_len: int, ts_ns: int) -> TcpSegment | Skipped:
    """:func:`decode_packet` on unpacked fields (what a live capture loop has at hand).

    ``orig_len`` is the frame's length on the wire (``len(data)`` if not cut by snaplen).
    """
    if link_type == 1:
        caplen = len(data)
        if caplen >= 54:
            # fast path: untagged Ethernet + IPv4 without options + TCP, fully captured;
            # everything else (and every error) takes the general path below
            if cython.compiled and type(data) is bytes:
                seg = _fast_eth_ipv4_tcp(data, caplen, ts_ns)
                if seg is not None:
                    return seg
                return _ethernet(data, orig_len, ts_ns)
            etype, ver_ihl, total_len, frag, proto, src, dst = _eth_ipv4(data, 0)
            if (etype == 0x0800 and ver_ihl == 0x45 and proto == 6 and not frag & 0x3FFF
                    and total_len >= 40 and total_len + 14 <= caplen):
                sport, dport, seq, ack, doff, flags = _tcp(data, 34)
                hend = 34 + ((doff >> 4) << 2)
                ip_end = 14 + total_len
                if doff >= 0x50 and hend <= ip_end:
                    seg = _new(TcpSegment)
                    _s_ts(seg, ts_ns)
                    _s_src_ip(seg, src)
                    _s_src_port(seg, sport)
                    _s_dst_ip(seg, dst)
                    _s_dst_port(seg, dport)
                    _s_seq(seg, seq)
                    _s_ack(seg, ack)
                    _s_flags(seg, flags)
                    _s_payload(seg, data[hend:ip_end])
                    _s_missing(seg, 0)
                    return seg
        return _ethernet(data, orig_len, ts_ns)
    if link_type == 113:
        if len(data) < 16:
            return SKIP_TRUNCATED_HEADER
        return _ethertype(_u16(data, 14)[0], data, 16, orig_len, ts_ns)
    if link_type == 276:
        if len(data) < 20:
            return SKIP_TRUNCATED_HEADER
        return _ethertype(_u16(data, 0)[0], data, 20, orig_len, ts_ns)
    if link_type == 101 or link_type == 12 or link_type == 14:
        if not data:
            return SKIP_TRUNCATED_HEADER
        version = data[0] >> 4
        if version == 4:
            return _ipv4_tcp(data, 0, orig_len, ts_ns)
        if version == 6:
            return _ipv6_tcp(data, 0, orig_len, ts_ns)
        return SKIP_NON_IP
    if link_type == 228:
        return _ipv4_tcp(data, 0, orig_len, ts_ns)
    if link_type == 229:
        return _ipv6_tcp(data, 0, orig_len, ts_ns)
    if link_type == 0 or link_type == 108:
        if len(data) < 4:
            return SKIP_TRUNCATED_HEADER
        if link_type == 108:
            family = _u32be(data, 0)[0]
        else:
            family = _u32le(data, 0)[0]
            if family > 0xFFFF:           # written by a big-endian host
                family = _u32be(data, 0)[0]
        if family == 2:
            return _ipv4_tcp(data, 4, orig_len, ts_ns)
        if family in _AF_INET6:
            return _ipv6_tcp(data, 4, orig_len, ts_ns)
        return SKIP_NON_IP
    return SKIP_UNSUPPORTED_LINK_TYPE


@cython.locals(p=cython.p_uchar, caplen=cython.Py_ssize_t, total_len=cython.Py_ssize_t,
               doff=cython.long, hend=cython.Py_ssize_t, ip_end=cython.Py_ssize_t)
def _fast_eth_ipv4_tcp(data: bytes, caplen: int, ts_ns: int) -> TcpSegment | None:
    """Compiled only: :func:`decode_frame`'s fast path read byte by byte in C (no
    ``struct`` call, no tuple): the :class:`TcpSegment` of an untagged Ethernet IPv4 frame
    without options carrying a whole TCP header, ``caplen`` (at least 54) bytes long;
    ``None`` for any other frame (the general path decides)."""
    p = data
    if not (p[12] == 0x08 and p[13] == 0x00 and p[14] == 0x45 and p[23] == 6
            and (p[20] & 0x3F) == 0 and p[21] == 0):
        return None
    total_len = p[16] << 8 | p[17]
    if total_len < 40 or total_len + 14 > caplen:
        return None
    doff = p[46]
    hend = 34 + ((doff >> 4) << 2)
    ip_end = 14 + total_len
    if doff < 0x50 or hend > ip_end:
        return None
    seg = _new(TcpSegment)
    _s_ts(seg, ts_ns)
    _s_src_ip(seg, _sub(data, 26, 30))
    _s_src_port(seg, p[34] << 8 | p[35])
    _s_dst_ip(seg, _sub(data, 30, 34))
    _s_dst_port(seg, p[36] << 8 | p[37])
    _s_seq(seg, cython.cast(cython.ulonglong, p[38]) << 24 | p[39] << 16 | p[40] << 8 | p[41])
    _s_ack(seg, cython.cast(cython.ulonglong, p[42]) << 24 | p[43] << 16 | p[44] << 8 | p[45])
    _s_flags(seg, p[47])
    _s_payload(seg, _sub(data, hend, ip_end))
    _s_missing(seg, 0)
    return seg


def _ethernet(data: bytes, orig_len: int, ts_ns: int) -> TcpSegment | Skipped:
    if len(data) < 14:
        return SKIP_TRUNCATED_HEADER
    return _ethertype(_u16(data, 12)[0], data, 14, orig_len, ts_ns)


def _ethertype(etype: int, data: bytes, off: int, orig_len: int,
               ts_ns: int) -> TcpSegment | Skipped:
    """Dispatch on an EtherType whose payload starts at ``off``, unwrapping VLAN tags."""
    while etype in _ETH_VLAN:
        if len(data) < off + 4:
            return SKIP_TRUNCATED_HEADER
        etype = _u16(data, off + 2)[0]
        off += 4
    if etype == _ETH_IPV4:
        return _ipv4_tcp(data, off, orig_len, ts_ns)
    if etype == _ETH_IPV6:
        return _ipv6_tcp(data, off, orig_len, ts_ns)
    return SKIP_NON_IP


def _ipv4_tcp(data: bytes, off: int, orig_len: int, ts_ns: int) -> TcpSegment | Skipped:
    caplen = len(data)
    if caplen < off + 20:
        return SKIP_TRUNCATED_HEADER
    ver_ihl, total_len, frag, proto, src, dst = _ipv4(data, off)
    if ver_ihl >> 4 != 4:
        return SKIP_MALFORMED
    ihl = (ver_ihl & 0x0F) << 2
    if ihl < 20:
        return SKIP_MALFORMED
    if total_len:
        if total_len < ihl:
            return SKIP_MALFORMED
        ip_end = off + total_len
    else:                                  # TSO/GSO: length not filled in
        ip_end = max(orig_len, caplen)
        if ip_end < off + ihl:
            ip_end = off + ihl
    if proto != _IPPROTO_TCP:
        return SKIP_NON_TCP
    if frag & 0x3FFF:                      # MF flag or a fragment offset
        return SKIP_IP_FRAGMENT
    return _tcp_segment(data, off + ihl, ip_end, orig_len, src, dst, ts_ns)


def _ipv6_tcp(data: bytes, off: int, orig_len: int, ts_ns: int) -> TcpSegment | Skipped:
    caplen = len(data)
    if caplen < off + 40:
        return SKIP_TRUNCATED_HEADER
    ver, payload_len, nxt, src, dst = _ipv6(data, off)
    if ver >> 4 != 6:
        return SKIP_MALFORMED
    if payload_len:
        ip_end = off + 40 + payload_len
    else:                                  # jumbogram (RFC 2675) or TSO/GSO
        ip_end = max(orig_len, caplen, off + 40)
    p = off + 40
    while nxt != _IPPROTO_TCP:
        if nxt in _IPV6_EXT:
            hlen_rule = 8
        elif nxt == _IPV6_AH:
            hlen_rule = 4
        elif nxt == _IPV6_FRAGMENT:
            if p + 8 > ip_end:
                return SKIP_MALFORMED
            if p + 8 > caplen:
                return SKIP_TRUNCATED_HEADER
            nxt = data[p]
            if _u16(data, p + 2)[0] & 0xFFF9:  # offset or M flag: a real fragment (RFC 6946)
                return SKIP_IP_FRAGMENT if nxt == _IPPROTO_TCP else SKIP_NON_TCP
            p += 8
            continue
        else:
            return SKIP_NON_TCP
        if p + 2 > ip_end:
            return SKIP_MALFORMED
        if p + 2 > caplen:
            return SKIP_TRUNCATED_HEADER
        nxt = data[p]
        if hlen_rule == 8:
            p += (data[p + 1] + 1) << 3
        else:
            p += (data[p + 1] + 2) << 2
    return _tcp_segment(data, p, ip_end, orig_len, src, dst, ts_ns)


def _tcp_segment(data: bytes, off: int, ip_end: int, orig_len: int, src: bytes, dst: bytes,
                 ts_ns: int) -> TcpSegment | Skipped:
    """The TCP segment at ``off`` whose IP packet ends at ``ip_end`` (frame offsets)."""
    caplen = len(data)
    if ip_end > caplen:
        # snaplen cut (or an IP length longer than the frame on the wire: malformed)
        if ip_end > orig_len:
            return SKIP_MALFORMED
        missing = ip_end - caplen
        ip_end = caplen
    else:
        missing = 0
    if off + 20 > ip_end:
        return SKIP_TRUNCATED_HEADER if off + 20 <= ip_end + missing else SKIP_MALFORMED
    sport, dport, seq, ack, doff, flags = _tcp(data, off)
    hlen = (doff >> 4) << 2
    if hlen < 20:
        return SKIP_MALFORMED
    hend = off + hlen
    if hend > ip_end:
        return SKIP_TRUNCATED_HEADER if hend <= ip_end + missing else SKIP_MALFORMED
    return TcpSegment(ts_ns, src, sport, dst, dport, seq, ack, flags, data[hend:ip_end], missing)
