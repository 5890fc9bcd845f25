"""``PacketSource.pack_records``: what a ``--jobs`` reader does with a pcap source, packed by
the record loop, equals packing the packets one ``CapturedPacket`` at a time (the loop the
reader keeps for pcapng), byte for byte and at the same moments; compiled and as Python."""

from __future__ import annotations

import importlib.util
import struct

import pytest

from kafkasniff.capture import pcapfile
from kafkasniff.capture.flows import router
from tests.conftest import CAPTURES

HEADER = struct.Struct("<qIIiQ").pack   # the --jobs record header (kafkasniff.parallel.wire)
TICK = -1
EVERY_NS = 1_000_000_000
REGRESSIONS = CAPTURES / "regressions"
INPUTS = sorted(CAPTURES.glob("*.pcap")) + [
    REGRESSIONS / "resync_zeros.pcap.gz",               # gzip
    REGRESSIONS / "segment_lost_inside_a_frame.pcap",
    REGRESSIONS / "records_1m.pcap",
]


def _as_python():
    spec = importlib.util.spec_from_file_location(
        "pcapfile_as_python", pcapfile.__file__.rsplit("/", 1)[0] + "/pcapfile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MODULES = {"imported": pcapfile}
if not pcapfile.__file__.endswith(".py"):
    MODULES["as_python"] = _as_python()


def _one_at_a_time(packets, n, limit, mask, state):
    """The reference: the reader's loop over packet objects (kafkasniff.parallel.engine)."""
    bufs = [bytearray() for _ in range(n)]
    route = router(n, True)
    idx, ts, first_ts, next_tick, k = state
    events = []
    for pkt in packets:
        idx += 1
        ts = pkt.ts_ns
        w = 0 if n == 1 else route(pkt.link_type, pkt.data)
        b = bufs[w]
        b += HEADER(ts, len(pkt.data), pkt.orig_len, pkt.link_type, idx)
        b += pkt.data
        if not first_ts:
            first_ts = ts
        if ts >= next_tick:
            next_tick = ts + EVERY_NS
            for bb in bufs:
                bb += HEADER(ts, 0, 0, TICK, idx)
        if len(b) >= limit:
            events.append(("round", idx, [bytes(x) for x in bufs]))
            for x in bufs:
                x.clear()
        k += 1
        if not k & mask:
            events.append(("progress", idx))
    events.append(("end", [idx, ts, first_ts, next_tick, k], [bytes(x) for x in bufs]))
    return events


def _packed(packets, n, limit, mask, state):
    bufs = [bytearray() for _ in range(n)]
    events = []
    for code in packets.pack_records(router(n, True) if n > 1 else None, bufs, HEADER, TICK,
                                     EVERY_NS, state, limit, mask):
        if code & 1:
            events.append(("round", state[0], [bytes(x) for x in bufs]))
            for x in bufs:
                x.clear()
        if code & 2:
            events.append(("progress", state[0]))
    events.append(("end", list(state), [bytes(x) for x in bufs]))
    return events


def _source_view(packets):
    return (packets.packets_read, packets.packet_bytes, packets.accounting(),
            list(packets.issues))


@pytest.mark.parametrize("module", list(MODULES), ids=str)
@pytest.mark.parametrize("path", INPUTS, ids=lambda p: p.name)
def test_packed_batches_equal_packing_packet_objects(path, module):
    mod = MODULES[module]
    for n, limit, mask in ((1, 1 << 20, 0x1FFF), (2, 3000, 0x7), (3, 700, 0x3)):
        # a run that is already under way: a packet index, times and a tick before this file
        start = [41, 5, 3, 7, 0]
        with mod.open_capture(path) as packets:
            want = _one_at_a_time(packets, n, limit, mask, list(start))
            want_view = _source_view(packets)
        with mod.open_capture(path) as packets:
            got = _packed(packets, n, limit, mask, list(start))
            got_view = _source_view(packets)
        assert got == want, (n, limit)
        assert got_view == want_view


@pytest.mark.parametrize("module", list(MODULES), ids=str)
def test_a_file_without_packets_leaves_the_run_state(tmp_path, module):
    """A pcap with only its file header: nothing packed, the state as it was (the last
    packet time of the files before it stays)."""
    path = tmp_path / "empty.pcap"
    path.write_bytes((CAPTURES / "kafka_python.pcap").read_bytes()[:24])
    state = [9, 123, 100, 2000, 0]
    with MODULES[module].open_capture(path) as packets:
        assert _packed(packets, 2, 100, 0x7, state) == [("end", [9, 123, 100, 2000, 0],
                                                         [b"", b""])]


@pytest.mark.parametrize("module", list(MODULES), ids=str)
def test_a_cut_file_reports_the_same_damage(tmp_path, module):
    """A file cut inside its last record: the same batches and the same truncation issue."""
    data = (CAPTURES / "broker_java.pcap").read_bytes()
    path = tmp_path / "cut.pcap"
    path.write_bytes(data[:-7])
    mod = MODULES[module]
    with mod.open_capture(path) as packets:
        want = _one_at_a_time(packets, 2, 3000, 0x7, [-1, 0, 0, 0, 0])
        want_view = _source_view(packets)
    with mod.open_capture(path) as packets:
        got = _packed(packets, 2, 3000, 0x7, [-1, 0, 0, 0, 0])
        got_view = _source_view(packets)
    assert got == want and got_view == want_view
    assert want_view[3], "the cut is reported"


def test_pcapng_is_refused():
    path = REGRESSIONS / "pcapng_unknown_blocks.pcapng"
    with pcapfile.open_capture(path) as packets, pytest.raises(ValueError, match="pcap"):
        next(packets.pack_records(None, [bytearray()], HEADER, TICK, EVERY_NS,
                                  [-1, 0, 0, 0, 0], 100, 0x7))
