"""``kafkasniff stats``: latency percentiles, errors, throttling and bytes per API, client_id,
broker and topic."""

from __future__ import annotations

import json
import sys

import click

from kafkasniff.cli.inputs import (
    Progress,
    fail,
    input_options,
    jobs_option,
    parse_inputs,
    resolve_jobs,
)
from kafkasniff.errors import KafkaSniffError


@click.command("stats")
@input_options
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
@click.option("--top", type=click.IntRange(1), default=20, show_default=True,
              help="Rows per table.")
@click.option("--strict", is_flag=True, help="Exit 1 if any warning or error issue was found.")
@jobs_option
def stats_command(files, read_files, ports, detect, max_frame_bytes, definitions,
                  max_uncompressed_bytes, wire_format, show_secrets, as_json, top, strict, jobs):
    """Latency percentiles, errors, throttling and bytes per API, client_id, broker and topic."""
    from kafkasniff.model import Exchange
    from kafkasniff.pipeline import Pipeline, analyze
    from kafkasniff.stats.aggregate import Aggregator
    from kafkasniff.stats.report import render_report

    inp = parse_inputs(files, read_files, ports, detect, max_frame_bytes, definitions,
                       max_uncompressed_bytes, wire_format, show_secrets)
    agg = Aggregator()
    progress = Progress(enabled=True)
    jobs = resolve_jobs(jobs, inp.sources)
    try:
        if jobs > 1:
            from kafkasniff.parallel.engine import run_jobs

            res = run_jobs(inp.sources, inp.pipeline_options(), jobs, "stats", {},
                           lambda item: agg.add_issue(item[1]), on_progress=progress)
            for other in res.results:       # each decoder's exchanges
                agg.merge(other)
            stats = res.stats
        else:
            pipe = Pipeline(inp.pipeline_options())
            stats = pipe.stats
            for rec in analyze(inp.sources, pipeline=pipe, on_progress=progress):
                if type(rec) is Exchange:
                    agg.add(rec)
                else:
                    agg.add_issue(rec)
    except KafkaSniffError as exc:
        progress.close()
        fail(str(exc))
    progress.close()
    for kind, n in stats.issues.items():   # issues beyond the capture_issues budget
        agg.issues[kind] = max(agg.issues[kind], n)
    pstats = stats.to_dict()
    report = agg.to_dict()
    try:
        if as_json:
            report["pipeline"] = pstats
            click.echo(json.dumps(report, indent=1))
        else:
            click.echo(render_report(report, pstats, top), nl=False)
    except BrokenPipeError:
        sys.exit(0)
    bad = sum(v for k, v in agg.issue_severity.items() if k != "info")
    sys.exit(1 if strict and bad else 0)
