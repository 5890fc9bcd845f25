"""Kafka over TLS: librdkafka and Python ssl clients against a Python ``ssl`` server on
127.0.0.1:9093 (no mock cluster, no broker behind it); the truth is what the server saw.

See the scenario's description in ``run()`` and captures/README.md.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from _common import TRUTH_FORMAT, dump_truth

from harness.rdkafka import confluent_version
from harness.run import GENERATED_BY, track
from harness.tcpdump import Tcpdump, start_tcpdump, stop_tcpdump
from harness.values import api_name, now_ns

SCENARIO = "tls_handshake"

TLS_PORT = 9093
TLS_SNI = "broker1.kafka.test"
_TLS_VERSION_NAMES = {0x0304: "TLSv1.3", 0x0303: "TLSv1.2", 0x0302: "TLSv1.1",
                      0x0301: "TLSv1.0", 0x0300: "SSLv3"}


def parse_client_hello(msg: bytes) -> dict[str, Any]:
    """Fields of a TLS ClientHello handshake message (4-byte handshake header included)."""
    if not msg or msg[0] != 1:
        raise ValueError("not a ClientHello")
    body = msg[4:4 + int.from_bytes(msg[1:4], "big")]
    legacy_version = int.from_bytes(body[0:2], "big")
    p = 34
    p += 1 + body[p]
    cs_len = int.from_bytes(body[p:p + 2], "big")
    ciphers = [int.from_bytes(body[p + 2 + i:p + 4 + i], "big") for i in range(0, cs_len, 2)]
    p += 2 + cs_len
    p += 1 + body[p]
    end = p + 2 + int.from_bytes(body[p:p + 2], "big")
    p += 2
    ext_types: list[int] = []
    sni = None
    versions: list[int] = []
    while p + 4 <= end:
        etype = int.from_bytes(body[p:p + 2], "big")
        elen = int.from_bytes(body[p + 2:p + 4], "big")
        val = body[p + 4:p + 4 + elen]
        p += 4 + elen
        ext_types.append(etype)
        if etype == 0 and len(val) >= 5 and val[2] == 0:
            sni = val[5:5 + int.from_bytes(val[3:5], "big")].decode()
        elif etype == 43 and val:
            versions = [int.from_bytes(val[1 + i:3 + i], "big") for i in range(0, val[0], 2)]
    offered = versions or [legacy_version]
    return {"legacy_version": _TLS_VERSION_NAMES.get(legacy_version, hex(legacy_version)),
            "supported_versions_extension": [_TLS_VERSION_NAMES.get(v, hex(v))
                                             for v in versions] or None,
            "versions_offered": [_TLS_VERSION_NAMES.get(v, hex(v)) for v in offered],
            "sni": sni, "cipher_suite_count": len(ciphers),
            "extension_types": ext_types, "client_hello_bytes": len(msg)}


def make_self_signed_cert(directory: Path) -> dict[str, Any]:
    """A self-signed EC P-256 certificate for TLS_SNI (cryptography, else ``openssl req``)."""
    cert, key = directory / "broker.pem", directory / "broker.key"
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        pkey = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, TLS_SNI)])
        now = dt.datetime.now(dt.timezone.utc)
        crt = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
               .public_key(pkey.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - dt.timedelta(minutes=5))
               .not_valid_after(now + dt.timedelta(days=2))
               .add_extension(x509.SubjectAlternativeName([x509.DNSName(TLS_SNI)]), False)
               .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
               .sign(pkey, hashes.SHA256()))
        cert.write_bytes(crt.public_bytes(serialization.Encoding.PEM))
        key.write_bytes(pkey.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
        tool = "cryptography"
    except ImportError:
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
                        "-subj", f"/CN={TLS_SNI}", "-addext", f"subjectAltName=DNS:{TLS_SNI}",
                        "-keyout", str(key), "-out", str(cert)],
                       check=True, capture_output=True)
        tool = "openssl req"
    return {"cert": cert, "key": key,
            "summary": {"subject": f"CN={TLS_SNI}", "subject_alt_names": [f"DNS:{TLS_SNI}"],
                        "key": "EC P-256", "self_signed": True, "generated_with": tool,
                        "note": "generated at run time, not kept"}}


def parse_kafka_request_header(frame: bytes) -> dict[str, Any]:
    """api_key, api_version, correlation_id, client_id of a size-prefixed request frame."""
    size = int.from_bytes(frame[0:4], "big", signed=True)
    api_key = int.from_bytes(frame[4:6], "big", signed=True)
    ver = int.from_bytes(frame[6:8], "big", signed=True)
    corr = int.from_bytes(frame[8:12], "big", signed=True)
    clen = int.from_bytes(frame[12:14], "big", signed=True)
    client_id = None if clen < 0 else frame[14:14 + clen].decode(errors="replace")
    return {"frame_size": size, "api_key": api_key, "api_name": api_name(api_key),
            "api_version": ver, "correlation_id": corr, "client_id": client_id}


class TlsServer(threading.Thread):
    """A Python ``ssl`` server on 127.0.0.1:TLS_PORT recording each connection's ClientHello.

    For every connection: TLS handshake, then read one size-prefixed Kafka request from
    inside the TLS stream (header recorded), then close. Handled one at a time.
    """

    def __init__(self, cert: Path, key: Path) -> None:
        super().__init__(name="tls-server", daemon=True)
        import socket
        import ssl

        self.ssl = ssl
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(str(cert), str(key))
        ctx.sni_callback = self._on_sni
        ctx._msg_callback = self._on_msg  # type: ignore[attr-defined]  # CPython debug hook
        self.ctx = ctx
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", TLS_PORT))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.stop_event = threading.Event()
        self.connections: list[dict[str, Any]] = []
        self._current: dict[str, Any] | None = None

    def _on_sni(self, _sslobj: Any, server_name: str | None, _ctx: Any) -> None:
        if self._current is not None:
            self._current["sni_seen_by_server"] = server_name

    def _on_msg(self, _conn: Any, direction: str, _version: Any, content_type: Any,
                msg_type: Any, data: bytes) -> None:
        ssl = self.ssl
        if self._current is None or direction != "read":
            return
        if content_type == ssl._TLSContentType.HANDSHAKE \
                and msg_type == ssl._TLSMessageType.CLIENT_HELLO \
                and "client_hello" not in self._current:
            try:
                self._current["client_hello"] = parse_client_hello(bytes(data))
            except Exception as exc:  # record, never break the handshake
                self._current["client_hello"] = {"parse_error": repr(exc)}

    def run(self) -> None:
        import socket

        while not self.stop_event.is_set():
            try:
                raw, addr = self.sock.accept()
            except socket.timeout:
                continue
            entry: dict[str, Any] = {"client_port": addr[1], "accepted_ts_ns": now_ns()}
            self._current = entry
            raw.settimeout(5)
            tls = self.ctx.wrap_socket(raw, server_side=True, do_handshake_on_connect=False)
            try:
                tls.do_handshake()
                entry.update(handshake="completed", negotiated_version=tls.version(),
                             cipher=tls.cipher()[0], handshake_done_ts_ns=now_ns())
                buf = b""
                while len(buf) < 4 or len(buf) < 4 + int.from_bytes(buf[:4], "big"):
                    chunk = tls.recv(65536)
                    if not chunk:
                        break
                    buf += chunk
                if len(buf) >= 14:
                    entry["kafka_request_inside_tls"] = parse_kafka_request_header(buf)
                    entry["kafka_request_inside_tls"]["read_ts_ns"] = now_ns()
            except Exception as exc:
                entry.setdefault("handshake", f"failed: {exc!r}")
                entry["error"] = repr(exc)
            finally:
                self._current = None
                self.connections.append(entry)
                try:
                    tls.close()
                except OSError:
                    pass

    def stop(self) -> None:
        self.stop_event.set()
        self.join(5)
        self.sock.close()


_TLS_RDKAFKA_CLIENT = r'''
import sys
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": sys.argv[1], "security.protocol": "SSL",
              "ssl.ca.location": sys.argv[2], "client.id": "ks-tls-librdkafka",
              "debug": "security,protocol,broker", "enable.metrics.push": False,
              "reconnect.backoff.ms": 10000, "reconnect.backoff.max.ms": 10000})
p.poll(float(sys.argv[3]))
'''


class TlsRun:
    """The TLS scenario: no mock cluster, a Python TLS server on TLS_PORT; writes
    ``out_dir/NAME.truth.json``."""

    def __init__(self, name: str, description: str, *, out_dir: Path) -> None:
        import ssl

        self.name = name
        self.out_dir = out_dir
        self.tcpdump: Tcpdump | None = None
        self.truth: dict[str, Any] = {
            "format": TRUTH_FORMAT, "scenario": name, "description": description,
            "generated_by": GENERATED_BY,
            "generated_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "pcap": f"{name}.pcap", "client_library": {},
            # the implementation name the committed truth carries (written before the
            # class moved from make_captures.py to this module)
            "tls_server": {"implementation": "Python ssl (make_captures.TlsServer)",
                           "openssl": ssl.OPENSSL_VERSION, "port": TLS_PORT,
                           "minimum_version": "TLSv1.2"},
            "broker_ports": [TLS_PORT], "capture": {}, "tls_connections": [],
            "produced": [], "consumed": [], "requests": [], "notes": [],
        }
        track(self)

    def abort(self) -> None:
        """After a failure: stop tcpdump (what it wrote is discarded)."""
        if self.tcpdump is not None:
            self.tcpdump.kill()

    def finish(self) -> Path:
        """Write ``out_dir/NAME.truth.json``; return its path."""
        path = self.out_dir / f"{self.name}.truth.json"
        path.write_text(dump_truth(self.truth))
        return path


def run(out_dir: Path) -> TlsRun:
    """Run the scenario, writing ``out_dir/tls_handshake.pcap``; return the run (its truth
    is written by ``finish()``)."""
    import ssl
    import tempfile

    run = TlsRun(SCENARIO,
                 f"Kafka over TLS on 127.0.0.1:{TLS_PORT} (a Python ssl server with a "
                 f"self-signed certificate for {TLS_SNI}; no Kafka broker behind it). Three "
                 "connections, each with SNI broker1.kafka.test: (1) librdkafka "
                 "(confluent-kafka, security.protocol=SSL) offering TLS 1.3 and 1.2, full "
                 "handshake, then its ApiVersions request encrypted; the server reads it and "
                 "closes; (2) Python ssl client limited to TLS 1.2 (no supported_versions "
                 "extension), sends an ApiVersions v0 request inside TLS; (3) Python ssl client "
                 "offering only TLS 1.3, same request. Nothing Kafka is readable on the wire.",
                 out_dir=out_dir)
    run.truth["client_library"] = {**confluent_version(), "python_ssl": ssl.OPENSSL_VERSION}
    with tempfile.TemporaryDirectory(prefix="ks-tls-") as tmp:
        tmpdir = Path(tmp)
        cert = make_self_signed_cert(tmpdir)
        run.truth["tls_server"]["certificate"] = cert["summary"]
        hosts = tmpdir / "hosts"
        hosts.write_text(f"127.0.0.1 localhost\n127.0.0.1 {TLS_SNI}\n")
        server = TlsServer(cert["cert"], cert["key"])
        server.start()
        run.tcpdump = start_tcpdump(out_dir / f"{run.name}.pcap", [TLS_PORT], run.truth)
        clients: list[dict[str, Any]] = []
        # (1) librdkafka in a private mount namespace whose /etc/hosts names TLS_SNI, so
        # librdkafka connects by that name and puts it in the SNI (nothing changes outside).
        argv = ["unshare", "-m", "sh", "-c",
                'mount --bind "$0" /etc/hosts && exec "$@"', str(hosts), sys.executable,
                "-c", _TLS_RDKAFKA_CLIENT, f"{TLS_SNI}:{TLS_PORT}", str(cert["cert"]), "2.0"]
        t0 = now_ns()
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        log_lines = [ln for ln in proc.stderr.splitlines()
                     if re.search(r"SSL|TLS|Sent |Received |Connected|Disconnected|"
                                  r"handshake|certificate|failed", ln)]
        clients.append({"client": "librdkafka", "client_id": "ks-tls-librdkafka",
                        "how": "confluent-kafka Producer, security.protocol=SSL, "
                               f"bootstrap.servers={TLS_SNI}:{TLS_PORT}, ssl.ca.location="
                               "the self-signed certificate",
                        "started_ts_ns": t0, "exit_code": proc.returncode,
                        "client_log_excerpts": log_lines[:60]})
        if proc.returncode != 0:
            raise SystemExit(f"librdkafka TLS client failed ({proc.returncode}): "
                             f"{proc.stderr[-2000:]}")
        time.sleep(0.3)
        # (2) and (3): Python ssl clients with a fixed version range
        import socket

        request = b"".join([(18).to_bytes(2, "big"), (0).to_bytes(2, "big"),
                            (1).to_bytes(4, "big"), len(b"ks-tls-python").to_bytes(2, "big"),
                            b"ks-tls-python"])
        frame = len(request).to_bytes(4, "big") + request
        for label, vmin, vmax in [("python-ssl-tls12", ssl.TLSVersion.TLSv1_2,
                                   ssl.TLSVersion.TLSv1_2),
                                  ("python-ssl-tls13", ssl.TLSVersion.TLSv1_3,
                                   ssl.TLSVersion.TLSv1_3)]:
            ctx = ssl.create_default_context(cafile=str(cert["cert"]))
            ctx.minimum_version, ctx.maximum_version = vmin, vmax
            t0 = now_ns()
            with socket.create_connection(("127.0.0.1", TLS_PORT), timeout=5) as raw:
                with ctx.wrap_socket(raw, server_hostname=TLS_SNI) as tls:
                    local_port = raw.getsockname()[1] if raw.fileno() >= 0 else None
                    version = tls.version()
                    tls.sendall(frame)
                    try:
                        tls.recv(1)  # the server closes after reading the request
                    except (ssl.SSLError, OSError):
                        pass
            clients.append({"client": label, "client_id": "ks-tls-python",
                            "how": f"Python ssl client, versions {vmin.name}..{vmax.name}, "
                                   f"server_hostname={TLS_SNI}",
                            "started_ts_ns": t0, "local_port": local_port,
                            "negotiated_version": version,
                            "kafka_request_sent_inside_tls": {
                                "api_key": 18, "api_name": "ApiVersions", "api_version": 0,
                                "correlation_id": 1, "client_id": "ks-tls-python",
                                "frame_hex": frame.hex()}})
            time.sleep(0.3)
        stop_tcpdump(run.tcpdump, run.truth)
        server.stop()
    for i, entry in enumerate(server.connections):
        entry["client"] = clients[i]["client"] if i < len(clients) else None
    run.truth["tls_connections"] = server.connections
    run.truth["clients"] = clients
    run.truth["notes"] += [
        "tls_connections is what the TLS server saw, one entry per accepted connection in "
        "order: client_hello is parsed from the ClientHello handshake message handed to the "
        "server by OpenSSL (ssl.SSLContext._msg_callback), kafka_request_inside_tls is the "
        "header of the first Kafka request the server decrypted. Nothing is taken from the pcap.",
        "versions_offered: the supported_versions extension if present, else the "
        "ClientHello's legacy_version.",
        "The server closes each connection after reading one request (close_notify alert, "
        "FIN). librdkafka logs \"SSL connection closed by peer\" (it would reconnect after "
        "10 s); its poll() returns on that error event and the client process exits. The "
        "kafka requests inside TLS are not in 'requests' (a decoder cannot see them).",
        "librdkafka ran in a private mount namespace (unshare -m) with /etc/hosts bind-"
        f"mounted to a file naming {TLS_SNI} = 127.0.0.1, so it connects by that name and "
        "sends it as SNI; the host's /etc/hosts is untouched.",
    ]
    return run


def check(name: str, out_dir: Path) -> dict[str, Any]:
    """tshark on ``out_dir/NAME.pcap``: no truncated packet; the ClientHellos' SNI equal
    the truth's. Returns a summary (pcap bytes, packets, TCP streams, ClientHellos)."""
    truth = json.loads((out_dir / f"{name}.truth.json").read_text())
    pcap = out_dir / f"{name}.pcap"
    out = subprocess.run(
        ["tshark", "-r", str(pcap), "-n", "-T", "fields", "-E", "separator=|",
         "-e", "frame.len", "-e", "frame.cap_len", "-e", "tcp.stream",
         "-e", "tls.handshake.type", "-e", "tls.handshake.extensions_server_name",
         "-e", "tls.handshake.extensions.supported_version"],
        capture_output=True, text=True, check=True).stdout
    packets = truncated = 0
    hellos = []
    streams = set()
    for line in out.splitlines():
        flen, clen, stream, htype, sni, versions = line.split("|")
        packets += 1
        truncated += flen != clen
        streams.add(stream)
        if "1" in htype.split(","):
            hellos.append((sni, versions))
    problems = []
    if truncated:
        problems.append(f"{truncated} truncated packets")
    want = [c.get("client_hello", {}).get("sni") for c in truth["tls_connections"]]
    if [h[0] for h in hellos] != want:
        problems.append(f"ClientHello SNI {hellos} != truth {want}")
    summary = {"pcap_bytes": pcap.stat().st_size, "packets": packets,
               "tcp_streams": len(streams), "client_hellos": hellos, "problems": problems}
    if problems:
        raise SystemExit(f"{name}: " + "; ".join(problems))
    return summary


# --------------------------------------------------------------------------- check
