"""Engine set-up (kafkasniff.spark.session) and the command group's surface."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kafkasniff.cli.spark import spark_group
from kafkasniff.spark import session as sess

ROOT = Path(__file__).resolve().parents[2]


def test_session_settings(spark) -> None:
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert spark.conf.get("spark.sql.parquet.outputTimestampType") == "TIMESTAMP_MICROS"
    # executors run this interpreter: set by get_spark (PYSPARK_PYTHON), or on the session
    # when another test module made it first without PYSPARK_PYTHON
    assert os.environ.get("PYSPARK_PYTHON") == sys.executable or \
        spark.sparkContext.pythonExec == sys.executable
    # Python tasks run this interpreter (so kafkasniff imports there)
    got = spark.sparkContext.parallelize([0], 1).map(
        lambda _: __import__("sys").executable).collect()
    assert got == [spark.sparkContext.pythonExec]
    assert sess.get_spark() is spark            # the active session is shared


def test_other_master_while_active(spark) -> None:
    with pytest.raises(sess.SparkSetupError, match="already active"):
        sess.get_spark(master="spark://127.0.0.1:1")
    with pytest.raises(sess.SparkSetupError, match="not both"):
        sess.get_spark(master="local[1]", remote="sc://localhost")


def test_missing_java_is_a_clear_error(monkeypatch, tmp_path) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(sess.SparkSetupError, match="Java is not installed.*openjdk-17"):
        sess.check_java()


def test_old_java_is_a_clear_error(monkeypatch, tmp_path) -> None:
    java = tmp_path / "bin" / "java"
    java.parent.mkdir()
    java.write_text('#!/bin/sh\necho \'openjdk version "11.0.2" 2019-01-15\' >&2\n')
    java.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(sess.SparkSetupError, match="Java 11; Spark needs Java 17"):
        sess.check_java()


def test_missing_connect_packages_are_named(monkeypatch) -> None:
    real = importlib.util.find_spec

    def fake(name, *a, **k):
        if name in ("grpc", "grpc_status", "google.rpc", "pandas"):
            return None
        return real(name, *a, **k)

    monkeypatch.setattr(importlib.util, "find_spec", fake)
    with pytest.raises(sess.SparkSetupError) as err:
        sess.check_connect_client()
    msg = str(err.value)
    for dist in ("grpcio", "grpcio-status", "googleapis-common-protos", "pandas"):
        assert dist in msg
    assert "pip install 'pyspark[connect]==" in msg


def test_remote_without_connect_packages_via_cli(monkeypatch, tmp_path) -> None:
    def missing() -> None:
        raise sess.SparkSetupError("needs pyspark[connect]")

    monkeypatch.setattr(sess, "check_connect_client", missing)
    res = CliRunner().invoke(spark_group, ["report", str(tmp_path), "--remote", "sc://x:1"])
    assert res.exit_code == 2
    assert "needs pyspark[connect]" in res.output


def test_no_pyspark_on_import_and_in_headless_commands() -> None:
    code = ("import sys; import kafkasniff.spark, kafkasniff.cli.spark, "
            "kafkasniff.spark.split, kafkasniff.spark.decode, kafkasniff.spark.report, "
            "kafkasniff.spark.watch, kafkasniff.spark.session; "
            "print([m for m in ('pyspark', 'py4j') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("command,options", [
    ("decode", ["--output", "--master", "--remote", "--cores", "--conf", "--shards",
                "--split-threshold-mb", "--records", "--partition-by", "--format",
                "--row-group-rows", "--no-verify", "--keep-scratch", "--port", "--detect",
                "--max-frame-bytes", "--show-secrets", "--quiet"]),
    ("report", ["--master", "--remote", "--sql", "--top", "--no-write", "--conf"]),
    ("watch", ["--master", "--remote", "--watermark", "--window", "--trigger-seconds",
               "--available-now", "--checkpoint", "--max-files-per-trigger", "--output-mode",
               "--rows"]),
])
def test_help(command, options) -> None:
    res = CliRunner().invoke(spark_group, [command, "--help"])
    assert res.exit_code == 0, res.output
    for o in options:
        assert o in res.output, o
    top = CliRunner().invoke(spark_group, ["--help"])
    assert command in top.output


def test_decode_usage_errors(tmp_path) -> None:
    res = CliRunner().invoke(spark_group, ["decode", "-o", str(tmp_path / "o")])
    assert res.exit_code == 2 and "no capture given" in res.output
    res = CliRunner().invoke(spark_group, ["decode", str(tmp_path / "nope.pcap"), "-o",
                                           str(tmp_path / "o")])
    assert res.exit_code == 2 and "no such file" in res.output


def test_decode_command(spark, tmp_path) -> None:
    pcap = ROOT / "captures" / "librdkafka_admin.pcap"
    res = CliRunner().invoke(spark_group, ["decode", str(pcap), "-o", str(tmp_path / "o"),
                                           "--shards", "2", "--port", "39179", "--port",
                                           "35891", "--port", "34505"])
    assert res.exit_code == 0, res.output
    assert "exchanges 19" in res.output and "counts verified" in res.output


# ---------------------------------------------------------------------------- issue 15

LATENCY_CAPTURE = ROOT / "captures" / "librdkafka_errors_latency.pcap"
LATENCY_PORTS = ("36231", "32901", "42539")


def small_export(out: Path) -> Path:
    """``kafkasniff export`` of one small capture (a second, no Spark)."""
    from kafkasniff.export.writer import export_captures
    from kafkasniff.pipeline import PipelineOptions

    export_captures([LATENCY_CAPTURE], out,
                    options=PipelineOptions(ports=frozenset(map(int, LATENCY_PORTS))))
    return out


def spark_cli(args: list[str], cwd: Path, env: dict | None = None,
              timeout: float = 300) -> subprocess.CompletedProcess:
    from .test_cluster import cluster_env

    return subprocess.run([sys.executable, "-m", "kafkasniff.cli.spark", *args],
                          capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env=env or cluster_env())


def closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]     # closed again when the block ends: nobody listens


def test_unreachable_master_is_one_line_and_exit_2(tmp_path) -> None:
    """An unreachable ``--master spark://`` gave a 214-line Java/Python traceback and exit 1
    after Spark's three 20 s registration attempts: now one line and exit 2, before Java."""
    tables = small_export(tmp_path / "tables")
    url = f"spark://127.0.0.1:{closed_port()}"
    res = spark_cli(["report", str(tables), "--master", url], cwd=tmp_path)
    assert res.returncode == 2, res.stderr[-3000:]
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr[-3000:]
    assert lines[0].startswith("kafkasniff: error: cannot reach the Spark master " + url)
    assert "Connection refused" in lines[0]
    res = spark_cli(["decode", str(LATENCY_CAPTURE), "-o", str(tmp_path / "o"), "--master",
                     url, "-q"], cwd=tmp_path)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "cannot reach the Spark master" in res.stderr


