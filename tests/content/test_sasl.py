"""SASL tokens (PLAIN, SCRAM, OAUTHBEARER, GSSAPI), secret redaction and the per-connection
SASL state machine (KIP-43 raw tokens after SaslHandshake v0, SaslAuthenticate after v1)."""

from __future__ import annotations

import base64
import copy
import hashlib
import hmac
import json
import os

import pytest
from hypothesis import given, settings, strategies as st

from kafkasniff.content.sasl import (
    Redacted,
    SaslSession,
    is_secret_api,
    is_sensitive_config,
    mechanism_family,
    parse_token,
    redact_body,
)

MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI",
              "scram-sha-256", "FOO", None]


def _default(o):
    if isinstance(o, Redacted):
        return o.to_json()
    if isinstance(o, (bytes, bytearray)):
        return base64.b64encode(bytes(o)).decode()   # as the renderer shows bytes fields
    raise TypeError(type(o))


def dump(value) -> str:
    return json.dumps(value, default=_default)


def secret_forms(secret: str | bytes) -> list[str]:
    """The ways a secret could leak into JSON: its text, hex and base64 of its bytes."""
    raw = secret.encode() if isinstance(secret, str) else secret
    forms = [raw.hex(), raw.hex().upper(), base64.b64encode(raw).decode(),
             base64.urlsafe_b64encode(raw).decode().rstrip("=")]
    if isinstance(secret, str):
        forms.append(secret)
        forms.append(json.dumps(secret)[1:-1])     # as json.dumps escapes it
    return forms


def assert_hidden(text: str, *secrets: str | bytes) -> None:
    for secret in secrets:
        for form in secret_forms(secret):
            assert form not in text, f"secret leaked as {form!r}"


# --------------------------------------------------------------------------- basics

def test_mechanism_family():
    assert mechanism_family("PLAIN") == "PLAIN"
    assert mechanism_family("plain") == "PLAIN"
    assert mechanism_family("SCRAM-SHA-256") == "SCRAM"
    assert mechanism_family("scram-sha-512") == "SCRAM"
    assert mechanism_family("OAUTHBEARER") == "OAUTHBEARER"
    assert mechanism_family("gssapi") == "GSSAPI"
    assert mechanism_family("DIGEST-MD5") == "OTHER"
    assert mechanism_family(None) == "OTHER"
    assert mechanism_family("") == "OTHER"


def test_redacted_to_json():
    r = Redacted("password", 12)
    assert r.to_json() == {"redacted": "password", "size_bytes": 12}
    assert "12" in str(r)
    with pytest.raises(AttributeError):
        r.what = "x"   # frozen


def test_empty_token():
    for mech in MECHANISMS:
        for client in (True, False):
            d = parse_token(mech, b"", client)
            assert d["message"] == "empty" and d["size_bytes"] == 0


# --------------------------------------------------------------------------- PLAIN

PLAIN_PASSWORD = "S3cr3t-Pässwörd!"
PLAIN_TOKEN = b"\x00alice\x00" + PLAIN_PASSWORD.encode()


def test_plain_client_token_redacted():
    d = parse_token("PLAIN", PLAIN_TOKEN, True)
    assert d["mechanism"] == "PLAIN"
    assert d["username"] == "alice"
    assert d["authorization_id"] is None
    assert d["password"] == Redacted("password", len(PLAIN_PASSWORD.encode()))
    text = dump(d)
    assert "alice" in text
    assert_hidden(text, PLAIN_PASSWORD, PLAIN_TOKEN)


def test_plain_with_authzid_and_show_secrets():
    token = b"admin\x00alice\x00" + PLAIN_PASSWORD.encode()
    d = parse_token("PLAIN", token, True, show_secrets=True)
    assert d["authorization_id"] == "admin"
    assert d["username"] == "alice"
    assert d["password"] == PLAIN_PASSWORD
    assert PLAIN_PASSWORD in json.dumps(d, ensure_ascii=False)


@pytest.mark.parametrize("token", [
    b"alice" + PLAIN_PASSWORD.encode(),                 # no NULs
    b"\x00alice\x00" + PLAIN_PASSWORD.encode() + b"\x00x",   # three NULs
    b"\x00\x00" + PLAIN_PASSWORD.encode(),              # empty authcid
    b"\x00al\xffice\x00" + PLAIN_PASSWORD.encode(),     # not UTF-8
])
def test_plain_malformed_is_all_redacted(token):
    d = parse_token("PLAIN", token, True)
    assert d["message"] == "opaque"
    assert d["token"] == Redacted("sasl token", len(token))
    assert "parse_error" in d
    assert_hidden(dump(d), PLAIN_PASSWORD, token)


