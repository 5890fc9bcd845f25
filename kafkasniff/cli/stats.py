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
    output_file,
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
@click.option("--openmetrics", "openmetrics_path", default=None, metavar="FILE",
              help="Also write the metrics of 'live --metrics-port' for this capture to FILE "
                   "as OpenMetrics text (docs/metrics.md).")
@click.option("--metrics-topics", is_flag=True,
              help="With --openmetrics: also the per-topic families.")
@click.option("--metrics-max-values", type=click.IntRange(1), default=100, show_default=True,
              metavar="N", help="With --openmetrics: distinct client_id, broker and topic "
                                "values kept each; later ones are labelled __other__.")
@jobs_option
def stats_command(files, read_files, ports, detect, max_frame_bytes, definitions,
                  max_uncompressed_bytes, wire_format, show_secrets, as_json, top, strict,
                  openmetrics_path, metrics_topics, metrics_max_values, jobs):
    """Latency percentiles, errors, throttling and bytes per API, client_id, broker and topic."""
    from kafkasniff.model import Exchange
    from kafkasniff.pipeline import Pipeline, analyze
    from kafkasniff.stats.aggregate import Aggregator
    from kafkasniff.stats.report import render_report

    inp = parse_inputs(files, read_files, ports, detect, max_frame_bytes, definitions,
                       max_uncompressed_bytes, wire_format, show_secrets)
    if openmetrics_path is not None:
        output_file(openmetrics_path, "--openmetrics")   # before anything is decoded
    agg = Aggregator()
    metrics = None
    if openmetrics_path is not None:
        from kafkasniff.metrics.families import ExchangeMetrics

        metrics = ExchangeMetrics(topics=metrics_topics, max_values=metrics_max_values)
    progress = Progress(enabled=True)
    jobs = resolve_jobs(jobs, inp.sources)
    try:
        if jobs > 1:
            from kafkasniff.parallel.engine import run_jobs

            spec = {"metrics": metrics.settings()} if metrics is not None else {}
            res = run_jobs(inp.sources, inp.pipeline_options(), jobs, "stats", spec,
                           lambda item: agg.add_issue(item[1]), on_progress=progress)
            for other in res.results:       # each decoder's exchanges
                if metrics is not None:     # (Aggregator, metrics delta)
                    other, delta = other
                    metrics.merge(delta)
                agg.merge(other)
            stats = res.stats
        else:
            pipe = Pipeline(inp.pipeline_options())
            stats = pipe.stats
            add_metrics = metrics.add if metrics is not None else None
            for rec in analyze(inp.sources, pipeline=pipe, on_progress=progress):
                if type(rec) is Exchange:
                    agg.add(rec)
                    if add_metrics is not None:
                        add_metrics(rec)
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
    if metrics is not None:
        _write_openmetrics(openmetrics_path, metrics, pstats, report)
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


def _write_openmetrics(path: str, metrics, pstats: dict, report: dict) -> None:
    """Write ``metrics`` and the capture's counters (packets, issues by kind as the report
    counts them) to ``path`` as OpenMetrics text, atomically (a temporary file renamed)."""
    import os

    from kafkasniff.metrics.families import openmetrics_text

    text = openmetrics_text(metrics, {"packets_decoded": pstats.get("packets", 0),
                                      "issues": report.get("issues", {})})
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        fail(f"--openmetrics {path}: {exc.strerror or exc}")
