"""Rows of the export tables, from pipeline values (pure functions, no I/O, no pyarrow).

A row is a dict keyed by column name (see :mod:`kafkasniff.export.schema`); missing keys are
nulls. Timestamps are given as integer microseconds since the epoch (``ts``, ...), next to
their exact ``*_ts_ns``.

A row never depends on another TCP connection, so that a capture split into shards by
connection gives the same rows: topics are the names carried by the exchange itself
(:attr:`Exchange.wire_topics`), topic ids stay ids (the ``topic_ids`` table maps them), and
connections are keyed by :func:`connection_key` (endpoints and first packet time), never by
the pipeline's connection number.

Secrets: decoded bodies already hold redaction markers instead of secrets (unless the
pipeline ran with ``show_secrets``); raw frames are never exported.

Record offsets and timestamps that Kafka computes as base + delta (a record's offset and
timestamp, a batch's last offset) are written as Kafka's Java code computes them, in signed
64-bit arithmetic (``_wrap_int64``): a crafted batch cannot push them out of the ``int64``
columns and fail the whole file.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Iterable, Iterator
from functools import lru_cache

import orjson

from kafkasniff.content.records import RecordsLocator, summarize
from kafkasniff.errors import DefinitionError
from kafkasniff.model import DecodeIssue, Exchange, Message, WireFormat
from kafkasniff.output.render import json_default
from kafkasniff.protocol import legacy07
from kafkasniff.protocol.walk import PlanWalker

_HOUR_NS = 3_600_000_000_000
_I64 = 1 << 63


# ------------------------------------------------------------------------------- basics

@lru_cache(maxsize=4096)
def _date_hour(hour_bucket: int) -> tuple[str, int]:
    d = _dt.datetime.fromtimestamp(hour_bucket * 3600, _dt.timezone.utc)
    return d.strftime("%Y-%m-%d"), d.hour


def time_columns(ts_ns: int) -> dict:
    """``{"ts": us, "ts_ns": ns, "date": "YYYY-MM-DD", "hour": h}`` (UTC) for ``ts_ns``."""
    date, hour = _date_hour(ts_ns // _HOUR_NS)
    return {"ts": ts_ns // 1000, "ts_ns": ts_ns, "date": date, "hour": hour}


def connection_key(client: str, broker: str, first_ts_ns: int) -> str:
    """``"client>broker@first_ts_ns"``: a TCP connection, independent of how the capture
    was split (``first_ts_ns`` is the connection's first packet)."""
    return f"{client}>{broker}@{first_ts_ns}"


def exchange_id(ex: Exchange, conn_key: str) -> str:
    """``"connection_key/request stream offset/response stream offset"`` (-1 for a side
    that was not captured)."""
    q = ex.request.stream_offset if ex.request is not None else -1
    r = ex.response.stream_offset if ex.response is not None else -1
    return f"{conn_key}/{q}/{r}"


@lru_cache(maxsize=65536)
def split_endpoint(endpoint: str) -> tuple[str, int]:
    """``"1.2.3.4:9092"`` -> ``("1.2.3.4", 9092)``; ``"[::1]:9092"`` -> ``("::1", 9092)``;
    ``("", -1)`` when it has no port."""
    host, sep, port = endpoint.rpartition(":")
    if not sep or not port.isdigit():
        return endpoint, -1
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


def _endpoints(client: str, broker: str) -> dict:
    cip, cport = split_endpoint(client)
    bip, bport = split_endpoint(broker)
    return {"client": client, "broker": broker, "client_ip": cip, "client_port": cport,
            "broker_ip": bip, "broker_port": bport}


def _int(v):
    return v if type(v) is int else None


def _wrap_int64(v: int | None) -> int | None:
    """``v`` reduced to a signed 64-bit integer the way Java's ``long`` addition wraps (Kafka's
    ``baseOffset + offsetDelta``, ``baseTimestamp + timestampDelta``, ``baseOffset +
    lastOffsetDelta``, KIP-98 record batch v2); ``None`` stays ``None``. Values already in
    range are returned unchanged."""
    if v is None or -_I64 <= v < _I64:
        return v
    return (v + _I64) % (_I64 << 1) - _I64


def _str(v):
    return v if type(v) is str else None


# ------------------------------------------------------------------------------- JSON bodies

#: bodies as read --json renders them, records fields without their records
_body_default = json_default(with_records=False)


#: orjson calls the default hook for dataclasses and datetimes, as the standard library does
_ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME


def body_json(msg: Message | None, floats: bool = True) -> str | None:
    """A message's decoded body as JSON, as ``read --json`` renders it (docs/json.md), records
    fields with their batch headers but without records; ``None`` when not captured or not
    decodable.

    ``floats``: the body may hold ``float64`` values (:func:`float_sides`). A body without
    them is encoded by orjson, about 4x faster than the standard library and with the same
    bytes; floats keep the standard library, which orjson renders differently (``1e-7``
    for ``1e-07``, ``null`` for ``NaN``). So does a body orjson refuses (an int beyond
    64 bits, a lone surrogate, a key that is not a string). Raises ``TypeError`` for a
    value neither can encode.
    """
    if msg is None or msg.body is None:
        return None
    if not floats:
        try:
            return orjson.dumps(msg.body, default=_body_default,
                                option=_ORJSON_OPTIONS).decode()
        except TypeError:      # orjson.JSONEncodeError; the standard library decides
            pass
    return json.dumps(msg.body, ensure_ascii=False, default=_body_default,
                      separators=(",", ":"))


@lru_cache(maxsize=1024)
def float_sides(defs, api_key: int) -> tuple[bool, bool]:
    """Whether the request and the response spec of ``api_key`` have a ``float64`` field
    (AlterClientQuotasRequest, DescribeClientQuotasResponse); both ``True`` for an API the
    definitions do not know."""
    api = defs.apis.get(api_key)
    if api is None:
        return True, True
    return _has_float(defs.message(api.request)), _has_float(defs.message(api.response))


def _has_float(node) -> bool:
    if isinstance(node, dict):
        if node.get("type") == "float64" or node.get("items") == "float64":
            return True
        return any(_has_float(v) for v in node.values())
    if isinstance(node, list):
        return any(_has_float(v) for v in node)
    return False


# ------------------------------------------------------------------------------- partitions

# column -> (side, keys): the first key present wins; side "request", "response" or "any"
# (the response's value when it has one, else the request's). Keys with a dot are one
# level inside a struct (``current_leader.leader_id``).
PARTITION_FIELDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "error_code": ("response", ("error_code", "partition_error_code")),
    "error_message": ("response", ("error_message",)),
    "fetch_offset": ("request", ("fetch_offset",)),
    "partition_max_bytes": ("request", ("partition_max_bytes",)),
    "current_leader_epoch": ("request", ("current_leader_epoch",)),
    "high_watermark": ("response", ("high_watermark",)),
    "last_stable_offset": ("response", ("last_stable_offset",)),
    "log_start_offset": ("any", ("log_start_offset",)),
    "preferred_read_replica": ("response", ("preferred_read_replica",)),
    "base_offset": ("response", ("base_offset",)),
    "log_append_time_ms": ("response", ("log_append_time_ms",)),
    "committed_offset": ("any", ("committed_offset",)),
    "committed_leader_epoch": ("any", ("committed_leader_epoch",)),
    "committed_metadata": ("any", ("committed_metadata", "metadata")),
    "offset": ("any", ("offset",)),
    "requested_timestamp_ms": ("request", ("timestamp",)),
    "timestamp_ms": ("response", ("timestamp",)),
    "leader_id": ("any", ("leader_id", "current_leader.leader_id")),
    "leader_epoch": ("any", ("leader_epoch", "current_leader.leader_epoch")),
    "end_offset": ("response", ("end_offset",)),
    "low_watermark": ("response", ("low_watermark",)),
    "start_offset": ("any", ("start_offset",)),
    "lag": ("response", ("lag",)),
}
_STRING_COLUMNS = {"error_message", "committed_metadata"}
_EMPTY_PARTITION = {col: None for col in PARTITION_FIELDS}
_INT16_COLUMNS = {"error_code"}
_INT32_COLUMNS = {"partition_max_bytes", "current_leader_epoch", "preferred_read_replica",
                  "committed_leader_epoch", "leader_id", "leader_epoch"}
