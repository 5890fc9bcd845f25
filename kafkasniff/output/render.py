"""Rendering exchanges and issues: JSON-ready dicts (``read --json``) and console lines.

Console lines write every name a peer chose (client_id, topics, record header keys, SASL
mechanism and user, issue messages such as a TLS server name) through
:func:`kafkasniff.text.escape_text`: one exchange, record or issue per line, no control
character reaches the terminal. JSON keeps the exact values (its encoding escapes them).

JSON conventions (documented in ``docs/json.md``): Kafka field names in snake_case, integers
as JSON numbers (signed), uuids as Kafka's text form, ``bytes`` fields as base64 strings,
``records`` fields as ``{"size_bytes": N, "batches": [...]}`` (each batch's header fields, and
its records when decoded with ``--records``), unknown tagged fields as
``{"tag": N, "data": base64}``, secrets as ``{"redacted": what, "size_bytes": N}``, times as
integer ``*_ns`` (ns since epoch, UTC).
"""

from __future__ import annotations

import base64
import datetime as _dt
import json
from collections.abc import Iterator
from functools import lru_cache

from kafkasniff.model import DecodeIssue, Exchange, Message
from kafkasniff.output.values import DEFAULT_MAX_BYTES, describe_bytes
from kafkasniff.protocol.apis import SASL_AUTHENTICATE, SASL_TOKEN
from kafkasniff.protocol.primitives import RawRecords
from kafkasniff.text import escape_text


def jsonable(value, max_value_bytes: int = DEFAULT_MAX_BYTES):
    """Convert a decoded value tree to JSON-ready types (bytes -> base64, records -> batches,
    secrets -> their redaction marker). ``max_value_bytes`` caps shown record keys/values."""
    t = type(value)
    if t is dict:
        return {k: jsonable(v, max_value_bytes) for k, v in value.items()}
    if t is list:
        return [jsonable(v, max_value_bytes) for v in value]
    if t is bytes or t is bytearray or t is memoryview:
        return base64.b64encode(bytes(value)).decode("ascii")
    if t is RawRecords:
        return records_to_dict(value, max_value_bytes)
    to_json = getattr(value, "to_json", None)
    if to_json is not None:
        return to_json()
    return value


def json_default(max_value_bytes: int = DEFAULT_MAX_BYTES, with_records: bool = True):
    """A ``default=`` hook for ``json.dumps`` over raw decoded values: the C encoder walks
    dicts and lists and calls it only for bytes, records and redaction markers (much faster
    than converting the tree with :func:`jsonable` first; same output). Without
    ``with_records``, ``records`` fields keep their batch headers but not their records
    (the exported bodies: records have their own table)."""
    def default(value):
        t = type(value)
        if t is bytes or t is bytearray or t is memoryview:
            return base64.b64encode(bytes(value)).decode("ascii")
        if t is RawRecords:
            return records_to_dict(value, max_value_bytes, with_records)
        to_json = getattr(value, "to_json", None)
        if to_json is not None:
            return to_json()
        raise TypeError(f"{t.__name__} is not JSON serializable")
    return default


def records_to_dict(raw: RawRecords, max_value_bytes: int = DEFAULT_MAX_BYTES,
                    with_records: bool = True) -> dict:
    """A ``records`` field: its size, and its batches once decoded (with their records when
    decoded and ``with_records``)."""
    out: dict = {"size_bytes": raw.size_bytes}
    rs = raw.decoded
    if rs is not None:
        out["batches"] = [batch_to_dict(b, max_value_bytes, with_records) for b in rs.batches]
        if rs.partial_tail_bytes:
            out["partial_tail_bytes"] = rs.partial_tail_bytes
    return out


