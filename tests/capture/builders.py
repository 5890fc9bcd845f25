"""Test-only builders for capture files (pcap, pcapng) and frames, written by hand from the
format specs so that they do not share code with the reader under test."""

from __future__ import annotations

import struct

# ---------------------------------------------------------------------------- pcap

def pcap(records, *, endian="<", nano=False, linktype=1, snaplen=262144) -> bytes:
    """records: iterable of (sec, frac, data[, orig_len])."""
    out = [struct.pack(endian + "IHHiIII", 0xA1B23C4D if nano else 0xA1B2C3D4, 2, 4, 0, 0, snaplen,
                       linktype)]
    for rec in records:
        sec, frac, data = rec[:3]
        orig = rec[3] if len(rec) > 3 else len(data)
        out.append(struct.pack(endian + "IIII", sec, frac, len(data), orig))
        out.append(data)
    return b"".join(out)


def pcap_record_offsets(blob: bytes, endian="<") -> list[int]:
    """File offsets where each record ends (a clean cut point), header end included."""
    offs = [24]
    pos = 24
    while pos < len(blob):
        caplen = struct.unpack_from(endian + "I", blob, pos + 8)[0]
        pos += 16 + caplen
        offs.append(pos)
    return offs


# ---------------------------------------------------------------------------- pcapng

def _pad4(b: bytes) -> bytes:
    return b + b"\0" * (-len(b) % 4)


def option(e: str, code: int, value: bytes) -> bytes:
    return struct.pack(e + "HH", code, len(value)) + _pad4(value)


def end_of_options(e: str) -> bytes:
    return struct.pack(e + "HH", 0, 0)


def block(e: str, btype: int, body: bytes) -> bytes:
    body = _pad4(body)
    total = 12 + len(body)
    return struct.pack(e + "II", btype, total) + body + struct.pack(e + "I", total)


def shb(e: str, options: bytes = b"") -> bytes:
    return block(e, 0x0A0D0D0A, struct.pack(e + "IHHq", 0x1A2B3C4D, 1, 0, -1) + options)


def idb(e: str, linktype: int, snaplen: int = 0, tsresol: int | None = None,
        tsoffset: int | None = None, name: bytes | None = None) -> bytes:
    opts = b""
    if name is not None:
        opts += option(e, 2, name)
    if tsresol is not None:
        opts += option(e, 9, bytes([tsresol]))
    if tsoffset is not None:
        opts += option(e, 14, struct.pack(e + "q", tsoffset))
    if opts:
        opts += end_of_options(e)
    return block(e, 1, struct.pack(e + "HHI", linktype, 0, snaplen) + opts)


def epb(e: str, iface: int, ts: int, data: bytes, orig_len: int | None = None,
        options: bytes = b"") -> bytes:
    orig = len(data) if orig_len is None else orig_len
    body = struct.pack(e + "IIIII", iface, ts >> 32, ts & 0xFFFFFFFF, len(data), orig)
    return block(e, 6, body + _pad4(data) + options)


def opb(e: str, iface: int, ts: int, data: bytes, orig_len: int | None = None,
        drops: int = 3) -> bytes:
    """Obsolete Packet Block (type 2): 16-bit interface id, 16-bit drops count."""
    orig = len(data) if orig_len is None else orig_len
    body = struct.pack(e + "HHIIII", iface, drops, ts >> 32, ts & 0xFFFFFFFF, len(data), orig)
    return block(e, 2, body + _pad4(data))


def spb(e: str, data: bytes, orig_len: int | None = None) -> bytes:
    orig = len(data) if orig_len is None else orig_len
    return block(e, 3, struct.pack(e + "I", orig) + _pad4(data))


def nrb(e: str) -> bytes:
    rec = struct.pack(e + "HH", 1, 8) + bytes([10, 0, 0, 1]) + b"kafk"
    return block(e, 4, rec + struct.pack(e + "HH", 0, 0))


def isb(e: str, iface: int = 0) -> bytes:
    return block(e, 5, struct.pack(e + "III", iface, 0, 0))


