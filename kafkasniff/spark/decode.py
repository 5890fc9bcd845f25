"""``spark decode``: decode many captures in parallel on Spark into the export tables.

Steps (:func:`spark_decode`):

1. **Inputs**: files, directories (searched recursively for ``*.pcap``, ``*.pcapng``,
   ``*.cap``, optionally ``.gz``) and glob patterns are expanded on the driver into absolute
   paths. Each file is one capture: its rows carry its file name in the ``capture`` column
   (a longer path suffix, ``host1/x.pcap``, when several inputs share a file name).
2. **Split**: a capture of at least ``split_threshold_bytes`` (64 MiB) is cut by TCP
   connection into ``ceil(size / 64 MiB)`` shards (pcap shards of a pcap capture, pcapng of
   a pcapng one; ``shards=N``: every capture into N), streaming, by
   :func:`kafkasniff.spark.split.split_capture`, into
   ``OUT/_kafkasniff_scratch/<run>/`` (ignored by Spark readers: leading ``_``): with a local
   master in a process forked by the driver before Spark starts (:class:`_LocalSplit`: the
   JVM starts meanwhile on the other core), else one Spark task per capture.
   Damage found in the source (a truncated file) is written as ``issues`` rows of the
   original capture by the split task, exactly as ``export`` would write it.
3. **Decode**: one Spark task per shard (or per unsplit capture), biggest first, calls
   :func:`kafkasniff.export.writer.export_captures` with ``capture_name`` = the original
   file name and ``file_tag`` = ``<shard>of<n>``, writing ``OUT/<table>/[date=../hour=..]/
   part-<capture>[-<i>of<n>]-<k>.parquet`` atomically, and returns its row counts, which the
   driver sums.
4. **topic_ids and the group tables**: every shard reports a (topic id, name) pair it saw;
   the shards' rows of a split capture are merged into one row per pair with the earliest
   ``first_seen`` (what one process reading the whole file writes). A consumer group spans
   connections, so a shard task saves its group analysis state (the group API exchanges it
   decoded, pickled, beside the shard) instead of writing the ``groups``, ``members``,
   ``rebalances`` and ``commits`` tables; the driver merges the states of a capture's shards
   and replays them as one (:mod:`kafkasniff.groups`), as ``export --jobs`` does with its
   decoders. An unsplit capture's task writes its group tables itself.
5. **Verify**: the tables are read back with Spark (one scan of their files' ``capture``
   column) and the rows of this run's captures counted; a difference is an error. (A thread runs
   the same query on an empty file while the captures decode, :func:`_warm_verification`;
   while a split beside the driver still runs, the Python workers are started,
   :func:`_preload_workers`.) The scratch shards are removed (also on failure).

Tasks receive paths, never file contents: on a cluster, the inputs and the output directory
must be on storage every executor and the driver see at the same path (NFS, a mounted
object store ...). Decoding a capture again into the same directory replaces its earlier
files (``part-<capture>-*``, from ``export`` too), so a rerun never duplicates rows.

Row for row the result equals ``kafkasniff export`` of each file on its own (a test checks
every capture of ``captures/``), with these documented limits: files given together to
``export`` are one continuous capture (rotated files), while ``spark decode`` decodes each
file on its own; the pipeline's global bounds (50 000 open connections, least recently
active evicted) and its idle-connection timer (1 h of capture time) act per shard, so a
capture that reaches them can differ in which connections are evicted or closed as idle.

Works on a classic session (local, ``spark://``, YARN, k8s: tasks are an RDD's partitions)
and on Spark Connect (no RDDs there: ``DataFrame.mapInArrow`` over ``spark.range``).
"""

from __future__ import annotations

import dataclasses
import functools
import glob
import os
import re
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from kafkasniff.errors import KafkaSniffError

__all__ = [
    "CAPTURE_SUFFIXES",
    "DecodeResult",
    "SparkDecodeError",
    "capture_names",
    "expand_inputs",
    "spark_decode",
]

#: File name endings recognised as captures when a directory is given.
CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".cap", ".pcap.gz", ".pcapng.gz", ".cap.gz")
SCRATCH_DIR = "_kafkasniff_scratch"


class SparkDecodeError(KafkaSniffError):
    """An input cannot be found or read, or the tables read back do not hold the rows the
    tasks reported writing."""


