"""``kafkasniff export``: decode captures into Parquet (or JSON Lines) tables.

Loaded by :class:`kafkasniff.cli.LazyGroup` when the command is used; pyarrow is imported only
when it runs.
"""

from __future__ import annotations

import click

from kafkasniff.cli.inputs import (
    Progress,
    fail,
    input_options,
    jobs_option,
    output_dir,
    parse_inputs,
    resolve_jobs,
)
from kafkasniff.errors import KafkaSniffError


def parse_partition_by(ctx, param, value: str) -> tuple[str, ...]:
    """Click callback of ``--partition-by``: "date", "hour" or "date,hour" -> the columns in
    directory order; raises click.BadParameter otherwise."""
    from kafkasniff.export.paths import normalize_partition_by

    try:
        return normalize_partition_by(value or "")
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def table_options(func):
    """The options of the written tables, shared by ``export`` and ``spark decode``:
    ``--records`` (``with_records``), ``--partition-by`` (``partition_by``, a tuple),
    ``--format`` (``fmt``) and ``--row-group-rows`` (``row_group_rows``)."""
    opts = [
        click.option("--records", "with_records", is_flag=True,
                     help="Also write the records table: one row per record (key, value, "
                          "headers, offset, timestamp ...)."),
        click.option("--partition-by", "partition_by", default="", callback=parse_partition_by,
                     metavar="date|hour|date,hour",
                     help="Hive partition directories (date=YYYY-MM-DD/hour=HH) from each "
                          "row's UTC time."),
        click.option("--format", "fmt", type=click.Choice(["parquet", "jsonl"]),
                     default="parquet", show_default=True,
                     help="File format (JSON Lines: timestamps ISO 8601 UTC, binary base64)."),
        click.option("--row-group-rows", type=click.IntRange(1), default=50_000,
                     show_default=True,
                     help="Rows per Parquet row group (bounds memory per open file)."),
    ]
    for o in reversed(opts):
        func = o(func)
    return func


@click.command("export")
@input_options
@click.option("-o", "--output", "output", required=True, metavar="DIR",
              help="Output directory: one sub-directory per table (exchanges, partitions, "
                   "records, issues, connections, topic_ids); made when missing.")
@table_options
@click.option("--capture-name", default=None,
              help="Value of the capture column (default: each input file's name).")
@click.option("--file-tag", default="",
              help="Added to output file names, so that several runs can share a directory.")
@click.option("-q", "--quiet", is_flag=True, help="No summary line on stderr.")
@jobs_option
def export_command(files, read_files, ports, detect, max_frame_bytes, definitions,
                   max_uncompressed_bytes, wire_format, show_secrets, output, with_records,
                   partition_by, fmt, row_group_rows, capture_name, file_tag, quiet, jobs):
    """Decode captures into Parquet tables for Spark (docs/parquet-schema.md).

    Tables: exchanges, partitions, issues, connections, topic_ids, and records with
    --records. Secrets stay redacted unless --show-secrets.
    """
    from pathlib import Path

    from kafkasniff.cli import arrow_without_pandas_in_own_process
    from kafkasniff.export.writer import export_captures

    arrow_without_pandas_in_own_process()   # no process of this command holds pandas objects
    inp = parse_inputs(files, read_files, ports, detect, max_frame_bytes, definitions,
                  max_uncompressed_bytes, wire_format, show_secrets)
    output_dir(output, "--output")          # before anything is decoded
    progress = Progress(enabled=not quiet)
    jobs = resolve_jobs(jobs, inp.sources)
    run = export_captures
    kw = {}
    if jobs > 1:
        from kafkasniff.parallel.export import export_jobs as run

        kw = {"jobs": jobs}
    try:
        counts = run(inp.sources, Path(output), options=inp.pipeline_options(),
                     with_records=with_records, partition_by=partition_by, fmt=fmt,
                     capture_name=capture_name, file_tag=file_tag,
                     row_group_rows=row_group_rows, on_progress=progress, **kw)
    except KafkaSniffError as exc:
        progress.close()
        fail(str(exc))
    except OSError as exc:
        progress.close()
        fail(f"{output}: {exc.strerror or exc}")
    progress.close()
    if not quiet:
        click.echo("export: " + ", ".join(f"{t} {n}" for t, n in counts.items()) +
                   f" rows -> {output} ({fmt})", err=True)
