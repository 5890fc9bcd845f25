"""kafkasniff.tls.connection.TlsConnection: the cleartext start of a TLS connection and the
``tls_connection`` issue it reports on a broker port.

The bytes are real: the three handshakes of captures/tls_handshake.pcap (librdkafka offering
TLS 1.3/1.2, Python ssl limited to TLS 1.2, Python ssl TLS 1.3 only; SNI broker1.kafka.test)
read with the project's capture reader and TCP reassembler, and a ClientHello with ALPN made
by Python's ssl module in memory."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from kafkasniff.capture.packet import decode_packet
from kafkasniff.capture.pcapfile import open_capture
from kafkasniff.capture.types import TcpSegment
from kafkasniff.issues import IssueKind, Severity
from kafkasniff.tcp.reassembly import TcpReassembler
from kafkasniff.tcp.types import StreamData, TcpConnection
from kafkasniff.tls.connection import HELLO_BYTES, TlsConnection

CAPTURE = Path(__file__).resolve().parents[2] / "captures" / "tls_handshake.pcap"
SNI = "broker1.kafka.test"


@pytest.fixture(scope="module")
def streams() -> list[tuple[TcpConnection, list[StreamData]]]:
    """Per connection of the capture, in order: (connection, its StreamData events)."""
    r = TcpReassembler()
    events = []
    with open_capture(CAPTURE) as src:
        for pkt in src:
            seg = decode_packet(pkt)
            if type(seg) is TcpSegment:
                events += r.feed(seg)
    events += r.flush()
    out: dict[int, tuple] = {}
    for ev in events:
        if type(ev) is StreamData:
            out.setdefault(ev.conn.conn_id, (ev.conn, []))[1].append(ev)
    assert len(out) == 3
    return [out[k] for k in sorted(out)]


def whole(events, direction: int) -> bytes:
    return b"".join(e.data for e in events if e.direction == direction)


def alpn_client_hello() -> bytes:
    ctx = ssl.create_default_context()
    ctx.set_alpn_protocols(["kafka", "http/1.1"])
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname=SNI)
    with pytest.raises(ssl.SSLWantReadError):
        obj.do_handshake()
    return out.read()


def fed(conn: TcpConnection, events, client_dir: int = 0) -> TlsConnection:
    tls = TlsConnection(conn, client_dir, (b"", b""))
    for e in events:
        tls.on_data(e.direction, e.offset, e.data)
    return tls


# --------------------------------------------------------------------------- issues

def test_issue_names_versions_and_sni(streams):
    """On a broker port the close reports one info tls_connection issue naming what the
    hellos show, located on the connection."""
    expected = [
        "client offers TLS 1.3, SNI broker1.kafka.test, server selected TLS 1.3",
        "client offers TLS 1.2, SNI broker1.kafka.test, server selected TLS 1.2",
        "client offers TLS 1.3, SNI broker1.kafka.test, server selected TLS 1.3",
    ]
    for (conn, events), parts in zip(streams, expected):
        [issue] = fed(conn, events).on_close()
        assert issue.kind == IssueKind.TLS_CONNECTION and issue.severity == Severity.INFO
        assert issue.message == "TLS connection (not decoded as Kafka): " + parts
        assert issue.connection_id == conn.conn_id and issue.ts_ns == conn.first_ts_ns
        assert issue.client == f"127.0.0.1:{conn.a_port}" and issue.broker == "127.0.0.1:9093"


def test_info_holds_both_hellos(streams):
    conn, events = streams[0]
    tls = fed(conn, events)
    assert tls.info is None
    tls.on_close()
    client, server = tls.info["client_hello"], tls.info["server_hello"]
    assert client["handshake"] == "client_hello" and client["sni"] == SNI
    assert client["supported_versions"] == ["TLS 1.3", "TLS 1.2"] and client["complete"]
    assert server["handshake"] == "server_hello" and server["version"] == "TLS 1.3"


def test_alpn_in_the_message():
    hello = alpn_client_hello()
    conn = TcpConnection(4, bytes([10, 0, 0, 1]), 50000, bytes([10, 0, 0, 2]), 9093, 123, 456)
    tls = TlsConnection(conn, 0, (hello, b""))
    [issue] = tls.on_close()
    assert issue.message.endswith(f"SNI {SNI}, ALPN kafka,http/1.1")
    assert "server selected" not in issue.message
    assert tls.info["server_hello"] is None and tls.info["client_hello"]["alpn"] == [
        "kafka", "http/1.1"]
    assert issue.ts_ns == 123


def test_client_in_direction_1(streams):
    """With the client on B its hello is read from direction 1 and B is the client."""
    conn, events = streams[1]
    swapped = [StreamData(e.conn, 1 - e.direction, e.offset, e.data, e.ts_ns) for e in events]
    [issue] = fed(conn, swapped, client_dir=1).on_close()
    assert "client offers TLS 1.2" in issue.message
    assert issue.client == "127.0.0.1:9093" and issue.broker == f"127.0.0.1:{conn.a_port}"


def test_no_issue_off_a_broker_port(streams):
    """TLS found on another port (client_dir -1) is counted, not reported: no issue and
    no info."""
    conn, events = streams[0]
    tls = TlsConnection(conn, -1, (b"", b""))
    for e in events:
        tls.on_data(e.direction, e.offset, e.data)
    assert tls.on_close() == [] and tls.info is None


def test_unparsable_hellos():
    conn = TcpConnection(4, bytes([10, 0, 0, 1]), 50000, bytes([10, 0, 0, 2]), 9093, 1, 2)
    tls = TlsConnection(conn, 0, (b"\x16\x03\x01\x00\x05junk", b""))
    [issue] = tls.on_close()
    assert issue.message == "TLS connection (not decoded as Kafka)"
    assert tls.info == {"client_hello": None, "server_hello": None}


# --------------------------------------------------------------------------- hello bytes

def test_first_bytes_and_later_bytes_are_kept_in_order(streams):
    """The first bytes given at construction and the in-order bytes after them are one
    buffer per direction."""
    conn, events = streams[2]
    client, server = whole(events, 0), whole(events, 1)
    tls = TlsConnection(conn, 0, (client[:100], server[:7]))
    tls.on_data(0, 100, client[100:])
    tls.on_data(1, 7, server[7:])
    assert bytes(tls.data[0]) == client and bytes(tls.data[1]) == server


def test_byte_by_byte_same_info(streams):
    """The hellos fed one byte at a time give the same issue and info as whole segments."""
    conn, events = streams[1]
    ref = fed(conn, events)
    ref_issue = ref.on_close()
    tls = TlsConnection(conn, 0, (b"", b""))
    for d in (0, 1):
        data = whole(events, d)
        for i in range(len(data)):
            tls.on_data(d, i, data[i:i + 1])
    assert tls.on_close() == ref_issue and tls.info == ref.info


def test_out_of_order_bytes_are_ignored(streams):
    """Bytes not at the end of what is kept (after a gap, or replayed) are not added."""
    conn, events = streams[0]
    client = whole(events, 0)
    tls = TlsConnection(conn, 0, (b"", b""))
    tls.on_data(0, 10, client[10:])          # the first 10 bytes were lost
    assert bytes(tls.data[0]) == b""
    tls.on_data(0, 0, client[:50])
    tls.on_data(0, 40, client[40:60])        # overlaps what is kept
    tls.on_data(0, 55, client[55:])          # starts after a hole
    assert bytes(tls.data[0]) == client[:50]


def test_kept_up_to_hello_bytes(streams):
    """At most HELLO_BYTES per direction are kept, whatever follows; the hellos still
    parse."""
    conn, events = streams[0]
    client = whole(events, 0)
    filler = bytes(range(256)) * 80
    tls = fed(conn, events)
    tls.on_data(0, len(client), filler)
    tls.on_data(0, len(client) + len(filler), b"more")
    assert len(tls.data[0]) == HELLO_BYTES == 16 * 1024
    assert bytes(tls.data[0]) == (client + filler)[:HELLO_BYTES]
    big = TlsConnection(conn, 0, (client + filler, b""))
    assert len(big.data[0]) == HELLO_BYTES
    [issue] = tls.on_close()
    assert "client offers TLS 1.3" in issue.message
