"""The regression captures (captures/regressions/, written by captures/craft_regressions.py):
crafted inputs that once broke a promise, and what kafkasniff does with each now."""

from __future__ import annotations

from itertools import islice

from kafkasniff.content.budgets import Budgets
from kafkasniff.protocol.records import LazyRecords
from tests.conftest import CAPTURES, decode_capture

REGRESSIONS = CAPTURES / "regressions"


def exchanges_and_issues(name: str, **options):
    d = decode_capture(REGRESSIONS / name, **options)
    return d.exchanges, d.issues


def all_issue_kinds(exchanges, issues) -> list[str]:
    return [i.kind for ex in exchanges for i in ex.issues] + [i.kind for i in issues]


def test_regression_captures_exist():
    assert REGRESSIONS.is_dir() and any(REGRESSIONS.iterdir())


def test_apiversions_above_the_definitions_answered_with_an_error_is_kept():
    """The KIP-511 fallback tried the request's own version (no layout): the exchange
    vanished behind an internal_error. It is kept, decoded as far as it goes."""
    exchanges, issues = exchanges_and_issues("apiversions_future_error.pcap",
                                             show_secrets=True)
    kinds = all_issue_kinds(exchanges, issues)
    assert "internal_error" not in kinds
    [ex] = exchanges
    assert (ex.api_name, ex.api_version, ex.status) == ("ApiVersions", 6, "paired")
    assert ex.errors == ("UNSUPPORTED_VERSION",)
    assert ex.response.body["error_code"] == 35
    # by default the body, decoded under a layout its header did not name, is redacted
    [redacted] = exchanges_and_issues("apiversions_future_error.pcap")[0]
    assert "_redacted_body" in redacted.response.body
    assert redacted.errors == ("UNSUPPORTED_VERSION",)
    assert "unsupported_version" in kinds and "body_decode_error" in kinds


def test_header_decode_errors_count_their_bytes():
    """A header that does not decode stands for its whole frame: its issue says how many
    bytes (it said 0). Its api_key, api_version and correlation_id were read, so the request
    is kept (unanswered here) with the issue."""
    exchanges, issues = exchanges_and_issues("header_decode_error.pcap")
    [issue] = [i for ex in exchanges for i in ex.issues if i.kind == "header_decode_error"]
    assert issue.length_bytes == 4 + 2 + 2 + 4 + 2 + len(b"short")
    assert (issue.correlation_id, issue.api_key, issue.api_version) == (7, 3, 1)
    assert [(ex.correlation_id, ex.status) for ex in exchanges] == [(8, "paired"),
                                                                    (7, "unanswered")]


def test_a_segment_lost_inside_a_frame_is_the_only_missing_part():
    """300 bytes lost inside a 1,084-byte request: the request misses 300 bytes (it said 780:
    the captured bytes after the gap were counted as never captured); the issue names both."""
    exchanges, issues = exchanges_and_issues("segment_lost_inside_a_frame.pcap")
    [ex] = exchanges
    assert ex.status == "paired" and ex.request.frame_bytes == 1084
    assert ex.request.missing_bytes == 300
    [damaged] = [i for i in issues if i.kind == "frame_damaged"]
    assert damaged.length_bytes == 300
    assert "the 484 bytes captured after the gap are not decoded" in damaged.message


# --------------------------------------------------------------------------- budgets

def _budget_issues(exchanges, issues) -> list:
    return [i for ex in exchanges for i in ex.issues if i.kind == "budget_exhausted"] + \
        [i for i in issues if i.kind == "budget_exhausted"]


def test_control_batches_are_summarised_without_records():
    """Two compressed control batches of a million records each (4 KB of capture): without
    --records they are summarised from their headers, nothing is decoded record by record
    and no issue is raised per record (stats went past 11 GB)."""
    d = decode_capture(REGRESSIONS / "control_batch_bomb.pcap")
    [ex] = d.exchanges
    assert ex.records.records == 2_000_000 and ex.records.control
    assert d.pipeline.stats.budgets.records == 0
    assert all_issue_kinds(d.exchanges, d.issues) == []
    for loc in ex.record_fields:
        assert all(b.records is None for b in loc.records.decoded.batches)


