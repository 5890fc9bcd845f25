"""A real Apache Kafka broker (KRaft, combined controller+broker) for the tests.

The jars come from ``tests/broker/pom.xml`` (Kafka 4.3.1, pinned), copied to
``tests/broker/lib/`` by ``tests/broker/fetch.sh`` (run by ``.ci/setup``). :class:`KafkaBroker`
writes a ``server.properties`` and a log4j2 configuration into a temporary directory, formats
the storage (``kafka.tools.StorageTool format --standalone``), starts ``kafka.Kafka`` on
127.0.0.1 with free ports, waits until it answers Metadata, and stops it.

The broker's request log (logger ``kafka.request.logger`` at DEBUG) goes to
``<dir>/kafka-request.log``: one line per completed request, the server-side truth
(:func:`parse_request_log`). Everything else goes to ``<dir>/server.log``.

Usage::

    broker = KafkaBroker(LIB_DIR, tmp_dir).start()     # pytest.skip when Java/jars are missing
    try:
        broker.create_topic("orders", partitions=3)
        ...  # clients use broker.bootstrap_servers
    finally:
        broker.stop()
"""

from __future__ import annotations

import base64
import ctypes
import json
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

__all__ = ["KAFKA_VERSION", "LIB_DIR", "OAUTHBEARER_PRINCIPAL", "SASL_USERS", "KafkaBroker",
           "KafkaBrokerError", "KafkaCluster", "LoggedRequest",
           "missing_prerequisite", "parse_request_log", "parse_request_log_line"]

#: The Kafka release pinned in tests/broker/pom.xml.
KAFKA_VERSION = "4.3.1"
#: Where tests/broker/fetch.sh puts the jars.
LIB_DIR = Path(__file__).resolve().parents[1] / "broker" / "lib"


#: SASL mechanism -> (user, password) on the SASL_PLAINTEXT listener (test secrets: the
#: secret-search tests look for them in every output)
SASL_USERS = {
    "PLAIN": ("alice", "alice-plain-Pa55word"),
    "SCRAM-SHA-256": ("bob", "bob-scram256-Pa55word"),
    "SCRAM-SHA-512": ("carol", "carol-scram512-Pa55word"),
}


#: the principal of the unsecured OAUTHBEARER tokens the SASL_PLAINTEXT listener accepts
#: (Kafka's OAuthBearerUnsecuredValidatorCallbackHandler: a JWT with "alg": "none")
OAUTHBEARER_PRINCIPAL = "erin"


class KafkaBrokerError(RuntimeError):
    """The broker could not be formatted, started or stopped (message: why, with its log tail)."""


def missing_prerequisite(lib_dir: Path = LIB_DIR) -> str | None:
    """``None`` when a broker can be started from ``lib_dir``, else why not (a skip reason)."""
    if shutil.which("java") is None:
        return "java is not installed: the real Kafka broker tests need a JRE 17+ (.ci/setup)"
    if not any(lib_dir.glob(f"kafka_2.13-{KAFKA_VERSION}.jar")):
        return (f"Kafka {KAFKA_VERSION} jars missing in {lib_dir}: run tests/broker/fetch.sh "
                "(needs Maven and Maven Central; .ci/setup runs it)")
    return None


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def random_cluster_id() -> str:
    """A KRaft cluster id as ``StorageTool random-uuid`` prints it (16 random bytes, URL-safe
    base64 without padding, never starting with ``-``), made here to spare a JVM start."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def _die_with_parent() -> None:
    """In the forked child, before exec: ask Linux to SIGKILL the broker when the test process
    dies (PR_SET_PDEATHSIG), so that a killed test run leaves no JVM behind."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG = 1


# --------------------------------------------------------------------------- request log


