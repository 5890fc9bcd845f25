"""SASL: parsing authentication tokens, tracking a connection's SASL state, hiding secrets.

Kafka authenticates SASL listeners with SaslHandshake (api_key 17) then either raw
size-prefixed SASL tokens (handshake v0, KIP-43) or SaslAuthenticate (api_key 36) requests
carrying the tokens in ``auth_bytes`` (handshake v1+, KIP-152). The tokens follow the
mechanism's own RFC:

* PLAIN (RFC 4616): ``authzid NUL authcid NUL passwd``.
* SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677; Kafka KIP-84, delegation tokens KIP-48
  with the ``tokenauth=true`` extension).
* OAUTHBEARER (RFC 7628; Kafka KIP-255, extensions KIP-342).
* GSSAPI (RFC 4752, Kerberos): opaque ASN.1 / wrapped tokens.

Secrets (passwords, SCRAM proofs and server signatures, bearer tokens, Kerberos tickets,
delegation-token HMACs, salted SCRAM credentials, sensitive config values) never reach any
output unless the user passes ``--show-secrets``: they are replaced by :class:`Redacted`
values, which keep only what the secret is and its size. When a token cannot be understood,
all of it is redacted (never leak when unsure).

Everything here is pure: no I/O, and nothing raises on malformed input.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Container

from kafkasniff.protocol.apis import (
    ALTER_CONFIGS,
    ALTER_USER_SCRAM_CREDENTIALS,
    CREATE_DELEGATION_TOKEN,
    CREATE_TOPICS,
    DESCRIBE_CONFIGS,
    DESCRIBE_DELEGATION_TOKEN,
    ENVELOPE,
    EXPIRE_DELEGATION_TOKEN,
    INCREMENTAL_ALTER_CONFIGS,
    RENEW_DELEGATION_TOKEN,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
)

__all__ = [
    "REDACTED_APIS", "Redacted", "SaslSession", "is_secret_api", "is_sensitive_config",
    "mechanism_family", "parse_token", "redact_body",
]

# APIs whose bodies may carry secrets: when their decode fails the raw bytes must not be shown.
_SECRET_APIS = frozenset({
    SASL_AUTHENTICATE, ALTER_CONFIGS, CREATE_DELEGATION_TOKEN, RENEW_DELEGATION_TOKEN,
    EXPIRE_DELEGATION_TOKEN, DESCRIBE_DELEGATION_TOKEN, INCREMENTAL_ALTER_CONFIGS,
    ALTER_USER_SCRAM_CREDENTIALS, ENVELOPE,
})


@dataclass(frozen=True, slots=True)
class Redacted:
    """A secret that was removed: what it was and how many bytes it had.

    Attributes:
        what: e.g. ``"password"``, ``"scram client proof"``, ``"oauth token"``,
            ``"gssapi token"``, ``"hmac"``, ``"salted password"``.
        size_bytes: length of the secret as carried (for text, its UTF-8 length; for SCRAM
            proofs and signatures, the decoded binary length).
    """

    what: str
    size_bytes: int

    def to_json(self) -> dict:
        """``{"redacted": what, "size_bytes": n}``."""
        return {"redacted": self.what, "size_bytes": self.size_bytes}

    def __str__(self) -> str:
        return f"<redacted {self.what}, {self.size_bytes} bytes>"


def mechanism_family(mechanism: str | None) -> str:
    """``"PLAIN" | "SCRAM" | "OAUTHBEARER" | "GSSAPI" | "OTHER"`` (case-insensitive).

    ``SCRAM-SHA-256`` / ``SCRAM-SHA-512`` (any ``SCRAM-`` name) are ``"SCRAM"``; ``None``
    and everything unknown is ``"OTHER"``.
    """
    if not isinstance(mechanism, str):
        return "OTHER"
    m = mechanism.strip().upper()
    if m == "PLAIN":
        return "PLAIN"
    if m.startswith("SCRAM-"):
        return "SCRAM"
    if m == "OAUTHBEARER":
        return "OAUTHBEARER"
    if m == "GSSAPI":
        return "GSSAPI"
    return "OTHER"


# ----------------------------------------------------------------------------- helpers

class _Unparseable(ValueError):
    """Internal: the token does not follow the mechanism's grammar."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _secret_text(what: str, text: str, show: bool) -> Redacted | str:
    return text if show else Redacted(what, len(text.encode("utf-8", "surrogatepass")))


