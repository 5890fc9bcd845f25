"""Decode speed of Kafka over TLS with a key log, next to the same traffic in plaintext.

``make_tls_capture.py`` makes the two captures (the same Kafka frames; TLS 1.3
AES-128-GCM records around them) and the key log. In one run, alternating, this measures
``kafkasniff stats`` and ``read --json`` on both, tshark ``-T fields`` on both (with the key
log for the TLS one), and what the cryptography itself costs: ``cryptography``'s AES-GCM
decrypting every record of the capture (sizes as in the capture) plus the key schedule of
every connection (HKDF-Expand-Label and an AESGCM object per key), in this process. It
checks first that both captures decode to the same exchanges.

Usage::

    .venv/bin/python bench/bench_tls.py [--packets 300000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import make_tls_capture  # noqa: E402
from bench_decode import VENV_BIN, measure  # noqa: E402


def _records(pcap: Path) -> tuple[int, list[int], int]:
    """(TCP payload bytes, the TLS application records' ciphertext lengths, connections)
    of the TLS capture (every record of this generator starts and ends in one segment)."""
    import dpkt

    sizes: list[int] = []
    payload = 0
    conns = set()
    with open(pcap, "rb") as f:
        for _ts, buf in dpkt.pcap.Reader(f):
            tcp = dpkt.ethernet.Ethernet(buf).data.data
            data = bytes(tcp.data)
            payload += len(data)
            if tcp.flags & 0x12 == 0x02:         # a client's SYN
                ip = dpkt.ethernet.Ethernet(buf).data
                conns.add((ip.src, tcp.sport, ip.dst, tcp.dport))
            pos = 0
            while pos + 5 <= len(data):
                n = int.from_bytes(data[pos + 3:pos + 5], "big")
                if data[pos] == 0x17:
                    sizes.append(n)
                pos += 5 + n
    return payload, sizes, len(conns)


def _crypto_seconds(sizes: list[int], connections: int) -> float:
    """What ``cryptography`` alone spends: AES-128-GCM opening records of these sizes, and
    per connection 4 traffic secrets' keys and IVs (HKDF-Expand-Label) and AESGCM objects."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    from kafkasniff.tls.decrypt import hkdf_expand_label

    key, nonce = os.urandom(16), os.urandom(12)
    aead = AESGCM(key)
    sealed: dict[int, bytes] = {}
    for n in set(sizes):
        sealed[n] = aead.encrypt(nonce, bytes(max(0, n - 16)), b"hdr12")
    t0 = time.perf_counter()
    for n in sizes:
        aead.decrypt(nonce, sealed[n], b"hdr12")
    records = time.perf_counter() - t0
    secret = os.urandom(32)
    k = min(connections, 2000)
    t0 = time.perf_counter()
    for _ in range(k * 4):
        AESGCM(hkdf_expand_label(secret, b"key", b"", 16, "sha256"))
        hkdf_expand_label(secret, b"iv", b"", 12, "sha256")
    keys = (time.perf_counter() - t0) * connections / max(1, k)
    return records + keys


def _same_exchanges(ks: str, plain: Path, tls: Path, keylog: Path) -> tuple[int, str]:
    """The exchanges of both captures, compared as ``read --json`` lines without the
    ``tls`` object: (count, digest); exits when they differ."""
    digests = []
    for args in ([str(plain)], ["--tls-keylog", str(keylog), str(tls)]):
        proc = subprocess.run([ks, "read", "-q", "--json", *args], capture_output=True,
                              text=True, check=True)
        h = hashlib.sha256()
        n = 0
        for line in proc.stdout.splitlines():
            d = json.loads(line)
            d.pop("tls", None)
            h.update(json.dumps(d, sort_keys=True).encode())
            n += d.get("type") == "exchange"
        digests.append((n, h.hexdigest()))
    if digests[0] != digests[1]:
        raise SystemExit(f"the captures decode differently: {digests}")
    return digests[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--packets", type=int, default=300_000)
    ap.add_argument("--rounds", type=int, default=3, help="alternating runs of each command")
    ap.add_argument("--data", type=Path, default=HERE / "data")
    ap.add_argument("--json-out", type=Path, default=HERE / "out" / "tls.json")
    args = ap.parse_args(argv)
    plain, tls, keylog = make_tls_capture.ensure(args.data, args.packets)
    ks = str(VENV_BIN / "kafkasniff")
    exchanges, digest = _same_exchanges(ks, plain, tls, keylog)
    commands = {
        "kafkasniff stats (plaintext)": [ks, "stats", "--json", str(plain)],
        "kafkasniff stats --tls-keylog (TLS)": [ks, "stats", "--json", "--tls-keylog",
                                                str(keylog), str(tls)],
        "kafkasniff read --json (plaintext)": [ks, "read", "-q", "--json", str(plain)],
        "kafkasniff read --json --tls-keylog (TLS)": [ks, "read", "-q", "--json",
                                                      "--tls-keylog", str(keylog), str(tls)],
    }
    tshark = shutil.which("tshark")
    if tshark:
        fields = ["-T", "fields", "-e", "kafka.api_key", "-e", "kafka.correlation_id"]
        commands["tshark -T fields (plaintext)"] = [tshark, "-r", str(plain), *fields]
        commands["tshark -T fields -o tls.keylog_file (TLS)"] = [
            tshark, "-r", str(tls), "-o", f"tls.keylog_file:{keylog}", "-d",
            "tcp.port==9092,tls", "-d", "tls.port==9092,kafka", *fields]
    times: dict[str, list[float]] = {name: [] for name in commands}
    rss: dict[str, int] = {}
    for _ in range(args.rounds):
        for name, cmd in commands.items():
            wall, kib, _ = measure(cmd)
            times[name].append(wall)
            rss[name] = max(rss.get(name, 0), kib)
    packets = {str(plain): 0, str(tls): 0}
    for path in packets:
        out = subprocess.run([ks, "stats", "--json", *(["--tls-keylog", str(keylog)]
                              if path == str(tls) else []), path],
                             capture_output=True, text=True, check=True).stdout
        packets[path] = json.loads(out)["pipeline"]["packets"]
    payload, sizes, conns = _records(tls)
    crypto = _crypto_seconds(sizes, conns)
    print(f"plaintext: {plain} ({plain.stat().st_size / 1e6:.0f} MB, {packets[str(plain)]} "
          f"packets); TLS: {tls} ({tls.stat().st_size / 1e6:.0f} MB, {packets[str(tls)]} "
          f"packets, {len(sizes)} application records, {sum(sizes) / 1e6:.0f} MB of them, "
          f"{conns} connections); {exchanges} exchanges in both (same read --json "
          f"{digest[:12]}); {os.cpu_count()} cores; median of {args.rounds}")
    print(f"{'command':44s} {'seconds':>8s} {'exch/s':>8s} {'MB/s':>7s} {'peak MB':>8s}")
    results = []
    for name, ws in times.items():
        w = statistics.median(ws)
        path = tls if "(TLS)" in name else plain
        print(f"{name:44s} {w:8.2f} {exchanges / w:8.0f} {path.stat().st_size / 1e6 / w:7.1f} "
              f"{rss[name] / 1024:8.0f}")
        results.append({"command": name, "seconds": round(w, 2), "all_seconds": ws,
                        "exchanges_per_s": round(exchanges / w),
                        "mb_per_s": round(path.stat().st_size / 1e6 / w, 1),
                        "peak_rss_mb": round(rss[name] / 1024)})
    by = {r["command"]: r["seconds"] for r in results}
    extra = by["kafkasniff stats --tls-keylog (TLS)"] - by["kafkasniff stats (plaintext)"]
    print(f"TLS costs stats {extra:.2f} s more; cryptography alone (AES-GCM over every "
          f"record, the key schedule of every connection) takes {crypto:.2f} s: "
          f"{extra / crypto:.1f}x")
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    args.json_out.write_text(json.dumps({
        "exchanges": exchanges, "plain_bytes": plain.stat().st_size,
        "tls_bytes": tls.stat().st_size, "tls_payload_bytes": payload,
        "records": len(sizes), "connections": conns, "crypto_seconds": round(crypto, 3),
        "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
