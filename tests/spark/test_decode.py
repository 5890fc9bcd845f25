"""``spark_decode`` writes, row for row, what ``export`` writes (every capture, every table)."""

from __future__ import annotations

import functools
import gc
import json
import os
import shutil
import threading
from collections import Counter
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from kafkasniff.export.schema import ALL_TABLES, SCHEMAS
from kafkasniff.pipeline import DECODE_GC_THRESHOLD
from kafkasniff.spark.decode import (
    SCRATCH_DIR,
    SparkDecodeError,
    _decode_rows,
    capture_names,
    expand_inputs,
    spark_decode,
)

from .conftest import ALL_CAPTURES, CAPTURES, FORCED_SHARDS, pipeline_options


def table_rows(root: Path, table: str, capture: str | None = None, fmt: str = "parquet"
               ) -> list[tuple]:
    """Every row of ``root/<table>`` (of one capture) as a sorted list of tuples of reprs,
    columns in schema order (partition directories ignored: date/hour are in the files)."""
    by_capture = _rows_by_capture(str(root), table, fmt, _mtime(root / table))
    if capture is not None:
        return by_capture.get(repr(capture), [])
    return sorted(r for rows in by_capture.values() for r in rows)


def _mtime(d: Path) -> float:
    """Latest change under ``d`` (invalidates the cache when files are rewritten)."""
    if not d.is_dir():
        return 0.0
    return max([os.stat(r).st_mtime_ns for r, _, _ in os.walk(d)] +
               [os.stat(os.path.join(r, f)).st_mtime_ns for r, _, fs in os.walk(d) for f in fs])


@functools.lru_cache(maxsize=64)
def _rows_by_capture(root: str, table: str, fmt: str, _stamp: float) -> dict[str, list]:
    d = Path(root) / table
    if not d.is_dir():
        return {}
    if fmt == "parquet":
        rows = ds.dataset(str(d), format="parquet", schema=SCHEMAS[table]).to_table().to_pylist()
    else:
        rows = []
        for r, _, files in os.walk(d):
            for f in files:
                if f.endswith(".jsonl") and not f.startswith((".", "_")):
                    with open(os.path.join(r, f), encoding="utf-8") as fh:
                        rows.extend(json.loads(line) for line in fh if line.strip())
    names = SCHEMAS[table].names
    out: dict[str, list] = {}
    for r in rows:
        out.setdefault(repr(r["capture"]), []).append(tuple(repr(r[n]) for n in names))
    return {k: sorted(v) for k, v in out.items()}


def test_every_capture_split_and_decoded(decoded) -> None:
    out, res = decoded
    assert set(res.captures) == {p.name for p in ALL_CAPTURES}
    assert res.shards == {p.name: FORCED_SHARDS for p in ALL_CAPTURES}
    # some captures hold connections in every shard, empty shards are skipped
    assert len(ALL_CAPTURES) < res.tasks <= FORCED_SHARDS * len(ALL_CAPTURES)
    assert res.verified == res.rows
    assert set(res.rows) == set(ALL_TABLES)
    assert not (out / SCRATCH_DIR).exists(), "scratch shards removed"
    # files are tagged with their shard
    names = [f.name for f in (out / "exchanges").iterdir()]
    assert any(f"-0of{FORCED_SHARDS}-" in n for n in names)


@pytest.mark.parametrize("table", ALL_TABLES)
def test_spark_decode_rows_equal_export_rows(decoded, exported, table) -> None:
    out, res = decoded
    total = 0
    for pcap in ALL_CAPTURES:
        want = table_rows(exported, table, pcap.name)
        got = table_rows(out, table, pcap.name)
        total += len(want)
        assert got == want, f"{pcap.name}: {table} differs"
    assert total == res.rows[table]
    if table != "topic_ids":
        counts = json.loads((exported.parent / "export-counts.json").read_text())
        assert total == sum(c.get(table, 0) for c in counts.values())


def test_decode_is_not_trivial(decoded) -> None:
    """The comparison covers real content: every table has rows, shards split connections."""
    out, res = decoded
    assert all(n > 0 for n in res.rows.values()), res.rows
    conns = table_rows(out, "connections")
    assert len(conns) > 3 * len(ALL_CAPTURES)