def _secret_b64(what: str, b64text: str, show: bool) -> Redacted | str:
    """A base64 secret as written on the wire; its size is the decoded length."""
    if show:
        return b64text
    try:
        size = len(base64.b64decode(b64text, validate=True))
    except (binascii.Error, ValueError):
        size = len(b64text)
    return Redacted(what, size)


def _secret_bytes(what: str, data: bytes, show: bool) -> Redacted | str:
    """Binary secret: base64 text when shown."""
    return _b64(data) if show else Redacted(what, len(data))


def _text(token: bytes) -> str:
    try:
        return token.decode("utf-8")
    except UnicodeDecodeError:
        raise _Unparseable("not UTF-8") from None


def _printable(s: str) -> bool:
    return all(c >= " " and c != "\x7f" for c in s)


# ----------------------------------------------------------------------------- PLAIN

def _parse_plain(token: bytes, from_client: bool, show: bool) -> dict:
    if not from_client:
        raise _Unparseable("PLAIN servers send no data")
    parts = token.split(b"\x00")
    if len(parts) != 3:
        raise _Unparseable(f"{len(parts) - 1} NUL separators, expected 2")
    authzid, authcid, passwd = (_text(p) for p in parts)
    if not authcid or not _printable(authzid) or not _printable(authcid):
        raise _Unparseable("empty or non-printable authentication identity")
    return {
        "message": "client_initial",
        "authorization_id": authzid or None,
        "username": authcid,
        "password": _secret_text("password", passwd, show),
    }


# ----------------------------------------------------------------------------- SCRAM

# RFC 5802 attributes are one letter; Kafka's SCRAM extensions (e.g. ``tokenauth=true``,
# KIP-48) use longer names.
_SCRAM_ATTR = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*=")


def _saslname(value: str) -> str:
    """RFC 5802 saslname: ``=2C`` is ``,`` and ``=3D`` is ``=``; other ``=`` are invalid."""
    out = []
    i = 0
    while i < len(value):
        c = value[i]
        if c == "=":
            esc = value[i:i + 3]
            if esc == "=2C":
                out.append(",")
            elif esc == "=3D":
                out.append("=")
            else:
                raise _Unparseable("bad saslname escape")
            i += 3
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _scram_attrs(text: str) -> list[tuple[str, str]]:
    attrs = []
    for part in text.split(","):
        if not _SCRAM_ATTR.match(part):
            raise _Unparseable("attribute is not a=value")
        key, _, value = part.partition("=")
        attrs.append((key, value))
    return attrs


def _gs2_header(text: str) -> tuple[dict, str]:
    """Split ``gs2-cbind-flag "," [authzid] ","`` off a client-first message (RFC 5802 s7)."""
    flag_end = text.find(",")
    if flag_end < 0:
        raise _Unparseable("no gs2 header")
    flag = text[:flag_end]
    if not (flag in ("n", "y") or (flag.startswith("p=") and len(flag) > 2)):
        raise _Unparseable("bad gs2 channel binding flag")
    az_end = text.find(",", flag_end + 1)
    if az_end < 0:
        raise _Unparseable("gs2 header not terminated")
    authzid = text[flag_end + 1:az_end]
    if authzid and not authzid.startswith("a="):
        raise _Unparseable("bad gs2 authzid")
    header = {
        "gs2_header": text[:az_end + 1],
        "channel_binding_flag": flag,
        "authorization_id": _saslname(authzid[2:]) if authzid else None,
    }
    return header, text[az_end + 1:]


