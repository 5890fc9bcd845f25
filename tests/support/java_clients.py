"""The Java client (Apache Kafka's kafka-clients, the broker's release) as a real peer.

``tests/broker/clients/java/KafkaClients.java`` is one small program with a command per
scenario (``produce``, ``consume``, ``share``, ``admin``; see its header). :class:`JavaClients`
compiles it with ``javac`` against the broker's jars (``tests/broker/lib``, which hold
kafka-clients 4.3.1) and runs it; each run gives two kinds of client-side truth:

* what the program printed, one JSON object per line (records produced with their offsets,
  records consumed, the error name of each admin operation);
* the client's own request log: ``org.apache.kafka.clients.NetworkClient`` at DEBUG logs every
  request it sends as ``Sending <API> request with header RequestHeader(apiKey=<API>,
  apiVersion=<v>, clientId=<id>, correlationId=<n>, headerVersion=<h>)``
  (:func:`parse_client_log` reads it into
  :class:`~tests.support.client_truth.ClientRequest`).

Usage::

    java = JavaClients(LIB_DIR, tmp_dir).compile()        # pytest.skip without javac/jars
    run = java.run("produce", bootstrap, topic, tag, "10", "zstd:all:plain")
    run.lines       # [{"event": "produced", ...}, ...]
    run.requests    # [ClientRequest(client_id=..., correlation_id=..., ...), ...]
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
from pathlib import Path

from tests.support.client_truth import ClientRequest, ClientRun
from tests.support.kafka_broker import LIB_DIR, missing_prerequisite

__all__ = ["JAVA_SOURCE", "JavaClients", "api_key_of", "parse_client_log"]

#: the program's source
JAVA_SOURCE = Path(__file__).resolve().parents[1] / "broker" / "clients" / "java" / \
    "KafkaClients.java"

_LOG4J2 = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="warn">
  <Appenders>
    <File name="client" fileName="${sys:kafkasniff.client.log}">
      <PatternLayout pattern="[%d] %p [%t] %m (%c)%n"/>
    </File>
  </Appenders>
  <Loggers>
    <Root level="WARN"><AppenderRef ref="client"/></Root>
    <Logger name="org.apache.kafka.clients.NetworkClient" level="DEBUG" additivity="false">
      <AppenderRef ref="client"/>
    </Logger>
  </Loggers>
</Configuration>
"""


_SENDING = re.compile(
    r"Sending (?P<name>[A-Z_]+) request with header RequestHeader\(apiKey=(?P=name), "
    r"apiVersion=(?P<version>\d+), clientId=(?P<client_id>.*?), "
    r"correlationId=(?P<correlation_id>-?\d+), headerVersion=\d+\)")


def api_key_of(client_name: str) -> int:
    """The api_key of a Java ``ApiKeys`` name (``"API_VERSIONS"`` -> 18): kafkasniff's
    generated constants (:mod:`kafkasniff.protocol.apis`) carry the same names. Raises
    ``KeyError`` for a name it does not know."""
    from kafkasniff.protocol import apis

    key = getattr(apis, client_name, None)
    if type(key) is not int:
        raise KeyError(client_name)
    return key


def parse_client_log(path: Path) -> list[ClientRequest]:
    """Every request a Java client's NetworkClient log (:data:`_LOG4J2`) says it sent, in
    order."""
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = _SENDING.search(line)
            if m is not None:
                out.append(ClientRequest(api_key_of(m["name"]), int(m["version"]),
                                         int(m["correlation_id"]), m["client_id"],
                                         api_name=m["name"]))
    return out


class JavaClients:
    """Compiles and runs ``KafkaClients.java``.

    Args:
        lib_dir: the broker's jars (kafka-clients and its dependencies among them).
        work_dir: where the classes, the log4j2 configuration and the client logs go.
    """

    def __init__(self, lib_dir: Path = LIB_DIR, work_dir: Path | None = None) -> None:
        self.lib_dir = Path(lib_dir)
        self.work_dir = Path(work_dir) if work_dir is not None else Path(".")
        self.classes = self.work_dir / "classes"
        self._numbers = itertools.count(1)     # thread-safe: scenarios run clients at once

    def compile(self) -> "JavaClients":
        """javac the program (a few seconds). Calls ``pytest.skip`` when javac or the jars are
        missing; raises ``RuntimeError`` with javac's output when it fails."""
        reason = missing_prerequisite(self.lib_dir) or \
            (None if shutil.which("javac") else "javac is not installed (a JDK 17+: .ci/setup)")
        if reason is not None:
            import pytest

            pytest.skip(reason)
        self.classes.mkdir(parents=True, exist_ok=True)
        (self.work_dir / "log4j2.xml").write_text(_LOG4J2)
        res = subprocess.run(["javac", "-nowarn", "-d", str(self.classes), "-cp",
                              str(self.lib_dir / "*"), str(JAVA_SOURCE)],
                             capture_output=True, text=True, timeout=120)
        if res.returncode != 0:
            raise RuntimeError(f"javac failed:\n{res.stdout}{res.stderr}")
        return self

    def run(self, *args: str, timeout: float = 120.0) -> ClientRun:
        """Run ``KafkaClients <args>``; raises ``RuntimeError`` (with its stderr and log tail)
        when it exits non-zero."""
        log = self.work_dir / f"client-{next(self._numbers)}-{args[0]}.log"
        cmd = ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               "-Djava.awt.headless=true",
               f"-Dlog4j2.configurationFile={self.work_dir / 'log4j2.xml'}",
               f"-Dkafkasniff.client.log={log}",
               "-cp", f"{self.classes}:{self.lib_dir / '*'}", "KafkaClients", *args]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if res.returncode != 0:
            tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
            raise RuntimeError(f"KafkaClients {' '.join(args)} exited {res.returncode}:\n"
                               f"{res.stderr[-3000:]}\n--- {log}\n{tail}")
        lines = [json.loads(x) for x in res.stdout.splitlines() if x.startswith("{")]
        return ClientRun(lines, parse_client_log(log) if log.exists() else [], log)
