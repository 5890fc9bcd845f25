"""Third-party captures (../shared/captures-public): nDPI's and DeepFlow's Kafka test pcaps.

DeepFlow's ``.result`` files are its own decode (api, version, correlation id, client id,
topic, status code, response time ``rrt`` in microseconds): a second opinion we compare to.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest

from tests.conftest import decode_capture

_FIELD = re.compile(r'(\w+): (Some\(([^)]*)\)|"([^"]*)"|None|[\w-]+)')


def parse_result(text: str) -> list[dict]:
    """DeepFlow's KafkaInfo lines as dicts (only the fields we compare)."""
    out = []
    for line in text.splitlines():
        if not line.startswith("KafkaInfo"):
            continue
        d = {}
        for m in _FIELD.finditer(line):
            key, raw, some, quoted = m.group(1), m.group(2), m.group(3), m.group(4)
            if some is not None:
                d[key] = some.strip('"')
            elif quoted is not None:
                d[key] = quoted
            else:
                d[key] = raw
        out.append(d)
    return out


def deepflow_cases(public_dir):
    return sorted((public_dir / "deepflow").glob("*.pcap"))


def test_deepflow_captures_agree_with_deepflow(public_dir):
    checked = 0
    for pcap in deepflow_cases(public_dir):
        d = decode_capture(pcap)
        assert d.exchanges, pcap.name
        assert not any(i.severity == "error" for _, i in d.all_issues()), pcap.name
        result = pcap.with_suffix(".result")
        if not result.is_file():
            continue
        by_corr = {ex.correlation_id: ex for ex in d.exchanges}
        for info in parse_result(result.read_text()):
            corr = int(info["correlation_id"])
            ex = by_corr[corr]
            assert ex.api_name == info["api_key"], (pcap.name, corr)
            assert ex.api_version == int(info["api_version"])
            if info["msg_type"] == "Request":
                assert ex.client_id == info["client_id"]
                if info.get("topic_name"):
                    assert info["topic_name"] in ex.topics
                assert ex.request_bytes == int(info["captured_request_byte"])
            else:
                assert ex.response_bytes == int(info["captured_response_byte"])
                rrt_us = int(info["rrt"])
                if rrt_us:
                    assert ex.latency_ns // 1000 == rrt_us, (pcap.name, ex.latency_ns)
                # DeepFlow reports status_code -2 with status Ok when it did not parse the
                # body (mixed-with-unsupported): compare only the statuses it calls errors.
                if info["status"] not in ("Ok", "Unknown"):
                    assert ex.errors, (pcap.name, info["status_code"])
                elif info["status"] == "Ok":
                    assert not ex.errors, (pcap.name, ex.errors)
            checked += 1
    assert checked >= 15


def test_deepflow_port_36333_found_by_detection(public_dir):
    """DeepFlow's captures use broker port 36333: found by request-header detection."""
    pcap = public_dir / "deepflow" / "11-join-group-v7.pcap"
    d = decode_capture(pcap)
    assert d.exchanges[0].broker.endswith(":36333")
    assert decode_capture(pcap, detect=False).exchanges == []


def test_ndpi_capture(public_dir):
    """nDPI's pcapng: two interfaces, librdkafka traffic with a lost request, mid-stream
    connections, an old librdkafka ApiVersions v0 request with 4 trailing bytes (tshark flags
    the same frames as malformed), and a Kafka 3.x console producer."""
    d = decode_capture(public_dir / "ndpi" / "kafka.pcapng")
    apis = Counter((ex.api_name, ex.api_version) for ex in d.exchanges)
    assert apis[("ApiVersions", 3)] == 1 and apis[("InitProducerId", 4)] == 1
    assert apis[("Metadata", 12)] == 1 and apis[("Produce", 9)] == 1
    assert apis[("Produce", 3)] == 2
    statuses = Counter(ex.status for ex in d.exchanges)
    assert statuses["orphan_response"] == 3
    assert all(ex.inferred for ex in d.exchanges if ex.status == "orphan_response")
    kinds = Counter(i.kind for _, i in d.all_issues())
    assert kinds["tcp_gap"] == 1
    for ex, i in d.all_issues():
        if i.kind == "trailing_bytes":
            assert ex.api_name == "ApiVersions" and ex.api_version == 0 and i.length_bytes == 4
        else:
            assert i.kind in ("tcp_gap", "orphan_response", "unanswered_request", "mid_stream_start")
            assert i.kind == "tcp_gap" or i.severity == "info"
    produce = [ex for ex in d.exchanges if ex.api_name == "Produce" and ex.api_version == 9][0]
    assert produce.topics == ("sampleTopic",) and produce.client_id == "console-producer"
    assert d.pipeline.stats.kafka_connections == 9
