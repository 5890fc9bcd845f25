"""Interfaces and BPF filters for live capture (off the hot path).

Interfaces are resolved with the standard library (``socket.if_nametoindex``, the ARPHRD type
in ``/sys/class/net/IFACE/type``) and listed with scapy (addresses for ``--list-interfaces``
and for the "unknown interface" error). Filters are compiled by libpcap through scapy's
``compile_filter`` with a *dead* handle of the capture's link type, so compiling needs no
privilege; the classic BPF program is then adjusted here before it is attached with
``SO_ATTACH_FILTER``:

* every ``ret #k`` with ``k != 0`` gets our snap length: libpcap compiles with scapy's
  65535-byte snaplen, which would cut the 65549-byte frames of loopback traffic (loopback MTU
  65536 + Ethernet header);
* cooked captures (``-i any``, or a device without a supported link-layer header) receive
  packets from the network header on (``SOCK_DGRAM``), while libpcap compiled the program for
  a 20-byte ``LINKTYPE_LINUX_SLL2`` header: absolute and indexed loads are shifted by 20 and
  loads of the SLL2 protocol, ifindex, hatype and packet-type fields become the kernel's
  ancillary loads (``SKF_AD_*``), as libpcap itself does (``fix_offset`` in pcap-linux.c);
* on ``-i any`` and on the loopback device a prefix rejects loopback's outgoing copies (each
  loopback packet is seen once leaving and once arriving; libpcap drops the outgoing one in
  user space). The socket option ``PACKET_IGNORE_OUTGOING`` would do it for one socket, but
  not for the sockets of a ``PACKET_FANOUT`` group (the group's hook is the one the kernel
  checks), so the filter does it.

Errors are :class:`LiveError` subclasses whose message is the one-line text the CLI prints.
"""

from __future__ import annotations

import ctypes
import socket
import struct
from dataclasses import dataclass

from kafkasniff.errors import KafkaSniffError

__all__ = [
    "BadFilter",
    "Interface",
    "LiveError",
    "UnknownInterface",
    "attach_filter",
    "build_filter",
    "compile_bpf",
    "interface_names",
    "list_interfaces",
    "resolve_interface",
]

# LINKTYPE_* values we produce
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101
LINKTYPE_LINUX_SLL2 = 276
SLL2_HDR_LEN = 20

# ARPHRD_* (linux/if_arp.h) -> (LINKTYPE written to packets, DLT given to pcap_compile)
_ARPHRD = {
    1: (LINKTYPE_ETHERNET, 1),       # ARPHRD_ETHER
    6: (LINKTYPE_ETHERNET, 1),       # ARPHRD_IEEE802
    772: (LINKTYPE_ETHERNET, 1),     # ARPHRD_LOOPBACK: Linux loopback has an Ethernet header
    65534: (LINKTYPE_RAW, 12),       # ARPHRD_NONE (tun, wireguard): raw IP, DLT_RAW is 12
}
ARPHRD_LOOPBACK = 772

# classic BPF (linux/filter.h)
BPF_LD, BPF_LDX, BPF_RET = 0x00, 0x01, 0x06
BPF_ABS, BPF_IND, BPF_MSH = 0x20, 0x40, 0xA0
BPF_K = 0x00
BPF_W, BPF_H, BPF_B = 0x00, 0x08, 0x10
BPF_JMP, BPF_JEQ = 0x05, 0x10
SKF_AD_OFF = -0x1000
SKF_AD_PROTOCOL, SKF_AD_PKTTYPE, SKF_AD_IFINDEX, SKF_AD_HATYPE = 0, 4, 8, 28
PACKET_OUTGOING = 4
SO_ATTACH_FILTER = 26
BPF_MAXINSNS = 4096

_insn = struct.Struct("<HBBI")   # struct sock_filter { u16 code; u8 jt; u8 jf; u32 k; }


class LiveError(KafkaSniffError):
    """A live capture cannot start; the message is one line saying what to do."""


class UnknownInterface(LiveError):
    """The interface does not exist (the message lists the existing ones)."""


class BadFilter(LiveError):
    """libpcap rejected the filter expression (the message carries libpcap's words)."""


@dataclass(frozen=True)
class Interface:
    """A capture interface.

    Attributes:
        name: the name given (``"any"`` for all interfaces).
        index: kernel ifindex (0 for ``any``).
        arphrd: ARPHRD type (``/sys/class/net/NAME/type``), -1 for ``any``.
        link_type: LINKTYPE_* of the frames we produce (1 Ethernet, 101 raw IP, 276 SLL2).
        dlt: the DLT libpcap compiles filters for.
        cooked: read with ``SOCK_DGRAM`` and an SLL2 header built from the packet's
            address (``any`` and devices with another link-layer header).
        loopback: the loopback device (its outgoing copies are skipped).
        mtu: the device MTU (0 if unknown).
    """

    name: str
    index: int
    arphrd: int
    link_type: int
    dlt: int
    cooked: bool
    loopback: bool
    mtu: int = 0


