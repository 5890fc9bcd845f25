"""Decrypting one TLS connection with secrets from a key log (sans-IO).

:class:`TlsDecryptor` is fed the bytes of each direction in order (the client's direction is
``CLIENT``, the server's ``SERVER``), splits them into TLS records (RFC 8446 section 5, RFC
5246 section 6.2), follows the handshake in the clear (ClientHello and ServerHello: client and
server random, version, cipher suite, extensions), derives the record keys from the key log's
secrets and decrypts:

- TLS 1.3 (RFC 8446): the handshake traffic secrets, then the application traffic secrets
  after each side's Finished, KeyUpdate (section 4.6.3); keys and IVs by
  HKDF-Expand-Label (section 7.1, 7.3); AES-128/256-GCM and ChaCha20-Poly1305; the inner
  content type (section 5.2).
- TLS 1.2 (RFC 5246): the master secret (``CLIENT_RANDOM``), the key block by the PRF
  (section 5, P_SHA256 or P_SHA384 as the suite says), keys from each side's
  ChangeCipherSpec on; AES-GCM (RFC 5288: 4-byte salt and 8-byte explicit nonce),
  ChaCha20-Poly1305 (RFC 7905) and AES-CBC with HMAC-SHA1/256/384 (MAC-then-encrypt;
  encrypt-then-MAC, RFC 7366, is reported as unsupported).

The cryptography is the ``cryptography`` package's (AESGCM, ChaCha20Poly1305, AES-CBC, HMAC,
HKDF-Expand). Out come :class:`AppData` (decrypted application data with its plaintext stream
offset and the capture time of the packet that completed its record) and :class:`TlsNote`
(why something could not be decrypted: no key for the client random, a wrong key, an
unsupported suite, a gap, bytes that are not TLS records, an alert). A direction that cannot go
on stops decrypting and counts its bytes (:attr:`TlsDecryptor.undecrypted_bytes`); nothing
raises on bad input.
"""

from __future__ import annotations

import hmac as _hmac
import struct
from collections import deque
from dataclasses import dataclass
from functools import partial

from kafkasniff.model import TlsSession
from kafkasniff.tls.hello import TlsHello, parse_hello_message, version_name
from kafkasniff.tls.keylog import KeyLog

__all__ = ["CLIENT", "SERVER", "SUITES", "AppData", "KeyWait", "Suite", "TlsDecryptor",
           "TlsNote"]

CLIENT, SERVER = 0, 1
_CCS, _ALERT, _HANDSHAKE, _APPDATA, _HEARTBEAT = 20, 21, 22, 23, 24
#: a TLS record's ciphertext is at most 2^14 + 256 bytes (RFC 8446 5.2); some stacks use more
_MAX_RECORD = (1 << 14) + 2048
#: the largest handshake message followed (certificate chains are tens of KiB): a bound on
#: what one direction holds while a message is incomplete
_MAX_HANDSHAKE = 256 * 1024
_HRR_RANDOM = bytes.fromhex("cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c")


@dataclass(frozen=True)
class Suite:
    """A cipher suite this module decrypts.

    Attributes:
        id, name: IANA's code and name.
        cipher: ``"gcm"``, ``"chacha20"`` or ``"cbc"``.
        key_len: the encryption key in bytes.
        fixed_iv_len: the implicit IV from the key block (TLS 1.2 GCM 4, ChaCha20 12, CBC 0;
            TLS 1.3 always 12).
        mac: the HMAC hash of a CBC suite (``"sha1"``, ``"sha256"``, ``"sha384"``), else None.
        hash: the PRF (TLS 1.2) or HKDF (TLS 1.3) hash.
        tls13: a TLS 1.3 suite.
    """

    id: int
    name: str
    cipher: str
    key_len: int
    fixed_iv_len: int
    mac: str | None
    hash: str
    tls13: bool = False


