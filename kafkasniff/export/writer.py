"""Streaming export of decoded captures to Parquet (or JSON Lines) tables.

Layout (one directory per table, optional Hive partitions)::

    OUT/<table>/[date=YYYY-MM-DD/[hour=HH/]]part-<capture>[-<file_tag>]-<n>.parquet   (.jsonl)

Memory is bounded, whatever the capture's size: rows are converted to Arrow record batches
every 2 048 rows and written as a Parquet row group every ``row_group_rows`` rows (or
``row_group_bytes`` of Arrow data) per open file, or earlier when the open files together
buffer more than ``memory_budget_bytes`` (8 MiB); at most ``max_open_files`` files are open
at once (the least recently used one is finished first, a later row of its partition opens
the next ``<n>``).

Files appear atomically: each is written under a name starting with ``.`` (Spark, Hive and
pyarrow datasets ignore files starting with ``.`` or ``_``) and renamed when complete. Every
file has exactly the table's schema (:data:`kafkasniff.export.schema.SCHEMAS`), never an
inferred one; a table that got no rows in a run still gets one empty file (so that readers
find its schema), except ``records`` when it was not asked for.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from binascii import b2a_base64
from collections import OrderedDict
from functools import lru_cache
from itertools import islice
from pathlib import Path
from typing import Callable, Iterable

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from kafkasniff.export import rows as _rows
from kafkasniff.export.paths import (
    EXTENSIONS,
    FORMATS,
    normalize_partition_by,
    safe_name,
    source_name,
)
from kafkasniff.export.schema import ALL_TABLES, SCHEMAS, TIMESTAMP, export_tables
from kafkasniff.issues import IssueKind, Severity
from kafkasniff.model import ConnectionSummary, DecodeIssue, Exchange, TopicName, connection_id_of
from kafkasniff.output.render import utc_seconds

DEFAULT_ROW_GROUP_ROWS = 50_000
DEFAULT_ROW_GROUP_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_OPEN_FILES = 64
DEFAULT_MEMORY_BUDGET_BYTES = 8 * 1024 * 1024  # buffered rows of all open files together
_CHECK_EVERY_ROWS = 1024
_BATCH_ROWS = 2048  # rows kept as Python dicts before conversion to an Arrow batch


# ------------------------------------------------------------------------------- pyarrow

class _RefusePandas:
    """A meta path finder that refuses to import pandas (:func:`arrow_without_pandas`)."""

    def find_spec(self, name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"{name}: not imported by this process", name=name)
        return None


def arrow_without_pandas() -> bool:
    """Let pyarrow convert Python lists without importing pandas in this process.

    pyarrow's first ``pa.array`` of a Python list imports pandas, only to ask whether the
    list is a pandas object (apache/arrow#34994): 0.47-0.51 s and about 45 MB of every
    export process with pandas 3 on this project's machine, in a command that never holds
    a pandas object. This makes that first check find no pandas: a meta path finder
    refuses the import for the length of one empty conversion. pyarrow keeps the answer for
    its "is this a pandas object" checks only: a call that needs pandas
    (``Table.to_pandas``) still imports it, and pyarrow's pandas support is whole again
    from then on. For processes that hold no pandas objects only: the ``export`` command
    and ``live --export`` in their own process (:data:`kafkasniff.cli.OWN_PROCESS`), with
    the decoders they fork after this call; never a library caller's process or a Spark
    worker.

    Returns ``False`` when pandas is already imported (there is nothing to save), else
    ``True``.
    """
    if "pandas" in sys.modules:
        return False
    finder = _RefusePandas()
    sys.meta_path.insert(0, finder)
    try:
        pa.array([], type=pa.int8())    # pyarrow's check, answered "no pandas"
    finally:
        sys.meta_path.remove(finder)
    return True


# ------------------------------------------------------------------------------- JSON Lines

@lru_cache(maxsize=4096)
def _iso_us(us: int) -> str:
    """``2024-05-01T12:00:00.000001Z`` for microseconds since the epoch. Cached: the rows of
    a batch share their ``ts``, and its records' timestamps (milliseconds) repeat."""
    sec, frac = divmod(us, 1_000_000)
    return f"{utc_seconds(sec)}.{frac:06d}Z"


def _b64(b) -> str:
    return b2a_base64(b, newline=False).decode("ascii")


#: a float as the standard library writes it (``1e-07``, ``NaN``, ``Infinity``)
_float_text = json.JSONEncoder().encode


def _jsonl_encoder(schema: pa.Schema) -> Callable[[dict], bytes]:
    """Row -> one JSON line, UTF-8 with its ``\\n``: timestamps as ISO 8601 UTC with
    microseconds, binary as base64 (what Spark's JSON reader expects for TIMESTAMP and
    BINARY), every column present, in the schema's order.

    The line is the standard library's ``json`` with ``ensure_ascii=False`` and compact
    separators, written by orjson (3-4x faster): ``double`` columns are handed to orjson as
    the standard library's text (``orjson.Fragment``), since orjson writes ``1e-7`` for
    ``1e-07`` and ``null`` for ``NaN``. A row orjson refuses (an int beyond 64 bits, a lone
    surrogate) is written by the standard library. Raises ``TypeError`` for a value neither
    can encode, ``UnicodeEncodeError`` for a string UTF-8 cannot hold.
    """
    conv = []
    floats = []
    for f in schema:
        t = f.type
        if t == TIMESTAMP:
            conv.append((f.name, _iso_us))
        elif t == pa.binary():
            conv.append((f.name, _b64))
        elif t == pa.float64():
            floats.append(f.name)
        elif pa.types.is_list(t) and pa.types.is_struct(t.value_type):
            bins = [c.name for c in t.value_type if c.type == pa.binary()]
            if bins:
                def headers(items, bins=bins):
                    return [{k: (_b64(v) if k in bins and v is not None else v)
                             for k, v in it.items()} for it in items]
                conv.append((f.name, headers))
    names = schema.names
    template = dict.fromkeys(names)
    width = len(names)
    # one encoder: json.dumps with any keyword builds a new JSONEncoder per call
    std = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    dumps = orjson.dumps
    fragment = orjson.Fragment

    newline = orjson.OPT_APPEND_NEWLINE

    def encode(row: dict) -> bytes:
        out = template.copy()
        out.update(row)
        if len(out) != width:           # a key the schema does not have: left out
            out = {n: row.get(n) for n in names}
        for name, fn in conv:
            v = out[name]
            if v is not None:
                out[name] = fn(v)
        for name in floats:
            v = out[name]
            if v is not None:
                out[name] = fragment(_float_text(v))
        try:
            return dumps(out, option=newline)
        except TypeError:               # orjson.JSONEncodeError: the standard library decides
            for name in floats:         # with the floats themselves
                out[name] = row.get(name)
            return (std(out) + "\n").encode("utf-8")
    return encode


# ------------------------------------------------------------------------------- one file

class TableWriter:
    """Writes rows of one table (one partition of it) to one file, atomically.

    Args:
        path: the final file path; the file is written as ``.<name>.inprogress`` beside it and
            renamed on :meth:`close`.
        table: table name (a key of :data:`SCHEMAS`).
        fmt: ``"parquet"`` (zstd, one row group per ``row_group_rows`` rows) or ``"jsonl"``.
        row_group_rows / row_group_bytes: a row group is written when either is reached.

    Rows are dicts keyed by column name (missing keys are nulls). Raises ``ValueError`` when a
    non-nullable column gets a null (the file would be invalid).
    """

    def __init__(self, path: Path | str, table: str, *, fmt: str = "parquet",
                 row_group_rows: int = DEFAULT_ROW_GROUP_ROWS,
                 row_group_bytes: int = DEFAULT_ROW_GROUP_BYTES) -> None:
        if fmt not in FORMATS:
            raise ValueError(f"unknown format {fmt!r} (expected one of {', '.join(FORMATS)})")
        if row_group_rows < 1:
            raise ValueError("row_group_rows must be >= 1")
        self.path = Path(path)
        self.tmp_path = self.path.with_name("." + self.path.name + ".inprogress")
        self.table = table
        self.schema = SCHEMAS[table]
        self.fmt = fmt
        self.row_group_rows = row_group_rows
        self.row_group_bytes = row_group_bytes
        self.rows_written = 0  # rows handed to the file (written or in a pending row group)
        self.row_groups = 0
        self._pending: list[dict] = []
        self._batches: list[pa.RecordBatch] = []
        self._batch_rows = 0
        self._batch_bytes = 0
        self._convert_every = min(_BATCH_ROWS, row_group_rows)
        self._required = [i for i, f in enumerate(self.schema) if not f.nullable]
        self._struct = pa.struct(list(self.schema))
        self._file = None
        self._encode = _jsonl_encoder(self.schema) if fmt == "jsonl" else None
        self.closed = False

    @property
    def buffered_bytes(self) -> int:
        """Memory held for the next row group: the Arrow batches plus an estimate (1 KiB a
        row) of the rows not converted yet."""
        return self._batch_bytes + len(self._pending) * 1024

    # -- writing
    def write(self, row: dict) -> None:
        """Add one row. Rows are converted to Arrow in batches (up to 2 048 rows): a null in a
        non-nullable column raises ``ValueError`` when its batch is converted (this call or
        a later ``write`` / ``flush`` / ``close``)."""
        self._pending.append(row)
        self.rows_written += 1
        if len(self._pending) >= self._convert_every:
            self._convert()

    def write_many(self, rows: Iterable[dict]) -> None:
        """Add rows (converted in the same batches as one :meth:`write` per row)."""
        if type(rows) is not list:
            for row in rows:
                self.write(row)
            return
        every = self._convert_every
        i, n = 0, len(rows)
        while i < n:
            room = max(every - len(self._pending), 1)
            part = rows if i == 0 and n <= room else rows[i:i + room]
            self._pending.extend(part)
            self.rows_written += len(part)
            i += len(part)
            if len(self._pending) >= every:
                self._convert()

    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.fmt == "parquet":
            self._file = pq.ParquetWriter(self.tmp_path, self.schema, compression="zstd",
                                          write_statistics=True)
        else:
            self._file = open(self.tmp_path, "wb")     # lines encoded by _jsonl_encoder

    def _convert(self) -> None:
        rows = self._pending
        if not rows:
            return
        self._pending = []
        if self.fmt == "jsonl":
            if self._file is None:
                self._open()
            # line by line into the file's buffer: one joined megabyte per batch made the
            # heap grow and shrink (brk) every time, 6x the system time
            self._file.writelines(map(self._encode, rows))
            return
        # one struct array converted in C++: RecordBatch.from_pylist gathers each column
        # with a Python loop over the rows first (a third slower)
        batch = pa.RecordBatch.from_arrays(pa.array(rows, type=self._struct).flatten(),
                                           schema=self.schema)
        for i in self._required:
            if batch.column(i).null_count:
                raise ValueError(f"{self.table}.{self.schema.names[i]}: null in a "
                                 f"non-nullable column")
        self._batches.append(batch)
        self._batch_rows += batch.num_rows
        self._batch_bytes += batch.nbytes
        if self._batch_rows >= self.row_group_rows or self._batch_bytes >= self.row_group_bytes:
            self._write_group()

    def _write_group(self) -> None:
        if not self._batches:
            return
        if self._file is None:
            self._open()
        table = pa.Table.from_batches(self._batches, schema=self.schema)
        self._file.write_table(table, row_group_size=max(table.num_rows, 1))
        self.row_groups += 1
        self._batches = []
        self._batch_rows = self._batch_bytes = 0

    def flush(self) -> None:
        """Write what is buffered (as a row group for Parquet)."""
        self._convert()
        if self.fmt == "parquet":
            self._write_group()
        elif self._file is not None:
            self._file.flush()

    def add_counts(self, counts: dict[str, int]) -> None:
        """Rows written by other sinks of the same run (the decoders of ``--jobs N``): they
        are in what :meth:`close` returns, and a table with rows there gets no empty
        file."""
        for table, n in counts.items():
            if table in self.counts:
                self.counts[table] += n

    # -- ending
    def close(self, keep_empty: bool = False) -> bool:
        """Finish the file and rename it to its final name. Without rows, no file is left
        unless ``keep_empty`` (then a valid file with the schema and no rows). Returns
        whether a file was produced."""
        if self.closed:
            return self.path.exists()
        self.flush()
        self.closed = True
        if self._file is None:
            if not keep_empty:
                return False
            self._open()
        self._file.close()
        self._file = None
        os.replace(self.tmp_path, self.path)
        return True

    def abort(self) -> None:
        """Stop without producing a file (the temporary file is removed)."""
        self.closed = True
        self._pending = []
        self._batches = []
        if self._file is not None:
            try:
                self._file.close()
            except Exception:  # noqa: BLE001 - the file is being thrown away
                pass
            self._file = None
        try:
            os.unlink(self.tmp_path)
        except FileNotFoundError:
            pass


# ------------------------------------------------------------------------------- the sink

class ExportSink:
    """Rows in, partitioned table files out (bounded memory).

    Args:
        out_dir: output directory (one sub-directory per table).
        file_stem: file names are ``part-<file_stem>-<n>.<ext>``.
        fmt: ``"parquet"`` or ``"jsonl"``.
        partition_by: ``()``, ``("date",)``, ``("hour",)`` or ``("date", "hour")``.
        with_records: the ``records`` table is written (one row per record).
        row_group_rows / row_group_bytes: row group bounds per file.
        max_open_files: files open at once (least recently used finished first).
        memory_budget_bytes: rows buffered by all open files together; beyond it the largest
            buffer is written as a row group early.
        defs: definitions used to read bodies (default: the installed ones).
        tables: the tables written (rows of others are ignored, and only these get an empty
            file when they have no rows); default: the tables of exchanges, issues and
            connections (:data:`~kafkasniff.export.schema.TABLES`), ``records`` only with
            ``with_records``; the group tables (:data:`~kafkasniff.export.schema.GROUP_TABLES`,
            :meth:`add_groups`) only when named.
        groups: a :class:`~kafkasniff.groups.analysis.GroupAnalyzer` that :meth:`add` also
            feeds the exchanges it reads (with their ``exchange_id``) and the topic names;
            the caller writes its report with :meth:`add_groups`.

    Feed pipeline values with :meth:`add` (or rows with :meth:`add_rows`), then
    :meth:`close` (or :meth:`abort` on failure). ``counts`` holds rows per table.
    """

    def __init__(self, out_dir: Path | str, *, file_stem: str = "capture", fmt: str = "parquet",
                 partition_by: tuple[str, ...] | str = (), with_records: bool = False,
                 row_group_rows: int = DEFAULT_ROW_GROUP_ROWS,
                 row_group_bytes: int = DEFAULT_ROW_GROUP_BYTES,
                 max_open_files: int = DEFAULT_MAX_OPEN_FILES,
                 memory_budget_bytes: int = DEFAULT_MEMORY_BUDGET_BYTES, defs=None,
                 tables: tuple[str, ...] | None = None, groups=None) -> None:
        if fmt not in FORMATS:
            raise ValueError(f"unknown format {fmt!r} (expected one of {', '.join(FORMATS)})")
        if row_group_rows < 1:
            raise ValueError("row_group_rows must be >= 1")
        self.out_dir = Path(out_dir)
        self.file_stem = safe_name(file_stem)
        self.fmt = fmt
        self.partition_by = normalize_partition_by(partition_by)
        self.with_records = with_records
        if tables is None:
            tables = export_tables(with_records)
        self.groups = groups
        self._group_apis = None
        if groups is not None:
            from kafkasniff.groups.analysis import READ_APIS

            self._group_apis = READ_APIS
        unknown = set(tables) - set(ALL_TABLES)
        if unknown:
            raise ValueError(f"unknown table(s): {', '.join(sorted(unknown))}")
        self.tables = tuple(tables)
        self.row_group_rows = row_group_rows
        self.row_group_bytes = row_group_bytes
        self.max_open_files = max(1, max_open_files)
        self.memory_budget_bytes = memory_budget_bytes
        self._unchecked = 0
        if defs is None:
            defs = _rows._default_defs()
        self.defs = defs
        self.counts: dict[str, int] = {t: 0 for t in self.tables}
        self.internal_errors = 0  # exchanges whose rows could not be built (a bug; reported)
        self.files: list[Path] = []
        self._open: OrderedDict[tuple, TableWriter] = OrderedDict()
        self._seq: dict[tuple, int] = {}

    # -- rows
    def _writer(self, table: str, row: dict) -> TableWriter:
        key: tuple = (table,)
        for col in self.partition_by:
            key += (row[col],)
        w = self._open.get(key)
        if w is not None:
            self._open.move_to_end(key)
            return w
        while len(self._open) >= self.max_open_files:
            _, old = self._open.popitem(last=False)
            self._finish(old)
        d = self.out_dir / table
        for col, v in zip(self.partition_by, key[1:]):
            d = d / (f"date={v}" if col == "date" else f"hour={v:02d}")
        n = self._seq.get(key, 0)
        self._seq[key] = n + 1
        w = TableWriter(d / f"part-{self.file_stem}-{n}{EXTENSIONS[self.fmt]}", table, fmt=self.fmt,
                        row_group_rows=self.row_group_rows,
                        row_group_bytes=self.row_group_bytes)
        self._open[key] = w
        return w

    def _finish(self, w: TableWriter, keep_empty: bool = False) -> None:
        if w.close(keep_empty=keep_empty):
            self.files.append(w.path)

    def add_rows(self, table: str, rows: Iterable[dict]) -> None:
        """Write rows of ``table`` (a list, or an iterator consumed in chunks: a million
        record rows are never held at once); rows of a table not in :attr:`tables` are
        ignored."""
        if table not in self.counts:
            return
        step = _CHECK_EVERY_ROWS
        if type(rows) is list:
            if not rows:
                return
            chunks = [rows] if len(rows) <= step else \
                (rows[i:i + step] for i in range(0, len(rows), step))
        else:
            it = iter(rows)
            chunks = iter(lambda: list(islice(it, step)), [])
        for chunk in chunks:
            if not self.partition_by:
                self._writer(table, chunk[0]).write_many(chunk)
            else:
                for row in chunk:
                    self._writer(table, row).write(row)
            self.counts[table] += len(chunk)
            self._unchecked += len(chunk)
            if self._unchecked >= step:
                self._unchecked = 0
                self._enforce_budget()

    def _enforce_budget(self) -> None:
        """Write row groups early (largest buffer first) while the open files together hold
        more than ``memory_budget_bytes``."""
        writers = list(self._open.values())
        total = sum(w.buffered_bytes for w in writers)
        while total > self.memory_budget_bytes and writers:
            w = max(writers, key=lambda x: x.buffered_bytes)
            total -= w.buffered_bytes
            w.flush()
            total += w.buffered_bytes
            writers.remove(w)

    def add(self, rec, *, capture: str, conn_first_ts_ns: int | None = None,
            fallback_ts_ns: int = 0) -> None:
        """Write the rows of one pipeline value: an :class:`Exchange`, a :class:`DecodeIssue`,
        a :class:`~kafkasniff.pipeline.ConnectionSummary` or a
        :class:`~kafkasniff.pipeline.TopicName`.

        ``conn_first_ts_ns``: first packet time of the value's TCP connection (for
        :func:`~kafkasniff.export.rows.connection_key`); ``fallback_ts_ns``: the time given
        to an issue that carries none (the capture time it was reported at).
        """
        t = type(rec)
        if t is Exchange:
            first = conn_first_ts_ns if conn_first_ts_ns is not None else rec.ts_ns
            ck = _rows.connection_key(rec.client, rec.broker, first)
            if self._group_apis is not None and rec.api_key in self._group_apis:
                self.groups.add(rec, _rows.exchange_id(rec, ck))
            try:
                tables = _rows.exchange_rows(rec, capture, ck, defs=self.defs,
                                             with_records=self.with_records)
                for table, rows in tables.items():
                    if rows:                    # an empty list: no call
                        self.add_rows(table, rows)
            except Exception as exc:  # noqa: BLE001 - a kafkasniff bug on one exchange
                self.internal_errors += 1
                issue = DecodeIssue(
                    IssueKind.INTERNAL_ERROR, Severity.ERROR,
                    f"export of this exchange failed ({type(exc).__name__}: {exc}); its rows "
                    f"are missing, please report it", rec.ts_ns, rec.conn_id, rec.client,
                    rec.broker, correlation_id=rec.correlation_id, api_key=rec.api_key,
                    api_version=rec.api_version)
                self.add_rows("issues", [_rows.issue_row(issue, capture, ck, None, rec.ts_ns)])
                return
        elif t is DecodeIssue:
            ck = None
            if rec.connection_id >= 0 and conn_first_ts_ns is not None:
                ck = _rows.connection_key(rec.client, rec.broker, conn_first_ts_ns)
            self.add_rows("issues", [_rows.issue_row(rec, capture, ck, None, fallback_ts_ns)])
        elif t is ConnectionSummary:
            self.add_rows("connections", [_rows.connection_row(rec, capture)])
        elif t is TopicName:
            self.add_rows("topic_ids", [_rows.topic_row(rec, capture)])
            if self.groups is not None:
                self.groups.add_topic_name(rec.topic_id, rec.name)
        else:
            raise TypeError(f"cannot export a {t.__name__}")

    def add_groups(self, report, *, capture: str) -> None:
        """Write the group tables' rows of a :class:`kafkasniff.groups.model.GroupsReport`
        (tables not in :attr:`tables` are skipped), and the issues of its analysis (a
        budget reached, an assignment that does not decode) to the ``issues`` table."""
        for table, rows in _rows.group_rows(report, capture).items():
            self.add_rows(table, rows)
        if report.issues:
            self.add_rows("issues", [_rows.issue_row(i, capture, None) for i in report.issues])

    def add_records(self, records: Iterable, *, capture: str, pipeline) -> None:
        """Write the rows of what one :meth:`~kafkasniff.pipeline.Pipeline.feed` /
        ``finish`` call of ``pipeline`` returned: connections are keyed by their first
        packet time (:meth:`~kafkasniff.pipeline.Pipeline.first_seen_ns`), issues without a
        time get the capture time reached."""
        first_seen = pipeline.first_seen_ns
        fallback = pipeline.stats.last_ts_ns
        add = self.add
        for rec in records:
            add(rec, capture=capture, conn_first_ts_ns=first_seen(connection_id_of(rec)),
                fallback_ts_ns=fallback)

    def add_counts(self, counts: dict[str, int]) -> None:
        """Rows written by other sinks of the same run (the decoders of ``--jobs N``): they
        are in what :meth:`close` returns, and a table with rows there gets no empty
        file."""
        for table, n in counts.items():
            if table in self.counts:
                self.counts[table] += n

    # -- ending
    def close(self, empty_ts_ns: int = 0, empty_files: bool = True) -> dict[str, int]:
        """Finish every file; with ``empty_files``, a table without any row gets an empty
        file (in the partition of ``empty_ts_ns`` when partitioned), so that every table's
        directory exists with its schema. Returns rows written per table."""
        while self._open:
            _, w = self._open.popitem(last=False)
            self._finish(w)
        tcols = _rows.time_columns(empty_ts_ns)
        for table in (self.tables if empty_files else ()):
            if not self.counts[table]:
                self._finish(self._writer(table, tcols), keep_empty=True)
                self._open.clear()
        return dict(self.counts)

    def abort(self) -> None:
        """Drop every file being written (files already finished stay)."""
        while self._open:
            _, w = self._open.popitem(last=False)
            w.abort()


# ------------------------------------------------------------------------------- captures

def export_captures(sources: list, out_dir: Path, *, options=None, with_records: bool = False,
                    partition_by: tuple[str, ...] = (), fmt: str = "parquet",
                    capture_name: str | None = None, file_tag: str = "",
                    row_group_rows: int = DEFAULT_ROW_GROUP_ROWS,
                    row_group_bytes: int = DEFAULT_ROW_GROUP_BYTES,
                    on_progress=None, groups: bool = True,
                    group_state: str | Path | None = None) -> dict[str, int]:
    """Decode capture files and write every table; returns rows written per table.

    Args:
        sources: capture paths (``"-"`` for stdin) or binary file objects, decoded as one
            continuous capture (as :func:`kafkasniff.pipeline.analyze` does).
        out_dir: output directory (created); tables go to ``out_dir/<table>/``.
        options: :class:`~kafkasniff.pipeline.PipelineOptions` (ports, limits, secrets ...);
            ``meta_records`` is always on and ``with_records`` is taken from the argument.
        with_records: also write the ``records`` table (decodes every record).
        partition_by: Hive partitions: ``()``, ``("date",)``, ``("hour",)``,
            ``("date", "hour")`` (or the string ``"date,hour"``).
        fmt: ``"parquet"`` or ``"jsonl"``.
        capture_name: value of the ``capture`` column (default: the name of the file each
            row comes from); shards of a capture pass the original file name.
        file_tag: added to file names (``part-<capture>-<file_tag>-<n>``) so that several
            runs (shards) can write to the same directories.
        row_group_rows: rows per Parquet row group (memory bound per open file).
        row_group_bytes: Arrow bytes per row group (the other memory bound).
        on_progress: ``on_progress(bytes_read, total_bytes)`` every few thousand packets.
        groups: also write the consumer-group tables (``groups``, ``members``,
            ``rebalances``, ``commits``: :mod:`kafkasniff.groups`, after the last source;
            their ``capture`` is the first source's name, or ``capture_name``).
        group_state: with ``groups``, save the analysis state to this file
            (:meth:`~kafkasniff.groups.analysis.GroupAnalyzer.save`) instead of writing the
            group tables: the shards of a split capture are analysed together afterwards
            (``spark decode``).

    Raises:
        kafkasniff.errors.CaptureError: a source cannot be read at all (files written so far
            for this run are left complete, the ones in progress are removed).
        ValueError: a bad ``fmt`` or ``partition_by``.
    """
    from kafkasniff.groups.analysis import GroupAnalyzer
    from kafkasniff.pipeline import Pipeline, PipelineOptions

    opts = dataclasses.replace(options or PipelineOptions(), meta_records=True,
                               with_records=with_records)
    pipe = Pipeline(opts)
    stem_name = capture_name or (source_name(sources[0]) if sources else "capture")
    stem = stem_name + (f"-{file_tag}" if file_tag else "")
    analyzer = GroupAnalyzer(pipe.defs, budgets=opts.budgets) if groups else None
    sink = ExportSink(out_dir, file_stem=stem, fmt=fmt, partition_by=partition_by,
                      with_records=with_records, row_group_rows=row_group_rows,
                      row_group_bytes=row_group_bytes, defs=pipe.defs,
                      tables=export_tables(with_records, groups and group_state is None),
                      groups=analyzer)
    stats = pipe.stats
    add = sink.add_records

    capture = stem_name
    try:
        for src in sources:
            capture = capture_name or source_name(src)
            with pipe.open(src) as packets:
                feed = pipe.feed
                n = 0
                for pkt in packets:
                    out = feed(pkt)
                    if out:
                        add(out, capture=capture, pipeline=pipe)
                    n += 1
                    if on_progress is not None and not n & 0x1FFF:
                        on_progress(packets.bytes_read, packets.total_bytes)
                add([pipe.feed_issue(i) for i in packets.issues], capture=capture,
                    pipeline=pipe)
                pipe.account_source(packets.accounting())
        add(pipe.finish(), capture=capture, pipeline=pipe)
        if analyzer is not None and group_state is not None:
            analyzer.save(group_state, pipe.topics.names, stats.first_ts_ns)
        elif analyzer is not None:
            sink.add_groups(analyzer.finish(pipe.topics.names), capture=stem_name)
    except BaseException:
        sink.abort()
        raise
    finally:
        if analyzer is not None:
            analyzer.close()
    return sink.close(empty_ts_ns=stats.first_ts_ns)
