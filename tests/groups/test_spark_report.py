"""``spark report``'s consumer-groups section on the export of real captures, against the
analysis (:mod:`kafkasniff.groups`)."""

from __future__ import annotations

import pytest

from kafkasniff.export.writer import export_captures
from kafkasniff.spark.groups_report import GROUP_REPORTS
from tests.conftest import CAPTURES
from tests.groups.test_truth import report_of
from tests.spark.conftest import spark  # noqa: F401  (the session's SparkSession fixture)

NAMES = ["broker_java", "broker_go", "librdkafka_errors_latency"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("groups-report")
    for name in NAMES:
        export_captures([CAPTURES / f"{name}.pcap"], out)
    return out


def test_group_section(spark, exported):  # noqa: F811
    from kafkasniff.spark.report import REPORTS, build_reports, register_views

    assert set(GROUP_REPORTS) <= set(REPORTS)
    views = register_views(spark, exported)
    assert {"groups", "members", "rebalances", "commits"} <= set(views)
    reports = build_reports(spark, views)
    groups = {g.group_id: g for name in NAMES for g in report_of(name).groups}

    per_group = {r["group_id"]: r for r in reports["group_rebalances"].collect()}
    want = {gid: g for gid, g in groups.items() if g.rebalances}
    assert set(per_group) == set(want)
    for gid, g in want.items():
        row = per_group[gid]
        durations = [r.duration_ns for r in g.rebalances]
        assert row["rebalances"] == len(g.rebalances) == row["ended"]
        assert row["max_duration_ns"] == max(durations)
        assert row["total_duration_ns"] == sum(durations)
        assert row["joins"] == sum(r.trigger == "join" for r in g.rebalances)
        assert row["leaves"] == sum(r.trigger == "leave" for r in g.rebalances)

    slow = reports["slowest_rebalances"].collect()
    assert [r["duration_ns"] for r in slow] == sorted(
        (r.duration_ns for g in groups.values() for r in g.rebalances), reverse=True)

    commits = {r["group_id"]: r for r in reports["group_commits"].collect()}
    want = {gid: g for gid, g in groups.items() if g.commits}
    assert set(commits) == set(want)
    for gid, g in want.items():
        lat = g.commit_latencies_ns()
        assert commits[gid]["commit_requests"] == len(lat)
        assert commits[gid]["max_latency_ns"] == max(lat)
        assert commits[gid]["partition_errors"] == sum(c.error is not None for c in g.commits)
    assert commits["ks-errors-group"]["partition_errors"] == 3      # NOT_COORDINATOR x 3