_COLUMN_KINDS = {col: str if col in _STRING_COLUMNS else 2**15 if col in _INT16_COLUMNS
                 else 2**31 if col in _INT32_COLUMNS else 2**63 for col in PARTITION_FIELDS}


def _key_index(sides: tuple[str, ...]) -> dict[str, tuple[tuple[str, bool], ...]]:
    """wire key -> ((column, kind), ...) for the columns fed from these sides; kind is
    ``str``, or for integer columns the bound of their signed width (values outside are
    left null rather than failing the file)."""
    index: dict[str, list] = {}
    for rank in range(max(len(keys) for _, keys in PARTITION_FIELDS.values())):
        for col, (side, keys) in PARTITION_FIELDS.items():
            if side in sides and rank < len(keys):
                index.setdefault(keys[rank], []).append((col, _COLUMN_KINDS[col]))
    return {k: tuple(v) for k, v in index.items()}


_RESPONSE_KEYS = _key_index(("response", "any"))
_REQUEST_KEYS = _key_index(("request", "any"))
_WANTED = {k for _, keys in PARTITION_FIELDS.values() for k in keys}
_WANTED_TOP = {k for k in _WANTED if "." not in k}
_WANTED_NESTED: dict[str, tuple[str, ...]] = {}
for _k in _WANTED - _WANTED_TOP:
    _a, _b = _k.split(".")
    _WANTED_NESTED[_a] = _WANTED_NESTED.get(_a, ()) + (_b,)