@dataclass
class DecodeResult:
    """What :func:`spark_decode` did.

    Attributes:
        out_dir: the output directory.
        captures: capture name -> input path.
        shards: capture name -> number of shards it was decoded as (1: not split).
        tasks: decode tasks run (one per shard or unsplit capture).
        rows: table -> rows written (summed over tasks, topic_ids after merging).
        verified: table -> rows of this run's captures read back with Spark.
        input_bytes: total size of the inputs.
        seconds: wall time of the whole run; ``start_seconds`` (starting Spark, 0 with a
            session given), ``split_seconds``/``decode_seconds``/``verify_seconds`` of its
            phases (a split on the driver's machine runs while Spark starts: see
            :func:`spark_decode`).
        split_here: the captures were split by a process beside the driver (a local
            master), not in Spark tasks.
    """

    out_dir: str
    captures: dict[str, str] = field(default_factory=dict)
    shards: dict[str, int] = field(default_factory=dict)
    tasks: int = 0
    rows: dict[str, int] = field(default_factory=dict)
    verified: dict[str, int] = field(default_factory=dict)
    input_bytes: int = 0
    seconds: float = 0.0
    start_seconds: float = 0.0
    split_seconds: float = 0.0
    decode_seconds: float = 0.0
    verify_seconds: float = 0.0
    split_here: bool = False


# ---------------------------------------------------------------------------- inputs

def _is_capture_name(name: str) -> bool:
    low = name.lower()
    return not name.startswith((".", "_")) and low.endswith(CAPTURE_SUFFIXES)


def _walk(d: str) -> list[str]:
    out = []
    for root, dirs, files in os.walk(d):
        dirs[:] = sorted(x for x in dirs if not x.startswith((".", "_")))
        out.extend(os.path.join(root, f) for f in sorted(files) if _is_capture_name(f))
    return out


def expand_inputs(inputs: Iterable[str | os.PathLike[str]]) -> list[str]:
    """Absolute paths of the capture files named by ``inputs``: files as given, directories
    searched recursively for :data:`CAPTURE_SUFFIXES` (hidden and ``_`` entries skipped), other
    strings as glob patterns (``**`` allowed). Duplicates are dropped, order kept.

    Raises:
        SparkDecodeError: an input names nothing (no file, directory or glob match), or
            ``"-"`` (standard input cannot be shared with executors).
    """
    out: list[str] = []
    seen: set[str] = set()
    for item in inputs:
        s = os.fspath(item)
        if s == "-":
            raise SparkDecodeError("spark decode cannot read standard input ('-'): executors "
                                   "read files by path; save the capture to a file first")
        if os.path.isfile(s):
            found = [s]
        elif os.path.isdir(s):
            found = _walk(s)
            if not found:
                raise SparkDecodeError(f"{s}: directory holds no capture file "
                                       f"({', '.join(CAPTURE_SUFFIXES)})")
        else:
            matches = sorted(glob.glob(s, recursive=True))
            if not matches:
                raise SparkDecodeError(f"{s}: no such file or directory (and no glob match)")
            found = []
            for m in matches:
                if os.path.isdir(m):
                    found.extend(_walk(m))
                elif os.path.isfile(m):
                    found.append(m)
        for f in found:
            a = os.path.abspath(f)
            key = os.path.realpath(a)
            if key not in seen:
                seen.add(key)
                out.append(a)
    if not out:
        raise SparkDecodeError("no capture file found in the inputs")
    return out


def capture_names(paths: list[str]) -> dict[str, str]:
    """Capture name -> path: the file name, or the shortest path suffix (``a/x.pcap``) that
    tells apart inputs sharing a file name.

    Raises:
        SparkDecodeError: two inputs cannot be told apart in output file names.
    """
    from kafkasniff.export.paths import safe_name

    parts = {p: Path(p).parts for p in paths}
    depth = {p: 1 for p in paths}
    while True:
        names: dict[str, list[str]] = {}
        for p in paths:
            names.setdefault("/".join(parts[p][-depth[p]:]), []).append(p)
        clash = [ps for ps in names.values() if len(ps) > 1]
        if not clash:
            break
        grown = False
        for ps in clash:
            for p in ps:
                if depth[p] < len(parts[p]):
                    depth[p] += 1
                    grown = True
        if not grown:
            raise SparkDecodeError(f"inputs cannot be told apart: {clash[0]}")
    result = {"/".join(parts[p][-depth[p]:]): p for p in paths}
    stems: dict[str, str] = {}
    for name in result:
        stem = safe_name(name)
        if stem in stems:
            raise SparkDecodeError(f"captures {stems[stem]!r} and {name!r} would share output "
                                   f"file names ({stem}); rename one")
        stems[stem] = name
    return result


