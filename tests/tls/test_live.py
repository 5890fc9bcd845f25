"""``kafkasniff live --tls-keylog``: the decoder processes decrypt TLS with a key log that
keeps growing while the capture runs (captures/broker_tls.pcap streamed to ``live -r -``, its
key log written only after the first half of the capture went in)."""

from __future__ import annotations

import json
import struct
import subprocess

from tests.live.helpers import LIVE, port_args, records_of, run_read
from tests.tls.test_decrypt import KEYLOG, PCAP, TRUTH


def _halves(pcap: bytes) -> tuple[bytes, bytes]:
    """A classic pcap file cut after half of its packets (the header goes with the first)."""
    offsets, off = [], 24
    while off < len(pcap):
        offsets.append(off)
        off += 16 + struct.unpack_from("<I", pcap, off + 8)[0]
    cut = offsets[len(offsets) // 2]
    return pcap[:cut], pcap[cut:]


def test_live_decrypts_with_a_key_log_written_while_it_runs(tmp_path):
    keys = tmp_path / "keys.log"
    keys.write_text("")
    ports = port_args(TRUTH["broker_ports"])
    first, rest = _halves(PCAP.read_bytes())
    p = subprocess.Popen(LIVE + ["-r", "-", "--no-tui", "-q", "--json", "--workers", "2",
                                 "--tls-keylog", str(keys)] + ports,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    p.stdin.write(first)
    p.stdin.flush()
    keys.write_text(KEYLOG.read_text())
    out, err = p.communicate(rest, timeout=120)
    assert p.returncode == 0, err.decode()
    live = [json.loads(line) for line in out.decode().splitlines() if line.strip()]
    read = run_read(["--json", "-q", "--tls-keylog", str(KEYLOG)] + ports + [str(PCAP)])
    assert read.returncode == 0, read.stderr
    expected = [json.loads(line) for line in read.stdout.splitlines() if line.strip()]
    assert len([d for d in expected if d["type"] == "exchange"]) >= 40
    assert all(d["type"] != "issue" or d["kind"] != "tls_undecrypted" for d in live)
    assert records_of(live, ("exchange",)) == records_of(expected, ("exchange",))


def test_live_uses_secrets_blocks_of_a_stream_and_writes_none(tmp_path):
    """A pcapng stream carrying its key log in a Decryption Secrets Block (editcap
    --inject-secrets) decrypts in every decoder process with no --tls-keylog; the packets
    ``--write`` keeps carry no secrets block (key material goes into no output)."""
    import shutil

    import pytest

    from tests.live.test_outputs import _block_types

    if shutil.which("editcap") is None:
        pytest.skip("editcap (wireshark-common, installed by .ci/setup) missing")
    injected = tmp_path / "with-secrets.pcapng"
    subprocess.run(["editcap", "--inject-secrets", f"tls,{KEYLOG}", str(PCAP), str(injected)],
                   check=True, capture_output=True)
    ports = port_args(TRUTH["broker_ports"])
    written = tmp_path / "kept.pcapng"
    p = subprocess.run(LIVE + ["-r", "-", "--no-tui", "-q", "--json", "--workers", "2",
                               "-w", str(written)] + ports,
                       input=injected.read_bytes(), capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr.decode()
    live = [json.loads(line) for line in p.stdout.decode().splitlines() if line.strip()]
    read = run_read(["--json", "-q", "--tls-keylog", str(KEYLOG)] + ports + [str(PCAP)])
    expected = [json.loads(line) for line in read.stdout.splitlines() if line.strip()]
    assert records_of(live, ("exchange",)) == records_of(expected, ("exchange",))
    assert 0x0000000A not in _block_types(written)          # no Decryption Secrets Block