#: Python types of the scalar kinds (int8 ... int64, string, bool, float64) as decoded
_SCALAR_TYPES = frozenset((int, str, bool, float))


def _no_field(f) -> None:
    return None


#: the partition structs (a partition index under a topic), gathered once each; the wanted
#: fields are read from the struct's dict
_PARTITIONS = PlanWalker(_no_field, partition_structs=True)


def _walk_partitions(plan, body, side: str, out: dict) -> None:
    """Merge the partitions of ``body`` (decoded with ``plan``) into ``out``, keyed by
    (topic or topic id, partition): each entry's ``side`` dict gets the wanted fields of
    the partition struct in wire order: scalars by key, a wanted struct's scalars as
    ``"current_leader.leader_id"`` ...; ``""``: the side carries the partition. When a
    partition appears twice on a side, its first struct's values win."""
    structs: list = []
    _PARTITIONS.partitions(plan, body, structs)
    for topic, topic_id, partition, struct in structs:
        k = (topic if topic is not None else topic_id, partition)
        entry = out.get(k)
        if entry is None:
            entry = out[k] = {"topic": topic, "topic_id": topic_id, "partition": partition,
                              "request": {}, "response": {}}
        else:
            if entry["topic"] is None:
                entry["topic"] = topic
            if entry["topic_id"] is None:
                entry["topic_id"] = topic_id
        vals = entry[side]
        vals[""] = True
        # one pass over the struct's few keys, not one lookup per wanted key
        for key, sv in struct.items():
            if key in _WANTED_TOP:
                if type(sv) in _SCALAR_TYPES and key not in vals:
                    vals[key] = sv
            elif key in _WANTED_NESTED and type(sv) is dict:
                for sub in _WANTED_NESTED[key]:
                    ssv = sv.get(sub)
                    if ssv is not None:
                        vals.setdefault(f"{key}.{sub}", ssv)


