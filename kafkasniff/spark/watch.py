"""``spark watch``: Structured Streaming over a directory that ``export`` keeps adding to.

The source is ``DIR/exchanges`` read as a file stream with the table's explicit schema
(:func:`kafkasniff.export.schema.spark_ddl`; files appear atomically: the writer renames a
finished ``.part-...inprogress`` file into place, and the stream ignores names starting with
``.``), at most ``max_files_per_trigger`` new files per micro-batch. Rows get a watermark on
``ts`` (the request's first byte) and are grouped in tumbling windows (one minute) per API::

    window_start, window_end, api_name, exchanges, error_exchanges, paired,
    p50_ns, p99_ns (percentile_approx, accuracy 10 000), max_ns, long_polls,
    throttled (exchanges with throttle_time_ms > 0), throttle_total_ms

The percentiles and maximum are of the served exchanges: long-polls (``long_poll``,
docs/long-polls.md) are only counted, as in ``stats`` and ``spark report``.

Output modes: ``update`` (default: each micro-batch prints the windows it changed) or
``append`` (a window is printed once, when the watermark passes its end, i.e. final). The
watermark (default 10 minutes) bounds state: after each micro-batch it becomes the newest
``ts`` seen minus the delay, windows ending before it are finalized and dropped from state,
and later rows of such windows are dropped as late. Spark filters late rows with the
watermark of the *previous* micro-batch, so a row up to one micro-batch late may still be
counted (Spark guarantees that rows within the delay are counted, not that later ones are
dropped). The delay must cover how late files may arrive (captures exported out of order,
several hosts). With ``available_now`` in append mode, windows the watermark has not passed
at the end are never printed (the stream stops first): use update mode there.

Results are printed by the driver (``foreachBatch``), so they go where the command's output
goes. Over Spark Connect (where a ``foreachBatch`` function runs, and prints, in the server's
Python) the updates go to a memory table on the server that the client polls and prints; it
keeps every update of the run in the server's memory.

``available_now`` processes every file present at start (in several micro-batches) and
stops; otherwise a micro-batch runs every ``trigger_seconds`` until interrupted. With a
``checkpoint`` directory the query resumes where it stopped (already counted files are not
read again); without one a temporary checkpoint is used and removed at the end.
"""

from __future__ import annotations

import shutil
import tempfile
import time
import uuid
from pathlib import Path
from typing import Callable

__all__ = ["WATCH_COLUMNS", "run_watch", "windowed_aggregates"]

WATCH_COLUMNS = ("window_start", "window_end", "api_name", "exchanges", "error_exchanges",
                 "paired", "p50_ns", "p99_ns", "max_ns", "long_polls", "throttled",
                 "throttle_total_ms")


def windowed_aggregates(spark, root: str, *, watermark: str = "10 minutes",
                        window: str = "1 minute", max_files_per_trigger: int = 100):
    """The streaming DataFrame of per-window, per-API aggregates over ``root/exchanges``
    (created when missing, so a watch can start before the first export)."""
    from pyspark.sql import functions as F

    from kafkasniff.export.schema import spark_ddl
    from kafkasniff.spark.report import PERCENTILE_ACCURACY

    src = Path(root) / "exchanges"
    src.mkdir(parents=True, exist_ok=True)
    stream = (spark.readStream.schema(spark_ddl("exchanges"))
              .option("maxFilesPerTrigger", max_files_per_trigger)
              .parquet(str(src)))
    paired = F.col("status") == "paired"
    long_poll = F.coalesce(F.col("long_poll"), F.lit(False))
    paired_lat = F.when(paired, F.greatest(F.col("latency_ns"), F.lit(0)))
    served_lat = F.when(paired & ~long_poll, F.greatest(F.col("latency_ns"), F.lit(0)))
    agg = (stream.withWatermark("ts", watermark)
           .groupBy(F.window("ts", window).alias("w"), F.col("api_name"))
           .agg(F.count(F.lit(1)).alias("exchanges"),
                F.count_if(F.col("error_count") > 0).alias("error_exchanges"),
                F.count(paired_lat).alias("paired"),
                F.percentile_approx(served_lat, [0.5, 0.99], PERCENTILE_ACCURACY).alias("_p"),
                F.max(served_lat).alias("max_ns"),
                F.count_if(paired & long_poll).alias("long_polls"),
                F.count_if(F.col("throttle_time_ms") > 0).alias("throttled"),
                F.coalesce(F.sum(F.when(F.col("throttle_time_ms") > 0,
                                        F.col("throttle_time_ms"))), F.lit(0))
                .cast("long").alias("throttle_total_ms")))
    return agg.select(F.col("w.start").alias("window_start"), F.col("w.end").alias("window_end"),
                      "api_name", "exchanges", "error_exchanges", "paired",
                      F.col("_p")[0].alias("p50_ns"), F.col("_p")[1].alias("p99_ns"),
                      "max_ns", "long_polls", "throttled", "throttle_total_ms")