def batch_to_dict(b, max_value_bytes: int = DEFAULT_MAX_BYTES,
                  with_records: bool = True) -> dict:
    """One record batch (or magic 0/1 message) with its header fields, and its records when
    they were decoded (and ``with_records``)."""
    out = {
        "magic": b.magic, "base_offset": b.base_offset, "last_offset": b.last_offset,
        "record_count": b.record_count, "codec": b.codec, "batch_bytes": b.batch_bytes,
        "compressed_bytes": b.compressed_bytes, "uncompressed_bytes": b.uncompressed_bytes,
        "timestamp_type": b.timestamp_type, "base_timestamp_ms": b.base_timestamp_ms,
        "max_timestamp_ms": b.max_timestamp_ms, "producer_id": b.producer_id,
        "producer_epoch": b.producer_epoch, "base_sequence": b.base_sequence,
        "partition_leader_epoch": b.partition_leader_epoch, "transactional": b.transactional,
        "control": b.control, "delete_horizon": b.delete_horizon, "crc": b.crc,
        "crc_ok": b.crc_ok, "partial": b.partial,
    }
    if with_records and b.records is not None:
        if type(b.records) is tuple:
            out["records"] = [record_to_dict(r, max_value_bytes) for r in b.records]
        else:   # a large batch: its records are rendered as they are written
            out["records"] = StreamedRecords(b.records, max_value_bytes)
    return out


#: records of a large batch rendered and encoded together by :func:`write_json`
STREAM_CHUNK = 256


class StreamedRecords:
    """The records of a large batch (:class:`~kafkasniff.protocol.records.LazyRecords`) in
    a dict to be written as JSON: :func:`write_json` renders and writes them
    ``STREAM_CHUNK`` at a time; any other ``json.dumps`` with :func:`json_default` gets the
    whole list (``to_json``)."""

    __slots__ = ("records", "max_value_bytes")

    def __init__(self, records, max_value_bytes: int) -> None:
        self.records = records
        self.max_value_bytes = max_value_bytes

    def __iter__(self):
        m = self.max_value_bytes
        return (record_to_dict(r, m) for r in self.records)

    def __len__(self) -> int:
        return len(self.records)

    def to_json(self) -> list:
        return list(self)


def streams(ex: Exchange) -> bool:
    """Whether the exchange holds a large batch whose records :func:`write_json` streams."""
    for loc in ex.record_fields:
        rs = loc.records.decoded
        if rs is not None and any(b.records is not None and type(b.records) is not tuple
                                  for b in rs.batches):
            return True
    return False


def write_json(obj: dict, out, default, streamed: bool) -> None:
    """Write ``obj`` as one line of JSON to text stream ``out`` (UTF-8, no ASCII escaping);
    with ``streamed`` (see :func:`streams`) the records of large batches
    (:class:`StreamedRecords`) are rendered and written ``STREAM_CHUNK`` at a time."""
    if not streamed:
        out.write(json.dumps(obj, ensure_ascii=False, default=default))
        return
    parked: list = []

    def park(value):
        if type(value) is StreamedRecords:
            parked.append(value)
            return f"\x00streamed-records-{len(parked) - 1}\x00"
        return default(value)

    text = json.dumps(obj, ensure_ascii=False, default=park)
    write = out.write
    for i, streamed_records in enumerate(parked):
        marker = json.dumps(f"\x00streamed-records-{i}\x00")
        before, _, text = text.partition(marker)
        write(before)
        write("[")
        sep = ""
        # one encoder for the records (json.dumps with keywords builds one per call), given
        # STREAM_CHUNK records at a time: the text of a list is its items joined by ", "
        encode = json.JSONEncoder(ensure_ascii=False, default=default).encode
        chunk: list = []
        for rec in streamed_records:
            chunk.append(rec)
            if len(chunk) == STREAM_CHUNK:
                write(sep)
                write(encode(chunk)[1:-1])
                sep = ", "
                chunk.clear()
        if chunk:
            write(sep)
            write(encode(chunk)[1:-1])
        write("]")
    write(text)


def record_to_dict(r, max_value_bytes: int = DEFAULT_MAX_BYTES) -> dict:
    """One record: offset, timestamp, key/value/headers shown by the display rules."""
    out = {"offset": r.offset, "timestamp_ms": r.timestamp_ms,
           "key": describe_bytes(r.key, max_value_bytes),
           "value": describe_bytes(r.value, max_value_bytes),
           "headers": [{"key": k, "value": describe_bytes(v, max_value_bytes)}
                       for k, v in r.headers]}
    if r.control is not None:
        out["control"] = r.control
    return out


def records_summary_to_dict(summary) -> dict | None:
    """An exchange's :class:`RecordsSummary` as a dict (``None`` when it has no records)."""
    if summary is None:
        return None
    return {k: (list(v) if isinstance(v, tuple) else v)
            for k, v in ((f, getattr(summary, f)) for f in summary.__dataclass_fields__)}