def _plans(ex: Exchange, defs):
    """(request plan, response plan) of the exchange's bodies, None when unknown."""
    info = defs.apis.get(ex.api_key) if ex.api_version >= 0 else None
    if info is None:
        return None, None
    version = ex.assumed_version if ex.assumed_version is not None else ex.api_version
    qplan = rplan = None
    try:
        if ex.request is not None and ex.request.body is not None:
            qplan = defs.plan(info.request, version)
        if ex.response is not None and ex.response.body is not None:
            rplan = defs.plan(info.response, version)
    except DefinitionError:  # a version without a layout: no partitions, not a failure
        return None, None
    return qplan, rplan


def _legacy07_partitions(ex: Exchange, out: dict) -> None:
    """Kafka 0.7 requests carry ``topic``/``partition`` (FETCH/MULTIFETCH also ``offset``)."""
    body = ex.request.body if ex.request is not None else None
    if type(body) is not dict:
        return
    items = body.get("fetches") or body.get("produces") or [body]
    fetch = ex.api_key in (legacy07.FETCH, legacy07.MULTIFETCH)
    for item in items:
        if type(item) is not dict or type(item.get("partition")) is not int:
            continue
        topic = item.get("topic")
        k = (topic, item["partition"])
        if k not in out:
            vals = {"": True}
            if fetch and type(item.get("offset")) is int:
                vals["fetch_offset"] = item["offset"]
            out[k] = {"topic": topic, "topic_id": None, "partition": item["partition"],
                      "request": vals, "response": {}}


def _record_summary_columns(s) -> dict:
    if s is None:
        return {}
    return {"batches": s.batches, "records": s.records, "records_bytes": s.records_bytes,
            "compressed_bytes": s.compressed_bytes, "uncompressed_bytes": s.uncompressed_bytes,
            "codecs": list(s.codecs), "first_offset": _wrap_int64(s.first_offset),
            "last_offset": _wrap_int64(s.last_offset), "crc_errors": s.crc_errors,
            "partial": s.partial}


def partition_rows(ex: Exchange, base: dict, defs) -> list[dict]:
    """One row per topic-partition of the exchange (request and response merged on (topic or
    topic id, partition)), with the record data of that partition. ``base`` holds the
    columns shared with the exchange (time, capture, exchange_id ...)."""
    found: dict = {}
    qplan, rplan = _plans(ex, defs)
    if qplan is not None:
        _walk_partitions(qplan, ex.request.body, "request", found)
    if rplan is not None:
        _walk_partitions(rplan, ex.response.body, "response", found)
    if ex.wire_format is WireFormat.KAFKA07:
        _legacy07_partitions(ex, found)
    by_partition: dict = {}
    for loc in ex.record_fields:
        if loc.partition is None:
            continue
        k = (loc.topic if loc.topic is not None else loc.topic_id, loc.partition)
        by_partition.setdefault(k, []).append(loc)
        if k not in found:
            found[k] = {"topic": loc.topic, "topic_id": loc.topic_id, "partition": loc.partition,
                        "request": {}, "response": {}}
    if not found:
        return []
    error_name = defs.error_name
    template = {**base, **_EMPTY_PARTITION}
    rows = []
    for k, entry in found.items():
        q, r = entry["request"], entry["response"]
        row = template.copy()
        row["topic"] = _str(entry["topic"])
        row["topic_id"] = _str(entry["topic_id"])
        row["partition"] = entry["partition"]
        row["in_request"] = bool(q)
        row["in_response"] = bool(r)
        # the response's values first (they win for "any" columns), then the request's for
        # columns still empty (the alternative keys of one column never meet in one struct)
        for vals, index in ((r, _RESPONSE_KEYS), (q, _REQUEST_KEYS)):
            for key, v in vals.items():
                targets = index.get(key)
                if targets is None:
                    continue
                for col, kind in targets:
                    if row[col] is None:
                        if kind is str:
                            row[col] = v if type(v) is str else None
                        elif type(v) is int and -kind <= v < kind:
                            row[col] = v
        code = row["error_code"]
        row["error_name"] = error_name(code) if code is not None else None
        locs = by_partition.get(k)
        if locs:
            s = summarize(locs)
            row.update(_record_summary_columns(s))
            row["producer_id"] = s.producer_ids[0] if s.producer_ids else (
                -1 if 2 in s.magics else None)
        rows.append(row)
    return rows