def _extensions(attrs: list[tuple[str, str]], known: str) -> dict:
    """Attributes other than the single-letter ones in ``known``."""
    return {k: v for k, v in attrs if not (len(k) == 1 and k in known)}


def _parse_scram(token: bytes, from_client: bool, show: bool) -> dict:
    text = _text(token)
    if not _printable(text):
        raise _Unparseable("control characters")
    if from_client:
        if text.startswith("c="):
            attrs = _scram_attrs(text)
            keys = [k for k, _ in attrs]
            if keys[0] != "c" or "r" not in keys or keys[-1] != "p" or keys.count("p") != 1:
                raise _Unparseable("client-final needs c=, r= and a final p=")
            d = dict(attrs)
            out = {"message": "client_final", "channel_binding": d["c"]}
            try:
                cb = base64.b64decode(d["c"], validate=True)
                if cb.isascii() and _printable(cb.decode("ascii")):
                    out["channel_binding_header"] = cb.decode("ascii")
            except (binascii.Error, ValueError):
                pass
            out["nonce"] = d["r"]
            ext = _extensions(attrs, "crp")
            if ext:
                out["extensions"] = ext
            out["proof"] = _secret_b64("scram client proof", d["p"], show)
            return out
        header, bare = _gs2_header(text)
        attrs = _scram_attrs(bare)
        if attrs and attrs[0][0] == "m":    # reserved-mext, kept as an extension
            attrs_core = attrs[1:]
        else:
            attrs_core = attrs
        if len(attrs_core) < 2 or attrs_core[0][0] != "n" or attrs_core[1][0] != "r":
            raise _Unparseable("client-first needs n= then r=")
        out = {"message": "client_first", **header,
               "username": _saslname(attrs_core[0][1]), "nonce": attrs_core[1][1]}
        ext = _extensions(attrs, "nr")
        if ext:
            out["extensions"] = ext
        return out
    # server side
    attrs = _scram_attrs(text)
    d = dict(attrs)
    keys = [k for k, _ in attrs]
    if keys and keys[0] in ("v", "e"):
        out: dict[str, Any] = {"message": "server_final"}
        if "e" in d and keys[0] == "e":
            out["error"] = d["e"]
        else:
            out["verifier"] = _secret_b64("scram server signature", d["v"], show)
        ext = _extensions(attrs, "ve")
        if ext:
            out["extensions"] = ext
        return out
    core = keys[1:] if keys and keys[0] == "m" else keys
    if core[:3] != ["r", "s", "i"]:
        raise _Unparseable("server-first needs r=, s=, i=")
    try:
        iterations = int(d["i"])
    except ValueError:
        raise _Unparseable("iteration count is not a number") from None
    out = {"message": "server_first", "nonce": d["r"], "salt": d["s"], "iterations": iterations}
    try:
        out["salt_size_bytes"] = len(base64.b64decode(d["s"], validate=True))
    except (binascii.Error, ValueError):
        pass
    ext = _extensions(attrs, "rsi")
    if ext:
        out["extensions"] = ext
    return out


# ----------------------------------------------------------------------------- OAUTHBEARER

def _b64url_json(part: str) -> Any:
    raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    return json.loads(raw.decode("utf-8"))


