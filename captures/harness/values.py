"""Names, clocks and the record layout every truth file uses.

Byte strings in the truth files are hex (``*_hex``) with a ``*_text`` convenience copy when
they are printable UTF-8. Wall-clock times are ``*_ts_ns`` (ns since the epoch), CreateTime
values ``*_ms`` (ms since the epoch).
"""

from __future__ import annotations

import time
from typing import Any

from _common import text_or_none

from kafkasniff.protocol.schema import load_definitions

# Kafka API and error names, as the decoder names them (kafkasniff's generated definitions).
DEFS = load_definitions()
API_NAMES: dict[int, str] = {key: info.name for key, info in DEFS.apis.items()}
API_KEYS: dict[str, int] = {name: key for key, name in API_NAMES.items()}
# librdkafka's own spellings (rd_kafka_ApiKey2str)
API_KEYS.update({"ApiVersion": 18, "Offset": 2, "GroupCoordinator": 10})

#: record timestamp type codes as the clients report them -> truth-file names
TIMESTAMP_TYPES = {0: "NotAvailable", 1: "CreateTime", 2: "LogAppendTime"}


def now_ms() -> int:
    """Wall clock, ms since the epoch (the CreateTime the scenarios write)."""
    return time.time_ns() // 1_000_000


def now_ns() -> int:
    """Wall clock, ns since the epoch (every ``*_ts_ns`` of the truth)."""
    return time.time_ns()


def api_name(key: int | None) -> str | None:
    """The API name of ``key`` (``ApiKeyN`` when the definitions do not know it)."""
    return None if key is None else API_NAMES.get(key, f"ApiKey{key}")


def settle(seconds: float = 0.3) -> None:
    """Let in-flight requests, responses and log lines arrive before the next step."""
    time.sleep(seconds)


def _bytes(b: bytes | str | None) -> bytes | None:
    if b is None or isinstance(b, bytes):
        return b
    return b.encode()


def record_fields(key: bytes | None, value: bytes | None,
                  headers: list[tuple[str, bytes | None]] | None) -> dict[str, Any]:
    """The Kafka record content in the truth-file layout: ``key_hex``, ``key_text``,
    ``value_hex``, ``value_text`` (``None`` for a null key/value), ``headers``
    (``[[name, value_hex or None], ...]`` in order)."""
    key, value = _bytes(key), _bytes(value)
    return {
        "key_hex": None if key is None else key.hex(),
        "key_text": text_or_none(key),
        "value_hex": None if value is None else value.hex(),
        "value_text": text_or_none(value),
        "headers": [[name, None if hv is None else _bytes(hv).hex()]
                    for name, hv in (headers or [])],
    }
