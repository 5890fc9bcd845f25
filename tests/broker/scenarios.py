"""The real-broker scenarios, shared by the tests in this directory (which capture and check
them fresh) and captures/make_broker_captures.py (which commits small captures of them with
their truth). Each function runs real clients against a running broker or cluster and
returns the clients' runs (:class:`~tests.support.client_truth.ClientRun`, keyed by a run
name); the caller captures around it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from tests.support.client_truth import ClientRun
from tests.support.go_clients import GoClients
from tests.support.java_clients import JavaClients
from tests.support.kafka_broker import KafkaCluster

#: producer specs (codec:acks:mode) every client family runs: each codec with acks=all,
#: acks 0 and 1, idempotent, transactional
PRODUCER_SPECS = [f"{codec}:all:plain" for codec in ("none", "gzip", "snappy", "lz4", "zstd")] \
    + ["none:0:plain", "none:1:plain", "lz4:all:idempotent", "zstd:all:txn"]

#: admin operation (KafkaClients.java) -> the APIs it sends (describe_features: an
#: ApiVersions request, not told apart from the connections' own)
JAVA_ADMIN_APIS = {
    "describe_cluster": ("DescribeCluster",), "create_topics": ("CreateTopics",),
    "create_topics_again": ("CreateTopics",), "create_partitions": ("CreatePartitions",),
    "describe_topics": ("DescribeTopicPartitions",),
    "alter_topic_config": ("IncrementalAlterConfigs",),
    "describe_topic_config": ("DescribeConfigs",),
    "alter_sensitive_config": ("IncrementalAlterConfigs",),
    "describe_broker_config": ("DescribeConfigs",), "create_acls": ("CreateAcls",),
    "describe_acls": ("DescribeAcls",), "delete_acls": ("DeleteAcls",),
    "alter_scram_credentials": ("AlterUserScramCredentials",),
    "describe_scram_credentials": ("DescribeUserScramCredentials",),
    "alter_client_quotas": ("AlterClientQuotas",),
    "describe_client_quotas": ("DescribeClientQuotas",),
    "describe_log_dirs": ("DescribeLogDirs",), "describe_producers": ("DescribeProducers",),
    "list_transactions": ("ListTransactions",),
    "describe_transactions": ("DescribeTransactions",),
    "list_offsets": ("ListOffsets",), "delete_records": ("DeleteRecords",),
    "list_groups": ("ListGroups",), "describe_features": (), "delete_topics": ("DeleteTopics",),
}
#: the error names the Java admin operations meet
JAVA_ADMIN_ERRORS = {"create_topics_again": "TOPIC_ALREADY_EXISTS",
                     "describe_transactions": "TRANSACTIONAL_ID_NOT_FOUND"}

#: Go admin operation (kclients) -> the APIs it sends, per client
GO_ADMIN_APIS = {
    "franz": {
        "create_topics": ("CreateTopics",), "create_topics_again": ("CreateTopics",),
        "create_partitions": ("CreatePartitions",),
        "alter_topic_config": ("IncrementalAlterConfigs",),
        "describe_topic_config": ("DescribeConfigs",), "create_acls": ("CreateAcls",),
        "describe_acls": ("DescribeAcls",), "delete_acls": ("DeleteAcls",),
        "alter_scram_credentials": ("AlterUserScramCredentials",),
        "list_offsets": ("ListOffsets",), "list_groups": ("ListGroups",),
        "describe_groups": ("DescribeGroups",), "delete_topics": ("DeleteTopics",),
    },
    "sarama": {
        "describe_cluster": ("DescribeCluster",),
        "create_topics": ("CreateTopics", "CreateTopics"),
        "create_topics_again": ("CreateTopics",), "create_partitions": ("CreatePartitions",),
        "alter_topic_config": ("IncrementalAlterConfigs",),
        "describe_topic_config": ("DescribeConfigs",), "create_acls": ("CreateAcls",),
        "describe_acls": ("DescribeAcls",), "delete_acls": ("DeleteAcls",),
        "list_groups": ("ListGroups",), "describe_log_dirs": ("DescribeLogDirs",),
        "delete_topics": ("DeleteTopics", "DeleteTopics"),
    },
}
#: the Kafka error codes the Go admin operations meet
GO_ADMIN_ERRORS = {"franz": {"create_topics_again": 36, "describe_groups": 69},
                   "sarama": {"create_topics_again": 36}}


def java_scenario(java: JavaClients, bootstrap: str, topic: str, tag: str,
                  n: int) -> dict[str, ClientRun]:
    """The Java client (KafkaClients.java): ``n`` records per producer spec, then a KIP-848,
    a classic and a share-group consumer reading them all, then the admin operations.
    ``topic`` has 2 partitions."""
    total = n * len(PRODUCER_SPECS)
    return {
        "produce": java.run("produce", bootstrap, topic, tag, str(n), *PRODUCER_SPECS),
        "consumer": java.run("consume", bootstrap, topic, f"{tag}-c848", f"{tag}-g848",
                             "consumer", str(total)),
        "classic": java.run("consume", bootstrap, topic, f"{tag}-classic", f"{tag}-gclassic",
                            "classic", str(total)),
        "share": java.run("share", bootstrap, topic, f"{tag}-share", f"{tag}-gshare",
                          str(total)),
        "admin": java.run("admin", bootstrap, tag, f"{tag}-admin"),
    }


def go_scenario(go: GoClients, bootstrap: str, topic: str, tag: str,
                n: int) -> dict[str, ClientRun]:
    """franz-go and sarama (kclients): ``n`` records per producer spec each, franz-go
    KIP-848, classic and share consumers and a sarama classic consumer reading them all,
    then each one's admin operations. Runs are keyed ``"<client>/<run>"``."""
    total = 2 * n * len(PRODUCER_SPECS)
    runs = {}
    for client in ("franz", "sarama"):
        runs[f"{client}/produce"] = go.run(f"{client}-produce", bootstrap, topic,
                                           f"{tag}-{client}", str(n), *PRODUCER_SPECS)
    runs["franz/consumer"] = go.run("franz-consume", bootstrap, topic, f"{tag}-franz-c848",
                                    f"{tag}-g848", "consumer", str(total))
    runs["franz/classic"] = go.run("franz-consume", bootstrap, topic, f"{tag}-franz-classic",
                                   f"{tag}-gfranz", "classic", str(total))
    runs["franz/share"] = go.run("franz-share", bootstrap, topic, f"{tag}-franz-share",
                                 f"{tag}-gshare", str(total))
    runs["sarama/classic"] = go.run("sarama-consume", bootstrap, topic,
                                    f"{tag}-sarama-classic", f"{tag}-gsarama", str(total))
    for client in ("franz", "sarama"):
        runs[f"{client}/admin"] = go.run(f"{client}-admin", bootstrap, f"{tag}-{client}",
                                         f"{tag}-{client}-admin")
    return runs