def _jwt(token: str) -> dict | None:
    """The header and claims of a compact JWS (RFC 7519), ``None`` when not one."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        header, claims = _b64url_json(parts[0]), _b64url_json(parts[1])
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        return None
    return {"header": header, "claims": claims}


def _parse_oauthbearer(token: bytes, from_client: bool, show: bool) -> dict:
    text = _text(token)
    if from_client:
        if text == "\x01":
            return {"message": "client_error_ack"}
        header, rest = _gs2_header(text)
        if not rest.startswith("\x01") or not rest.endswith("\x01\x01"):
            raise _Unparseable("kvpairs must be framed by 0x01")
        pairs = rest[1:-2].split("\x01") if len(rest) > 3 else []
        out: dict[str, Any] = {"message": "client_initial", **header}
        extensions: dict[str, str] = {}
        auth = None
        for pair in pairs:
            key, sep, value = pair.partition("=")
            if not sep or not key.isalnum() or not key.isascii():
                raise _Unparseable("bad kvpair")
            if key == "auth":
                if auth is not None:
                    raise _Unparseable("two auth kvpairs")
                auth = value
            else:
                if not _printable(value):
                    raise _Unparseable("control characters in a kvpair")
                extensions[key] = value
        if auth is None:
            raise _Unparseable("no auth kvpair")
        scheme, sep, credential = auth.partition(" ")
        if not sep or not scheme.isalpha():
            raise _Unparseable("auth kvpair is not '<scheme> <token>'")
        out["auth_scheme"] = scheme
        credential = credential.strip(" ")
        out["token"] = _secret_text("oauth token", credential, show)
        jwt = _jwt(credential)
        if jwt is not None:
            # the subject is who authenticates (Kafka's principal by default,
            # sasl.oauthbearer.sub.claim.name): shown like a PLAIN or SCRAM user name; the
            # token and its other claims stay withheld
            sub = jwt["claims"].get("sub")
            if isinstance(sub, str) and _printable(sub):
                out["subject"] = sub
            if show:
                out["jwt"] = jwt
        if extensions:
            out["extensions"] = extensions
        return out
    # server: a JSON error (RFC 7628 s3.2.2); success carries no data
    try:
        err = json.loads(text)
    except ValueError:
        raise _Unparseable("server message is not JSON") from None
    if not isinstance(err, dict):
        raise _Unparseable("server message is not a JSON object")
    return {"message": "server_error", "error": err}


# ----------------------------------------------------------------------------- tokens

def parse_token(mechanism: str | None, token: bytes, from_client: bool,
                show_secrets: bool = False) -> dict:
    """Describe one SASL token as a JSON-ready dict, secrets replaced by :class:`Redacted`.

    Args:
        mechanism: the SASL mechanism negotiated by SaslHandshake (``None`` if unknown).
        token: the token bytes (SaslAuthenticate ``auth_bytes`` or a raw KIP-43 frame).
        from_client: True for client -> broker tokens.
        show_secrets: keep secret values (``--show-secrets``): text secrets as text, binary
            ones as base64 text.

    Returns:
        Always ``{"mechanism": <as given>, "size_bytes": n, ...}`` plus, by mechanism:
        PLAIN client ``message="client_initial"``, ``authorization_id``, ``username``,
        ``password``; SCRAM ``message`` one of ``client_first`` (``gs2_header``,
        ``channel_binding_flag``, ``authorization_id``, ``username``, ``nonce``,
        ``extensions``), ``server_first`` (``nonce``, ``salt`` base64, ``salt_size_bytes``,
        ``iterations``), ``client_final`` (``channel_binding``, ``channel_binding_header``,
        ``nonce``, ``proof``), ``server_final`` (``verifier`` or ``error``); OAUTHBEARER
        client ``client_initial`` (``gs2_header``, ``authorization_id``, ``auth_scheme``,
        ``token``, ``extensions``; ``jwt`` header/claims only when shown), ``client_error_ack``,
        server ``server_error`` (``error``: the JSON object). An empty token is
        ``message="empty"``. GSSAPI, unknown mechanisms and tokens that do not follow the
        grammar are ``message="opaque"`` with the whole ``token`` redacted (and
        ``parse_error`` saying why, for known mechanisms). Never raises.
    """
    try:
        data = bytes(token) if token is not None else b""
    except (TypeError, ValueError):
        data = b""
    out: dict[str, Any] = {"mechanism": mechanism if isinstance(mechanism, str) else None,
                           "direction": "client" if from_client else "server",
                           "size_bytes": len(data)}
    if not data:
        out["message"] = "empty"
        return out
    family = mechanism_family(mechanism)
    parser = {"PLAIN": _parse_plain, "SCRAM": _parse_scram,
              "OAUTHBEARER": _parse_oauthbearer}.get(family)
    if parser is not None:
        try:
            out.update(parser(data, from_client, show_secrets))
            return out
        except _Unparseable as exc:
            out["parse_error"] = str(exc)
        except Exception as exc:   # noqa: BLE001 - never raise on garbage, never leak
            out["parse_error"] = f"unparseable ({type(exc).__name__})"
    out["message"] = "opaque"
    if family == "GSSAPI":
        what = "gssapi token"
        if data[0] == 0x60:
            out["format"] = "gss initial context token (RFC 2743)"
    else:
        what = "sasl token"
    out["token"] = _secret_bytes(what, data, show_secrets)
    return out


# ----------------------------------------------------------------------------- bodies

_SENSITIVE_CONFIG = re.compile(
    r"password|passphrase|secret|jaas|credential|private|keystore\.key|certificate|"
    r"\.key$|master\.key|token\.key",
    re.IGNORECASE)


def is_sensitive_config(name: object) -> bool:
    """Whether a Kafka config name holds a secret (Kafka's PASSWORD-type configs).

    Matches names such as ``ssl.keystore.password``, ``ssl.key.password``,
    ``ssl.keystore.key``, ``ssl.keystore.certificate.chain``, ``ssl.truststore.certificates``,
    ``sasl.jaas.config``, ``listener.name.<l>.<mech>.sasl.jaas.config``,
    ``delegation.token.secret.key``, ``password.encoder.secret``, and any client secret.
    A non-string name counts as sensitive.
    """
    if not isinstance(name, str):
        return True
    return _sensitive_name(name)


@lru_cache(maxsize=4096)
def _sensitive_name(name: str) -> bool:
    # a DescribeConfigs response names hundreds of configs, the same ones each time
    return bool(_SENSITIVE_CONFIG.search(name))


def is_secret_api(api_key: int) -> bool:
    """Bodies of these APIs may carry secrets and must not be shown raw when decoding failed.

    SaslAuthenticate (36), AlterConfigs (33), IncrementalAlterConfigs (44), Create/Renew/
    Expire/DescribeDelegationToken (38-41), AlterUserScramCredentials (51), Envelope (58).
    """
    return api_key in _SECRET_APIS


def _items(value: object) -> list:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _redact_field(holder: dict, key: str, what: str, show: bool) -> None:
    if show or key not in holder:
        return
    value = holder[key]
    if value is None or isinstance(value, Redacted):
        return
    if isinstance(value, (bytes, bytearray, memoryview)):
        size = len(value)
    elif isinstance(value, str):
        size = len(value.encode("utf-8", "surrogatepass"))
    else:
        size = 0
    holder[key] = Redacted(what, size)


def _redact_configs(configs: object, show: bool, sensitive_flag: bool = False) -> None:
    for cfg in _items(configs):
        sensitive = bool(cfg.get("is_sensitive")) or sensitive_flag or \
            is_sensitive_config(cfg.get("name"))
        if sensitive:
            _redact_field(cfg, "value", "config value", show)
        for syn in _items(cfg.get("synonyms")):
            if sensitive or is_sensitive_config(syn.get("name")):
                _redact_field(syn, "value", "config value", show)


def redact_body(api_key: int, is_response: bool, body: dict, mechanism: str | None,
                show_secrets: bool = False) -> None:
    """Replace secrets in a decoded body, in place (idempotent).

    * SaslAuthenticate (36) request/response ``auth_bytes`` -> :func:`parse_token` dict
      (parsed also when ``show_secrets``; the dict then keeps the values).
    * AlterUserScramCredentials (51) request ``upsertions[].salt`` / ``.salted_password``.
    * CreateDelegationToken (38) response ``hmac``; DescribeDelegationToken (41) response
      ``tokens[].hmac``; RenewDelegationToken (39) / ExpireDelegationToken (40) request ``hmac``.
    * AlterConfigs (33) / IncrementalAlterConfigs (44) request ``resources[].configs[].value``
      and CreateTopics (19) request ``topics[].configs[].value`` when the config name is
      sensitive (:func:`is_sensitive_config`).
    * DescribeConfigs (32) response ``results[].configs[].value`` (and ``synonyms[].value``)
      and CreateTopics (19) response ``topics[].configs[].value`` when ``is_sensitive`` or
      the name is sensitive (brokers normally send null there already).
    * Envelope (58) request ``request_data`` and response ``response_data`` (a whole
      forwarded request/response that may be any of the above) while still raw bytes.

    ``body`` may be ``None`` or of an unexpected shape: then nothing happens. Never raises.
    """
    if not isinstance(body, dict):
        return
    try:
        _redact_body(api_key, is_response, body, mechanism, show_secrets)
    except Exception:   # noqa: BLE001 - a malformed body must not break the pipeline
        pass


def _redact_body(api_key: int, is_response: bool, body: dict, mechanism: str | None,
                 show: bool) -> None:
    if api_key == SASL_AUTHENTICATE:
        raw = body.get("auth_bytes")
        if isinstance(raw, (bytes, bytearray, memoryview)):
            body["auth_bytes"] = parse_token(mechanism, bytes(raw), not is_response, show)
    elif api_key == ALTER_USER_SCRAM_CREDENTIALS:
        if not is_response:
            for up in _items(body.get("upsertions")):
                _redact_field(up, "salt", "salt", show)
                _redact_field(up, "salted_password", "salted password", show)
    elif api_key == CREATE_DELEGATION_TOKEN:
        if is_response:
            _redact_field(body, "hmac", "hmac", show)
    elif api_key == DESCRIBE_DELEGATION_TOKEN:
        if is_response:
            for tok in _items(body.get("tokens")):
                _redact_field(tok, "hmac", "hmac", show)
    elif api_key in (RENEW_DELEGATION_TOKEN, EXPIRE_DELEGATION_TOKEN):
        if not is_response:
            _redact_field(body, "hmac", "hmac", show)
    elif api_key in (ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS):
        if not is_response:
            for res in _items(body.get("resources")):
                _redact_configs(res.get("configs"), show)
    elif api_key == DESCRIBE_CONFIGS:
        if is_response:
            for res in _items(body.get("results")):
                _redact_configs(res.get("configs"), show)
    elif api_key == CREATE_TOPICS:
        for topic in _items(body.get("topics")):
            _redact_configs(topic.get("configs"), show)
    elif api_key == ENVELOPE:
        key = "response_data" if is_response else "request_data"
        if isinstance(body.get(key), (bytes, bytearray, memoryview)):
            _redact_field(body, key, "enveloped response" if is_response
                          else "enveloped request", show)


# ----------------------------------------------------------------------------- session


class SaslSession:
    """The SASL state of one connection (pure state machine, no I/O).

    Feed it what the pairing code sees, in stream order per direction:

    * :meth:`observe` every decoded SaslHandshake (17) / SaslAuthenticate (36) request and
      response body (before or after :func:`redact_body`; both shapes are understood);
    * :meth:`raw_token` every frame payload that arrives while the raw-token phase is active
      (:attr:`raw_client` for client frames, :meth:`server_frame_is_raw` for broker frames);
    * :meth:`end_raw_phase` when a client frame during :attr:`raw_client` is a plausible Kafka
      request again (checked by the caller with the framing validator);
    * :meth:`note_request` for every other decoded request (it marks success inferred from the
      client moving on).

    Raw phase (KIP-43): after a SaslHandshake **v0** response with ``error_code`` 0, the next
    frames both ways are raw size-prefixed SASL tokens, not Kafka messages. The client side
    ends when the client sends a Kafka request; the broker side then ends at the first broker
    frame that starts with the correlation_id of a pending request (the broker sends no raw
    token after the client has resumed Kafka requests, but the capture may show its last
    tokens later than the client's next request). :meth:`begin_raw_phase` starts the phase
    explicitly, e.g. for 0.9 GSSAPI clients that send tokens without any handshake.

    Attributes:
        mechanism: mechanism requested by the client (SaslHandshake request), or set by
            :meth:`begin_raw_phase`.
        enabled_mechanisms: the broker's list (SaslHandshake response), ``()`` until seen.
        handshake_version: api_version of the SaslHandshake request, ``None`` if none.
        username: first username seen in a token (PLAIN authcid, SCRAM ``n=``, OAUTHBEARER
            gs2 authzid); never a secret.
        state: ``"none"`` (nothing seen), ``"handshake"`` (handshake sent), ``"authenticating"``,
            ``"authenticated"`` (known or inferred), ``"failed"`` (an error code or a SCRAM
            ``e=`` server-final).
        error: the last SASL error seen (error_code / message / SCRAM error), or ``None``.
        raw_client / raw_server: whether frames of that direction are raw SASL tokens now.
        client_tokens / server_tokens: tokens seen (SaslAuthenticate or raw).
    """

    __slots__ = ("mechanism", "enabled_mechanisms", "handshake_version", "username", "state",
                 "error", "raw_client", "raw_server", "client_tokens", "server_tokens",
                 "_pending_v0")

    def __init__(self) -> None:
        self.mechanism: str | None = None
        self.enabled_mechanisms: tuple[str, ...] = ()
        self.handshake_version: int | None = None
        self.username: str | None = None
        self.state = "none"
        self.error: str | None = None
        self.raw_client = False
        self.raw_server = False
        self.client_tokens = 0
        self.server_tokens = 0
        self._pending_v0 = False

    # -- state
    @property
    def raw_phase(self) -> bool:
        """True while either direction carries raw SASL tokens."""
        return self.raw_client or self.raw_server

    def begin_raw_phase(self, mechanism: str | None = None) -> None:
        """Frames both ways are now raw SASL tokens (KIP-43 or the 0.9 GSSAPI fallback)."""
        if mechanism is not None:
            self.mechanism = mechanism
        self.raw_client = self.raw_server = True
        if self.state in ("none", "handshake"):
            self.state = "authenticating"

    def end_raw_phase(self) -> None:
        """The client sent a Kafka request again: its raw phase is over (the broker's follows
        at its next Kafka response, see :meth:`server_frame_is_raw`). A client that speaks
        Kafka again after the raw exchange has been accepted by the broker."""
        if not self.raw_client:
            return
        self.raw_client = False
        if self.state == "authenticating":
            self.state = "authenticated"

    def server_frame_is_raw(self, payload: bytes, pending: Container[int] = ()) -> bool:
        """Is this broker frame payload a raw SASL token (True) or a Kafka response (False)?

        ``pending``: correlation_ids of requests waiting for a response. While the client is
        still in its raw phase every broker frame is a token; afterwards a frame whose first
        4 bytes are a pending correlation_id ends the broker's raw phase.
        """
        if not self.raw_server:
            return False
        if self.raw_client:
            return True
        if len(payload) >= 4:
            corr = int.from_bytes(payload[:4], "big", signed=True)
            if corr in pending:
                self.raw_server = False
                return False
        return True

    # -- input
    def observe(self, api_key: int, api_version: int, is_response: bool,
                body: dict | None, show_secrets: bool = False) -> dict | None:
        """Update the state from a decoded SaslHandshake / SaslAuthenticate body.

        Returns the token description (:func:`parse_token`) of a SaslAuthenticate body, else
        ``None``. Other APIs are passed to :meth:`note_request` (requests) or ignored.
        Never raises.
        """
        try:
            return self._observe(api_key, api_version, is_response, body or {}, show_secrets)
        except Exception:   # noqa: BLE001
            return None

    def _observe(self, api_key: int, api_version: int, is_response: bool, body: dict,
                 show: bool) -> dict | None:
        if api_key == SASL_HANDSHAKE:
            if not is_response:
                mech = body.get("mechanism")
                if isinstance(mech, str):
                    self.mechanism = mech
                self.handshake_version = api_version
                self._pending_v0 = api_version == 0
                if self.state in ("none", "authenticated"):
                    self.state = "handshake"
                return None
            mechs = body.get("mechanisms")
            if isinstance(mechs, list):
                self.enabled_mechanisms = tuple(m for m in mechs if isinstance(m, str))
            code = body.get("error_code", 0)
            if code:
                self._fail(f"error_code {code}")
                self._pending_v0 = False
                return None
            self.state = "authenticating"
            if api_version == 0 or self._pending_v0:
                self._pending_v0 = False
                self.begin_raw_phase()
            return None
        if api_key == SASL_AUTHENTICATE:
            tok = body.get("auth_bytes")
            if isinstance(tok, dict):
                desc = tok
            else:
                desc = parse_token(self.mechanism, tok if isinstance(tok, (bytes, bytearray))
                                   else b"", not is_response, show)
            if self.state in ("none", "handshake"):
                self.state = "authenticating"
            self._count(desc, not is_response)
            if is_response:
                code = body.get("error_code", 0)
                if code:
                    msg = body.get("error_message")
                    self._fail(f"error_code {code}" + (f": {msg}" if msg else ""))
                elif self.state == "authenticating" and self._final_success(desc):
                    self.state = "authenticated"
            return desc
        if not is_response:
            self.note_request(api_key)
        return None

    def raw_token(self, from_client: bool, payload: bytes, show_secrets: bool = False) -> dict:
        """Describe a raw KIP-43 token frame payload (the bytes after the size) and count it.

        Returns the :func:`parse_token` dict. Never raises.
        """
        desc = parse_token(self.mechanism, payload, from_client, show_secrets)
        try:
            self._count(desc, from_client)
            if not from_client and self.state == "authenticating" and self._final_success(desc):
                self.state = "authenticated"
        except Exception:   # noqa: BLE001
            pass
        return desc

    def note_request(self, api_key: int) -> None:
        """A non-SASL Kafka request was sent: an authentication in progress succeeded
        (brokers close connections whose authentication failed)."""
        if api_key in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
            return
        if self.state == "authenticating":
            self.state = "authenticated"

    def to_json(self) -> dict:
        """A JSON-ready summary of the session (no secrets)."""
        return {
            "mechanism": self.mechanism,
            "enabled_mechanisms": list(self.enabled_mechanisms),
            "handshake_version": self.handshake_version,
            "username": self.username,
            "state": self.state,
            "error": self.error,
            "raw_phase": self.raw_phase,
            "client_tokens": self.client_tokens,
            "server_tokens": self.server_tokens,
        }

    # -- internals
    def _fail(self, why: str) -> None:
        self.state = "failed"
        self.error = why

    def _count(self, desc: dict, from_client: bool) -> None:
        if from_client:
            self.client_tokens += 1
            if self.username is None:
                name = desc.get("username")
                if not isinstance(name, str):
                    name = desc.get("authorization_id")
                if isinstance(name, str) and name:
                    self.username = name
        else:
            self.server_tokens += 1
            if desc.get("message") == "server_final" and "error" in desc:
                self._fail(f"scram error {desc['error']}")
            elif desc.get("message") == "server_error":
                err = desc.get("error")
                status = err.get("status") if isinstance(err, dict) else None
                self._fail(f"oauthbearer {status or 'error'}")

    def _final_success(self, desc: dict) -> bool:
        """A server token that ends a successful exchange for the mechanism."""
        family = mechanism_family(self.mechanism)
        msg = desc.get("message")
        if family == "SCRAM":
            return msg == "server_final" and "verifier" in desc
        if family in ("PLAIN", "OAUTHBEARER"):
            return msg == "empty"
        return False


REDACTED_APIS = _SECRET_APIS | {DESCRIBE_CONFIGS, CREATE_TOPICS}
"""Every api_key whose decoded bodies :func:`redact_body` may change (callers may skip the
call for other APIs): the secret APIs plus DescribeConfigs and CreateTopics, whose configs
may be sensitive."""
