"""kafkasniff.content.records: locating records fields in decoded bodies, decoding them into
issues located in the frame, and condensing them into a RecordsSummary.

Record data comes from tests/protocol/batch_encoder.py (its own CRCs and varints), bodies
from tests/pairing/frames.py and tests/protocol/encoder.py, decoded with BodyDecoder."""

from __future__ import annotations

import pytest

from kafkasniff.content.records import RecordsLocator, decode_located, summarize
from kafkasniff.issues import IssueKind
from kafkasniff.model import LocatedRecords
from kafkasniff.protocol.decoder import BodyDecoder
from kafkasniff.protocol.primitives import RawRecords
from kafkasniff.protocol.schema import load_definitions

from tests.pairing.frames import TOPIC_ID_ORDERS, produce_v3_request_body, uuid_text
from tests.protocol.batch_encoder import Rec, encode_record, message_set, record_batch
from tests.protocol.encoder import encode

DEFS = load_definitions()
DECODER = BodyDecoder(DEFS)
MAX = 1 << 20
HEADER = b"H" * 13  # a fake request header: the body starts at frame offset 13

# batch A: offsets 100-101, producer 7, timestamps 1000..1005, uncompressed
BATCH_A = record_batch([Rec(value=b"a"), Rec(value=b"b", offset_delta=1, timestamp_delta=5)],
                       base_offset=100, base_timestamp=1000, producer_id=7, producer_epoch=0,
                       base_sequence=0)
# batch B: offset 102, gzip, timestamp 2000, a wrong stored CRC
B_RECORDS = [Rec(value=b"c" * 100)]
BATCH_B = record_batch(B_RECORDS, base_offset=102, codec="gzip", base_timestamp=2000,
                       crc=0xDEADBEEF)
# a magic 1 message at offset 50, timestamp 500
MSG_C = message_set(1, [Rec(value=b"m", offset=50, timestamp=500)])
# batch D: transactional, producer 9, zstd
BATCH_D = record_batch([Rec(value=b"d" * 40)], base_offset=7, codec="zstd", base_timestamp=3000,
                       producer_id=9, producer_epoch=1, base_sequence=0, transactional=True)


def produce_body(topics) -> tuple:
    """(plan, body, payload) of a Produce v3 request body placed after HEADER."""
    payload = HEADER + produce_v3_request_body(topics=topics)
    res = DECODER.decode(0, 3, False, payload, len(HEADER))
    assert res.complete and res.issues == []
    return DEFS.plan("ProduceRequest", 3), res.value, payload


def fetch_v13_body(parts) -> tuple:
    """(plan, body) of a Fetch v13 response (topic ids only); parts: (index, records)."""
    plan = DEFS.plan("FetchResponse", 13)
    value = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic_id": uuid_text(TOPIC_ID_ORDERS), "partitions": [
            {"partition_index": i, "error_code": 0, "high_watermark": 1,
             "last_stable_offset": 1, "log_start_offset": 0, "aborted_transactions": None,
             "preferred_read_replica": -1, "records": None if rec is None else RawRecords(rec)}
            for i, rec in parts]}]}
    res = DECODER.decode(1, 13, True, encode(plan, value), 0)
    assert res.complete and res.issues == []
    return plan, res.value


def located_produce():
    plan, body, payload = produce_body((("orders", ((0, BATCH_A + BATCH_B), (1, MSG_C))),
                                        ("pay", ((2, BATCH_A[:-7]),))))
    return RecordsLocator().find(plan, body), payload


# --------------------------------------------------------------------------- locating

def test_find_topic_partition_field_path_in_wire_order():
    locs, payload = located_produce()
    assert [(loc.topic, loc.topic_id, loc.partition, loc.field_path) for loc in locs] == [
        ("orders", None, 0, "topic_data[0].partition_data[0].records"),
        ("orders", None, 1, "topic_data[0].partition_data[1].records"),
        ("pay", None, 2, "topic_data[1].partition_data[0].records"),
    ]
    assert [loc.records.data for loc in locs] == [BATCH_A + BATCH_B, MSG_C, BATCH_A[:-7]]
    # the RawRecords offsets are frame offsets of the data
    for loc in locs:
        o = loc.records.offset
        assert payload[o:o + len(loc.records.data)] == loc.records.data
    assert all(loc.resolved_topic is None for loc in locs)


