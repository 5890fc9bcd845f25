"""How record keys, values and header values are shown.

Display rules (issue: "what users see"): valid UTF-8 is shown as text, and as parsed JSON
when it is JSON; a Confluent Schema Registry frame (magic byte 0, then a 4-byte schema id,
then the serialized payload) is recognised and its schema id reported; anything else is hex.
What is shown is capped (``max_bytes``); the size is always given. Lossless bytes are in the
Parquet ``records`` table (``export --records``), not here.
"""

from __future__ import annotations

import json
from functools import lru_cache

from kafkasniff.text import escape_text

DEFAULT_MAX_BYTES = 256


#: keys and values up to this size are described once per distinct content (cached)
_CACHED_BYTES = 64


def describe_bytes(data: bytes | None, max_bytes: int = DEFAULT_MAX_BYTES, *,
                   schema_frame: bool = True) -> dict | None:
    """A JSON-ready description of a key/value: ``None`` for null, else a dict with
    ``size_bytes`` and one of ``text``, ``json``, ``hex``, or ``schema_id`` + ``payload``
    (itself described, as text, JSON or hex: a schema frame is not looked for inside another,
    so crafted bytes cannot nest them without end), plus ``truncated: true`` when the shown
    part was capped. ``max_bytes`` <= 0 shows everything.

    A ``bytes`` value of at most 64 bytes is described once per distinct content (keys
    repeat; a crafted batch repeats one control record a million times): the same dict is
    returned for the same bytes, to be read, never changed."""
    if type(data) is bytes and len(data) <= _CACHED_BYTES:
        return _describe_small(data, max_bytes, schema_frame)
    return _describe(data, max_bytes, schema_frame)


@lru_cache(maxsize=1024)
def _describe_small(data: bytes, max_bytes: int, schema_frame: bool) -> dict | None:
    return _describe(data, max_bytes, schema_frame)


def _describe(data: bytes | None, max_bytes: int, schema_frame: bool) -> dict | None:
    """What :func:`describe_bytes` returns, made each time."""
    if data is None:
        return None
    n = len(data)
    if schema_frame and n >= 5 and data[0] == 0:
        schema_id = int.from_bytes(data[1:5], "big", signed=True)
        if schema_id > 0:
            return {"size_bytes": n, "schema_id": schema_id,
                    "payload": _describe(data[5:], max_bytes, False)}
    shown = data[:max_bytes] if max_bytes > 0 else data
    out: dict = {"size_bytes": n}
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and (max_bytes <= 0 or n <= max_bytes) and text[:1] in "{[\"" and text:
        try:
            out["json"] = json.loads(text)
            return out
        except (ValueError, RecursionError):  # RecursionError: absurdly deep nesting
            pass
    if text is not None and _printable(text):
        out["text"] = text if (max_bytes <= 0 or n <= max_bytes) else \
            bytes(shown).decode("utf-8", "ignore")
    else:
        out["hex"] = bytes(shown).hex()
    if max_bytes > 0 and n > max_bytes:
        out["truncated"] = True
    return out


_WHITESPACE_SHOWN = str.maketrans("\t\r\n", "   ")


def _printable(text: str) -> bool:
    """Every character printable or a tab, CR or LF (checked in C: the tabs and line ends
    become spaces for ``str.isprintable``)."""
    return text.isprintable() or text.translate(_WHITESPACE_SHOWN).isprintable()


def short(desc: dict | None, width: int = 60) -> str:
    """A one-line rendering of :func:`describe_bytes` output for the console: at most
    ``width`` characters (longer renderings end in ``…``), followed by the size (``(NB)``)
    when ``describe_bytes`` capped the value.

    Nothing a terminal acts on is written raw: text is shown in single quotes, escaped by
    :func:`kafkasniff.text.escape_text` (``'a\\r\\n'``); JSON as compact JSON, whose
    escapes are JSON's own (``\\u001b``), and all in ASCII (``\\u009b``, ``\\u202e``)
    when it holds a character that JSON leaves raw but ``str.isprintable`` rejects (DEL,
    C1 controls, format characters)."""
    if desc is None:
        return "null"
    if "schema_id" in desc:
        return f"[schema {desc['schema_id']}]{short(desc['payload'], width)}"
    if "json" in desc:
        text = json.dumps(desc["json"], ensure_ascii=False, separators=(",", ":"))
        if not text.isprintable():
            text = json.dumps(desc["json"], separators=(",", ":"))
    elif "text" in desc:
        text = f"'{escape_text(desc['text'])}'"
    else:
        text = "0x" + desc["hex"]
    if len(text) > width:
        text = text[: width - 1] + "…"
    if desc.get("truncated"):
        text += f"({desc['size_bytes']}B)"
    return text