@dataclass(frozen=True)
class LoggedRequest:
    """One request as the broker's request log reports it (server-side truth).

    Attributes:
        api_key, api_version, correlation_id, client_id: the request header.
        listener: listener name (``PLAINTEXT``, ``CONTROLLER``, ...).
        local_port, client_host, client_port: the connection (from its connection id
            ``"127.0.0.1:9092-127.0.0.1:54321-1-0"``: broker address, then client address).
        total_time_ms, throttle_time_ms: the broker's timings (``totalTimeMs`` from reading
            the request to sending the response; ``throttleTimeMs``).
        forwarded: the controller logs a request a broker forwarded in an Envelope under
            the inner request's header (the client's), on the broker's connection; the
            Envelope's own header is not logged.
        fields: the whole JSON object of the line (request and response bodies included).
        logged_at: when the line was written (seconds since the epoch, ms resolution;
            after the response was sent), ``None`` when the line has no time.
    """

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    listener: str | None
    local_port: int
    client_host: str
    client_port: int
    total_time_ms: float
    throttle_time_ms: float
    forwarded: bool
    fields: dict
    logged_at: float | None = None


_COMPLETED = "Completed request:"
_CONNECTION = re.compile(r"^(?P<lhost>.+):(?P<lport>\d+)-(?P<rhost>.+):(?P<rport>\d+)-\d+(-\d+)?$")


_LOG_TIME = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})\]")


def _log_time(prefix: str) -> float | None:
    """The time of a log4j2 ``[%d]`` prefix (``[2026-11-25 07:18:26,809]``, the JVM's local
    time zone, which is this process's) as seconds since the epoch."""
    m = _LOG_TIME.search(prefix)
    if m is None:
        return None
    return time.mktime(time.strptime(m[1], "%Y-%m-%d %H:%M:%S")) + int(m[2]) / 1000


def parse_request_log_line(line: str) -> LoggedRequest | None:
    """Parse one line of Kafka 4.3's request log; ``None`` for any other line.

    Kafka's ``RequestChannel`` logs each completed request at DEBUG as ``Completed request:``
    followed by one JSON object (``RequestConvertToJson.requestDescMetrics``); the log4j2
    pattern of :class:`KafkaBroker` puts ``[time] LEVEL`` before it. A real line (one line in
    the file; the bodies are the broker's parsed request and its response, camelCase names,
    bytes in base64, records as ``recordsSizeInBytes``; times in ms)::

        [2026-11-25 07:18:26,809] DEBUG Completed request:{"isForwarded":false,
        "requestHeader":{"requestApiKey":3,"requestApiVersion":13,"correlationId":2,
        "clientId":"kafkasniff-ready-check","requestApiKeyName":"METADATA"},
        "request":{"topics":[],"allowAutoTopicCreation":false,
        "includeTopicAuthorizedOperations":false},"response":{...},
        "connection":"127.0.0.1:57847-127.0.0.1:54702-1-0","totalTimeMs":13.432,
        "requestQueueTimeMs":0.836,"localTimeMs":10.912,"remoteTimeMs":0.0,
        "throttleTimeMs":0,"responseQueueTimeMs":0.461,"sendTimeMs":1.221,
        "securityProtocol":"PLAINTEXT","principal":"User:ANONYMOUS","listener":"PLAINTEXT",
        "clientInformation":{"softwareName":"confluent-kafka-python",
        "softwareVersion":"2.16.1-rdkafka-2.16.0"}}

    The connection id is ``<broker ip>:<port>-<client ip>:<port>-<processor>-<index>``.
    """
    at = line.find(_COMPLETED)
    if at < 0:
        return None
    d = json.loads(line[at + len(_COMPLETED):])
    h = d["requestHeader"]
    m = _CONNECTION.match(d["connection"])
    if m is None:
        raise ValueError(f"unexpected connection id {d['connection']!r}")
    return LoggedRequest(
        api_key=int(h["requestApiKey"]), api_version=int(h["requestApiVersion"]),
        correlation_id=int(h["correlationId"]), client_id=h.get("clientId"),
        listener=d.get("listener"), local_port=int(m["lport"]), client_host=m["rhost"],
        client_port=int(m["rport"]), total_time_ms=float(d["totalTimeMs"]),
        throttle_time_ms=float(d.get("throttleTimeMs", 0)),
        forwarded=bool(d.get("isForwarded")), fields=d, logged_at=_log_time(line[:at]))


def parse_request_log(path: Path, offset: int = 0) -> list[LoggedRequest]:
    """Every request of a request log file from byte ``offset`` on, in the order they
    completed (a last line still being written, without its newline, is left out)."""
    out = []
    with open(path, encoding="utf-8") as f:
        f.seek(offset)
        for line in f:
            if not line.endswith("\n"):
                break
            r = parse_request_log_line(line)
            if r is not None:
                out.append(r)
    return out


