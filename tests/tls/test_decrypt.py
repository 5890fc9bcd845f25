"""Decrypting Kafka over TLS with a key log (kafkasniff.tls.keylog, kafkasniff.tls.decrypt and
the pipeline's ``tls_keylog``), on the committed capture of real clients and a real Kafka
4.3.1 broker (captures/broker_tls.pcap: kafka-python, aiokafka and franz-go on the SSL and
SASL_SSL listeners; TLS 1.3 AES-256-GCM, TLS 1.2 AES-256-GCM, AES-128-CBC-SHA256 and
ChaCha20-Poly1305; the clients' own key log in broker_tls.keylog).

Truth: the broker's request log in broker_tls.truth.json (every request of the captured
connections, with the request and response bodies the broker parsed and sent).
"""

from __future__ import annotations

import json

import pytest

from kafkasniff.export.rows import exchange_rows
from kafkasniff.issues import IssueKind
from kafkasniff.model import ExchangeStatus
from kafkasniff.output.render import exchange_to_dict
from kafkasniff.pipeline import DECODED_BYTES, SKIPPED_BYTES, Pipeline, PipelineOptions
from kafkasniff.tls.decrypt import CLIENT, SERVER, TlsDecryptor, prf
from kafkasniff.tls.keylog import KeyLog
from tests.broker.common import (
    BrokerCapture,
    body_differences,
    decode,
    logged_from_truth,
    unpaired,
)
from tests.captures.test_secrets import _leaks
from tests.conftest import CAPTURES

PCAP = CAPTURES / "broker_tls.pcap"
KEYLOG = CAPTURES / "broker_tls.keylog"
TRUTH = json.loads(PCAP.with_suffix(".truth.json").read_text())


def decode_tls(keylog_paths, *, ports=True) -> tuple[BrokerCapture, Pipeline]:
    """broker_tls.pcap decoded with the key logs ``keylog_paths`` (on its broker ports, or
    on the default port only), with the broker's logged requests."""
    return decode(PCAP, PipelineOptions(
        ports=frozenset(TRUTH["broker_ports"]) if ports else frozenset({9092}),
        tls_keylog=tuple(str(p) for p in keylog_paths), with_records=True),
        logged_from_truth(TRUTH["broker_requests"]))


def _ledger_adds_up(pipe: Pipeline) -> None:
    ledger = pipe.stats.bytes
    assert set(ledger) <= set(DECODED_BYTES) | set(SKIPPED_BYTES)
    assert sum(ledger.values()) == PCAP.stat().st_size


# --------------------------------------------------------------------------- key log

def test_key_log_lines_labels_and_bad_lines(tmp_path):
    path = tmp_path / "keys.log"
    random = "ab" * 32
    path.write_text(f"# comment\nCLIENT_RANDOM {random} {'11' * 48}\n"
                    f"CLIENT_TRAFFIC_SECRET_0 {random} {'22' * 32}\nnot a line\n"
                    f"CLIENT_RANDOM {'zz' * 32} {'11' * 48}\n")
    log = KeyLog([path])
    assert len(log) == 1 and log.bad_lines == 2
    assert log.get(bytes.fromhex(random), "CLIENT_RANDOM") == bytes.fromhex("11" * 48)
    assert log.get(bytes.fromhex(random), "SERVER_TRAFFIC_SECRET_0") is None


def test_key_log_reads_new_whole_lines_of_a_growing_file(tmp_path):
    path = tmp_path / "keys.log"
    path.write_text("")
    log = KeyLog([path, tmp_path / "missing.log"])
    line = f"CLIENT_RANDOM {'cd' * 32} {'33' * 48}\n"
    with open(path, "a") as f:
        f.write(line[:40])                  # a line still being written
        f.flush()
        assert log.refresh() == 0
        f.write(line[40:])
    assert log.refresh() == 1 and log.has(bytes.fromhex("cd" * 32))