def interface_names() -> list[str]:
    """Names of the interfaces that exist now (kernel order), plus ``any``."""
    return [name for _, name in socket.if_nameindex()] + ["any"]


def list_interfaces() -> list[dict]:
    """Every interface with its index, type, state and addresses (scapy's view), for
    ``--list-interfaces`` and error messages. Falls back to names only without scapy."""
    out = []
    addrs: dict[str, list[str]] = {}
    try:
        from scapy.all import conf as scapy_conf
        for iface in scapy_conf.ifaces.values():
            ips = [a for v in (getattr(iface, "ips", {}) or {}).values() for a in v]
            addrs[iface.name] = ips
    except Exception:  # noqa: BLE001 - listing must never fail
        pass
    for index, name in socket.if_nameindex():
        arphrd = _sysfs_int(name, "type", -1)
        state = _sysfs_str(name, "operstate")
        out.append({"index": index, "name": name, "type": _arphrd_name(arphrd),
                    "state": state, "addresses": addrs.get(name, [])})
    out.append({"index": 0, "name": "any", "type": "cooked (all)", "state": "",
                "addresses": []})
    return out


def _arphrd_name(arphrd: int) -> str:
    return {1: "ethernet", 772: "loopback", 65534: "none (raw IP)", 6: "ieee802"}.get(
        arphrd, f"arphrd {arphrd}")


def _sysfs_str(name: str, attr: str) -> str:
    try:
        with open(f"/sys/class/net/{name}/{attr}") as f:
            return f.read().strip()
    except OSError:
        return ""


def _sysfs_int(name: str, attr: str, default: int) -> int:
    try:
        return int(_sysfs_str(name, attr))
    except ValueError:
        return default


def resolve_interface(name: str) -> Interface:
    """The :class:`Interface` called ``name`` (``any`` included).

    Raises:
        UnknownInterface: no such interface; the message lists the existing ones.
    """
    if name == "any":
        return Interface("any", 0, -1, LINKTYPE_LINUX_SLL2, LINKTYPE_LINUX_SLL2, True, False)
    try:
        index = socket.if_nametoindex(name)
    except OSError:
        raise UnknownInterface(
            f"no interface named {name!r}; interfaces: {', '.join(interface_names())} "
            f"(kafkasniff live --list-interfaces shows their addresses)") from None
    arphrd = _sysfs_int(name, "type", -1)
    mtu = _sysfs_int(name, "mtu", 0)
    known = _ARPHRD.get(arphrd)
    if known is None:       # another link-layer header: read it cooked, as libpcap does
        return Interface(name, index, arphrd, LINKTYPE_LINUX_SLL2, LINKTYPE_LINUX_SLL2, True,
                         False, mtu)
    return Interface(name, index, arphrd, known[0], known[1], False,
                     arphrd == ARPHRD_LOOPBACK, mtu)


def loopback_index() -> int:
    """ifindex of the first loopback device (0 if none)."""
    for index, name in socket.if_nameindex():
        if _sysfs_int(name, "type", -1) == ARPHRD_LOOPBACK:
            return index
    return 0


# --------------------------------------------------------------------------- compiling


def _pcap_reason(msg: str, expression: str) -> str:
    """libpcap's reason out of scapy's ``Failed to compile filter expression '<expr>'
    (<reason>)``. The expression is cut off by its known ``repr``, not by searching for
    parentheses, which the expression itself may contain (``tcp and (port 1 or``)."""
    head = f"Failed to compile filter expression {expression!r} ("
    if msg.startswith(head) and msg.endswith(")"):
        return msg[len(head):-1]
    return msg


def compile_bpf(expression: str, dlt: int) -> list[tuple[int, int, int, int]]:
    """Compile a tcpdump filter expression for link type ``dlt`` with libpcap (via scapy;
    no privilege needed). Returns the instructions as ``(code, jt, jf, k)``.

    Raises:
        BadFilter: libpcap rejected it (its message is kept), or libpcap is missing.
    """
    try:
        from scapy.arch.common import compile_filter
        from scapy.error import Scapy_Exception
    except ImportError as exc:  # pragma: no cover - scapy is a dependency of live capture
        raise BadFilter(f"cannot compile BPF filters: scapy is not installed ({exc})") from None
    try:
        prog = compile_filter(expression, linktype=dlt)
    except Scapy_Exception as exc:
        raise BadFilter(f"bad filter {expression!r}: {_pcap_reason(str(exc), expression)}"
                        ) from None
    except (ImportError, OSError) as exc:
        raise BadFilter(f"cannot compile BPF filters: libpcap unavailable ({exc})") from None
    n = prog.bf_len
    raw = ctypes.string_at(prog.bf_insns, n * 8)
    return [_insn.unpack_from(raw, i * 8) for i in range(n)]


