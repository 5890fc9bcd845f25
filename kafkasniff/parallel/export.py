"""``export --jobs N``: every decoder writes its own part files of each table; the reader
writes the standalone issues (they pass the ``capture_issues`` budget in capture order) and
the empty files of tables without any row."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from kafkasniff.export.paths import source_name
from kafkasniff.export.schema import export_tables
from kafkasniff.export.writer import DEFAULT_ROW_GROUP_ROWS, ExportSink
from kafkasniff.groups.analysis import GroupAnalyzer
from kafkasniff.parallel.engine import run_jobs
from kafkasniff.pipeline import PipelineOptions

__all__ = ["export_jobs"]


def export_jobs(sources: list, out_dir: Path, *, jobs: int, options=None,
                with_records: bool = False, partition_by: tuple[str, ...] = (),
                fmt: str = "parquet", capture_name: str | None = None, file_tag: str = "",
                row_group_rows: int = DEFAULT_ROW_GROUP_ROWS,
                on_progress=None, groups: bool = True) -> dict[str, int]:
    """:func:`kafkasniff.export.writer.export_captures` with ``jobs`` decoder processes:
    the same rows (file names gain ``-j<decoder>``: ``part-<capture>[-<file_tag>]-j<i>-<n>``).
    Returns rows written per table.

    Raises:
        kafkasniff.errors.CaptureError: a source cannot be read.
        kafkasniff.parallel.engine.DecoderFailed: a decoder failed or died (files in
            progress are removed).
    """
    opts = dataclasses.replace(options or PipelineOptions(), meta_records=True,
                               with_records=with_records)
    stem_name = capture_name or (source_name(sources[0]) if sources else "capture")
    stem = stem_name + (f"-{file_tag}" if file_tag else "")
    names = [capture_name or source_name(s) for s in sources]
    sink = ExportSink(out_dir, file_stem=stem, fmt=fmt, partition_by=partition_by,
                      with_records=with_records, row_group_rows=row_group_rows,
                      tables=export_tables(with_records, groups))
    spec = dict(out_dir=out_dir, stem=stem, fmt=fmt, partition_by=sink.partition_by,
                with_records=with_records, row_group_rows=row_group_rows, groups=groups,
                group_budgets=opts.budgets)

    def on_item(item) -> None:
        _, issue, capture, first_ts, fallback = item
        sink.add(issue, capture=capture, conn_first_ts_ns=first_ts, fallback_ts_ns=fallback)

    try:
        res = run_jobs(sources, opts, jobs, "export", spec, on_item, on_progress=on_progress,
                       source_names=names)
    except BaseException:
        sink.abort()
        raise
    analyzer = GroupAnalyzer(sink.defs, budgets=opts.budgets) if groups else None
    for counts, _files, group_state in res.results:
        sink.add_counts(counts)
        if analyzer is not None and group_state is not None:
            analyzer.merge(group_state)
    if analyzer is not None:          # the groups span decoders: analysed here, as one
        sink.add_groups(analyzer.finish(), capture=stem_name)
        analyzer.close()
    return sink.close(empty_ts_ns=res.stats.first_ts_ns)