def _stale_pattern(stem: str, ext: str) -> re.Pattern:
    return re.compile(re.escape(f"part-{stem}-") + r"(?:\d+of\d+-|split-)?\d+"
                      + re.escape(ext) + "$")


def _remove_earlier_output(out_dir: Path, stems: list[str], ext: str) -> int:
    """Remove files an earlier ``export`` / ``spark decode`` wrote for these captures."""
    from kafkasniff.export.schema import ALL_TABLES

    pats = [_stale_pattern(s, ext) for s in stems]
    removed = 0
    for table in ALL_TABLES:
        tdir = out_dir / table
        if not tdir.is_dir():
            continue
        for root, dirs, files in os.walk(tdir):
            for f in files:
                if f.startswith("part-") and any(p.match(f) for p in pats):
                    os.unlink(os.path.join(root, f))
                    removed += 1
    return removed


# ---------------------------------------------------------------------------- tasks
# These run on executors: module-level functions, pickled by reference (cloudpickle), with
# the task list bound by functools.partial. Each yields one dict per result row. They never
# import pyspark.

def _split_rows(tasks: list[dict], ids: Iterable[int]) -> Iterator[dict]:
    from kafkasniff.spark.split import split_capture

    for tid in ids:
        t = tasks[tid]
        try:
            opts = t["options"]
            res = split_capture(t["path"], t["scratch"], t["shards"], stem=t["stem"],
                                # as --jobs routes: TLS sessions resumed across connections
                                by_hosts=bool(opts is not None and (opts.tls_keylog
                                                                    or opts.tls_keylog_text)))
        except (KafkaSniffError, OSError) as exc:   # OSError: e.g. scratch space full
            yield {"task": tid, "shard": -1, "path": None, "packets": 0, "issues": 0,
                   "error": str(exc)}
            continue
        if res.issues:
            _write_source_issues(t, res)
        # one summary row (shard -1: packets read, issues rows written), then the shards
        yield {"task": tid, "shard": -1, "path": None, "packets": res.packets_read,
               "issues": len(res.issues), "error": None}
        for i, path in res.paths.items():
            yield {"task": tid, "shard": i, "path": path, "packets": res.packets[i],
                   "issues": 0, "error": None}


def _write_source_issues(t: dict, res) -> None:
    """``issues`` rows for damage in a split capture (what ``export`` writes at its end)."""
    from kafkasniff.export.writer import ExportSink

    sink = ExportSink(t["out_dir"], file_stem=f"{t['capture']}-split", fmt=t["fmt"],
                      partition_by=tuple(t["partition_by"]), row_group_rows=t["row_group_rows"],
                      tables=("issues",))   # no empty files for the others
    last_ts = max((i.ts_ns for i in res.issues), default=0)
    try:
        for issue in res.issues:
            sink.add(issue, capture=t["capture"], fallback_ts_ns=last_ts)
        sink.close(empty_ts_ns=last_ts)
    except BaseException:
        sink.abort()
        raise


def _ship_keylogs(options):
    """``options`` with its key log files read here, on the driver, into
    ``tls_keylog_text``: the executors need not see the driver's files."""
    if options is None or not options.tls_keylog:
        return options
    texts = []
    for path in options.tls_keylog:
        try:
            texts.append(Path(path).read_text("ascii", "replace"))
        except OSError as exc:
            raise SparkDecodeError(f"{path}: cannot read the key log: "
                                   f"{exc.strerror or exc}") from None
    return dataclasses.replace(options, tls_keylog=(),
                               tls_keylog_text="\n".join([options.tls_keylog_text, *texts]))


def _decode_rows(tasks: list[dict], ids: Iterable[int]) -> Iterator[dict]:
    from kafkasniff.export.writer import export_captures
    from kafkasniff.pipeline import tune_gc_for_decoding

    tune_gc_for_decoding()      # the Python worker runs decode tasks only

    for tid in ids:
        t = tasks[tid]
        try:
            got = export_captures([t["path"]], Path(t["out_dir"]), options=t["options"],
                                  with_records=t["with_records"],
                                  partition_by=tuple(t["partition_by"]), fmt=t["fmt"],
                                  capture_name=t["capture"], file_tag=t["tag"],
                                  row_group_rows=t["row_group_rows"],
                                  # a group spans connections, which a split capture spreads
                                  # over tasks: a shard saves its analysis state and the
                                  # driver analyses the shards of a capture together
                                  group_state=_group_state_path(t) if t["tag"] else None)
        except (KafkaSniffError, OSError) as exc:   # OSError: e.g. output not writable
            yield {"task": tid, "tbl": None, "n": 0, "error": str(exc)}
            continue
        for table, n in got.items():
            yield {"task": tid, "tbl": table, "n": n, "error": None}


