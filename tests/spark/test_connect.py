"""Spark Connect (``--remote sc://``): a Connect server started from the pyspark install on
loopback, then ``spark decode``, ``spark report`` and ``spark watch`` through it.

Skipped unless pyspark's Connect client packages are installed (``pip install
'pyspark[connect]'``: pandas, grpcio, grpcio-status, googleapis-common-protos ...); they are
not part of the ``test`` extra."""

from __future__ import annotations

import os
import subprocess

import pyarrow.parquet as pq
import pytest

from kafkasniff.spark.session import SparkSetupError, check_connect_client

from .conftest import java_missing_reason
from .test_cluster import CLUSTER_CAPTURES, _group_alive, _stop, _wait_for, cluster_env, \
    free_port, run_cli, spark_home
from .test_decode import table_rows


def _connect_missing() -> str | None:
    try:
        check_connect_client()
    except SparkSetupError as exc:
        return str(exc)
    return None


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory):
    reason = java_missing_reason() or _connect_missing()
    if reason:
        pytest.skip(reason)
    import socket

    d = tmp_path_factory.mktemp("connect")
    port = free_port()
    log = d / "server.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            [os.path.join(spark_home(), "bin", "spark-submit"), "--class",
             "org.apache.spark.sql.connect.service.SparkConnectServer", "--master", "local[2]",
             "--conf", f"spark.connect.grpc.binding.port={port}", "--conf",
             "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=4"],
            stdout=fh, stderr=subprocess.STDOUT, env=cluster_env(), cwd=d,
            start_new_session=True)
    try:
        def up() -> bool:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        _wait_for(up, "Spark Connect server", 120, [proc], [log])
        yield f"sc://127.0.0.1:{port}"
    finally:
        _stop(proc)
        assert not _group_alive(proc.pid)


def test_decode_report_watch_over_spark_connect(connect_server, exported, tmp_path) -> None:
    from .conftest import all_broker_ports

    out = tmp_path / "tables"
    ports = [a for p in sorted(all_broker_ports()) for a in ("--port", str(p))]
    res = run_cli(["decode", *map(str, CLUSTER_CAPTURES), "-o", str(out), "--remote",
                   connect_server, "--shards", "2", *ports])
    assert "counts verified" in res.stderr
    for pcap in CLUSTER_CAPTURES:
        assert table_rows(out, "exchanges", pcap.name) == \
            table_rows(exported, "exchanges", pcap.name)
    rep = run_cli(["report", str(out), "--remote", connect_server, "--top", "3"])
    assert "[latency_by_api]" in rep.stdout
    assert sum(r["exchanges"] for r in pq.read_table(out / "report" / "latency_by_api")
               .to_pylist()) == sum(len(table_rows(exported, "exchanges", p.name))
                                    for p in CLUSTER_CAPTURES)
    # --available-now stops by itself (run_cli's timeout catches a hang)
    watch = run_cli(["watch", str(out), "--remote", connect_server, "--available-now",
                     "--watermark", "1 day"])
    assert "window_start" in watch.stdout and "Fetch" in watch.stdout
