"""``PacketSource.pack_records``: what a ``--jobs`` reader does with each capture (pcap packed
by the record loop, pcapng one packet object at a time) equals packing the packets one
``CapturedPacket`` at a time in an independent loop, byte for byte and at the same moments;
compiled and as Python."""

from __future__ import annotations

import struct

import pytest

from kafkasniff.capture import pcapfile
from kafkasniff.capture.flows import router
from tests.capture import builders
from tests.conftest import CAPTURES
from tests.support.as_python import as_python

HEADER = struct.Struct("<qIIiQ").pack   # the --jobs record header (kafkasniff.parallel.wire)
TICK = -1
EVERY_NS = 1_000_000_000
REGRESSIONS = CAPTURES / "regressions"
INPUTS = sorted(CAPTURES.glob("*.pcap")) + [
    REGRESSIONS / "resync_zeros.pcap.gz",               # gzip
    REGRESSIONS / "segment_lost_inside_a_frame.pcap",
    REGRESSIONS / "records_1m.pcap",
    REGRESSIONS / "pcapng_unknown_blocks.pcapng",
    REGRESSIONS / "pcapng_timestamp_out_of_range.pcapng",
]


MODULES = {"imported": pcapfile}
if (_source := as_python(pcapfile)) is not pcapfile:
    MODULES["as_python"] = _source


def _one_at_a_time(packets, n, limit, mask, state):
    """The reference: the reader's loop as it was over packet objects."""
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


def _packed(packets, n, limit, mask, state, routes=None):
    """``pack_records``' batches and yields; ``routes`` lists the routes it asked for."""
    bufs = [bytearray() for _ in range(n)]
    events = []
    routes = [] if routes is None else routes

    def first_route():
        routes.append(router(n, True) if n > 1 else None)
        return routes[-1]

    for code in packets.pack_records(first_route, bufs, TICK, EVERY_NS, state, limit,
                                     mask):
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
    """A pcap with only its file header: nothing packed, no route asked for (a later
    file's secrets may still decide it), the state as it was (the last packet time of the
    files before it stays)."""
    path = tmp_path / "empty.pcap"
    path.write_bytes((CAPTURES / "kafka_python.pcap").read_bytes()[:24])
    state = [9, 123, 100, 2000, 0]
    routes: list = []
    with MODULES[module].open_capture(path) as packets:
        assert _packed(packets, 2, 100, 0x7, state, routes) == [
            ("end", [9, 123, 100, 2000, 0], [b"", b""])]
    assert routes == []


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


@pytest.mark.parametrize("module", list(MODULES), ids=str)
@pytest.mark.parametrize("kind", ["pcap", "pcapng"])
def test_the_route_is_asked_for_once_after_the_secrets_before_the_first_packet(
        tmp_path, module, kind):
    """``first_route`` is called once per source, at its first packet, after the pcapng
    secrets blocks before it (they decide how a ``--jobs`` reader routes); every packet then
    goes through the route it gave."""
    frame = builders.ether(builders.ipv4(bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]),
                                         builders.tcp_header() + b"x"))
    if kind == "pcap":
        blob = builders.pcap([(1, 0, frame), (2, 0, frame)])
    else:
        blob = (builders.shb("<") + builders.idb("<", 1) + builders.dsb("<") +
                builders.epb("<", 0, 1_000_000, frame) + builders.dsb("<") +
                builders.epb("<", 0, 2_000_000, frame))
    path = tmp_path / f"two.{kind}"
    path.write_bytes(blob)
    log: list = []

    def route(link_type, data):
        log.append("packet")
        return 1

    def first_route():
        log.append("route")
        return route

    bufs = [bytearray(), bytearray()]
    with MODULES[module].open_capture(path, on_secrets=lambda *a: log.append("secrets")) \
            as packets:
        for _ in packets.pack_records(first_route, bufs, TICK, EVERY_NS,
                                      [-1, 0, 0, 0, 0], 1 << 30, 0xFFFF):
            pass
    secrets = ["secrets"] if kind == "pcapng" else []     # one before each packet
    assert log == secrets + ["route", "packet"] + secrets + ["packet"]
    tick = len(HEADER(0, 0, 0, TICK, 0))       # one a second, to every buffer: two each
    assert len(bufs[0]) == 2 * tick
    assert len(bufs[1]) == 2 * (tick + len(frame)) + 2 * tick