def _suites() -> dict[int, Suite]:
    # (code, name, cipher, key bytes, implicit IV bytes, CBC MAC hash, PRF/HKDF hash); the
    # TLS 1.3 suites are the 0x13xx codes
    table = (
        (0x1301, "TLS_AES_128_GCM_SHA256", "gcm", 16, 12, None, "sha256"),
        (0x1302, "TLS_AES_256_GCM_SHA384", "gcm", 32, 12, None, "sha384"),
        (0x1303, "TLS_CHACHA20_POLY1305_SHA256", "chacha20", 32, 12, None, "sha256"),
        (0xC02B, "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "gcm", 16, 4, None, "sha256"),
        (0xC02C, "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "gcm", 32, 4, None, "sha384"),
        (0xC02F, "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "gcm", 16, 4, None, "sha256"),
        (0xC030, "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "gcm", 32, 4, None, "sha384"),
        (0x009C, "TLS_RSA_WITH_AES_128_GCM_SHA256", "gcm", 16, 4, None, "sha256"),
        (0x009D, "TLS_RSA_WITH_AES_256_GCM_SHA384", "gcm", 32, 4, None, "sha384"),
        (0x009E, "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256", "gcm", 16, 4, None, "sha256"),
        (0x009F, "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384", "gcm", 32, 4, None, "sha384"),
        (0xCCA8, "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "chacha20", 32, 12, None,
         "sha256"),
        (0xCCA9, "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "chacha20", 32, 12, None,
         "sha256"),
        (0xCCAA, "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "chacha20", 32, 12, None,
         "sha256"),
        (0xC009, "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", "cbc", 16, 0, "sha1", "sha256"),
        (0xC00A, "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", "cbc", 32, 0, "sha1", "sha256"),
        (0xC013, "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "cbc", 16, 0, "sha1", "sha256"),
        (0xC014, "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", "cbc", 32, 0, "sha1", "sha256"),
        (0xC023, "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", "cbc", 16, 0, "sha256", "sha256"),
        (0xC024, "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384", "cbc", 32, 0, "sha384", "sha384"),
        (0xC027, "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", "cbc", 16, 0, "sha256", "sha256"),
        (0xC028, "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384", "cbc", 32, 0, "sha384", "sha384"),
        (0x002F, "TLS_RSA_WITH_AES_128_CBC_SHA", "cbc", 16, 0, "sha1", "sha256"),
        (0x0035, "TLS_RSA_WITH_AES_256_CBC_SHA", "cbc", 32, 0, "sha1", "sha256"),
        (0x003C, "TLS_RSA_WITH_AES_128_CBC_SHA256", "cbc", 16, 0, "sha256", "sha256"),
        (0x003D, "TLS_RSA_WITH_AES_256_CBC_SHA256", "cbc", 32, 0, "sha256", "sha256"),
    )
    return {sid: Suite(sid, name, cipher, key, iv, mac, h, sid >> 8 == 0x13)
            for sid, name, cipher, key, iv, mac, h in table}


#: the cipher suites :class:`TlsDecryptor` decrypts, by IANA code
SUITES = _suites()
_HASH_LEN = {"sha1": 20, "sha256": 32, "sha384": 48}


@dataclass(frozen=True, slots=True)
class AppData:
    """Decrypted application data of one direction.

    Attributes:
        direction: :data:`CLIENT` or :data:`SERVER`.
        offset: offset of ``data[0]`` in that direction's plaintext stream.
        data: the bytes.
        ts_ns: capture time of the packet that completed the record carrying them.
    """

    direction: int
    offset: int
    data: bytes
    ts_ns: int


@dataclass(frozen=True, slots=True)
class TlsNote:
    """Something about the TLS layer a reader should know.

    Attributes:
        kind: ``"no_key"``, ``"decrypt_failed"``, ``"unsupported"``, ``"not_tls"``,
            ``"gap"``, ``"alert"``.
        direction: the direction it concerns (-1: the connection).
        message: what happened, naming the client random where there is one.
        ts_ns: capture time.
    """

    kind: str
    direction: int
    message: str
    ts_ns: int


_CRYPTO: dict = {}


def _crypto() -> dict:
    """``cryptography``'s classes, imported on first use (plaintext runs never import it)."""
    if not _CRYPTO:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.ciphers import algorithms
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305
        from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

        _CRYPTO.update(sha1=hashes.SHA1, sha256=hashes.SHA256, sha384=hashes.SHA384,
                       hkdf_expand=HKDFExpand, gcm=AESGCM, chacha20=ChaCha20Poly1305,
                       AES=algorithms.AES, InvalidTag=InvalidTag)
    return _CRYPTO


def _hash(name: str):
    return (_CRYPTO or _crypto())[name]()


def prf(secret: bytes, label: bytes, seed: bytes, length: int, hash_name: str) -> bytes:
    """The TLS 1.2 PRF: P_<hash>(secret, label + seed) cut to ``length`` bytes (RFC 5246
    section 5)."""
    digest = {"sha256": "sha256", "sha384": "sha384"}[hash_name]
    seed = label + seed
    out = b""
    a = seed
    while len(out) < length:
        a = _hmac.digest(secret, a, digest)
        out += _hmac.digest(secret, a + seed, digest)
    return out[:length]


def hkdf_expand_label(secret: bytes, label: bytes, context: bytes, length: int,
                      hash_name: str) -> bytes:
    """HKDF-Expand-Label (RFC 8446 section 7.1) with ``cryptography``'s HKDFExpand."""
    full = b"tls13 " + label
    info = struct.pack(">HB", length, len(full)) + full + bytes([len(context)]) + context
    c = _CRYPTO or _crypto()
    return c["hkdf_expand"](c[hash_name](), length, info).derive(secret)


class _Keys:
    """The record protection of one direction: cipher, key, IV (TLS 1.3 or TLS 1.2
    implicit part), MAC key (CBC), sequence number. The ``cryptography`` objects are made
    once per key, not per record."""

    __slots__ = ("suite", "tls13", "aead", "cbc", "iv", "iv_int", "mac_key", "seq", "secret",
                 "invalid_tag")

    def __init__(self, suite: Suite, key: bytes, iv: bytes, mac_key: bytes = b"",
                 *, tls13: bool, secret: bytes = b"") -> None:
        c = _crypto()
        self.suite = suite
        self.tls13 = tls13
        self.aead = c["gcm"](key) if suite.cipher == "gcm" else \
            c["chacha20"](key) if suite.cipher == "chacha20" else None
        self.cbc = c["AES"](key) if suite.cipher == "cbc" else None
        self.iv = iv
        self.iv_int = int.from_bytes(iv, "big")
        self.mac_key = mac_key
        self.seq = 0
        self.secret = secret
        self.invalid_tag = c["InvalidTag"]

    def _nonce(self) -> bytes:
        """The per-record nonce: the IV XOR the sequence number (RFC 8446 5.3, RFC 7905)."""
        return (self.iv_int ^ self.seq).to_bytes(len(self.iv), "big")

    def open(self, rtype: int, version: bytes, body: bytes) -> tuple[int, bytes]:
        """Decrypt one record body: (content type, plaintext). Raises ``ValueError`` when
        it does not authenticate (wrong key) or is malformed."""
        seq8 = self.seq.to_bytes(8, "big")
        try:
            if self.tls13:
                header = bytes([rtype]) + version + len(body).to_bytes(2, "big")
                inner = self.aead.decrypt(self._nonce(), body, header)
                if inner and inner[-1]:                 # no padding: the common case
                    return inner[-1], inner[:-1]
                end = len(inner.rstrip(b"\0"))
                if not end:
                    raise ValueError("TLS 1.3 record without a content type")
                return inner[end - 1], inner[:end - 1]
            if self.suite.cipher == "gcm":
                if len(body) < 8 + 16:
                    raise ValueError("GCM record too short")
                nonce = self.iv + body[:8]
                aad = seq8 + bytes([rtype]) + version + (len(body) - 24).to_bytes(2, "big")
                return rtype, self.aead.decrypt(nonce, body[8:], aad)
            if self.suite.cipher == "chacha20":
                if len(body) < 16:
                    raise ValueError("ChaCha20-Poly1305 record too short")
                aad = seq8 + bytes([rtype]) + version + (len(body) - 16).to_bytes(2, "big")
                return rtype, self.aead.decrypt(self._nonce(), body, aad)
            return rtype, self._open_cbc(rtype, version, body, seq8)
        except self.invalid_tag:
            raise ValueError("the record does not authenticate (wrong key?)") from None
        finally:
            self.seq += 1

    def _open_cbc(self, rtype: int, version: bytes, body: bytes, seq8: bytes) -> bytes:
        """MAC-then-encrypt (RFC 5246 6.2.3.2): explicit IV, CBC, padding, HMAC."""
        from cryptography.hazmat.primitives.ciphers import Cipher, modes

        mac_len = _HASH_LEN[self.suite.mac]
        if len(body) < 32 or len(body) % 16:
            raise ValueError("CBC record length is not a whole number of blocks")
        dec = Cipher(self.cbc, modes.CBC(body[:16])).decryptor()
        plain = dec.update(body[16:]) + dec.finalize()
        pad = plain[-1]
        if pad + 1 + mac_len > len(plain) or plain[-pad - 1:] != bytes([pad]) * (pad + 1):
            raise ValueError("the record does not authenticate (bad CBC padding: wrong key?)")
        plain = plain[:-pad - 1]
        data, mac = plain[:-mac_len], plain[-mac_len:]
        want = _hmac.digest(self.mac_key, seq8 + bytes([rtype]) + version
                            + len(data).to_bytes(2, "big") + data, self.suite.mac)
        if not _hmac.compare_digest(mac, want):
            raise ValueError("the record does not authenticate (bad MAC: wrong key?)")
        return data


class KeyWait:
    """How long connections wait for a secret their key log does not hold yet (``live``:
    clients append to their key log while the capture runs, sometimes after their first
    encrypted records are on the wire). Shared by every :class:`TlsDecryptor` of a pipeline.

    While a connection waits, its later bytes are held in arrival order; when the secret
    appears (on a later packet of that connection, or at its end) they are decrypted as if
    it had been there all along. A connection gives up, with the usual ``no_key`` note, when
    its wait passes ``max_wait_ns`` of capture time, or when the bytes held by all waiting
    connections would pass ``max_bytes``.

    Args:
        max_bytes: bound on the bytes held by all connections together.
        max_wait_ns: bound on how long (capture time, ns) one connection waits.

    Attributes:
        held: the bytes held now, all connections together.
        waits: how many times a connection began to wait for a secret.
        gave_up: how many waits ended without the secret.
    """

    __slots__ = ("max_bytes", "max_wait_ns", "held", "waits", "gave_up")

    def __init__(self, max_bytes: int = 64 << 20, max_wait_ns: int = 10_000_000_000) -> None:
        self.max_bytes = max_bytes
        self.max_wait_ns = max_wait_ns
        self.held = 0
        self.waits = 0
        self.gave_up = 0


class _Wait:
    """A connection waiting for a secret: what is missing, the step that sets the keys once
    it is there (True when it did), the side whose records stopped and the capture time of
    its bytes, and since when (capture time, ns) it waits."""

    __slots__ = ("what", "step", "side", "ts", "since")

    def __init__(self, what: str, step, side: int, ts: int) -> None:
        self.what, self.step, self.side, self.ts, self.since = what, step, side, ts, ts


class _Dir:
    __slots__ = ("buf", "keys", "hs", "app_offset", "dead")

    def __init__(self) -> None:
        self.buf = bytearray()
        self.keys: _Keys | None = None
        self.hs = bytearray()                 # handshake bytes not yet a whole message
        self.app_offset = 0
        self.dead = False


def _coalesce(out: list) -> list:
    """Runs of :class:`AppData` (one direction's consecutive records of one segment) as one
    each, so that the Kafka framing is fed once per segment as for plaintext, not once per
    record."""
    merged: list = []
    run: list[AppData] = []         # the AppData since the last note or change of side
    for r in out + [None]:
        if type(r) is AppData and (not run or r.direction == run[0].direction):
            run.append(r)
            continue
        if run:
            merged.append(run[0] if len(run) == 1 else AppData(
                run[0].direction, run[0].offset, b"".join(x.data for x in run), run[-1].ts_ns))
        run = [r] if type(r) is AppData else []
        if r is not None and not run:
            merged.append(r)
    return merged


class TlsDecryptor:
    """One TLS connection, decrypted with :class:`~kafkasniff.tls.keylog.KeyLog` secrets.

    Args:
        keylog: the secrets (looked up again whenever a key is needed, so that a key log
            that grows in live mode serves connections that started before its lines).
        wait: a :class:`KeyWait` to wait for a missing secret (``live``); ``None`` (offline:
            the key log is complete) gives up at once.

    Attributes:
        client_random, server_random: from the hellos (``None`` until seen).
        hellos: the first ClientHello and ServerHello (:class:`TlsHello`, by side), as the
            connection summary shows them (the SNI, the session offered for resumption).
        resumed: the session was resumed (TLS 1.3: the ServerHello accepted a pre-shared
            key; TLS 1.2: the abbreviated handshake, the server's ChangeCipherSpec first).
        version: ``"TLS 1.2"`` or ``"TLS 1.3"`` once the ServerHello is seen.
        suite: the :class:`Suite` (``None`` until known or when unsupported);
            ``suite_id`` its code.
        decrypted_bytes, undecrypted_bytes: captured ciphertext bytes per direction
            decrypted and not (records that could not be, and everything after a direction
            stopped; bytes a gap lost are in neither).
    """

    def __init__(self, keylog: KeyLog, wait: KeyWait | None = None) -> None:
        self.keylog = keylog
        self.wait = wait
        self._waiting: _Wait | None = None
        # what came while waiting, in arrival order: (side, data or None for a gap, gap, ts)
        self._held: deque[tuple[int, bytes | None, int, int]] = deque()
        self.dirs = (_Dir(), _Dir())
        self.client_random: bytes | None = None
        self.server_random: bytes | None = None
        self.version: str | None = None
        self.suite: Suite | None = None
        self.suite_id: int | None = None
        self.etm = False
        self.hellos: list[TlsHello | None] = [None, None]
        self.resumed = False
        self.key_updates = [0, 0]
        # TLS 1.2: the master secret and key block once known, and the session ticket
        # that names this session for a later connection (resumption)
        self._master: bytes | None = None
        self._key_block: tuple[bytes, ...] | None = None
        self._ticket = b""
        self._ccs_seen = [False, False]
        self.decrypted_bytes = [0, 0]
        self.undecrypted_bytes = [0, 0]
        self._noted_no_key = False

    # ------------------------------------------------------------------ input
    def feed(self, direction: int, data: bytes, ts_ns: int) -> list[AppData | TlsNote]:
        """In-order bytes of ``direction``: what they decrypt to, and notes."""
        if self._waiting is not None:
            return self._hold(direction, data, 0, ts_ns)
        return self._feed(direction, data, ts_ns)

    def _feed(self, direction: int, data: bytes, ts_ns: int) -> list[AppData | TlsNote]:
        d = self.dirs[direction]
        out: list[AppData | TlsNote] = []
        if d.dead:
            self.undecrypted_bytes[direction] += len(data)
            return out
        if d.buf:           # a record began in earlier bytes
            d.buf += data
            data = bytes(d.buf)
            d.buf.clear()
        pos, n = 0, len(data)
        while n - pos >= 5 and not d.dead and self._waiting is None:
            rtype = data[pos]
            length = (data[pos + 3] << 8) | data[pos + 4]
            if not (_CCS <= rtype <= _HEARTBEAT) or data[pos + 1] != 3 or length > _MAX_RECORD:
                self._stop(direction, "not_tls", f"bytes that are not a TLS record at "
                           f"{self._who(direction)} (type {rtype}, length {length})", ts_ns, out)
                break
            end = pos + 5 + length
            if end > n:
                break
            self._record(direction, rtype, data[pos + 1:pos + 3], data[pos + 5:end], ts_ns, out)
            pos = end
        if pos < n:
            if d.dead:      # stopped: the rest is not decrypted
                self.undecrypted_bytes[direction] += n - pos
            else:           # an incomplete record, or waiting for a key
                d.buf += data[pos:]
        return _coalesce(out) if len(out) > 1 else out

    def on_gap(self, direction: int, length: int, ts_ns: int) -> list[TlsNote]:
        """``length`` bytes of ``direction`` were never captured: its records are out of
        step from here on (a TLS record stream cannot be resynchronised: the sequence
        numbers are unknown), so the direction stops."""
        if self._waiting is not None:
            return self._hold(direction, None, length, ts_ns)
        out: list = []
        d = self.dirs[direction]
        if not d.dead:
            self.undecrypted_bytes[direction] += len(d.buf)
            d.buf.clear()
            self._stop(direction, "gap", f"{length} bytes missing from the capture cut a TLS "
                       f"record of {self._who(direction)}: the rest of it is not decrypted",
                       ts_ns, out)
        return out      # the missing bytes are not in the capture: no byte count of theirs

    def finish(self) -> list[TlsNote]:
        """The connection ended: bytes of a record never completed are counted as not
        decrypted. Returns no notes (an unfinished record at the end is the capture's end,
        which the Kafka layer reports when it cut a frame; a connection still waiting for
        a secret tries the key log once more, then gives up with a ``no_key`` note)."""
        out: list = []
        if self._waiting is not None:
            out = self._pump(self._waiting.ts)
            if self._waiting is not None:
                self._give_up(self._waiting.ts, out)
        for direction in (CLIENT, SERVER):
            d = self.dirs[direction]
            self.undecrypted_bytes[direction] += len(d.buf)
            d.buf.clear()
        return out

    def session(self) -> TlsSession | None:
        """The :class:`~kafkasniff.model.TlsSession` (version, suite, SNI) once the
        ServerHello chose a suite this module decrypts, else ``None``."""
        if self.suite is None or self.version is None:
            return None
        hello = self.hellos[CLIENT]
        return TlsSession(self.version, self.suite.name, hello.sni if hello else None)

    def info(self) -> dict:
        """What the summary shows: ``{"decrypted": {"version", "cipher_suite", "resumed",
        "key_updates", "decrypted_bytes", "undecrypted_bytes"}}`` (no secret, no random;
        ``key_updates``: ``{"client", "server"}``, the TLS 1.3 KeyUpdate messages each
        side sent)."""
        return {"decrypted": {
            "version": self.version,
            "cipher_suite": self.suite.name if self.suite is not None else
            (f"0x{self.suite_id:04x}" if self.suite_id is not None else None),
            "resumed": self.resumed,
            "key_updates": {"client": self.key_updates[CLIENT],
                            "server": self.key_updates[SERVER]},
            "decrypted_bytes": sum(self.decrypted_bytes),
            "undecrypted_bytes": sum(self.undecrypted_bytes)}}

    # ------------------------------------------------------------------ records
    def _record(self, direction: int, rtype: int, version: bytes, body: bytes, ts: int,
                out: list) -> None:
        d = self.dirs[direction]
        size = 5 + len(body)
        if rtype == _CCS:
            self.decrypted_bytes[direction] += size
            if self.version != "TLS 1.3":      # TLS 1.3: middlebox compatibility only
                if direction == SERVER and not self._ccs_seen[CLIENT]:
                    self.resumed = True         # abbreviated handshake (RFC 5246 7.3)
                self._ccs_seen[direction] = True
                self._arm_tls12(direction, ts, out)
            return
        if d.keys is None:
            if rtype == _HANDSHAKE:
                self.decrypted_bytes[direction] += size
                self._handshake(direction, body, ts, out, version_name(
                    (version[0] << 8) | version[1]))
            elif rtype == _ALERT:
                self.decrypted_bytes[direction] += size
                self._alert(direction, body, ts, out)
            else:
                self.undecrypted_bytes[direction] += size
                if self.server_random is None:
                    self._stop(direction, "no_key", "encrypted records of "
                               f"{self._who(direction)} without a handshake in the capture "
                               "(joined mid-stream): no client random to find its keys by",
                               ts, out)
            return
        try:
            inner, plain = d.keys.open(rtype, version, body)
        except ValueError as exc:
            self.undecrypted_bytes[direction] += size
            self._stop(direction, "decrypt_failed", f"{exc}: record of "
                       f"{self._who(direction)} not decrypted, and nothing after it", ts, out)
            return
        self.decrypted_bytes[direction] += size
        if inner == _APPDATA:
            if plain:
                out.append(AppData(direction, d.app_offset, plain, ts))
                d.app_offset += len(plain)
        elif inner == _HANDSHAKE:
            self._handshake(direction, plain, ts, out)
        elif inner == _ALERT:
            self._alert(direction, plain, ts, out)

    # ------------------------------------------------------------------ handshake
    def _handshake(self, direction: int, data: bytes, ts: int, out: list,
                   record_version: str = "") -> None:
        d = self.dirs[direction]
        d.hs += data
        while len(d.hs) >= 4 and self._waiting is None:
            mtype = d.hs[0]
            mlen = int.from_bytes(d.hs[1:4], "big")
            if mlen > _MAX_HANDSHAKE:
                self._stop(direction, "not_tls", f"a {mlen}-byte handshake message from "
                           f"{self._who(direction)}: more than TLS stacks send "
                           f"({_MAX_HANDSHAKE}), not followed", ts, out)
                d.hs.clear()
                return
            if len(d.hs) < 4 + mlen:
                break
            message = bytes(d.hs[:4 + mlen])
            hello = parse_hello_message(message, record_version) \
                if mtype in (1, 2) and d.keys is None else None
            del d.hs[:4 + mlen]
            if hello is not None:
                if self.hellos[direction] is None:
                    self.hellos[direction] = hello
                if hello.random is not None and mtype == 1 and direction == CLIENT:
                    self.client_random = hello.random
                elif hello.random is not None and mtype == 2 and direction == SERVER:
                    self._server_hello(hello, ts, out)
            elif mtype == 4 and self.version == "TLS 1.2" and direction == SERVER:
                self._new_session_ticket(message)
            elif mtype == 20 and self.version == "TLS 1.3" and d.keys is not None:
                # Finished: this side's application traffic secret from its next record
                label = "CLIENT_TRAFFIC_SECRET_0" if direction == CLIENT else \
                    "SERVER_TRAFFIC_SECRET_0"
                d.keys = None
                self._arm(label, direction, ts, out,
                          partial(self._set_tls13_keys, direction, label))
            elif mtype == 24 and self.version == "TLS 1.3" and d.keys is not None:
                # KeyUpdate (RFC 8446 4.6.3): the next generation of this side's secret
                suite = d.keys.suite
                secret = hkdf_expand_label(d.keys.secret, b"traffic upd", b"",
                                           _HASH_LEN[suite.hash], suite.hash)
                d.keys = self._tls13_from_secret(suite, secret)
                self.key_updates[direction] += 1

    def _server_hello(self, hello: TlsHello, ts: int, out: list) -> None:
        if hello.random == _HRR_RANDOM:
            return      # HelloRetryRequest: another ClientHello and ServerHello follow
        self.server_random = hello.random
        self.suite_id = hello.cipher_suites
        self.etm = hello.encrypt_then_mac
        self.version = hello.version()
        self.resumed = self.version == "TLS 1.3" and hello.pre_shared_key
        self.suite = SUITES.get(self.suite_id)
        if self.suite is None or self.suite.tls13 != (self.version == "TLS 1.3") or \
                self.version not in ("TLS 1.2", "TLS 1.3") or \
                (self.etm and self.suite.cipher == "cbc"):
            what = f"cipher suite 0x{self.suite_id:04x}" if self.suite is None else \
                f"{self.suite.name} with encrypt-then-MAC" if self.etm else \
                f"{self.suite.name} on {self.version}"
            self.suite = None
            for direction in (CLIENT, SERVER):
                self._stop(direction, "unsupported", f"{what} is not decrypted "
                           f"(client random {self._random_hex()})", ts, out)
            return
        if self.version == "TLS 1.3":
            # both sides' records are protected with their handshake traffic secrets
            # (RFC 8446 7.1) until their Finished
            self._arm("CLIENT_HANDSHAKE_TRAFFIC_SECRET and SERVER_HANDSHAKE_TRAFFIC_SECRET",
                      SERVER, ts, out, self._set_tls13_handshake_keys)

    def _new_session_ticket(self, message: bytes) -> None:
        """A TLS 1.2 NewSessionTicket (RFC 5077 3.3: lifetime hint, ticket), sent in the
        clear before the server's ChangeCipherSpec: a later connection may resume this
        session with it."""
        if len(message) < 10:
            return
        n = int.from_bytes(message[8:10], "big")
        self._ticket = bytes(message[10:10 + n])
        if self._ticket and self._master is not None:
            self.keylog.remember_session(b"ticket:" + self._ticket, self._master)

    def _alert(self, direction: int, body: bytes, ts: int, out: list) -> None:
        if len(body) >= 2 and body[1] != 0:     # close_notify (0) is the normal end
            out.append(TlsNote("alert", direction, f"{self._who(direction)} sent TLS alert "
                               f"{body[1]} (level {body[0]})", ts))

    # ------------------------------------------------------------------ keys
    def _random_hex(self) -> str:
        return self.client_random.hex() if self.client_random else "unknown"

    def _who(self, direction: int) -> str:
        return "the client" if direction == CLIENT else "the server"

    def _no_key(self, what: str, ts: int, out: list) -> None:
        for direction in (CLIENT, SERVER):
            d = self.dirs[direction]
            if not d.dead:
                d.dead = True
                self.undecrypted_bytes[direction] += len(d.buf)
                d.buf.clear()
        if not self._noted_no_key:
            self._noted_no_key = True
            resumed = (" (a resumed session: its secrets are logged under this "
                       "connection's client random, like a new session's)"
                       if self.resumed else "")
            out.append(TlsNote("no_key", -1, f"no {what} in the key log for client random "
                               f"{self._random_hex()}{resumed}: the connection is not "
                               f"decrypted", ts))

    # ------------------------------------------------------------------ waiting for a key
    def _arm(self, what: str, direction: int, ts: int, out: list, step) -> None:
        """Run the key step ``step()`` (True once it set keys); when its secret is missing,
        wait for it (:class:`KeyWait`) or give up at once. ``direction`` is the side whose
        record stream stops until then."""
        if step():
            return
        if self.wait is None:
            self._no_key(what, ts, out)
            return
        self._waiting = _Wait(what, step, direction, ts)
        self.wait.waits += 1

    def _hold(self, direction: int, data: bytes | None, gap: int, ts: int) -> list:
        self._held.append((direction, data, gap, ts))
        if data:
            self.wait.held += len(data)
        out = self._pump(ts)
        if self._waiting is not None and (
                self.wait.held > self.wait.max_bytes
                or ts - self._waiting.since > self.wait.max_wait_ns):
            self._give_up(ts, out)
        return out

    def _pump(self, ts: int) -> list:
        """While the awaited secret is there: arm it, go on with the stopped direction's
        bytes, then replay what was held, until all is done or another secret is missing."""
        out: list = []
        while self._waiting is not None and self._waiting.step():
            resumed = self._waiting
            self._waiting = None
            out.extend(self._feed(resumed.side, b"", resumed.ts))
            while self._held and self._waiting is None:
                d, data, gap, t = self._held.popleft()
                if data is None:
                    out.extend(self.on_gap(d, gap, t))
                else:
                    self.wait.held -= len(data)
                    out.extend(self._feed(d, data, t))
            if self._waiting is not None:       # the next secret is missing: wait anew
                self._waiting.since = ts
        return out

    def _give_up(self, ts: int, out: list) -> None:
        what = self._waiting.what
        self._waiting = None
        self.wait.gave_up += 1
        self._no_key(what, ts, out)
        for d, data, _, _ in self._held:
            if data:
                self.undecrypted_bytes[d] += len(data)
                self.wait.held -= len(data)
        self._held.clear()

    # ------------------------------------------------------------------ keys
    def _tls13_from_secret(self, suite: Suite, secret: bytes) -> _Keys:
        key = hkdf_expand_label(secret, b"key", b"", suite.key_len, suite.hash)
        iv = hkdf_expand_label(secret, b"iv", b"", 12, suite.hash)
        return _Keys(suite, key, iv, tls13=True, secret=secret)

    def _set_tls13_keys(self, direction: int, label: str) -> bool:
        secret = self.keylog.get(self.client_random or b"", label)
        if secret is None:
            return False
        self.dirs[direction].keys = self._tls13_from_secret(self.suite, secret)
        return True

    def _set_tls13_handshake_keys(self) -> bool:
        secrets = [self.keylog.get(self.client_random or b"", label) for label in
                   ("CLIENT_HANDSHAKE_TRAFFIC_SECRET", "SERVER_HANDSHAKE_TRAFFIC_SECRET")]
        if None in secrets:
            return False
        for direction, secret in zip((CLIENT, SERVER), secrets):
            self.dirs[direction].keys = self._tls13_from_secret(self.suite, secret)
        return True

    def _stop(self, direction: int, kind: str, message: str, ts: int, out: list) -> None:
        d = self.dirs[direction]
        if d.dead:
            return
        d.dead = True
        out.append(TlsNote(kind, direction, message, ts))

    def _arm_tls12(self, direction: int, ts: int, out: list) -> None:
        suite = self.suite
        if suite is None or self.client_random is None or self.server_random is None:
            self._stop(direction, "unsupported", "ChangeCipherSpec before a usable "
                       f"ServerHello (client random {self._random_hex()})", ts, out)
            return
        self._arm("CLIENT_RANDOM (master secret)", direction, ts, out,
                  partial(self._set_tls12_keys, direction))

    def _set_tls12_keys(self, direction: int) -> bool:
        suite = self.suite
        if self._key_block is None:         # once per connection, for both sides
            master = self._tls12_master()
            if master is None:
                return False
            mac_len = _HASH_LEN[suite.mac] if suite.mac else 0
            n = 2 * (mac_len + suite.key_len + suite.fixed_iv_len)
            block = prf(master, b"key expansion", self.server_random + self.client_random, n,
                        suite.hash)
            parts, p = [], 0
            for c in (mac_len, mac_len, suite.key_len, suite.key_len, suite.fixed_iv_len,
                      suite.fixed_iv_len):
                parts.append(block[p:p + c])
                p += c
            self._key_block = tuple(parts)
        cmac, smac, ckey, skey, civ, siv = self._key_block
        self.dirs[direction].keys = _Keys(suite, ckey, civ, cmac, tls13=False) \
            if direction == CLIENT else _Keys(suite, skey, siv, smac, tls13=False)
        return True

    def _tls12_master(self) -> bytes | None:
        """The session's master secret: the key log's ``CLIENT_RANDOM`` line or, for a
        resumed session, the master secret of the handshake that made it (RFC 5246 7.3,
        RFC 5077 3.1), found by the ticket the client offered or the session id the server
        echoed; remembered under this session's id and ticket for later resumptions."""
        master = self.keylog.get(self.client_random, "CLIENT_RANDOM")
        client, server = self.hellos
        session_id = server.session_id if server else b""
        if master is None and self.resumed and client is not None:
            ticket, offered_id = client.session_ticket, client.session_id
            master = (ticket and self.keylog.session(b"ticket:" + ticket)) or \
                (offered_id and offered_id == session_id
                 and self.keylog.session(b"id:" + offered_id)) or None
        if master is not None:
            self._master = master
            if session_id:
                self.keylog.remember_session(b"id:" + session_id, master)
            if self._ticket:
                self.keylog.remember_session(b"ticket:" + self._ticket, master)
        return master