def test_find_by_topic_id_and_null_records_skipped():
    """A Fetch v13 response names topics by id only; a null records field is no field."""
    plan, body = fetch_v13_body([(3, BATCH_A), (4, None)])
    [loc] = RecordsLocator().find(plan, body)
    assert (loc.topic, loc.topic_id, loc.partition) == (None, uuid_text(TOPIC_ID_ORDERS), 3)
    assert loc.field_path == "responses[0].partitions[0].records"
    assert loc.display_topic == uuid_text(TOPIC_ID_ORDERS)


def test_find_on_empty_or_missing_bodies():
    plan = DEFS.plan("ProduceRequest", 3)
    loc = RecordsLocator()
    assert loc.find(plan, None) == [] and loc.find(plan, {}) == []


@pytest.mark.parametrize("name, version, has", [
    ("ProduceRequest", 3, True),
    ("ProduceRequest", 9, True),
    ("FetchResponse", 4, True),
    ("FetchResponse", 16, True),
    ("FetchRequest", 4, False),
    ("ProduceResponse", 3, False),
    ("HeartbeatRequest", 0, False),
    ("MetadataResponse", 10, False),
])
def test_has_records(name, version, has):
    assert RecordsLocator().has_records(DEFS.plan(name, version)) is has


# --------------------------------------------------------------------------- decoding

def test_decode_located_issues_with_frame_offsets():
    """A CRC mismatch in the second batch and a cut batch in a request: issues with their
    field paths and frame offsets (field offset + offset in the field)."""
    locs, _ = located_produce()
    issues = decode_located(locs, with_records=False, max_uncompressed_bytes=MAX, defs=DEFS,
                            partial_is_issue=True)
    assert [(i.kind, i.field_path) for i in issues] == [
        (IssueKind.CRC_MISMATCH, "topic_data[0].partition_data[0].records"),
        (IssueKind.TRUNCATED_BATCH, "topic_data[1].partition_data[0].records"),
    ]
    crc, cut = issues
    assert crc.offset == locs[0].records.offset + len(BATCH_A)
    assert "0xdeadbeef" in crc.message and "base offset 102" in crc.message
    assert cut.offset == locs[2].records.offset  # the cut batch starts the field
    assert cut.message == f"the records data ends {len(BATCH_A) - 7} bytes into an " \
                          f"incomplete batch"
    assert all(loc.records.decoded is not None for loc in locs)


def test_partial_batch_not_an_issue_in_a_response():
    """A Fetch response may end inside a batch: no issue, but the summary says partial."""
    plan, body = fetch_v13_body([(0, BATCH_A + BATCH_A[:-3])])
    locs = RecordsLocator().find(plan, body)
    assert decode_located(locs, with_records=False, max_uncompressed_bytes=MAX, defs=DEFS,
                          partial_is_issue=False) == []
    s = summarize(locs)
    assert s.partial is True and s.batches == 2 and s.last_offset == 101


def test_decode_located_cut_after_a_whole_batch():
    """The truncated_batch offset is where the incomplete batch starts, not the field."""
    plan, body, _ = produce_body((("orders", ((0, BATCH_A + BATCH_A[:20]),)),))
    locs = RecordsLocator().find(plan, body)
    [issue] = decode_located(locs, with_records=False, max_uncompressed_bytes=MAX, defs=DEFS,
                             partial_is_issue=True)
    assert issue.kind == IssueKind.TRUNCATED_BATCH
    assert issue.offset == locs[0].records.offset + len(BATCH_A)
    assert "20 bytes" in issue.message


def test_decode_located_other_issue_kinds():
    """Record issues keep their kinds: an unknown magic, a gzip section that is not gzip."""
    bad_magic = bytearray(BATCH_A)
    bad_magic[16] = 5
    bad_gzip = record_batch([Rec(value=b"x")], codec="gzip", records_section=b"not gzip")
    locs = [LocatedRecords("t", None, 0, "a", RawRecords(bytes(bad_magic), 100)),
            LocatedRecords("t", None, 1, "b", RawRecords(bad_gzip, 500))]
    issues = decode_located(locs, with_records=False, max_uncompressed_bytes=MAX, defs=DEFS,
                            partial_is_issue=True)
    assert [(i.kind, i.field_path, i.offset) for i in issues] == [
        (IssueKind.UNKNOWN_MAGIC, "a", 100),
        (IssueKind.DECOMPRESSION_ERROR, "b", 500 + 61),  # start of the compressed section
    ]