def message_to_dict(msg: Message | None, max_value_bytes: int = DEFAULT_MAX_BYTES,
                    convert: bool = True) -> dict | None:
    """A :class:`Message` as a dict, ``None`` when not captured. With ``convert=False`` the
    header and body stay raw decoded values (serialise them with :func:`json_default`)."""
    if msg is None:
        return None
    out = {
        "frame_bytes": msg.frame_bytes,
        "first_ts_ns": msg.first_ts_ns,
        "last_ts_ns": msg.last_ts_ns,
        "stream_offset": msg.stream_offset,
        "complete": msg.complete,
        "header": jsonable(msg.header) if convert else msg.header,
        "body": (jsonable(msg.body, max_value_bytes) if convert else msg.body)
        if msg.body is not None else None,
    }
    if msg.missing_bytes:
        out["missing_bytes"] = msg.missing_bytes
    if msg.raw_body is not None:
        out["raw_body"] = base64.b64encode(msg.raw_body).decode("ascii")
    return out


def exchange_to_dict(ex: Exchange, max_value_bytes: int = DEFAULT_MAX_BYTES,
                     convert: bool = True) -> dict:
    """An :class:`Exchange` as the JSON object of ``read --json`` (see docs/json.md).
    ``convert=False``: message bodies stay raw values, to be serialised with
    ``json.dumps(..., default=json_default(max_value_bytes))``."""
    d = {
        "type": "exchange",
        "ts_ns": ex.ts_ns,
        "connection": {"id": ex.conn_id, "client": ex.client, "broker": ex.broker},
        "api_key": ex.api_key,
        "api_name": ex.api_name,
        "api_version": ex.api_version,
        "correlation_id": ex.correlation_id,
        "client_id": ex.client_id,
        "status": ex.status,
        "latency_ns": ex.latency_ns,
        "long_poll": ex.long_poll,
        "long_poll_rule": ex.long_poll_rule,
        "request_bytes": ex.request_bytes,
        "response_bytes": ex.response_bytes,
        "errors": list(ex.errors),
        "throttle_time_ms": ex.throttle_time_ms,
        "topics": list(ex.topics),
        "inferred": ex.inferred,
        "assumed_version": ex.assumed_version,
        "records": records_summary_to_dict(ex.records),
        "request": message_to_dict(ex.request, max_value_bytes, convert),
        "response": message_to_dict(ex.response, max_value_bytes, convert),
        "issues": [i.to_dict() for i in ex.issues],
    }
    if ex.tls is not None:
        d["tls"] = ex.tls.to_dict()
    return d


def issue_to_dict(issue: DecodeIssue) -> dict:
    """A standalone issue as a JSON Lines object (``"type": "issue"``)."""
    d = issue.to_dict()
    d["type"] = "issue"
    return d


def format_ts(ts_ns: int) -> str:
    """``2024-05-01T12:00:00.123456Z`` (UTC, microseconds) from integer ns; dashes for 0,
    and ``<ts_ns>ns`` for a time outside years 1-9999 (a crafted record timestamp)."""
    if not ts_ns:
        return "-" * 27
    sec, ns = divmod(ts_ns, 1_000_000_000)
    try:
        day = utc_seconds(sec)
    except (ValueError, OverflowError, OSError):
        return f"{ts_ns}ns"
    return f"{day}.{ns // 1000:06d}Z"