def _load_rows(tasks: list[dict], ids: Iterable[int]) -> Iterator[dict]:
    """A task that only loads the decoding modules into its Python worker (which Spark keeps
    for the decode tasks: ``spark.python.worker.reuse``). Yields nothing."""
    import kafkasniff.export.writer  # noqa: F401

    yield from ()


def _group_state_path(task: dict) -> str:
    """Where a shard's decode task saves its consumer-group analysis state (scratch)."""
    return task["path"] + ".groups"


def _merge_groups(out: Path, captures: list[str], tasks: list[dict], fmt: str,
                  partition_by: tuple[str, ...], row_group_rows: int,
                  definitions_dir: str | None) -> dict[str, int]:
    """Write the group tables of each split capture: the analysis states its shards saved,
    merged and replayed as one (what one process reading the whole file writes). Runs on the
    driver; the merge spills to temporary files as export does. Returns rows per table."""
    from kafkasniff.export.paths import safe_name
    from kafkasniff.export.schema import GROUP_TABLES
    from kafkasniff.export.writer import ExportSink
    from kafkasniff.groups.analysis import GroupAnalyzer, load_state
    from kafkasniff.protocol.schema import load_definitions

    defs = load_definitions(definitions_dir)
    rows: dict[str, int] = {}
    for name in captures:
        states = [_group_state_path(t) for t in tasks if t["capture"] == name]
        if not states:
            continue            # no shard with packets: no table but issues, as before
        analyzer = GroupAnalyzer(defs)
        sink = ExportSink(out, file_stem=f"{safe_name(name)}-split", fmt=fmt,
                          partition_by=partition_by, row_group_rows=row_group_rows,
                          defs=defs, tables=GROUP_TABLES)
        try:
            first_ts = []         # an empty table's file goes where export puts it
            for path in states:
                state = load_state(path)
                if state.get("first_ts_ns"):
                    first_ts.append(state["first_ts_ns"])
                analyzer.merge(state)
            sink.add_groups(analyzer.finish(), capture=name)
            for table, n in sink.close(empty_ts_ns=min(first_ts, default=0)).items():
                rows[table] = rows.get(table, 0) + n
        except BaseException:
            sink.abort()
            raise
        finally:
            analyzer.close()
    return rows


_RESULT_DDL = {
    _split_rows: "task INT, shard INT, path STRING, packets BIGINT, issues INT, error STRING",
    _decode_rows: "task INT, tbl STRING, n BIGINT, error STRING",
}


def _rdd_partition(fn, tasks: list[dict], ids) -> list[dict]:
    return list(fn(tasks, ids))


def _arrow_partition(fn, ddl: str, tasks: list[dict], batches) -> Iterator:
    import pyarrow as pa

    types = {"INT": pa.int32(), "BIGINT": pa.int64(), "STRING": pa.string()}
    schema = pa.schema([(c.split()[0], types[c.split()[1]]) for c in ddl.split(", ")])
    ids = (i for b in batches for i in b.column(0).to_pylist())
    for row in fn(tasks, ids):
        yield pa.RecordBatch.from_pylist([row], schema=schema)


def _run(spark, fn, tasks: list[dict], what: str) -> list[dict]:
    """Run ``fn`` over ``tasks`` with one Spark task (partition) per entry; collect the rows.

    Classic sessions use an RDD (no pandas needed); Spark Connect has no RDDs and uses
    ``mapInArrow`` (its client requires pandas and pyarrow anyway)."""
    from kafkasniff.spark.session import is_connect

    if not tasks:
        return []
    n = len(tasks)
    if is_connect(spark):
        ddl = _RESULT_DDL[fn]
        df = spark.range(0, n, 1, n).mapInArrow(
            functools.partial(_arrow_partition, fn, ddl, tasks), ddl)
        return [r.asDict() for r in df.collect()]
    sc = spark.sparkContext
    sc.setJobDescription(f"kafkasniff {what}: {n} task(s)")
    try:
        return sc.parallelize(range(n), n).mapPartitions(
            functools.partial(_rdd_partition, fn, tasks)).collect()
    finally:
        sc.setJobDescription(None)


