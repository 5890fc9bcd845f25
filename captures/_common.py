"""Truth-file helpers shared by ``make_captures.py`` and ``craft_captures.py``.

Only JSON layout and text helpers: nothing here encodes Kafka, and nothing is imported from
kafkasniff (``craft_captures.py`` stays an independent encoder).
"""

from __future__ import annotations

import json
from typing import Any

TRUTH_FORMAT = 1


def text_or_none(b: bytes | None) -> str | None:
    """``b`` as text when it is printable UTF-8 (the ``*_text`` copy of a ``*_hex`` field),
    else ``None``."""
    if b is None:
        return None
    try:
        s = b.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return s if s.isprintable() else None


def dump_truth(truth: dict[str, Any]) -> str:
    """JSON with one top-level key per line and one list element per line (diff-friendly).

    A top-level dict holding a list of more than 3 elements gets one line per key and one
    line per element of its lists too.
    """

    def compact(v: Any) -> str:
        return json.dumps(v, ensure_ascii=False, separators=(", ", ": "))

    def items_lines(items: list[tuple[str, Any]], indent: str) -> list[str]:
        out = []
        for i, (key, value) in enumerate(items):
            comma = "," if i < len(items) - 1 else ""
            if isinstance(value, list) and value:
                out.append(f"{indent}{json.dumps(key)}: [")
                out += [f"{indent} {compact(v)}," for v in value[:-1]]
                out += [f"{indent} {compact(value[-1])}", f"{indent}]{comma}"]
            elif indent == " " and isinstance(value, dict) and any(
                    isinstance(v, list) and len(v) > 3 for v in value.values()):
                out.append(f"{indent}{json.dumps(key)}: {{")
                out += items_lines(list(value.items()), indent + " ")
                out.append(f"{indent}}}{comma}")
            else:
                out.append(f"{indent}{json.dumps(key)}: {compact(value)}{comma}")
        return out

    text = "\n".join(["{", *items_lines(list(truth.items()), " "), "}"]) + "\n"
    assert json.loads(text) == json.loads(json.dumps(truth))
    return text