# ------------------------------------------------------------------------------- records

_LOCATOR = RecordsLocator()
_MIN_TS_MS, _MAX_TS_MS = 0, 253_402_300_799_999  # 1970-01-01 .. 9999-12-31 (Spark's range)


def _record_sides(ex: Exchange, defs) -> set[int]:
    """ids of the RawRecords objects found in the request body."""
    if ex.request is None or ex.request.body is None:
        return set()
    qplan, _ = _plans(ex, defs)
    if qplan is None:
        return set()
    return {id(loc.records) for loc in _LOCATOR.find(qplan, ex.request.body)}


def record_rows(ex: Exchange, xid: str, capture: str, defs) -> Iterator[dict]:
    """One row per decoded record of every batch of every records field of the exchange
    (records are decoded only when the pipeline ran with ``with_records``), yielded one at
    a time: a batch of a million records is streamed, never held as rows."""
    if not ex.record_fields:
        return
    in_request = _record_sides(ex, defs)
    for loc in ex.record_fields:
        rs = loc.records.decoded
        if rs is None:
            continue
        side = "request" if id(loc.records) in in_request else "response"
        msg = ex.request if side == "request" else ex.response
        if msg is None:
            msg = ex.request or ex.response
        base = time_columns(msg.first_ts_ns)
        base["capture"] = capture
        base["exchange_id"] = xid
        base["side"] = side
        base["topic"] = _str(loc.topic)
        base["topic_id"] = _str(loc.topic_id)
        base["partition"] = loc.partition
        for b in rs.batches:
            if not b.records:
                continue
            bbase = dict(base)
            bbase.update(magic=b.magic, codec=b.codec, timestamp_type=b.timestamp_type,
                         transactional=b.transactional, control=b.control,
                         producer_id=b.producer_id, producer_epoch=b.producer_epoch,
                         base_sequence=b.base_sequence,
                         partition_leader_epoch=b.partition_leader_epoch,
                         batch_base_offset=b.base_offset)
            for r in b.records:
                tms = r.timestamp_ms
                off = r.offset
                if not -_I64 <= off < _I64:     # base + delta of a crafted batch
                    off = _wrap_int64(off)
                if tms is not None and not -_I64 <= tms < _I64:
                    tms = _wrap_int64(tms)
                key, value, headers = r.key, r.value, r.headers
                row = dict(bbase)
                row["offset"] = off
                row["timestamp_ms"] = tms
                row["timestamp"] = tms * 1000 if tms is not None and \
                    _MIN_TS_MS <= tms <= _MAX_TS_MS else None
                row["key"] = key if key is None or type(key) is bytes else bytes(key)
                row["value"] = value if value is None or type(value) is bytes else bytes(value)
                row["headers"] = [{"key": k, "value": v if v is None or type(v) is bytes
                                   else bytes(v)} for k, v in headers] if headers else []
                row["control_type"] = r.control.get("type_name") if r.control else None
                yield row


# ------------------------------------------------------------------------------- exchanges

def _topics(ex: Exchange) -> list[str]:
    # wire_topics are the names the exchange carries; when it carries no topic id,
    # ``topics`` holds the same names (the Kafka 0.7 path fills only ``topics``)
    return list(ex.wire_topics if ex.topic_ids or ex.wire_topics else ex.topics)