def test_partitioned_jsonl_truncated_and_rerun(spark, tmp_path: Path) -> None:
    """A damaged capture split into shards (its capture_truncated issue written once, as
    export does), Hive partitions, JSON Lines, and a rerun with another shard count that
    replaces the earlier files instead of duplicating rows."""
    from kafkasniff.export.writer import export_captures

    src = CAPTURES / "librdkafka_errors_latency.pcap"
    cut = tmp_path / "in" / "cut.pcap"
    cut.parent.mkdir()
    cut.write_bytes(src.read_bytes()[:-100])
    opts = pipeline_options()
    for fmt in ("parquet", "jsonl"):
        want_dir = tmp_path / f"export-{fmt}"
        export_captures([cut], want_dir, options=opts, partition_by=("date", "hour"), fmt=fmt)
        out = tmp_path / f"spark-{fmt}"
        for shards in (4, 2):
            res = spark_decode([tmp_path / "in"], out, spark=spark, shards=shards, fmt=fmt,
                               partition_by="date,hour", options=opts)
            assert res.verified == res.rows
            for table in ALL_TABLES:
                if table == "records":
                    continue
                assert table_rows(out, table, fmt=fmt) == table_rows(want_dir, table, fmt=fmt), \
                    (fmt, shards, table)
        kind = SCHEMAS["issues"].names.index("kind")
        issues = [r for r in table_rows(out, "issues", fmt=fmt)
                  if r[kind] == repr("capture_truncated")]
        assert len(issues) == 1
        assert any(p.name.startswith("date=") for p in (out / "exchanges").iterdir())


def test_large_file_split_by_default_threshold(spark, tmp_path: Path) -> None:
    """Without --shards only captures over the threshold are split."""
    small, big = CAPTURES / "kafka_python.pcap", CAPTURES / "librdkafka_midstream.pcap"
    res = spark_decode([small, big], tmp_path / "out", spark=spark, options=pipeline_options(),
                       split_threshold_bytes=100_000, shard_target_bytes=40_000)
    assert res.shards == {small.name: 1, big.name: 3}
    assert res.verified == res.rows
    # an unsplit capture is written under the same file names as export
    assert (tmp_path / "out" / "exchanges" / f"part-{small.name}-0.parquet").is_file()