# --------------------------------------------------------------------------- broker

#: the JDK's TLS 1.3 key limits (java.security ``jdk.tls.keyLimits``): a KeyUpdate (RFC 8446
#: 4.6.3) after every 32 KiB a side encrypts or decrypts, instead of the default 2^37 bytes,
#: so that a short test run shows KeyUpdate in both directions (the JDK asks the peer to
#: update too when its read side reaches the limit)
KEY_UPDATE_BYTES = 1 << 15
_JAVA_SECURITY = (f"jdk.tls.keyLimits=AES/GCM/NoPadding KeyUpdate {KEY_UPDATE_BYTES}, "
                  f"ChaCha20-Poly1305 KeyUpdate {KEY_UPDATE_BYTES}\n")

_LOG4J2 = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="warn" shutdownHook="disable">
  <Appenders>
    <File name="server" fileName="{dir}/server.log" immediateFlush="true">
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
    </File>
    <File name="request" fileName="{dir}/kafka-request.log" immediateFlush="true">
      <PatternLayout pattern="[%d] %p %m%n"/>
    </File>
  </Appenders>
  <Loggers>
    <Root level="INFO"><AppenderRef ref="server"/></Root>
    <Logger name="kafka.request.logger" level="DEBUG" additivity="false">
      <AppenderRef ref="request"/>
    </Logger>
  </Loggers>