def test_check_master(tmp_path) -> None:
    import socket

    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        port = srv.getsockname()[1]
        down = closed_port()
        sess.check_master(f"spark://127.0.0.1:{port}")
        # standby masters: one that answers is enough
        sess.check_master(f"spark://127.0.0.1:{down},127.0.0.1:{port}")
        for url in (f"spark://127.0.0.1:{down}", f"spark://127.0.0.1:{down},[::1]:{down}"):
            with pytest.raises(sess.SparkSetupError, match="cannot reach the Spark master"):
                sess.check_master(url, timeout_s=2)
    for url in ("spark://", "spark://host:99999", "spark://host:x", "spark://h1:7077,",
                "spark://host:" + "9" * 5000):          # int() of 5000 digits: ValueError
        with pytest.raises(sess.SparkSetupError, match="not a Spark master URL"):
            sess.check_master(url)
    # a host name label over 63 characters: UnicodeError from the idna codec
    with pytest.raises(sess.SparkSetupError, match="cannot reach the Spark master"):
        sess.check_master("spark://" + "a" * 100 + ":7077")
    assert sess._master_addresses("spark://h1,h2:7078") == [("h1", 7077), ("h2", 7078)]
    sess.check_master("local[2]")                 # not a standalone master: not checked
    sess.check_master("yarn")


