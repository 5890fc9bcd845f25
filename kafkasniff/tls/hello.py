"""Recognising TLS on a Kafka port, so an SSL listener is reported as TLS and not as garbage.

Only the cleartext start of a TLS connection is read: the record layer (RFC 8446 s5.1,
RFC 5246 s6.2) and the first handshake message of each direction, ClientHello or ServerHello
(RFC 8446 s4.1.2-4.1.3), with the extensions that say what is negotiated: server_name (0,
RFC 6066), application_layer_protocol_negotiation (16, RFC 7301) and supported_versions (43,
RFC 8446 s4.2.1). Nothing is decrypted.

Pure functions: no I/O, and nothing raises on malformed input.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TlsHello", "looks_like_tls", "looks_like_tls_record", "parse_hello",
           "parse_hello_message", "version_name"]

CONTENT_TYPES = (20, 21, 22, 23)           # change_cipher_spec, alert, handshake, application_data
CONTENT_HANDSHAKE = 22
HANDSHAKE_CLIENT_HELLO = 1
HANDSHAKE_SERVER_HELLO = 2
MAX_RECORD_BYTES = 2 ** 14 + 2048          # TLSCiphertext limit (RFC 5246 s6.2.3)
MAX_HELLO_BYTES = 2 ** 18                  # refuse to assemble more than this
EXT_SERVER_NAME = 0
EXT_ALPN = 16
EXT_SUPPORTED_VERSIONS = 43
EXT_ENCRYPT_THEN_MAC = 22       # RFC 7366
EXT_PRE_SHARED_KEY = 41         # RFC 8446 4.2.11
EXT_SESSION_TICKET = 35         # RFC 5077

_VERSION_NAMES = {
    0x0002: "SSL 2.0", 0x0300: "SSL 3.0", 0x0301: "TLS 1.0", 0x0302: "TLS 1.1",
    0x0303: "TLS 1.2", 0x0304: "TLS 1.3",
    0xFEFF: "DTLS 1.0", 0xFEFD: "DTLS 1.2", 0xFEFC: "DTLS 1.3",
}


def _is_grease(v: int) -> bool:
    """RFC 8701 GREASE values: 0x0A0A, 0x1A1A, ... 0xFAFA."""
    return (v & 0x0F0F) == 0x0A0A and (v >> 8) == (v & 0xFF)


def version_name(v: int) -> str:
    """``0x0303`` -> ``"TLS 1.2"``, ``0x0300`` -> ``"SSL 3.0"``, GREASE -> ``"GREASE"``,
    TLS 1.3 drafts ``0x7fNN`` -> ``"TLS 1.3 draft NN"``, anything else ``"0xNNNN"``."""
    name = _VERSION_NAMES.get(v)
    if name is not None:
        return name
    if _is_grease(v):
        return "GREASE"
    if (v >> 8) == 0x7F:
        return f"TLS 1.3 draft {v & 0xFF}"
    return f"0x{v & 0xFFFF:04x}"


def looks_like_tls(data: bytes) -> bool:
    """Is ``data`` (the first bytes of a stream direction) a TLS handshake record?

    True when it starts with a record header of content type 22 (handshake), version
    0x0300..0x0304, length 1..2**14+2048 and, when the next byte is present, handshake type
    1 (ClientHello) or 2 (ServerHello). Fewer than 5 bytes is False. Never raises.

    A Kafka frame never matches: its size prefix would start with 0x16 (>= 352 MiB).
    """
    try:
        if len(data) < 5 or data[0] != CONTENT_HANDSHAKE or data[1] != 3 or data[2] > 4:
            return False
        length = (data[3] << 8) | data[4]
        if not 1 <= length <= MAX_RECORD_BYTES:
            return False
        if len(data) > 5 and data[5] not in (HANDSHAKE_CLIENT_HELLO, HANDSHAKE_SERVER_HELLO):
            return False
        return True
    except (TypeError, IndexError):
        return False


def looks_like_tls_record(data) -> bool:
    """A TLS record header of any content type (20-23), version 3.x and a plausible length
    at the start of ``data``: what a connection joined mid-stream shows (application data
    records). Never raises."""
    return len(data) >= 5 and data[0] in CONTENT_TYPES and data[1] == 3 and data[2] <= 4 \
        and 0 < (data[3] << 8 | data[4]) <= MAX_RECORD_BYTES


@dataclass(frozen=True, slots=True)
class TlsHello:
    """The first handshake message of a TLS stream direction.

    Attributes:
        handshake: ``"client_hello"`` or ``"server_hello"`` (a HelloRetryRequest is a
            server_hello too).
        record_version: the first record's version, e.g. ``"TLS 1.0"``.
        legacy_version: the hello's own version field, e.g. ``"TLS 1.2"``.
        supported_versions: extension 43: the versions a client offers (GREASE left out),
            or the one a server selected; ``()`` when absent.
        sni: server_name extension host_name (client), ``None`` when absent.
        alpn: protocols of extension 16 (client: offered; server: selected).
        cipher_suites: client: number of cipher suites offered; server: the selected suite id.
        random: the 32-byte client or server random (``None`` when cut before it); not in
            :meth:`to_json`.
        encrypt_then_mac: extension 22 (RFC 7366) is present; not in :meth:`to_json`.
        pre_shared_key: extension 41 is present (RFC 8446 4.2.11; in a ServerHello: a TLS
            1.3 session resumed from a ticket); not in :meth:`to_json`.
        session_id: the legacy session id (RFC 5246 7.4.1.2; a TLS 1.2 server echoing the
            client's resumes that session); not in :meth:`to_json`.
        session_ticket: a ClientHello's session_ticket extension data (RFC 5077 3.2: the
            ticket of the session it wants to resume; empty to ask for one); not in
            :meth:`to_json`.
        complete: False when the bytes stopped inside the hello (fields read so far are set,
            the rest are empty).
    """

    handshake: str
    record_version: str
    legacy_version: str
    supported_versions: tuple[str, ...] = ()
    sni: str | None = None
    alpn: tuple[str, ...] = ()
    cipher_suites: int = 0
    complete: bool = True
    random: bytes | None = None
    encrypt_then_mac: bool = False
    pre_shared_key: bool = False
    session_id: bytes = b""
    session_ticket: bytes = b""

    def version(self) -> str:
        """Best statement of the version: a client's highest offered one, a server's
        selected one (supported_versions if present, else legacy_version), e.g. ``"TLS 1.3"``."""
        if self.supported_versions:
            if self.handshake == "server_hello":
                return self.supported_versions[0]
            known = [v for v in self.supported_versions if v in _RANK]
            if known:
                return max(known, key=_RANK.__getitem__)
            return self.supported_versions[0]
        return self.legacy_version

    def to_json(self) -> dict:
        """JSON-ready dict of the fields plus ``version``."""
        return {
            "handshake": self.handshake, "version": self.version(),
            "record_version": self.record_version, "legacy_version": self.legacy_version,
            "supported_versions": list(self.supported_versions), "sni": self.sni,
            "alpn": list(self.alpn), "cipher_suites": self.cipher_suites,
            "complete": self.complete,
        }


_RANK = {name: i for i, name in enumerate(
    ["SSL 2.0", "SSL 3.0", "TLS 1.0", "TLS 1.1", "TLS 1.2", "TLS 1.3"])}


class _Short(Exception):
    """Internal: the bytes ended inside the hello."""


class _Bad(Exception):
    """Internal: the bytes are not a well-formed hello."""


class _Reader:
    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf: bytes, pos: int = 0, end: int | None = None) -> None:
        self.buf = buf
        self.pos = pos
        self.end = len(buf) if end is None else end

    def take(self, n: int) -> bytes:
        if self.pos + n > self.end:
            raise _Short()
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def u8(self) -> int:
        return self.take(1)[0]

    def u16(self) -> int:
        b = self.take(2)
        return (b[0] << 8) | b[1]

    def u24(self) -> int:
        b = self.take(3)
        return (b[0] << 16) | (b[1] << 8) | b[2]

    def sub(self, n: int) -> "_Reader":
        """A reader over the next ``n`` bytes (short if they are not all present)."""
        start = self.pos
        self.pos = min(self.pos + n, self.end)
        return _Reader(self.buf, start, self.pos) if start + n <= self.end else \
            _ShortReader(self.buf, start, self.pos)

    def remaining(self) -> int:
        return self.end - self.pos


class _ShortReader(_Reader):
    """A sub-reader whose declared length runs past the available bytes."""

    __slots__ = ()


def _assemble(data: bytes) -> tuple[int, bytes]:
    """The first record's version and the handshake bytes of the leading handshake records."""
    if len(data) < 5 or data[0] != CONTENT_HANDSHAKE or data[1] != 3:
        raise _Bad()
    record_version = (data[1] << 8) | data[2]
    chunks = []
    pos = 0
    total = 0
    need = None   # handshake message length incl. its 4-byte header, once known
    while pos + 5 <= len(data) and data[pos] == CONTENT_HANDSHAKE and data[pos + 1] == 3:
        length = (data[pos + 3] << 8) | data[pos + 4]
        if not 1 <= length <= MAX_RECORD_BYTES:
            if pos == 0:
                raise _Bad()
            break
        frag = data[pos + 5:pos + 5 + length]
        chunks.append(frag)
        total += len(frag)
        pos += 5 + length
        if need is None and total >= 4:
            hs = b"".join(chunks)
            need = 4 + ((hs[1] << 16) | (hs[2] << 8) | hs[3])
        if (need is not None and total >= need) or total > MAX_HELLO_BYTES or \
                len(frag) < length:
            break
    return record_version, b"".join(chunks)


