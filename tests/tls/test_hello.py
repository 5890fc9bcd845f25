"""TLS recognition: real ClientHello / ServerHello bytes made by Python's ssl module in memory
(``MemoryBIO`` pairs, no sockets), re-fragmented, truncated, random and non-TLS inputs."""

from __future__ import annotations

import shutil
import ssl
import struct
import subprocess

import pytest
from hypothesis import given, settings, strategies as st

from kafkasniff.tls.hello import TlsHello, _parse_hello, looks_like_tls, parse_hello, version_name

HOST = "broker1.kafka.test"
ALPN = ["kafka", "http/1.1"]


@pytest.fixture(scope="module")
def cert_files(tmp_path_factory):
    """A self-signed EC certificate for the server side (made with the openssl CLI)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl CLI not available")
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec",
                    "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
                    "-subj", f"/CN={HOST}", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    return str(cert), str(key)


def client_context(version: ssl.TLSVersion | None) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if version is not None:
        ctx.maximum_version = version
    ctx.set_alpn_protocols(ALPN)
    return ctx


def client_hello(version: ssl.TLSVersion | None = None) -> bytes:
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = client_context(version).wrap_bio(inc, out, server_hostname=HOST)
    with pytest.raises(ssl.SSLWantReadError):
        obj.do_handshake()
    return out.read()


def handshake(cert_files, version: ssl.TLSVersion | None) -> tuple[bytes, bytes]:
    """(client's first flight, server's first flight) pumped between two MemoryBIO pairs."""
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(*cert_files)
    sctx.set_alpn_protocols(["kafka"])
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    client = client_context(version).wrap_bio(c_in, c_out, server_hostname=HOST)
    server = sctx.wrap_bio(s_in, s_out, server_side=True)
    with pytest.raises(ssl.SSLWantReadError):
        client.do_handshake()
    first = c_out.read()
    s_in.write(first)
    with pytest.raises(ssl.SSLWantReadError):
        server.do_handshake()
    reply = s_out.read()
    # finish the handshake, proving the bytes are a real exchange
    c_in.write(reply)
    for _ in range(10):
        try:
            client.do_handshake()
            break
        except ssl.SSLWantReadError:
            pass
        s_in.write(c_out.read())
        try:
            server.do_handshake()
        except ssl.SSLWantReadError:
            pass
        c_in.write(s_out.read())
    s_in.write(c_out.read())
    try:
        server.do_handshake()
    except ssl.SSLWantReadError:
        pass
    assert client.selected_alpn_protocol() == "kafka"
    return first, reply


def refragment(data: bytes, sizes: list[int]) -> bytes:
    """The first record's handshake bytes re-cut into records of the given sizes."""
    assert data[0] == 22
    length = struct.unpack(">H", data[3:5])[0]
    hs, rest = data[5:5 + length], data[5 + length:]
    out, pos, i = b"", 0, 0
    while pos < len(hs):
        n = sizes[i % len(sizes)]
        out += data[:3] + struct.pack(">H", len(hs[pos:pos + n])) + hs[pos:pos + n]
        pos += n
        i += 1
    return out + rest


# --------------------------------------------------------------------------- version names

def test_version_name():
    assert version_name(0x0300) == "SSL 3.0"
    assert version_name(0x0301) == "TLS 1.0"
    assert version_name(0x0302) == "TLS 1.1"
    assert version_name(0x0303) == "TLS 1.2"
    assert version_name(0x0304) == "TLS 1.3"
    for g in range(16):
        assert version_name((g << 12) | 0x0A00 | (g << 4) | 0x0A) == "GREASE"
    assert version_name(0x7F1C) == "TLS 1.3 draft 28"
    assert version_name(0x1234) == "0x1234"


# --------------------------------------------------------------------------- real hellos

def test_client_hello_tls13():
    data = client_hello()
    assert looks_like_tls(data)
    h = parse_hello(data)
    assert isinstance(h, TlsHello)
    assert h.handshake == "client_hello" and h.complete
    assert h.record_version in ("TLS 1.0", "TLS 1.2")
    assert h.legacy_version == "TLS 1.2"
    assert "TLS 1.3" in h.supported_versions and "TLS 1.2" in h.supported_versions
    assert h.version() == "TLS 1.3"
    assert h.sni == HOST
    assert h.alpn == tuple(ALPN)
    assert h.cipher_suites > 3
    assert h.to_json()["version"] == "TLS 1.3"


def test_client_hello_tls12_only():
    h = parse_hello(client_hello(ssl.TLSVersion.TLSv1_2))
    assert h.handshake == "client_hello" and h.complete
    assert "TLS 1.3" not in h.supported_versions
    assert h.version() == "TLS 1.2"
    assert h.sni == HOST and h.alpn == tuple(ALPN)


