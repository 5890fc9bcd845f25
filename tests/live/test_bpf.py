"""Interfaces and BPF filters (kafkasniff.live.bpf): no capture permission needed."""

from __future__ import annotations

import socket

import pytest

from kafkasniff.live import bpf
from kafkasniff.live.bpf import (BPF_RET, SKF_AD_IFINDEX, SKF_AD_OFF, SKF_AD_PKTTYPE,
                                 SKF_AD_PROTOCOL, BadFilter, UnknownInterface)


def _rets(prog):
    return [k for c, _jt, _jf, k in prog if c & 0x07 == BPF_RET]


def test_loopback_interface():
    lo = bpf.resolve_interface("lo")
    assert lo.index == socket.if_nametoindex("lo")
    assert lo.loopback and not lo.cooked
    assert lo.link_type == 1            # Linux loopback frames carry an Ethernet header


def test_any_is_cooked_sll2():
    it = bpf.resolve_interface("any")
    assert it.index == 0 and it.cooked and it.link_type == 276


def test_unknown_interface_lists_the_existing_ones():
    with pytest.raises(UnknownInterface) as exc:
        bpf.resolve_interface("nosuch0")
    msg = str(exc.value)
    assert "nosuch0" in msg
    for _, name in socket.if_nameindex():
        assert name in msg
    assert "any" in msg


def test_snaplen_replaces_scapys_65535():
    """libpcap (through scapy) compiles with a 65535-byte snaplen, which cuts the
    65549-byte frames of loopback traffic: every accepting return gets ours."""
    raw = bpf.compile_bpf("tcp port 9092", 1)
    assert 65535 in _rets(raw)
    prog = bpf.build_filter("tcp port 9092", bpf.resolve_interface("lo"), 262144)
    assert set(_rets(prog)) == {0, 262144}


def test_no_filter_accepts_everything_with_our_snaplen():
    prog = bpf.build_filter(None, bpf.resolve_interface("lo"), 100000)
    assert prog == [(BPF_RET, 0, 0, 100000)]
    assert bpf.build_filter("  ", bpf.resolve_interface("lo"), 5) == [(BPF_RET, 0, 0, 5)]


def test_bad_filter_shows_libpcaps_message():
    with pytest.raises(BadFilter) as exc:
        bpf.build_filter("tcp prot 9092", bpf.resolve_interface("lo"), 262144)
    assert "tcp prot 9092" in str(exc.value)
    assert "syntax error" in str(exc.value)


def test_cooked_filter_is_rebased_on_the_network_header():
    """For -i any the packet starts at the IP header: loads are shifted by the 20-byte
    SLL2 header, and the protocol field becomes the kernel's ancillary load."""
    it = bpf.resolve_interface("any")
    sll2 = bpf.compile_bpf("tcp port 9092", 276)
    fixed = bpf.build_filter("tcp port 9092", it, 262144)
    assert len(fixed) == len(sll2)
    ad_protocol = (SKF_AD_OFF + SKF_AD_PROTOCOL) & 0xFFFFFFFF
    assert sll2[0][3] == 0 and fixed[0][3] == ad_protocol      # ldh [0] -> protocol
    for (c1, _, _, k1), (c2, _, _, k2) in zip(sll2, fixed):
        if c1 & 0x07 in (0, 1) and c1 & 0xE0 in (0x20, 0x40, 0xA0) and k1 >= 20:
            assert k2 == k1 - 20


def test_cooked_filter_on_link_header_fields_is_refused():
    it = bpf.resolve_interface("any")
    with pytest.raises(BadFilter):
        bpf.build_filter("ether[6:2] = 0", it, 262144)  # inside the SLL2 address: no kernel load


def test_loopback_outgoing_prefix_on_any():
    it = bpf.resolve_interface("any")
    prog = bpf.build_filter(None, it, 1000, skip_loopback_outgoing=1)
    ad = lambda f: (SKF_AD_OFF + f) & 0xFFFFFFFF  # noqa: E731
    assert prog[0] == (0x20, 0, 0, ad(SKF_AD_PKTTYPE))
    assert prog[1][3] == bpf.PACKET_OUTGOING
    assert prog[2] == (0x20, 0, 0, ad(SKF_AD_IFINDEX))
    assert prog[3][3] == 1
    assert prog[4] == (BPF_RET, 0, 0, 0)
    assert prog[5] == (BPF_RET, 0, 0, 1000)


def test_default_filter_from_ports():
    assert bpf.default_filter([9093, 9092, 9092]) == "tcp port 9092 or tcp port 9093"


def test_attach_filter_on_a_plain_socket():
    """SO_ATTACH_FILTER works on any socket (no privilege): the program is well formed."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        bpf.attach_filter(s, bpf.build_filter("udp", bpf.resolve_interface("lo"), 1500))
        bpf.attach_filter(s, bpf.DROP_ALL)
    finally:
        s.close()


@pytest.mark.parametrize("expr", ["tcp and (port 1 or", "tcp and ((port 1) or port (2",
                                  "(tcp prot 9092)"])
def test_bad_filter_with_parentheses_quoted_once_with_the_reason(expr):
    """A filter containing '(' once gave ``bad filter 'tcp and (port 1 or': port 1 or'
    (can't parse…``: the message was cut at the filter's own parenthesis."""
    with pytest.raises(BadFilter) as exc:
        bpf.build_filter(expr, bpf.resolve_interface("lo"), 262144)
    assert str(exc.value) == (f"bad filter {expr!r}: can't parse filter expression: "
                              "syntax error")


def test_bad_filter_other_reasons_kept_whole():
    with pytest.raises(BadFilter) as exc:
        bpf.build_filter("port 99999", bpf.resolve_interface("lo"), 262144)
    assert str(exc.value) == "bad filter 'port 99999': illegal port number 99999 > 65535"