def test_tls12_prf_matches_a_published_vector():
    """The TLS 1.2 PRF (P_SHA256) against the widely used test vector of the IETF TLS
    working group's mailing list (secret, label "test label", 100 bytes)."""
    secret = bytes.fromhex("9bbe436ba940f017b17652849a71db35")
    seed = bytes.fromhex("a0ba9f936cda311827a6f796ffd5198c")
    out = prf(secret, b"test label", seed, 100, "sha256")
    assert out.hex().startswith("e3f229ba727be17b8d122620557cd453c2aab21d07c3d495329b52d4e61e"
                                "db5a6b301791e90d35c9c9a46b4e14baf9af0fa022f7077def17abfd3797c"
                                "0564bab4fbc91666e9def9b97fce34f796789baa48082d122ee42c5a72e5a"
                                "5110fff70187347b66")


# --------------------------------------------------------------------------- decryption

@pytest.fixture(scope="module")
def decrypted():
    return decode_tls([KEYLOG])


def test_every_logged_request_is_decrypted_and_paired(decrypted):
    cap, _ = decrypted
    assert len(cap.logged) >= 20
    assert not unpaired(cap)


def test_decrypted_bodies_equal_the_brokers(decrypted):
    cap, _ = decrypted
    diffs, compared = body_differences(cap)
    assert not diffs, "\n".join(diffs[:20])
    assert compared >= 40


def test_every_version_and_suite_decrypts_every_byte(decrypted):
    cap, pipe = decrypted
    suites = {(s.tls["decrypted"]["version"], s.tls["decrypted"]["cipher_suite"])
              for s in cap.connections.values()}
    assert suites == {
        ("TLS 1.3", "TLS_AES_256_GCM_SHA384"),
        ("TLS 1.2", "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"),
        ("TLS 1.2", "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256"),
        ("TLS 1.2", "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256")}
    assert all(s.tls["decrypted"]["undecrypted_bytes"] == 0 for s in cap.connections.values())
    assert not [i for i in cap.issues if i.kind == IssueKind.TLS_UNDECRYPTED]
    assert pipe.stats.bytes["tls"] == 0 and pipe.stats.bytes["tls_decrypted"] > 0
    _ledger_adds_up(pipe)


def test_each_exchange_carries_its_tls_session_into_json_and_parquet(decrypted):
    """Every decrypted exchange names the version and suite of its connection, in JSON
    (``tls``) and in the exchanges table (``tls_*``); plaintext exchanges carry none."""
    cap, _ = decrypted
    assert cap.exchanges
    for ex in cap.exchanges:
        summary = cap.connections[ex.client].tls["decrypted"]
        assert ex.tls is not None
        assert (ex.tls.version, ex.tls.cipher_suite) == (summary["version"],
                                                          summary["cipher_suite"])
        assert exchange_to_dict(ex)["tls"] == ex.tls.to_dict()
        row = next(iter(exchange_rows(ex, "c", "k")["exchanges"]))
        assert (row["tls_version"], row["tls_cipher_suite"], row["tls_sni"]) == (
            ex.tls.version, ex.tls.cipher_suite, ex.tls.sni)
    plain, _ = decode(CAPTURES / "broker_go.pcap", PipelineOptions(ports=frozenset(
        json.loads((CAPTURES / "broker_go.truth.json").read_text())["broker_ports"])))
    assert plain.exchanges and all(ex.tls is None for ex in plain.exchanges)
    assert all("tls" not in exchange_to_dict(ex) for ex in plain.exchanges)
    assert all(next(iter(exchange_rows(ex, "c", "k")["exchanges"]))["tls_version"] is None
               for ex in plain.exchanges)


def test_tls_found_on_any_port_by_its_client_hello():
    """Without --port the broker ports are unknown: the ClientHello's sender is the client."""
    cap, _ = decode_tls([KEYLOG], ports=False)
    assert not unpaired(cap)