def run_watch(spark, root: str, *, watermark: str = "10 minutes", window: str = "1 minute",
              trigger_seconds: float = 10.0, available_now: bool = False,
              checkpoint: str | None = None, max_files_per_trigger: int = 100,
              output_mode: str = "update", rows: int = 50,
              echo: Callable[[str], None] = print,
              on_batch: Callable[[int, list], None] | None = None,
              timeout_s: float | None = None) -> None:
    """Run the windowed aggregation and print each micro-batch's rows (sorted by window and
    API, at most ``rows`` per batch) until stopped (Ctrl-C), or, with ``available_now``,
    until every file present at start is processed. ``on_batch(batch_id, rows)`` also
    receives every batch's rows (``Row`` objects). ``timeout_s`` stops the query after that
    many seconds (tests)."""
    from kafkasniff.spark.session import is_connect

    if output_mode not in ("update", "append"):
        raise ValueError(f"output mode {output_mode!r}: expected update or append")
    agg = windowed_aggregates(spark, root, watermark=watermark, window=window,
                              max_files_per_trigger=max_files_per_trigger)

    def show(batch_id: int, got: list) -> None:
        if on_batch is not None:
            on_batch(batch_id, got)
        if got:
            echo(_render_rows(f"batch {batch_id}: {len(got)} window row(s) ({output_mode})",
                              got, rows))

    name = f"kafkasniff_watch_{uuid.uuid4().hex[:12]}"
    writer = agg.writeStream.outputMode(output_mode).queryName(name)
    writer = (writer.trigger(availableNow=True) if available_now
              else writer.trigger(processingTime=f"{trigger_seconds} seconds"))
    tmp = None
    connect = is_connect(spark)
    if checkpoint is None and not connect:
        tmp = checkpoint = tempfile.mkdtemp(prefix="kafkasniff-watch-")
    if checkpoint is not None:
        writer = writer.option("checkpointLocation", checkpoint)
    if connect:
        # foreachBatch functions run in the server's Python, which prints there: collect
        # the updates in a memory table of the server and print them here instead
        query = writer.format("memory").start()
        poll = _MemoryPoll(spark, name, show)
    else:
        query = writer.foreachBatch(
            lambda df, batch_id: show(batch_id, df.orderBy("window_start", "api_name")
                                      .collect())).start()
        poll = None
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    try:
        while query.isActive:
            if deadline is not None and time.monotonic() > deadline:
                break
            query.awaitTermination(1 if poll is not None else 5)
            if poll is not None:
                poll(query)
    except KeyboardInterrupt:
        pass
    finally:
        if query.isActive:
            query.stop()
        if poll is not None:
            poll(query)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    exc = query.exception()
    if exc is not None:
        raise exc


class _MemoryPoll:
    """Prints the rows a memory-sink query appended since the last call (Spark Connect)."""

    def __init__(self, spark, name: str, show) -> None:
        self.spark, self.name, self.show = spark, name, show
        self.seen = 0
        self.batch = -1

    def __call__(self, query) -> None:
        progress = query.lastProgress
        batch = progress["batchId"] if progress else -1
        if batch == self.batch:
            return
        self.batch = batch
        got = self.spark.sql(f"SELECT * FROM {self.name}").collect()
        new, self.seen = got[self.seen:], len(got)
        if new:
            self.show(batch, sorted(new, key=lambda r: (r["window_start"], r["api_name"])))


def _render_rows(title: str, got: list, limit: int) -> str:
    from kafkasniff.spark.report import render_rows

    text = render_rows(title, list(WATCH_COLUMNS), got[:limit])
    if len(got) > limit:
        text += f"  ... {len(got) - limit} more\n"
    return text
