"""Getting a SparkSession: local mode, a standalone / YARN / k8s master, or Spark Connect.

``get_spark()`` is the one place a session is made. Local mode (``local[*]``, or
``local[N]`` with ``cores=N``) is the default and needs only ``pip install
'kafkasniff[spark]'`` and a Java 17+ runtime. ``master="spark://host:7077"`` (or any master
URL Spark knows) runs on an existing cluster; ``remote="sc://host:15002"`` talks to a Spark
Connect server, which needs pyspark's Connect client packages (``pip install
'pyspark[connect]'``: pandas, pyarrow, grpcio, grpcio-status, googleapis-common-protos,
zstandard, numpy).

Every session gets: ``spark.sql.session.timeZone=UTC`` (timestamps print and bucket in UTC
like the rest of kafkasniff), ``spark.sql.parquet.outputTimestampType=TIMESTAMP_MICROS``
(what the export schemas use), no console progress bar, and logging at WARN (a log4j2
configuration that silences Spark's start-up chatter and a few known harmless warnings);
the driver JVM's stderr is relayed without the JVM's warning about the incubator module
Spark 4 always loads, and pyspark's FutureWarning about the pandas version is filtered
(errors and every other message still reach stderr). A ``spark://`` master is checked
with a TCP connection (:func:`check_master`, 5 s) before Java starts; a session that
fails to start raises :class:`SparkSetupError` with one line. A new session outside
``spark-submit`` also gets ``spark.sql.warehouse.dir`` in the temporary directory, so that
Spark's catalog directory (``spark-warehouse``) is not made where the command runs.
``PYSPARK_PYTHON`` and ``PYSPARK_DRIVER_PYTHON`` default to this interpreter
(``sys.executable``) so that Python workers run the same virtualenv, with kafkasniff
importable; on a cluster that path must exist on every node (see ``docs/spark.md``), or set
``PYSPARK_PYTHON`` yourself.

PySpark is imported only inside these functions, never at module import.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import warnings
from typing import IO, Iterator

from kafkasniff.errors import KafkaSniffError

__all__ = [
    "DEFAULT_APP_NAME",
    "SparkSetupError",
    "check_connect_client",
    "check_java",
    "check_master",
    "check_pyspark",
    "default_master",
    "get_spark",
    "spark_session",
]

DEFAULT_APP_NAME = "kafkasniff"
MIN_JAVA = 17
#: seconds to wait for a TCP connection to a ``spark://`` master before Java is started
MASTER_CONNECT_TIMEOUT_S = 5.0
#: port of a ``spark://HOST`` master URL without one (Spark's default)
DEFAULT_MASTER_PORT = 7077

#: lines the driver JVM prints on stderr that say nothing to a kafkasniff user: Spark 4's
#: launcher always adds ``--add-modules=jdk.incubator.vector`` and the JVM then warns
#: about it; these exact lines are dropped, everything else the JVM prints is passed on
_JVM_NOISE = frozenset({
    b"WARNING: Using incubator modules: jdk.incubator.vector",
})

_BASE_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.ui.showConsoleProgress": "false",
}

# module (import name) -> distribution to install, for pyspark's Connect client
_CONNECT_MODULES = {
    "pandas": "pandas",
    "pyarrow": "pyarrow",
    "grpc": "grpcio",
    "grpc_status": "grpcio-status",
    "google.rpc": "googleapis-common-protos",
    "zstandard": "zstandard",
    "numpy": "numpy",
}

_LOG4J2 = """\
# kafkasniff: Spark at WARN, without start-up chatter
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
logger.hadoop.name = org.apache.hadoop.util.NativeCodeLoader
logger.hadoop.level = error
logger.utils.name = org.apache.spark.util.Utils
logger.utils.level = error
logger.parquet.name = org.apache.parquet
logger.parquet.level = error
logger.sqlmem.name = org.apache.spark.sql.execution.datasources.parquet
logger.sqlmem.level = error
logger.stream.name = org.apache.spark.sql.execution.streaming
logger.stream.level = error
logger.nwr.name = org.apache.spark.sql.execution.streaming.runtime.ResolveWriteToStream
logger.nwr.level = error
logger.rl.name = org.apache.spark.util.SparkStringUtils
logger.rl.level = error
"""


class SparkSetupError(KafkaSniffError):
    """Spark cannot run here: PySpark, Java or the Connect client packages are missing, the
    ``spark://`` master cannot be reached, the session failed to start, or a session with
    another master is already active in this process. The message says what to install or
    change."""


def check_pyspark() -> None:
    """Raise :class:`SparkSetupError` when PySpark is not installed."""
    if importlib.util.find_spec("pyspark") is None:
        raise SparkSetupError("PySpark is not installed: pip install 'kafkasniff[spark]' "
                              "(and a Java 17+ runtime, e.g. apt install "
                              "openjdk-17-jre-headless)")


def _java_binary() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home:
        cand = os.path.join(home, "bin", "java")
        if os.access(cand, os.X_OK):
            return cand
    return shutil.which("java")


def check_java() -> str:
    """Return the ``java`` binary Spark will use; raise :class:`SparkSetupError` when there
    is none or it is older than Java 17 (what Spark 4 needs)."""
    java = _java_binary()
    if java is None:
        raise SparkSetupError(
            "Java is not installed (no JAVA_HOME and no 'java' on PATH); Spark needs a "
            f"Java {MIN_JAVA}+ runtime: apt install openjdk-17-jre-headless, or set JAVA_HOME")
    try:
        res = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        raise SparkSetupError(f"{java}: cannot run java -version ({exc})") from None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', res.stderr + res.stdout)
    if m:
        major = int(m.group(1))
        if major == 1 and m.group(2):    # "1.8.0_..." is Java 8
            major = int(m.group(2))
        if major < MIN_JAVA:
            raise SparkSetupError(f"{java} is Java {major}; Spark needs Java {MIN_JAVA}+ "
                                  "(apt install openjdk-17-jre-headless, or set JAVA_HOME)")
    return java


def check_connect_client() -> None:
    """Raise :class:`SparkSetupError` naming the missing packages when pyspark's Spark
    Connect client cannot load (it needs pandas, pyarrow, grpcio, grpcio-status,
    googleapis-common-protos, zstandard and numpy)."""
    missing = []
    for module, dist in _CONNECT_MODULES.items():
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(dist)
    if missing:
        import pyspark

        raise SparkSetupError(
            "Spark Connect (--remote) needs pyspark's Connect client; missing: "
            + ", ".join(missing)
            + f". Install them with: pip install 'pyspark[connect]=={pyspark.__version__}'")


#: one ``HOST[:PORT]`` of a ``spark://`` URL: an IPv6 address in brackets or a name
_MASTER_ADDRESS = re.compile(r"(?:\[([^\]]+)\]|([^:\[\]\s]+))(?::([0-9]{1,5}))?")


def _master_addresses(master: str) -> list[tuple[str, int]]:
    """``(host, port)`` of each master of a ``spark://`` URL (``spark://h1:7077,h2:7077``
    for standby masters; port 7077 when none is given); raise :class:`SparkSetupError` for
    a URL without a host or with a bad port."""
    addrs = []
    for part in master[len("spark://"):].split(","):
        m = _MASTER_ADDRESS.fullmatch(part.strip().rstrip("/"))
        # at most 5 ASCII digits: int() of thousands of digits raises ValueError
        port = int(m.group(3) or DEFAULT_MASTER_PORT) if m else 0
        if not 0 < port < 65536:
            raise SparkSetupError(f"{master}: not a Spark master URL (spark://HOST:PORT)")
        addrs.append((m.group(1) or m.group(2), port))
    return addrs


def check_master(master: str, timeout_s: float = MASTER_CONNECT_TIMEOUT_S) -> None:
    """For a standalone master URL (``spark://HOST:PORT[,HOST:PORT...]``): raise
    :class:`SparkSetupError` unless a TCP connection to one of its masters opens within
    ``timeout_s`` seconds (each), before any JVM is started. Without this, Spark's client
    retries an unreachable master three times 20 s apart and fails with a Java stack trace.
    Other master URLs (``local``, ``yarn``, ``k8s://`` ...) are not checked."""
    if not master.startswith("spark://"):
        return
    failures = []
    for host, port in _master_addresses(master):
        try:
            with socket.create_connection((host, port), timeout=timeout_s):
                return
        except socket.timeout:
            failures.append(f"{host}:{port}: no answer within {timeout_s:g} s")
        except OSError as exc:
            failures.append(f"{host}:{port}: {exc.strerror or exc}")
        except ValueError as exc:   # UnicodeError: a host name label over 63 characters
            failures.append(f"{host}:{port}: {exc}")
    raise SparkSetupError(f"cannot reach the Spark master {master} ({'; '.join(failures)}); "
                          "is the master running and is the URL right?")


def _quiet_python_warnings() -> None:
    """Drop pyspark's FutureWarning about the installed pandas version (printed on every
    session start by ``pyspark.testing``, which PySpark imports itself); other warnings
    are left alone."""
    warnings.filterwarnings("ignore", category=FutureWarning,
                            message=r"PySpark does not yet fully support pandas")


#: the thread running :func:`_relay_stderr` for the JVM this process launched, if any;
#: :func:`_shutdown_gateway` joins it so that the JVM's last lines are not lost at exit
_relay_thread: threading.Thread | None = None
#: seconds :func:`_shutdown_gateway` waits for the relay to copy what the exited JVM left
#: (bounded: a process the JVM started may still hold the pipe open)
RELAY_DRAIN_TIMEOUT_S = 5.0


def _relay_stderr(stream: IO[bytes]) -> None:
    """Copy the JVM's stderr to ours (fd 2) line by line, dropping :data:`_JVM_NOISE`."""
    with stream:
        for line in iter(stream.readline, b""):
            if line.rstrip(b"\r\n") in _JVM_NOISE:
                continue
            view = memoryview(line)
            try:
                while view:
                    view = view[os.write(2, view):]
            except OSError:
                pass


def _launch_gateway(settings: dict[str, str], master: str | None, app_name: str) -> None:
    """Start the driver JVM the way PySpark does (``spark-submit ... pyspark-shell`` with
    every setting as ``--conf``), but with its stderr passed through
    :func:`_relay_stderr`. Does nothing when a gateway exists (a JVM of this process, or
    ``spark-submit``'s)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    with SparkContext._lock:
        if SparkContext._gateway is not None:
            return
        conf = SparkConf()
        conf.setAppName(app_name)
        if master is not None:
            conf.setMaster(master)
        for k, v in settings.items():
            conf.set(k, v)
        gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
        proc = getattr(gateway, "proc", None)
        if proc is not None and proc.stderr is not None:
            global _relay_thread
            # daemon: a process that exits without _shutdown_gateway is not held up by it
            _relay_thread = threading.Thread(target=_relay_stderr, args=(proc.stderr,),
                                             name="kafkasniff-jvm-stderr", daemon=True)
            _relay_thread.start()
        SparkContext._gateway = gateway
        SparkContext._jvm = gateway.jvm


def _java_error_line(exc: BaseException) -> str:
    """The first line of a JVM exception's message (else of ``exc``)."""
    java = getattr(exc, "java_exception", None)
    text = ""
    if java is not None:
        try:
            text = str(java.getMessage() or "")
        except Exception:  # noqa: BLE001 - the JVM may be gone
            text = ""
    if not text:
        try:
            text = str(exc)
        except Exception:  # noqa: BLE001 - py4j's __str__ asks the JVM, which may be gone
            text = ""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    line = lines[0] if lines else type(exc).__name__
    if "stopped SparkContext" in line:
        # Spark stopped the context while starting: the cluster refused the application
        line = "the application was stopped while starting (see Spark's messages above)"
    return line


def _log4j2_file() -> str:
    path = os.path.join(tempfile.gettempdir(), f"kafkasniff-log4j2-{os.getuid()}.properties")
    try:
        with open(path) as f:
            if f.read() == _LOG4J2:
                return path
    except OSError:
        pass
    tmp = f"{path}.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(_LOG4J2)
    os.replace(tmp, path)
    return path


def _active_session():
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession()


def default_master(master: str | None, cores: int | None = None) -> str | None:
    """The master :func:`get_spark` starts a session on: ``master`` when given, else
    ``local[cores]`` (``local[*]`` without ``cores``); ``None`` under ``spark-submit``, whose
    JVM already runs with the submit's ``--master`` (kept unless one is given here)."""
    if master is None and "PYSPARK_GATEWAY_PORT" not in os.environ:
        return f"local[{cores}]" if cores else "local[*]"
    return master


def get_spark(master: str | None = None, remote: str | None = None,
              app_name: str = DEFAULT_APP_NAME, cores: int | None = None,
              conf: dict[str, str] | None = None):
    """A SparkSession configured for kafkasniff.

    Args:
        master: a Spark master URL (``local[4]``, ``spark://host:7077``, ``yarn``, ``k8s://``
            ...); default ``local[*]`` (``local[cores]`` with ``cores``).
        remote: a Spark Connect URL (``sc://host:15002``); exclusive with ``master``.
        app_name: the application name shown by the cluster.
        cores: local mode: worker threads; a cluster: ``spark.cores.max``.
        conf: further Spark settings (override the defaults above).

    Returns:
        The active session when one exists in this process and no other master was asked
        for (so tests and notebooks share one), else a new one.

    Raises:
        SparkSetupError: PySpark, Java (local / cluster mode) or the Connect client
            packages (``remote``) are missing, no master of a ``spark://`` URL accepts a
            TCP connection within :data:`MASTER_CONNECT_TIMEOUT_S`, the session failed to
            start (one line: the JVM's first message line), or an active session runs on
            another master.
    """
    if master and remote:
        raise SparkSetupError("give either --master or --remote, not both")
    check_pyspark()
    _quiet_python_warnings()
    settings = dict(_BASE_CONF)
    if conf:
        settings.update(conf)
    if remote:
        check_connect_client()
        from pyspark.sql import SparkSession

        builder = SparkSession.builder.remote(remote).appName(app_name)
        session = builder.getOrCreate()
        for k, v in settings.items():
            if k.startswith("spark.sql."):
                session.conf.set(k, v)
        return session

    active = _active_session()
    if active is not None:
        sc = active.sparkContext
        active_master = sc.master
        if master is None or master == active_master:
            for k, v in settings.items():
                if k.startswith("spark.sql."):
                    active.conf.set(k, v)
            if "PYSPARK_PYTHON" not in os.environ:
                # a session made elsewhere without PYSPARK_PYTHON runs "python3" from PATH,
                # which may lack kafkasniff: our Python tasks use this interpreter
                sc.pythonExec = sys.executable
            return active
        raise SparkSetupError(f"a Spark session on {active_master} is already active in "
                              f"this process; cannot start one on {master}")

    if master is not None:
        check_master(master)
    java = check_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ
    master = default_master(master, cores)
    if master is not None and master.startswith("local"):
        # one machine: a few shuffle partitions per core, not Spark's cluster default of 200
        m = re.match(r"local\[(\d+)", master)
        n = int(m.group(1)) if m else (os.cpu_count() or 2)
        settings.setdefault("spark.sql.shuffle.partitions", str(max(4, 2 * n)))
    elif cores:
        settings.setdefault("spark.cores.max", str(cores))
    if not submitted:
        # tables are never saved to the catalog, but Spark still makes its warehouse
        # directory on first SQL use: keep it out of the user's working directory
        settings.setdefault("spark.sql.warehouse.dir", os.path.join(
            tempfile.gettempdir(), f"kafkasniff-spark-warehouse-{os.getuid()}"))
        log_opt = f"-Dlog4j2.configurationFile=file:{_log4j2_file()}"
        from pyspark import SparkContext

        if SparkContext._gateway is None:       # a JVM is about to be launched
            # a class-data-sharing archive of Spark's classes: the JVM starts in about half
            # the time (kafkasniff.spark.cds)
            from kafkasniff.spark import cds

            log_opt = f"{log_opt} {cds.archive_options(java)}".rstrip()
        key = "spark.driver.extraJavaOptions"   # executors of a cluster log to their own files
        settings[key] = f"{log_opt} {settings[key]}" if key in settings else log_opt

    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    for k, v in settings.items():
        builder = builder.config(k, v)
    try:
        if not submitted:
            _launch_gateway(settings, master, app_name)
        session = builder.getOrCreate()
    except Exception as exc:  # noqa: BLE001 - JVM errors arrive as py4j/pyspark exceptions
        if not type(exc).__module__.startswith(("py4j", "pyspark")):
            raise
        line = _java_error_line(exc)         # before the JVM is stopped: it asks the JVM
        _stop_failed_context()
        raise SparkSetupError(f"Spark could not start on {master or 'the submitted master'}: "
                              f"{line}") from None
    session.sparkContext.setLogLevel("WARN")
    return session


def _stop_failed_context() -> None:
    """Stop what is left of a SparkContext whose start failed (so that the process can
    exit, or try again)."""
    from pyspark import SparkContext

    sc = SparkContext._active_spark_context
    if sc is not None:
        try:
            sc.stop()
        except Exception:  # noqa: BLE001 - best effort, the JVM may be gone
            pass
    _shutdown_gateway(timeout_s=10)


def is_connect(session) -> bool:
    """Whether ``session`` is a Spark Connect client session (no SparkContext, no RDDs)."""
    return type(session).__module__.startswith("pyspark.sql.connect")


@contextlib.contextmanager
def spark_session(master: str | None = None, remote: str | None = None,
                  app_name: str = DEFAULT_APP_NAME, cores: int | None = None,
                  conf: dict[str, str] | None = None) -> Iterator:
    """:func:`get_spark` as a context manager: the session is stopped at the end only if it
    was created here (an already active session, e.g. a test's, is left running)."""
    existed = None
    if not remote and importlib.util.find_spec("pyspark") is not None:
        existed = _active_session()
    session = get_spark(master=master, remote=remote, app_name=app_name, cores=cores,
                        conf=conf)
    try:
        yield session
    finally:
        if session is not existed:
            if not remote:
                _release_accumulator_server(session)
            session.stop()
            if not remote:
                _shutdown_gateway()


def _release_accumulator_server(session) -> None:
    """Shut PySpark's accumulator update server down in a thread of its own instead of in
    ``SparkContext.stop``.

    The server's request handler reads the JVM's update connection in a loop that looks for
    a shutdown once a second, and ``SparkContext.stop`` waits for it: about 0.9 s of the
    1.0 s a local session took to stop on this project's 2-core machine, against 0.08 s
    without the wait (docs/benchmarks.md). Taken from the context first, the server is not
    waited for there; its thread (a daemon) ends while the JVM exits. The JVM's connection
    may then end under the handler (an ``EOFError`` that ``socketserver`` would print):
    errors of a server being shut down are not reported. A PySpark without the (private)
    attribute keeps its own way."""
    sc = getattr(session, "_sc", None)
    server = getattr(sc, "_accumulatorServer", None)
    if server is None or not hasattr(server, "shutdown"):
        return
    sc._accumulatorServer = None
    server.handle_error = lambda request, client_address: None

    def shut() -> None:
        server.shutdown()
        server.server_close()

    threading.Thread(target=shut, name="kafkasniff-accumulator-shutdown", daemon=True).start()


def _shutdown_gateway(timeout_s: float = 60) -> None:
    """Stop the JVM that PySpark launched for this process and wait for it to exit.

    PySpark leaves the JVM running until the Python process exits (the JVM then sees its
    stdin close and exits on its own, reparented to PID 1); waiting for it here means no
    process outlives the command, also where PID 1 does not reap orphans (containers). A
    later :func:`get_spark` in the same process launches a new JVM. Then waits (at most
    :data:`RELAY_DRAIN_TIMEOUT_S`) for :func:`_relay_stderr` to pass on the JVM's last
    stderr lines."""
    from pyspark import SparkContext

    gw = SparkContext._gateway
    if gw is None or SparkContext._active_spark_context is not None:
        return
    proc = getattr(gw, "proc", None)
    try:
        gw.shutdown()
    except Exception:  # noqa: BLE001 - the JVM may already be gone
        pass
    SparkContext._gateway = None
    SparkContext._jvm = None
    if proc is not None:
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=timeout_s)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        from kafkasniff.spark import cds

        cds.finish(proc.returncode)         # the archive the JVM wrote at exit, if any
    global _relay_thread
    if _relay_thread is not None:
        # the JVM has exited: its pipe ends once every copy of its write end is closed
        _relay_thread.join(RELAY_DRAIN_TIMEOUT_S)
        _relay_thread = None