def _executors_here(spark, master: str | None, remote: str | None) -> bool:
    """Whether Spark's executors run on this machine (a ``local`` master): then a split
    runs in a process beside the driver, while Spark starts, instead of in a Spark task."""
    from kafkasniff.spark.session import default_master, is_connect

    if remote:
        return False
    if spark is not None:
        return not is_connect(spark) and spark.sparkContext.master.startswith("local")
    master = default_master(master)
    return master is not None and master.startswith("local")


def _split_child(tasks: list[dict], conn) -> None:
    """Body of the split process: ``(rows, seconds)`` of :func:`_split_rows`, or the
    exception it raised, sent through ``conn``."""
    t0 = time.monotonic()
    try:
        got: object = (list(_split_rows(tasks, range(len(tasks)))), time.monotonic() - t0)
    except BaseException as exc:  # noqa: BLE001 - handed to the driver, raised there
        got = exc
    try:
        conn.send(got)
    except Exception as exc:  # noqa: BLE001 - an exception that cannot be pickled
        conn.send(RuntimeError(f"splitting failed: {got!r} ({exc})"))
    conn.close()


#: JVM options of the driver of a session ``spark_decode`` starts: only the C1 compiler.
#: The driver coordinates (the decoding is Python, in tasks; the verification counts a few
#: small tables), so C2's optimised code never pays back the CPU it costs: with C1 alone
#: the JVM starts with about half the CPU (4.5 against 8 CPU-seconds on 2 cores, 4.2
#: against 5.0 s) and the verification takes 4.5 instead of 6.2 s (docs/benchmarks.md).
DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"


def _driver_conf(conf: dict[str, str] | None) -> dict[str, str]:
    """``conf`` with :data:`DRIVER_JAVA_OPTIONS` before the caller's driver options (a
    later JVM option wins, so a caller's ``-XX:TieredStopAtLevel`` overrides it)."""
    conf = dict(conf or {})
    key = "spark.driver.extraJavaOptions"
    conf[key] = f"{DRIVER_JAVA_OPTIONS} {conf[key]}" if key in conf else DRIVER_JAVA_OPTIONS
    return conf


class _LocalSplit:
    """:func:`_split_rows` over ``tasks`` in a forked child process, started at once.

    A local master's executors are this machine, so the split (one core, reading and
    writing every byte of the capture) can run while the JVM starts instead of after it.
    :meth:`result` waits for the rows; :meth:`cancel` stops the child."""

    def __init__(self, tasks: list[dict]) -> None:
        import multiprocessing as mp

        ctx = mp.get_context("fork")
        self._conn, send = ctx.Pipe(duplex=False)
        self._proc = ctx.Process(target=_split_child, args=(tasks, send),
                                 name="kafkasniff-split", daemon=True)
        self._proc.start()
        send.close()

    def done(self) -> bool:
        """Whether the rows (or an error) are ready."""
        return self._conn.poll()

    def result(self) -> tuple[list[dict], float]:
        """``(rows, seconds)`` of the split.

        Raises:
            SparkDecodeError: the process died without an answer (killed, out of memory).
            Exception: what the split raised (a bug: expected errors are rows)."""
        try:
            got = self._conn.recv()
        except EOFError:
            self._proc.join()
            raise SparkDecodeError(f"the split process died (exit code "
                                   f"{self._proc.exitcode}) before it finished") from None
        finally:
            self._conn.close()
        self._proc.join()
        if isinstance(got, BaseException):
            raise got
        return got

    def cancel(self) -> None:
        """Stop the child if it still runs."""
        if self._proc.is_alive():
            self._proc.terminate()
        self._proc.join()
        self._conn.close()


def _preload_workers(spark) -> None:
    """Start one Python worker per core with the decoding modules loaded (the decode tasks
    reuse them): work for the core a split beside the driver leaves idle."""
    n = max(1, spark.sparkContext.defaultParallelism)
    _run(spark, _load_rows, [{} for _ in range(n)], "load the decoders")


