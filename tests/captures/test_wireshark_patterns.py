"""The Wireshark Kafka dissector failure patterns (captures/regressions/wireshark_*.pcap,
written by captures/craft_wireshark_patterns.py) and what kafkasniff does with each: every
exchange kept and paired, each damaged part one counted issue saying what is wrong, the
sound parts decoded, nothing raised, no internal_error, every byte accounted for."""

from __future__ import annotations

import importlib.util
import json
import sys
import tracemalloc
from collections import Counter

import pytest
from click.testing import CliRunner

from kafkasniff.cli import main
from kafkasniff.model import Exchange
from kafkasniff.pipeline import Pipeline, PipelineOptions, analyze
from tests.conftest import CAPTURES, decode_capture

REGRESSIONS = CAPTURES / "regressions"
TAGGED = REGRESSIONS / "wireshark_17811_tagged_field_loop.pcap"
SNAPPY = REGRESSIONS / "wireshark_19105_snappy_produce.pcap"
LZ4 = REGRESSIONS / "wireshark_cve_2020_17498_lz4.pcap"
ALL = [TAGGED, SNAPPY, LZ4]


def _script():
    """captures/craft_wireshark_patterns.py as a module (it imports its neighbours)."""
    sys.path.insert(0, str(CAPTURES))
    try:
        spec = importlib.util.spec_from_file_location(
            "craft_wireshark_patterns", CAPTURES / "craft_wireshark_patterns.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(CAPTURES))
    return mod


def by_conn(d, port: int, corr: int) -> Exchange:
    [ex] = [ex for ex in d.exchanges
            if ex.client.endswith(f":{port}") and ex.correlation_id == corr]
    return ex


def kinds(ex: Exchange) -> Counter:
    return Counter(str(i.kind) for i in ex.issues)


def all_kinds(d) -> Counter:
    return Counter(str(i.kind) for _, i in d.all_issues())


def batches(ex: Exchange) -> list:
    return [b for loc in ex.record_fields for b in loc.records.decoded.batches]


def values(batch) -> list[bytes] | None:
    return None if batch.records is None else [r.value for r in batch.records]


# --------------------------------------------------------------------------- all three

def test_the_script_writes_the_committed_captures(tmp_path):
    """The committed captures are what the script writes (deterministic, byte for byte)."""
    assert _script().main(["--out", str(tmp_path)]) == 0
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == sorted(p.name for p in ALL)
    for p in ALL:
        assert (tmp_path / p.name).read_bytes() == p.read_bytes(), p.name


@pytest.mark.parametrize("path", ALL, ids=[p.stem for p in ALL])
def test_no_internal_error_and_every_byte_accounted_for(path):
    for options in ({}, {"with_records": True}):
        d = decode_capture(path, **options)
        assert "internal_error" not in all_kinds(d)
        ledger = d.pipeline.stats.bytes
        assert sum(ledger.values()) == path.stat().st_size, dict(ledger)
        assert ledger["kafka_resync"] == ledger["unread"] == ledger["kafka_truncated"] == 0


@pytest.mark.parametrize("path", ALL, ids=[p.stem for p in ALL])
def test_read_json_and_stats_run(path):
    """``read --json -q`` gives one line per exchange (issues not attached to one are lines
    too) and ``stats`` counts every exchange; both exit 0."""
    d = decode_capture(path)
    runner = CliRunner()
    res = runner.invoke(main, ["read", "--json", "-q", str(path)], catch_exceptions=False)
    assert res.exit_code == 0
    objs = [json.loads(line) for line in res.output.splitlines()]
    assert sum(o["type"] == "exchange" for o in objs) == len(d.exchanges)
    assert "internal_error" not in res.output
    res = runner.invoke(main, ["stats", str(path)], catch_exceptions=False)
    assert res.exit_code == 0
    assert f"\n{len(d.exchanges)} exchanges, " in res.output


# --------------------------------------------------------------------------- tagged fields

def test_tagged_field_counts_beyond_the_frame_are_one_issue():
    """Wireshark #17811: a tagged-field count of 1,000,000 at the end of a 63-byte
    ApiVersions v3 response, and of 2^31 in a 9-byte response header v1. Each is one issue
    naming the section; the exchange stays paired, what came before the count is decoded."""
    d = decode_capture(TAGGED)
    body = by_conn(d, 50502, 1)
    assert (body.api_name, body.api_version, body.status) == ("ApiVersions", 3, "paired")
    assert kinds(body) == {"body_decode_error": 1}
    [issue] = body.issues
    assert issue.direction == "response" and issue.field_path == "_tagged_fields"
    assert issue.message == "tagged field count 1000000 exceeds the bytes left"
    assert issue.frame_offset == body.response.frame_bytes - 4 == 63
    assert [k["api_key"] for k in body.response.body["api_keys"]] == [0, 1, 2, 3, 17, 18, 36]
    header = by_conn(d, 50504, 1)
    assert (header.api_name, header.api_version, header.status) == ("Metadata", 9, "paired")
    assert kinds(header) == {"header_decode_error": 1}
    [issue] = header.issues
    assert issue.direction == "response" and issue.length_bytes == 4 + 9
    assert issue.message == ("response header: tagged field count exceeds the frame at "
                             "header._tagged_fields (offset 9)")
    assert issue.correlation_id == 1 and header.response.header == {"correlation_id": 1}
    # located like a request header's issue (field_path and frame_offset were empty)
    assert (issue.field_path, issue.frame_offset) == ("header._tagged_fields", 9)


def test_a_request_header_with_an_impossible_tagged_field_count_keeps_its_exchange():
    """Wireshark #17811 in a request header: ApiVersions v3, header v2 declaring 2^31 tagged
    fields in a 45-byte payload. The header's first fields were read (api_key 18, v3,
    correlation id 1): the request is kept with a header_decode_error and its response
    pairs (ApiVersions v3), as a response header with the same damage does (the request was
    dropped and its response became an orphan guessed as ApiVersions v5)."""
    d = decode_capture(TAGGED)
    assert "orphan_response" not in all_kinds(d)
    ex = by_conn(d, 50500, 1)
    assert (ex.api_name, ex.api_version, ex.status) == ("ApiVersions", 3, "paired")
    [issue] = [i for _, i in d.all_issues() if i.kind == "header_decode_error"
               and i.direction == "request"]
    assert issue.correlation_id == 1 and issue.length_bytes == 4 + 45
    assert issue.field_path == "header._tagged_fields"
    assert issue.message == ("request header: tagged field count exceeds the frame at "
                             "header._tagged_fields (offset 24)")
    assert by_conn(d, 50500, 2).status == "paired"
    assert ex.response.body["api_keys"][0] == {"api_key": 0, "min_version": 3,
                                               "max_version": 11}


def test_zero_length_tagged_fields_that_fit_are_all_kept():
    """20,000 zero-length tagged fields in a request header v2, tags 0..19,999 (valid
    KIP-482) or every tag 0: all kept as unknown fields, the body after them decoded."""
    d = decode_capture(TAGGED)
    for port, tags in ((50501, list(range(20_000))), (50505, [0] * 20_000)):
        ex = by_conn(d, port, 1)
        assert (ex.api_name, ex.api_version, ex.status) == ("Metadata", 9, "paired")
        unknown = ex.request.header["_unknown_tagged_fields"]
        assert [f["tag"] for f in unknown] == tags
        assert {f["data"] for f in unknown} == {b""}
        assert ex.request.body["topics"] == [{"name": "wireshark"}]
        assert ex.response.body["cluster_id"] == "wireshark-cluster"
        if port == 50501:
            assert kinds(ex) == {}
        else:   # one departure for the header, not one per field (it passed silently)
            assert kinds(ex) == {"spec_departure": 1}
            assert ex.issues[0].message == ("header tagged fields out of order: tag 0 after "
                                            "tag 0 (19999 of 20000 fields; tags must ascend, "
                                            "KIP-482)")
            assert ex.issues[0].direction == "request"


def test_tags_out_of_order_are_budgeted_departures():
    """50,000 zero-length tagged fields, every tag 0 (100,000 zero bytes), ending a Metadata
    v9 response: each repeat departs from the spec, the first 100 are listed and one
    budget_exhausted counts the 49,899 others; the body is decoded."""
    d = decode_capture(TAGGED)
    ex = by_conn(d, 50503, 1)
    assert (ex.api_name, ex.status) == ("Metadata", "paired")
    assert kinds(ex) == {"spec_departure": 100, "budget_exhausted": 1}
    departures = [i for i in ex.issues if i.kind == "spec_departure"]
    assert {i.message for i in departures} == {"tag 0 after tag 0: tags must ascend"}
    assert {i.field_path for i in departures} == {"_tagged_fields"}
    [budget] = [i for i in ex.issues if i.kind == "budget_exhausted"]
    assert budget.message.startswith("budget frame_issues (100) spent: 49899 more issues")
    assert d.pipeline.stats.budgets.skipped["frame_issues"] == 49_899
    assert ex.response.body["brokers"][0]["host"] == "broker1.kafka.test"
    assert ex.response.body["cluster_id"] == "wireshark-cluster"


def test_a_body_lists_at_most_a_thousand_departures_even_without_a_frame_budget():
    """With frame_issues unbounded, the lenient decoder itself lists 1,000 departures and
    counts the other 48,999 in one closing issue (it held all 49,999 before any budget
    applied: 195 MB for a megabyte of zero-byte tags)."""
    from kafkasniff.content.budgets import Budgets

    d = decode_capture(TAGGED, budgets=Budgets(frame_issues=0))
    ex = by_conn(d, 50503, 1)
    assert kinds(ex) == {"spec_departure": 1000, "budget_exhausted": 1}
    [closing] = [i for i in ex.issues if i.kind == "budget_exhausted"]
    assert closing.message.startswith("48999 more spec departures in this body")


def test_every_tagged_field_connection_goes_on():
    """After each damaged frame the connection's next exchange (Metadata v9, correlation id
    2) is decoded and paired without issue."""
    d = decode_capture(TAGGED)
    for port in range(50500, 50506):
        ex = by_conn(d, port, 2)
        assert (ex.api_name, ex.api_version, ex.status) == ("Metadata", 9, "paired")
        assert kinds(ex) == {}
    assert len(d.exchanges) == 12
    assert set(all_kinds(d)) <= {"header_decode_error", "body_decode_error", "spec_departure",
                                 "budget_exhausted", "orphan_response"}


def test_tagged_field_counts_do_not_size_memory():
    """Counts of 2^31 and 1,000,000 allocate nothing: decoding the capture (220 KB, 90,000
    zero-length tagged fields that are really there) stays under 64 MiB of Python memory."""
    decode_capture(TAGGED)                  # decoders compiled
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        n = sum(1 for rec in analyze([TAGGED], pipeline=Pipeline(PipelineOptions()))
                if type(rec) is Exchange)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert n == 12
    assert peak < 64 * 1024 * 1024, peak


# --------------------------------------------------------------------------- snappy

SNAPPY_SETS = [  # (port, correlation id, topic, Produce version, magic)
    (50510, 1, "snappy-v2-xerial", 7, 2),
    (50510, 2, "snappy-v2-xerial-blocks", 7, 2),
    (50510, 3, "snappy-v2-raw", 7, 2),
    (50511, 1, "snappy-m1-xerial", 2, 1),
    (50511, 2, "snappy-m1-raw", 2, 1),
    (50512, 1, "snappy-m0-xerial", 0, 0),
    (50512, 2, "snappy-m0-raw", 0, 0),
]


@pytest.mark.parametrize("n,port,corr,topic,version,magic",
                         [(n, *s) for n, s in enumerate(SNAPPY_SETS)],
                         ids=[s[2] for s in SNAPPY_SETS])
def test_snappy_produce_records_decode(n, port, corr, topic, version, magic):
    """Wireshark #19105: snappy Produce requests, xerial-framed (one block, 64-byte blocks)
    and raw, in record batches (magic 2) and message sets (magic 1, magic 0): each record's
    offset, key and value as produced, no issue."""
    d = decode_capture(SNAPPY, with_records=True)
    ex = by_conn(d, port, corr)
    assert (ex.api_name, ex.api_version, ex.status) == ("Produce", version, "paired")
    assert ex.topics == (topic,) and kinds(ex) == {}
    [batch] = batches(ex)
    assert (batch.magic, batch.codec, batch.record_count) == (magic, "snappy", 4)
    expected = [f"snappy-{n}-{i}".encode() for i in range(3)] + [f"snappy-{n}-long-".encode() * 40]
    assert values(batch) == expected
    assert [(r.offset, r.key) for r in batch.records] == [(i, f"k{i}".encode()) for i in range(4)]
    if magic:
        assert [r.timestamp_ms for r in batch.records] == [1_704_153_600_000 + i for i in range(4)]
    assert ex.response.body is not None and ex.errors == ()


def test_snappy_records_in_read_json():
    """``read --json -q --records`` prints the decompressed records."""
    res = CliRunner().invoke(main, ["read", "--json", "-q", "--records", str(SNAPPY)],
                             catch_exceptions=False)
    assert res.exit_code == 0
    texts = []
    for line in res.output.splitlines():
        o = json.loads(line)
        for t in o["request"]["body"]["topic_data"]:
            for p in t["partition_data"]:
                for b in p["records"]["batches"]:
                    texts += [r["value"]["text"] for r in b.get("records", [])
                              if not r["value"].get("truncated")]
    assert texts == [f"snappy-{n}-{i}" for n in range(7) for i in range(3)]


def test_damaged_snappy_is_one_issue_per_batch():
    """An xerial block length past the section and a raw block claiming 1 GiB: one issue
    each (decompression_error, decompression_limit), the batch summarised from its header,
    the exchange paired."""
    d = decode_capture(SNAPPY, with_records=True)
    expected = {1: ("decompression_error", "snappy (xerial): block runs past the data"),
                2: ("decompression_limit",
                    "snappy: decompressed size exceeds the limit of 67108864 bytes")}
    for corr, (kind, text) in expected.items():
        ex = by_conn(d, 50513, corr)
        assert (ex.api_name, ex.status) == ("Produce", "paired")
        [issue] = ex.issues
        assert issue.kind == kind and issue.direction == "request"
        assert issue.message == f"record batch at byte 0 (base offset 0): {text}"
        [batch] = batches(ex)
        assert batch.records is None and batch.record_count == 4
        assert ex.records.records == 4 and ex.records.uncompressed_bytes is None
    assert all_kinds(d) == {"decompression_error": 1, "decompression_limit": 1}
    assert len(d.exchanges) == 9 and {ex.status for ex in d.exchanges} == {"paired"}


# --------------------------------------------------------------------------- lz4

LZ4_DAMAGE = [  # (topic, what the issue says), in capture order; None: decoded
    ("lz4-bad_magic", "lz4: not an LZ4 frame (bad magic)"),
    ("lz4-wrong_header_checksum", None),
    ("lz4-truncated", "lz4: data ends before the end of the frame"),
    ("lz4-oversize_block_size", "ERROR_maxBlockSize_invalid"),
    ("lz4-block_over_max", "ERROR_maxBlockSize_invalid"),
    ("lz4-content_size_lies", "ERROR_frameSize_wrong"),
    ("lz4-second_block_damaged", "ERROR_decompressionFailed"),
]


def test_damaged_lz4_in_produce_requests():
    """CVE-2020-17498: seven Produce v7 requests, one damaged lz4 batch each, then a valid
    one. Every exchange is paired; each frame that does not decompress is one
    decompression_error naming the LZ4 failure and its batch is summarised from its header;
    a wrong header checksum alone is read as the pre-0.10 quirk (KAFKA-3160), so that
    batch decodes, like the valid one, with a spec_departure (magic 2: Kafka rejects it)."""
    d = decode_capture(LZ4, with_records=True)
    for corr, (topic, text) in enumerate(LZ4_DAMAGE, start=1):
        ex = by_conn(d, 50520, corr)
        assert (ex.api_name, ex.api_version, ex.status, ex.topics) == \
            ("Produce", 7, "paired", (topic,))
        [batch] = batches(ex)
        assert (batch.magic, batch.codec, batch.record_count) == (2, "lz4", 3)
        if text is None:
            assert kinds(ex) == {"spec_departure": 1}
            assert "KAFKA-3160" in ex.issues[0].message
            assert values(batch) == [b"lz4-bad-0", b"lz4-bad-1", b"lz4-bad-2"]
            continue
        [issue] = ex.issues
        assert issue.kind == "decompression_error" and issue.direction == "request"
        assert issue.message.startswith("record batch at byte 0 (base offset 0): lz4: ")
        assert text in issue.message, issue.message
        assert issue.field_path == "topic_data[0].partition_data[0].records"
        assert batch.records is None and batch.uncompressed_bytes is None
    valid = by_conn(d, 50520, 8)
    assert valid.topics == ("lz4-valid",) and kinds(valid) == {}
    [batch] = batches(valid)
    assert values(batch) == [b"lz4-ok-0", b"lz4-ok-1", b"lz4-ok-2"]


def test_damaged_lz4_batches_in_one_fetch_response():
    """The seven damaged batches then a valid one in one partition of a Fetch response:
    each damaged batch is one issue naming its offset, the batches after it are still
    read (offsets 0-23), the sound ones decoded."""
    d = decode_capture(LZ4, with_records=True)
    ex = by_conn(d, 50521, 1)
    assert (ex.api_name, ex.api_version, ex.status) == ("Fetch", 11, "paired")
    got = batches(ex)
    assert [b.base_offset for b in got] == list(range(0, 24, 3))
    assert [values(b) for b in got] == \
        [None, [b"lz4-bad-0", b"lz4-bad-1", b"lz4-bad-2"], None, None, None, None, None,
         [b"lz4-ok-0", b"lz4-ok-1", b"lz4-ok-2"]]
    assert [r.offset for r in got[-1].records] == [21, 22, 23]
    assert kinds(ex) == {"decompression_error": 6, "spec_departure": 1}
    damaged = [(3 * i, text) for i, (_, text) in enumerate(LZ4_DAMAGE) if text]
    errors = [i for i in ex.issues if i.kind == "decompression_error"]
    for issue, (offset, text) in zip(errors, damaged, strict=True):
        assert issue.direction == "response"
        assert f"(base offset {offset}): lz4: " in issue.message and text in issue.message
    assert ex.records.batches == 8 and ex.records.records == 24


def test_legacy_lz4_message_sets():
    """Magic 0 and magic 1 lz4 wrappers with the pre-0.10 header checksum (KAFKA-3160) and a
    correct one decode (the magic 1 one with a spec_departure: Kafka wrote that checksum only
    on magic 0); a wrapper with a bad frame magic and a KAFKA-3160 one whose block
    runs past the frame are one decompression_error each."""
    d = decode_capture(LZ4, with_records=True)
    decoded = {1: (0, b"lz4-m0-kafka3160-"), 2: (1, b"lz4-m1-kafka3160-"), 3: (1, b"lz4-m1-ok-")}
    for corr, (magic, prefix) in decoded.items():
        ex = by_conn(d, 50522, corr)
        assert ex.status == "paired"
        assert kinds(ex) == ({"spec_departure": 1} if corr == 2 else {})
        [batch] = batches(ex)
        assert (batch.magic, batch.codec) == (magic, "lz4")
        assert values(batch) == [prefix + b"0", prefix + b"1"]
    damaged = {4: "magic 1 message at byte 0 (offset 0): lz4: not an LZ4 frame (bad magic)",
               5: "magic 0 message at byte 0 (offset 0): lz4: block runs past the data"}
    for corr, message in damaged.items():
        ex = by_conn(d, 50522, corr)
        assert ex.status == "paired"
        [issue] = ex.issues
        assert (issue.kind, issue.message) == ("decompression_error", message)
        [batch] = batches(ex)
        assert batch.records in (None, ())


def test_lz4_capture_issue_totals():
    """Exactly one issue per damaged LZ4 frame: 6 in Produce requests, 6 in the Fetch
    response, 2 legacy wrappers, and a spec_departure per pre-0.10 header checksum on magic
    1 or 2 (Produce, Fetch, legacy); every exchange paired."""
    d = decode_capture(LZ4, with_records=True)
    assert all_kinds(d) == {"decompression_error": 14, "spec_departure": 3}
    assert len(d.exchanges) == 14 and {ex.status for ex in d.exchanges} == {"paired"}
    assert d.issues == []
