"""Splitting a capture by connection (kafkasniff.spark.split): no Spark involved."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

import pytest

from kafkasniff.capture import CapturedPacket, TcpSegment, decode_packet, open_capture
from kafkasniff.capture.writer import PcapNgWriter
from kafkasniff.spark.split import (
    MAX_SHARDS,
    SPLIT_THRESHOLD_BYTES,
    shard_count,
    shard_of,
    split_capture,
)
from tests.capture import builders as b

from .conftest import ALL_CAPTURES


def packets_of(path) -> list[CapturedPacket]:
    with open_capture(path) as src:
        return list(src)


def flow(pkt: CapturedPacket):
    """The connection of a TCP packet, the same both ways (its endpoints sorted); None for
    anything else. Computed from the decoded packet, independently of the split's hash."""
    seg = decode_packet(pkt)
    if type(seg) is not TcpSegment:
        return None
    return tuple(sorted([(seg.src_ip, seg.src_port), (seg.dst_ip, seg.dst_port)]))


def pkey(p: CapturedPacket) -> tuple:
    return (p.ts_ns, p.link_type, p.data, p.orig_len)


@pytest.mark.parametrize("n", [1, 3, 7])
@pytest.mark.parametrize("capture", ALL_CAPTURES, ids=lambda p: p.name)
def test_split_keeps_every_connection_whole(tmp_path: Path, capture: Path, n: int) -> None:
    orig = packets_of(capture)
    res = split_capture(capture, tmp_path, n)
    assert res.packets_read == len(orig) == sum(res.packets.values())
    assert res.issues == []
    per_flow_orig = Counter(flow(p) for p in orig)
    shard_of_flow: dict = {}
    per_flow_split: Counter = Counter()
    all_split: list = []
    for i, path in res.paths.items():
        got = packets_of(path)
        assert len(got) == res.packets[i] > 0
        all_split.extend(got)
        for p in got:
            f = flow(p)
            per_flow_split[f] += 1
            assert i == shard_of(p.link_type, p.data, n)
            if f is None:
                continue
            # each connection (both directions) lives in exactly one shard
            assert shard_of_flow.setdefault(f, i) == i
        # within a shard, packets keep the capture's order
        order = {pkey(p): k for k, p in enumerate(orig)}
        idx = [order[pkey(p)] for p in got]
        assert idx == sorted(idx)
    # per-connection packet counts are those of the original capture
    assert per_flow_split == per_flow_orig
    # nothing lost, nothing changed: same packets (ts_ns, link type, bytes, orig_len)
    assert Counter(pkey(p) for p in all_split) == Counter(pkey(p) for p in orig)
    if n == 1:
        assert list(res.paths) == [0]


def test_both_directions_same_shard_and_by_hosts() -> None:
    """Both directions of a connection go to one shard, other connections between the same
    hosts spread out; ``by_hosts`` (TLS decryption) keeps every connection of two hosts
    together."""
    h1, h2 = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])

    def frame(src, sport, dst, dport) -> bytes:
        return b.ether(b.ipv4(src, dst, b.tcp_header(sport=sport, dport=dport)))

    a, r = frame(h1, 40000, h2, 9092), frame(h2, 9092, h1, 40000)
    for n in range(1, 50):
        assert shard_of(1, a, n) == shard_of(1, r, n)
        assert shard_of(1, a, n, by_hosts=True) == shard_of(1, r, n, by_hosts=True)
    others = [frame(h1, 40001 + k, h2, 9092) for k in range(20)]
    assert len({shard_of(1, f, 7) for f in others}) > 1
    assert {shard_of(1, f, 7, by_hosts=True) for f in others} == {
        shard_of(1, a, 7, by_hosts=True)}
    assert shard_of(1, b.ether(b"\x00" * 28, ethertype=0x0806), 7) == 0     # ARP: not IP