@pytest.mark.parametrize("setup,args", [
    ("empty", []),
    ("connections only", []),
    ("empty", ["--sql", "SELECT 1"]),
])
def test_report_without_tables_starts_no_jvm(tmp_path, setup, args) -> None:
    """``spark report`` on a directory without tables said so only after starting Java:
    now it says so at once. Run where there is no Java, so a JVM start could not even be
    attempted without failing differently."""
    d = tmp_path / "dir"
    d.mkdir()
    if setup == "connections only":
        small_export(tmp_path / "full")
        shutil.copytree(tmp_path / "full" / "connections", d / "connections")
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(tmp_path / "no-java")
    res = spark_cli(["report", str(d), *args], cwd=tmp_path, env=env)
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip().splitlines() == [
        f"kafkasniff: error: {d}: no exported table found (expected exchanges/, partitions/, "
        "... written by kafkasniff export or spark decode)"]


def test_spark_commands_print_no_warnings_and_leave_no_warehouse(exported, tmp_path) -> None:
    """Two ``spark report`` runs, concurrently (each is mostly a JVM start):

    * every Spark command printed the JVM's incubator-module warning, pyspark's pandas
      FutureWarning and Spark's plan-truncation WARN on stderr: a report now prints nothing
      there;
    * Spark makes its catalog directory (``spark-warehouse``) in the working directory on the
      first catalog lookup (``SHOW TABLES``, a query naming an unknown table): a user's
      ``kafkasniff spark report`` must not litter where it was run."""
    from .conftest import java_missing_reason
    from .test_cluster import cluster_env

    reason = java_missing_reason()
    if reason:
        pytest.skip(reason)
    tables = small_export(tmp_path / "tables")
    quiet_dir, catalog_dir = tmp_path / "quiet", tmp_path / "catalog"
    quiet_dir.mkdir()
    catalog_dir.mkdir()
    # a query over every column of the exchanges table: its plan is wide enough for the
    # truncation WARN, and one query starts no more Spark jobs than it needs
    runs = [
        (quiet_dir, ["report", str(tables), "--master", "local[1]", "--no-write", "--top", "1",
                     "--sql", "SELECT * FROM exchanges ORDER BY ts_ns"]),
        (catalog_dir, ["report", str(exported), "--master", "local[1]", "--no-write",
                       "--sql", "SHOW TABLES"]),
    ]
    procs = [subprocess.Popen([sys.executable, "-m", "kafkasniff.cli.spark", *args], cwd=cwd,
                              env=cluster_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for cwd, args in runs]
    try:
        (quiet_out, quiet_err), (catalog_out, catalog_err) = (p.communicate(timeout=300)
                                                              for p in procs)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert procs[0].returncode == 0, quiet_err[-3000:]
    assert "api_name" in quiet_out
    assert quiet_err == ""
    assert procs[1].returncode == 0, catalog_err[-3000:]
    assert "exchanges" in catalog_out
    assert not (catalog_dir / "spark-warehouse").exists()
    assert not (quiet_dir / "spark-warehouse").exists()


def test_jvm_stderr_relay_keeps_real_messages(capfd) -> None:
    """The relay of the JVM's stderr drops only the known noise lines."""
    r, w = os.pipe()
    os.write(w, b"WARNING: Using incubator modules: jdk.incubator.vector\n"
                b"26/11/27 11:30:33 ERROR SparkContext: real trouble\n"
                b"\tat org.apache.spark.X(X.scala:1)\nno newline at the end")
    os.close(w)
    sess._relay_stderr(os.fdopen(r, "rb"))
    err = capfd.readouterr().err
    assert err == ("26/11/27 11:30:33 ERROR SparkContext: real trouble\n"
                   "\tat org.apache.spark.X(X.scala:1)\nno newline at the end")


STOP_SCRIPT = """
import threading
from kafkasniff.spark.session import spark_session
with spark_session(master="local[1]") as s:
    assert s.sparkContext.parallelize(range(4), 2).map(lambda x: x + 1).sum() == 10
    server = s.sparkContext._accumulatorServer
for t in threading.enumerate():
    if t.name == "kafkasniff-accumulator-shutdown":
        t.join()
print("shut down", server.server_shutdown)
"""


def test_stopping_leaves_the_accumulator_server_to_a_thread(tmp_path) -> None:
    """A session made here stops without waiting for PySpark's accumulator server (its
    handler looks for a shutdown once a second); the server is shut down all the same, and
    the JVM's update connection ending under it prints nothing."""
    res = subprocess.run([sys.executable, "-c", STOP_SCRIPT], cwd=tmp_path, text=True,
                         capture_output=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.strip() == "shut down True"
    assert "Traceback" not in res.stderr and "EOFError" not in res.stderr, res.stderr[-3000:]
