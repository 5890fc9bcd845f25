"""The consumer-groups section of ``spark report``: rebalances per group with their
durations and triggers, the slowest rebalances, and commit latency and lag per group.

It reads the group tables of ``kafkasniff export`` (``groups``, ``members``, ``rebalances``,
``commits``: docs/parquet-schema.md, docs/groups.md) when they are present under the report's
directory; ``spark decode`` does not write them (a group spans connections, which its tasks
split), so the section is empty for its output.

Percentiles are ``percentile_approx(..., PERCENTILE_ACCURACY)`` as in the other reports
(:mod:`kafkasniff.spark.report`); maxima are exact. Commit latency is per commit *request*
(one OffsetCommit of several partitions counts once).
"""

from __future__ import annotations

__all__ = ["GROUP_REPORTS", "build_group_reports"]

#: report name -> title, in output order (appended to :data:`kafkasniff.spark.report.REPORTS`)
GROUP_REPORTS = {
    "group_rebalances": "Consumer groups: rebalances per group (durations, triggers)",
    "slowest_rebalances": "Consumer groups: slowest rebalances (null duration: not ended "
                          "in the capture)",
    "group_commits": "Consumer groups: commit latency per group (per request) and lag",
}

_ACCURACY = 10_000      # kafkasniff.spark.report.PERCENTILE_ACCURACY (no import cycle)


def build_group_reports(spark, views: dict) -> dict:
    """Report name -> DataFrame of :data:`GROUP_REPORTS` (those whose tables are present)."""
    r: dict = {}
    if "rebalances" in views:
        r["group_rebalances"] = spark.sql(f"""
            SELECT group_id, first(protocol) AS protocol, count(*) AS rebalances,
                   count_if(end_ts_ns IS NOT NULL) AS ended,
                   count_if(trigger = 'join') AS joins,
                   count_if(trigger = 'leave') AS leaves,
                   count_if(trigger = 'session_timeout') AS session_timeouts,
                   count_if(trigger = 'error') AS errors,
                   count_if(trigger NOT IN ('join', 'leave', 'session_timeout', 'error'))
                     AS other,
                   percentile_approx(duration_ns, array(0.5, 0.99), {_ACCURACY}) AS _p,
                   max(duration_ns) AS max_duration_ns,
                   sum(duration_ns) AS total_duration_ns,
                   max(member_count) AS max_members,
                   min(start_ts) AS first_start, max(start_ts) AS last_start
            FROM rebalances GROUP BY group_id""").selectExpr(
            "group_id", "protocol", "rebalances", "ended", "joins", "leaves",
            "session_timeouts", "errors", "other", "_p[0] AS p50_duration_ns",
            "_p[1] AS p99_duration_ns", "max_duration_ns", "total_duration_ns", "max_members",
            "first_start", "last_start").orderBy(
            ["rebalances", "total_duration_ns", "group_id"], ascending=[False, False, True])
        r["slowest_rebalances"] = spark.sql("""
            SELECT capture, group_id, rebalance_index, start_ts, duration_ns, trigger,
                   trigger_member, trigger_error, member_count, generation_id, errors, complete
            FROM rebalances
            ORDER BY duration_ns DESC NULLS FIRST, capture, group_id, rebalance_index""")
    if "commits" in views:
        r["group_commits"] = spark.sql(f"""
            WITH requests AS (
              SELECT capture, group_id, client, correlation_id, ts_ns,
                     max(latency_ns) AS latency_ns, count(*) AS partitions,
                     count_if(error IS NOT NULL) AS errors
              FROM commits GROUP BY capture, group_id, client, correlation_id, ts_ns),
            last_lag AS (
              SELECT group_id, topic, partition, max_by(lag, ts_ns) AS lag
              FROM commits WHERE error IS NULL AND answered GROUP BY 1, 2, 3)
            SELECT q.group_id, count(*) AS commit_requests, sum(q.partitions) AS partitions,
                   sum(q.errors) AS partition_errors,
                   percentile_approx(q.latency_ns, array(0.5, 0.9, 0.99), {_ACCURACY}) AS _p,
                   max(q.latency_ns) AS max_latency_ns,
                   first(l.lag_total) AS last_lag_total, first(l.lag_max) AS last_lag_max
            FROM requests q
            LEFT JOIN (SELECT group_id, sum(lag) AS lag_total, max(lag) AS lag_max
                       FROM last_lag GROUP BY group_id) l ON l.group_id = q.group_id
            GROUP BY q.group_id""").selectExpr(
            "group_id", "commit_requests", "partitions", "partition_errors",
            "_p[0] AS p50_latency_ns", "_p[1] AS p90_latency_ns", "_p[2] AS p99_latency_ns",
            "max_latency_ns", "last_lag_total", "last_lag_max").orderBy(
            ["commit_requests", "group_id"], ascending=[False, True])
    return {k: r[k] for k in GROUP_REPORTS if k in r}