def exchange_rows(ex: Exchange, capture: str, conn_key: str, *, defs=None,
                  with_records: bool = False) -> dict[str, Iterable[dict]]:
    """Rows of one exchange: ``{"exchanges": [row], "partitions": [...], "issues": [...],
    "records": iterator}`` (``records`` only with ``with_records``; an iterator of
    :func:`record_rows`, to be consumed once, in chunks).

    Args:
        ex: the exchange.
        capture: capture file name for the ``capture`` column.
        conn_key: :func:`connection_key` of the exchange's TCP connection.
        defs: definitions (to find partitions in bodies and name error codes; default: the
            installed ones).
        with_records: also build one ``records`` row per decoded record.
    """
    if defs is None:
        defs = _default_defs()
    # one dict display with constant keys (no ``**`` merges of helper dicts): this runs
    # once per exchange of an export
    q, r = ex.request, ex.response
    ts_ns = ex.ts_ns
    xid = exchange_id(ex, conn_key)
    ts = ts_ns // 1000
    date, hour = _date_hour(ts_ns // _HOUR_NS)
    client, broker = ex.client, ex.broker
    cip, cport = split_endpoint(client)
    bip, bport = split_endpoint(broker)
    api_key, api_name, api_version, client_id = ex.api_key, ex.api_name, ex.api_version, \
        ex.client_id
    q_floats, r_floats = float_sides(defs, api_key)
    latency_ns = ex.latency_ns
    errors = ex.errors
    issues = ex.issues
    tls = ex.tls
    row = {"capture": capture, "ts": ts, "ts_ns": ts_ns, "date": date, "hour": hour,
           "exchange_id": xid, "connection_key": conn_key, "client": client,
           "broker": broker, "client_ip": cip, "client_port": cport, "broker_ip": bip,
           "broker_port": bport, "status": ex.status, "api_key": api_key,
           "api_name": api_name, "api_version": api_version,
           "correlation_id": ex.correlation_id, "client_id": client_id,
           "latency_ns": latency_ns,
           "latency_ms": latency_ns / 1e6 if latency_ns is not None else None,
           "request_bytes": ex.request_bytes, "response_bytes": ex.response_bytes,
           "request_first_ts_ns": q.first_ts_ns if q is not None else None,
           "request_last_ts_ns": q.last_ts_ns if q is not None else None,
           "response_first_ts_ns": r.first_ts_ns if r is not None else None,
           "response_last_ts_ns": r.last_ts_ns if r is not None else None,
           "request_complete": q.complete if q is not None else None,
           "response_complete": r.complete if r is not None else None,
           "errors": list(errors), "error_count": len(errors),
           "throttle_time_ms": _int(ex.throttle_time_ms),
           "topics": _topics(ex), "topic_ids": list(ex.topic_ids),
           "inferred": ex.inferred, "assumed_version": ex.assumed_version,
           "tls_version": tls.version if tls is not None else None,
           "tls_cipher_suite": tls.cipher_suite if tls is not None else None,
           "tls_sni": tls.sni if tls is not None else None,
           "issue_kinds": list(dict.fromkeys([str(i.kind) for i in issues])) if issues
           else [],
           "issue_count": len(issues),
           "request_json": body_json(q, q_floats), "response_json": body_json(r, r_floats),
           "long_poll": ex.long_poll, "long_poll_rule": ex.long_poll_rule}
    s = ex.records
    if s is not None:
        row.update(_record_summary_columns(s))
        row.update(min_timestamp_ms=s.min_timestamp_ms, max_timestamp_ms=s.max_timestamp_ms,
                   transactional=s.transactional, control=s.control)
    pbase = {"capture": capture, "ts": ts, "ts_ns": ts_ns, "date": date, "hour": hour,
             "exchange_id": xid, "api_key": api_key, "api_name": api_name,
             "api_version": api_version, "client_id": client_id, "client": client,
             "broker": broker}
    out = {"exchanges": [row], "partitions": partition_rows(ex, pbase, defs),
           "issues": [issue_row(i, capture, conn_key, xid, ts_ns) for i in issues]
           if issues else []}
    if with_records:
        out["records"] = record_rows(ex, xid, capture, defs)
    return out


@lru_cache(maxsize=1)
def _default_defs():
    from kafkasniff.protocol.schema import load_definitions

    return load_definitions()


# ------------------------------------------------------------------------------- the others

def issue_row(issue: DecodeIssue, capture: str, conn_key: str | None,
              xid: str | None = None, fallback_ts_ns: int = 0) -> dict:
    """The ``issues`` row of an issue (``xid``: its exchange's id, ``None`` when standalone;
    ``fallback_ts_ns``: the time used when the issue carries none)."""
    return {"capture": capture, **time_columns(issue.ts_ns or fallback_ts_ns),
            "exchange_id": xid, "connection_key": conn_key, "kind": str(issue.kind),
            "severity": str(issue.severity), "message": issue.message,
            "client": issue.client, "broker": issue.broker, "direction": issue.direction,
            "stream_offset": issue.stream_offset, "length_bytes": issue.length_bytes,
            "field_path": issue.field_path, "frame_offset": issue.frame_offset,
            "correlation_id": issue.correlation_id, "api_key": issue.api_key,
            "api_version": issue.api_version}


def connection_row(summary, capture: str) -> dict:
    """The ``connections`` row of a :class:`kafkasniff.pipeline.ConnectionSummary`."""
    tls = summary.tls or {}
    ch = tls.get("client_hello") or {}
    sh = tls.get("server_hello") or {}
    sasl = summary.sasl or {}
    return {"capture": capture, **time_columns(summary.first_ts_ns),
            "connection_key": connection_key(summary.client, summary.broker,
                                             summary.first_ts_ns),
            "kind": summary.kind, **_endpoints(summary.client, summary.broker),
            "first_ts": summary.first_ts_ns // 1000, "first_ts_ns": summary.first_ts_ns,
            "last_ts": summary.last_ts_ns // 1000, "last_ts_ns": summary.last_ts_ns,
            "duration_ns": summary.last_ts_ns - summary.first_ts_ns,
            "handshake_seen": summary.handshake_seen, "closed": summary.closed or "",
            "bytes_to_broker": summary.bytes_to_broker,
            "bytes_to_client": summary.bytes_to_client, "segments": summary.segments,
            "gap_bytes": summary.gap_bytes, "retransmitted_bytes": summary.retransmitted_bytes,
            "overlap_conflicts": summary.overlap_conflicts, "exchanges": summary.exchanges,
            "unanswered": summary.unanswered, "orphans": summary.orphans,
            "tls_version": (sh.get("version") or ch.get("version")) if tls else None,
            "tls_sni": ch.get("sni"),
            "tls_alpn": list(ch.get("alpn") or ()) if ch else None,
            "sasl_mechanism": _str(sasl.get("mechanism")),
            "sasl_username": _str(sasl.get("username")),
            "sasl_state": _str(sasl.get("state"))}


def topic_row(topic, capture: str) -> dict:
    """The ``topic_ids`` row of a :class:`kafkasniff.pipeline.TopicName`."""
    return {"capture": capture, **time_columns(topic.ts_ns), "topic_id": topic.topic_id,
            "topic_name": topic.name, "first_seen": topic.ts_ns // 1000,
            "first_seen_ts_ns": topic.ts_ns}


# ------------------------------------------------------------------------------- groups

def _tps(assignment) -> list[dict] | None:
    return None if assignment is None else \
        [{"topic": t, "partitions": list(ps)} for t, ps in assignment]


def group_rows(report, capture: str) -> dict[str, Iterator[dict]]:
    """The rows of the ``groups``, ``members``, ``rebalances`` and ``commits`` tables of a
    :class:`kafkasniff.groups.model.GroupsReport` (unlike the other tables these come from
    the whole capture: topic ids are named where any exchange named them). Each table's
    rows are an iterator, built as they are consumed: a long capture's tens of thousands of
    rebalances and commits are never all held as rows at once."""
    gs = report.groups
    return {"groups": (_group_row(g, capture) for g in gs),
            "members": (_member_row(g, m, capture) for g in gs for m in g.members),
            "rebalances": (_rebalance_row(g, r, capture) for g in gs for r in g.rebalances),
            "commits": (_commit_row(g, c, capture) for g in gs for c in g.commits)}


def _group_row(g, capture: str) -> dict:
    n_commits, pct = g.commit_latency_stats()    # not to_dict(): it renders every row
    first = g.first_ts_ns if g.first_ts_ns >= 0 else 0
    return {
        "capture": capture, **time_columns(first), "group_id": g.group_id,
        "protocol": g.protocol, "protocol_type": g.protocol_type,
        "protocol_name": g.protocol_name, "coordinator": g.coordinator,
        "coordinator_node_id": g.coordinator_node_id,
        "coordinator_brokers": list(g.coordinator_brokers), "state": g.state,
        "first_ts": first // 1000, "first_ts_ns": first,
        "last_ts": max(g.last_ts_ns, first) // 1000, "last_ts_ns": max(g.last_ts_ns, first),
        "generation_id": g.generation_id, "members": len(g.members),
        "rebalances": len(g.rebalances), "commit_requests": n_commits,
        "commit_latency_p50_ns": pct and pct["p50"],
        "commit_latency_p99_ns": pct and pct["p99"],
        "commit_latency_max_ns": pct and pct["max"],
        "errors": [name for name, _ in g.errors],
        "error_count": sum(n for _, n in g.errors), "exchanges": g.exchanges}


def _member_row(g, m, capture: str) -> dict:
    # the member's own fields as Member.to_dict gives them, the assignment as the table's
    # list of topic-partitions instead of its {topic: partitions} form
    return {"capture": capture, **time_columns(m.first_ts_ns), "group_id": g.group_id,
            "protocol": g.protocol, **m.to_dict(), "first_ts": m.first_ts_ns // 1000,
            "assignment": _tps(m.assignment)}


def _rebalance_row(g, r, capture: str) -> dict:
    dur = r.duration_ns
    return {
        "capture": capture, **time_columns(r.start_ts_ns), "group_id": g.group_id,
        "protocol": g.protocol, "rebalance_index": r.index,
        "start_ts": r.start_ts_ns // 1000, "start_ts_ns": r.start_ts_ns,
        "end_ts": None if r.end_ts_ns is None else r.end_ts_ns // 1000,
        "end_ts_ns": r.end_ts_ns, "duration_ns": dur,
        "duration_ms": None if dur is None else dur / 1e6,
        "trigger": r.trigger, "trigger_member": r.trigger_member,
        "trigger_error": r.trigger_error, "errors": list(r.errors),
        "generation_id": r.generation_id, "protocol_name": r.protocol_name,
        "leader": r.leader, "members": list(r.members), "member_count": len(r.members),
        "joined": list(r.joined), "left": list(r.left),
        "assignment": [{"member_id": mid, "topic": t, "partitions": list(ps)}
                       for mid, a in r.assignment for t, ps in a],
        "complete": r.complete,
        "exchange_ids": [x.exchange_id for x in r.exchanges if x.exchange_id]}


def _commit_row(g, c, capture: str) -> dict:
    return {
        "capture": capture, **time_columns(c.ts_ns), "group_id": g.group_id,
        "exchange_id": c.exchange.exchange_id, "client": c.exchange.client,
        "broker": c.exchange.broker, "correlation_id": c.exchange.correlation_id,
        "client_id": c.client_id, "api_name": c.api_name, "member_id": c.member_id,
        "generation_id": c.generation_id, "topic": c.topic, "topic_id": c.topic_id,
        "partition": c.partition, "committed_offset": c.committed_offset,
        "committed_leader_epoch": c.committed_leader_epoch, "error": c.error,
        "answered": c.answered, "latency_ns": c.latency_ns, "lag": c.lag}
