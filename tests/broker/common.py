"""What the real-broker scenarios share: capture a scenario with tcpdump, decode it, take the
broker's request log for the captured connections, and compare the two request by request."""

from __future__ import annotations

import base64
import dataclasses
import re
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner

from kafkasniff.cli import main
from kafkasniff.model import ConnectionSummary, DecodeIssue, Exchange, ExchangeStatus
from kafkasniff.pipeline import Pipeline, PipelineOptions, analyze
from tests.support.kafka_broker import KafkaBroker, KafkaCluster, LoggedRequest

CAPTURES = Path(__file__).resolve().parents[2] / "captures"
#: packets tcpdump may see but not write while it stops (see capture_scenario)
LATE_PACKETS = 32


def from_harness(module: str, name: str):
    """``name`` of the capture harness's ``harness.<module>`` (captures/harness/, imported
    with captures/ on the path for the import only)."""
    import importlib

    added = str(CAPTURES) not in sys.path
    if added:
        sys.path.insert(0, str(CAPTURES))
    try:
        return getattr(importlib.import_module(f"harness.{module}"), name)
    finally:
        if added and str(CAPTURES) in sys.path:
            sys.path.remove(str(CAPTURES))


def tcpdump_class():
    """The capture harness's tcpdump wrapper (captures/harness/tcpdump.py: waits until tcpdump
    listens, checks that no packet was dropped or lost on stop)."""
    return from_harness("tcpdump", "Tcpdump")


@dataclass
class BrokerCapture:
    """A scenario captured on one broker port and decoded.

    Attributes:
        pcap: the capture file.
        exchanges: kafkasniff's exchanges, in output order.
        logged: the broker's request log lines of the connections whose handshake the
            capture holds (forwarded Envelope requests left out).
        issues: every issue of the decode: the exchanges' and the standalone ones.
        connections: client endpoint -> its :class:`ConnectionSummary`.
    """

    pcap: Path
    exchanges: list[Exchange]
    logged: list[LoggedRequest]
    issues: list[DecodeIssue]
    connections: dict[str, ConnectionSummary]


#: seconds between the end of a scenario and the time after which logged requests are left out
SETTLE_S = 0.3


def capture_scenario(broker: KafkaBroker | KafkaCluster, port: int | list[int], pcap: Path,
                     scenario: Callable[[], object], *,
                     with_records: bool = False) -> tuple[BrokerCapture, object]:
    """Run ``scenario()`` while tcpdump captures ``port`` (one or a list: a cluster's
    nodes) into ``pcap``, then decode the capture. Returns the :class:`BrokerCapture` and
    what ``scenario`` returned; re-raises what it raised (tcpdump killed)."""
    ports = [port] if isinstance(port, int) else list(port)
    # the brokers' own connections (replica fetchers, coordinators) keep sending while
    # tcpdump stops; a packet lost inside the capture shows as a gap (unexpected_issues)
    td = tcpdump_class()(pcap, ports, late_packets=LATE_PACKETS)
    offset = broker.request_log_size()
    td.start()
    try:
        result = scenario()
    except BaseException:
        td.kill()
        raise
    # the broker logs a request just after sending its response, so the client can have
    # the answer to its last request before that line's time: wait for it before the stop
    # time that leaves out later lines (on a slow machine a last Produce was left out)
    time.sleep(SETTLE_S)
    stopped = time.time()
    td.stop()
    time.sleep(0.3)   # the broker logs a request once its response is sent
    decoded, _ = decode(pcap, PipelineOptions(ports=frozenset(ports),
                                              with_records=with_records))
    seen = {client_port(c) for c, s in decoded.connections.items() if s.handshake_seen}
    # a request answered after the capture stopped (a replica's long-polling Fetch) is
    # not in the capture: lines logged after the stop are left out
    logged = [r for r in broker.requests(offset)
              if r.local_port in ports and not r.forwarded and r.client_port in seen
              and (r.logged_at is None or r.logged_at < stopped)]
    decoded.logged = logged
    return decoded, result