def _extensions(r: _Reader, is_client: bool, out: dict) -> None:
    ext_len = r.u16()
    exts = r.sub(ext_len)
    short = isinstance(exts, _ShortReader)
    while exts.remaining() >= 4:
        etype = exts.u16()
        elen = exts.u16()
        body = exts.sub(elen)
        if isinstance(body, _ShortReader):
            raise _Short()
        if etype == EXT_SERVER_NAME and is_client:
            names = body.sub(body.u16())
            while names.remaining() >= 3:
                name_type = names.u8()
                name = names.take(names.u16())
                if name_type == 0 and out.get("sni") is None:
                    out["sni"] = name.decode("ascii", "replace")
        elif etype == EXT_ALPN:
            protos = body.sub(body.u16())
            alpn = []
            while protos.remaining() >= 1:
                alpn.append(protos.take(protos.u8()).decode("ascii", "replace"))
            out["alpn"] = tuple(alpn)
        elif etype == EXT_SUPPORTED_VERSIONS:
            if is_client:
                vers = body.sub(body.u8())
                found = []
                while vers.remaining() >= 2:
                    v = vers.u16()
                    if not _is_grease(v):
                        found.append(version_name(v))
                out["supported_versions"] = tuple(found)
            else:
                out["supported_versions"] = (version_name(body.u16()),)
        elif etype == EXT_ENCRYPT_THEN_MAC:
            out["encrypt_then_mac"] = True
        elif etype == EXT_PRE_SHARED_KEY:
            out["pre_shared_key"] = True
        elif etype == EXT_SESSION_TICKET and is_client:
            out["session_ticket"] = body.take(elen)
    if short or exts.remaining():
        raise _Short()