def test_plain_server_data_is_redacted():
    d = parse_token("PLAIN", b"unexpected", False)
    assert d["message"] == "opaque" and isinstance(d["token"], Redacted)


# --------------------------------------------------------------------------- SCRAM

def scram_exchange(hash_name: str, username: str, password: str, client_nonce: str,
                   server_nonce: str, salt: bytes, iterations: int, extensions: str = ""):
    """A full RFC 5802 exchange, computed here: (client-first, server-first, client-final,
    server-final, proof bytes, server signature bytes)."""
    def h(data):
        return hashlib.new(hash_name, data).digest()

    def mac(key, msg):
        return hmac.new(key, msg, hash_name).digest()

    saslname = username.replace("=", "=3D").replace(",", "=2C")
    client_first_bare = f"n={saslname},r={client_nonce}{extensions}"
    client_first = "n,," + client_first_bare
    nonce = client_nonce + server_nonce
    server_first = f"r={nonce},s={base64.b64encode(salt).decode()},i={iterations}"
    without_proof = f"c={base64.b64encode(b'n,,').decode()},r={nonce}"
    auth_message = ",".join([client_first_bare, server_first, without_proof]).encode()
    salted = hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, iterations)
    client_key = mac(salted, b"Client Key")
    signature = mac(h(client_key), auth_message)
    proof = bytes(a ^ b for a, b in zip(client_key, signature))
    server_signature = mac(mac(salted, b"Server Key"), auth_message)
    client_final = f"{without_proof},p={base64.b64encode(proof).decode()}"
    server_final = f"v={base64.b64encode(server_signature).decode()}"
    return (client_first.encode(), server_first.encode(), client_final.encode(),
            server_final.encode(), proof, server_signature)


