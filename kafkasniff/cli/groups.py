"""``kafkasniff groups``: consumer groups, members, rebalances, assignments, commits and lag
(docs/groups.md)."""

from __future__ import annotations

import json
import sys

import click

from kafkasniff.cli.inputs import Progress, fail, input_options, parse_inputs
from kafkasniff.errors import KafkaSniffError


@click.command("groups")
@input_options
@click.option("--json", "as_json", is_flag=True,
              help="Print the report as one JSON object (every group, member, rebalance, "
                   "commit and lag row).")
@click.option("--group", "group_ids", multiple=True, metavar="GROUP_ID",
              help="Only this group (repeatable).")
@click.option("--commits", type=click.IntRange(0), default=20, show_default=True,
              help="Commit rows shown per group in the text report (the last ones).")
@click.option("--strict", is_flag=True, help="Exit 1 if any warning or error issue was found.")
@click.option("-q", "--quiet", is_flag=True,
              help="Say nothing on stderr about a damaged capture file.")
def groups_command(files, read_files, ports, detect, max_frame_bytes, definitions,
                   max_uncompressed_bytes, wire_format, show_secrets, as_json, group_ids,
                   commits, strict, quiet):
    """Consumer groups: protocol (classic, KIP-848 consumer, KIP-932 share), coordinator,
    members, every rebalance with its trigger and the assignment after it, commits and lag.

    Decodes in one process (the groups' exchanges span connections). A damaged capture
    file (truncated, invalid blocks) is said on stderr as read says it: its issue lines and
    read's summary line, with the bytes left unread.
    """
    from kafkasniff.groups.analysis import GroupAnalyzer
    from kafkasniff.groups.report import render_groups
    from kafkasniff.model import DecodeIssue, Exchange
    from kafkasniff.pipeline import Pipeline, analyze

    inp = parse_inputs(files, read_files, ports, detect, max_frame_bytes, definitions,
                       max_uncompressed_bytes, wire_format, show_secrets)
    progress = Progress(enabled=True)
    pipe = Pipeline(inp.pipeline_options())
    an = GroupAnalyzer(pipe.defs, budgets=pipe.options.budgets)
    bad = 0
    damage = []         # the capture file's own damage (issue 45, item 5)
    try:
        for rec in analyze(inp.sources, pipeline=pipe, on_progress=progress):
            t = type(rec)
            if t is Exchange:
                an.add(rec)
                bad += sum(1 for i in rec.issues if i.severity != "info")
            elif t is DecodeIssue:
                if rec.severity != "info":
                    bad += 1
                if rec.kind in _CAPTURE_DAMAGE:
                    damage.append(rec)
    except KafkaSniffError as exc:
        progress.close()
        fail(str(exc))
    progress.close()
    report = an.finish(pipe.topics.names)
    an.close()
    bad += sum(1 for i in report.issues if i.severity != "info")
    if group_ids:
        report = report.only(group_ids)
    try:
        if as_json:             # streamed: the text of a large report is never held whole
            out = click.get_text_stream("stdout")
            chunks: list[str] = []
            for chunk in json.JSONEncoder(indent=1).iterencode(report.to_dict()):
                chunks.append(chunk)
                if len(chunks) >= 8192:
                    out.write("".join(chunks))
                    chunks.clear()
            chunks.append("\n")
            out.write("".join(chunks))
            out.flush()
        else:
            click.echo(render_groups(report, commits=commits), nl=False)
    except BrokenPipeError:
        sys.exit(0)
    if damage and not quiet:
        from kafkasniff.cli.read import summary_line
        from kafkasniff.output.render import issue_line

        for issue in damage:
            click.echo(issue_line(issue), err=True)
        click.echo(summary_line(pipe.stats), err=True)
    sys.exit(1 if strict and bad else 0)


#: issue kinds of a damaged capture file: the report is about groups, these say that the
#: capture it was made of ends early or lost blocks
_CAPTURE_DAMAGE = frozenset({"capture_truncated", "capture_block_invalid"})