def _warm_verification(spark, scratch: Path, fmt: str):
    """Start a thread that runs the verification's query once on an empty ``exchanges``
    file in ``scratch``, beside the decoding: a session's first Spark SQL queries cost the
    driver JVM seconds of class loading and code generation, which the verification at the
    end would otherwise wait for (docs/benchmarks.md). Returns the thread (join it before
    the verification). Its errors are ignored: the verification reports its own."""
    import threading

    from kafkasniff.export.paths import EXTENSIONS
    from kafkasniff.export.schema import SCHEMAS

    def run() -> None:
        try:
            d = scratch / "_warm_up"
            (d / "exchanges").mkdir(parents=True, exist_ok=True)
            path = d / "exchanges" / f"part-warm-up{EXTENSIONS[fmt]}"
            if fmt == "parquet":
                import pyarrow.parquet as pq

                pq.write_table(SCHEMAS["exchanges"].empty_table(), path)
            else:
                path.touch()
            verify_counts(spark, d, ["warm-up"], ["exchanges"], fmt)
        except Exception:  # noqa: BLE001, S110 - only a warm-up: the verification reports
            pass

    thread = threading.Thread(target=run, name="kafkasniff-warm-up", daemon=True)
    thread.start()
    return thread


# ---------------------------------------------------------------------------- the run