@lru_cache(maxsize=1024)
def utc_seconds(sec: int) -> str:
    """``2024-05-01T12:00:00``: ISO 8601 UTC date and time of a Unix time in whole seconds.
    Cached: the records and exchanges of a capture share few distinct seconds, and
    ``strftime`` was a sixth of ``read --records``. Raises ValueError, OverflowError or
    OSError outside the years 1-9999."""
    return _dt.datetime.fromtimestamp(sec, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


def format_ms(ns: int | None) -> str:
    """Latency in milliseconds with 3 decimals, ``-`` when unknown."""
    return "-" if ns is None else f"{ns / 1e6:.3f}ms"


def exchange_line(ex: Exchange, color: bool = False) -> str:
    """One console line per exchange, like ``read`` prints it (names escaped by
    :func:`~kafkasniff.text.escape_text`, the client_id in single quotes; ``-`` for a null
    client_id)."""
    name = ex.api_name if ex.api_version < 0 else f"{ex.api_name} v{ex.api_version}"
    parts = [format_ts(ex.ts_ns), f"{ex.client} -> {ex.broker}",
             f"'{escape_text(ex.client_id)}'" if ex.client_id is not None else "-", name]
    if ex.correlation_id >= 0 or ex.api_key >= 0 and ex.api_version >= 0:
        parts.append(f"corr={ex.correlation_id}")
    parts.append(format_ms(ex.latency_ns))
    sasl = _sasl_note(ex)
    if sasl:
        parts.append(sasl)
    if ex.status != "paired":
        parts.append(f"[{ex.status}{', inferred' if ex.inferred else ''}]")
    if ex.errors:
        err = "errors=" + ",".join(ex.errors)
        parts.append(f"\x1b[31m{err}\x1b[0m" if color else err)
    if ex.throttle_time_ms:
        thr = f"throttle={ex.throttle_time_ms}ms"
        parts.append(f"\x1b[33m{thr}\x1b[0m" if color else thr)
    parts.append(f"{ex.request_bytes}B/{ex.response_bytes}B")
    if ex.topics:
        shown = list(ex.topics[:5])
        more = f"+{len(ex.topics) - 5}" if len(ex.topics) > 5 else ""
        parts.append("topics=" + escape_text(",".join(shown)) + more)
    if ex.records is not None:
        parts.append(records_summary_line(ex.records))
    if ex.issues:
        parts.append(f"issues={','.join(sorted({str(i.kind) for i in ex.issues}))}")
    return "  ".join(parts)


def write_exchange(ex: Exchange, out, *, as_json: bool, with_records: bool,
                   value_bytes: int = DEFAULT_MAX_BYTES, default=None,
                   color: bool = False) -> None:
    """Write one exchange to the text stream ``out`` as ``kafkasniff read`` prints it: one
    line (with ``with_records``, one more line per record), or one JSON Lines object
    (docs/json.md; records streamed, never held as a list), then a newline. ``value_bytes``:
    bytes of each key/value shown; ``default``: :func:`json_default` (made when None)."""
    if as_json:
        write_json(exchange_to_dict(ex, value_bytes, convert=False), out,
                   default or json_default(value_bytes), with_records and streams(ex))
    else:
        out.write(exchange_line(ex, color))
        if with_records:
            # STREAM_CHUNK lines a write, not two writes a record (about a tenth of
            # read --records on a million records)
            chunk: list[str] = []
            for line in record_lines(ex, value_bytes):
                chunk.append(line)
                if len(chunk) == STREAM_CHUNK:
                    out.write("\n" + "\n".join(chunk))
                    chunk.clear()
            if chunk:
                out.write("\n" + "\n".join(chunk))
    out.write("\n")


def _sasl_note(ex: Exchange) -> str:
    """``sasl=SCRAM-SHA-256 user=bob`` for SaslAuthenticate and raw SASL token exchanges."""
    if ex.api_key not in (SASL_AUTHENTICATE, SASL_TOKEN) or ex.request is None or \
            not ex.request.body:
        return ""
    desc = ex.request.body.get("auth_bytes") if ex.api_key == SASL_AUTHENTICATE else \
        ex.request.body
    if not isinstance(desc, dict):
        return ""
    text = f"sasl={escape_text(str(desc.get('mechanism') or '?'))}"
    if desc.get("username"):
        text += f" user={escape_text(str(desc['username']))}"
    return text


def records_summary_line(r) -> str:
    """``records=5 batches=1 gzip 812B->2100B offsets=0-4 pid=7 txn`` for a console line."""
    text = f"records={r.records} batches={r.batches}"
    codecs = [c for c in r.codecs if c != "none"]
    if codecs:
        text += " " + "/".join(codecs)
        if r.uncompressed_bytes is not None:
            text += f" {r.compressed_bytes}B->{r.uncompressed_bytes}B"
    if r.first_offset is not None and r.first_offset >= 0:
        text += f" offsets={r.first_offset}-{r.last_offset}"
    if r.producer_ids:
        text += " pid=" + ",".join(str(p) for p in r.producer_ids[:3])
    if r.transactional:
        text += " txn"
    if r.control:
        text += " control"
    if r.crc_errors:
        text += f" crc_errors={r.crc_errors}"
    if r.partial:
        text += " partial"
    return text


def record_lines(ex: Exchange, max_value_bytes: int = DEFAULT_MAX_BYTES) -> Iterator[str]:
    """Indented lines, one per record of the exchange (``read --records``), yielded one at
    a time (topic and header keys escaped by :func:`~kafkasniff.text.escape_text`, keys and
    values shown by :func:`~kafkasniff.output.values.short`)."""
    from kafkasniff.output.values import short

    for loc in ex.record_fields:
        rs = loc.records.decoded
        if rs is None:
            continue
        where = escape_text(loc.display_topic)
        for b in rs.batches:
            for r in b.records or ():
                ts = format_ts(r.timestamp_ms * 1_000_000) if r.timestamp_ms and \
                    r.timestamp_ms > 0 else "-"
                line = (f"    {where}[{loc.partition}] @{r.offset} {ts} "
                        f"key={short(describe_bytes(r.key, max_value_bytes))} "
                        f"value={short(describe_bytes(r.value, max_value_bytes))}")
                if r.headers:
                    line += " headers=" + ",".join(
                        f"{escape_text(k)}:{short(describe_bytes(v, max_value_bytes), 24)}"
                        for k, v in r.headers)
                if r.control is not None:
                    line += f" control={r.control.get('type_name')}"
                yield line


def _counts(d: dict) -> str:
    """``"key n, key n"``, most frequent first."""
    return ", ".join(f"{k} {v}" for k, v in sorted(d.items(), key=lambda kv: (-kv[1], kv[0])))


def bytes_part(ledger: dict) -> str:
    """``"N bytes: D decoded, S skipped (reason n, ...)"`` of a
    :attr:`~kafkasniff.pipeline.PipelineStats.bytes` ledger (every captured byte, decoded
    or skipped with its reason)."""
    from kafkasniff.pipeline import DECODED_BYTES

    decoded = sum(ledger.get(k, 0) for k in DECODED_BYTES)
    skipped = {k: v for k, v in ledger.items() if v and k not in DECODED_BYTES}
    total = decoded + sum(skipped.values())
    out = f"{total} bytes: {decoded} decoded, {sum(skipped.values())} skipped"
    return out + (f" ({_counts(skipped)})" if skipped else "")


def summary_parts(exchanges: dict, issues: dict, packets: int, skipped: dict,
                  kafka_connections: int, other_connections: int, shown: int | None = None,
                  packets_label: str = "packets", ledger: dict | None = None) -> list[str]:
    """The parts of the final ``summary:`` line of ``read`` and ``live`` (exchanges by
    status, issues by kind, packets and skipped ones by reason, most frequent first;
    connections; every captured byte, decoded or skipped by reason, when ``ledger`` is
    given), each a short text with its count (``1 exchange``, ``2 exchanges``);
    ``shown`` when filters showed fewer exchanges; ``packets_label`` follows the packet
    count, plural (``"packets decoded"``; ``"packet decoded"`` after a count of one)."""
    from kafkasniff.text import plural

    counts = _counts
    total = sum(exchanges.values())
    parts = [plural(total, "exchange") +
             (f" ({shown} shown)" if shown is not None and shown != total else "") +
             (f" ({counts(exchanges)})" if exchanges else "")]
    parts.append(plural(sum(issues.values()), "issue") +
                 (f" ({counts(issues)})" if issues else ""))
    label = packets_label.replace("packets", "packet", 1) if packets == 1 else packets_label
    parts.append(f"{packets} {label}" + (f" (skipped: {counts(skipped)})" if skipped else ""))
    parts.append(plural(kafka_connections, "Kafka connection"))
    if other_connections:
        parts.append(plural(other_connections, "other TCP connection"))
    if ledger:
        parts.append(bytes_part(ledger))
    return parts


def issue_line(issue: DecodeIssue) -> str:
    """One console line per standalone issue (prefixed with ``!``); the message (which may
    quote names off the wire, such as a TLS server name) escaped by
    :func:`~kafkasniff.text.escape_text`."""
    where = f"{issue.client} -> {issue.broker}" if issue.client else "capture"
    return (f"! {format_ts(issue.ts_ns)}  {where}  {issue.severity} {issue.kind}: "
            f"{escape_text(issue.message)}")
