"""kafkasniff.tcp.types: TcpConnection.seq_at (32-bit wrap, unknown base) and endpoints."""

from __future__ import annotations

import socket

import pytest

from kafkasniff.tcp.types import TcpConnection, format_endpoint

V4_A = socket.inet_pton(socket.AF_INET, "10.1.2.3")
V4_B = socket.inet_pton(socket.AF_INET, "192.168.200.1")
V6_A = socket.inet_pton(socket.AF_INET6, "2001:db8::1")
V6_B = socket.inet_pton(socket.AF_INET6, "::1")


def conn(a_ip=V4_A, a_port=40000, b_ip=V4_B, b_port=9092) -> TcpConnection:
    return TcpConnection(conn_id=5, a_ip=a_ip, a_port=a_port, b_ip=b_ip, b_port=b_port,
                         first_ts_ns=1, last_ts_ns=2)


def test_seq_at_unknown_base_is_minus_one():
    """Before the base sequence number is known, every offset maps to -1."""
    c = conn()
    assert c.base_seq == [-1, -1]
    assert c.seq_at(0, 0) == -1 and c.seq_at(1, 12345) == -1


def test_seq_at_adds_the_offset_per_direction():
    c = conn()
    c.base_seq = [1000, 5_000_000]
    assert c.seq_at(0, 0) == 1000
    assert c.seq_at(0, 24) == 1024
    assert c.seq_at(1, 24) == 5_000_024
    c.base_seq[1] = -1
    assert c.seq_at(1, 24) == -1 and c.seq_at(0, 1) == 1001


def test_seq_at_wraps_at_2_pow_32():
    """Sequence numbers are 32-bit: the base plus an offset wraps to 0."""
    c = conn()
    c.base_seq = [2 ** 32 - 10, 0]
    assert c.seq_at(0, 9) == 2 ** 32 - 1
    assert c.seq_at(0, 10) == 0
    assert c.seq_at(0, 15) == 5
    # a stream offset beyond 4 GiB (offsets are 64-bit, never wrap) still maps mod 2**32
    assert c.seq_at(1, 2 ** 32 + 7) == 7
    assert c.seq_at(0, 3 * 2 ** 32 + 20) == 10


def test_base_seq_zero_is_known():
    """Base 0 is a real sequence number, not "unknown"."""
    c = conn()
    c.base_seq = [0, 0]
    assert c.seq_at(0, 0) == 0


def test_endpoint_ipv4():
    c = conn()
    assert c.endpoint(0) == "10.1.2.3:40000"
    assert c.endpoint(1) == "192.168.200.1:9092"


def test_endpoint_ipv6_in_brackets():
    """IPv6 endpoints are bracketed and in compressed form."""
    c = conn(a_ip=V6_A, a_port=51000, b_ip=V6_B, b_port=9093)
    assert c.endpoint(0) == "[2001:db8::1]:51000"
    assert c.endpoint(1) == "[::1]:9093"


@pytest.mark.parametrize("ip, port, text", [
    (bytes([127, 0, 0, 1]), 9092, "127.0.0.1:9092"),
    (bytes([0, 0, 0, 0]), 0, "0.0.0.0:0"),
    (bytes([255, 255, 255, 255]), 65535, "255.255.255.255:65535"),
    (socket.inet_pton(socket.AF_INET6, "fe80::a:b"), 1, "[fe80::a:b]:1"),
], ids=["loopback", "zeros", "max", "ipv6"])
def test_format_endpoint(ip, port, text):
    assert format_endpoint(ip, port) == text


def test_connection_counters_are_per_instance():
    """Mutable per-direction counters are not shared between connections."""
    a, b = conn(), conn()
    a.bytes[0] += 10
    a.base_seq[0] = 5
    assert b.bytes == [0, 0] and b.base_seq == [-1, -1]
