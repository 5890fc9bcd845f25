"""Hand-built consumer-group traffic for the group tests: a pcap of Ethernet/IPv4/TCP
packets between clients (10.1.0.x) and one broker (10.0.0.1:9092), each exchange a request
and its answer, written with ``struct`` from the Kafka wire rules (classic group APIs,
non-flexible versions) with the builders of :mod:`tests.capture.builders` and
:mod:`tests.pairing.frames`."""

from __future__ import annotations

import struct

from tests.capture.builders import ether, ipv4, pcap, tcp_header
from tests.pairing.frames import array, i16, i32, i64, nbytes, request, response, string

JOIN_GROUP, SYNC_GROUP, HEARTBEAT, LEAVE_GROUP, OFFSET_COMMIT, FETCH = 11, 14, 12, 13, 8, 1
BROKER = bytes([10, 0, 0, 1])
T0 = 1_767_225_600_000_000_000          # 2026-01-01T00:00:00Z
SEGMENT = 60_000


def subscription(topics=("t",)) -> bytes:
    """ConsumerProtocolSubscription v0."""
    return i16(0) + array([string(t) for t in topics]) + nbytes(b"")


def assignment(assigned) -> bytes:
    """ConsumerProtocolAssignment v0: ``assigned`` = ((topic, (partition, ...)), ...)."""
    return i16(0) + array([string(t) + array([i32(p) for p in ps]) for t, ps in assigned]) + \
        nbytes(b"")


def assignment_claiming(count: int, topic: str = "t", partitions=(0, 1)) -> bytes:
    """An assignment whose partitions array claims ``count`` entries but holds ``partitions``."""
    return i16(0) + i32(1) + string(topic) + i32(count) + b"".join(i32(p) for p in partitions)


class Capture:
    """Exchanges in time order, one TCP connection per client index."""

    def __init__(self) -> None:
        self.records: list[tuple[int, int, bytes]] = []
        self.seq: dict[tuple[int, bool], int] = {}
        self.corr: dict[int, int] = {}
        self.ts_ns = T0

    def _send(self, conn: int, to_broker: bool, payload: bytes) -> None:
        client = bytes([10, 1, conn >> 8 & 0xFF, conn & 0xFF])
        cport = 40_000
        for i in range(0, len(payload), SEGMENT):
            chunk = payload[i:i + SEGMENT]
            seq = self.seq.get((conn, to_broker), 1000)
            self.seq[(conn, to_broker)] = seq + len(chunk)
            ack = self.seq.get((conn, not to_broker), 1000)
            if to_broker:
                tcp = tcp_header(cport, 9092, seq, ack)
                pkt = ether(ipv4(client, BROKER, tcp + chunk))
            else:
                tcp = tcp_header(9092, cport, seq, ack)
                pkt = ether(ipv4(BROKER, client, tcp + chunk))
            self.records.append((self.ts_ns // 1_000_000_000, self.ts_ns % 1_000_000_000,
                                 pkt))
            self.ts_ns += 1000

    def exchange(self, conn: int, api_key: int, version: int, req: bytes, rsp: bytes,
                 client_id: str = "client-1", after_ms: float = 1.0) -> None:
        """One request on connection ``conn`` and its answer ``after_ms`` later."""
        corr = self.corr.get(conn, 0) + 1
        self.corr[conn] = corr
        self._send(conn, True, request(api_key, version, corr, req, client_id))
        self.ts_ns += int(after_ms * 1_000_000)
        self._send(conn, False, response(corr, rsp))
        self.ts_ns += 1_000_000

    def wait(self, seconds: float) -> None:
        self.ts_ns += int(seconds * 1e9)

    def pcap(self) -> bytes:
        return pcap(self.records, nano=True)

    # -- classic group APIs (JoinGroup v5, SyncGroup v3, Heartbeat v3, LeaveGroup v3,
    #    OffsetCommit v2, Fetch v4)
    def join(self, conn: int, group: str, mid: str, *, leader: str | None = None,
             members=(), generation: int = 1, instance: str | None = None,
             client_id: str = "client-1", topics=("t",)) -> None:
        """JoinGroup: ``members`` listed in the answer (the leader's answer)."""
        req = string(group) + i32(45_000) + i32(300_000) + string(mid) + string(instance) + \
            string("consumer") + array([string("range") + nbytes(subscription(topics))])
        rsp = i32(0) + i16(0) + i32(generation) + string("range") + string(leader or mid) + \
            string(mid) + array([string(m) + string(None) + nbytes(subscription(topics))
                                 for m in members])
        self.exchange(conn, JOIN_GROUP, 5, req, rsp, client_id)

    def sync(self, conn: int, group: str, mid: str, answer: bytes, *, plans=(),
             generation: int = 1, client_id: str = "client-1", error: int = 0) -> None:
        """SyncGroup: ``answer`` the assignment bytes, ``plans`` ((member, bytes), ...)."""
        req = string(group) + i32(generation) + string(mid) + string(None) + \
            array([string(m) + nbytes(a) for m, a in plans])
        self.exchange(conn, SYNC_GROUP, 3, req, i32(0) + i16(error) + nbytes(answer),
                      client_id)

    def heartbeat(self, conn: int, group: str, mid: str, *, generation: int = 1,
                  error: int = 0, client_id: str = "client-1") -> None:
        req = string(group) + i32(generation) + string(mid) + string(None)
        self.exchange(conn, HEARTBEAT, 3, req, i32(0) + i16(error), client_id)

    def leave(self, conn: int, group: str, mid: str, client_id: str = "client-1") -> None:
        req = string(group) + array([string(mid) + string(None)])
        rsp = i32(0) + i16(0) + array([string(mid) + string(None) + i16(0)])
        self.exchange(conn, LEAVE_GROUP, 3, req, rsp, client_id)

    def commit(self, conn: int, group: str, mid: str, offsets, *, generation: int = 1,
               client_id: str = "client-1") -> None:
        """OffsetCommit v2: ``offsets`` ((topic, partition, offset), ...)."""
        topics: dict[str, list] = {}
        for t, p, off in offsets:
            topics.setdefault(t, []).append((p, off))
        req = string(group) + i32(generation) + string(mid) + i64(-1) + array([
            string(t) + array([i32(p) + i64(off) + string(None) for p, off in ps])
            for t, ps in topics.items()])
        rsp = array([string(t) + array([i32(p) + i16(0) for p, _ in ps])
                     for t, ps in topics.items()])
        self.exchange(conn, OFFSET_COMMIT, 2, req, rsp, client_id)

    def fetch(self, conn: int, topic: str, partitions, high_watermark: int,
              client_id: str = "client-1") -> None:
        """Fetch v4 answered with ``high_watermark`` for every partition, no records."""
        req = i32(-1) + i32(500) + i32(1) + i32(50 << 20) + struct.pack(">b", 0) + array(
            [string(topic) + array([i32(p) + i64(0) + i32(1 << 20) for p in partitions])])
        rsp = i32(0) + array([string(topic) + array([
            i32(p) + i16(0) + i64(high_watermark) + i64(high_watermark) + array(None) +
            nbytes(b"") for p in partitions])])
        self.exchange(conn, FETCH, 4, req, rsp, client_id)