def test_several_link_types_and_non_tcp(tmp_path: Path) -> None:
    """Link types and timestamps survive; ARP goes to shard 0; IPv6 flows are hashed."""
    src4, dst4 = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
    src6, dst6 = bytes(15) + b"\x01", bytes(15) + b"\x02"
    pkts = []
    for i in range(40):
        sport = 40000 + i % 8
        seg = b.tcp_header(sport=sport, seq=i) + b"x" * (i % 5)
        rev = b.tcp_header(sport=9092, dport=sport, seq=i)
        frames = [(1, b.ether(b.ipv4(src4, dst4, seg))), (113, b.sll(b.ipv4(dst4, src4, rev))),
                  (101, b.ipv6(src6, dst6, seg)), (1, b.ether(b"\x00" * 28, ethertype=0x0806)),
                  (1, b.ether(b.ipv4(src4, dst4, b"\x00" * 8, proto=17)))]
        for k, (lt, data) in enumerate(frames):
            pkts.append(CapturedPacket(1_700_000_000_000_000_001 + i * 10 + k, lt, data,
                                       len(data)))
    src = tmp_path / "mixed.pcapng"
    with PcapNgWriter(src) as w:
        for p in pkts:
            w.write(p)
    res = split_capture(src, tmp_path / "out", 4)
    got = [p for path in res.paths.values() for p in packets_of(path)]
    assert Counter(pkey(p) for p in got) == Counter(pkey(p) for p in pkts)
    shard0 = {pkey(p) for p in packets_of(res.paths[0])}
    for p in pkts:
        if p.data[12:14] == b"\x08\x06":                  # ARP
            assert pkey(p) in shard0
    assert len(res.paths) > 1


def test_damaged_source_reports_issues(tmp_path: Path) -> None:
    capture = ALL_CAPTURES[0]
    blob = capture.read_bytes()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(blob[:-7])
    res = split_capture(cut, tmp_path / "out", 3)
    assert [i.kind for i in res.issues] == ["capture_truncated"]
    assert res.packets_read == len(packets_of(capture)) - 1


def test_shard_count() -> None:
    assert shard_count(10) == 1
    assert shard_count(SPLIT_THRESHOLD_BYTES - 1) == 1
    assert shard_count(SPLIT_THRESHOLD_BYTES) == 2
    assert shard_count(10 * SPLIT_THRESHOLD_BYTES + 1) == 11
    assert shard_count(10, 5) == 5
    assert shard_count(10 << 40, None) == MAX_SHARDS
    assert shard_count(100, threshold_bytes=50, target_bytes=10) == 10
    with pytest.raises(ValueError):
        shard_count(10, 0)


def test_rejects_bad_n(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        split_capture(ALL_CAPTURES[0], tmp_path, 0)


def test_connections_spread_over_shards_in_real_captures() -> None:
    # the committed captures hold several connections: a split into 7 uses several shards
    groups = defaultdict(set)
    for pcap in ALL_CAPTURES:
        for p in packets_of(pcap):
            f = flow(p)
            if f is not None:
                groups[pcap.name].add(shard_of(p.link_type, p.data, 7))
    assert sum(len(v) > 1 for v in groups.values()) >= len(ALL_CAPTURES) // 2


def test_spark_split_task_keeps_hosts_together_with_a_key_log(tmp_path: Path) -> None:
    """With a TLS key log, spark decode's split task routes by hosts (as --jobs does): every
    connection of the loopback capture lands in one shard; without, they spread."""
    from kafkasniff.pipeline import PipelineOptions
    from kafkasniff.spark.decode import _split_rows

    capture = ALL_CAPTURES[0]
    base = {"path": str(capture), "shards": 5, "stem": "x", "capture": capture.name}
    shards = {}
    for name, opts in (("plain", PipelineOptions()),
                       ("keys", PipelineOptions(tls_keylog_text="# no secrets\n"))):
        task = dict(base, scratch=str(tmp_path / name), options=opts)
        shards[name] = [r["shard"] for r in _split_rows([task], [0]) if r["shard"] >= 0]
    assert len(shards["plain"]) > 1
    assert len(shards["keys"]) == 1
