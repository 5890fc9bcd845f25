"""The per-packet path (kafkasniff.feeding): what it counts, checked against dpkt's own
reading of real captures, whether it runs compiled or as plain Python, and with a stats
object whose slots it may not store into by offset."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import dpkt
import pytest

import kafkasniff
from kafkasniff.capture.pcapfile import open_capture
from kafkasniff.feeding import PacketFeeder
from kafkasniff.pipeline import Pipeline, PipelineStats

ROOT = Path(__file__).resolve().parents[1]
CAPTURES = ["aiokafka.pcap", "broker_java.pcap", "broker_tls.pcap"]


def _truth(path: Path) -> dict:
    """Packets, captured bytes, TCP segments, the TCP packets' header bytes (link, IP and
    TCP: the frame less its TCP payload) and the time span, as dpkt reads the capture."""
    t = {"packets": 0, "packet_bytes": 0, "tcp_segments": 0, "headers": 0,
         "first_us": None, "last_us": None}
    with open(path, "rb") as f:
        for ts, buf in dpkt.pcap.Reader(f):
            t["packets"] += 1
            t["packet_bytes"] += len(buf)
            # dpkt gives a Decimal for a nanosecond pcap, else a float of microseconds
            us = int((ts if isinstance(ts, Decimal) else Decimal(repr(ts))) * 1_000_000)
            t["first_us"] = us if t["first_us"] is None else t["first_us"]
            t["last_us"] = us
            ip = dpkt.ethernet.Ethernet(buf).data
            if isinstance(ip, (dpkt.ip.IP, dpkt.ip6.IP6)) and isinstance(ip.data, dpkt.tcp.TCP):
                t["tcp_segments"] += 1
                t["headers"] += len(buf) - len(ip.data.data)
    return t


def _fed(path: Path, pipe: Pipeline) -> dict:
    with open_capture(path) as src:
        for pkt in src:
            pipe.feed(pkt)
    st = pipe.stats
    return {"packets": st.packets, "packet_bytes": st.packet_bytes,
            "tcp_segments": st.tcp_segments, "headers": st.bytes["packet_headers"],
            "first_us": st.first_ts_ns // 1000, "last_us": st.last_ts_ns // 1000}


class _OwnStats(PipelineStats):
    """A stats class of its own, with a slot of its own: the feeder reads the counters'
    offsets from the class it is given, not from PipelineStats."""

    __slots__ = ("extra",)


@pytest.mark.parametrize("name", CAPTURES)
def test_counts_what_dpkt_reads(name):
    path = ROOT / "captures" / name
    assert _fed(path, Pipeline()) == _truth(path)


class _PropertyStats(PipelineStats):
    """``packets`` behind a property of its own, not a slot: the compiled feeder counts
    every counter of this class by attribute (its other path)."""

    __slots__ = ("_n",)

    @property
    def packets(self) -> int:
        return self._n

    @packets.setter
    def packets(self, n: int) -> None:
        self._n = n


@pytest.mark.parametrize("stats_class", [_OwnStats, _PropertyStats])
@pytest.mark.parametrize("name", CAPTURES)
def test_another_stats_class_counts_the_same(name, stats_class):
    path = ROOT / "captures" / name
    pipe = Pipeline()
    own = stats_class(budgets=pipe.ctx.content.meter)
    pipe.stats = own
    pipe._feeder = PacketFeeder(own, pipe._reassembler, pipe.connections, pipe._closed,
                                pipe._account, pipe._dispatch, pipe._expire, 0)
    pipe.feed = pipe._feeder.feed
    assert _fed(path, pipe) == _truth(path)


def test_a_pipeline_feeds_through_its_feeder():
    pipe = Pipeline()
    with open_capture(ROOT / "captures" / "aiokafka.pcap") as src:
        packets = list(src)
    # the method of the class and an instance's own feed give the same records
    other = Pipeline()
    got = [pipe.feed(p) for p in packets] + [pipe.finish()]
    want = [Pipeline.feed(other, p) for p in packets] + [other.finish()]
    assert got == want
    assert any(got)
    assert pipe.stats.packets == other.stats.packets == len(packets)
    # an instance's feed is the feeder's own method, not a Python method calling it
    assert pipe.feed.__self__ is pipe._feeder


@pytest.mark.skipif(kafkasniff.PURE_PYTHON or not kafkasniff.compiled_available(),
                    reason="the feeder runs as plain Python")
def test_compiled_feeder_stores_at_offsets_only_when_every_counter_is_a_slot():
    pipe = Pipeline()
    assert pipe._feeder.fast
    own = PacketFeeder(_OwnStats(), pipe._reassembler, {}, {}, len, len, len, 0)
    # _OwnStats' inherited slots sit where PipelineStats' do, so it still may; a class
    # without one of the counters may not
    assert own.fast

    class NoCounters:
        __slots__ = ("packets",)

    assert not PacketFeeder(NoCounters(), pipe._reassembler, {}, {}, len, len, len, 0).fast
    assert not PacketFeeder(_PropertyStats(), pipe._reassembler, {}, {}, len, len, len, 0).fast