</Configuration>
"""


class KafkaBroker:
    """One Kafka node (KRaft ``process.roles=broker,controller``, node id 1) on 127.0.0.1.

    Args:
        lib_dir: the jars (``tests/broker/lib``).
        work_dir: an empty directory for ``server.properties``, the log4j2 configuration,
            the data (``data/``), ``server.log`` and ``kafka-request.log``.
        heap: the JVM's ``-Xmx``.
        extra_config: more ``server.properties`` settings (override the defaults).
        node_id, voters, cluster_id, controller_port: a node of a :class:`KafkaCluster`
            (voters: node id -> controller port of the static quorum).
        port: the PLAINTEXT port (default: a free one).

    Attributes:
        port: the PLAINTEXT listener (clients); ``sasl_port``: the SASL_PLAINTEXT listener
            (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 with users in :data:`SASL_USERS`, and
            unsecured OAUTHBEARER); ``ssl_port`` and ``sasl_ssl_port``: the SSL and SASL_SSL
            listeners (PLAIN and SCRAM), whose certificate ``tls.ca`` signed;
            ``controller_port``: the CONTROLLER listener.
        request_log, server_log: the two log files.
    """

    def __init__(self, lib_dir: Path, work_dir: Path, *, heap: str = "512m",
                 extra_config: dict[str, str] | None = None, node_id: int = 1,
                 voters: dict[int, int] | None = None, cluster_id: str | None = None,
                 controller_port: int | None = None, port: int | None = None) -> None:
        self.lib_dir = Path(lib_dir)
        self.work_dir = Path(work_dir)
        self.heap = heap
        self.node_id = node_id
        self.voters = voters
        self.cluster_id = cluster_id or random_cluster_id()
        self.port = port or free_port()
        self.sasl_port = free_port()
        self.ssl_port = free_port()
        self.sasl_ssl_port = free_port()
        from tests.support.tls_certs import make_certificates

        self.tls = make_certificates(self.work_dir / "tls")
        self.controller_port = controller_port or free_port()
        self.request_log = self.work_dir / "kafka-request.log"
        self.server_log = self.work_dir / "server.log"
        self.config = self._config(extra_config or {})
        self.proc: subprocess.Popen | None = None

    @property
    def bootstrap_servers(self) -> str:
        """``127.0.0.1:<port>`` of the PLAINTEXT listener."""
        return f"127.0.0.1:{self.port}"

    def _config(self, extra: dict[str, str]) -> dict[str, str]:
        cfg = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            # one node: a dynamic quorum of itself (format --standalone); a cluster: the
            # static voters of KafkaCluster
            **({"controller.quorum.bootstrap.servers": f"127.0.0.1:{self.controller_port}"}
               if self.voters is None else
               {"controller.quorum.voters": ",".join(f"{n}@127.0.0.1:{port}"
                                                     for n, port in self.voters.items())}),
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},"
                         f"SASL_PLAINTEXT://127.0.0.1:{self.sasl_port},"
                         f"SSL://127.0.0.1:{self.ssl_port},"
                         f"SASL_SSL://127.0.0.1:{self.sasl_ssl_port},"
                         f"CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port},"
                                    f"SASL_PLAINTEXT://127.0.0.1:{self.sasl_port},"
                                    f"SSL://127.0.0.1:{self.ssl_port},"
                                    f"SASL_SSL://127.0.0.1:{self.sasl_ssl_port},"
                                    f"CONTROLLER://127.0.0.1:{self.controller_port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,"
                                              "SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL,"
                                              "SASL_SSL:SASL_SSL",
            # SSL and SASL_SSL: the server certificate of tests/support/tls_certs.py as a PEM
            # keystore; TLS 1.2 and 1.3 (Kafka's defaults), no client certificates
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.tls.keystore),
            "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
            # SASL_PLAINTEXT and SASL_SSL: PLAIN users in the JAAS configuration, SCRAM
            # credentials written at format time (SASL_USERS)
            "sasl.enabled.mechanisms": ",".join([*SASL_USERS, "OAUTHBEARER"]),
            "listener.name.sasl_ssl.sasl.enabled.mechanisms": ",".join(SASL_USERS),
            **{f"listener.name.{listener}.plain.sasl.jaas.config":
               "org.apache.kafka.common.security.plain.PlainLoginModule required "
               f'user_{SASL_USERS["PLAIN"][0]}="{SASL_USERS["PLAIN"][1]}";'
               for listener in ("sasl_plaintext", "sasl_ssl")},
            **{f"listener.name.{listener}.{mech.lower()}.sasl.jaas.config":
               "org.apache.kafka.common.security.scram.ScramLoginModule required;"
               for mech in SASL_USERS if mech.startswith("SCRAM")
               for listener in ("sasl_plaintext", "sasl_ssl")},
            # unsecured OAUTHBEARER (KIP-255): tokens are unsigned JWTs, checked by Kafka's
            # unsecured validator (the default server callback of this login module)
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                f'unsecuredLoginStringClaim_sub="{OAUTHBEARER_PRINCIPAL}";',
            "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class":
                "org.apache.kafka.common.security.oauthbearer.internals.unsecured."
                "OAuthBearerUnsecuredValidatorCallbackHandler",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(self.work_dir / "data"),
            "num.partitions": "1",
            "auto.create.topics.enable": "true",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "3",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "3",
            # KIP-848 consumer groups and KIP-932 share groups: in 4.3 the features
            # group.version and share.version (both 1 on a 4.3-IV0 cluster; share.version
            # is also given at format time) enable them. The deprecated
            # group.coordinator.rebalance.protocols stays unset: any value of it disables
            # the protocols it leaves out (streams, for "classic,consumer,share").
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "share.coordinator.state.topic.num.partitions": "3",
            "group.initial.rebalance.delay.ms": "0",
            # one network thread per listener: every Processor has its own SSLContext, so a
            # TLS session ticket issued on one is "invalid" on another (the JDK's debug
            # log); with one, later connections resume sessions (TLS 1.2 and 1.3)
            "num.network.threads": "1",
            # KIP-848 and share-group members heartbeat every second (default 5 s): a test
            # sees a rebalance complete in a few seconds
            "group.consumer.min.heartbeat.interval.ms": "1000",
            "group.consumer.heartbeat.interval.ms": "1000",
            "group.share.min.heartbeat.interval.ms": "1000",
            "group.share.heartbeat.interval.ms": "1000",
            # ACLs (CreateAcls, DescribeAcls, DeleteAcls) need an authorizer. ANONYMOUS (the
            # PLAINTEXT and CONTROLLER listeners) is a super user, and a resource without
            # ACLs stays open to everyone, so only the tests' own ACLs restrict anything.
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS",
            "allow.everyone.if.no.acl.found": "true",
            # client quotas measured over 2 x 1 s (default 11 x 1 s): a test throttles a
            # client with a few kilobytes instead of tens
            "quota.window.num": "2",
            "quota.window.size.seconds": "1",
        }
        cfg.update(extra)
        return cfg

    def java(self, *args: str, heap: str) -> list[str]:
        """The command line running a Java class (``args[0]``, then its arguments) on the
        broker's jars with a heap of ``heap`` (``"256m"``): StorageTool, the broker itself,
        Kafka's own tools (``kafka.admin.ConfigCommand``)."""
        return ["java", f"-Xmx{heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                "-Djava.awt.headless=true",
                f"-Dlog4j2.configurationFile={self.work_dir / 'log4j2.xml'}",
                f"-Djava.security.properties={self.work_dir / 'java.security'}",
                "-cp", str(self.lib_dir / "*"), *args]

    def start(self, timeout: float = 90.0) -> "KafkaBroker":
        """Write the configuration, format the storage, start the broker and wait (at most
        ``timeout`` seconds) until it answers Metadata on the PLAINTEXT port.

        Calls ``pytest.skip`` when Java or the jars are missing; raises
        :class:`KafkaBrokerError` (with the server log's tail) when the broker fails.
        """
        deadline = time.monotonic() + timeout
        self.launch()
        self.wait_ready(deadline)
        return self

    def launch(self, *, format_storage: bool = True) -> None:
        """Write the configuration, format the storage (unless ``format_storage`` is false:
        a restart on the same data) and start the JVM, without waiting. Calls
        ``pytest.skip`` when Java or the jars are missing; raises :class:`KafkaBrokerError`
        when formatting fails."""
        if format_storage:
            self.format()
        self.spawn()

    def format(self) -> None:
        """Write the configuration and format the storage (``StorageTool format``). Calls
        ``pytest.skip`` when Java or the jars are missing; raises :class:`KafkaBrokerError`
        when it fails. Safe in any thread."""
        reason = missing_prerequisite(self.lib_dir)
        if reason is not None:
            import pytest

            pytest.skip(reason)
        props = self._write_config()
        fmt = subprocess.run(
            self.java("kafka.tools.StorageTool", "format", "-t", self.cluster_id,
                      "-c", str(props),
                      *(["--standalone"] if self.voters is None else []),
                      "--feature", "share.version=1",
                      *[arg for mech, (user, password) in SASL_USERS.items()
                        if mech.startswith("SCRAM")
                        for arg in ("--add-scram", f"{mech}=[name={user},password={password}]")],
                      heap="256m"),
            capture_output=True, text=True, timeout=60)
        if fmt.returncode != 0:
            raise KafkaBrokerError(f"StorageTool format failed ({fmt.returncode}):\n"
                                   f"{fmt.stdout}{fmt.stderr}")

    def _write_config(self) -> Path:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        props = self.work_dir / "server.properties"
        props.write_text("".join(f"{k}={v}\n" for k, v in self.config.items()))
        (self.work_dir / "log4j2.xml").write_text(_LOG4J2.format(dir=self.work_dir))
        (self.work_dir / "java.security").write_text(_JAVA_SECURITY)
        return props

    def spawn(self) -> None:
        """Start the JVM on the formatted storage, without waiting. Call it from the thread
        that will outlive the broker: Linux kills the broker when the thread that started it
        exits (PR_SET_PDEATHSIG follows the parent thread)."""
        props = self._write_config()
        self._stdout = open(self.work_dir / "stdout.log", "ab")
        self.proc = subprocess.Popen(self.java("kafka.Kafka", str(props), heap=self.heap),
                                     stdin=subprocess.DEVNULL, stdout=self._stdout,
                                     stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)

    def wait_ready(self, deadline: float) -> None:
        """Wait until the broker answers Metadata with a broker in it (monotonic
        ``deadline``); stops it and raises :class:`KafkaBrokerError` when it does not."""
        try:
            self._wait_ready(deadline)
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self, deadline: float) -> None:
        from confluent_kafka.admin import AdminClient

        admin = None
        last: object = None
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise KafkaBrokerError(f"the broker exited with {self.proc.returncode}:\n"
                                       f"{self.log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    pass
            except OSError as exc:
                last = exc
                time.sleep(0.2)
                continue
            if admin is None:
                admin = AdminClient({"bootstrap.servers": self.bootstrap_servers,
                                     "client.id": "kafkasniff-ready-check"})
            try:
                md = admin.list_topics(timeout=5)
                if md.brokers:
                    del admin   # closes its connections
                    return
                last = "no broker in Metadata"
            except Exception as exc:  # KafkaException until the broker is up
                last = exc
            time.sleep(0.2)
        raise KafkaBrokerError(f"the broker did not answer within the timeout (last: {last}):\n"
                               f"{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the server log and of the JVM's stdout/stderr."""
        out = []
        for p in (self.server_log, self.work_dir / "stdout.log"):
            if p.exists():
                text = p.read_text(errors="replace").splitlines()[-lines:]
                out.append(f"--- {p}\n" + "\n".join(text))
        return "\n".join(out)

    def create_topic(self, name: str, partitions: int = 1, timeout: float = 30.0,
                     config: dict[str, str] | None = None) -> None:
        """Create ``name`` (replication factor 1) and wait until its partitions have a
        leader in Metadata."""
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers,
                             "client.id": "kafkasniff-test-admin"})
        fut = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})],
                                  operation_timeout=timeout)[name]
        fut.result(timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            t = admin.list_topics(name, timeout=5).topics.get(name)
            if t is not None and t.error is None and len(t.partitions) == partitions and \
                    all(p.leader >= 0 for p in t.partitions.values()):
                return
            time.sleep(0.1)
        raise KafkaBrokerError(f"topic {name} has no leaders after {timeout} s")

    def request_log_size(self) -> int:
        """Bytes in the request log now (an offset for :meth:`requests`)."""
        return self.request_log.stat().st_size if self.request_log.exists() else 0

    def requests(self, offset: int = 0) -> list[LoggedRequest]:
        """The requests the broker logged (both listeners) from byte ``offset`` of the
        request log on (see :meth:`request_log_size`)."""
        if not self.request_log.exists():
            return []
        return parse_request_log(self.request_log, offset)

    def stop(self, timeout: float = 30.0, *, kill: bool = False) -> None:
        """SIGTERM the broker (a controlled shutdown: it hands its leaderships over first),
        wait up to ``timeout`` seconds, then SIGKILL; ``kill``: SIGKILL at once (a crash).
        Idempotent."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if getattr(self, "_stdout", None) is not None:
            self._stdout.close()
            self._stdout = None

    def __enter__(self) -> "KafkaBroker":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class KafkaCluster:
    """``size`` Kafka nodes (each a combined broker+controller, node ids 1..size) forming one
    KRaft cluster on 127.0.0.1 with a static controller quorum of all of them; internal
    topics replicated to every node (``min.insync.replicas`` 2 where there are 3).

    Args:
        lib_dir: the jars. work_dir: an empty directory (one ``node-<id>`` per node).
        size: nodes. heap: each JVM's ``-Xmx``.

    Attributes:
        nodes: node id -> :class:`KafkaBroker`.
    """

    def __init__(self, lib_dir: Path, work_dir: Path, size: int = 3, *,
                 heap: str = "384m") -> None:
        cluster_id = random_cluster_id()
        controller_ports = {n: free_port() for n in range(1, size + 1)}
        rf = str(size)
        isr = str(min(2, size))
        extra = {"offsets.topic.replication.factor": rf,
                 "transaction.state.log.replication.factor": rf,
                 "transaction.state.log.min.isr": isr,
                 "share.coordinator.state.topic.replication.factor": rf,
                 "share.coordinator.state.topic.min.isr": isr,
                 "default.replication.factor": rf, "min.insync.replicas": isr,
                 # a stopped node's partitions move quickly
                 "broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500"}
        self.nodes = {n: KafkaBroker(lib_dir, Path(work_dir) / f"node-{n}", heap=heap,
                                     extra_config=extra, node_id=n, voters=controller_ports,
                                     cluster_id=cluster_id, controller_port=port)
                      for n, port in controller_ports.items()}

    def _admin(self):
        """One confluent-kafka AdminClient for the cluster's own checks, kept: a client
        dropped while a request is in flight leaves the answer written into a closed socket
        in the capture."""
        if getattr(self, "_admin_client", None) is None:
            from confluent_kafka.admin import AdminClient

            self._admin_client = AdminClient({"bootstrap.servers": self.bootstrap_servers,
                                              "client.id": "kafkasniff-test-admin"})
        return self._admin_client

    @property
    def bootstrap_servers(self) -> str:
        """Every node's PLAINTEXT listener, comma-separated."""
        return ",".join(b.bootstrap_servers for b in self.nodes.values())

    @property
    def ports(self) -> list[int]:
        """Every node's PLAINTEXT port."""
        return [b.port for b in self.nodes.values()]

    def start(self, timeout: float = 120.0) -> "KafkaCluster":
        """Format and start every node (formatting in parallel), then wait until each
        answers Metadata naming all of them. Skips like :meth:`KafkaBroker.start`."""
        import concurrent.futures

        deadline = time.monotonic() + timeout
        with concurrent.futures.ThreadPoolExecutor(len(self.nodes)) as pool:
            list(pool.map(lambda b: b.format(), self.nodes.values()))
        try:
            for b in self.nodes.values():
                b.spawn()   # in this thread (see KafkaBroker.spawn)
            for b in self.nodes.values():
                b.wait_ready(deadline)
            self.wait_for_brokers(len(self.nodes), deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def wait_for_brokers(self, count: int, deadline: float) -> None:
        """Wait until Metadata lists ``count`` brokers (monotonic ``deadline``); raises
        :class:`KafkaBrokerError` when it does not in time."""
        while time.monotonic() < deadline:
            try:
                if len(self._admin().list_topics(timeout=5).brokers) >= count:
                    return
            except Exception:   # KafkaException while nodes start
                pass
            time.sleep(0.2)
        raise KafkaBrokerError(f"the cluster did not list {count} brokers in time")

    def leaders(self, topic: str) -> dict[int, int]:
        """Partition -> leader node id of ``topic`` (``-1``: none) from Metadata."""
        t = self._admin().list_topics(topic, timeout=10).topics[topic]
        return {p.id: p.leader for p in t.partitions.values()}

    def elect_preferred_leaders(self, topic: str) -> None:
        """Ask for a preferred leader election of every partition of ``topic`` (Admin
        ElectLeaders through confluent-kafka); errors (not yet in sync ...) are ignored:
        callers check :meth:`leaders`."""
        from confluent_kafka import ElectionType, TopicPartition

        parts = [TopicPartition(topic, p) for p in self.leaders(topic)]
        try:
            self._admin().elect_leaders(ElectionType.PREFERRED, parts).result(30)
        except Exception:   # KafkaException: ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE
            pass

    def create_topic(self, name: str, partitions: int, timeout: float = 30.0) -> None:
        """Create ``name`` replicated to every node; wait until every partition has a
        leader."""
        from confluent_kafka.admin import NewTopic

        self._admin().create_topics([NewTopic(name, partitions, len(self.nodes))],
                            operation_timeout=timeout)[name].result(timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            leaders = self.leaders(name)
            if len(leaders) == partitions and min(leaders.values()) >= 0:
                return
            time.sleep(0.1)
        raise KafkaBrokerError(f"topic {name} has no leaders after {timeout} s")

    def requests(self, offsets: dict[int, int] | None = None) -> list[LoggedRequest]:
        """Every node's logged requests (from ``offsets[node id]`` on), node by node (as
        :meth:`KafkaBroker.requests`)."""
        offsets = offsets or {}
        return [r for n, b in self.nodes.items() for r in b.requests(offsets.get(n, 0))]

    def request_log_size(self) -> dict[int, int]:
        """Node id -> bytes in its request log now (offsets for :meth:`requests`, as
        :meth:`KafkaBroker.request_log_size`)."""
        return {n: b.request_log_size() for n, b in self.nodes.items()}

    def stop(self) -> None:
        """Stop every node (SIGKILL: nothing is kept)."""
        self._admin_client = None
        for b in self.nodes.values():
            b.stop(kill=True)

    def __enter__(self) -> "KafkaCluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