def test_records_beyond_the_frame_budget_are_one_issue():
    """With --records, batches beyond the frame's record budget are summarised and the
    budget is reported once for the frame, naming it."""
    d = decode_capture(REGRESSIONS / "control_batch_bomb.pcap", with_records=True,
                       budgets=Budgets(frame_records=1000))
    [ex] = d.exchanges
    [issue] = _budget_issues(d.exchanges, d.issues)
    assert "frame_records" in issue.message and "2 record batch(es)" in issue.message
    assert ex.records.records == 2_000_000
    assert d.pipeline.stats.budgets.skipped == {"frame_records": 2}


def test_a_million_records_are_streamed_not_held():
    """A batch of a million records keeps its section's bytes, and gives its records one at
    a time (export --records held 1.23 GB of objects)."""
    d = decode_capture(REGRESSIONS / "records_1m.pcap", with_records=True)
    [ex] = d.exchanges
    [loc] = ex.record_fields
    [batch] = loc.records.decoded.batches
    assert type(batch.records) is LazyRecords and len(batch.records) == 1_000_000
    first = list(islice(batch.records, 3))
    assert [(r.offset, r.key, r.value) for r in first] == [(0, None, b"v")] * 3
    assert batch.records[999_999].value == b"v"
    assert d.pipeline.stats.budgets.records == 1_000_000


def test_decompression_is_bounded_per_frame():
    """Eight 60 MiB batches in one frame (18 KB of capture): the frame's decompression
    budget (256 MiB) stops it, with one issue for the frame naming the budget."""
    d = decode_capture(REGRESSIONS / "decompression_per_frame.pcap")
    [ex] = d.exchanges
    [issue] = _budget_issues(d.exchanges, d.issues)
    assert "frame_uncompressed_bytes" in issue.message and "4 record batch(es)" in issue.message
    meter = d.pipeline.stats.budgets
    assert meter.uncompressed_bytes == Budgets().frame_uncompressed_bytes
    assert meter.skipped == {"frame_uncompressed_bytes": 4}
    assert ex.records.batches == 8 and ex.records.uncompressed_bytes is None


def test_decompression_is_bounded_per_capture():
    """60 frames of 240 MiB each (500 KB of capture, 14 GB decompressed before): the
    capture's budget (1 GiB, or 100x the record bytes) stops it, reported once; every
    exchange is still there, summarised from its batch headers."""
    d = decode_capture(REGRESSIONS / "decompression_per_capture.pcap")
    assert len(d.exchanges) == 60 and {ex.status for ex in d.exchanges} == {"paired"}
    [issue] = _budget_issues(d.exchanges, d.issues)
    assert "capture_uncompressed_bytes" in issue.message
    meter = d.pipeline.stats.budgets
    assert meter.uncompressed_bytes <= Budgets().capture_uncompressed_bytes
    assert meter.skipped["capture_uncompressed_bytes"] == 240 - 17
    assert sum(ex.records.records for ex in d.exchanges) == 240


def test_pending_requests_are_bounded_in_bytes():
    """200 requests of 2.4 KB whose responses were not captured, with a 64 KiB
    pending_bytes budget: the oldest are given up (pending_overflow) as the bytes grow (only
    the count bounded them)."""
    budget = 64 * 1024
    d = decode_capture(REGRESSIONS / "pending_requests_one_way.pcap",
                       budgets=Budgets(pending_bytes=budget))
    assert len(d.exchanges) == 200 and {ex.status for ex in d.exchanges} == {"unanswered"}
    overflow = [ex for ex in d.exchanges
                if any(i.kind == "pending_overflow" for i in ex.issues)]
    frame = d.exchanges[0].request.frame_bytes
    assert len(overflow) >= 200 - budget // frame
    assert "pending_bytes budget" in overflow[0].issues[0].message
    assert d.pipeline.ctx.pending_bytes == 0        # everything given back at the end


def test_an_impossible_record_count_is_an_issue_and_not_counted():
    """A batch claiming 2^31-1 records in 73 bytes: a record_decode_error says so and the
    summary counts what the section can hold (it counted 2,147,483,647 records)."""
    d = decode_capture(REGRESSIONS / "record_count_implausible.pcap")
    ex = d.exchanges[0]
    kinds = all_issue_kinds(d.exchanges, d.issues)
    assert kinds == ["record_decode_error"]
    assert "record count 2147483647 cannot fit" in ex.issues[0].message
    assert ex.records.records <= 73 // 7


