"""The reader's router sends every packet where the flow hash does (its inline IPv4 path
must agree, or a connection would be split between decoders)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkasniff.capture.flows import flow_hash, ip_offset, partition, router
from kafkasniff.capture.pcapfile import open_capture
from tests.conftest import CAPTURES

#: an Ethernet IPv4 TCP frame of another flow: a record prefix that a router reading at the
#: wrong offset would hash instead of the frame after it
OTHER = (bytes(12) + b"\x08\x00" + bytes([0x45, 0, 0, 40, 0, 0, 0, 0, 64, 6, 0, 0])
         + bytes([192, 168, 7, 1, 192, 168, 7, 2]) + (1234).to_bytes(2, "big")
         + (5678).to_bytes(2, "big") + bytes(16))


def test_router_agrees_with_the_flow_hash_on_every_captured_packet():
    seen = 0
    for pcap in sorted(CAPTURES.glob("*.pcap")):
        with open_capture(pcap) as packets:
            for pkt in packets:
                record = OTHER + pkt.data     # the frame at an offset, as in a pcap record
                for n in (2, 3):
                    assert router(n)(pkt.link_type, pkt.data) == \
                        router(n)(pkt.link_type, record, len(OTHER)) == \
                        partition(pkt.link_type, pkt.data, n)
                    off = ip_offset(pkt.link_type, pkt.data)
                    by_hosts = 0 if off < 0 else flow_hash(pkt.data, off, False) % n
                    assert router(n, False)(pkt.link_type, pkt.data) == by_hosts
                seen += 1
    assert seen > 5_000


def test_addresses_only_puts_every_connection_of_two_hosts_together():
    def frame(sport: int, dport: int) -> bytes:
        ip = bytes([0x45, 0, 0, 40, 0, 0, 0, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2])
        tcp = sport.to_bytes(2, "big") + dport.to_bytes(2, "big") + bytes(16)
        return bytes(12) + b"\x08\x00" + ip + tcp

    by_ports = {router(8)(1, frame(p, 9092)) for p in range(40000, 40064)}
    by_hosts = {router(8, False)(1, frame(p, 9092)) for p in range(40000, 40064)}
    assert len(by_ports) > 1 and len(by_hosts) == 1


@settings(max_examples=500, deadline=None)
@given(a=st.binary(min_size=4, max_size=4), b=st.binary(min_size=4, max_size=4),
       sport=st.integers(0, 0xFFFF), dport=st.integers(0, 0xFFFF), proto=st.sampled_from([6, 17]),
       frag=st.integers(0, 0xFFFF), n=st.integers(1, 1 << 40), tail=st.binary(max_size=4))
def test_compiled_route_equals_the_flow_hash_on_any_ipv4_frame(a, b, sport, dport, proto, frag,
                                                               n, tail):
    """The router's Ethernet IPv4 path (compiled: the bytes read and hashed in unsigned 64-bit
    C arithmetic) agrees with the flow hash in Python integers, for any addresses (high bits
    set), ports, fragment fields and decoder counts."""
    ip = bytes([0x45, 0, 0, 40, 0, 0]) + frag.to_bytes(2, "big") + bytes([64, proto, 0, 0]) \
        + a + b
    frame = bytes(12) + b"\x08\x00" + ip + sport.to_bytes(2, "big") + dport.to_bytes(2, "big") \
        + tail
    assert router(n)(1, frame) == partition(1, frame, n)
    assert router(n)(1, OTHER + frame, len(OTHER)) == partition(1, frame, n)
    assert router(n, False)(1, frame) == flow_hash(frame, 14, False) % n
