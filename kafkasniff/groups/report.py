"""The text report of ``kafkasniff groups``: one block per group (members, rebalances with the
assignment after each, commits and lag)."""

from __future__ import annotations

import datetime as _dt

from kafkasniff.groups.model import (
    CONSUMER,
    SHARE,
    Group,
    GroupsReport,
    assignment_text,
)
from kafkasniff.stats.report import render_table
from kafkasniff.text import escape_text, plural

_PROTOCOLS = {"classic": "classic", CONSUMER: "consumer (KIP-848)", SHARE: "share (KIP-932)",
              "unknown": "unknown (offsets or lookups only)"}


def _time(ts_ns: int | None) -> str:
    if ts_ns is None or ts_ns < 0:
        return "-"
    sec, ns = divmod(ts_ns, 1_000_000_000)
    t = _dt.datetime.fromtimestamp(sec, _dt.timezone.utc)
    return t.strftime("%H:%M:%S") + f".{ns // 1_000_000:03d}"


def _ms(ns: int | None) -> str:
    return "-" if ns is None else f"{ns / 1e6:.3f}"


def _short(text: str | None, width: int) -> str:
    if not text:
        return "-"
    return text if len(text) <= width else text[:width - 1] + "…"


#: a member id in the Rebalances table (the trigger's row and the assignment sub-rows alike)
MEMBER_WIDTH = 40


def _member(mid: str | None) -> str:
    """A member id as the Rebalances table shows it: escaped, cut to
    :data:`MEMBER_WIDTH` the same way in every row."""
    return _short(escape_text(mid) if mid else mid, MEMBER_WIDTH)


def _gen(v: int) -> str:
    """A generation or epoch; ``-`` when not known (-1: a leave round, a group never
    joined in the capture), as the TUI shows it."""
    return "-" if v < 0 else str(v)


def render_group(g: Group, *, commits: int = 20) -> str:
    """The text block of one group; ``commits``: commit rows shown (latest first cut)."""
    d = g.to_dict()
    lat = d["commit_latency_ns"]
    head = [f"Group {escape_text(g.group_id)}",
            f"  protocol {_PROTOCOLS.get(g.protocol, g.protocol)}"
            + (f", protocol_type {escape_text(g.protocol_type)}" if g.protocol_type else "")
            + (f", assignor {escape_text(g.protocol_name)}" if g.protocol_name else "")
            + (f", state {escape_text(g.state)}" if g.state else ""),
            f"  coordinator {escape_text(g.coordinator or '-')}"
            + (f" (node {g.coordinator_node_id})" if g.coordinator_node_id >= 0 else "")
            + (f"; requests went to {', '.join(g.coordinator_brokers)}"
               if g.coordinator_brokers and list(g.coordinator_brokers) != [g.coordinator]
               else ""),
            f"  {'epoch' if g.protocol in (CONSUMER, SHARE) else 'generation'} "
            f"{_gen(g.generation_id)}, "
            f"{plural(len(g.members), 'member')}, {plural(len(g.rebalances), 'rebalance')}, "
            f"{plural(d['commit_requests'], 'commit request')}"
            + (f" (latency p50 {_ms(lat['p50'])} ms, p99 {_ms(lat['p99'])} ms, max "
               f"{_ms(lat['max'])} ms)" if lat else "")
            + f", {plural(g.exchanges, 'group exchange')}",
            "  errors: " + (", ".join(f"{k}×{v}" for k, v in g.errors) or "none"), ""]
    parts = ["\n".join(head)]
    gen_label = "epoch" if g.protocol in (CONSUMER, SHARE) else "gen"
    parts.append(render_table("Members", [
        "member_id", "instance", "client_id", "host", "joined", "left", "how", gen_label,
        "assignment"], [
        [escape_text(m.member_id),
         _short(escape_text(m.group_instance_id) if m.group_instance_id else None, 30),
         _short(escape_text(m.client_id) if m.client_id else None, 30),
         escape_text(m.client_host or "-"), _time(m.joined_ts_ns), _time(m.left_ts_ns),
         m.left_reason or "-",
         _gen(m.member_epoch if g.protocol in (CONSUMER, SHARE) else m.generation_id),
         escape_text(assignment_text(m.assignment, m.assignment_cut))] for m in g.members]))
    rows = []
    for r in g.rebalances:
        rows.append([str(r.index), _time(r.start_ts_ns), _time(r.end_ts_ns),
                     _ms(r.duration_ns), r.trigger + (f" {r.trigger_error}" if r.trigger_error
                                                      else ""),
                     _member(r.trigger_member), _gen(r.generation_id), str(len(r.members)),
                     ", ".join(r.errors) or "-", "yes" if r.complete else "no"])
        cut = dict(r.assignment_cut)
        for mid, a in r.assignment:
            rows.append(["", "", "", "", "", f"  {_member(mid)}", "", "",
                         escape_text(assignment_text(a, cut.get(mid, 0))), ""])
    parts.append(render_table("Rebalances (and the assignment after each)", [
        "#", "start", "end", "duration ms", "trigger", "member", gen_label, "members",
        "errors", "complete"], rows))
    shown = g.commits[-commits:] if commits else ()
    parts.append(render_table(
        f"Commits (last {len(shown)} of {len(g.commits)})" if len(g.commits) > len(shown)
        else "Commits", ["time", "api", "topic", "partition", "committed_offset", "error",
                         "latency ms", "lag"],
        [[_time(c.ts_ns), c.api_name, escape_text(c.topic), str(c.partition),
          str(c.committed_offset),
          c.error or ("-" if c.answered else "(no answer)"), _ms(c.latency_ns),
          "-" if c.lag is None else str(c.lag)] for c in shown]))
    parts.append(render_table("Lag at the end (high watermark - committed offset)", [
        "topic", "partition", "committed_offset", "from", "high_watermark", "lag",
        "member_id", "client_id", "host"],
        [[escape_text(x.topic), str(x.partition), str(x.committed_offset), x.committed_from,
          str(x.high_watermark), str(x.lag), escape_text(x.member_id or "-"),
          _short(escape_text(x.client_id) if x.client_id else None, 30),
          escape_text(x.client_host or "-")] for x in g.lags]))
    return "\n".join(parts)


def render_groups(report: GroupsReport, *, commits: int = 20) -> str:
    """The whole text report: every group's block and a summary line."""
    parts = [render_group(g, commits=commits) for g in report.groups]
    if report.issues:
        parts.append("Issues of the analysis\n" + "".join(
            f"  {i.kind} ({i.severity}): {escape_text(i.message)}\n" for i in report.issues))
    reb = sum(len(g.rebalances) for g in report.groups)
    summary = (f"{plural(len(report.groups), 'group')}, {plural(reb, 'rebalance')}, "
               f"{plural(report.group_exchanges, 'group exchange')}")
    if report.groups_dropped:
        summary += (f" ({plural(report.groups_dropped, 'group')} beyond the limit not "
                    f"tracked)")
    if report.events_dropped:
        summary += (f"; {plural(report.events_dropped, 'group exchange')} beyond the limit not "
                    f"analysed (the report covers the ones before)")
    if not report.groups:
        everything = report.group_exchanges if report.capture_group_exchanges is None \
            else report.capture_group_exchanges
        summary = ("no consumer group traffic found; " if not everything
                   else "no group to show (see --group); ") + summary
    parts.append(summary + "\n")
    return "\n".join(parts)