def spark_decode(inputs: Iterable[str | os.PathLike[str]], out_dir: str | os.PathLike[str], *,
                 master: str | None = None, remote: str | None = None,
                 cores: int | None = None, conf: dict[str, str] | None = None, spark=None,
                 shards: int | None = None, with_records: bool = False,
                 partition_by: tuple[str, ...] | str = (), fmt: str = "parquet",
                 options=None, row_group_rows: int = 50_000,
                 split_threshold_bytes: int | None = None,
                 shard_target_bytes: int | None = None, verify: bool = True,
                 keep_scratch: bool = False, log=None) -> DecodeResult:
    """Decode captures on Spark into ``out_dir``'s tables (the module doc gives the steps).

    Args:
        inputs: files, directories, glob patterns.
        out_dir: output directory (tables in sub-directories; created).
        master / remote / cores / conf: where and how to run (see
            :func:`kafkasniff.spark.session.get_spark`); ignored when ``spark`` is given.
            The session is started here and stopped at the end.
        spark: an existing SparkSession to use (not stopped here).
        shards: split every capture into this many shards (1: never split); default: only
            captures of at least ``split_threshold_bytes``, into ``ceil(size /
            shard_target_bytes)`` shards.
        with_records / partition_by / fmt / row_group_rows: as ``kafkasniff export``.
        options: :class:`~kafkasniff.pipeline.PipelineOptions` (ports, detection, limits,
            secrets ...).
        verify: read the tables back and compare the row counts.
        keep_scratch: keep the shard files (for debugging).
        log: ``log(message)`` for progress lines (default: silent).

    Returns:
        A :class:`DecodeResult`.

    Raises:
        SparkDecodeError: an input is missing or unreadable, or the verification failed.
        SparkSetupError: Spark cannot start (no Java, no PySpark ...).
    """
    from kafkasniff.export.paths import EXTENSIONS, FORMATS, normalize_partition_by, safe_name
    from kafkasniff.export.schema import ALL_TABLES
    from kafkasniff.spark.session import spark_session
    from kafkasniff.spark.split import SHARD_TARGET_BYTES, SPLIT_THRESHOLD_BYTES, shard_count

    t0 = time.monotonic()
    say = log or (lambda msg: None)
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r} (expected one of {', '.join(FORMATS)})")
    partition_by = normalize_partition_by(partition_by)
    options = _ship_keylogs(options)
    paths = expand_inputs(inputs)
    names = capture_names(paths)
    out = Path(out_dir).absolute()
    out.mkdir(parents=True, exist_ok=True)
    ext = EXTENSIONS[fmt]
    result = DecodeResult(out_dir=str(out), captures=dict(names))
    sizes = {name: os.path.getsize(p) for name, p in names.items()}
    result.input_bytes = sum(sizes.values())
    n_shards = {name: shard_count(sizes[name], shards,
                                  threshold_bytes=split_threshold_bytes or SPLIT_THRESHOLD_BYTES,
                                  target_bytes=shard_target_bytes or SHARD_TARGET_BYTES)
                for name in names}
    result.shards = dict(n_shards)
    removed = _remove_earlier_output(out, [safe_name(n) for n in names], ext)
    if removed:
        say(f"removed {removed} file(s) of an earlier run of these captures")

    common = {"out_dir": str(out), "fmt": fmt, "partition_by": list(partition_by),
              "row_group_rows": row_group_rows, "with_records": with_records,
              "options": options}
    scratch = out / SCRATCH_DIR / uuid.uuid4().hex
    to_split = sorted((n for n in names if n_shards[n] > 1), key=lambda n: -sizes[n])
    split_tasks = [dict(common, path=names[n], capture=n, shards=n_shards[n],
                        stem=safe_name(n), scratch=str(scratch / str(i)))
                   for i, n in enumerate(to_split)]
    local_split = None
    if split_tasks and _executors_here(spark, master, remote):
        # the executors are this machine: split in a process of our own, started before
        # Spark so that the JVM starts on the other core meanwhile
        say(f"splitting {len(split_tasks)} capture(s) by connection (while Spark starts)")
        local_split = _LocalSplit(split_tasks)
        result.split_here = True
    ctx = warm = None
    try:
        if spark is None:
            t1 = time.monotonic()
            cm = spark_session(master=master, remote=remote, cores=cores,
                               conf=conf if remote else _driver_conf(conf))
            session = cm.__enter__()
            ctx = cm                    # entered: stopped in the finally below
            result.start_seconds = time.monotonic() - t1
        else:
            session = spark
        if verify:
            warm = _warm_verification(session, scratch, fmt)
        # -- split the large captures (one task each, or the process started above)
        decode_tasks: list[dict] = []
        if split_tasks:
            t1 = time.monotonic()
            if local_split is not None:
                if not local_split.done():
                    _preload_workers(session)
                rows, result.split_seconds = local_split.result()
            else:
                say(f"splitting {len(split_tasks)} capture(s) by connection")
                rows = _run(session, _split_rows, split_tasks, "split")
            errors = [r["error"] for r in rows if r["error"]]
            if errors:
                raise SparkDecodeError("; ".join(errors))
            # issues rows the split tasks wrote for damaged sources
            result.rows["issues"] = sum(r["issues"] for r in rows)
            for r in rows:
                if r["shard"] < 0:
                    continue
                t = split_tasks[r["task"]]
                decode_tasks.append(dict(common, path=r["path"], capture=t["capture"],
                                         tag=f"{r['shard']}of{t['shards']}",
                                         size=os.path.getsize(r["path"])))
            if local_split is None:
                result.split_seconds = time.monotonic() - t1
        for n in names:
            if n_shards[n] == 1:
                decode_tasks.append(dict(common, path=names[n], capture=n, tag="",
                                         size=sizes[n]))
        decode_tasks.sort(key=lambda t: -t["size"])
        result.tasks = len(decode_tasks)

        # -- decode every shard / capture (one task each)
        t2 = time.monotonic()
        say(f"decoding {len(decode_tasks)} file(s) in Spark tasks")
        rows = _run(session, _decode_rows, decode_tasks, "decode")
        errors = sorted({r["error"] for r in rows if r["error"]})
        if errors:
            raise SparkDecodeError("; ".join(errors))
        for r in rows:
            result.rows[r["tbl"]] = result.rows.get(r["tbl"], 0) + r["n"]
        result.decode_seconds = time.monotonic() - t2

        # -- one topic_ids row per pair, and the group tables, for split captures
        merged = [n for n in names if n_shards[n] > 1]
        if merged and "topic_ids" in result.rows:
            result.rows["topic_ids"] += _merge_topic_ids(out, merged, fmt, partition_by,
                                                         row_group_rows)
        if merged:
            defs_dir = options.definitions_dir if options is not None else None
            for table, n in _merge_groups(out, merged, decode_tasks, fmt, partition_by,
                                          row_group_rows, defs_dir).items():
                result.rows[table] = result.rows.get(table, 0) + n

        result.rows = {t: result.rows[t] for t in ALL_TABLES if t in result.rows}

        # -- read back
        if verify:
            warm.join()
            t3 = time.monotonic()
            result.verified = verify_counts(session, out, list(names), list(result.rows), fmt)
            result.verify_seconds = time.monotonic() - t3
            bad = {t: (result.rows[t], result.verified.get(t)) for t in result.rows
                   if result.rows[t] != result.verified.get(t)}
            if bad:
                raise SparkDecodeError(
                    f"{out}: rows read back differ from rows written: "
                    + ", ".join(f"{t} {w} written, {r} read" for t, (w, r) in bad.items())
                    + " (another process writing the same captures here?)")
    finally:
        if local_split is not None:
            local_split.cancel()        # an error before its result was taken
        if warm is not None:
            warm.join()                 # before the scratch and the session go
        if not keep_scratch:
            shutil.rmtree(scratch, ignore_errors=True)
            try:
                (out / SCRATCH_DIR).rmdir()
            except OSError:
                pass
        if ctx is not None:
            ctx.__exit__(None, None, None)
    result.seconds = time.monotonic() - t0
    return result


