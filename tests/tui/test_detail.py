"""The detail view decodes exactly what ``read --json --records`` shows: both go through the
one content decoder (kafkasniff.content.frames), header-decode failures included."""

from __future__ import annotations

import json

import pytest

from kafkasniff.output.render import exchange_to_dict
from kafkasniff.protocol.schema import load_definitions
from kafkasniff.tui.source import FileSource
from tests.capture.builders import ether, ipv4, pcap, tcp_header
from tests.conftest import CAPTURES, decode_capture
from tests.pairing.frames import i16, i32, metadata_v1_request, request, request_header, response
from tests.protocol.encoder import encode, example_value
from tests.tui.conftest import load_store, loaded_store

ALL = sorted(CAPTURES.glob("*.pcap"))
DEFS = load_definitions()


def _same_as_pipeline(path) -> int:
    src = FileSource([str(path)])
    store = load_store(src)
    ref = decode_capture(path, with_records=True).exchanges
    assert len(ref) == len(store)
    for i, ex in enumerate(ref):
        d = src.detail(store.row(i), store.row_issues(i))
        if not d.frames:            # kept whole by the source (no frame bytes to decode)
            continue
        assert json.dumps(exchange_to_dict(d.exchange), default=str) == \
            json.dumps(exchange_to_dict(ex), default=str), (path.name, i, ex.api_name)
    return len(ref)


@pytest.mark.parametrize("path", ALL, ids=[p.stem for p in ALL])
def test_detail_equals_read_json_on_every_capture(path):
    _same_as_pipeline(path)


def _conversation(tmp_path, client_segments, broker_segments):
    """A pcap of one connection (no handshake; broker port 9092), client and broker segments
    interleaved; a segment given as None is lost (its sequence numbers are skipped)."""
    records, seq, ts = [], [1000, 5000], 10**18
    c, b = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
    for k in range(max(len(client_segments), len(broker_segments))):
        for d, segs in ((0, client_segments), (1, broker_segments)):
            if k >= len(segs):
                continue
            data = segs[k]
            if data is not None and not isinstance(data, int):
                src, dst, sp, dp = (c, b, 40000, 9092) if d == 0 else (b, c, 9092, 40000)
                pkt = ether(ipv4(src, dst, tcp_header(sp, dp, seq[d], seq[1 - d]) + data))
                records.append((ts // 10**9, ts % 10**9, pkt))
                ts += 1000
            seq[d] += data if isinstance(data, int) else len(data)
    path = tmp_path / "c.pcap"
    path.write_bytes(pcap(records, nano=True))
    return path


def test_detail_equals_read_json_when_headers_do_not_decode(tmp_path):
    """A flexible response whose tagged-field header runs past the frame, and a request whose
    header a gap cut after its first 8 bytes: the pipeline keeps both exchanges; the detail
    view shows the same header, raw body and issues."""
    # Metadata v9 is flexible: response header v1 (tagged fields); count 5, nothing after
    bad_header = i32(3) + b"\x05"
    good = metadata_v1_request(2)
    # a SaslHandshake v1 request whose client_id bytes are lost in a gap
    cut = request_header(17, 1, 4, "a-client-id-long-enough") + i16(5) + b"PLAIN"
    cut_frame = i32(len(cut)) + cut
    md9 = DEFS.plan("MetadataRequest", 9)
    client = [request(3, 9, 3, encode(md9, example_value(md9)), flexible=True), good,
              cut_frame[:12], len(cut_frame) - 20, cut_frame[-8:]]
    broker = [i32(len(bad_header)) + bad_header, response(2, b"")]
    path = _conversation(tmp_path, client, broker)
    exchanges = decode_capture(path, with_records=True).exchanges
    kinds = {ex.correlation_id: [i.kind for i in ex.issues] for ex in exchanges}
    assert "header_decode_error" in kinds[3]
    assert exchanges and _same_as_pipeline(path) == len(exchanges)


def test_kafka07_frames_are_found_again():
    """Kafka 0.7 frames carry their sequence number too: their detail is decoded again from
    the capture and equals the pipeline's."""
    src, store = loaded_store(CAPTURES / "crafted_kafka07.pcap")
    assert len(store) == 8
    for i in range(len(store)):
        d = src.detail(store.row(i))
        assert d.exchange is not None
    ref = decode_capture(CAPTURES / "crafted_kafka07.pcap").exchanges
    assert [exchange_to_dict(src.detail(store.row(i)).exchange) for i in range(8)] == \
        [exchange_to_dict(ex) for ex in ref]


def test_detail_spans_cover_the_fields():
    src, store = loaded_store(CAPTURES / "librdkafka_produce_consume.pcap")
    checked = 0
    for i in range(len(store)):
        info = store.row(i)
        if info.api_name != "Produce":
            continue
        d = src.detail(info)
        req = d.frames["request"]
        a, b = req.spans["request.header.client_id"]
        assert req.data[a + 2:b].decode() == info.client_id
        a, b = req.spans["request.body.acks"]
        assert int.from_bytes(req.data[a:b], "big", signed=True) == \
            d.exchange.request.body["acks"]
        a, b = req.spans["request.body.topic_data[0].partition_data[0].records"]
        raw = d.exchange.request.body["topic_data"][0]["partition_data"][0]["records"]
        assert req.data[b - raw.size_bytes:b] == raw.data
        checked += 1
    assert checked >= 2
