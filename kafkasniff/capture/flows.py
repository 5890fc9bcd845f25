"""Which decoder a packet goes to: a symmetric hash of its flow, so that both directions of a
TCP connection reach the same decoder (as the kernel's ``PACKET_FANOUT_HASH`` does for live
capture). Used by ``live -r`` (:mod:`kafkasniff.live.dispatch`), by ``--jobs N``
(:mod:`kafkasniff.parallel.engine`) and by ``spark decode``'s split
(:mod:`kafkasniff.spark.split`): one rule for "the same connection" everywhere. It reads
only link, IP and TCP/UDP headers, so it lives with the capture layer every one of them
may import.
"""

from __future__ import annotations

import struct

try:
    import cython
except ImportError:     # plain Python (Cython is only needed to compile: docs/compiled.md)
    from kafkasniff.cythonstub import cython

__all__ = ["flow_hash", "ip_offset", "partition", "router"]

_u32x2 = struct.Struct("!II").unpack_from
_u16x2 = struct.Struct("!HH").unpack_from
_VLAN = (0x8100, 0x88A8, 0x9100)


def flow_hash(d, off: int, ports: bool = True) -> int:
    """Symmetric hash of the IP addresses and TCP/UDP ports of the packet whose IP header
    starts at ``off`` in ``d`` (bytes-like) — the same for both directions of a connection;
    an unsigned 64-bit int, 0 when not IP or truncated. Ports are left out of the hash for
    IPv4 fragments after the first, and when ``ports`` is false (every connection between
    two hosts hashes alike)."""
    try:
        v = d[off] >> 4
        if v == 4:
            a, b = _u32x2(d, off + 12)
            h = a ^ b
            if ports and d[off + 9] in (6, 17) and not (d[off + 6] & 0x1F or d[off + 7]):
                p, q = _u16x2(d, off + ((d[off] & 0x0F) << 2))
                h ^= (p ^ q) * 0x9E3779B1
        elif v == 6:
            a = int.from_bytes(d[off + 8:off + 24], "big")
            b = int.from_bytes(d[off + 24:off + 40], "big")
            h = (a ^ b) ^ ((a ^ b) >> 64)
            if ports and d[off + 6] in (6, 17):
                p, q = _u16x2(d, off + 40)
                h ^= (p ^ q) * 0x9E3779B1
        else:
            return 0
    except (IndexError, struct.error):
        return 0
    h &= 0xFFFFFFFFFFFFFFFF
    h ^= h >> 29
    h = (h * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    return h ^ (h >> 32)


def ip_offset(link_type: int, d) -> int:
    """Offset in bytes of the IP header in frame ``d`` of pcap ``link_type`` (Ethernet with
    VLAN tags, Linux cooked v1/v2, raw IP, null/loopback); -1: not IP or unknown link."""
    if link_type == 1:
        if len(d) < 14:
            return -1
        et = d[12] << 8 | d[13]
        off = 14
        while et in _VLAN and len(d) >= off + 4:
            et = d[off + 2] << 8 | d[off + 3]
            off += 4
        return off if et in (0x0800, 0x86DD) else -1
    if link_type == 276:
        return 20
    if link_type == 113:
        return 16
    if link_type in (101, 12, 14, 228, 229):
        return 0
    if link_type in (0, 108):
        return 4
    return -1


def partition(link_type: int, d, n: int, ports: bool = True) -> int:
    """The decoder (0..n-1) of frame ``d`` among ``n``: by flow, both directions together
    (``ports`` false: by the two addresses only); 0 for frames that are not IP."""
    off = ip_offset(link_type, d)
    if off < 0:
        return 0
    return flow_hash(d, off, ports) % n


#: from byte 12 of an Ethernet frame: EtherType, IPv4 version/IHL, flags/fragment offset,
#: protocol, addresses, and the ports of a header without options
_eth_ipv4 = struct.Struct("!HBxxxxxHxBxxIIHH").unpack_from


#: the constants of flow_hash, typed unsigned 64-bit in flows.pxd (C arithmetic compiled)
_GOLDEN = 0x9E3779B1
_MIX = 0xBF58476D1CE4E5B9
_MASK64 = 0xFFFFFFFFFFFFFFFF


@cython.locals(p=cython.p_uchar, o=cython.Py_ssize_t, a=cython.ulonglong,
               b=cython.ulonglong, pq=cython.ulonglong, h=cython.ulonglong)
def _route_bytes(d: bytes, off: int, n: int) -> int:
    """Compiled only: the decoder of the Ethernet IPv4 TCP/UDP frame at ``d[off:]`` (at
    least 38 bytes) without IP options and not a later fragment, read byte by byte in C with
    the hash of :func:`flow_hash` in unsigned 64-bit arithmetic (the same value: every
    product is taken modulo 2**64 there too); -1 for any other frame."""
    p = d
    o = off
    if not (p[o + 12] == 0x08 and p[o + 13] == 0x00 and p[o + 14] == 0x45
            and (p[o + 23] == 6 or p[o + 23] == 17) and (p[o + 20] & 0x1F) == 0
            and p[o + 21] == 0):
        return -1
    a = (cython.cast(cython.ulonglong, p[o + 26]) << 24
         | cython.cast(cython.ulonglong, p[o + 27]) << 16
         | cython.cast(cython.ulonglong, p[o + 28]) << 8 | p[o + 29])
    b = (cython.cast(cython.ulonglong, p[o + 30]) << 24
         | cython.cast(cython.ulonglong, p[o + 31]) << 16
         | cython.cast(cython.ulonglong, p[o + 32]) << 8 | p[o + 33])
    pq = (cython.cast(cython.ulonglong, p[o + 34]) << 8 | p[o + 35]) ^ \
        (cython.cast(cython.ulonglong, p[o + 36]) << 8 | p[o + 37])
    h = ((a ^ b) ^ (pq * _GOLDEN)) & _MASK64
    h ^= h >> 29
    h = (h * _MIX) & _MASK64
    return (h ^ (h >> 32)) % cython.cast(cython.ulonglong, n)


def router(n: int, ports: bool = True):
    """``route(link_type, d, off=0) -> decoder`` among ``n`` of the frame ``d[off:]`` (an
    offset instead of a slice: a reader holding whole records routes without copying the
    frame): :func:`partition` (``ports`` false: addresses only), with the hash of an
    Ethernet IPv4 TCP/UDP frame without IP options computed inline (one call instead of
    three: the reader of ``--jobs`` hashes every packet; compiled, from the bytes in C:
    :func:`_route_bytes`)."""
    if cython.compiled:
        def croute(link_type: int, d, off: int = 0) -> int:
            if link_type == 1 and ports and type(d) is bytes and len(d) - off >= 38:
                w = _route_bytes(d, off, n)
                if w >= 0:
                    return w
            return partition(link_type, d[off:] if off else d, n, ports)
        return croute

    def route(link_type: int, d, off: int = 0) -> int:
        if link_type == 1 and ports and len(d) - off >= 38:
            et, vi, frag, proto, a, b, p, q = _eth_ipv4(d, off + 12)
            if et == 0x0800 and vi == 0x45 and (proto == 6 or proto == 17) \
                    and not frag & 0x1FFF:
                h = ((a ^ b) ^ ((p ^ q) * 0x9E3779B1)) & 0xFFFFFFFFFFFFFFFF
                h ^= h >> 29
                h = (h * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
                return (h ^ (h >> 32)) % n
        return partition(link_type, d[off:] if off else d, n, ports)
    return route