def test_produced_records_are_decoded(decrypted):
    cap, _ = decrypted
    produced = {e["value"] for e in TRUTH["client_events"] if e["event"] == "produced"}
    got = {r.value.decode() for ex in cap.exchanges if ex.api_name == "Produce"
           for loc in ex.record_fields if loc.records.decoded
           for b in loc.records.decoded.batches for r in b.records or ()}
    assert produced and produced <= got


def test_scram_inside_tls_stays_redacted_and_no_key_material_is_output(tmp_path):
    texts = every_output_with_keys(tmp_path)
    secrets = [bytes.fromhex(line.split()[2]) for line in KEYLOG.read_text().splitlines()
               if line and not line.startswith("#")]
    leaks = {name: _leaks(text, secrets) for name, text in texts.items()}
    assert not any(leaks.values())
    assert "carol" in texts["read --json"]          # the SCRAM user is shown
    assert "SaslAuthenticate" in texts["read"]


def every_output_with_keys(tmp_path):
    from click.testing import CliRunner

    from kafkasniff.cli import main

    runner = CliRunner()
    texts = {}
    for name, args in (("read", ["read", "-q"]), ("read --json", ["read", "-q", "--json"]),
                       ("stats --json", ["stats", "--json"])):
        res = runner.invoke(main, args + ["--tls-keylog", str(KEYLOG), str(PCAP)],
                            catch_exceptions=False)
        assert res.exit_code == 0, res.output
        texts[name] = res.output
    return texts


# --------------------------------------------------------------------------- failures

