"""Text that came off the wire, made safe to show on a terminal.

Every name a peer chooses (client_id, topic, group id, member id, group instance id, assignor,
record header keys, the TLS server name in an issue message ...) is hostile input: a control
character in it could move the cursor, set the window title (OSC), write the clipboard
(OSC 52), ring the bell or, with a line feed, forge a whole output line. Every text output
(console lines, tables, ``groups``, ``stats``, the TUI, live lines, ``spark report`` text)
passes such names through :func:`escape_text`, the one place this is done. JSON, JSON Lines,
Parquet and OpenMetrics keep the exact value: their own encodings escape it.
"""

from __future__ import annotations

from functools import lru_cache

#: short names for the common controls, as Python writes them
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r", "\\": "\\\\"}


def _escape_char(c: str) -> str:
    named = _NAMED.get(c)
    if named is not None:
        return named
    n = ord(c)
    if n <= 0xFF:
        return f"\\x{n:02x}"
    if n <= 0xFFFF:
        return f"\\u{n:04x}"
    return f"\\U{n:08x}"


def escape_text(text: str) -> str:
    """``text`` with every character that ``str.isprintable`` rejects written as a visible
    escape, as Python writes it in a string literal: ``\\x1b`` (ESC), ``\\n``, ``\\t``,
    ``\\r``, ``\\x9b`` (C1 CSI), ``\\u202e`` (bidi override), ``\\u2028`` (line separator),
    and a backslash as ``\\\\`` so that an escape in the output is never ambiguous.

    The result holds no character below U+0020, no DEL, no C1 control (U+0080-U+009F), no
    format character and no line or paragraph separator, and no line end: one name stays on
    one line. Printable text (every real Kafka name) is returned as it is, unchanged and
    without copying. Shape: ``str -> str``; never raises for a ``str``."""
    if text.isprintable() and "\\" not in text:
        return text
    if len(text) <= _CACHED_CHARS:
        return _escaped_small(text)
    return _escaped(text)


#: names up to this length are escaped once per distinct text (a hostile client_id repeats on
#: every exchange of its connection); longer ones each time, so the cache stays small
_CACHED_CHARS = 256


def _escaped(text: str) -> str:
    return "".join(c if c.isprintable() and c != "\\" else _escape_char(c) for c in text)


@lru_cache(maxsize=4096)
def _escaped_small(text: str) -> str:
    return _escaped(text)


def escape_optional(text: str | None, none: str = "-") -> str:
    """:func:`escape_text` of ``text``, or ``none`` when it is None (a null name)."""
    return none if text is None else escape_text(text)


def plural(n: int, word: str, words: str | None = None, *, grouped: bool = False) -> str:
    """``"N word"`` for one, ``"N words"`` otherwise: ``plural(1, "exchange")`` is
    ``"1 exchange"``, ``plural(2, "Kafka connection")`` ``"2 Kafka connections"``.
    ``words``: the plural when it is not ``word + "s"`` (``plural(n, "analysis",
    "analyses")``); ``grouped``: thousands separated (``"12,345 exchanges"``, the TUI's
    counters). The count of every summary line (``read``, ``live``, ``stats``, the TUI's
    status line) is written with it. Shape: ``(int, str) -> str``."""
    count = f"{n:,}" if grouped else str(n)
    return f"{count} {word if n == 1 else (words or word + 's')}"