def custom_block(e: str) -> bytes:
    return block(e, 0x00000BAD, struct.pack(e + "I", 32473) + b"private data")


def dsb(e: str) -> bytes:
    secret = b"CLIENT_RANDOM 00 11\n"
    return block(e, 0x0000000A, struct.pack(e + "II", 0x544C534B, len(secret)) + secret)


def pcapng_block_offsets(blob: bytes) -> list[int]:
    """Offsets where each block ends (clean cut points), following SHB byte orders."""
    offs = []
    pos = 0
    e = "<"
    while pos < len(blob):
        if blob[pos:pos + 4] == b"\x0a\x0d\x0d\x0a":
            e = "<" if blob[pos + 8:pos + 12] == b"\x4d\x3c\x2b\x1a" else ">"
        pos += struct.unpack_from(e + "I", blob, pos + 4)[0]
        offs.append(pos)
    return offs


# ---------------------------------------------------------------------------- frames

def tcp_header(sport=40000, dport=9092, seq=1000, ack=2000, flags=0x18, options=b"",
               doff: int | None = None) -> bytes:
    options = _pad4(options)
    if doff is None:
        doff = (20 + len(options)) // 4
    head = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, doff << 4, flags, 65535, 0, 0)
    return head + options


def ipv4(src: bytes, dst: bytes, payload: bytes, *, proto=6, total_len: int | None = None,
         flags_frag=0x4000, options=b"", version=4, ihl: int | None = None) -> bytes:
    options = _pad4(options)
    if ihl is None:
        ihl = (20 + len(options)) // 4
    if total_len is None:
        total_len = 20 + len(options) + len(payload)
    return struct.pack("!BBHHHBBH4s4s", (version << 4) | ihl, 0, total_len, 1, flags_frag, 64,
                       proto, 0, src, dst) + options + payload


def ipv6(src: bytes, dst: bytes, payload: bytes, *, nh=6, payload_len: int | None = None) -> bytes:
    if payload_len is None:
        payload_len = len(payload)
    return struct.pack("!IHBB16s16s", 6 << 28, payload_len, nh, 64, src, dst) + payload


def ext_header(nh: int, length_units: int = 0) -> bytes:
    """A (len + 1) * 8 byte extension header (hop-by-hop, routing, destination options)
    filled with one PadN option."""
    n = 8 * (length_units + 1)
    return bytes([nh, length_units, 1, n - 4]) + b"\0" * (n - 4)


def ah_header(nh: int, payload_len_field: int = 4) -> bytes:
    """An IPsec AH header: (len + 2) * 4 bytes (len 4 = 24 bytes: 12 fixed + 12 ICV)."""
    n = (payload_len_field + 2) * 4
    fixed = bytes([nh, payload_len_field]) + b"\0\0" + struct.pack("!II", 0x1234, 1)
    return fixed + b"\xaa" * (n - 12)


def frag_header(nh: int, offset_units: int = 0, more: bool = False) -> bytes:
    return bytes([nh, 0]) + struct.pack("!HI", (offset_units << 3) | int(more), 0xBEEF)


def ether(payload: bytes, ethertype=0x0800, tags: tuple[tuple[int, int], ...] = ()) -> bytes:
    """tags: (tpid, vlan_id) outermost first."""
    head = b"\x02\0\0\0\0\x02" + b"\x02\0\0\0\0\x01"
    for tpid, vid in tags:
        head += struct.pack("!H", tpid)
        head += struct.pack("!H", vid)
    return head + struct.pack("!H", ethertype) + payload


def sll(payload: bytes, proto=0x0800) -> bytes:
    return struct.pack("!HHH8sH", 0, 1, 6, b"\x02\0\0\0\0\x01\0\0", proto) + payload


def sll2(payload: bytes, proto=0x0800) -> bytes:
    return struct.pack("!HHIHBB8s", proto, 0, 2, 1, 0, 6, b"\x02\0\0\0\0\x01\0\0") + payload


def null_loop(payload: bytes, family: int, endian: str) -> bytes:
    return struct.pack(endian + "I", family) + payload