def test_without_keys_each_connection_says_why_and_the_bytes_add_up(tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_text("")
    cap, pipe = decode_tls([empty])
    assert not cap.exchanges
    notes = [i for i in cap.issues if i.kind == IssueKind.TLS_UNDECRYPTED]
    assert len(notes) == len(cap.connections) == 12
    randoms = {line.split()[1] for line in KEYLOG.read_text().splitlines()
               if line.startswith(("CLIENT_RANDOM", "CLIENT_TRAFFIC_SECRET_0"))}
    named = {w.strip(":,.()") for i in notes for w in i.message.split()
             if len(w.strip(":,.()")) == 64}
    assert named == randoms
    assert pipe.stats.bytes["tls"] > 0
    _ledger_adds_up(pipe)


def test_a_wrong_key_is_reported_and_the_rest_decodes(tmp_path):
    """One TLS 1.2 master secret with a flipped byte: that connection reports an
    authentication failure naming its side; every other connection decodes."""
    lines = KEYLOG.read_text().splitlines()
    i = next(n for n, line in enumerate(lines) if line.startswith("CLIENT_RANDOM"))
    label, random, secret = lines[i].split()
    lines[i] = f"{label} {random} {secret[:-2]}{int(secret[-2:], 16) ^ 1:02x}"
    bad = tmp_path / "bad.log"
    bad.write_text("\n".join(lines) + "\n")
    cap, pipe = decode_tls([bad])
    failed = [i for i in cap.issues if i.kind == IssueKind.TLS_UNDECRYPTED]
    assert failed and all("authenticate" in i.message for i in failed)
    assert len({i.client for i in failed}) == 1
    paired = [ex for ex in cap.exchanges if ex.status == ExchangeStatus.PAIRED]
    assert len(paired) >= len(cap.logged) - 8
    _ledger_adds_up(pipe)


def test_garbage_and_gaps_never_raise():
    log = KeyLog()
    dec = TlsDecryptor(log)
    notes = dec.feed(CLIENT, b"\x16\x03\x01\x00\x05hello" + bytes(range(256)) * 4, 1)
    assert [n.kind for n in notes] == ["not_tls"]
    assert dec.feed(CLIENT, b"more", 2) == []
    dec.feed(SERVER, b"\x16\x03\x03\x00\x10abc", 3)        # a record cut by the gap
    notes = dec.on_gap(SERVER, 100, 3)
    assert [n.kind for n in notes] == ["gap"]
    dec.finish()
    # the captured bytes of the cut record are counted; the 100 never captured are not
    assert dec.undecrypted_bytes[CLIENT] > 0 and dec.undecrypted_bytes[SERVER] == 8


def test_key_log_lines_written_after_the_decryption_started_are_used(tmp_path):
    """A key log still being written (live capture): the secrets a connection needs are
    looked for again in the file when they are not known yet."""
    path = tmp_path / "growing.log"
    path.write_text("")
    log = KeyLog([path])
    random = bytes.fromhex("ef" * 32)
    assert log.get(random, "CLIENT_RANDOM") is None
    path.write_text(f"CLIENT_RANDOM {random.hex()} {'44' * 48}\n")
    assert log.get(random, "CLIENT_RANDOM") == bytes.fromhex("44" * 48)


def test_records_without_a_handshake_are_reported():
    """Joined mid-stream: encrypted records and no hello to take a client random from."""
    dec = TlsDecryptor(KeyLog())
    notes = dec.feed(CLIENT, b"\x17\x03\x03\x00\x20" + bytes(32), 5)
    assert [n.kind for n in notes] == ["no_key"] and "mid-stream" in notes[0].message
    assert dec.undecrypted_bytes[CLIENT] == 37


def test_an_oversized_handshake_message_is_not_held():
    dec = TlsDecryptor(KeyLog())
    notes = dec.feed(SERVER, b"\x16\x03\x03\x00\x04" + b"\x0b\xff\xff\xff", 7)
    assert [n.kind for n in notes] == ["not_tls"] and not dec.dirs[SERVER].hs


def test_a_lost_segment_stops_one_side_and_the_bytes_still_add_up(tmp_path):
    """broker_tls.pcap with one TLS data segment dropped: that side reports the gap, the
    byte ledger counts only what was captured, the other connections decode."""
    import dpkt

    cut = tmp_path / "cut.pcap"
    with open(PCAP, "rb") as f, open(cut, "wb") as g:
        reader = dpkt.pcap.Reader(f)
        writer = dpkt.pcap.Writer(g, snaplen=reader.snaplen, linktype=reader.datalink(),
                                  nano=True)
        data_packets = 0
        for ts, buf in reader:
            tcp = dpkt.ethernet.Ethernet(buf).data.data
            if tcp.data:
                data_packets += 1
                if data_packets == 40:
                    continue
            writer.writepkt(buf, ts)
    cap, pipe = decode(cut, PipelineOptions(ports=frozenset(TRUTH["broker_ports"]),
                                            tls_keylog=(str(KEYLOG),)),
                       logged_from_truth(TRUTH["broker_requests"]))
    gaps = [i for i in cap.issues
            if i.kind == IssueKind.TLS_UNDECRYPTED and "missing" in i.message]
    assert len(gaps) == 1
    ledger = pipe.stats.bytes
    assert sum(ledger.values()) == cut.stat().st_size
    assert len([ex for ex in cap.exchanges if ex.status == ExchangeStatus.PAIRED]) > 30


# --------------------------------------------------------------------------- live: keys later

def _decode_with_keys_arriving(path, lag: int, **wait) -> tuple[list, list, Pipeline]:
    """broker_tls.pcap through a pipeline that waits for keys (``live``), each connection's
    key log lines written to ``path`` only ``lag`` packets after its ClientHello (clients
    logging their secrets after their first records are on the wire)."""
    from kafkasniff.capture.pcapfile import open_capture
    from kafkasniff.model import DecodeIssue, Exchange

    lines: dict[str, list[str]] = {}
    for line in KEYLOG.read_text().splitlines():
        if line and not line.startswith("#"):
            lines.setdefault(line.split()[1], []).append(line)
    path.write_text("")
    pipe = Pipeline(PipelineOptions(ports=frozenset(TRUTH["broker_ports"]),
                                    tls_keylog=(str(path),), tls_key_wait=True))
    for name, value in wait.items():
        setattr(pipe.key_wait, name, value)
    out: list = []
    due: dict[int, str] = {}             # packet number -> client random to log then
    with open_capture(PCAP) as packets:
        for n, pkt in enumerate(packets):
            if n in due:
                with open(path, "a") as f:
                    f.write("\n".join(lines[due.pop(n)]) + "\n")
            ip = pkt.data[14:]
            tcp = ip[(ip[0] & 15) * 4:]
            payload = tcp[(tcp[12] >> 4) * 4:]
            if payload[:1] == b"\x16" and payload[5:6] == b"\x01":      # a ClientHello
                due[n + lag] = payload[11:43].hex()
            out.extend(pipe.feed(pkt))
        pipe.account_source(packets.accounting())
    out.extend(pipe.finish())
    exchanges = [r for r in out if type(r) is Exchange]
    issues = [r for r in out if type(r) is DecodeIssue] + [i for ex in exchanges
                                                           for i in ex.issues]
    return exchanges, issues, pipe


def _identity(exchanges):
    return sorted((ex.client, ex.correlation_id, ex.api_name, ex.api_version, str(ex.status),
                   ex.request_bytes, ex.response_bytes) for ex in exchanges)


def test_live_connections_wait_for_keys_logged_after_their_first_records(decrypted, tmp_path):
    """Each connection's secrets reach the key log 8 packets after its ClientHello (after
    the ServerHello and the first encrypted records): the connections hold their bytes and
    decode them once the lines appear, exactly as with the key log there from the start."""
    cap, _ = decrypted
    exchanges, issues, pipe = _decode_with_keys_arriving(tmp_path / "keys.log", 8)
    assert _identity(exchanges) == _identity(cap.exchanges)
    assert not [i for i in issues if i.kind == IssueKind.TLS_UNDECRYPTED]
    assert pipe.key_wait.waits >= 10 and pipe.key_wait.gave_up == 0
    assert pipe.key_wait.held == 0
    _ledger_adds_up(pipe)


def test_a_wait_past_its_bound_gives_up_with_the_usual_note(tmp_path):
    """Held bytes are bounded: past ``max_bytes`` a waiting connection gives up (no_key,
    its held bytes counted as not decrypted) and the byte ledger still adds up."""
    exchanges, issues, pipe = _decode_with_keys_arriving(tmp_path / "keys.log", 10**9,
                                                         max_bytes=4096)
    notes = [i for i in issues if i.kind == IssueKind.TLS_UNDECRYPTED]
    assert not exchanges and len(notes) == 12
    assert all("no " in i.message and "key log" in i.message for i in notes)
    assert pipe.key_wait.gave_up == 12 and pipe.key_wait.held == 0
    _ledger_adds_up(pipe)


# --------------------------------------------------------------------------- pcapng secrets

def test_keys_in_pcapng_decryption_secrets_blocks_are_used(decrypted, tmp_path):
    """broker_tls.pcap with its key log injected by Wireshark's editcap (``--inject-secrets
    tls,FILE``: a Decryption Secrets Block before the packets) decodes with no
    ``--tls-keylog``, as with it; the block's bytes are capture format in the ledger."""
    import shutil
    import subprocess

    if shutil.which("editcap") is None:
        pytest.skip("editcap (Debian package wireshark-common, installed by .ci/setup) missing")
    injected = tmp_path / "with-secrets.pcapng"
    subprocess.run(["editcap", "--inject-secrets", f"tls,{KEYLOG}", str(PCAP), str(injected)],
                   check=True, capture_output=True)
    cap, _ = decrypted
    got, pipe = decode(injected, PipelineOptions(ports=frozenset(TRUTH["broker_ports"])),
                       logged_from_truth(TRUTH["broker_requests"]))
    assert _identity(got.exchanges) == _identity(cap.exchanges)
    assert not unpaired(got)
    assert pipe.stats.tls_secrets_blocks == 1
    ledger = pipe.stats.bytes
    assert ledger["tls"] == 0 and sum(ledger.values()) == injected.stat().st_size
    assert ledger["capture_format"] > KEYLOG.stat().st_size


# --------------------------------------------------------------------------- not Kafka

def _openssl_session(tmp_path, client_says: bytes, server_says: bytes):
    """A TLS 1.3 session between Python's ssl (OpenSSL) client and server, run in memory
    (MemoryBIO), the client writing its key log: the bytes each side sent, in order, as
    ``[(direction, bytes)]`` (0 client, 1 server), and the key log path."""
    import ssl

    from tests.support.tls_certs import make_certificates

    files = make_certificates(tmp_path / "certs")
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(files.keystore)
    client_ctx = ssl.create_default_context(cafile=str(files.ca))
    client_ctx.keylog_filename = str(tmp_path / "keys.log")
    bios = [(ssl.MemoryBIO(), ssl.MemoryBIO()) for _ in range(2)]     # (incoming, outgoing)
    client = client_ctx.wrap_bio(*bios[0], server_hostname="localhost")
    server = server_ctx.wrap_bio(*bios[1], server_side=True)
    sent: list[tuple[int, bytes]] = []

    def pump() -> None:
        for d in (0, 1):
            data = bios[d][1].read()
            if data:
                sent.append((d, data))
                bios[1 - d][0].write(data)

    for _ in range(10):
        for end in (client, server):
            try:
                end.do_handshake()
            except ssl.SSLWantReadError:
                pass
        pump()
    client.write(client_says)
    pump()
    assert server.read(len(client_says)) == client_says
    server.write(server_says)
    pump()
    assert client.read(len(server_says)) == server_says
    return sent, tmp_path / "keys.log"


def test_tls_on_another_port_whose_plaintext_is_not_kafka_is_not_decoded(tmp_path):
    """HTTPS between OpenSSL peers on port 8443, its key log given: found as TLS by its
    ClientHello and decrypted, but the first decrypted bytes are no Kafka request, so it is
    not decoded as Kafka (no exchange, no decode error); its records count as decrypted."""
    from tests.capture.builders import ether, ipv4, pcap, tcp_header

    sent, keylog = _openssl_session(tmp_path, b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",
                                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    c, s = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
    seq = [1000, 5000]
    ts = 10**18
    records = []

    def packet(d: int, payload: bytes, flags: int) -> None:
        nonlocal ts
        src, dst, sp, dp = (c, s, 50000, 8443) if d == 0 else (s, c, 8443, 50000)
        records.append((ts // 10**9, ts % 10**9, ether(ipv4(src, dst, tcp_header(
            sp, dp, seq[d], seq[1 - d], flags) + payload))))
        seq[d] += len(payload) + (1 if flags & 0x03 else 0)
        ts += 1000

    packet(0, b"", 0x02)
    packet(1, b"", 0x12)
    for d, data in sent:
        packet(d, data, 0x18)
    packet(0, b"", 0x11)
    packet(1, b"", 0x11)
    path = tmp_path / "https.pcap"
    path.write_bytes(pcap(records, nano=True))
    cap, pipe = decode(path, PipelineOptions(tls_keylog=(str(keylog),)))
    assert not cap.exchanges and not cap.issues
    (summary,) = cap.connections.values()
    assert summary.kind == "tls" and summary.tls["decrypted"]["version"] == "TLS 1.3"
    assert summary.tls["decrypted"]["undecrypted_bytes"] == 0
    assert pipe.stats.other_connections == 1
    assert pipe.stats.bytes["tls_decrypted"] == sum(len(b) for _, b in sent)


def test_summaries_show_the_same_hellos_with_keys_as_without(decrypted):
    """With keys the hellos come from the decryptor (no hello window is kept): the same
    fields as the window gives without keys."""
    cap, _ = decrypted
    plain, _ = decode(PCAP, PipelineOptions(ports=frozenset(TRUTH["broker_ports"])))
    assert len(plain.connections) == len(cap.connections) == 12
    for client, summary in plain.connections.items():
        for hello in ("client_hello", "server_hello"):
            assert summary.tls[hello] and cap.connections[client].tls[hello] == \
                summary.tls[hello]
