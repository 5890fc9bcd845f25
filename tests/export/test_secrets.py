"""No secret of ``captures/crafted_sasl.pcap`` reaches an export unless --show-secrets.

Every table of the Parquet and JSON Lines exports is searched: the decoded values (pyarrow
-> Python -> JSON text, bytes as text, hex and base64) and the raw files, for every secret
of the truth file as text, hex and base64 (``leak_forms`` of the read/stats secret test).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from kafkasniff.export.schema import TABLES
from tests.captures.test_secrets import leak_forms, secrets
from tests.conftest import CAPTURES

SASL = CAPTURES / "crafted_sasl.pcap"


def _bytes_forms(b: bytes) -> str:
    return " ".join([b.decode("latin-1"), b.hex(), base64.b64encode(b).decode()])


def decoded_text(out: Path) -> str:
    """Every Parquet file of every table as JSON text (bytes in several forms)."""
    parts = []
    for table in TABLES:
        for f in sorted((out / table).rglob("*.parquet")):
            rows = pq.read_table(f).to_pylist()
            parts.append(json.dumps(rows, default=lambda v: _bytes_forms(v)
                                    if isinstance(v, bytes) else str(v), ensure_ascii=False))
    return "\n".join(parts)


def raw_text(out: Path) -> str:
    return "\n".join(p.read_bytes().decode("latin-1") for p in sorted(out.rglob("*"))
                     if p.is_file() and p.name != "counts.json")


def leaks(text: str) -> list[str]:
    return [what for what, secret in secrets() for form in leak_forms(secret) if form in text]


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_no_secret_in_export(exported, fmt):
    out = exported(SASL, fmt=fmt)
    counts = json.loads((out / "counts.json").read_text())
    assert counts["exchanges"] >= 21
    text = raw_text(out)
    if fmt == "parquet":
        text += decoded_text(out)
    found = leaks(text)
    assert not found, f"export ({fmt}) leaks: {found[:5]}"
    # what is shown instead
    assert '"redacted"' in text or "redacted" in text
    for user in ("alice", "bob", "carol"):
        assert user in text


def test_show_secrets_exports_them(exported):
    """The search finds secrets when they are there (so its silence above means something)."""
    out = exported(SASL, show_secrets=True)
    found = leaks(decoded_text(out))
    assert "password (A: SaslAuthenticate correlation 3 (PLAIN))" in found