#: Metadata answers in a row that must agree before a leadership change counts as done
_AGREEING_READS = 5


def _wait_leader(cluster: KafkaCluster, topic: str, ok: Callable[[int], bool],
                 timeout: float, what: str,
                 retry: Callable[[], None] | None = None) -> dict[int, int]:
    """Partition -> leader of ``topic`` once ``ok(leader of partition 0)`` held in
    :data:`_AGREEING_READS` Metadata answers in a row, 0.2 s apart: librdkafka asks any
    node, and a node applies the controller's records a moment after another, so a single
    answer can be stale. ``retry()`` runs after each answer that does not hold (asking for
    an election again). Raises AssertionError, naming ``what``, after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    agreeing = 0
    while time.monotonic() < deadline:
        leaders = cluster.leaders(topic)
        if not ok(leaders[0]):
            agreeing = 0
            if retry is not None:
                retry()
        else:
            agreeing += 1
            if agreeing == _AGREEING_READS:
                return leaders
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def failover_scenario(cluster: KafkaCluster, java: JavaClients, topic: str, tag: str,
                      work: Path, events: dict) -> dict[str, ClientRun]:
    """A paced Java producer (one record every 40 ms, acks=all) on ``topic`` while the leader
    of its partition 0 is killed (SIGKILL), a new leader takes over, the node restarts and a
    preferred leader election gives it back. ``events`` gets ``before``, ``during``,
    ``after`` (partition -> leader, each agreed by several Metadata answers in a row),
    ``victim`` (node id) and ``victim_port``."""
    before = cluster.leaders(topic)
    victim = before[0]
    node = cluster.nodes[victim]
    events.update(before=before, victim=victim, victim_port=node.port)
    stop = work / f"{tag}.stop"
    out: dict[str, ClientRun] = {}
    producer = threading.Thread(target=lambda: out.update(producer=java.run(
        "paced", cluster.bootstrap_servers, topic, f"{tag}-producer", str(stop), "40",
        str(len(before)))))
    producer.start()
    try:
        time.sleep(1.5)
        node.stop(kill=True)                       # the crash
        events["during"] = _wait_leader(cluster, topic, lambda n: n not in (victim, -1), 30,
                                        "a new leader of partition 0")
        time.sleep(1.0)
        node.launch(format_storage=False)          # the node comes back
        node.wait_ready(time.monotonic() + 60)
        events["after"] = _wait_leader(cluster, topic, lambda n: n == victim, 60,
                                       "the preferred leader of partition 0 back",
                                       retry=lambda: cluster.elect_preferred_leaders(topic))
        time.sleep(1.0)
    finally:
        stop.touch()
        producer.join(120)
    return out


#: the TLS connections of :func:`tls_scenario`: run name -> what it forces
TLS_RUNS = {
    "kafka-python/tls13": "TLS 1.3 (OpenSSL's default suite), SSL listener",
    "kafka-python/sasl-ssl": "TLS 1.3, SCRAM-SHA-512 on the SASL_SSL listener",
    "aiokafka/tls12-aes-gcm": "TLS 1.2 ECDHE-ECDSA-AES256-GCM-SHA384",
    "aiokafka/tls12-aes-cbc": "TLS 1.2 ECDHE-ECDSA-AES128-SHA256 (CBC + HMAC)",
    "franz/tls12-chacha20": "TLS 1.2 TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    "franz/tls13": "TLS 1.3 (Go's choice of suite)",
}


def tls_scenario(go: GoClients, broker, topic: str, tag: str, keylog: Path,
                 n: int) -> dict[str, ClientRun]:
    """Producers on the broker's SSL and SASL_SSL listeners, each writing the NSS key log
    ``keylog`` (Python's ``SSLContext.keylog_filename``, Go's ``tls.Config.KeyLogWriter``),
    one per :data:`TLS_RUNS` entry (versions and cipher suites forced through client
    settings), ``n`` records each (Python: to partition 0; Go: 0 and 1 in turn) of
    ``topic`` (2 partitions)."""
    import asyncio
    import ssl

    from tests.support.kafka_broker import SASL_USERS

    ca = str(broker.tls.ca)
    ssl_bs = f"127.0.0.1:{broker.ssl_port}"
    runs: dict[str, ClientRun] = {}

    def context(max_version=None, ciphers=None) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=ca)
        ctx.keylog_filename = str(keylog)
        if max_version is not None:
            ctx.maximum_version = max_version
        if ciphers is not None:
            ctx.set_ciphers(ciphers)
        return ctx

    def produced(run: str, cid: str, offsets: list) -> None:
        runs[run] = ClientRun([{"event": "produced", "client_id": cid, "codec": "none",
                                "topic": topic, "partition": 0, "offset": off,
                                "key": f"k{i}", "value": f"{cid}-{i}"}
                               for i, off in enumerate(offsets)], [], keylog)

    from kafka import KafkaProducer

    user, password = SASL_USERS["SCRAM-SHA-512"]
    for run, extra in (("kafka-python/tls13", {"bootstrap_servers": ssl_bs,
                                               "security_protocol": "SSL"}),
                       ("kafka-python/sasl-ssl", {
                           "bootstrap_servers": f"127.0.0.1:{broker.sasl_ssl_port}",
                           "security_protocol": "SASL_SSL",
                           "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": user,
                           "sasl_plain_password": password})):
        cid = f"{tag}-{run.replace('/', '-')}"
        p = KafkaProducer(client_id=cid, ssl_context=context(), **extra)
        futures = [p.send(topic, key=f"k{i}".encode(), value=f"{cid}-{i}".encode(),
                          partition=0) for i in range(n)]
        offsets = [f.get(30).offset for f in futures]
        p.close()
        produced(run, cid, offsets)

    async def aio(run: str, ciphers: str) -> None:
        from aiokafka import AIOKafkaProducer

        cid = f"{tag}-{run.replace('/', '-')}"
        p = AIOKafkaProducer(bootstrap_servers=ssl_bs, client_id=cid, security_protocol="SSL",
                             ssl_context=context(ssl.TLSVersion.TLSv1_2, ciphers))
        await p.start()
        try:
            offsets = [(await p.send_and_wait(topic, key=f"k{i}".encode(),
                                              value=f"{cid}-{i}".encode(), partition=0)).offset
                       for i in range(n)]
        finally:
            await p.stop()
        produced(run, cid, offsets)

    asyncio.run(aio("aiokafka/tls12-aes-gcm", "ECDHE-ECDSA-AES256-GCM-SHA384"))
    asyncio.run(aio("aiokafka/tls12-aes-cbc", "ECDHE-ECDSA-AES128-SHA256"))
    for run, flags in (("franz/tls12-chacha20", [
            "-tls-max", "1.2", "-tls-ciphers", "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"]),
            ("franz/tls13", [])):
        out = go.run("franz-produce", ssl_bs, topic, f"{tag}-{run.replace('/', '-')}", str(n),
                     "none:all:plain", flags=["-tls-ca", ca, "-keylog", str(keylog), *flags])
        runs[run] = out
    return runs


#: the runs of :func:`tls_sessions_scenario`, what each shows
TLS_SESSION_RUNS = {
    "kafka-python/key-update": "TLS 1.3; a producer and a consumer each move more than the "
                               "broker's key limit (KEY_UPDATE_BYTES): KeyUpdate both ways",
    "franz/tls13-resumed": "TLS 1.3; the client's later connections resume its first "
                           "session with a PSK (Go's ClientSessionCache)",
    "franz/tls12-resumed": "TLS 1.2 AES-128-GCM; later connections resume with a session "
                           "ticket (abbreviated handshake)",
}


def tls_sessions_scenario(go: GoClients, broker, topic: str, tag: str, keylog: Path,
                          n: int) -> dict[str, ClientRun]:
    """TLS sessions beyond the first handshake, on the broker's SSL listener, every client
    writing the NSS key log ``keylog``: KeyUpdate (a kafka-python producer sends ``n``
    records of 4 KiB to partition 0 of ``topic``, a kafka-python consumer reads them back;
    the broker's key limit is :data:`tests.support.kafka_broker.KEY_UPDATE_BYTES`) and
    resumed sessions (franz-go producers with a session cache, TLS 1.3 and TLS 1.2, ``n``
    small records each). One entry per :data:`TLS_SESSION_RUNS` run."""
    import ssl

    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    ca = str(broker.tls.ca)
    bs = f"127.0.0.1:{broker.ssl_port}"
    runs: dict[str, ClientRun] = {}

    def context() -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=ca)
        ctx.keylog_filename = str(keylog)
        return ctx

    run = "kafka-python/key-update"
    cid = f"{tag}-key-update"
    # 4 KiB values that do not compress away (the batches are not compressed anyway)
    values = [(f"{cid}-{i}-".encode() * 700)[:4096] for i in range(n)]
    p = KafkaProducer(bootstrap_servers=bs, client_id=cid, security_protocol="SSL",
                      ssl_context=context(), linger_ms=0, batch_size=4096)
    offsets = [p.send(topic, key=f"k{i}".encode(), value=v, partition=0).get(30).offset
               for i, v in enumerate(values)]
    p.close()
    lines = [{"event": "produced", "client_id": cid, "codec": "none", "topic": topic,
              "partition": 0, "offset": off, "key": f"k{i}", "value_bytes": len(values[i])}
             for i, off in enumerate(offsets)]
    c = KafkaConsumer(bootstrap_servers=bs, client_id=f"{cid}-consumer", group_id=None,
                      security_protocol="SSL", ssl_context=context(),
                      enable_auto_commit=False, max_partition_fetch_bytes=16384)
    tp = TopicPartition(topic, 0)
    c.assign([tp])
    c.seek(tp, offsets[0])
    got: list = []
    deadline = time.monotonic() + 60
    while len(got) < n and time.monotonic() < deadline:
        for recs in c.poll(timeout_ms=1000).values():
            got.extend(recs)
    c.close()
    lines += [{"event": "consumed", "client_id": f"{cid}-consumer", "topic": topic,
               "partition": 0, "offset": r.offset, "key": r.key.decode(),
               "value_bytes": len(r.value)} for r in got[:n]]
    runs[run] = ClientRun(lines, [], keylog)
    for run, flags in (("franz/tls13-resumed", []),
                       ("franz/tls12-resumed", [
                           "-tls-max", "1.2", "-tls-ciphers",
                           "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"])):
        runs[run] = go.run("franz-produce", bs, topic, f"{tag}-{run.replace('/', '-')}",
                           str(n), "none:all:plain", flags=["-tls-ca", ca, "-keylog",
                                                            str(keylog), "-tls-resume", *flags])
    return runs
