"""Rendering exchanges and issues: JSON-ready dicts (``read --json``) and console lines.

JSON conventions (documented in ``docs/json.md``): Kafka field names in snake_case, integers
as JSON numbers (signed), uuids as Kafka's text form, ``bytes`` fields as base64 strings,
``records`` fields as ``{"size_bytes": N}``, unknown tagged fields as
``{"tag": N, "data": base64}``, times as integer ``*_ns`` (ns since epoch, UTC).
"""

from __future__ import annotations

import base64
import datetime as _dt

from kafkasniff.issues import DecodeIssue
from kafkasniff.pairing.exchange import Exchange, Message
from kafkasniff.protocol.primitives import RawRecords

JSON_SCHEMA_VERSION = 1


def jsonable(value):
    """Convert a decoded value tree to JSON-ready types (bytes -> base64, records -> size)."""
    t = type(value)
    if t is dict:
        return {k: jsonable(v) for k, v in value.items()}
    if t is list:
        return [jsonable(v) for v in value]
    if t is bytes or t is bytearray or t is memoryview:
        return base64.b64encode(bytes(value)).decode("ascii")
    if t is RawRecords:
        return {"size_bytes": value.size_bytes}
    return value


def message_to_dict(msg: Message | None) -> dict | None:
    """A :class:`Message` as a JSON-ready dict, ``None`` when not captured."""
    if msg is None:
        return None
    out = {
        "frame_bytes": msg.frame_bytes,
        "first_ts_ns": msg.first_ts_ns,
        "last_ts_ns": msg.last_ts_ns,
        "stream_offset": msg.stream_offset,
        "complete": msg.complete,
        "header": jsonable(msg.header),
        "body": jsonable(msg.body) if msg.body is not None else None,
    }
    if msg.missing_bytes:
        out["missing_bytes"] = msg.missing_bytes
    if msg.raw_body is not None:
        out["raw_body"] = base64.b64encode(msg.raw_body).decode("ascii")
    return out


def exchange_to_dict(ex: Exchange) -> dict:
    """An :class:`Exchange` as the JSON object of ``read --json`` (see docs/json.md)."""
    return {
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
        "request_bytes": ex.request_bytes,
        "response_bytes": ex.response_bytes,
        "errors": list(ex.errors),
        "throttle_time_ms": ex.throttle_time_ms,
        "topics": list(ex.topics),
        "inferred": ex.inferred,
        "assumed_version": ex.assumed_version,
        "request": message_to_dict(ex.request),
        "response": message_to_dict(ex.response),
        "issues": [i.to_dict() for i in ex.issues],
    }


def issue_to_dict(issue: DecodeIssue) -> dict:
    """A standalone issue as a JSON Lines object (``"type": "issue"``)."""
    d = issue.to_dict()
    d["type"] = "issue"
    return d


def format_ts(ts_ns: int) -> str:
    """``2024-05-01T12:00:00.123456Z`` (UTC, microseconds) from integer ns."""
    if not ts_ns:
        return "-" * 27
    sec, ns = divmod(ts_ns, 1_000_000_000)
    return _dt.datetime.fromtimestamp(sec, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + \
        f".{ns // 1000:06d}Z"


def format_ms(ns: int | None) -> str:
    """Latency in milliseconds with 3 decimals, ``-`` when unknown."""
    return "-" if ns is None else f"{ns / 1e6:.3f}ms"


def exchange_line(ex: Exchange, color: bool = False) -> str:
    """One console line per exchange, like ``read`` prints it."""
    parts = [format_ts(ex.ts_ns), f"{ex.client} -> {ex.broker}",
             repr(ex.client_id) if ex.client_id is not None else "-",
             f"{ex.api_name} v{ex.api_version}" if ex.api_key >= 0 else "Unknown",
             f"corr={ex.correlation_id}", format_ms(ex.latency_ns)]
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
        parts.append("topics=" + ",".join(shown) + more)
    if ex.issues:
        parts.append(f"issues={','.join(sorted({str(i.kind) for i in ex.issues}))}")
    return "  ".join(parts)


def issue_line(issue: DecodeIssue) -> str:
    """One console line per standalone issue (prefixed with ``!``)."""
    where = f"{issue.client} -> {issue.broker}" if issue.client else "capture"
    return f"! {format_ts(issue.ts_ns)}  {where}  {issue.severity} {issue.kind}: {issue.message}"
