"""``kafkasniff spark``: the click group with ``decode``, ``report`` and ``watch``.

Loaded by :class:`kafkasniff.cli.LazyGroup` when the command is used. Also runnable on its
own (``spark-submit``, docs/spark.md): ``python -m kafkasniff.cli.spark decode ...``.
PySpark and pyarrow are imported only inside the command functions, so ``read``, ``stats``
and ``export`` never load them.

Exit codes: 0 ok; 2 usage error, an input that cannot be read (``spark report`` on a
directory without tables), Spark that cannot start (no Java, no PySpark, missing Spark
Connect packages, a ``spark://`` master that cannot be reached), a failed SQL query.
"""

from __future__ import annotations

import click

from kafkasniff.cli.export import table_options
from kafkasniff.cli.inputs import fail, input_options, output_dir, parse_inputs
from kafkasniff.errors import KafkaSniffError

__all__ = ["spark_group"]


def _pipeline_input_options(func):
    """``input_options`` of ``kafkasniff read`` (ports, detection, limits, secrets ...), with
    the positional ``FILES`` left out: ``spark decode`` takes files, directories and globs."""
    def probe():
        pass

    input_options(probe)
    params = [p for p in probe.__click_params__ if p.name != "files"]
    func.__dict__.setdefault("__click_params__", []).extend(params)
    return func


def _conf(ctx, param, values) -> dict[str, str]:
    out = {}
    for v in values:
        if "=" not in v:
            raise click.BadParameter(f"{v!r}: expected KEY=VALUE")
        k, _, val = v.partition("=")
        out[k.strip()] = val.strip()
    return out


def engine_options(func):
    """Where Spark runs: ``--master``, ``--remote``, ``--cores``, ``--conf``."""
    opts = [
        click.option("--master", default=None, metavar="URL",
                     help="Spark master: local[N], spark://HOST:7077, yarn, k8s://... "
                          "(default: local[*], every core of this machine)."),
        click.option("--remote", default=None, metavar="sc://HOST:PORT",
                     help="Spark Connect server instead of a master (needs "
                          "pip install 'pyspark[connect]')."),
        click.option("--cores", type=click.IntRange(1), default=None,
                     help="Local mode: worker threads (local[N]); a cluster: spark.cores.max."),
        click.option("--conf", "conf", multiple=True, callback=_conf, metavar="KEY=VALUE",
                     help="Extra Spark setting (repeatable), e.g. "
                          "--conf spark.executor.memory=4g."),
    ]
    for o in reversed(opts):
        func = o(func)
    return func


def _session(master, remote, cores, conf):
    from kafkasniff.spark.session import spark_session

    return spark_session(master=master, remote=remote, cores=cores, conf=conf or None)


@click.group("spark", context_settings={"help_option_names": ["-h", "--help"]})
def spark_group() -> None:
    """Decode and analyze captures at scale with Apache Spark (PySpark).

    Local mode (every core of this machine) by default; --master spark://... for a
    standalone cluster (or yarn, k8s://...), --remote sc://... for Spark Connect. Inputs and
    the output directory must be on storage every executor sees. See docs/spark.md.
    """


@spark_group.command("decode")
@click.argument("inputs", nargs=-1, metavar="INPUTS...")
@_pipeline_input_options
@click.option("-o", "--output", "output", required=True, metavar="DIR",
              help="Output directory: one sub-directory per table, as kafkasniff export "
                   "(made when missing).")
@engine_options
@click.option("--shards", type=click.IntRange(1), default=None,
              help="Split every capture into this many shards by connection (1: never "
                   "split). Default: only captures of --split-threshold-mb or more, into "
                   "one shard per 64 MiB.")
@click.option("--split-threshold-mb", type=click.IntRange(1), default=64, show_default=True,
              help="Captures at least this large are split by connection into shards "
                   "decoded in parallel.")
@table_options
@click.option("--no-verify", is_flag=True,
              help="Do not read the tables back to check the row counts.")
@click.option("--keep-scratch", is_flag=True,
              help="Keep the shard files (OUT/_kafkasniff_scratch/) for inspection.")
@click.option("-q", "--quiet", is_flag=True, help="No progress and summary lines on stderr.")
def decode_command(inputs, read_files, ports, detect, max_frame_bytes, definitions,
                   max_uncompressed_bytes, wire_format, show_secrets, output, master, remote,
                   cores, conf, shards, split_threshold_mb, with_records, partition_by, fmt,
                   row_group_rows, no_verify, keep_scratch, quiet):
    """Decode captures in parallel on Spark into Parquet tables (the same rows as export).

    INPUTS are capture files, directories (searched recursively for .pcap, .pcapng, .cap,
    optionally .gz) and glob patterns. Each file is decoded on its own; large ones are first
    split by TCP connection so that their shards decode in parallel. Decoding a capture
    again into the same directory replaces its earlier rows.
    """
    from kafkasniff.spark.decode import spark_decode

    inp = parse_inputs(inputs, read_files, ports, detect, max_frame_bytes, definitions,
                       max_uncompressed_bytes, wire_format, show_secrets)
    output_dir(output, "--output")          # before Spark starts
    log = None if quiet else (lambda m: click.echo(f"spark decode: {m}", err=True))
    try:
        # spark_decode starts (and stops) the session itself: a split on this machine then
        # runs while Spark starts
        res = spark_decode(inp.sources, output, master=master, remote=remote, cores=cores,
                           conf=conf or None, shards=shards, with_records=with_records,
                           partition_by=partition_by, fmt=fmt,
                           options=inp.pipeline_options(), row_group_rows=row_group_rows,
                           split_threshold_bytes=split_threshold_mb << 20,
                           verify=not no_verify, keep_scratch=keep_scratch, log=log)
    except KafkaSniffError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"{output}: {exc.strerror or exc}")
    if not quiet:
        from kafkasniff.text import plural

        split = sum(1 for n in res.shards.values() if n > 1)
        click.echo("spark decode: " + ", ".join(f"{t} {n}" for t, n in res.rows.items())
                   + f" rows -> {res.out_dir} ({fmt}); {plural(len(res.captures), 'capture')}, "
                   f"{split} split, {plural(res.tasks, 'task')}, {res.seconds:.1f} s"
                   + ("" if no_verify else ", counts verified"), err=True)