def test_expand_inputs(tmp_path: Path) -> None:
    d = tmp_path / "caps"
    (d / "sub").mkdir(parents=True)
    (d / "_skip").mkdir()
    for p in (d / "a.pcap", d / "sub" / "b.pcapng", d / "sub" / "c.pcap.gz", d / "_skip" / "x.pcap",
              d / "notes.txt", d / ".hidden.pcap"):
        p.write_bytes(b"x")
    got = expand_inputs([d])
    assert [Path(p).relative_to(d).as_posix() for p in got] == ["a.pcap", "sub/b.pcapng",
                                                                 "sub/c.pcap.gz"]
    assert all(os.path.isabs(p) for p in got)
    # a glob is taken as given (here it also matches the "_skip" directory); duplicates go
    assert expand_inputs([str(d / "sub" / "*.pcap*"), d / "a.pcap", d / "sub" / "b.pcapng",
                          str(d / "**" / "x.pcap")]) == [
        str(d / "sub" / "b.pcapng"), str(d / "sub" / "c.pcap.gz"), str(d / "a.pcap"),
        str(d / "_skip" / "x.pcap")]
    with pytest.raises(SparkDecodeError, match="no such file"):
        expand_inputs([tmp_path / "missing.pcap"])
    with pytest.raises(SparkDecodeError, match="standard input"):
        expand_inputs(["-"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(SparkDecodeError, match="holds no capture"):
        expand_inputs([tmp_path / "empty"])


def test_capture_names_disambiguate() -> None:
    names = capture_names(["/x/h1/cap.pcap", "/x/h2/cap.pcap", "/x/h2/other.pcap"])
    assert names == {"h1/cap.pcap": "/x/h1/cap.pcap", "h2/cap.pcap": "/x/h2/cap.pcap",
                     "other.pcap": "/x/h2/other.pcap"}


def test_same_file_names_in_two_directories(spark, tmp_path: Path) -> None:
    for host in ("h1", "h2"):
        (tmp_path / host).mkdir()
        shutil.copy(CAPTURES / "librdkafka_admin.pcap", tmp_path / host / "cap.pcap")
    res = spark_decode([tmp_path / "h1", tmp_path / "h2"], tmp_path / "out", spark=spark,
                       shards=2, options=pipeline_options())
    assert set(res.captures) == {"h1/cap.pcap", "h2/cap.pcap"}
    per = Counter(r[0] for r in table_rows(tmp_path / "out", "exchanges"))
    assert per == {repr("h1/cap.pcap"): 19, repr("h2/cap.pcap"): 19}


def test_unreadable_input_is_a_clear_error(spark, tmp_path: Path) -> None:
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(b"hello, not a capture")
    with pytest.raises(SparkDecodeError, match="not a pcap or pcapng file"):
        spark_decode([bad], tmp_path / "out", spark=spark)
    with pytest.raises(SparkDecodeError, match="not a pcap or pcapng file"):
        spark_decode([bad], tmp_path / "out2", spark=spark, shards=2)
    assert not (tmp_path / "out2" / SCRATCH_DIR).exists()


def test_damaged_capture_without_packets(spark, tmp_path: Path) -> None:
    """A capture that ends inside its first record: no shard at all, the issue still written
    once, as export writes it."""
    from kafkasniff.export.writer import export_captures

    cut = tmp_path / "in" / "first.pcap"
    cut.parent.mkdir()
    cut.write_bytes((CAPTURES / "kafka_python.pcap").read_bytes()[:24 + 10])
    export_captures([cut], tmp_path / "want", options=pipeline_options())
    res = spark_decode([cut], tmp_path / "out", spark=spark, shards=2,
                       options=pipeline_options())
    assert res.rows == res.verified == {"issues": 1}
    assert table_rows(tmp_path / "out", "issues") == table_rows(tmp_path / "want", "issues")


def test_tls_decrypted_on_executors_with_the_key_log_or_the_secrets_blocks(spark, tmp_path):
    """``--tls-keylog`` is read on the driver and shipped to the tasks; a pcapng's Decryption
    Secrets Blocks go into every shard: split in three, broker_tls.pcap decodes as
    ``export`` with the key log decodes it, both ways."""
    import dataclasses
    import subprocess

    from kafkasniff.export.writer import export_captures

    pcap, keylog = CAPTURES / "broker_tls.pcap", CAPTURES / "broker_tls.keylog"
    with_keys = dataclasses.replace(pipeline_options(), tls_keylog=(str(keylog),))
    export_captures([pcap], tmp_path / "export", options=with_keys)
    want = table_rows(tmp_path / "export", "exchanges")
    assert want and all(r[SCHEMAS["exchanges"].names.index("tls_version")] != "None"
                        for r in want)
    spark_decode([pcap], tmp_path / "keylog", spark=spark, shards=3, options=with_keys)
    assert table_rows(tmp_path / "keylog", "exchanges") == want

    (tmp_path / "in").mkdir()
    injected = tmp_path / "in" / "broker_tls.pcap"     # same capture name, pcapng inside
    subprocess.run(["editcap", "-F", "pcapng", "--inject-secrets", f"tls,{keylog}", str(pcap),
                    str(injected)], check=True, capture_output=True)
    res = spark_decode([injected], tmp_path / "blocks", spark=spark, shards=3,
                       options=pipeline_options())
    assert res.shards == {"broker_tls.pcap": 3}
    assert table_rows(tmp_path / "blocks", "exchanges") == want


# ---------------------------------------------------------------------------- issue 14

def test_split_beside_the_driver_equals_the_split_in_spark_tasks(spark, tmp_path: Path,
                                                                 monkeypatch) -> None:
    """A local master's executors are this machine: the split runs in a process of its own,
    started before Spark (so that the JVM starts meanwhile). Its tables equal those of the
    split in Spark tasks (what a cluster does; test_cluster.py runs that way end to end)."""
    from kafkasniff.spark import decode

    caps = [CAPTURES / "librdkafka_midstream.pcap", CAPTURES / "librdkafka_rebalance.pcap"]
    here = spark_decode(caps, tmp_path / "here", spark=spark, shards=3,
                        options=pipeline_options())
    assert here.split_here and here.split_seconds > 0
    assert here.start_seconds == 0                      # a session given: none started
    monkeypatch.setattr(decode, "_executors_here", lambda *a: False)
    tasks = spark_decode(caps, tmp_path / "tasks", spark=spark, shards=3,
                         options=pipeline_options())
    assert not tasks.split_here
    assert here.rows == tasks.rows == here.verified
    for table in ALL_TABLES:
        assert table_rows(tmp_path / "here", table) == table_rows(tmp_path / "tasks", table), \
            table


def test_split_process_that_dies_or_fails_is_an_error(spark, tmp_path: Path,
                                                      monkeypatch) -> None:
    """A split process killed (out of memory ...) is a clear error, not a hang, and the
    scratch directory goes; an unexpected exception in it is raised on the driver."""
    from kafkasniff.spark import decode

    monkeypatch.setattr(decode, "_split_rows", lambda tasks, ids: os._exit(3))
    with pytest.raises(SparkDecodeError, match=r"split process died \(exit code 3\)"):
        spark_decode([CAPTURES / "kafka_python.pcap"], tmp_path / "out", spark=spark,
                     shards=2)
    assert not (tmp_path / "out" / SCRATCH_DIR).exists()

    def fails(tasks, ids):
        raise ValueError("a bug in the split")

    monkeypatch.setattr(decode, "_split_rows", fails)
    with pytest.raises(ValueError, match="a bug in the split"):
        decode._LocalSplit([{}]).result()


def test_where_the_split_runs_and_the_driver_options(spark, tmp_path: Path,
                                                     monkeypatch) -> None:
    """Local masters split beside the driver, clusters and Spark Connect in tasks; a session
    spark_decode starts gets the C1-only JVM option before the caller's options."""
    import contextlib

    from kafkasniff.spark import decode
    from kafkasniff.spark import session as sess

    assert decode._executors_here(None, "local[2]", None)
    assert decode._executors_here(None, None, None)             # get_spark's local[*]
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "1")            # spark-submit's own master
    assert not decode._executors_here(None, None, None)
    assert decode._executors_here(None, "local[2]", None)
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT")
    assert decode._executors_here(spark, None, None)            # the fixture's local[2]
    assert not decode._executors_here(None, "spark://h:7077", None)
    assert not decode._executors_here(None, "yarn", None)
    assert not decode._executors_here(None, None, "sc://h:15002")
    key = "spark.driver.extraJavaOptions"
    assert decode._driver_conf(None) == {key: decode.DRIVER_JAVA_OPTIONS}
    assert decode._driver_conf({key: "-Xmx2g", "a": "b"}) == {
        key: f"{decode.DRIVER_JAVA_OPTIONS} -Xmx2g", "a": "b"}

    asked = []

    @contextlib.contextmanager
    def session(**kw):
        asked.append(kw)
        yield spark

    monkeypatch.setattr(sess, "spark_session", session)
    res = spark_decode([CAPTURES / "kafka_python.pcap"], tmp_path / "out", master="local[2]",
                       cores=2, conf={"x": "y"}, options=pipeline_options())
    assert res.rows["exchanges"] > 0 and res.start_seconds > 0
    assert asked == [{"master": "local[2]", "remote": None, "cores": 2,
                      "conf": {"x": "y", key: decode.DRIVER_JAVA_OPTIONS}}]


def test_warm_up_failure_is_not_the_runs(spark, tmp_path: Path, monkeypatch) -> None:
    """The thread that warms the verification's query up beside the decoding runs it on an
    empty file in the scratch directory; if it fails, the run does not: the verification
    itself counts every table, and the scratch directory goes."""
    import kafkasniff.spark.decode as decode

    calls = []
    real = decode.verify_counts

    def verify_counts(spark, out, captures, tables, fmt="parquet"):
        calls.append((Path(out).name, captures))
        if captures == ["warm-up"]:
            assert Path(out).parent.parent.name == SCRATCH_DIR
            raise RuntimeError("warm-up broke")
        return real(spark, out, captures, tables, fmt)

    monkeypatch.setattr(decode, "verify_counts", verify_counts)
    unhandled = []
    monkeypatch.setattr(threading, "excepthook", unhandled.append)
    cap = CAPTURES / "kafka_python.pcap"
    res = spark_decode([cap], tmp_path / "out", spark=spark, shards=2,
                       options=pipeline_options())
    assert sorted(calls) == [("_warm_up", ["warm-up"]), ("out", [cap.name])]
    assert res.verified == res.rows and len(res.rows) > 3
    assert not (tmp_path / "out" / SCRATCH_DIR).exists()
    assert unhandled == []          # the thread ended quietly: no traceback on stderr


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_verification_counts_only_these_captures_per_table(spark, tmp_path: Path, fmt) -> None:
    """The verification's one scan counts, per table, the rows of the captures asked for:
    other captures' files in the same directories, date/hour partition directories and
    tables without a file do not change it."""
    from kafkasniff.export.writer import export_captures
    from kafkasniff.spark.decode import verify_counts

    out = tmp_path / "out"
    want = {}
    for name in ("kafka_python.pcap", "librdkafka_errors_latency.pcap"):
        want[name] = export_captures([CAPTURES / name], out, options=pipeline_options(),
                                     partition_by=("date", "hour"), fmt=fmt)
    a, b = want
    assert want[a]["exchanges"] != want[b]["exchanges"]
    tables = [t for t in ALL_TABLES if want[a].get(t)] + ["records"]     # no records table
    for name in (a, b):
        got = verify_counts(spark, out, [name], tables, fmt)
        assert got == {t: want[name].get(t, 0) for t in tables}
    both = verify_counts(spark, out, [a, b], tables, fmt)
    assert both == {t: want[a].get(t, 0) + want[b].get(t, 0) for t in tables}


def test_a_decode_task_sets_its_workers_collector_threshold(gc_threshold):
    """The Python worker of a decode task collects garbage as the command line does
    (:func:`kafkasniff.pipeline.tune_gc_for_decoding`)."""
    gc.set_threshold(700, 10, 10)
    assert list(_decode_rows([], [])) == []
    assert gc.get_threshold() == (DECODE_GC_THRESHOLD, 10, 10)