def parse_hello(data: bytes) -> TlsHello | None:
    """Parse the ClientHello / ServerHello at the start of ``data`` (one stream direction).

    The hello may span several handshake records. Returns ``None`` when ``data`` does not
    start with a TLS handshake record holding a hello, or when it stops before the hello's
    version field; a :class:`TlsHello` with ``complete=False`` when it stops later inside the
    hello. Never raises.
    """
    try:
        return _parse_hello(bytes(data))
    except Exception:   # noqa: BLE001 - garbage in, None out
        return None


def _parse_hello(data: bytes) -> TlsHello | None:
    try:
        record_version, hs = _assemble(data)
    except (_Bad, _Short):
        return None
    return _hello_message(hs, version_name(record_version))


def parse_hello_message(message: bytes, record_version: str) -> TlsHello | None:
    """Parse one whole handshake message (type, 24-bit length, body), as a record layer that
    has reassembled it has it (RFC 8446 section 4): a :class:`TlsHello` for a ClientHello or
    ServerHello, ``None`` for another message or one that stops before its version field.
    ``record_version``: the version of the record that carried it (``"TLS 1.2"``). Never
    raises."""
    try:
        return _hello_message(bytes(message), record_version)
    except Exception:   # noqa: BLE001 - garbage in, None out
        return None


def _hello_message(hs: bytes, record_version: str) -> TlsHello | None:
    if len(hs) < 6 or hs[0] not in (HANDSHAKE_CLIENT_HELLO, HANDSHAKE_SERVER_HELLO):
        return None
    is_client = hs[0] == HANDSHAKE_CLIENT_HELLO
    length = (hs[1] << 16) | (hs[2] << 8) | hs[3]
    if length < 2:
        return None
    r = _Reader(hs, 4, min(len(hs), 4 + length))
    fields: dict = {
        "handshake": "client_hello" if is_client else "server_hello",
        "record_version": record_version,
        "legacy_version": version_name(r.u16()),
    }
    complete = True
    try:
        fields["random"] = r.take(32)
        fields["session_id"] = r.take(r.u8())       # legacy_session_id
        if is_client:
            n = r.u16()
            if n % 2:
                return None
            r.take(n)
            fields["cipher_suites"] = n // 2
            r.take(r.u8())                   # legacy_compression_methods
        else:
            fields["cipher_suites"] = r.u16()
            r.u8()                           # legacy_compression_method
        if r.remaining() > 0:
            _extensions(r, is_client, fields)
        if len(hs) < 4 + length:
            complete = False
    except _Short:
        complete = False
    return TlsHello(complete=complete, **fields)
