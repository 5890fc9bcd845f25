"""No secret from a capture with credentials reaches any output unless --show-secrets.

``captures/crafted_sasl.pcap`` holds PLAIN passwords (SaslAuthenticate and a raw KIP-43
token after SaslHandshake v0), a full SCRAM-SHA-256 exchange, an OAUTHBEARER JWT, GSSAPI
tokens and a wrong password; its truth file lists every secret (text and hex). Every output
of every command is searched for each secret as text, hex and base64 (at each of the three
byte alignments, so a secret inside a longer base64 string is found too).
"""

from __future__ import annotations

import base64
import json

import pytest
from click.testing import CliRunner

from kafkasniff.cli import main
from tests.conftest import CAPTURES

SASL = CAPTURES / "crafted_sasl.pcap"
TRUTH = json.loads(SASL.with_suffix(".truth.json").read_text())

OUTPUTS = {
    "read": ["read", "-q"],
    "read --records": ["read", "-q", "--records"],
    "read --json": ["read", "-q", "--json"],
    "read --json --records --value-bytes 0": ["read", "-q", "--json", "--records",
                                               "--value-bytes", "0"],
    "stats": ["stats"],
    "stats --json": ["stats", "--json"],
}


def leak_forms(secret: bytes) -> set[str]:
    """Ways a secret could appear in text output."""
    forms = {secret.hex(), secret.hex().upper()}
    try:
        forms.add(secret.decode())
    except UnicodeDecodeError:
        pass
    for shift in range(3):
        for enc in (base64.b64encode, base64.urlsafe_b64encode):
            text = enc(bytes(shift) + secret).decode()
            core = text[4 if shift else 0: len(text) - 4]  # independent of the neighbours
            if len(core) >= 8:
                forms.add(core)
    return {f for f in forms if len(f) >= 6}


def secrets() -> list[tuple[str, bytes]]:
    out = []
    for s in TRUTH["secrets"]:
        out.append((f"{s['kind']} ({s['where']})", bytes.fromhex(s["hex"])))
    return out


def run(args: list[str]) -> str:
    res = CliRunner().invoke(main, args + [str(SASL)], catch_exceptions=False)
    assert res.exit_code == 0
    return res.output


def test_truth_lists_secrets():
    kinds = {s["kind"] for s in TRUTH["secrets"]}
    assert {"password", "scram_client_proof"} <= kinds
    assert len(TRUTH["secrets"]) >= 10


@pytest.mark.parametrize("name", list(OUTPUTS))
def test_no_secret_in_output(name):
    text = run(OUTPUTS[name])
    leaks = [what for what, secret in secrets() for form in leak_forms(secret) if form in text]
    assert not leaks, f"{name} leaks: {leaks[:5]}"


def test_usernames_and_mechanisms_are_shown():
    text = run(["read", "-q"])
    for user in ("alice", "bob", "carol", "mallory"):
        assert f"user={user}" in text
    for mech in ("PLAIN", "SCRAM-SHA-256", "OAUTHBEARER", "GSSAPI"):
        assert f"sasl={mech}" in text


def test_show_secrets_shows_them():
    text = run(["read", "-q", "--json", "--show-secrets"])
    assert "alice-secret-pw" in text
    proof = next(s["text"] for s in TRUTH["secrets"] if s["kind"] == "scram_client_proof")
    assert proof in text


def test_redaction_markers_in_json():
    objs = [json.loads(line) for line in run(["read", "-q", "--json"]).splitlines()]
    auth = [o for o in objs if o.get("api_name") == "SaslAuthenticate"]
    plain = auth[0]["request"]["body"]["auth_bytes"]
    assert plain["username"] == "alice"
    assert plain["password"] == {"redacted": "password", "size_bytes": len("alice-secret-pw")}
    raw = [o for o in objs if o.get("api_name") == "SaslToken"]
    assert raw and raw[0]["request"]["body"]["username"] == "carol"
    assert raw[0]["status"] == "paired"