@spark_group.command("report")
@click.argument("directory", type=click.Path(file_okay=False, exists=True), metavar="DIR")
@engine_options
@click.option("--sql", "query", default=None, metavar="QUERY",
              help="Run this Spark SQL query against the views (exchanges, partitions, "
                   "records, issues, connections, topic_ids, the consumer-group tables "
                   "groups, members, rebalances, commits, and the helper views topic_names, "
                   "exchange_topics, partition_topics) and print the result instead of the "
                   "report.")
@click.option("--top", type=click.IntRange(1), default=20, show_default=True,
              help="Rows printed per table (--sql: rows printed).")
@click.option("--no-write", is_flag=True,
              help="Only print; do not write the reports under DIR/report/.")
def report_command(directory, master, remote, cores, conf, query, top, no_write):
    """Latency percentiles, errors, throttling, top talkers and throughput, with Spark SQL.

    Reads the tables of DIR (written by export or spark decode), prints every report and
    writes each as Parquet under DIR/report/<name>/. Percentiles: percentile_approx with
    accuracy 10000 (see docs/spark.md). A DIR without tables is an error (exit 2) found
    before Spark starts.
    """
    from kafkasniff.spark.report import (
        REPORT_TABLES,
        no_table_error,
        run_report,
        tables_present,
    )

    if remote is None:
        # the driver reads DIR here: say there is nothing to read before Java starts (a
        # Spark Connect server resolves DIR on its side; run_report checks it there)
        present = tables_present(directory)
        if not present or (query is None and not set(present) & set(REPORT_TABLES)):
            fail(str(no_table_error(directory)))
    try:
        with _session(master, remote, cores, conf) as spark:
            if query is not None:
                _sql(spark, directory, query, top)
            else:
                run_report(spark, directory, top=top, write=not no_write, echo=click.echo)
    except KafkaSniffError as exc:
        fail(str(exc))


def _sql(spark, directory, query, top) -> None:
    import logging

    from pyspark.errors import AnalysisException, ParseException
    from pyspark.logger import PySparkLogger

    from kafkasniff.spark.report import run_sql

    # the error is printed below in one line, not as pyspark's JSON log with the plan
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)
    try:
        run_sql(spark, directory, query, top=top, echo=click.echo)
    except (AnalysisException, ParseException) as exc:
        msg = str(getattr(exc, "getMessage", lambda: exc)() or exc).strip().splitlines()
        fail("SQL: " + (msg[0] if msg else str(exc)))


@spark_group.command("watch")
@click.argument("directory", type=click.Path(file_okay=False), metavar="DIR")
@engine_options
@click.option("--watermark", default="10 minutes", show_default=True,
              help="How late rows may arrive (in capture time) and still count; older "
                   "windows are finalized and their state dropped.")
@click.option("--window", default="1 minute", show_default=True,
              help="Tumbling window length.")
@click.option("--trigger-seconds", type=click.FloatRange(0.1), default=10.0,
              show_default=True, help="Seconds between micro-batches.")
@click.option("--available-now", is_flag=True,
              help="Process every file present now (in micro-batches) and stop.")
@click.option("--checkpoint", default=None, type=click.Path(file_okay=False),
              help="Checkpoint directory: a later run resumes there (default: a temporary "
                   "one, everything is read again).")
@click.option("--max-files-per-trigger", type=click.IntRange(1), default=100,
              show_default=True, help="New files read per micro-batch.")
@click.option("--output-mode", type=click.Choice(["update", "append"]), default="update",
              show_default=True,
              help="update: print the windows each micro-batch changed; append: print a "
                   "window once, when the watermark has passed it.")
@click.option("--rows", type=click.IntRange(1), default=50, show_default=True,
              help="Rows printed per micro-batch.")
def watch_command(directory, master, remote, cores, conf, watermark, window, trigger_seconds,
                  available_now, checkpoint, max_files_per_trigger, output_mode, rows):
    """Per-minute latency, error and throttle aggregates per API, as files arrive.

    A Structured Streaming query over DIR/exchanges (files that export or spark decode keep
    adding), with a watermark on the request time. Stop with Ctrl-C.
    """
    from kafkasniff.spark.watch import run_watch

    try:
        with _session(master, remote, cores, conf) as spark:
            run_watch(spark, directory, watermark=watermark, window=window,
                      trigger_seconds=trigger_seconds, available_now=available_now,
                      checkpoint=checkpoint, max_files_per_trigger=max_files_per_trigger,
                      output_mode=output_mode, rows=rows, echo=click.echo)
    except KafkaSniffError as exc:
        fail(str(exc))
    except Exception as exc:  # noqa: BLE001 - streaming errors surface as JVM exceptions
        if type(exc).__module__.startswith(("pyspark", "py4j")):
            fail(f"streaming query failed: {str(exc).strip().splitlines()[0]}")
        raise


if __name__ == "__main__":
    spark_group()
