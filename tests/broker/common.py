"""What the real-broker scenarios share: capture a scenario with tcpdump, decode it, take the
broker's request log for the captured connections, and compare the two request by request."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner

from kafkasniff.cli import main
from kafkasniff.model import ConnectionSummary, DecodeIssue, Exchange, ExchangeStatus
from kafkasniff.pipeline import Pipeline, PipelineOptions, analyze
from tests.support.kafka_broker import KafkaBroker, LoggedRequest

CAPTURES = Path(__file__).resolve().parents[2] / "captures"


def tcpdump_class():
    """The capture harness's tcpdump wrapper (captures/harness/tcpdump.py: waits until tcpdump
    listens, checks that no packet was dropped or lost on stop)."""
    added = str(CAPTURES) not in sys.path
    if added:
        sys.path.insert(0, str(CAPTURES))
    try:
        from harness.tcpdump import Tcpdump
    finally:
        if added and str(CAPTURES) in sys.path:
            sys.path.remove(str(CAPTURES))
    return Tcpdump


@dataclass
class BrokerCapture:
    """A scenario captured on one broker port and decoded.

    Attributes:
        pcap: the capture file.
        exchanges: kafkasniff's exchanges, in output order.
        logged: the broker's request log lines of the connections whose handshake the
            capture holds (forwarded Envelope requests left out).
        issues: every issue of the decode: the exchanges' and the standalone ones.
    """

    pcap: Path
    exchanges: list[Exchange]
    logged: list[LoggedRequest]
    issues: list[DecodeIssue]


def capture_scenario(broker: KafkaBroker, port: int, pcap: Path, scenario: Callable[[], object],
                     *, with_records: bool = False) -> tuple[BrokerCapture, object]:
    """Run ``scenario()`` while tcpdump captures ``port`` into ``pcap``, then decode the
    capture. Returns the :class:`BrokerCapture` and what ``scenario`` returned; re-raises
    what it raised (tcpdump killed)."""
    td = tcpdump_class()(pcap, [port])
    offset = broker.request_log_size()
    td.start()
    try:
        result = scenario()
    except BaseException:
        td.kill()
        raise
    td.stop()
    time.sleep(0.3)   # the broker logs a request once its response is sent
    exchanges, issues, summaries = [], [], {}
    pipe = Pipeline(PipelineOptions(ports=frozenset({port}), with_records=with_records,
                                    meta_records=True))
    for rec in analyze([pcap], pipeline=pipe):
        if type(rec) is Exchange:
            exchanges.append(rec)
            issues.extend(rec.issues)
        elif type(rec) is DecodeIssue:
            issues.append(rec)
        elif type(rec) is ConnectionSummary:
            summaries[rec.client] = rec
    seen = {client_port(c) for c, s in summaries.items() if s.handshake_seen}
    logged = [r for r in broker.requests(offset)
              if r.local_port == port and not r.forwarded and r.client_port in seen]
    return BrokerCapture(pcap, exchanges, logged, issues), result


def client_port(endpoint: str) -> int:
    """The port of an ``"ip:port"`` endpoint."""
    return int(endpoint.rsplit(":", 1)[1])


def unpaired(cap: BrokerCapture, status: Callable[[Exchange], str] = lambda ex:
             ExchangeStatus.PAIRED) -> list[tuple]:
    """The logged requests kafkasniff did not find with the broker's api_key, api_version,
    client_id and the expected ``status(exchange)``: ``(client port, correlation_id, got,
    want)`` each (empty when they all agree)."""
    by_key = {(client_port(ex.client), ex.correlation_id): ex for ex in cap.exchanges}
    problems = []
    for r in cap.logged:
        ex = by_key.get((r.client_port, r.correlation_id))
        got = None if ex is None else (ex.api_key, ex.api_version, ex.client_id, ex.status)
        want = (r.api_key, r.api_version, r.client_id,
                None if ex is None else status(ex))
        if got != want:
            problems.append((r.client_port, r.correlation_id, got, want))
    return problems


def every_output(pcap: Path, tmp_path: Path) -> dict[str, str]:
    """What a user can get out of ``pcap``, as text: each output of
    tests/captures/test_secrets.py's ``TEXT_OUTPUTS`` (read, read --json --records, stats ...)
    and ``export --records`` as Parquet (every value) and JSON lines; keyed by the command."""
    from tests.captures.test_secrets import TEXT_OUTPUTS, _parquet_text

    runner = CliRunner()
    texts = {}
    for name, args in TEXT_OUTPUTS.items():
        res = runner.invoke(main, args + [str(pcap)], catch_exceptions=False)
        assert res.exit_code == 0, res.output
        texts[name] = res.output
    for fmt in ("parquet", "jsonl"):
        out = tmp_path / fmt
        res = runner.invoke(main, ["export", "-q", "--records", "--format", fmt, "-o", str(out),
                                   str(pcap)], catch_exceptions=False)
        assert res.exit_code == 0, res.output
        texts[f"export {fmt}"] = _parquet_text(out) if fmt == "parquet" else "\n".join(
            f.read_text() for f in sorted(out.rglob("*.jsonl")))
    return texts