# --------------------------------------------------------------------------- every SASL capture

REGRESSIONS = CAPTURES / "regressions"


def _regression_secrets() -> dict:
    import importlib.util
    import sys

    sys.path.insert(0, str(CAPTURES))
    try:
        spec = importlib.util.spec_from_file_location("craft_regressions",
                                                      CAPTURES / "craft_regressions.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(CAPTURES))
    return mod.SECRETS


SASL_CAPTURES = {"crafted_sasl.pcap": (SASL, [s for _, s in secrets()])}
SASL_CAPTURES.update({name: (REGRESSIONS / name, found)
                      for name, found in _regression_secrets().items()})
WIRE_FORMATS = ("auto", "modern", "0.7")
TEXT_OUTPUTS = {
    "read": ["read", "-q", "--records"],
    "read --json": ["read", "-q", "--json", "--records", "--value-bytes", "0"],
    "stats --json": ["stats", "--json"],
}


def _parquet_text(directory) -> str:
    """Every value of every Parquet table, as text (binary values as-is, hex and base64)."""
    import pyarrow.parquet as pq

    parts = []
    for f in sorted(directory.rglob("*.parquet")):
        for column in pq.read_table(f).to_pylist():
            for v in column.values():
                parts.append(_flatten(v))
    return "\n".join(parts)


def _flatten(v) -> str:
    if isinstance(v, (bytes, bytearray)):
        b = bytes(v)
        return "\n".join([b.decode("latin-1"), b.hex(), base64.b64encode(b).decode()])
    if isinstance(v, dict):
        return "\n".join(_flatten(x) for x in v.values())
    if isinstance(v, list):
        return "\n".join(_flatten(x) for x in v)
    return str(v)


def _leaks(text: str, found: list[bytes]) -> list[str]:
    unescaped = text.replace("\\u0000", "\x00").replace('\\"', '"').replace("\\/", "/")
    return [secret.decode("latin-1") for secret in found for form in leak_forms(secret)
            if form in text or form in unescaped]


@pytest.mark.parametrize("wire_format", WIRE_FORMATS)
@pytest.mark.parametrize("capture", list(SASL_CAPTURES))
def test_no_secret_in_any_output_of_any_sasl_capture(capture, wire_format, tmp_path):
    """Every output of every command (text, JSON, Parquet values, JSON Lines exports) of
    every SASL capture, the damaged regression captures included, in every wire-format
    mode: no secret as text, hex, base64 at any alignment or JSON-escaped."""
    path, found = SASL_CAPTURES[capture]
    assert found
    runner = CliRunner()
    texts = {}
    for name, args in TEXT_OUTPUTS.items():
        res = runner.invoke(main, args + ["--wire-format", wire_format, str(path)],
                            catch_exceptions=False)
        assert res.exit_code == 0, res.output
        texts[name] = res.output
    for fmt in ("parquet", "jsonl"):
        out = tmp_path / fmt
        res = runner.invoke(main, ["export", "-q", "--records", "--format", fmt, "-o", str(out),
                                   "--wire-format", wire_format, str(path)],
                            catch_exceptions=False)
        assert res.exit_code == 0, res.output
        texts[f"export {fmt}"] = _parquet_text(out) if fmt == "parquet" else "\n".join(
            f.read_text() for f in sorted(out.rglob("*.jsonl")))
    leaks = {name: _leaks(text, found) for name, text in texts.items()}
    assert not any(leaks.values()), leaks


@pytest.mark.parametrize("capture", [c for c in SASL_CAPTURES if c != "crafted_sasl.pcap"])
def test_show_secrets_shows_the_regression_secrets(capture):
    """The secret-search test can fail: with --show-secrets each secret is there."""
    path, found = SASL_CAPTURES[capture]
    res = CliRunner().invoke(main, ["read", "-q", "--json", "--show-secrets", str(path)])
    assert _leaks(res.output, found)
