"""A real Spark standalone cluster on loopback: ``spark decode`` with
``--master spark://127.0.0.1:PORT`` (the decoder runs in the worker's executors).

``spark report`` is not run here: it builds its session with the same code as decode (one
more application on the cluster cost this test 25-50 s), and its results are checked in local
mode (test_report.py) and over Spark Connect (test_connect.py).

The master and one worker (1 core, 1 GiB) are started with ``spark-class`` from the pyspark
install (``SPARK_HOME`` = the pyspark package directory), each in its own process group so
that the worker's executors and their Python workers are stopped with it, whatever happens.
The commands run in a subprocess (a process holds one SparkContext: this one already has
the local test session)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from kafkasniff.export.schema import ALL_TABLES, GROUP_TABLES

from .conftest import CAPTURES, all_broker_ports, java_missing_reason
from .test_decode import table_rows

CLUSTER_CAPTURES = [CAPTURES / "librdkafka_errors_latency.pcap", CAPTURES / "kafka_python.pcap"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_home() -> str:
    import pyspark

    return os.path.dirname(pyspark.__file__)


def cluster_env() -> dict[str, str]:
    env = dict(os.environ, SPARK_HOME=spark_home(), SPARK_LOCAL_IP="127.0.0.1",
               PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    env.pop("SPARK_CONF_DIR", None)
    return env


def _stop(proc: subprocess.Popen) -> None:
    """Stop a process we started and everything in its process group: SIGTERM to the leader
    first (a worker's shutdown hook stops its executors and waits for them, so none is left
    to PID 1), then SIGTERM and SIGKILL to the group for anything left; wait for it."""
    pgid = proc.pid     # start_new_session: the group id is the leader's pid
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
    for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                break
            proc.poll()
            time.sleep(0.2)
        else:
            continue
        break
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _wait_for(check, what: str, timeout: float, procs, logs) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for p, log in zip(procs, logs):
            if p.poll() is not None:
                raise RuntimeError(f"{what}: process exited ({p.returncode}):\n"
                                   f"{Path(log).read_text()[-3000:]}")
        try:
            if check():
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"{what}: not ready after {timeout} s:\n" +
                       "\n".join(Path(log).read_text()[-2000:] for log in logs))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """``spark://127.0.0.1:PORT`` of a running master with one registered worker."""
    reason = java_missing_reason()
    if reason:
        pytest.skip(reason)
    d = tmp_path_factory.mktemp("cluster")
    env = cluster_env()
    spark_class = os.path.join(spark_home(), "bin", "spark-class")
    port, ui = free_port(), free_port()
    url = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen] = []
    logs = [d / "master.log", d / "worker.log"]
    try:
        with open(logs[0], "wb") as log:
            procs.append(subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                 "--port", str(port), "--webui-port", str(ui)],
                stdout=log, stderr=subprocess.STDOUT, env=env, cwd=d, start_new_session=True))

        def master_up() -> bool:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        _wait_for(master_up, "Spark master", 90, procs, logs[:1])
        with open(logs[1], "wb") as log:
            procs.append(subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host",
                 "127.0.0.1", "--cores", "1", "--memory", "1g", "--webui-port",
                 str(free_port()), "--work-dir", str(d / "work")],
                stdout=log, stderr=subprocess.STDOUT, env=env, cwd=d, start_new_session=True))

        def worker_registered() -> bool:
            with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as r:
                return json.load(r).get("aliveworkers", 0) >= 1
        _wait_for(worker_registered, "Spark worker", 90, procs, logs)
        yield url
    finally:
        if len(procs) == 2:
            # let the worker finish the executors of the apps that ended
            def idle() -> bool:
                with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as r:
                    info = json.load(r)
                return not info.get("activeapps") and info.get("coresused", 0) == 0
            try:
                _wait_for(idle, "Spark apps to end", 30, procs, logs)
            except RuntimeError:
                pass
        for p in reversed(procs):
            _stop(p)
        left = [p.pid for p in procs if _group_alive(p.pid)]
        assert not left, f"process groups still alive after stopping the cluster: {left}"


def run_cli(args: list[str], timeout: float = 300) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "kafkasniff.cli.spark"] + args
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                         env=cluster_env(), cwd=Path(__file__).resolve().parents[2])
    assert res.returncode == 0, f"{cmd}\nstdout:\n{res.stdout[-3000:]}\nstderr:\n" \
                                f"{res.stderr[-5000:]}"
    return res


def test_decode_on_a_standalone_cluster(cluster, exported, tmp_path) -> None:
    out = tmp_path / "tables"
    ports = [a for p in sorted(all_broker_ports()) for a in ("--port", str(p))]
    res = run_cli(["decode", *map(str, CLUSTER_CAPTURES), "-o", str(out), "--master", cluster,
                   "--shards", "2", "--records", *ports])
    assert "counts verified" in res.stderr
    assert "2 split" in res.stderr
    # the cluster wrote what export writes (the tables whose rows do not depend on other
    # connections: see test_decode for partitions/records; and the group tables, which the
    # driver builds from the states the executors saved beside the shards)
    for pcap in CLUSTER_CAPTURES:
        for table in ("exchanges", "issues", "connections", "topic_ids", *GROUP_TABLES):
            assert table_rows(out, table, pcap.name) == table_rows(exported, table, pcap.name)
        assert table_rows(out, "records", pcap.name) or pcap.name == "kafka_python.pcap"
    assert set(p.name for p in out.iterdir()) == set(ALL_TABLES)