def test_scram_helper_matches_rfc7677_vector():
    cf, sf, cfin, sfin, _, _ = scram_exchange(
        "sha256", "user", "pencil", "rOprNGfwEbeRWgbNEkqO", "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
        base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="), 4096)
    assert cf == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    assert sf == (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                  b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    assert cfin == (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert sfin == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


@pytest.mark.parametrize("mech,hash_name,size", [("SCRAM-SHA-256", "sha256", 32),
                                                 ("SCRAM-SHA-512", "sha512", 64)])
def test_scram_full_exchange(mech, hash_name, size):
    password = "correct horse battery staple"
    salt = os.urandom(16)
    cf, sf, cfin, sfin, proof, server_sig = scram_exchange(
        hash_name, "bob,the=admin", password, "fyko+d2lbbFgONRv9qkxdawL",
        "3rfcNHYJY1ZVvWVs7j", salt, 4096)
    first = parse_token(mech, cf, True)
    assert first["message"] == "client_first"
    assert first["username"] == "bob,the=admin"
    assert first["gs2_header"] == "n,,"
    assert first["channel_binding_flag"] == "n"
    assert first["nonce"] == "fyko+d2lbbFgONRv9qkxdawL"

    server_first = parse_token(mech, sf, False)
    assert server_first["message"] == "server_first"
    assert server_first["iterations"] == 4096
    assert server_first["salt"] == base64.b64encode(salt).decode()   # salt is not secret
    assert server_first["salt_size_bytes"] == 16
    assert server_first["nonce"] == "fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j"

    final = parse_token(mech, cfin, True)
    assert final["message"] == "client_final"
    assert final["channel_binding"] == "biws"
    assert final["channel_binding_header"] == "n,,"
    assert final["nonce"] == server_first["nonce"]
    assert final["proof"] == Redacted("scram client proof", size)

    server_final = parse_token(mech, sfin, False)
    assert server_final["message"] == "server_final"
    assert server_final["verifier"] == Redacted("scram server signature", size)

    text = dump([first, server_first, final, server_final])
    assert "bob,the=admin" in text
    assert_hidden(text, password, proof, server_sig, cfin, sfin)

    shown = [parse_token(mech, t, c, show_secrets=True)
             for t, c in ((cf, True), (sf, False), (cfin, True), (sfin, False))]
    assert shown[2]["proof"] == base64.b64encode(proof).decode()
    assert shown[3]["verifier"] == base64.b64encode(server_sig).decode()


def test_scram_delegation_token_extension_and_authzid():
    d = parse_token("SCRAM-SHA-512", b"n,a=other,n=tokenid123,r=abc,tokenauth=true", True)
    assert d["username"] == "tokenid123"
    assert d["authorization_id"] == "other"
    assert d["extensions"] == {"tokenauth": "true"}


def test_scram_server_error():
    d = parse_token("SCRAM-SHA-256", b"e=invalid-proof", False)
    assert d["message"] == "server_final"
    assert d["error"] == "invalid-proof"
    assert "verifier" not in d


@pytest.mark.parametrize("token,client", [
    (b"x,,n=user,r=abc", True),            # bad cbind flag
    (b"n,,r=abc,n=user", True),            # wrong order
    (b"c=biws,r=abc,p=" + b"A" * 44 + b",x=1", True),    # p= not last
    (b"c=biws,r=abc", True),               # no proof
    (b"r=abc,i=4096", False),              # no salt
    (b"r=abc,s=AAAA,i=many", False),       # bad iterations
    (b"n,,n=us=ZZer,r=abc", True),         # bad saslname escape
    (b"\x01\x02binary", True),
])
def test_scram_malformed_is_all_redacted(token, client):
    d = parse_token("SCRAM-SHA-256", token, client)
    assert d["message"] == "opaque"
    assert isinstance(d["token"], Redacted)
    assert_hidden(dump(d), token)


# --------------------------------------------------------------------------- OAUTHBEARER

def make_jwt(claims: dict) -> str:
    def part(obj):
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")
    sig = base64.urlsafe_b64encode(os.urandom(64)).decode().rstrip("=")
    return f"{part({'alg': 'RS256', 'typ': 'JWT', 'kid': 'key-1'})}.{part(claims)}.{sig}"


JWT = make_jwt({"sub": "svc-orders", "scope": "kafka-secret-scope", "exp": 1893456000})


def oauth_token(jwt: str = JWT, authzid: str = "", extra: str = "") -> bytes:
    gs2 = f"n,a={authzid}," if authzid else "n,,"
    return f"{gs2}\x01auth=Bearer {jwt}\x01{extra}\x01".encode()


def test_oauthbearer_client_token_redacted():
    d = parse_token("OAUTHBEARER", oauth_token(extra="traceId=abc123\x01"), True)
    assert d["message"] == "client_initial"
    assert d["auth_scheme"] == "Bearer"
    assert d["token"] == Redacted("oauth token", len(JWT))
    assert d["extensions"] == {"traceId": "abc123"}
    assert d["subject"] == "svc-orders"     # who authenticates, like a PLAIN user name
    text = dump(d)
    assert "jwt" not in text and "claims" not in text
    header, claims, sig = JWT.split(".")
    assert_hidden(text, JWT, header, claims, sig, "kafka-secret-scope")


def test_oauthbearer_show_secrets_decodes_jwt():
    d = parse_token("OAUTHBEARER", oauth_token(authzid="svc"), True, show_secrets=True)
    assert d["token"] == JWT
    assert d["authorization_id"] == "svc"
    assert d["jwt"]["claims"]["sub"] == "svc-orders"
    assert d["jwt"]["header"]["alg"] == "RS256"


def test_oauthbearer_server_error_and_ack():
    err = {"status": "invalid_token", "scope": "kafka", "openid-configuration": "https://x"}
    d = parse_token("OAUTHBEARER", json.dumps(err).encode(), False)
    assert d["message"] == "server_error" and d["error"] == err
    assert parse_token("OAUTHBEARER", b"\x01", True)["message"] == "client_error_ack"


@pytest.mark.parametrize("token", [
    f"n,,auth=Bearer {JWT}".encode(),                 # no 0x01 framing
    f"n,,\x01auth=Bearer {JWT}\x01".encode(),          # not terminated by 0x01 0x01
    b"n,,\x01host=x\x01\x01",                          # no auth
    f"n,,\x01auth=Bearer{JWT}\x01\x01".encode(),       # no space
], ids=["no-framing", "not-terminated", "no-auth", "no-space"])   # JWT is signed afresh
def test_oauthbearer_malformed_is_all_redacted(token):
    d = parse_token("OAUTHBEARER", token, True)
    assert d["message"] == "opaque"
    assert_hidden(dump(d), JWT, token)


def test_oauthbearer_server_non_json_redacted():
    d = parse_token("OAUTHBEARER", b"eyJhbGciOi.secret", False)
    assert d["message"] == "opaque" and isinstance(d["token"], Redacted)


# --------------------------------------------------------------------------- GSSAPI / other

KRB_PAYLOAD = os.urandom(200) + b"KERBEROS-TICKET-ENC-PART"
GSS_TOKEN = (b"\x60\x82\x00\xf1" + b"\x06\x09\x2a\x86\x48\x86\xf7\x12\x01\x02\x02"
             + b"\x01\x00" + KRB_PAYLOAD)


def test_gssapi_token_redacted():
    for client in (True, False):
        d = parse_token("GSSAPI", GSS_TOKEN, client)
        assert d["message"] == "opaque"
        assert d["token"] == Redacted("gssapi token", len(GSS_TOKEN))
        assert "initial context" in d["format"]
        assert_hidden(dump(d), GSS_TOKEN, KRB_PAYLOAD, "KERBEROS-TICKET-ENC-PART")
    shown = parse_token("GSSAPI", GSS_TOKEN, True, show_secrets=True)
    assert base64.b64decode(shown["token"]) == GSS_TOKEN


@pytest.mark.parametrize("mech", [None, "FOO", "DIGEST-MD5"])
def test_unknown_mechanism_redacts_everything(mech):
    token = b"\x00alice\x00" + PLAIN_PASSWORD.encode()
    d = parse_token(mech, token, True)
    assert d["token"] == Redacted("sasl token", len(token))
    assert_hidden(dump(d), PLAIN_PASSWORD, token, "alice")


@pytest.mark.parametrize("mech", MECHANISMS)
def test_garbage_does_not_raise(mech):
    garbage = bytes(range(256)) * 3
    for client in (True, False):
        d = parse_token(mech, garbage, client)
        assert d["message"] == "opaque"
        assert isinstance(d["token"], Redacted)
        dump(d)


@settings(max_examples=300, deadline=None)
@given(mech=st.sampled_from(MECHANISMS), token=st.binary(max_size=300),
       client=st.booleans(), show=st.booleans())
def test_parse_token_never_raises_on_random_bytes(mech, token, client, show):
    d = parse_token(mech, token, client, show_secrets=show)
    assert d["size_bytes"] == len(token)
    json.dumps(d, default=_default)
    if d["message"] == "opaque" and not show:
        assert d["token"] == Redacted(d["token"].what, len(token))


@settings(max_examples=300, deadline=None)
@given(mech=st.sampled_from(MECHANISMS),
       token=st.text(alphabet="nrcpsive=,a\x00\x01 BearerAUTH0123+/", max_size=80),
       client=st.booleans())
def test_parse_token_never_raises_on_grammar_like_text(mech, token, client):
    json.dumps(parse_token(mech, token.encode(), client), default=_default)


@settings(max_examples=200, deadline=None)
@given(password=st.text(alphabet="!#$%&*+-~^|?0123456789", min_size=6, max_size=40))
def test_plain_random_password_never_leaks(password):
    text = dump(parse_token("PLAIN", b"\x00alice\x00" + password.encode(), True))
    assert password not in text
    assert "alice" in text


# --------------------------------------------------------------------------- bodies

def test_redact_body_sasl_authenticate():
    req = {"auth_bytes": PLAIN_TOKEN}
    redact_body(36, False, req, "PLAIN")
    assert req["auth_bytes"]["username"] == "alice"
    assert isinstance(req["auth_bytes"]["password"], Redacted)
    assert_hidden(dump(req), PLAIN_PASSWORD, PLAIN_TOKEN)
    before = copy.deepcopy(req)
    redact_body(36, False, req, "PLAIN")          # idempotent
    assert req == before

    _, _, _, sfin, _, sig = scram_exchange("sha256", "u", "pw-pw-pw-pw", "aaaa", "bbbb",
                                           b"saltsaltsalt", 4096)
    resp = {"error_code": 0, "error_message": None, "auth_bytes": sfin,
            "session_lifetime_ms": 0}
    redact_body(36, True, resp, "SCRAM-SHA-256")
    assert resp["auth_bytes"]["message"] == "server_final"
    assert_hidden(dump(resp), sfin, sig)

    shown = {"auth_bytes": PLAIN_TOKEN}
    redact_body(36, False, shown, "PLAIN", show_secrets=True)
    assert shown["auth_bytes"]["password"] == PLAIN_PASSWORD


def test_redact_body_alter_user_scram_credentials():
    salted = os.urandom(32)
    salt = os.urandom(16)
    body = {"deletions": [{"name": "old", "mechanism": 1}],
            "upsertions": [{"name": "alice", "mechanism": 1, "iterations": 8192,
                            "salt": salt, "salted_password": salted}]}
    redact_body(51, False, body, None)
    up = body["upsertions"][0]
    assert up["salt"] == Redacted("salt", 16)
    assert up["salted_password"] == Redacted("salted password", 32)
    text = dump(body)
    assert "alice" in text and "8192" in text
    assert_hidden(text, salted, salt)
    kept = {"upsertions": [{"name": "a", "salt": salt, "salted_password": salted}]}
    redact_body(51, False, kept, None, show_secrets=True)
    assert kept["upsertions"][0]["salted_password"] == salted


@pytest.mark.parametrize("api_key,is_response,make", [
    (38, True, lambda h: {"error_code": 0, "token_id": "tok-1", "hmac": h}),
    (41, True, lambda h: {"error_code": 0, "tokens": [{"token_id": "tok-1", "hmac": h,
                                                       "renewers": []}]}),
    (39, False, lambda h: {"hmac": h, "renew_period_ms": 1000}),
    (40, False, lambda h: {"hmac": h, "expiry_time_period_ms": -1}),
])
def test_redact_body_delegation_tokens(api_key, is_response, make):
    mac = os.urandom(64)
    body = make(mac)
    redact_body(api_key, is_response, body, None)
    text = dump(body)
    assert '"redacted": "hmac"' in text and '"size_bytes": 64' in text
    assert_hidden(text, mac)
    shown = make(mac)
    redact_body(api_key, is_response, shown, None, show_secrets=True)
    assert shown == make(mac)


@pytest.mark.parametrize("api_key", [33, 44])
def test_redact_body_alter_configs(api_key):
    body = {"resources": [{"resource_type": 4, "resource_name": "1", "configs": [
        {"name": "listener.name.sasl_ssl.plain.sasl.jaas.config",
         "value": 'PlainLoginModule required username="admin" password="adm1n-Secret";'},
        {"name": "ssl.keystore.password", "value": "ks-Secret-99"},
        {"name": "log.retention.ms", "value": "86400000"},
        {"name": "ssl.keystore.password", "value": None},
    ]}], "validate_only": False}
    redact_body(api_key, False, body, None)
    text = dump(body)
    assert_hidden(text, "adm1n-Secret", "ks-Secret-99")
    assert "86400000" in text and "ssl.keystore.password" in text
    assert body["resources"][0]["configs"][3]["value"] is None


def test_redact_body_describe_configs_and_create_topics():
    body = {"results": [{"configs": [
        {"name": "custom.thing", "value": "hidden-Value-1", "is_sensitive": True,
         "synonyms": [{"name": "custom.thing", "value": "hidden-Value-2", "source": 5}]},
        {"name": "cleanup.policy", "value": "compact", "is_sensitive": False, "synonyms": []},
    ]}]}
    redact_body(32, True, body, None)
    text = dump(body)
    assert_hidden(text, "hidden-Value-1", "hidden-Value-2")
    assert "compact" in text
    topics = {"topics": [{"name": "t", "configs": [{"name": "some.password", "value": "pw-X1"},
                                                   {"name": "retention.ms", "value": "1"}]}]}
    redact_body(19, False, topics, None)
    assert isinstance(topics["topics"][0]["configs"][0]["value"], Redacted)
    assert topics["topics"][0]["configs"][1]["value"] == "1"


def test_redact_body_envelope():
    inner = b"\x00\x33\x00\x00" + os.urandom(40)
    req = {"request_data": inner, "request_principal": b"p", "client_host_address": b"\x7f\0\0\1"}
    redact_body(58, False, req, None)
    assert req["request_data"] == Redacted("enveloped request", len(inner))
    resp = {"response_data": inner, "error_code": 0}
    redact_body(58, True, resp, None)
    assert isinstance(resp["response_data"], Redacted)


def test_redact_body_other_apis_untouched_and_robust():
    body = {"topics": [{"name": "t"}], "hmac": b"x"}
    redact_body(3, False, body, None)
    assert body == {"topics": [{"name": "t"}], "hmac": b"x"}
    for api in (19, 32, 33, 36, 38, 39, 40, 41, 44, 51, 58):
        for resp in (False, True):
            redact_body(api, resp, None, None)
            redact_body(api, resp, {"resources": "x", "topics": [1, None], "results": None,
                                    "upsertions": [{"salt": 5}], "auth_bytes": None}, None)


def test_is_secret_api_and_sensitive_configs():
    for api in (33, 36, 38, 39, 40, 41, 44, 51, 58):
        assert is_secret_api(api)
    for api in (0, 1, 3, 17, 18, 19, 32):
        assert not is_secret_api(api)
    for name in ("ssl.key.password", "ssl.keystore.key", "ssl.truststore.certificates",
                 "sasl.jaas.config", "delegation.token.secret.key", "password.encoder.secret",
                 "sasl.oauthbearer.client.credentials.client.secret"):
        assert is_sensitive_config(name), name
    for name in ("retention.ms", "cleanup.policy", "ssl.keystore.type", "sasl.enabled.mechanisms"):
        assert not is_sensitive_config(name), name


# --------------------------------------------------------------------------- session

def test_session_handshake_v0_raw_phase_plain():
    s = SaslSession()
    assert not s.raw_phase and s.state == "none"
    s.observe(17, 0, False, {"mechanism": "PLAIN"})
    assert s.state == "handshake" and s.handshake_version == 0
    s.observe(17, 0, True, {"error_code": 0, "mechanisms": ["PLAIN", "SCRAM-SHA-256"]})
    assert s.raw_client and s.raw_server and s.state == "authenticating"
    assert s.enabled_mechanisms == ("PLAIN", "SCRAM-SHA-256")
    d = s.raw_token(True, PLAIN_TOKEN)
    assert d["username"] == "alice" and isinstance(d["password"], Redacted)
    assert s.server_frame_is_raw(b"", {7})
    s.raw_token(False, b"")
    assert s.state == "authenticated"
    s.end_raw_phase()
    assert not s.raw_client and s.raw_server
    assert not s.server_frame_is_raw(b"\x00\x00\x00\x07\x00\x00", {7})
    assert not s.raw_phase
    summary = s.to_json()
    assert summary["username"] == "alice" and summary["client_tokens"] == 1
    assert_hidden(json.dumps(summary), PLAIN_PASSWORD)


def test_session_v0_scram_server_tokens_lagging():
    cf, sf, cfin, sfin, _, _ = scram_exchange("sha512", "carol", "pw0rd-pw0rd", "cn", "sn",
                                              b"s" * 16, 4096)
    s = SaslSession()
    s.observe(17, 0, False, {"mechanism": "SCRAM-SHA-512"})
    s.observe(17, 0, True, {"error_code": 0, "mechanisms": ["SCRAM-SHA-512"]})
    s.raw_token(True, cf)
    s.raw_token(True, cfin)
    s.end_raw_phase()      # client already speaks Kafka; the broker's tokens come later
    for tok in (sf, sfin):
        assert s.server_frame_is_raw(tok, {1, 2})
        s.raw_token(False, tok)
    assert s.username == "carol" and s.state == "authenticated"
    assert not s.server_frame_is_raw(b"\x00\x00\x00\x02", {1, 2})


def test_session_handshake_v1_and_authenticate():
    cf, sf, cfin, sfin, _, _ = scram_exchange("sha256", "dave", "pw-dave-123", "c1", "s1",
                                              b"t" * 16, 4096)
    s = SaslSession()
    s.observe(17, 1, False, {"mechanism": "SCRAM-SHA-256"})
    s.observe(17, 1, True, {"error_code": 0, "mechanisms": ["SCRAM-SHA-256"]})
    assert not s.raw_phase and s.state == "authenticating"
    for is_resp, tok in ((False, cf), (True, sf), (False, cfin), (True, sfin)):
        body = {"auth_bytes": tok, "error_code": 0} if is_resp else {"auth_bytes": tok}
        if is_resp:
            redact_body(36, True, body, s.mechanism)   # either shape is accepted
        desc = s.observe(36, 2, is_resp, body)
        assert desc["mechanism"] == "SCRAM-SHA-256"
        assert not s.raw_phase
    assert s.username == "dave" and s.state == "authenticated"
    assert (s.client_tokens, s.server_tokens) == (2, 2)


def test_session_authenticate_failure():
    s = SaslSession()
    s.observe(17, 1, False, {"mechanism": "PLAIN"})
    s.observe(17, 1, True, {"error_code": 0, "mechanisms": ["PLAIN"]})
    s.observe(36, 2, False, {"auth_bytes": PLAIN_TOKEN})
    s.observe(36, 2, True, {"error_code": 58, "error_message": "Authentication failed",
                            "auth_bytes": b""})
    assert s.state == "failed" and "58" in s.error and "Authentication failed" in s.error
    assert s.username == "alice"


def test_session_handshake_rejected():
    s = SaslSession()
    s.observe(17, 1, False, {"mechanism": "GSSAPI"})
    s.observe(17, 1, True, {"error_code": 33, "mechanisms": ["PLAIN"]})
    assert s.state == "failed" and not s.raw_phase and s.enabled_mechanisms == ("PLAIN",)


def test_session_oauthbearer_server_error_fails():
    s = SaslSession()
    s.observe(17, 1, False, {"mechanism": "OAUTHBEARER"})
    s.observe(17, 1, True, {"error_code": 0, "mechanisms": ["OAUTHBEARER"]})
    s.observe(36, 2, False, {"auth_bytes": oauth_token(authzid="svc")})
    s.observe(36, 2, True, {"error_code": 0, "auth_bytes": b'{"status":"invalid_token"}'})
    assert s.state == "failed" and "invalid_token" in s.error
    assert s.username == "svc"


def test_session_gssapi_fallback_and_inferred_success():
    s = SaslSession()
    s.begin_raw_phase("GSSAPI")     # 0.9 client: first frame is not a Kafka request
    d = s.raw_token(True, GSS_TOKEN)
    assert isinstance(d["token"], Redacted)
    s.raw_token(False, b"\x60\x10" + os.urandom(16))
    assert s.state == "authenticating" and s.username is None
    s.end_raw_phase()
    assert s.state == "authenticated"


def test_session_note_request_and_other_apis():
    s = SaslSession()
    s.observe(17, 1, False, {"mechanism": "GSSAPI"})
    s.observe(17, 1, True, {"error_code": 0, "mechanisms": ["GSSAPI"]})
    s.observe(36, 1, False, {"auth_bytes": GSS_TOKEN})
    s.observe(36, 1, True, {"error_code": 0, "auth_bytes": b"\x60\x01\x00"})
    assert s.state == "authenticating"
    assert s.observe(3, 12, False, {"topics": None}) is None
    assert s.state == "authenticated"
    # a body-less SaslAuthenticate response: an empty server token, the state kept
    assert s.observe(36, 1, True, None) == {"mechanism": "GSSAPI", "direction": "server",
                                            "size_bytes": 0, "message": "empty"}
    assert s.state == "authenticated" and s.server_tokens == 2


def test_redacted_apis_cover_every_api_redact_body_changes():
    """The pairing code calls redact_body only for REDACTED_APIS: every API whose bodies it
    changes must be listed (a sensitive config in CreateTopics, say)."""
    from kafkasniff.content.sasl import REDACTED_APIS, redact_body

    for api_key in range(0, 100):
        for is_response in (False, True):
            body = {"auth_bytes": b"\0u\0p", "hmac": b"x" * 8,
                    "upsertions": [{"salt": b"s" * 8, "salted_password": b"p" * 8}],
                    "tokens": [{"hmac": b"x" * 8}],
                    "resources": [{"configs": [{"name": "ssl.key.password", "value": "pw"}]}],
                    "results": [{"configs": [{"name": "ssl.key.password", "value": "pw",
                                              "is_sensitive": True, "synonyms": []}]}],
                    "topics": [{"configs": [{"name": "ssl.key.password", "value": "pw",
                                             "is_sensitive": True}]}],
                    "request_data": b"r" * 8, "response_data": b"r" * 8}
            before = repr(body)
            redact_body(api_key, is_response, body, "PLAIN")
            if repr(body) != before:
                assert api_key in REDACTED_APIS, api_key