def _merge_topic_ids(out: Path, captures: list[str], fmt: str, partition_by: tuple[str, ...],
                     row_group_rows: int) -> int:
    """Merge the ``topic_ids`` rows the shards of each split capture wrote into one row per
    (topic_id, topic_name) with the earliest ``first_seen``. Runs on the driver (the table is
    tiny: one row per topic id). Returns the change in the row count (<= 0)."""
    import pyarrow.parquet as pq

    from kafkasniff.export.paths import EXTENSIONS, safe_name
    from kafkasniff.export.rows import topic_row
    from kafkasniff.export.schema import SCHEMAS
    from kafkasniff.export.writer import ExportSink
    from kafkasniff.model import TopicName

    tdir = out / "topic_ids"
    ext = EXTENSIONS[fmt]
    delta = 0
    for name in captures:
        pat = re.compile(re.escape(f"part-{safe_name(name)}-") + r"\d+of\d+-\d+"
                         + re.escape(ext) + "$")
        files = [Path(r) / f for r, _, fs in os.walk(tdir) for f in fs if pat.match(f)]
        if not files:
            continue
        rows: list[dict] = []
        for f in files:
            if fmt == "parquet":
                got = pq.read_table(f, schema=SCHEMAS["topic_ids"]).to_pylist()
            else:
                got = _read_jsonl(f)
            # read back (datetimes) -> the writer's form (integers, microseconds)
            rows.extend(topic_row(TopicName(r["topic_id"], r["topic_name"],
                                            r["first_seen_ts_ns"]), r["capture"]) for r in got)
        best: dict[tuple[str, str], dict] = {}
        for r in rows:
            k = (r["topic_id"], r["topic_name"])
            if k not in best or r["ts_ns"] < best[k]["ts_ns"]:
                best[k] = r
        keep = sorted(best.values(), key=lambda r: (r["ts_ns"], r["topic_id"], r["topic_name"]))
        sink = ExportSink(out, file_stem=f"{name}-split", fmt=fmt, partition_by=partition_by,
                          row_group_rows=row_group_rows, tables=("topic_ids",))
        try:
            sink.add_rows("topic_ids", keep)
            sink.close(empty_ts_ns=keep[0]["ts_ns"] if keep else 0)
        except BaseException:
            sink.abort()
            raise
        for f in files:
            f.unlink()
        delta += len(keep) - len(rows)
    return delta


def _read_jsonl(path: Path) -> list[dict]:
    import json

    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def verify_counts(spark, out: Path, captures: list[str], tables: list[str],
                  fmt: str = "parquet") -> dict[str, int]:
    """Rows of ``captures`` in each of ``tables`` under ``out``, read back with Spark.

    One scan of every file of the tables reads their ``capture`` column (``STRING``, as
    the schemas type it), counts the rows of ``captures`` per file (``input_file_name``)
    and adds each file's count to the table whose directory holds it (0 for a table
    without a file). One query instead of one per table: 0.3-0.4 s instead of 0.9-1.2 s
    once warm, 1.9 s instead of 2.5-2.8 s cold, for real.pcap's tables
    (docs/benchmarks.md).

    Returns:
        table -> rows (every table of ``tables``).

    Raises:
        SparkDecodeError: Spark read a file that no table directory holds.
    """
    from urllib.parse import unquote, urlparse

    from pyspark.sql import functions as F

    from kafkasniff.spark.report import _table_dir

    counts = dict.fromkeys(tables, 0)
    dirs = [str(d) for d in (_table_dir(out, t) for t in tables) if d is not None]
    if not dirs:
        return counts
    df = (spark.read.format("parquet" if fmt == "parquet" else "json")
          .schema("capture STRING").option("recursiveFileLookup", "true").load(dirs))
    per_file = (df.where(F.col("capture").isin(captures))
                .groupBy(F.input_file_name().alias("file")).count().collect())
    for row in per_file:
        # the nearest directory named as a table (partition directories are date=.., hour=..)
        parts = Path(unquote(urlparse(row["file"]).path)).parts[:-1]
        table = next((p for p in reversed(parts) if p in counts), None)
        if table is None:
            raise SparkDecodeError(f"{row['file']}: Spark read a file outside the tables "
                                   f"{', '.join(tables)} of {out}")
        counts[table] += row["count"]
    return counts
