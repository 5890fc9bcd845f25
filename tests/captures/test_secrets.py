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