def decode(pcap: Path, options: PipelineOptions,
           logged: list[LoggedRequest] = ()) -> tuple[BrokerCapture, Pipeline]:
    """Decode ``pcap`` with ``options`` (and ``meta_records``, for the connections) into a
    :class:`BrokerCapture` holding ``logged``, and the pipeline (for its statistics)."""
    cap = BrokerCapture(pcap, [], list(logged), [], {})
    pipe = Pipeline(dataclasses.replace(options, meta_records=True))
    for rec in analyze([pcap], pipeline=pipe):
        if type(rec) is Exchange:
            cap.exchanges.append(rec)
            cap.issues.extend(rec.issues)
        elif type(rec) is DecodeIssue:
            cap.issues.append(rec)
        elif type(rec) is ConnectionSummary:
            cap.connections[rec.client] = rec
    return cap, pipe


def logged_from_truth(rows: list[dict]) -> list[LoggedRequest]:
    """The ``broker_requests`` of a committed capture's truth file
    (captures/make_broker_captures.py) as :class:`LoggedRequest` (``fields`` holds the
    request and response bodies and ``sendTimeMs``)."""
    return [LoggedRequest(
        api_key=r["api_key"], api_version=r["api_version"], correlation_id=r["correlation_id"],
        client_id=r["client_id"], listener=None, local_port=r["broker_port"],
        client_host="127.0.0.1", client_port=r["client_port"],
        total_time_ms=r["total_time_ms"], throttle_time_ms=r["throttle_time_ms"],
        forwarded=False, logged_at=r["logged_at"],
        fields={k: r[k] for k in ("request", "response") if r.get(k) is not None}
        | {"sendTimeMs": r["send_time_ms"]})
        for r in rows]


def client_port(endpoint: str) -> int:
    """The port of an ``"ip:port"`` endpoint."""
    return int(endpoint.rsplit(":", 1)[1])


def _ids(ex: Exchange) -> tuple[int, int, int]:
    """(broker port, client port, correlation_id): an exchange's key in the request log."""
    return client_port(ex.broker), client_port(ex.client), ex.correlation_id


def _distance(ex: Exchange, r) -> float:
    """Seconds between exchange ``ex``'s request and when the broker read logged request
    ``r`` (its log time minus its total time); 0 when the line has no time. A connection
    that reuses a client port starts its correlation ids at 0 again (a replica fetcher
    reconnecting after a failover), so (ports, correlation_id) alone may name the same
    request of two connections: the nearest one is meant."""
    if r.logged_at is None:
        return 0.0
    return abs(ex.ts_ns / 1e9 - (r.logged_at - r.total_time_ms / 1000))


def unpaired(cap: BrokerCapture, status: Callable[[Exchange], str] = lambda ex:
             ExchangeStatus.PAIRED) -> list[tuple]:
    """The logged requests kafkasniff did not find with the broker's api_key, api_version,
    client_id and the expected ``status(exchange)``: ``(client port, correlation_id, got,
    want)`` each (empty when they all agree)."""
    # a client port can be used again by a later connection of the same run (ephemeral
    # ports are reused): a key may name several exchanges, the logged one is among them
    by_key: dict[tuple, list[Exchange]] = defaultdict(list)
    for ex in cap.exchanges:
        by_key[_ids(ex)].append(ex)
    problems = []
    for r in cap.logged:
        found = by_key.get((r.local_port, r.client_port, r.correlation_id), [])
        same = [e for e in found if (e.api_key, e.api_version, e.client_id) ==
                (r.api_key, r.api_version, r.client_id)]
        ex = min(same, key=lambda e: _distance(e, r)) if same else \
            (found[0] if found else None)
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


# --------------------------------------------------------------------------- client truth
# The checks every real client program's scenarios share (tests/support/client_truth.py:
# the JSON lines a program printed and the requests it says it sent).


def acks0(ex: Exchange) -> bool:
    """An acks=0 Produce (Kafka sends no response)."""
    return ex.api_name == "Produce" and ex.request is not None and \
        ex.request.body.get("acks") == 0


def expected_status(ex: Exchange) -> str:
    """The status a real broker's exchange should have: paired, or no response expected."""
    return ExchangeStatus.NO_RESPONSE_EXPECTED if acks0(ex) else ExchangeStatus.PAIRED


