"""The tshark cross-check of a written capture against its truth file (an independent
dissector: tshark 4.0 with ``-d tcp.port==P,kafka`` for the broker ports)."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any


def check_capture(name: str, out_dir: Path) -> dict[str, Any]:
    """Cross-check ``out_dir/NAME.pcap`` against ``NAME.truth.json`` with tshark.

    Returns a summary; raises SystemExit when the pcap has truncated packets, when a
    request the clients reported is missing on the wire, or when (outside mid-stream
    captures) tshark's request counts per API differ from the mock's request tracking.
    """
    truth = json.loads((out_dir / f"{name}.truth.json").read_text())
    pcap = out_dir / f"{name}.pcap"
    ports = set(truth["broker_ports"])
    argv = ["tshark", "-r", str(pcap), "-n"]
    for p in sorted(ports):
        argv += ["-d", f"tcp.port=={p},kafka"]
    argv += ["-T", "fields", "-E", "separator=|", "-e", "frame.len", "-e", "frame.cap_len",
             "-e", "tcp.stream", "-e", "tcp.srcport", "-e", "tcp.dstport",
             "-e", "kafka.api_key", "-e", "kafka.api_version", "-e", "kafka.correlation_id",
             "-e", "frame.time_epoch"]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    packets = truncated = 0
    requests: Counter[tuple[int, int, int, int]] = Counter()
    req_by_api: Counter[int] = Counter()
    responses = 0
    streams: set[str] = set()
    for line in out.splitlines():
        flen, clen, stream, sport, dport, keys, vers, corrs, _ts = line.split("|")
        packets += 1
        truncated += flen != clen
        streams.add(stream)
        if not corrs:
            continue
        corr_list = [int(c) for c in corrs.split(",")]
        if int(dport) in ports:  # client -> broker: requests carry key and version
            key_list = [int(k) for k in keys.split(",")]
            ver_list = [int(v) for v in vers.split(",")]
            for k, v, c in zip(key_list, ver_list, corr_list):
                requests[(int(dport), k, v, c)] += 1
                req_by_api[k] += 1
        else:
            responses += len(corr_list)
    if truncated:
        raise SystemExit(f"{name}: {truncated} truncated packets")
    mid = bool(truth["capture"].get("mid_stream"))
    problems = []
    matched = missing = 0
    remaining = requests.copy()
    t0, t1 = truth["capture"]["started_ts_ns"], truth["capture"]["stopped_ts_ns"]
    for r in truth["requests"]:
        key = (r["broker_port"], r["api_key"], r["api_version"], r["correlation_id"])
        if remaining[key] > 0:
            remaining[key] -= 1
            matched += 1
        elif not mid or t0 + 500_000_000 < r["logged_sent_ts_ns"] < t1 - 500_000_000:
            missing += 1
            problems.append(f"client-reported request not on the wire: {key}")
    mock = {int(k): v for k, v in truth["mock_requests"]["count_by_api_key"].items()}
    # The mock does not track requests for APIs it does not implement (it drops the
    # connection instead of answering): leave those out when they went unanswered.
    rejected = {k for k in req_by_api if k not in mock and all(
        r["response"] is None for r in truth["requests"] if r["api_key"] == k)}
    tracked = {k: v for k, v in req_by_api.items() if k not in rejected}
    if not mid and mock != tracked:
        problems.append(f"per-API request counts differ: mock {mock} tshark {dict(req_by_api)}")
    if mid and any(req_by_api[k] > mock.get(k, 0) for k in req_by_api):
        problems.append("tshark sees more requests than the mock tracked")
    produced = {(m["topic"], m["partition"], m["offset"]): m for m in truth["produced"]}
    same = 0
    for c in truth["consumed"]:
        m = produced.get((c["topic"], c["partition"], c["offset"]))
        if m is None:
            continue
        fields = ("key_hex", "value_hex", "headers", "timestamp_ms")
        if any(m[f] != c[f] for f in fields):
            problems.append(f"consumed record differs from produced: {c}")
        same += 1
    summary = {"pcap_bytes": pcap.stat().st_size, "packets": packets,
               "tcp_streams": len(streams), "requests_tshark": sum(req_by_api.values()),
               "responses_tshark": responses, "client_requests_matched": matched,
               "client_requests_total": len(truth["requests"]),
               "mock_requests": sum(mock.values()),
               "untracked_rejected_api_keys": sorted(rejected),
               "consumed_equal_to_produced": same, "problems": problems}
    if problems:
        raise SystemExit(f"{name}: " + "; ".join(problems[:10]))
    return summary

