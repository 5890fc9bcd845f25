"""Finding frames again in a capture (kafkasniff.capture.frames) and reading a capture from a
checkpoint (kafkasniff.capture.pcapfile): every frame of real captures is found byte-exact."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from kafkasniff.capture import open_capture
from kafkasniff.capture.frames import CaptureIndex, FrameFinder, FrameRef, parse_endpoint
from kafkasniff.capture.pcapfile import Checkpoint
from kafkasniff.capture.types import CapturedPacket
from kafkasniff.capture.writer import PcapNgWriter
from kafkasniff.errors import CaptureError
from kafkasniff.model import Exchange
from kafkasniff.pairing.connection import KafkaConnection
from kafkasniff.pipeline import Pipeline

from . import builders as b

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = ROOT / "captures"


def decode_with_index(paths, every: int, monkeypatch):
    """Run the pipeline over ``paths`` with checkpoints; returns (exchanges, index, frames)
    where ``frames`` maps (conn_id, stream_offset, first_ts_ns, frame_bytes) to the frame
    payload the pipeline decoded."""
    frames: dict[tuple, bytes] = {}
    orig = KafkaConnection._message

    def spy(self, frame, *args, **kwargs):
        msg = orig(self, frame, *args, **kwargs)
        frames[(self.tcp.conn_id, msg.stream_offset, msg.first_ts_ns, msg.frame_bytes)] = \
            bytes(frame.payload)
        return msg

    orig_token = KafkaConnection._raw_token

    def token_spy(self, frame, from_client):  # raw SASL tokens skip _message
        frames[(self.tcp.conn_id, frame.stream_offset, frame.first_ts_ns, frame.size + 4)] = \
            bytes(frame.payload)
        return orig_token(self, frame, from_client)

    monkeypatch.setattr(KafkaConnection, "_message", spy)
    monkeypatch.setattr(KafkaConnection, "_raw_token", token_spy)
    index = CaptureIndex()
    pipe = Pipeline()
    out = []
    for p in paths:
        with open_capture(p, checkpoint_every=every) as src:
            no = index.add_file(str(p), src.seekable)
            for pkt in src:
                out.extend(pipe.feed(pkt))
            index.add_checkpoints(no, src.checkpoints)
    out.extend(pipe.finish())
    monkeypatch.setattr(KafkaConnection, "_message", orig)
    monkeypatch.setattr(KafkaConnection, "_raw_token", orig_token)
    return [r for r in out if type(r) is Exchange], index, frames


def check_all_frames(exchanges, index, frames) -> int:
    finder = FrameFinder(index)
    checked = 0
    for ex in exchanges:
        for msg, sender, receiver in ((ex.request, ex.client, ex.broker),
                                      (ex.response, ex.broker, ex.client)):
            if msg is None or msg.seq < 0:
                continue
            key = (ex.conn_id, msg.stream_offset, msg.first_ts_ns, msg.frame_bytes)
            found = finder.find(FrameRef(sender, receiver, msg.seq, msg.first_ts_ns,
                                         msg.frame_bytes))
            assert found is not None, key
            if msg.missing_bytes:
                assert found.missing, key
                continue
            assert found.complete, (key, found.missing)
            assert found.data[:4] == (msg.frame_bytes - 4).to_bytes(4, "big", signed=True)
            assert found.data[4:] == frames[key], key
            checked += 1
    return checked


@pytest.mark.parametrize("name", ["librdkafka_errors_latency", "librdkafka_compression",
                                  "librdkafka_midstream", "crafted_sasl", "kafka_python_legacy",
                                  "crafted_records", "aiokafka"])
@pytest.mark.parametrize("every", [7, 256])
def test_every_frame_is_found_byte_exact(name, every, monkeypatch):
    exchanges, index, frames = decode_with_index([CAPTURES / f"{name}.pcap"], every, monkeypatch)
    assert len(index) > 0
    checked = check_all_frames(exchanges, index, frames)
    assert checked >= len(exchanges) // 2 and checked > 5


def test_pcapng_and_rotated_files(tmp_path, monkeypatch):
    """The same capture as pcapng, cut into two files (connections continue across them)."""
    src = CAPTURES / "librdkafka_produce_consume.pcap"
    with open_capture(src) as s:
        pkts = list(s)
    half = len(pkts) // 2
    paths = [tmp_path / "a.pcapng", tmp_path / "b.pcapng"]
    for path, part in zip(paths, (pkts[:half], pkts[half:])):
        with PcapNgWriter(path) as w:
            for p in part:
                w.write(p)
    exchanges, index, frames = decode_with_index(paths, 5, monkeypatch)
    assert all(cp.state is not None for f in index.files for cp in f.checkpoints)
    assert check_all_frames(exchanges, index, frames) > 50


def test_gzip_is_read_again_from_the_start(tmp_path, monkeypatch):
    src = CAPTURES / "librdkafka_errors_latency.pcap"
    gz = tmp_path / "x.pcap.gz"
    gz.write_bytes(gzip.compress(src.read_bytes()))
    exchanges, index, frames = decode_with_index([gz], 16, monkeypatch)
    assert not index.files[0].seekable
    assert check_all_frames(exchanges[:40], index, frames) > 20


# ---------------------------------------------------------------------------- synthetic flows

CLIENT = bytes([10, 0, 0, 9])
BROKER = bytes([10, 0, 0, 1])


def seg(ts_s: float, seq: int, payload: bytes, flags=0x18, sport=40000, dport=9092,
        src=CLIENT, dst=BROKER):
    data = b.ether(b.ipv4(src, dst, b.tcp_header(sport=sport, dport=dport, seq=seq,
                                                 flags=flags) + payload))
    return int(ts_s * 1e9), data


def write_pcap(path: Path, segs) -> Path:
    recs = [(ts // 10**9, ts % 10**9, data) for ts, data in segs]
    path.write_bytes(b.pcap(recs, nano=True))
    return path


def build_index(paths, every=2) -> CaptureIndex:
    index = CaptureIndex()
    for p in paths:
        with open_capture(p, checkpoint_every=every) as s:
            no = index.add_file(str(p), s.seekable)
            for _ in s:
                pass
            index.add_checkpoints(no, s.checkpoints)
    return index


def test_sequence_wraparound_reordering_and_retransmission(tmp_path):
    frame = bytes(range(256)) * 3
    isn = 0xFFFFFF00          # the frame crosses 2**32
    base = (isn + 1) & 0xFFFFFFFF
    parts = [frame[0:300], frame[300:500], frame[500:]]
    segs = [seg(1.0, isn, b"", flags=0x02)]
    segs += [seg(1.0 + i * 0.001, 5000 + i, b"noise", sport=40001) for i in range(20)]
    segs += [
        seg(1.1, (base + 300) & 0xFFFFFFFF, parts[1]),              # arrives before the first
        seg(1.2, base, parts[0]),                                    # the frame's first byte
        seg(1.2005, base, b"X" * 300),                               # conflicting copy: ignored
        seg(1.201, (base + 500) & 0xFFFFFFFF, parts[2]),
        seg(1.3, (base + 768) & 0xFFFFFFFF, b"next frame"),
    ]
    path = write_pcap(tmp_path / "w.pcap", segs)
    index = build_index([path])
    ref = FrameRef("10.0.0.9:40000", "10.0.0.1:9092", base, int(1.2e9), len(frame))
    found = FrameFinder(index).find(ref)
    assert found.complete and found.data == frame


def test_missing_bytes_are_reported(tmp_path):
    frame = bytes(range(200))
    segs = [seg(1.0, 100, frame[:50]), seg(1.5, 250, frame[150:])]  # 100 bytes never captured
    segs += [seg(2.0 + i, 9, b"x", sport=1) for i in range(5)]
    path = write_pcap(tmp_path / "m.pcap", segs)
    found = FrameFinder(build_index([path])).find(
        FrameRef("10.0.0.9:40000", "10.0.0.1:9092", 100, int(1e9), 200))
    assert found.missing == [(50, 150)]
    assert found.data[:50] == frame[:50] and found.data[150:] == frame[150:]


def test_unknown_location_gives_none(tmp_path):
    path = write_pcap(tmp_path / "e.pcap", [seg(1.0, 1, b"abc")])
    finder = FrameFinder(build_index([path]))
    assert finder.find(FrameRef("10.0.0.9:40000", "10.0.0.1:9092", -1, 0, 10)) is None
    assert finder.find(FrameRef("nonsense", "10.0.0.1:9092", 1, 0, 10)) is None
    assert FrameFinder(CaptureIndex()).find(FrameRef("10.0.0.9:1", "10.0.0.1:2", 1, 0, 3)) is None


def test_parse_endpoint():
    assert parse_endpoint("1.2.3.4:9092") == (bytes([1, 2, 3, 4]), 9092)
    assert parse_endpoint("[::1]:9092") == (bytes(15) + b"\x01", 9092)
    with pytest.raises(ValueError):
        parse_endpoint("x:1")


def test_index_locate_and_back():
    index = CaptureIndex()
    for f in range(2):
        no = index.add_file(f"f{f}", True)
        index.add_checkpoints(no, [Checkpoint(24 + k, (f * 10 + k) * 100, k) for k in range(5)])
    assert index.locate(0) == (0, 0)
    assert index.locate(250) == (0, 2)
    assert index.locate(1050) == (1, 0)
    assert index.locate(10**9) == (1, 4)
    assert index.back((1, 1), 1) == (1, 0)
    assert index.back((1, 1), 2) == (0, 4)
    assert index.back((1, 1), 100) == (0, 0)


# ---------------------------------------------------------------------------- pcapfile seeking

def _tail_equal(path: Path, every: int) -> None:
    with open_capture(path, checkpoint_every=every) as s:
        pkts = list(s)
        cps = list(s.checkpoints)
    assert cps and cps[0].packet_index == 0
    assert [cp.packet_index for cp in cps] == list(range(0, len(pkts), every))
    for cp in cps:
        assert cp.ts_ns == pkts[cp.packet_index].ts_ns
        with open_capture(path, start=cp) as s2:
            tail = list(s2)
            assert s2.packets_read == len(pkts)
        assert tail == pkts[cp.packet_index:]


def test_pcap_checkpoints_resume(tmp_path):
    _tail_equal(CAPTURES / "librdkafka_admin.pcap", 9)


def test_pcapng_checkpoints_resume(tmp_path):
    path = tmp_path / "x.pcapng"
    pkts = [CapturedPacket(1_700_000_000_000_000_000 + i * 1000, 1 if i % 3 else 101,
                           bytes([i % 256]) * (10 + i), 10 + i) for i in range(40)]
    with PcapNgWriter(path) as w:
        for p in pkts:
            w.write(p)
    _tail_equal(path, 4)


def test_start_needs_a_seekable_file(tmp_path):
    src = CAPTURES / "librdkafka_admin.pcap"
    with open_capture(src, checkpoint_every=10) as s:
        list(s)
        cp = s.checkpoints[2]
    gz = tmp_path / "a.pcap.gz"
    with open(src, "rb") as f, gzip.open(gz, "wb") as g:
        shutil.copyfileobj(f, g)
    with open_capture(gz, checkpoint_every=10) as s:
        assert not s.seekable
        list(s)
        assert [c.packet_index for c in s.checkpoints][:3] == [0, 10, 20]
    with pytest.raises(CaptureError):
        open_capture(gz, start=cp)
    with pytest.raises(CaptureError):
        open_capture(src, start=Checkpoint(24, 0, 1, (False, (), 0)))