def test_resync_over_zeros_finds_the_next_request():
    """8 MiB of zeros between two requests: one resync issue counts them all and the request
    after them is decoded (the validator was asked at each offset: 3 s; see
    tests/protocol/test_resync_search.py for the call count)."""
    d = decode_capture(REGRESSIONS / "resync_zeros.pcap.gz")
    assert [ex.status for ex in d.exchanges] == ["paired", "paired"]
    assert [ex.correlation_id for ex in d.exchanges] == [1, 2]
    [resync] = [i for i in d.issues if i.kind == "resync"]
    assert resync.length_bytes == 4 + 8 * 1024 * 1024
    assert d.pipeline.stats.bytes["kafka_resync"] == 4 + 8 * 1024 * 1024


def test_unknown_pcapng_blocks_are_skipped_and_counted():
    """Unknown, custom and Decryption Secrets blocks between the packets: the packets all
    decode and the unknown and custom blocks' bytes are in the ledger as pcapng_blocks (they
    were uncounted). The Decryption Secrets Block (TLS key log, 40 bytes, whose one line does
    not parse), four times, is read for its secrets: capture format, and bad key log lines."""
    path = REGRESSIONS / "pcapng_unknown_blocks.pcapng"
    d = decode_capture(path)
    assert [ex.correlation_id for ex in d.exchanges] == [1, 2, 3]
    ledger = d.pipeline.stats.bytes
    assert ledger["pcapng_blocks"] == 536 - 4 * 40
    assert d.pipeline.stats.tls_secrets_blocks == 4 and d.pipeline.keylog.bad_lines == 4
    assert sum(ledger.values()) == path.stat().st_size


def test_an_out_of_range_pcapng_timestamp_skips_one_packet_not_the_file():
    """A packet whose interface offsets it past 2^63 ns: one warning, that packet's bytes
    counted as damaged, and the rest of the file still read (reading stopped there, exit 0)."""
    path = REGRESSIONS / "pcapng_timestamp_out_of_range.pcapng"
    d = decode_capture(path)
    assert [(ex.correlation_id, ex.status) for ex in d.exchanges] == [(1, "paired")] * 2
    [bad] = [i for i in d.issues if i.kind == "capture_block_invalid"]
    assert bad.severity == "warning" and "reading goes on" in bad.message
    assert d.pipeline.stats.bytes["damaged_records"] == 100
    assert sum(d.pipeline.stats.bytes.values()) == path.stat().st_size


def test_fuzz_d1f98dda_a_million_identical_control_records():
    """The long fuzz run's one hang (bench/bench_fuzz.py, unchanged input): a control batch of
    a million identical records, cut by the end of the stream, with --records. Every record
    is described (the same control record, decoded once) and the exchange is kept."""
    d = decode_capture(REGRESSIONS / "fuzz-d1f98dda.pcap", with_records=True)
    [ex] = d.exchanges
    assert ex.records.records == 1_000_000 and ex.records.control
    [batch] = [b for loc in ex.record_fields for b in loc.records.decoded.batches]
    n = 0
    types = set()
    for r in batch.records:
        n += 1
        types.add(r.control["type_name"])
    assert n == 1_000_000 and len(types) == 1
    assert all_issue_kinds(d.exchanges, d.issues) == ["frame_truncated"]


def test_hostile_names_are_decoded_exactly():
    """Names carrying terminal controls (client_id, topics, a header key, a group's ids, a TLS
    server name): the decode keeps them exact; the text outputs escape them (tests of each
    output: tests/output, tests/stats, tests/groups, tests/live, tests/spark ``test_escaping``;
    the property test: tests/test_text.py)."""
    from tests.support.terminal import craft_regressions

    cr = craft_regressions()
    d = decode_capture(REGRESSIONS / "hostile_names.pcap", with_records=True)
    assert [ex.api_name for ex in d.exchanges] == [
        "Metadata", "Produce", "Fetch", "FindCoordinator", "JoinGroup", "SyncGroup",
        "Heartbeat", "OffsetCommit", "DescribeGroups"]
    assert all(ex.status == "paired" and not ex.issues for ex in d.exchanges)
    assert {ex.client_id for ex in d.exchanges} == {cr.HOSTILE["client_id"],
                                                    cr.HOSTILE["consumer_client_id"]}
    assert d.exchanges[0].topics == (cr.HOSTILE["topic"], cr.HOSTILE["topic2"])
    [((key, _),)] = {r.headers for loc in d.exchanges[1].record_fields
                  for b in loc.records.decoded.batches for r in b.records if r.headers}
    assert key == cr.HOSTILE["header_key"]
    [tls] = d.issues
    assert tls.kind == "tls_connection" and f"SNI {cr.HOSTILE_SNI.decode()}" in tls.message
