"""Generate the same Kafka traffic twice, in plaintext and in TLS 1.3 with its key log, for
the TLS benchmark (``bench_tls.py``).

The seeds are the plaintext captures of ``captures/`` (real clients; the TLS ones and the Kafka
0.7 one, a wire format older than Kafka's TLS, left out).

Every TCP connection whose handshake is captured, whose client speaks first and whose
segments do not overlap is turned into a TLS 1.3 connection (TLS_AES_128_GCM_SHA256, RFC
8446): a ClientHello before the client's first bytes, the server's ServerHello and its
encrypted flight (EncryptedExtensions and Finished, under the server handshake traffic
secret), the client's encrypted Finished, then every segment's payload as application data
records (at most 16 KiB each, under the traffic secrets), sequence and acknowledgement
numbers moved by the bytes the records add. Secrets are derived per connection (reproducibly),
written as an NSS key log. Connections that cannot be converted are left out of both
captures, so that the two hold the same Kafka frames. Both seed sets are then replayed like
``make_big_capture.py`` (fresh endpoints, staggered); replicas of a connection share its
ciphertext and client random, which changes nothing for a decryptor. Nothing generated here
is committed.

Usage::

    .venv/bin/python bench/make_tls_capture.py --packets 300000 --out bench/data
    # -> bench/data/tls-plain.pcap, bench/data/tls.pcap, bench/data/tls.keylog
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import struct
import sys
from pathlib import Path

from live_traffic import ROOT, broker_addresses, broker_ports, load_seeds
from make_big_capture import write_replays

SUITE = 0x1301                       # TLS_AES_128_GCM_SHA256
MAX_PLAINTEXT = 1 << 14


def _hkdf_label(secret: bytes, label: bytes, length: int) -> bytes:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

    full = b"tls13 " + label
    info = struct.pack(">HB", length, len(full)) + full + b"\x00"
    return HKDFExpand(hashes.SHA256(), length, info).derive(secret)


class _Protect:
    """One direction's TLS 1.3 record protection under one traffic secret."""

    def __init__(self, secret: bytes) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self.aead = AESGCM(_hkdf_label(secret, b"key", 16))
        self.iv = int.from_bytes(_hkdf_label(secret, b"iv", 12), "big")
        self.seq = 0

    def records(self, data: bytes, inner_type: int = 23) -> bytes:
        out = []
        for i in range(0, len(data), MAX_PLAINTEXT):
            plain = data[i:i + MAX_PLAINTEXT] + bytes([inner_type])
            header = b"\x17\x03\x03" + struct.pack(">H", len(plain) + 16)
            nonce = (self.iv ^ self.seq).to_bytes(12, "big")
            self.seq += 1
            out.append(header + self.aead.encrypt(nonce, plain, header))
        return b"".join(out)


def _handshake(mtype: int, body: bytes) -> bytes:
    return bytes([mtype]) + len(body).to_bytes(3, "big") + body


def _plain_record(body: bytes) -> bytes:
    return b"\x16\x03\x03" + struct.pack(">H", len(body)) + body


def _hellos(client_random: bytes, server_random: bytes) -> tuple[bytes, bytes]:
    session = hashlib.sha256(client_random).digest()
    ch = (b"\x03\x03" + client_random + bytes([32]) + session + struct.pack(">HH", 2, SUITE)
          + b"\x01\x00")
    ch_ext = struct.pack(">HHB", 43, 3, 2) + b"\x03\x04"          # supported_versions
    ch += struct.pack(">H", len(ch_ext)) + ch_ext
    sh = b"\x03\x03" + server_random + bytes([32]) + session + struct.pack(">HB", SUITE, 0)
    sh_ext = struct.pack(">HH", 43, 2) + b"\x03\x04"
    sh += struct.pack(">H", len(sh_ext)) + sh_ext
    return _plain_record(_handshake(1, ch)), _plain_record(_handshake(2, sh))


