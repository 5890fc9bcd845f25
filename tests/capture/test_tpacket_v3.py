"""``tpacket_v3_packets``: the packets of a TPACKET_V3 ring block (what a live decoder walks for
every block the capture process copies out of the ring) equal the packets of the capture the
block was built from, and what the live backends' own block walk (``block_packets``) gives;
compiled and as Python. The blocks are laid out as the kernel writes them
(linux/if_packet.h, net/packet/af_packet.c: a 48-byte block descriptor, each packet's
``tpacket3_hdr`` 16-byte aligned, its frame at ``tp_mac``, ``tp_next_offset`` 0 on the
last)."""

from __future__ import annotations

import struct

import pytest

from kafkasniff.capture import pcapfile
from kafkasniff.capture.types import CapturedPacket
from kafkasniff.live.backends import FLAG_COOKED, FLAG_SKIP_OUTGOING, block_packets
from kafkasniff.live.decoder import _feed_block
from tests.conftest import CAPTURES
from tests.support.as_python import as_python

MODULES = {"imported": pcapfile}
if (_source := as_python(pcapfile)) is not pcapfile:
    MODULES["as_python"] = _source

_BLOCK_DESC = 48            # struct tpacket_block_desc, aligned
_MAC = 48 + 18              # TPACKET_ALIGN(tpacket3_hdr) + sockaddr_ll, as the kernel pads
_HDR = struct.Struct("<IIIIIIHH")
_SOCKADDR_LL = struct.Struct("<H2siHBB8s")
_PACKET_HOST, _PACKET_OUTGOING = 0, 4


def build_block(frames: list[tuple[int, bytes, int]], lead: bytes = b"",
                pkttypes: list[int] | None = None) -> bytes:
    """A TPACKET_V3 block of ``(ts_ns, data, orig_len)`` frames, after ``lead`` bytes; each
    packet's ``sockaddr_ll`` (after its header) of packet type ``pkttypes[i]`` (default:
    PACKET_HOST), IPv4 on interface 7, an Ethernet address."""
    body = bytearray()
    for i, (ts, data, orig) in enumerate(frames):
        size = (_MAC + len(data) + 15) & ~15
        rec = bytearray(size)
        sec, nsec = divmod(ts, 1_000_000_000)
        _HDR.pack_into(rec, 0, size if i < len(frames) - 1 else 0, sec, nsec, len(data),
                       orig, 1, _MAC, _MAC + 14)
        _SOCKADDR_LL.pack_into(rec, 48, 17, b"\x08\x00", 7, 1,
                               pkttypes[i] if pkttypes else _PACKET_HOST, 6,
                               bytes(range(1, 7)) + b"\0\0")
        rec[_MAC:_MAC + len(data)] = data
        body += rec
    desc = bytearray(_BLOCK_DESC)
    struct.pack_into("<IIIIII", desc, 0, 3, 0, 1, len(frames), _BLOCK_DESC,
                     _BLOCK_DESC + len(body))
    return lead + bytes(desc) + bytes(body)


def _fields(pkts) -> list[tuple]:
    return [(p.ts_ns, p.link_type, p.data, p.orig_len, p.interface_id) for p in pkts]


def _capture_frames() -> list[tuple[int, bytes, int]]:
    with pcapfile.open_capture(CAPTURES / "broker_java.pcap") as packets:
        frames = [(p.ts_ns, p.data, p.orig_len) for p in packets]
    # a few cut by the snap length, as a ring with a small snaplen holds them
    return frames + [(ts + 1, data[:60], len(data)) for ts, data, _ in frames[:5]]


@pytest.mark.parametrize("module", list(MODULES), ids=str)
def test_a_block_gives_back_the_packets_it_was_built_from(module):
    mod = MODULES[module]
    frames = _capture_frames()
    block = build_block(frames, lead=b"HEAD")
    got = list(mod.tpacket_v3_packets(block, 4, 1))
    assert all(type(p) is CapturedPacket for p in got)
    assert _fields(got) == [(ts, 1, data, orig, 0) for ts, data, orig in frames]
    assert [type(p.data) for p in got] == [bytes] * len(frames)
    # the live backends' walk of the same block (outgoing copies kept, not cooked)
    assert [(p.ts_ns, p.data, p.orig_len) for p in got] == \
        [(ts, bytes(data), orig) for ts, data, orig in block_packets(block, 4, 0)]
    assert list(mod.tpacket_v3_packets(build_block([]), 0, 1)) == []