def _fix_cooked(insns: list[tuple[int, int, int, int]]) -> list[tuple[int, int, int, int]]:
    """Rebase a program compiled for LINKTYPE_LINUX_SLL2 onto packets that start at the
    network header (SOCK_DGRAM), like libpcap's ``fix_offset``."""
    out = []
    for code, jt, jf, k in insns:
        cls = code & 0x07
        mode = code & 0xE0
        if cls in (BPF_LD, BPF_LDX) and mode in (BPF_ABS, BPF_IND, BPF_MSH):
            sk = k - (1 << 32) if k >= 1 << 31 else k
            if sk >= SKF_AD_OFF and sk < 0:
                pass                                   # already an ancillary load
            elif k >= SLL2_HDR_LEN:
                k -= SLL2_HDR_LEN
            elif mode == BPF_ABS and k == 0:
                k = (SKF_AD_OFF + SKF_AD_PROTOCOL) & 0xFFFFFFFF
            elif mode == BPF_ABS and k == 4:
                k = (SKF_AD_OFF + SKF_AD_IFINDEX) & 0xFFFFFFFF
            elif mode == BPF_ABS and k == 8:
                k = (SKF_AD_OFF + SKF_AD_HATYPE) & 0xFFFFFFFF
            elif mode == BPF_ABS and k == 10:
                k = (SKF_AD_OFF + SKF_AD_PKTTYPE) & 0xFFFFFFFF
            else:
                raise BadFilter("this filter reads link-layer header fields the kernel cannot "
                                "filter on for cooked captures (-i any); use a filter on IP/TCP "
                                "fields")
        out.append((code, jt, jf, k))
    return out


def build_filter(expression: str | None, iface: Interface, snaplen: int,
                 skip_loopback_outgoing: int = 0) -> list[tuple[int, int, int, int]]:
    """The classic BPF program to attach for ``expression`` on ``iface``.

    ``None`` or an empty expression accepts everything (still with our snap length).
    ``skip_loopback_outgoing``: ifindex of loopback whose outgoing copies are rejected
    (``-i any``). Every accepting ``ret`` returns ``snaplen``.
    """
    if expression and expression.strip():
        insns = compile_bpf(expression, iface.dlt)
        if iface.cooked:
            insns = _fix_cooked(insns)
        insns = [(c, jt, jf, snaplen if (c & 0x07) == BPF_RET and (c & 0x18) == BPF_K and k
                  else k) for c, jt, jf, k in insns]
    else:
        insns = [(BPF_RET | BPF_K, 0, 0, snaplen)]
    if skip_loopback_outgoing:
        ad = lambda f: (SKF_AD_OFF + f) & 0xFFFFFFFF  # noqa: E731
        prefix = [
            (BPF_LD | BPF_W | BPF_ABS, 0, 0, ad(SKF_AD_PKTTYPE)),
            (BPF_JMP | BPF_JEQ | BPF_K, 0, 3, PACKET_OUTGOING),
            (BPF_LD | BPF_W | BPF_ABS, 0, 0, ad(SKF_AD_IFINDEX)),
            (BPF_JMP | BPF_JEQ | BPF_K, 0, 1, skip_loopback_outgoing),
            (BPF_RET | BPF_K, 0, 0, 0),
        ]
        insns = prefix + insns
    if len(insns) > BPF_MAXINSNS:
        raise BadFilter(f"filter too long for the kernel ({len(insns)} instructions, "
                        f"at most {BPF_MAXINSNS})")
    return insns


DROP_ALL = [(BPF_RET | BPF_K, 0, 0, 0)]


def attach_filter(sock: socket.socket, insns: list[tuple[int, int, int, int]]) -> None:
    """Attach (or atomically replace) the socket's classic BPF program (SO_ATTACH_FILTER)."""
    code = b"".join(_insn.pack(*i) for i in insns)
    buf = ctypes.create_string_buffer(code, len(code))
    # struct sock_fprog { unsigned short len; struct sock_filter *filter; }
    fprog = struct.pack("HL", len(insns), ctypes.addressof(buf))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)
    del buf  # the kernel copied the program


def default_filter(ports) -> str:
    """``tcp port P1 or tcp port P2 ...`` for the broker ports."""
    return " or ".join(f"tcp port {p}" for p in sorted(set(ports)))


def ensure_scapy_quiet() -> None:
    """Keep scapy from printing warnings on import (routes, IPv6)."""
    import logging
    logging.getLogger("scapy.runtime").setLevel(logging.ERROR)
    logging.getLogger("scapy").setLevel(logging.ERROR)