def status_allowing_resets(cap) -> Callable[[Exchange], str]:
    """:func:`expected_status`, but unanswered or cut short for a request at the end of a
    connection that was reset or closed (:func:`cut_by_close`): the broker logs a request as
    completed once it wrote the answer, which a reset socket drops in part or whole (a
    crashed node, a client giving up)."""
    cut = cut_by_close(cap)

    def status(ex: Exchange) -> str:
        if not acks0(ex) and (ex.client, ex.correlation_id) in cut and \
                ex.status in (ExchangeStatus.UNANSWERED, ExchangeStatus.PAIRED):
            return ex.status
        return expected_status(ex)
    return status


def unfound_client_requests(cap: BrokerCapture, requests) -> list[tuple]:
    """The requests a client says it sent (:class:`~tests.support.client_truth.ClientRequest`)
    that the capture does not hold exactly once with the same api_key, api_version and
    expected status (:func:`status_allowing_resets`: a consumer that closes with a
    long-poll outstanding leaves it unanswered): by (client port, correlation_id) when the
    client names the port, else by (client_id, correlation_id). A port that two connections
    of the capture used one after the other (the kernel hands a freed ephemeral port out
    again) is told apart by the client_id. ``(request, what was found)`` each."""
    status = status_allowing_resets(cap)
    by_port, by_id = defaultdict(list), defaultdict(list)
    for ex in cap.exchanges:
        by_port[(client_port(ex.client), ex.correlation_id)].append(ex)
        by_id[(ex.client_id, ex.correlation_id)].append(ex)
    problems = []
    for r in requests:
        found = by_port[(r.client_port, r.correlation_id)] if r.client_port is not None \
            else by_id[(r.client_id, r.correlation_id)]
        if len({ex.conn_id for ex in found}) > 1:
            found = [ex for ex in found if ex.client_id == r.client_id]
        got = [(ex.api_key, ex.api_version, ex.client_id, ex.status) for ex in found]
        want = [(r.api_key, r.api_version, r.client_id,
                 status(found[0]) if found else ExchangeStatus.PAIRED)]
        if got != want:
            problems.append((r, got))
    return problems


def record_batches(exchanges, client_id: str, api: str = "Produce"):
    """``(exchange, LocatedRecords, Batch)`` of every decoded batch in ``api`` exchanges of
    ``client_id``."""
    for ex in exchanges:
        if ex.api_name == api and ex.client_id == client_id:
            for loc in ex.record_fields:
                if loc.records.decoded is not None:
                    for b in loc.records.decoded.batches:
                        yield ex, loc, b


def produced_mismatches(cap: BrokerCapture, produced: list[dict]) -> dict[str, tuple]:
    """Per producer client id, what was decoded when it differs from what the producer
    printed (``produced`` lines: value -> partition, key, offset, codec): each record's
    value is in a Produce request batch of that client, at that partition, with that key,
    and the response's base_offset plus the record's offset delta is the producer's offset
    (acks=0: no offset). A batch whose partition answered an error, or that was never
    answered, is left out: the producer retries it."""
    truth = defaultdict(dict)
    for line in produced:
        truth[line["client_id"]][line["value"]] = line
    problems = {}
    for cid, lines in truth.items():
        got, codecs = {}, set()
        for ex, loc, b in record_batches(cap.exchanges, cid):
            base = error = None
            if ex.response is not None:
                for t in ex.response.body["responses"]:
                    for p in t["partition_responses"]:
                        if p["index"] == loc.partition:
                            base, error = p["base_offset"], p["error_code"]
            if error or (ex.status != ExchangeStatus.PAIRED and not acks0(ex)):
                continue    # not written: the producer sends the batch again
            codecs.add(b.codec)
            for r in b.records:
                got[r.value.decode()] = (loc.partition, r.key.decode(),
                                         None if base is None else base + r.offset - b.base_offset)
        want = {v: (t["partition"], t["key"], t["offset"]) for v, t in lines.items()}
        want_codecs = {t["codec"] for t in lines.values()}
        if got != want or codecs != want_codecs:
            problems[cid] = (got, codecs, want, want_codecs)
    return problems


