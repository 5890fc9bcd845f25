"""kafkasniff.content.budgets: the budget settings, and decode_records' budgets."""

from __future__ import annotations

import pytest

from kafkasniff.content.budgets import UNBOUNDED, BudgetMeter, Budgets, parse_budgets
from kafkasniff.errors import KafkaSniffError
from kafkasniff.protocol.records import EAGER_RECORDS, LazyRecords, decode_records
from tests.protocol import batch_encoder as enc


def test_parse_budgets_units_and_names():
    b = parse_budgets(["frame-records=10k", "pending_bytes=64M", "capture_issues=0",
                       "frame_uncompressed_bytes=1GiB"])
    assert b.frame_records == 10 * 1024 and b.pending_bytes == 64 << 20
    assert b.capture_issues == 0 and b.limit("capture_issues") == UNBOUNDED
    assert b.frame_uncompressed_bytes == 1 << 30
    assert parse_budgets([]) == Budgets()


@pytest.mark.parametrize("spec", ["nope=1", "frame_records", "frame_records=x",
                                  "frame_records=-1"])
def test_parse_budgets_rejects(spec):
    with pytest.raises(KafkaSniffError, match="--budget"):
        parse_budgets([spec])


def test_capture_budget_grows_with_the_record_bytes():
    m = BudgetMeter(Budgets(capture_uncompressed_bytes=1000, capture_uncompressed_ratio=10))
    assert m.capture_uncompressed_left() == 1000
    m.record_bytes = 500
    m.uncompressed_bytes = 1000
    assert m.capture_uncompressed_left() == 4000


def _recs(n: int) -> list:
    return [enc.Rec(None, b"v%d" % i, offset_delta=i) for i in range(n)]


def test_decompression_budget_of_one_call():
    data = b"".join(enc.record_batch(_recs(10), codec="gzip", base_offset=10 * i)
                    for i in range(3))
    full = decode_records(data)
    one = full.batches[0].uncompressed_bytes
    rs = decode_records(data, max_total_uncompressed_bytes=one + 1)
    assert rs.not_decompressed == 2 and rs.issues == ()
    assert [b.uncompressed_bytes for b in rs.batches] == [one, None, None]
    assert [b.record_count for b in rs.batches] == [10, 10, 10]


def test_record_budget_of_one_call():
    data = b"".join(enc.record_batch(_recs(10), base_offset=10 * i) for i in range(3))
    rs = decode_records(data, with_records=True, max_records=25)
    assert rs.not_decoded == 1
    assert [None if b.records is None else len(b.records) for b in rs.batches] == [10, 10, None]


def test_large_batches_are_lazy_and_equal_to_eager():
    n = EAGER_RECORDS + 5
    data = enc.record_batch(_recs(n), codec="zstd")
    b = decode_records(data, with_records=True).batches[0]
    assert type(b.records) is LazyRecords and len(b.records) == n and b.records
    values = [r.value for r in b.records]
    assert values == [b"v%d" % i for i in range(n)]
    assert list(b.records) == list(b.records)           # iterable again
    assert b.records[-1].offset == n - 1 and b.records[0].offset == 0
    assert b.records == tuple(b.records)
    with pytest.raises(IndexError):
        b.records[n]
