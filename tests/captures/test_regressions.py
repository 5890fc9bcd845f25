"""The regression captures (captures/regressions/, written by captures/craft_regressions.py):
crafted inputs that once broke a promise, and what kafkasniff does with each now."""

from __future__ import annotations

import pytest

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
    exchanges, issues = exchanges_and_issues("apiversions_future_error.pcap")
    kinds = all_issue_kinds(exchanges, issues)
    assert "internal_error" not in kinds
    [ex] = exchanges
    assert (ex.api_name, ex.api_version, ex.status) == ("ApiVersions", 6, "paired")
    assert ex.errors == ("UNSUPPORTED_VERSION",)
    assert ex.response.body["error_code"] == 35
    assert "unsupported_version" in kinds and "body_decode_error" in kinds


def test_header_decode_errors_count_their_bytes():
    """A header that does not decode stands for its whole frame: its issue says how many
    bytes (it said 0)."""
    exchanges, issues = exchanges_and_issues("header_decode_error.pcap")
    [issue] = [i for i in issues if i.kind == "header_decode_error"]
    assert issue.length_bytes == 4 + 2 + 2 + 4 + 2 + len(b"short")
    assert [ex.correlation_id for ex in exchanges] == [8]


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