def consumed_missing(cap: BrokerCapture, consumed: list[dict], api: str = "Fetch") -> set:
    """The records a consumer printed (``consumed`` lines of one client) that no decoded
    ``api`` response to that client holds at the same partition and offset with the same
    key and value."""
    decoded = set()
    for cid in {x["client_id"] for x in consumed}:
        for _, loc, b in record_batches(cap.exchanges, cid, api):
            if not b.control and b.records:
                decoded |= {(cid, loc.partition, r.offset, r.key.decode(), r.value.decode())
                            for r in b.records}
    want = {(x["client_id"], x["partition"], x["offset"], x["key"], x["value"])
            for x in consumed}
    return want - decoded


def committed_missing(cap: BrokerCapture, committed: list[dict]) -> set:
    """The offsets a consumer says it committed (``committed`` lines) that no error-free
    OffsetCommit request of that client carries."""
    got = set()
    for ex in cap.exchanges:
        if ex.api_name == "OffsetCommit" and not ex.errors:
            for t in ex.request.body["topics"]:
                for p in t["partitions"]:
                    got.add((ex.client_id, p["partition_index"], p["committed_offset"]))
    return {(x["client_id"], x["partition"], x["offset"]) for x in committed} - got


def admin_mismatches(cap: BrokerCapture, client_id: str, ops: list[dict],
                     apis: dict[str, tuple[str, ...]]) -> list[tuple]:
    """Admin operations (``admin`` lines, in the order run: ``op`` and the Kafka error the
    client saw, as ``error`` name or ``error_code``) whose exchanges are missing, unpaired
    or have other errors: ``apis[op]`` names the APIs the operation sends (empty: not
    checked), each matched with the next unused exchange of that API from ``client_id``.
    ``(op line, what was found)`` each."""
    from kafkasniff.protocol.schema import load_definitions

    names = load_definitions()
    queue = defaultdict(list)
    for ex in sorted((ex for ex in cap.exchanges if ex.client_id == client_id),
                     key=lambda ex: ex.correlation_id):
        queue[ex.api_name].append(ex)
    problems = []
    for op in ops:
        code = op.get("error_code")
        want = op.get("error") if code is None else (names.error_name(code) if code else None)
        for api in apis[op["op"]]:
            if not queue[api]:
                problems.append((op, None))
                continue
            ex = queue[api].pop(0)
            got = (ex.status, set(ex.errors))
            if got != (ExchangeStatus.PAIRED, {want} if want else set()):
                problems.append((op, got))
    return problems


# --------------------------------------------------------------------------- bodies
# The broker's request log holds the request it parsed and the response it sent: every
# decoded body is compared with them, field by field.


