"""``kafkasniff read``: one line (or one JSON object) per exchange."""

from __future__ import annotations

import json
import sys

import click

from kafkasniff.cli.inputs import (
    Progress,
    fail,
    filter_options,
    input_options,
    jobs_option,
    parse_filter_options,
    parse_inputs,
    resolve_jobs,
)
from kafkasniff.errors import KafkaSniffError


def summary_line(stats, shown: int | None = None) -> str:
    """``summary: ...`` of a run's :class:`~kafkasniff.pipeline.PipelineStats` (``shown``:
    exchanges printed, when filtered)."""
    from kafkasniff.output.render import summary_parts

    return "summary: " + "; ".join(summary_parts(
        stats.exchanges, stats.issues, stats.packets, stats.skipped, stats.kafka_connections,
        stats.other_connections, shown, ledger=stats.bytes))


@click.command("read")
@input_options
@click.option("--json", "as_json", is_flag=True, help="JSON Lines: one object per exchange "
              "(and per standalone issue), see docs/json.md.")
@filter_options
@click.option("-c", "--count", type=click.IntRange(1), default=None,
              help="Stop after this many exchanges.")
@click.option("--no-issues", is_flag=True, help="Do not print standalone issues.")
@click.option("--strict", is_flag=True, help="Exit 1 if any warning or error issue was found.")
@click.option("--color/--no-color", default=None, help="Colour errors (default: on a terminal).")
@click.option("-q", "--quiet", is_flag=True, help="No summary line on stderr.")
@click.option("--records", "with_records", is_flag=True,
              help="Decode and show every record (partition, offset, timestamp, key, value, "
                   "headers), not only batch summaries.")
@click.option("--value-bytes", type=click.IntRange(0), default=256, show_default=True,
              help="Bytes of each record key/value shown (0: everything).")
@jobs_option
def read_command(files, read_files, ports, detect, max_frame_bytes, definitions,
                 max_uncompressed_bytes, wire_format, show_secrets, as_json, api, client, topic,
                 errors_only, min_latency, count, no_issues, strict, color, quiet, with_records,
                 value_bytes, jobs):
    """Print every exchange: one line each, or JSON Lines with --json."""
    from kafkasniff.model import Exchange
    from kafkasniff.output.render import (
        issue_line,
        issue_to_dict,
        json_default,
        write_exchange,
    )
    from kafkasniff.pipeline import Pipeline, analyze

    inp = parse_inputs(files, read_files, ports, detect, max_frame_bytes, definitions,
                       max_uncompressed_bytes, wire_format, show_secrets)
    keep = parse_filter_options(api, client, topic, errors_only, min_latency,
                                definitions).predicate()
    show_issues = not no_issues and keep is None
    if color is None:
        color = sys.stdout.isatty()
    progress = Progress(enabled=not quiet)
    shown = 0
    bad = 0
    out = sys.stdout
    default = json_default(value_bytes)
    jobs = resolve_jobs(jobs, inp.sources)

    def show_issue(rec) -> None:
        nonlocal bad
        if rec.severity != "info":
            bad += 1
        if show_issues:
            out.write(json.dumps(issue_to_dict(rec)) if as_json else issue_line(rec))
            out.write("\n")

    def on_item(item) -> bool:
        # --jobs N: what the decoders pass on, in capture order
        nonlocal shown, bad
        if item[0] == "i":
            show_issue(item[1])
            return False
        bad += item[2]
        if item[1] is None:
            return False
        out.write(item[1])
        shown += 1
        return count is not None and shown >= count

    try:
        opts = inp.pipeline_options(with_records=with_records)
        if jobs > 1:
            from kafkasniff.parallel.engine import run_jobs

            spec = dict(keep=keep, as_json=as_json, with_records=with_records,
                        value_bytes=value_bytes, color=color)
            stats = run_jobs(inp.sources, opts, jobs, "read", spec, on_item,
                             on_progress=progress).stats
        else:
            pipe = Pipeline(opts)
            stats = pipe.stats
            for rec in analyze(inp.sources, pipeline=pipe, on_progress=progress):
                if type(rec) is Exchange:
                    bad += sum(1 for i in rec.issues if i.severity != "info")
                    if keep is not None and not keep(rec):
                        continue
                    write_exchange(rec, out, as_json=as_json, with_records=with_records,
                                   value_bytes=value_bytes, default=default, color=color)
                    shown += 1
                    if count is not None and shown >= count:
                        break
                else:
                    show_issue(rec)
        out.flush()
    except KafkaSniffError as exc:
        progress.close()
        fail(str(exc))
    except BrokenPipeError:
        sys.stderr.close()
        sys.exit(0)
    progress.close()
    if not quiet:
        out.flush()
        click.echo(summary_line(stats, shown), err=True)
    sys.exit(1 if strict and bad else 0)
