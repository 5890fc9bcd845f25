"""Labels a peer can choose are bounded (issue 45 item 3): a capture whose client sends
every API version and api_key it likes, and whose broker answers one Produce with thousands
of error codes no Kafka release defines, gives a bounded number of series; what was folded
is counted in ``kafkasniff_metrics_capped_total`` and nothing is lost from the sums."""

from __future__ import annotations

import json
import struct
from dataclasses import replace

from kafkasniff.metrics.families import OTHER, UNKNOWN_API, UNKNOWN_ERROR, ExchangeMetrics, \
    openmetrics_text
from kafkasniff.protocol.legacy07 import ERRORS_07, REQUEST_TYPES
from kafkasniff.protocol.primitives import RawRecords
from kafkasniff.protocol.schema import load_definitions
from tests.cli.common import run
from tests.conftest import CAPTURES, decode_capture
from tests.protocol.encoder import encode

from .helpers import parse_openmetrics, sum_by

BROKER_PORT = 9092
#: versions no definition has, for Produce (api_key 0): above v13 and below v0
BAD_VERSIONS = list(range(14, 32768, 128)) + list(range(-32768, -1, 128))
#: api keys no definition has
BAD_KEYS = list(range(1000, 32768, 128))
#: error codes no Kafka release defines, all in one Produce response
BAD_CODES = list(range(1000, 3000))


def _packet(src: tuple, dst: tuple, seq: int, ack: int, flags: int, payload: bytes) -> bytes:
    tcp = struct.pack(">HHIIBBHHH", src[1], dst[1], seq, ack, 5 << 4, flags, 65535, 0, 0)
    ip_len = 20 + len(tcp) + len(payload)
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, ip_len, 0, 0x4000, 64, 6, 0,
                     bytes(src[0]), bytes(dst[0]))
    eth = b"\x00\x00\x00\x00\x00\x02" + b"\x00\x00\x00\x00\x00\x01" + b"\x08\x00"
    return eth + ip + tcp + payload


def write_pcap(path, exchanges: list[tuple[bytes, bytes | None]]) -> None:
    """A pcap (Ethernet) of one TCP connection, handshake included: each request frame, then
    its response frame when given (frames without their size prefix)."""
    cli, brk = ((10, 0, 0, 1), 40000), ((10, 0, 0, 2), BROKER_PORT)
    syn, ack_f, psh = 0x02, 0x10, 0x18
    packets = [(cli, brk, 1000, 0, syn, b""), (brk, cli, 5000, 1001, syn | ack_f, b""),
               (cli, brk, 1001, 5001, ack_f, b"")]
    cseq, bseq = 1001, 5001
    for req, resp in exchanges:
        data = struct.pack(">i", len(req)) + req
        packets.append((cli, brk, cseq, bseq, psh, data))
        cseq += len(data)
        if resp is not None:
            data = struct.pack(">i", len(resp)) + resp
            for i in range(0, len(data), 60000):
                packets.append((brk, cli, bseq, cseq, psh, data[i:i + 60000]))
            bseq += len(data)
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1)]
    for k, (src, dst, seq, ack, flags, payload) in enumerate(packets):
        frame = _packet(src, dst, seq, ack, flags, payload)
        out.append(struct.pack("<IIII", 1_700_000_000 + k // 1000, (k % 1000) * 1000,
                               len(frame), len(frame)))
        out.append(frame)
    path.write_bytes(b"".join(out))


def _request(api_key: int, version: int, corr: int, body: bytes = b"") -> bytes:
    client_id = b"hostile"
    return struct.pack(">hhih", api_key, version, corr, len(client_id)) + client_id + body


def hostile_capture(path) -> None:
    """Produce v3 answered with every code of ``BAD_CODES`` (one partition each, plus two
    known codes), then requests of every version of ``BAD_VERSIONS`` and every api_key of
    ``BAD_KEYS``, each answered with a few bytes."""
    defs = load_definitions()
    req = encode(defs.plan("ProduceRequest", 3), {
        "transactional_id": None, "acks": 1, "timeout_ms": 1000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0,
                                                           "records": RawRecords(b"")}]}]})
    parts = [{"index": i, "error_code": code, "base_offset": -1, "log_append_time_ms": -1}
             for i, code in enumerate(BAD_CODES + [6, 0, 6])]
    resp = encode(defs.plan("ProduceResponse", 3), {
        "responses": [{"name": "t", "partition_responses": parts}], "throttle_time_ms": 0})
    exchanges = [(_request(0, 3, 1, req), struct.pack(">i", 1) + resp)]
    corr = 2
    for api_key, version in [(0, v) for v in BAD_VERSIONS] + [(k, 0) for k in BAD_KEYS]:
        exchanges.append((_request(api_key, version, corr, b"\x00" * 8),
                          struct.pack(">i", corr) + b"\x00" * 8))
        corr += 1
    write_pcap(path, exchanges)