def snake(name: str) -> str:
    """``partitionIndex`` -> ``partition_index`` (broker JSON names -> kafkasniff's)."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def compare_body(path: str, broker, ours, out: list[str]) -> None:
    """Append to ``out`` where kafkasniff's decoded body ``ours`` differs from the body the
    broker logged (``RequestConvertToJson``: camelCase names, bytes in base64, records as
    ``recordsSizeInBytes``). Fields the broker leaves out are not compared."""
    if isinstance(broker, dict):
        if not isinstance(ours, dict):
            out.append(f"{path}: broker {broker!r}, decoded {ours!r}")
            return
        for key, value in broker.items():
            if key == "recordsSizeInBytes":
                rec = ours.get("records")
                size = -1 if rec is None else rec.size_bytes
                if size != value:
                    out.append(f"{path}.records: broker {value} bytes, decoded {size}")
                continue
            name = snake(key)
            if name not in ours:
                out.append(f"{path}.{name}: missing (broker: {value!r})")
            else:
                compare_body(f"{path}.{name}", value, ours[name], out)
    elif isinstance(broker, list):
        if not isinstance(ours, (list, tuple)) or len(ours) != len(broker):
            out.append(f"{path}: broker {broker!r}, decoded {ours!r}")
            return
        for i, (b, o) in enumerate(zip(broker, ours)):
            compare_body(f"{path}[{i}]", b, o, out)
    elif type(ours).__name__ == "Redacted":
        # a secret kafkasniff withholds: the broker shows a sensitive config as "[hidden]"
        # but logs SCRAM salts and salted passwords in base64 (their size must agree)
        if broker != "[hidden]" and len(base64.b64decode(broker)) != ours.size_bytes:
            out.append(f"{path}: broker {len(base64.b64decode(broker))} bytes, "
                       f"redacted {ours.size_bytes}")
    elif type(ours).__name__ == "RawRecords" and broker == "":
        pass    # ShareFetch: the broker's JSON converter writes no records size, only ""
    elif isinstance(broker, str) and isinstance(ours, (bytes, dict)):
        # a bytes field; kafkasniff decodes the consumer protocol's metadata and assignments
        # (a dict then), else keeps the bytes
        if isinstance(ours, bytes) and base64.b64decode(broker) != ours:
            out.append(f"{path}: broker {broker!r} (base64), decoded {ours!r}")
    elif broker != ours:
        out.append(f"{path}: broker {broker!r}, decoded {ours!r}")


def body_differences(cap: BrokerCapture) -> tuple[list[str], int]:
    """Where the decoded bodies of ``cap``'s exchanges differ from the broker's logged ones
    (:func:`compare_body`), and how many bodies were compared (a response cut short on the
    wire is not compared)."""
    log: dict[tuple, list] = defaultdict(list)
    for r in cap.logged:
        log[(r.local_port, r.client_port, r.correlation_id)].append(r)
    diffs: list[str] = []
    compared = 0
    for ex in cap.exchanges:
        candidates = [r for r in log.get(_ids(ex), ()) if r.api_key == ex.api_key]
        if not candidates:
            continue
        r = min(candidates, key=lambda c: _distance(ex, c))    # a reused client port
        tag = f"{ex.client} {ex.api_name} v{ex.api_version} corr {ex.correlation_id}"
        if ex.request is not None and "request" in r.fields:
            compare_body(f"{tag} request", r.fields["request"], ex.request.body, diffs)
            compared += 1
        if ex.response is not None and ex.response.complete and "response" in r.fields:
            compare_body(f"{tag} response", r.fields["response"], ex.response.body, diffs)
            compared += 1
    return diffs, compared


def complete(ex: Exchange) -> bool:
    """The exchange has its request and its whole response."""
    return ex.status == ExchangeStatus.PAIRED and ex.response is not None and \
        ex.response.complete


def cut_by_close(cap) -> set[tuple[str, int]]:
    """(client, correlation_id) of the exchanges at the end of a connection the client closed
    (fin or rst) that have no complete response: the only ones whose response may be cut
    or missing (e.g. a long-polling Fetch answered after the consumer closed, and a Metadata
    request sent behind it that the broker never read); on a connection still open when the
    capture ended, the long-polls still waiting then (:func:`waiting_at_end`). ``cap``:
    anything with ``exchanges`` and ``connections``."""
    by_conn: dict[str, list[Exchange]] = defaultdict(list)
    for ex in cap.exchanges:
        if ex.request is not None:
            by_conn[ex.client].append(ex)
    end = max((s.last_ts_ns for s in cap.connections.values()), default=0)
    out = set()
    for client, exs in by_conn.items():
        summary = cap.connections.get(client)
        if summary is None or summary.closed not in ("fin", "rst", "end_of_capture"):
            continue
        for ex in sorted(exs, key=lambda e: e.ts_ns, reverse=True):
            if complete(ex):
                break
            if summary.closed == "end_of_capture" and not waiting_at_end(ex, end):
                break
            out.add((client, ex.correlation_id))
    return out


def waiting_at_end(ex: Exchange, end_ns: int) -> bool:
    """A Fetch or ShareFetch whose long-poll (``max_wait_ms``) was still running when the
    capture's last packet was taken (a consumer that half-closed its connection with a
    fetch outstanding: the broker answers, or closes, only when the wait is over)."""
    body = ex.request.body if ex.request is not None else None
    if ex.api_name not in ("Fetch", "ShareFetch") or not isinstance(body, dict):
        return False
    wait_ms = body.get("max_wait_ms")
    return isinstance(wait_ms, int) and ex.ts_ns + wait_ms * 1_000_000 > end_ns


def librdkafka_all_topics_metadata(ex: Exchange | None, i: DecodeIssue) -> bool:
    """The issue is librdkafka 2.16's all-topics Metadata request (v9+): a null topics
    array followed by 3 bytes the spec does not have (reported as trailing bytes)."""
    from kafkasniff.issues import IssueKind

    return ex is not None and i.kind == IssueKind.TRAILING_BYTES and \
        ex.api_name == "Metadata" and ex.api_version >= 9 and i.direction == "request" and \
        ex.request is not None and ex.request.body is not None and \
        ex.request.body.get("topics") is None and i.length_bytes == 3


def unexpected_issues(cap: BrokerCapture,
                      allow: Callable[[Exchange | None, DecodeIssue], bool] = lambda ex, i: False
                      ) -> list[tuple[str, str, str]]:
    """``(kind, client, message)`` of every issue but those real peers must give, and those
    ``allow(exchange or None, issue)`` accepts:

    * ``mid_stream_start`` and ``orphan_response`` (the answer to a request sent before the
      capture) on a connection whose handshake the capture lacks: the tests' clients connect
      inside the capture, the brokers' own connections (replica fetchers, the coordinators'
      clients talking to their own broker) stay open between tests;
    * a request still unanswered when the capture stopped on a connection still open (a
      replica's long-polling Fetch);
    * a response cut short or missing at the end of a connection the client closed (the
      broker answers a long-poll into the closed socket, :func:`cut_by_close`);
    * librdkafka's all-topics Metadata (:func:`librdkafka_all_topics_metadata`).
    """
    from kafkasniff.issues import IssueKind

    before = {c for c, s in cap.connections.items() if not s.handshake_seen}
    open_at_end = {c for c, s in cap.connections.items() if s.closed == "end_of_capture"}
    cut = cut_by_close(cap)
    pairs = [(ex, i) for ex in cap.exchanges for i in ex.issues]
    in_exchanges = {id(i) for _, i in pairs}
    pairs += [(None, i) for i in cap.issues if id(i) not in in_exchanges]
    out = []
    for ex, i in pairs:
        if i.kind in (IssueKind.MID_STREAM_START, IssueKind.ORPHAN_RESPONSE) and \
                i.client in before:
            continue
        if i.kind == IssueKind.UNANSWERED_REQUEST and i.client in open_at_end:
            continue
        if ((i.kind == IssueKind.FRAME_TRUNCATED and i.direction == "response")
                or i.kind == IssueKind.UNANSWERED_REQUEST) and \
                (ex is None or (ex.client, ex.correlation_id) in cut) and \
                i.client in cap.connections and \
                cap.connections[i.client].closed in ("fin", "rst"):
            continue
        if librdkafka_all_topics_metadata(ex, i) or allow(ex, i):
            continue
        out.append((str(i.kind), i.client, i.message))
    return out


def tshark_kafka_requests(pcap: Path, keylog: Path, ports) -> set[tuple[int, int, int]]:
    """The Kafka requests Wireshark's dissector finds in ``pcap`` when it decrypts TLS on
    the broker ``ports`` with the NSS key log ``keylog``: ``{(client port, api_key,
    correlation_id)}`` (``tshark -o tls.keylog_file:...``)."""
    import subprocess

    args = ["tshark", "-r", str(pcap), "-n", "-o", f"tls.keylog_file:{keylog}"]
    for port in ports:
        args += ["-d", f"tcp.port=={port},tls", "-d", f"tls.port=={port},kafka"]
    args += ["-Y", "kafka and (" + " or ".join(f"tcp.dstport == {p}" for p in ports) + ")",
             "-T", "fields", "-e", "tcp.srcport", "-e", "kafka.request_key",
             "-e", "kafka.correlation_id", "-E", "occurrence=a", "-E", "aggregator=,"]
    out = subprocess.run(args, capture_output=True, text=True, timeout=120, check=True).stdout
    found = set()
    for line in out.splitlines():
        port, keys, corrs = line.split("\t")
        found.update((int(port), int(k), int(c)) for k, c in zip(keys.split(","),
                                                                 corrs.split(",")))
    return found
