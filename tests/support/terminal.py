"""What may reach a terminal: the promise of :mod:`kafkasniff.text` checked on a text output
(issue 45), and the hostile names of ``captures/regressions/hostile_names.pcap``."""

from __future__ import annotations

import importlib.util
import sys
from functools import lru_cache
from pathlib import Path

CAPTURES = Path(__file__).resolve().parents[2] / "captures"
HOSTILE_NAMES = CAPTURES / "regressions" / "hostile_names.pcap"

#: what the hostile names' escaped forms show (visible escapes, never the controls)
VISIBLE_ESCAPES = (r"\x1b]0;pwned-title\x07", r"\x1b]52;c;cm0gLXJmIH4=\x07", r"\x1b[2J",
                   r"\r", r"\x9b6n", r"\x7f", r"\u202egnp.exe", r"\nkafkasniff: forged line")
#: the text a hostile line feed tries to put at the start of a line of its own
FORGED = "kafkasniff: forged"


def unsafe_characters(text: str) -> list[str]:
    """The characters of ``text`` that ``str.isprintable`` rejects (below U+0020, DEL, C1
    controls, format characters such as bidi overrides, line and paragraph separators ...),
    other than the line feeds that end lines; each once, in code point order."""
    if text.replace("\n", "").isprintable():
        return []
    return sorted({c for c in text if c != "\n" and not c.isprintable()})


def assert_terminal_safe(text: str) -> None:
    """Fail, naming them, if ``text`` holds characters a terminal could act on (see
    :func:`unsafe_characters`) or a line that a line feed in a name forged."""
    bad = unsafe_characters(text)
    assert not bad, f"raw characters reach the terminal: {[f'U+{ord(c):04X}' for c in bad]}"
    forged = [line for line in text.split("\n") if line.startswith(FORGED)]
    assert not forged, f"forged lines: {forged[:3]}"


def assert_bytes_terminal_safe(data: bytes) -> str:
    """:func:`assert_terminal_safe` of a process's output (UTF-8; also no raw byte below 0x20
    but the line feed, and no DEL); returns the text."""
    raw = sorted({b for b in data if (b < 0x20 and b != 0x0A) or b == 0x7F})
    assert not raw, f"raw bytes reach the terminal: {[hex(b) for b in raw]}"
    text = data.decode("utf-8")
    assert_terminal_safe(text)
    return text


@lru_cache(maxsize=1)
def craft_regressions():
    """``captures/craft_regressions.py`` as a module (``HOSTILE``, ``HOSTILE_SNI``,
    ``hostile_names_capture``)."""
    sys.path.insert(0, str(CAPTURES))
    try:
        spec = importlib.util.spec_from_file_location("craft_regressions",
                                                      CAPTURES / "craft_regressions.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(CAPTURES))
    return mod


def benign_twin(path: Path) -> Path:
    """Write to ``path`` the capture of ``hostile_names.pcap`` with harmless names (same
    exchanges, groups and issue: a text output of it has as many lines as one of the hostile
    capture should); returns ``path``."""
    cr = craft_regressions()
    names = {k: f"{k}-name" for k in cr.HOSTILE}
    names["record_value"] = "value"
    names["record_json"] = '{"m": "json"}'
    path.write_bytes(cr.hostile_names_capture(names, b"broker.example"))
    return path