@pytest.mark.parametrize("module", list(MODULES), ids=str)
@pytest.mark.parametrize("cooked", [False, True], ids=["ethernet", "cooked"])
def test_cooked_headers_and_skipped_outgoing_copies_as_the_backends_walk_gives_them(
        module, cooked):
    """``-i any`` (cooked: an SLL2 header built from each packet's sockaddr_ll, as libpcap
    writes it) and kernels whose loopback shows outgoing copies (skipped) give what the live
    backends' ``block_packets`` gives for the same block and flags."""
    mod = MODULES[module]
    frames = _capture_frames()
    types = [_PACKET_OUTGOING if i % 3 == 1 else _PACKET_HOST for i in range(len(frames))]
    block = build_block(frames, lead=b"HEAD", pkttypes=types)
    link = 276 if cooked else 1
    for skip in (False, True):
        got = list(mod.tpacket_v3_packets(block, 4, link, cooked, skip))
        flags = (FLAG_COOKED if cooked else 0) | (FLAG_SKIP_OUTGOING if skip else 0)
        want = [(ts, link, bytes(data), orig, 0)
                for ts, data, orig in block_packets(block, 4, flags)]
        assert _fields(got) == want
        kept = [(f, t) for f, t in zip(frames, types) if not skip or t != _PACKET_OUTGOING]
        assert len(got) == len(kept)
        assert (len(kept) < len(frames)) if skip else (len(kept) == len(frames))
        if cooked:
            # protocol 0x0800, 2 reserved bytes, ifindex 7, hatype 1, packet type, halen 6,
            # the address padded to 8 bytes
            assert [(p.data, p.orig_len) for p in got] == [
                (bytes.fromhex("0800" "0000" "00000007" "0001") + bytes([t, 6, 1, 2, 3, 4, 5, 6,
                                                                         0, 0]) + d, o + 20)
                for (_, d, o), t in kept]
        else:
            assert [(p.data, p.orig_len) for p in got] == [(d, o) for (_, d, o), _ in kept]


@pytest.mark.parametrize("module", list(MODULES), ids=str)
def test_a_cut_block_is_an_error_after_the_packets_before_it(module):
    mod = MODULES[module]
    frames = _capture_frames()[:3]
    block = build_block(frames)
    last = len(block) - ((_MAC + len(frames[-1][1]) + 15) & ~15)
    for cut, match in ((block[:last + 20], "packet 2 of a TPACKET_V3 block at byte"),
                       (block[:last + _MAC + 3], "packet 2 of a TPACKET_V3 block: ")):
        got = []
        with pytest.raises(ValueError, match=match):
            for pkt in mod.tpacket_v3_packets(cut, 0, 1):
                got.append(pkt)
        assert _fields(got) == [(ts, 1, data, orig, 0) for ts, data, orig in frames[:2]]
    with pytest.raises(ValueError, match="block header cut"):
        list(mod.tpacket_v3_packets(block[:10], 0, 1))


@pytest.mark.parametrize("module", list(MODULES), ids=str)
def test_a_packet_without_a_next_offset_before_the_last_is_an_error(module):
    """A block that claims four billion packets but whose first has no next offset would
    give the same packet four billion times: it is an error after that packet."""
    mod = MODULES[module]
    frames = _capture_frames()[:2]
    block = bytearray(build_block(frames))
    struct.pack_into("<I", block, 12, 0xFFFFFFFF)               # num_pkts
    struct.pack_into("<I", block, _BLOCK_DESC, 0)               # tp_next_offset of packet 0
    got = []
    with pytest.raises(ValueError, match="packet 0 of 4294967295 .* no next offset"):
        for pkt in mod.tpacket_v3_packets(bytes(block), 0, 1):
            got.append(pkt)
    assert _fields(got) == [(frames[0][0], 1, frames[0][1], frames[0][2], 0)]


def test_the_live_decoder_feeds_every_packet_of_a_block_in_order():
    frames = _capture_frames()
    fed = []
    handled = []

    def feed(pkt):
        fed.append(pkt)
        return [len(fed)] if len(fed) % 7 == 0 else []

    _feed_block(build_block(frames, lead=b"x" * 12), 12, 1, 0, feed, handled.extend)
    assert _fields(fed) == [(ts, 1, data, orig, 0) for ts, data, orig in frames]
    assert handled == list(range(7, len(frames) + 1, 7))