def allowed_values() -> dict[str, set[str]]:
    """Every value the wire-chosen labels may take: the definitions' API names, versions and
    error names, Kafka 0.7's, and the folded values."""
    defs = load_definitions()
    return {
        "api_name": {a.name for a in defs.apis.values()} | {UNKNOWN_API, "Unknown (0.7)"}
        | {f"{n} (0.7)" for n in REQUEST_TYPES.values()},
        "api_version": {str(v) for a in defs.apis.values()
                        for v in range(a.min_version, a.max_version + 1)} | {"-1", OTHER},
        "error_name": {e.name for e in defs.errors.values()} | set(ERRORS_07.values())
        | {UNKNOWN_ERROR},
    }


def test_hostile_versions_keys_and_error_codes_are_folded(tmp_path):
    pcap = tmp_path / "hostile.pcap"
    hostile_capture(pcap)
    om = tmp_path / "m.txt"
    res = run("stats", "--json", "--jobs", "1", "--port", BROKER_PORT, "--openmetrics", om,
              pcap)
    assert res.exit_code == 0, res.output
    rep = json.loads(res.output)
    n_bad = len(BAD_VERSIONS) + len(BAD_KEYS)
    assert rep["total"]["count"] == 1 + n_bad          # the capture is what it means to be
    assert len(rep["total"]["errors"]) >= len(BAD_CODES)
    s = parse_openmetrics(om.read_text())
    allowed = allowed_values()
    seen: dict[str, set] = {k: set() for k in allowed}
    for name, labels, _ in s:
        for label, ok in allowed.items():
            if label in labels:
                seen[label].add(labels[label])
                assert labels[label] in ok, (name, label, labels[label])
        if "error_type" in labels:
            assert labels["error_type"] in allowed["error_name"] | {""}, labels
    assert OTHER in seen["api_version"] and UNKNOWN_API in seen["api_name"]
    assert UNKNOWN_ERROR in seen["error_name"]
    assert len(s) < 200, len(s)                         # was thousands of series
    # what was folded is counted: exchanges for api_name / api_version, exchange-error
    # pairs for error_name
    capped = sum_by(s, "kafkasniff_metrics_capped_total", "label")
    assert capped == {"api_name": len(BAD_KEYS), "api_version": n_bad,
                      "error_name": len(BAD_CODES)}
    # nothing is lost: the sums are those of stats
    assert sum_by(s, "kafkasniff_exchanges_total") == rep["total"]["count"]
    assert sum_by(s, "kafkasniff_errors_total") == sum(rep["total"]["errors"].values())
    assert sum_by(s, "kafkasniff_errors_total", "error_name") == {
        UNKNOWN_ERROR: len(BAD_CODES), "NOT_LEADER_OR_FOLLOWER": 1}
    assert sum_by(s, "kafkasniff_exchanges_total", "api_version", api_name="Produce") == {
        "3": 1, OTHER: len(BAD_VERSIONS)}
    assert sum_by(s, "kafkasniff_request_duration_seconds_count") == \
        rep["total"]["latency_count"]


def test_merged_decoder_counts_fold_the_same_way(tmp_path):
    """Decoders (live, ``stats --jobs``) fold what the wire chose before they send their
    deltas; the collector's merge gives what one instance counting everything gives."""
    pcap = tmp_path / "hostile.pcap"
    hostile_capture(pcap)
    exchanges = decode_capture(pcap).exchanges
    direct = ExchangeMetrics()
    for ex in exchanges:
        direct.add(ex)
    merged = ExchangeMetrics()
    decoders = [ExchangeMetrics(**merged.settings(), decoder=True) for _ in range(2)]
    for i, ex in enumerate(exchanges):
        decoders[i % 2].add(ex)
    for d in decoders:
        merged.merge(d.take_delta())
    assert merged.data == direct.data
    assert openmetrics_text(merged) == openmetrics_text(direct)


def test_known_values_are_kept():
    """Versions inside the definitions, known API names, Kafka error names, Kafka 0.7's
    names and the no-version ``-1`` are not folded; a negative api_key (raw SASL tokens,
    orphans) stays ``Unknown`` uncounted."""
    ex = next(ex for ex in decode_capture(CAPTURES / "librdkafka_errors_latency.pcap")
              .exchanges if ex.status == "paired")
    m = ExchangeMetrics()
    m.add(replace(ex, api_key=0, api_name="Produce", api_version=13,
                  errors=("NOT_LEADER_OR_FOLLOWER",)))
    m.add(replace(ex, api_key=0, api_name="Produce", api_version=0, errors=()))
    m.add(replace(ex, api_key=-2, api_name="SaslToken", api_version=-1, errors=()))
    m.add(replace(ex, api_key=1, api_name="FETCH (0.7)", api_version=-1,
                  errors=("OffsetOutOfRange",)))
    s = parse_openmetrics(openmetrics_text(m).decode())
    assert sum_by(s, "kafkasniff_exchanges_total", "api_version", api_name="Produce") == \
        {"13": 1, "0": 1}
    assert set(sum_by(s, "kafkasniff_exchanges_total", "api_name")) == \
        {"Produce", "Unknown", "FETCH (0.7)"}
    assert set(sum_by(s, "kafkasniff_errors_total", "error_name")) == \
        {"NOT_LEADER_OR_FOLLOWER", "OffsetOutOfRange"}
    assert sum_by(s, "kafkasniff_metrics_capped_total") == 0