def test_server_hello_tls13(cert_files):
    first, reply = handshake(cert_files, None)
    assert looks_like_tls(reply)
    h = parse_hello(reply)
    assert h.handshake == "server_hello" and h.complete
    assert h.legacy_version == "TLS 1.2"
    assert h.supported_versions == ("TLS 1.3",)
    assert h.version() == "TLS 1.3"
    assert h.sni is None
    assert h.alpn == ()             # TLS 1.3 sends ALPN in the encrypted extensions
    assert h.cipher_suites in (0x1301, 0x1302, 0x1303)
    assert parse_hello(first).sni == HOST


def test_server_hello_tls12(cert_files):
    _, reply = handshake(cert_files, ssl.TLSVersion.TLSv1_2)
    h = parse_hello(reply)
    assert h.handshake == "server_hello" and h.complete
    assert h.version() == "TLS 1.2" and h.supported_versions == ()
    assert h.alpn == ("kafka",)
    assert h.cipher_suites > 0


def test_hello_spread_over_records():
    data = client_hello()
    whole = parse_hello(data)
    for sizes in ([100], [1], [2, 3], [7, 50, 400]):
        assert parse_hello(refragment(data, sizes)) == whole


def test_trailing_data_is_ignored():
    data = client_hello()
    assert parse_hello(data + b"\x17\x03\x03\x00\x05hello" + bytes(100)) == parse_hello(data)


@pytest.mark.parametrize("version", [None, ssl.TLSVersion.TLSv1_2])
def test_truncated_hellos_never_raise(cert_files, version):
    first, reply = handshake(cert_files, version)
    for data in (first, refragment(first, [37]), reply):
        whole = parse_hello(data)
        assert whole.complete
        for n in range(len(data) + 1):
            h = parse_hello(data[:n])
            assert h is None or isinstance(h, TlsHello)
            if h is not None:
                assert h.handshake == whole.handshake
                assert h.complete == (h == whole)
        assert parse_hello(data[:10]) is None
        partial = parse_hello(data[:60])
        assert partial is not None and not partial.complete


# --------------------------------------------------------------------------- not TLS

def kafka_request() -> bytes:
    client_id = b"rdkafka"
    body = b"\x07rdkafka\x062.6.0\x00"        # ApiVersions v3 body (compact strings)
    header = struct.pack(">hhih", 18, 3, 1, len(client_id)) + client_id + b"\x00"
    return struct.pack(">i", len(header + body)) + header + body


@pytest.mark.parametrize("data", [
    kafka_request(),
    b"GET / HTTP/1.1\r\nHost: broker1\r\n\r\n",
    b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    b"\x17\x03\x03\x00\x20" + bytes(32),          # application data record
    b"\x16\x03\x05\x00\x20\x01" + bytes(31),      # unknown version
    b"\x16\x03\x01\x00\x00",                      # empty record
    b"\x16\x03\x01\x50\x01\x01",                  # longer than a record may be
    b"\x16\x03\x01\x00\x20\x0b" + bytes(31),      # Certificate, not a hello
    b"\x16\x03\x01",                              # too short to tell
    b"",
])
def test_not_tls(data):
    assert not looks_like_tls(data)
    assert parse_hello(data) is None


def test_record_header_alone_looks_like_tls():
    assert looks_like_tls(client_hello()[:5])
    assert parse_hello(client_hello()[:5]) is None


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=600))
def test_random_bytes_never_raise(data):
    # the parser under parse_hello's catch-all: a bug raising on bad input fails here
    assert looks_like_tls(data) in (True, False)
    h = _parse_hello(data)
    assert h is None or isinstance(h, TlsHello)
    assert parse_hello(data) == h


@settings(max_examples=500, deadline=None)
@given(prefix=st.sampled_from([b"\x16\x03\x01", b"\x16\x03\x03"]),
       length=st.integers(0, 0xFFFF), hs_type=st.sampled_from([1, 2]),
       rest=st.binary(max_size=400))
def test_random_hello_bodies_never_raise(prefix, length, hs_type, rest):
    data = prefix + struct.pack(">H", length) + bytes([hs_type]) + rest
    h = _parse_hello(data)
    assert h is None or isinstance(h, TlsHello)
    if h is not None:
        h.version()
        h.to_json()


@settings(max_examples=300, deadline=None)
@given(cut=st.integers(0, 10_000), flip=st.integers(0, 255), pos=st.integers(0, 10_000))
def test_mutated_real_hello_never_raises(cut, flip, pos):
    data = bytearray(client_hello())
    data[pos % len(data)] ^= flip
    h = _parse_hello(bytes(data[:cut % (len(data) + 1)]))
    assert h is None or isinstance(h, TlsHello)
