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
from kafkasniff.live.backends import block_packets
from kafkasniff.live.decoder import _feed_block
from tests.conftest import CAPTURES
from tests.support.as_python import as_python

MODULES = {"imported": pcapfile}
if (_source := as_python(pcapfile)) is not pcapfile:
    MODULES["as_python"] = _source

_BLOCK_DESC = 48            # struct tpacket_block_desc, aligned
_MAC = 48 + 18              # TPACKET_ALIGN(tpacket3_hdr) + sockaddr_ll, as the kernel pads
_HDR = struct.Struct("<IIIIIIHH")


def build_block(frames: list[tuple[int, bytes, int]], lead: bytes = b"") -> bytes:
    """A TPACKET_V3 block of ``(ts_ns, data, orig_len)`` frames, after ``lead`` bytes."""
    body = bytearray()
    for i, (ts, data, orig) in enumerate(frames):
        size = (_MAC + len(data) + 15) & ~15
        rec = bytearray(size)
        sec, nsec = divmod(ts, 1_000_000_000)
        _HDR.pack_into(rec, 0, size if i < len(frames) - 1 else 0, sec, nsec, len(data),
                       orig, 1, _MAC, _MAC + 14)
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


def test_the_live_decoder_feeds_every_packet_of_a_block_in_order():
    frames = _capture_frames()
    fed = []
    handled = []

    def feed(pkt):
        fed.append(pkt)
        return [len(fed)] if len(fed) % 7 == 0 else []

    _feed_block(build_block(frames, lead=b"x" * 12), 12, 1, 0, feed, handled.extend,
                CapturedPacket)
    assert _fields(fed) == [(ts, 1, data, orig, 0) for ts, data, orig in frames]
    assert handled == list(range(7, len(frames) + 1, 7))