def test_decode_located_unknown_offset_counts_from_zero():
    loc = LocatedRecords("t", None, 0, "r", RawRecords(BATCH_B))
    [issue] = decode_located([loc], with_records=False, max_uncompressed_bytes=MAX, defs=DEFS,
                             partial_is_issue=False)
    assert issue.kind == IssueKind.CRC_MISMATCH and issue.offset == 0


def test_decode_located_with_records_and_reuse():
    """with_records decodes every record; a field already decoded is not decoded again."""
    loc = LocatedRecords("t", None, 0, "r", RawRecords(BATCH_A, 0))
    decode_located([loc], with_records=True, max_uncompressed_bytes=MAX, defs=DEFS,
                   partial_is_issue=True)
    first = loc.records.decoded
    assert [(r.offset, r.value, r.timestamp_ms) for r in first.batches[0].records] == [
        (100, b"a", 1000), (101, b"b", 1005)]
    decode_located([loc], with_records=False, max_uncompressed_bytes=MAX, defs=DEFS,
                   partial_is_issue=True)
    assert loc.records.decoded is first


def test_decompression_limit():
    loc = LocatedRecords("t", None, 0, "r", RawRecords(BATCH_D, 10))
    [issue] = decode_located([loc], with_records=False, max_uncompressed_bytes=10, defs=DEFS,
                             partial_is_issue=True)
    assert issue.kind == IssueKind.DECOMPRESSION_LIMIT and issue.offset == 10 + 61
    assert summarize([loc]).uncompressed_bytes is None


# --------------------------------------------------------------------------- summary

def test_summarize_over_batches():
    """Counts, codecs and magics in order of appearance, offsets and timestamps over the
    whole batches, distinct producer ids, CRC errors, the cut batch marked partial."""
    locs, _ = located_produce()
    decode_located(locs, with_records=False, max_uncompressed_bytes=MAX, defs=DEFS,
                   partial_is_issue=True)
    s = summarize(locs)
    b_uncompressed = sum(len(encode_record(r)) for r in B_RECORDS)
    assert s.batches == 4                      # A, B, the message C, the cut copy of A
    assert s.records == 2 + 1 + 1 + 2          # a cut batch counts its header's records
    assert s.codecs == ("none", "gzip") and s.magics == (2, 1)
    assert s.records_bytes == len(BATCH_A + BATCH_B) + len(MSG_C) + len(BATCH_A) - 7
    assert s.compressed_bytes == (len(BATCH_A) - 61) + (len(BATCH_B) - 61) + 1
    assert s.uncompressed_bytes == (len(BATCH_A) - 61) + b_uncompressed + 1
    assert (s.first_offset, s.last_offset) == (50, 102)
    assert (s.min_timestamp_ms, s.max_timestamp_ms) == (500, 2000)
    assert s.timestamp_types == ("create_time",)
    assert s.producer_ids == (7,)
    assert (s.transactional, s.control, s.crc_errors, s.partial) == (False, False, 1, True)


def test_summarize_transactional_and_codecs():
    plan, body, _ = produce_body((("orders", ((0, BATCH_D + BATCH_A),)),))
    locs = RecordsLocator().find(plan, body)
    decode_located(locs, with_records=False, max_uncompressed_bytes=MAX, defs=DEFS,
                   partial_is_issue=True)
    s = summarize(locs)
    assert s.codecs == ("zstd", "none") and s.producer_ids == (9, 7)
    assert s.transactional is True and s.crc_errors == 0 and s.partial is False
    assert (s.first_offset, s.last_offset) == (7, 101)
    assert (s.min_timestamp_ms, s.max_timestamp_ms) == (1000, 3000)


def test_summarize_undecoded_and_empty():
    """A field not decoded yet counts its bytes only and makes the uncompressed size
    unknown; no fields at all is None."""
    loc = LocatedRecords("t", None, 0, "r", RawRecords(BATCH_A))
    s = summarize([loc])
    assert (s.batches, s.records, s.records_bytes, s.uncompressed_bytes) == (
        0, 0, len(BATCH_A), None)
    assert s.first_offset is None and s.codecs == ()
    assert summarize([]) is None