def tls_connection(segs: list[tuple], client: tuple, key: bytes) -> tuple[list[tuple], str]:
    """The segments of one connection (``client``: its client ``(ip, port)``) as TLS 1.3,
    and its key log lines. ``key`` seeds the randoms and secrets (reproducible)."""
    def rnd(label: bytes) -> bytes:
        return hashlib.sha256(key + label).digest()

    crandom, srandom = rnd(b"client random"), rnd(b"server random")
    secrets = {name: rnd(name.encode()) for name in (
        "CLIENT_HANDSHAKE_TRAFFIC_SECRET", "SERVER_HANDSHAKE_TRAFFIC_SECRET",
        "CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0")}
    log = "".join(f"{name} {crandom.hex()} {s.hex()}\n" for name, s in secrets.items())
    ch, sh = _hellos(crandom, srandom)
    app = {0: _Protect(secrets["CLIENT_TRAFFIC_SECRET_0"]),
           1: _Protect(secrets["SERVER_TRAFFIC_SECRET_0"])}
    shift = [0, 0]                  # bytes added so far, per direction (0 client, 1 server)
    out: list[tuple] = []
    started = False
    for ts, src, sport, dst, dport, seq, ack, flags, payload in segs:
        d = 0 if (src, sport) == client else 1
        if payload and not started:
            started = True
            server_flight = sh + _Protect(secrets["SERVER_HANDSHAKE_TRAFFIC_SECRET"]).records(
                _handshake(8, b"\x00\x00") + _handshake(20, rnd(b"server finished")), 22)
            client_finished = _Protect(secrets["CLIENT_HANDSHAKE_TRAFFIC_SECRET"]).records(
                _handshake(20, rnd(b"client finished")), 22)
            # the client's hello, the server's flight, then the client's Finished before
            # its first request (in the same segment)
            out.append((ts - 2000, src, sport, dst, dport, seq, ack, 0x18, ch))
            shift[0] += len(ch)
            out.append((ts - 1000, dst, dport, src, sport, ack, seq + shift[0], 0x18,
                        server_flight))
            shift[1] += len(server_flight)
            new = client_finished + app[0].records(payload)
            out.append((ts, src, sport, dst, dport, seq + shift[0], ack + shift[1], flags,
                        new))
            shift[0] += len(new) - len(payload)
            continue
        new = app[d].records(payload) if payload else b""
        out.append((ts, src, sport, dst, dport, seq + shift[d],
                    ack + shift[1 - d] if flags & 0x10 else ack, flags, new))
        shift[d] += len(new) - len(payload)
    return out, log


def convert(seeds: list[tuple[str, list[tuple]]]) -> tuple[list, list, str, dict]:
    """``(plain_seeds, tls_seeds, key_log_text, counts)`` from plaintext seeds: the
    connections that can be converted, as they are and as TLS 1.3."""
    plain_seeds, tls_seeds, logs = [], [], []
    counts = {"converted": 0, "left_out": 0}
    for path, segs in seeds:
        ports = broker_ports(path, segs)
        conns: dict[tuple, list[tuple]] = {}
        for s in segs:
            _, src, sport, dst, dport = s[:5]
            if dport in ports:
                conns.setdefault((src, sport, dst, dport), []).append(s)
            elif sport in ports:
                conns.setdefault((dst, dport, src, sport), []).append(s)
        plain, tls = [], []
        for key, c in conns.items():
            first = next((s for s in c if s[8]), None)
            ends: dict[tuple, int] = {}
            overlap = False
            for s in c:
                if s[8]:
                    k = (s[1], s[2])
                    if k in ends and (s[5] - ends[k]) & 0x80000000:
                        overlap = True          # a retransmission or reordering
                    ends[k] = (s[5] + len(s[8])) & 0xFFFFFFFF
            syn = any(s[7] & 0x12 == 0x02 for s in c)      # the client's SYN is captured
            if first is None or (first[1], first[2]) != key[:2] or overlap or not syn:
                counts["left_out"] += 1
                continue
            counts["converted"] += 1
            segs_tls, log = tls_connection(c, key[:2], f"{path}{key}".encode())
            plain.extend(c)
            tls.extend(segs_tls)
            logs.append(log)
        if plain:
            plain_seeds.append((path, sorted(plain, key=lambda s: s[0])))
            tls_seeds.append((path, sorted(tls, key=lambda s: s[0])))
    return plain_seeds, tls_seeds, "".join(logs), counts


def ensure(out_dir: Path, packets: int) -> tuple[Path, Path, Path]:
    """``(plain, tls, keylog)`` paths, generated first (in this script's own process) when
    one is missing."""
    import subprocess

    paths = (out_dir / "tls-plain.pcap", out_dir / "tls.pcap", out_dir / "tls.keylog")
    if not all(p.exists() for p in paths):
        subprocess.run([sys.executable, __file__, "--out", str(out_dir), "--packets",
                        str(packets)], check=True)
    return paths


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "data")
    ap.add_argument("--packets", type=int, default=300_000,
                    help="at least this many packets in the plaintext capture")
    ap.add_argument("--concurrency", type=int, default=200)
    args = ap.parse_args(argv)
    # not the TLS captures (already TLS) nor Kafka 0.7 (it predates Kafka's TLS)
    paths = [p for p in sorted(glob.glob(str(ROOT / "captures" / "*.pcap")))
             if "tls" not in Path(p).name and "kafka07" not in Path(p).name]
    plain, tls, log, counts = convert(load_seeds(paths))
    brokers = [broker_addresses(path, segs) for path, segs in plain]
    rounds = -(-args.packets // sum(len(s) for _, s in plain))
    args.out.mkdir(parents=True, exist_ok=True)
    n_plain = write_replays(plain, brokers, args.out / "tls-plain.pcap", rounds,
                            args.concurrency)[0]
    n_tls = write_replays(tls, brokers, args.out / "tls.pcap", rounds, args.concurrency)[0]
    (args.out / "tls.keylog").write_text(log)
    print(f"{counts['converted']} connections converted ({counts['left_out']} left out) x "
          f"{rounds} rounds: {n_plain} packets in tls-plain.pcap, {n_tls} in tls.pcap")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