@pytest.mark.parametrize("module", list(MODULES), ids=str)
@pytest.mark.parametrize("endian", ["<", ">"])
@pytest.mark.parametrize("nano", [False, True])
def test_either_byte_order_and_resolution_packs_the_same(tmp_path, module, endian, nano):
    """Record headers of a big-endian or nanosecond pcap are read as the packet objects
    are (compiled: in place, byte by byte): times, lengths (a frame cut by the snap length
    keeps its wire length) and frames; short frames are routed by their own bytes."""
    frame = builders.ether(builders.ipv4(bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]),
                                         builders.tcp_header() + b"payload"))
    other = builders.ether(builders.ipv4(bytes([10, 0, 0, 3]), bytes([10, 0, 0, 4]),
                                         builders.tcp_header(sport=5) + b"p"))
    blob = builders.pcap([(1_700_000_000, 999_999, frame), (4_000_000_000, 7, other[:30],
                          len(other)), (4_000_000_001, 0, b""), (4_294_967_295, 123, frame)],
                         endian=endian, nano=nano)
    path = tmp_path / "order.pcap"
    path.write_bytes(blob)
    mod = MODULES[module]
    with mod.open_capture(path) as packets:
        want = _one_at_a_time(packets, 2, 1 << 20, 0, [-1, 0, 0, 0, 0])
    with mod.open_capture(path) as packets:
        got = _packed(packets, 2, 1 << 20, 0, [-1, 0, 0, 0, 0])
    assert got == want
    assert len(got) == 5, "four packets, each reported, then the end"


def _unpacked(mod, batch: bytes, off: int = 0) -> list:
    return [(kind, idx, (item.ts_ns, item.link_type, item.data, item.orig_len,
                         item.interface_id) if kind >= 0 else item)
            for kind, idx, item in mod.packed_records(batch, off)]


@pytest.mark.parametrize("module", list(MODULES), ids=str)
@pytest.mark.parametrize("path", [CAPTURES / "broker_java.pcap",
                                  REGRESSIONS / "pcapng_unknown_blocks.pcapng"],
                         ids=lambda p: p.name)
def test_packed_records_gives_back_the_packets(path, module):
    """What a ``--jobs`` decoder reads from a batch: every packet as iterating the capture
    gave it, in order, with its index; the ticks (and any negative kind) as ``(ts_ns,
    payload)``."""
    mod = MODULES[module]
    with mod.open_capture(path) as packets:
        want_packets = [(p.ts_ns, p.link_type, p.data, p.orig_len, 0) for p in packets]
    with mod.open_capture(path) as packets:
        events = _packed(packets, 1, 1 << 30, 0xFFFF, [-1, 0, 0, 0, 0])
    batch = b"HEAD" + events[-1][2][0]
    got = _unpacked(mod, batch, 4)
    assert [item for kind, _, item in got if kind >= 0] == want_packets
    assert [idx for kind, idx, _ in got if kind >= 0] == list(range(len(want_packets)))
    ticks = [(idx, item) for kind, idx, item in got if kind == TICK]
    assert ticks and all(payload == b"" for _, (_, payload) in ticks)
    extra = HEADER(-5, 3, 0, -3, 2**64 - 1) + b"abc"      # a caller's own kind
    assert _unpacked(mod, extra) == [(-3, 2**64 - 1, (-5, b"abc"))]


@pytest.mark.parametrize("module", list(MODULES), ids=str)
def test_a_cut_batch_is_an_error_after_the_records_before_it(module):
    mod = MODULES[module]
    one = HEADER(10, 2, 60, 1, 0) + b"ab"
    assert _unpacked(mod, one + one) == [(1, 0, (10, 1, b"ab", 60, 0))] * 2
    for cut in (one + one[:27], one + one[:29]):
        got = []
        with pytest.raises(ValueError, match="packed record"):
            for rec in mod.packed_records(cut):
                got.append(rec)
        assert len(got) == 1
