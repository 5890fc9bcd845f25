"""The Parquet tables of ``kafkasniff export``: explicit, versioned Arrow schemas.

Every column of every table is declared here once, with its type, nullability and a
description (kept in the Arrow field metadata under ``description``); ``docs/parquet-schema.md``
is generated from this module by :func:`schema_markdown` (a test checks it is up to date).

Types are the ones Spark reads without surprises (DESIGN.md, Convention 9): timestamps are
``timestamp[us, tz=UTC]`` (Spark ``TIMESTAMP``) next to an exact ``int64`` ``*_ts_ns`` copy;
integers are signed (``int8``/``int16``/``int32``/``int64`` -> Spark ``BYTE``/``SHORT``/``INT``/
``LONG``), Kafka's integers keep their wire width and sign; no unsigned types, no nanosecond
timestamps; plus ``string``, ``binary``, ``bool``, ``double``, ``list<string>`` and
``list<struct>``.

Every table starts with the same five columns: ``capture`` (the capture file name), ``ts`` /
``ts_ns`` (when the row's thing happened, capture time) and ``date`` (``YYYY-MM-DD``, UTC) /
``hour`` (0-23, UTC), the Hive partition columns of ``--partition-by``.

Each file carries ``kafkasniff.schema_version`` (:data:`SCHEMA_VERSION`) and
``kafkasniff.table`` in its Parquet key-value metadata. The version changes when a column is
removed, renamed or changes type; adding a nullable column at the end of a table is allowed
within a version.
"""

from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = 1
"""Version of the table layout; written into every file's key-value metadata."""

TABLES = ("exchanges", "partitions", "records", "issues", "connections", "topic_ids")
"""The tables of exchanges, issues and connections (every writer of decoded exchanges: export,
``live --export``, ``spark decode``), in the order of ``docs/parquet-schema.md``."""

GROUP_TABLES = ("groups", "members", "rebalances", "commits")
"""The consumer-group tables (:mod:`kafkasniff.groups`), written by ``kafkasniff export`` from
the whole capture once it is decoded (docs/groups.md)."""

ALL_TABLES = TABLES + GROUP_TABLES
"""Every table."""


def export_tables(with_records: bool, groups: bool = False) -> tuple[str, ...]:
    """The tables an export writes: :data:`TABLES` (``records`` only ``with_records``), and
    :data:`GROUP_TABLES` with ``groups``."""
    return tuple(t for t in TABLES if with_records or t != "records") + \
        (GROUP_TABLES if groups else ())

META_VERSION_KEY = "kafkasniff.schema_version"
META_TABLE_KEY = "kafkasniff.table"

TIMESTAMP = pa.timestamp("us", tz="UTC")
STRING_LIST = pa.list_(pa.field("element", pa.string()))
HEADERS = pa.list_(pa.field("element", pa.struct([
    pa.field("key", pa.string(), metadata={"description": "header key (UTF-8; invalid bytes "
                                                          "backslash-escaped)"}),
    pa.field("value", pa.binary(), metadata={"description": "header value bytes, null when "
                                                            "null"}),
])))

INT32_LIST = pa.list_(pa.field("element", pa.int32()))
TOPIC_PARTITIONS = pa.list_(pa.field("element", pa.struct([
    pa.field("topic", pa.string(), metadata={"description": "topic name (the topic id when "
                                                            "its name was not seen)"}),
    pa.field("partitions", INT32_LIST, metadata={"description": "partition indexes, sorted"}),
])))
MEMBER_ASSIGNMENTS = pa.list_(pa.field("element", pa.struct([
    pa.field("member_id", pa.string(), metadata={"description": "the member"}),
    pa.field("topic", pa.string(), metadata={"description": "topic name (or id)"}),
    pa.field("partitions", INT32_LIST, metadata={"description": "partition indexes, sorted"}),
])))

_TYPES = {
    "string": pa.string(), "binary": pa.binary(), "bool": pa.bool_(), "double": pa.float64(),
    "int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32(), "int64": pa.int64(),
    "timestamp": TIMESTAMP, "list<string>": STRING_LIST, "headers": HEADERS,
    "topic_partitions": TOPIC_PARTITIONS, "member_assignments": MEMBER_ASSIGNMENTS,
}

# (name, type, nullable, description). "!" after the type: not nullable.
_COMMON = [
    ("capture", "string!", "name of the capture file the row comes from (the original file "
                           "name also for shards of a capture)"),
    ("ts", "timestamp!", "when it happened (capture time, UTC, microseconds); see each table"),
    ("ts_ns", "int64!", "the same in ns since the Unix epoch (exact)"),
    ("date", "string!", "UTC date of `ts`, `YYYY-MM-DD` (Hive partition column)"),
    ("hour", "int8!", "UTC hour of `ts`, 0-23 (Hive partition column)"),
]

_ENDPOINTS = [
    ("client", "string!", "client endpoint `ip:port` (`[v6]:port` for IPv6)"),
    ("broker", "string!", "broker endpoint `ip:port`"),
    ("client_ip", "string!", "client IP address (text form)"),
    ("client_port", "int32!", "client TCP port"),
    ("broker_ip", "string!", "broker IP address"),
    ("broker_port", "int32!", "broker TCP port"),
]

_CONNECTION_KEY = ("connection_key", "string!",
                   "the TCP connection: `client>broker@first_ts_ns` (first packet of the "
                   "connection, ns); stable when a capture is split into shards")
_EXCHANGE_ID = ("exchange_id", "string!",
                "the exchange: `connection_key/request stream offset/response stream offset` "
                "(-1 for a side not captured); joins every table")

_RECORD_SUMMARY = [
    ("batches", "int32", "record batches (or magic 0/1 top-level messages); null when the "
                         "exchange carries no records field"),
    ("records", "int64", "records in them (the batch headers' counts)"),
    ("records_bytes", "int64", "bytes of the records fields on the wire (batch headers "
                               "included)"),
    ("compressed_bytes", "int64", "bytes of the batches' record sections as sent (compressed "
                                  "or not)"),
    ("uncompressed_bytes", "int64", "the same sections after decompression; null when some "
                                    "batch could not be decompressed or was cut"),
    ("codecs", "list<string>", "distinct codecs in order of appearance (`none`, `gzip`, "
                               "`snappy`, `lz4`, `zstd`)"),
    ("first_offset", "int64", "smallest base offset of the complete batches"),
    ("last_offset", "int64", "largest last offset of the complete batches"),
]

_SPECS: dict[str, list[tuple[str, str, str]]] = {
    "exchanges": _COMMON + [
        _EXCHANGE_ID,
        _CONNECTION_KEY,
    ] + _ENDPOINTS + [
        ("status", "string!", "`paired`, `no_response_expected` (Produce acks=0), `unanswered`, "
                              "`orphan_response`"),
        ("api_key", "int16!", "API key of the request (-1 for an orphan whose API could not be "
                              "inferred, -2 for raw SASL tokens, 0-4 for Kafka 0.7 requests)"),
        ("api_name", "string!", "API name (`Produce`, `Fetch` ..., `SaslToken`, `FETCH (0.7)`, "
                                "`Unknown`)"),
        ("api_version", "int16!", "API version of the request (-1 when none)"),
        ("correlation_id", "int32!", "correlation id (-1 when none)"),
        ("client_id", "string", "client_id of the request header"),
        ("latency_ns", "int64", "first byte of the response minus last byte of the request, ns "
                                "(paired exchanges only)"),
        ("latency_ms", "double", "the same in milliseconds"),
        ("request_bytes", "int64!", "request frame size on the wire (size prefix included), 0 "
                                    "when not captured"),
        ("response_bytes", "int64!", "response frame size, 0 when not captured"),
        ("request_first_ts_ns", "int64", "capture time of the request's first byte, ns"),
        ("request_last_ts_ns", "int64", "capture time of the request's last byte, ns"),
        ("response_first_ts_ns", "int64", "capture time of the response's first byte, ns"),
        ("response_last_ts_ns", "int64", "capture time of the response's last byte, ns"),
        ("request_complete", "bool", "the whole request body was decoded (null when not "
                                     "captured)"),
        ("response_complete", "bool", "the whole response body was decoded"),
        ("errors", "list<string>!", "distinct names of every non-zero error code of the "
                                    "response (top level, per partition ...), in order of first "
                                    "appearance"),
        ("error_count", "int32!", "number of entries in `errors`"),
        ("throttle_time_ms", "int32", "throttle time of the response, ms (null when the layout "
                                      "has none)"),
        ("topics", "list<string>!", "topic names carried by the request and response "
                                    "themselves (ids are not resolved: see `topic_ids`)"),
        ("topic_ids", "list<string>!", "topic ids carried by the exchange (Kafka's text form); "
                                       "resolve them with the `topic_ids` table"),
        ("inferred", "bool!", "an orphan response whose API was inferred"),
        ("assumed_version", "int16", "the wire version is newer than the definitions: decoded "
                                     "as this version"),
        ("tls_version", "string", "`TLS 1.2` or `TLS 1.3` when the exchange was decrypted "
                                  "from TLS (`--tls-keylog`), else null"),
        ("tls_cipher_suite", "string", "the TLS cipher suite's IANA name (decrypted "
                                       "exchanges)"),
        ("tls_sni", "string", "the server name the TLS client asked for (SNI)"),
    ] + _RECORD_SUMMARY + [
        ("min_timestamp_ms", "int64", "smallest batch timestamp, ms since the epoch"),
        ("max_timestamp_ms", "int64", "largest batch timestamp, ms since the epoch"),
        ("crc_errors", "int32", "batches whose CRC did not match"),
        ("transactional", "bool", "some batch is transactional"),
        ("control", "bool", "some batch is a control batch (transaction markers ...)"),
        ("partial", "bool", "some records data ends inside a batch (normal at the end of a "
                            "Fetch response)"),
        ("issue_kinds", "list<string>!", "distinct kinds of the exchange's issues, in order"),
        ("issue_count", "int32!", "issues of the exchange (rows of `issues` with this "
                                  "exchange_id)"),
        ("request_json", "string", "the decoded request body as JSON (docs/json.md: snake_case "
                                   "field names, bytes base64, uuids in Kafka's text form, "
                                   "secrets redacted, records fields as their batch headers "
                                   "without records); null when not captured or not decodable"),
        ("response_json", "string", "the decoded response body as JSON, the same way"),
        ("long_poll", "bool", "the broker held the response by design (a Fetch that waited out "
                              "`max_wait_ms` with nothing to return, a JoinGroup held for the "
                              "rebalance ...): waiting, not slowness (docs/long-polls.md); null "
                              "in files written before the column existed"),
        ("long_poll_rule", "string", "the rule that marked the long-poll (`fetch_max_wait`, "
                                     "`share_fetch_max_wait`, `join_group_held`, "
                                     "`sync_group_follower`, `produce_timeout`), else null"),
    ],
    "partitions": _COMMON + [
        _EXCHANGE_ID,
        ("api_key", "int16!", "API key of the exchange"),
        ("api_name", "string!", "API name"),
        ("api_version", "int16!", "API version"),
        ("client_id", "string", "client_id of the request"),
        ("client", "string!", "client endpoint `ip:port`"),
        ("broker", "string!", "broker endpoint `ip:port`"),
        ("topic", "string", "topic name as on the wire (null when only an id is carried)"),
        ("topic_id", "string", "topic id as on the wire (Kafka's text form)"),
        ("partition", "int32!", "partition index"),
        ("in_request", "bool!", "the request carries this partition"),
        ("in_response", "bool!", "the response carries this partition"),
        ("error_code", "int16", "the partition's error code in the response (0: none)"),
        ("error_name", "string", "its name (`NONE`, `NOT_LEADER_OR_FOLLOWER` ...)"),
        ("error_message", "string", "the partition's error message in the response"),
        ("fetch_offset", "int64", "Fetch request: offset to fetch from"),
        ("partition_max_bytes", "int32", "Fetch/ShareFetch request: byte limit of the "
                                         "partition"),
        ("current_leader_epoch", "int32", "request: the leader epoch the client knows"),
        ("high_watermark", "int64", "Fetch response: high watermark"),
        ("last_stable_offset", "int64", "Fetch response: last stable offset"),
        ("log_start_offset", "int64", "log start offset (response; else a follower's Fetch "
                                      "request)"),
        ("preferred_read_replica", "int32", "Fetch response: preferred read replica (-1: "
                                            "none)"),
        ("base_offset", "int64", "Produce response: offset given to the first record"),
        ("log_append_time_ms", "int64", "Produce response: LogAppendTime (-1: CreateTime)"),
        ("committed_offset", "int64", "OffsetCommit/TxnOffsetCommit request, OffsetFetch "
                                      "response: committed offset"),
        ("committed_leader_epoch", "int32", "leader epoch of the committed offset"),
        ("committed_metadata", "string", "metadata of the committed offset (OffsetFetch "
                                         "`metadata`)"),
        ("offset", "int64", "ListOffsets response: offset found; DeleteRecords request: "
                            "delete before"),
        ("requested_timestamp_ms", "int64", "ListOffsets request: timestamp asked (-1 latest, "
                                            "-2 earliest, -3 max timestamp ...)"),
        ("timestamp_ms", "int64", "ListOffsets response: timestamp of the offset found"),
        ("leader_id", "int32", "leader broker id (Metadata, or a response's current leader)"),
        ("leader_epoch", "int32", "leader epoch (Metadata, ListOffsets, OffsetForLeaderEpoch "
                                  "or a response's current leader)"),
        ("end_offset", "int64", "OffsetForLeaderEpoch response: end offset"),
        ("low_watermark", "int64", "DeleteRecords response: low watermark"),
        ("start_offset", "int64", "share-group APIs: start offset"),
        ("lag", "int64", "DescribeShareGroupOffsets response: lag"),
    ] + _RECORD_SUMMARY + [
        ("producer_id", "int64", "producer id of the first batch with one (-1 when none)"),
        ("crc_errors", "int32", "batches whose CRC did not match"),
        ("partial", "bool", "the data ends inside a batch"),
    ],
    "records": _COMMON + [
        _EXCHANGE_ID,
        ("side", "string!", "`request` (Produce) or `response` (Fetch, ShareFetch, "
                            "FetchSnapshot)"),
        ("topic", "string", "topic name as on the wire"),
        ("topic_id", "string", "topic id as on the wire"),
        ("partition", "int32", "partition index"),
        ("offset", "int64!", "absolute offset of the record"),
        ("timestamp", "timestamp", "record timestamp (null for magic 0, negative or out-of-range "
                                   "values)"),
        ("timestamp_ms", "int64", "record timestamp as on the wire, ms since the epoch"),
        ("key", "binary", "record key bytes (null key: null)"),
        ("value", "binary", "record value bytes (null value, e.g. a tombstone: null)"),
        ("headers", "headers!", "record headers in order (magic 2)"),
        ("magic", "int8!", "message format: 0, 1 or 2"),
        ("codec", "string!", "codec of the batch: `none`, `gzip`, `snappy`, `lz4`, `zstd`"),
        ("timestamp_type", "string", "`create_time` or `log_append_time` (null for magic 0)"),
        ("transactional", "bool!", "the batch is transactional"),
        ("control", "bool!", "the batch is a control batch"),
        ("control_type", "string", "control record type (`COMMIT`, `ABORT`, `LEADER_CHANGE` "
                                   "...), null for ordinary records"),
        ("producer_id", "int64", "producer id of the batch (-1: none; null for magic 0/1)"),
        ("producer_epoch", "int16", "producer epoch of the batch"),
        ("base_sequence", "int32", "base sequence of the batch"),
        ("partition_leader_epoch", "int32", "partition leader epoch of the batch"),
        ("batch_base_offset", "int64!", "base offset of the batch"),
    ],
    "issues": _COMMON + [
        ("exchange_id", "string", "the exchange the issue belongs to; null for standalone "
                                  "issues (gaps between frames, resyncs, capture damage)"),
        ("connection_key", "string", "the TCP connection (as in `exchanges`); null when none"),
        ("kind", "string!", "issue kind (`tcp_gap`, `crc_mismatch`, `unanswered_request` ..., "
                            "docs/json.md)"),
        ("severity", "string!", "`info`, `warning` or `error`"),
        ("message", "string!", "one sentence with offsets, expected and actual values"),
        ("client", "string!", "client endpoint (empty when unknown)"),
        ("broker", "string!", "broker endpoint (empty when unknown)"),
        ("direction", "string!", "`request`, `response` or empty"),
        ("stream_offset", "int64!", "offset in the TCP stream of that direction (-1: n/a)"),
        ("length_bytes", "int64!", "bytes concerned (gap length, bytes skipped ...), 0: n/a"),
        ("field_path", "string!", "Kafka field path (`topics[0].partitions[2].records`), empty: "
                                  "n/a"),
        ("frame_offset", "int64!", "offset inside the frame payload (-1: n/a)"),
        ("correlation_id", "int32", "correlation id of the frame concerned"),
        ("api_key", "int16", "API key of the frame concerned"),
        ("api_version", "int16", "API version of the frame concerned"),
    ],
    "connections": _COMMON + [
        _CONNECTION_KEY,
        ("kind", "string!", "`kafka`, `kafka07`, `tls` or `other` (not Kafka)"),
    ] + _ENDPOINTS + [
        ("first_ts", "timestamp!", "first packet of the connection (= `ts`)"),
        ("first_ts_ns", "int64!", "the same in ns"),
        ("last_ts", "timestamp!", "last packet of the connection"),
        ("last_ts_ns", "int64!", "the same in ns"),
        ("duration_ns", "int64!", "last minus first packet, ns"),
        ("handshake_seen", "bool!", "the SYN was captured (false: the capture began "
                                    "mid-stream)"),
        ("closed", "string!", "how it ended: `fin`, `rst`, `idle`, `evicted`, `port_reuse`, "
                              "`end_of_capture`"),
        ("bytes_to_broker", "int64!", "TCP payload bytes client to broker"),
        ("bytes_to_client", "int64!", "TCP payload bytes broker to client"),
        ("segments", "int64!", "TCP segments both ways"),
        ("gap_bytes", "int64!", "bytes never captured, both ways"),
        ("retransmitted_bytes", "int64!", "retransmitted bytes, both ways"),
        ("overlap_conflicts", "int64!", "retransmissions carrying different bytes"),
        ("exchanges", "int64!", "Kafka exchanges of the connection"),
        ("unanswered", "int64!", "requests left unanswered"),
        ("orphans", "int64!", "responses without a captured request"),
        ("tls_version", "string", "TLS connections: version the server selected, else the "
                                  "highest the client offered (`TLS 1.3`)"),
        ("tls_sni", "string", "TLS server name indication of the ClientHello"),
        ("tls_alpn", "list<string>", "ALPN protocols offered by the client"),
        ("sasl_mechanism", "string", "SASL mechanism (`PLAIN`, `SCRAM-SHA-256` ...)"),
        ("sasl_username", "string", "SASL username (secrets are never exported)"),
        ("sasl_state", "string", "SASL session state at the end (`authenticated`, `failed` "
                                 "...)"),
    ],
    "topic_ids": _COMMON + [
        ("topic_id", "string!", "topic id (Kafka's text form: URL-safe base64, 22 characters)"),
        ("topic_name", "string!", "topic name carried with that id"),
        ("first_seen", "timestamp!", "capture time the pair was first seen (= `ts`)"),
        ("first_seen_ts_ns", "int64!", "the same in ns"),
    ],
}

_GROUP_ID = ("group_id", "string!", "the consumer (or share) group id")
_PROTOCOL = ("protocol", "string!", "`classic` (JoinGroup/SyncGroup), `consumer` (KIP-848 "
                                    "ConsumerGroupHeartbeat), `share` (KIP-932 "
                                    "ShareGroupHeartbeat) or `unknown` (offsets or lookups "
                                    "only)")

_SPECS.update({
    "groups": _COMMON + [
        _GROUP_ID,
        _PROTOCOL,
        ("protocol_type", "string", "classic `protocol_type` (`consumer`, `connect` ...); "
                                    "`consumer` for KIP-848, `share` for share groups"),
        ("protocol_name", "string", "the assignor: classic `protocol_name` (`range`, "
                                    "`cooperative-sticky` ...), KIP-848 `server_assignor`"),
        ("coordinator", "string", "`host:port` of the coordinator FindCoordinator named, else "
                                  "the broker endpoint the group's requests went to"),
        ("coordinator_node_id", "int32!", "node id of the coordinator (-1: no FindCoordinator "
                                          "answer seen)"),
        ("coordinator_brokers", "list<string>!", "broker endpoints the group's requests went "
                                                 "to, first first"),
        ("state", "string", "last `group_state` a DescribeGroups / ListGroups / "
                            "ConsumerGroupDescribe answer gave"),
        ("first_ts", "timestamp!", "first group exchange (= `ts`)"),
        ("first_ts_ns", "int64!", "the same in ns"),
        ("last_ts", "timestamp!", "last group exchange (its response)"),
        ("last_ts_ns", "int64!", "the same in ns"),
        ("generation_id", "int32!", "last classic generation, or the largest KIP-848 / share "
                                    "member epoch (-1: none seen)"),
        ("members", "int32!", "members seen"),
        ("rebalances", "int32!", "rebalances seen (rows of `rebalances`)"),
        ("commit_requests", "int64!", "answered OffsetCommit / TxnOffsetCommit requests"),
        ("commit_latency_p50_ns", "int64", "their latency, median (nearest rank), ns"),
        ("commit_latency_p99_ns", "int64", "99th percentile (nearest rank), ns"),
        ("commit_latency_max_ns", "int64", "largest, ns"),
        ("errors", "list<string>!", "error names of the group's answers, most frequent first"),
        ("error_count", "int64!", "group exchanges answered with an error (per name, summed)"),
        ("exchanges", "int64!", "group API exchanges of the group"),
    ],
    "members": _COMMON + [
        _GROUP_ID,
        _PROTOCOL,
        ("member_id", "string!", "member id as the coordinator named it"),
        ("group_instance_id", "string", "static membership id (KIP-345; KIP-848 "
                                        "`instance_id`)"),
        ("client_id", "string", "client_id of its requests"),
        ("client_host", "string!", "IP address of its connection to the coordinator (empty: "
                                   "only named by another member's or a Describe answer)"),
        ("client", "string!", "its first connection's client endpoint `ip:port` (empty when "
                              "not seen)"),
        ("first_ts", "timestamp!", "first exchange of the member (= `ts`)"),
        ("first_ts_ns", "int64!", "the same in ns"),
        ("last_ts_ns", "int64!", "last exchange of the member, ns"),
        ("joined_ts_ns", "int64", "when it joined (JoinGroup, heartbeat with epoch 0), ns; "
                                  "null: a member before the capture began"),
        ("left_ts_ns", "int64", "when it left, ns; null: still a member at the end"),
        ("left_reason", "string", "`leave` (LeaveGroup, epoch -1/-2), `session_timeout`, "
                                  "`fenced` (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH ...)"),
        ("generation_id", "int32!", "its last classic generation (-1: n/a)"),
        ("member_epoch", "int32!", "its last KIP-848 / share member epoch (-1: n/a)"),
        ("assignment", "topic_partitions", "its last assignment; null when never seen"),
        ("subscribed_topics", "list<string>!", "topics it subscribed to"),
        ("rack_id", "string", "its rack"),
        ("session_timeout_ms", "int32!", "JoinGroup `session_timeout_ms` (-1: not on the wire)"),
        ("rebalance_timeout_ms", "int32!", "JoinGroup / ConsumerGroupHeartbeat "
                                           "`rebalance_timeout_ms` (-1: not on the wire)"),
        ("exchanges", "int64!", "group API exchanges of the member"),
    ],
    "rebalances": _COMMON + [
        _GROUP_ID,
        _PROTOCOL,
        ("rebalance_index", "int32!", "1, 2 ... in the group, in start order"),
        ("start_ts", "timestamp!", "its first sign on the wire (= `ts`; docs/groups.md)"),
        ("start_ts_ns", "int64!", "the same in ns"),
        ("end_ts", "timestamp", "every member of the new generation / epoch holds its "
                                "assignment; null: not before the capture ended"),
        ("end_ts_ns", "int64", "the same in ns"),
        ("duration_ns", "int64", "`end_ts_ns - start_ts_ns`"),
        ("duration_ms", "double", "the same in milliseconds"),
        ("trigger", "string!", "`join`, `leave`, `session_timeout`, `error`, "
                               "`assignment_change`, `rejoin` or `unknown` (docs/groups.md)"),
        ("trigger_member", "string", "the member that joined, left or timed out"),
        ("trigger_error", "string", "error name of an `error` trigger (REBALANCE_IN_PROGRESS, "
                                    "UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH ...)"),
        ("errors", "list<string>!", "error names of the group's answers during it"),
        ("generation_id", "int32!", "the generation (classic) or largest member epoch "
                                    "(KIP-848, share) it produced; -1: not seen"),
        ("protocol_name", "string", "the assignor"),
        ("leader", "string", "classic: the leader member id"),
        ("members", "list<string>!", "member ids of the new generation / epoch"),
        ("member_count", "int32!", "their number"),
        ("joined", "list<string>!", "members that joined in it"),
        ("left", "list<string>!", "members that left in it (on their own, then those "
                                  "whose session timed out)"),
        ("assignment", "member_assignments!", "the assignment after it: one element per "
                                              "member and topic"),
        ("complete", "bool!", "every member's assignment was seen"),
        ("exchange_ids", "list<string>!", "`exchange_id` of its group exchanges (joins "
                                          "`exchanges`)"),
    ],
    "commits": _COMMON + [
        _GROUP_ID,
        ("exchange_id", "string", "the commit exchange (joins `exchanges`)"),
        ("client", "string!", "client endpoint of the request"),
        ("broker", "string!", "broker endpoint"),
        ("correlation_id", "int32!", "correlation id of the request"),
        ("client_id", "string", "client_id of the request"),
        ("api_name", "string!", "`OffsetCommit` or `TxnOffsetCommit`"),
        ("member_id", "string!", "`member_id` of the request (empty for simple commits)"),
        ("generation_id", "int32!", "`generation_id` (`generation_id_or_member_epoch` since "
                                    "OffsetCommit v9); -1 when none"),
        ("topic", "string!", "topic name (the id when its name was not seen)"),
        ("topic_id", "string", "topic id when the request carried one (OffsetCommit v10+)"),
        ("partition", "int32!", "partition index"),
        ("committed_offset", "int64!", "the offset committed"),
        ("committed_leader_epoch", "int32!", "its leader epoch (-1: none)"),
        ("error", "string", "the partition's error name in the answer; null: success or no "
                            "answer"),
        ("answered", "bool!", "the answer was captured"),
        ("latency_ns", "int64", "the exchange's latency, ns"),
        ("lag", "int64", "last high watermark seen before it (Fetch, ListOffsets) minus "
                         "`committed_offset`; null: no high watermark seen"),
    ],
})

TABLE_DESCRIPTIONS = {
    "exchanges": "One row per exchange (a request and its response, or the lack of one). "
                 "`ts` is the request's first byte (the response's for orphans).",
    "partitions": "One row per topic-partition per exchange: the request's and the response's "
                  "fields of that partition merged on (topic or topic id, partition), plus the "
                  "record data of that partition. `ts` is the exchange's.",
    "records": "One row per record of every decoded batch (only with `--records`). `ts` is "
               "the first byte of the message carrying the record.",
    "issues": "Every issue: those of an exchange (with its `exchange_id`) and standalone "
              "ones, the consumer-group analysis' among them (a group budget reached, an "
              "assignment that does not decode; written with the group tables). `ts` is the "
              "issue's time (the exchange's, or the time it was reported, when the issue has "
              "none).",
    "connections": "One row per TCP connection, written when it ends (Kafka, Kafka 0.7, TLS "
                   "on a broker port, and other TCP connections). `ts` is its first packet.",
    "topic_ids": "Topic ids seen with their names (Metadata, CreateTopics ... responses), "
                 "once per pair and run. `ts` is when the pair was first seen. A capture split "
                 "into shards yields a pair once per shard: deduplicate with "
                 "`min(ts) GROUP BY topic_id, topic_name`.",
    "groups": "One row per consumer group (classic, KIP-848, share) seen in group API "
              "exchanges, from the whole capture (docs/groups.md). `ts` is its first group "
              "exchange. Written by `kafkasniff export` (not by `spark decode` nor `live "
              "--export`).",
    "members": "One row per member of a group. `ts` is its first exchange.",
    "rebalances": "One row per rebalance, with its trigger and the assignment after it. `ts` "
                  "is its start.",
    "commits": "One row per partition of every OffsetCommit / TxnOffsetCommit request, with "
               "its answer, latency and the lag at that time. `ts` is the request's first "
               "byte.",
}


def _build(table: str) -> pa.Schema:
    fields = []
    for name, typ, desc in _SPECS[table]:
        nullable = not typ.endswith("!")
        fields.append(pa.field(name, _TYPES[typ.rstrip("!")], nullable=nullable,
                               metadata={"description": desc}))
    return pa.schema(fields, metadata={META_VERSION_KEY: str(SCHEMA_VERSION),
                                       META_TABLE_KEY: table})


SCHEMAS: dict[str, pa.Schema] = {t: _build(t) for t in ALL_TABLES}
"""Table name -> Arrow schema (field metadata ``description``; schema metadata
``kafkasniff.schema_version`` and ``kafkasniff.table``)."""

# ---------------------------------------------------------------------------------- helpers

_SPARK_TYPES = {
    pa.string(): "STRING", pa.binary(): "BINARY", pa.bool_(): "BOOLEAN", pa.float64(): "DOUBLE",
    pa.int8(): "TINYINT", pa.int16(): "SMALLINT", pa.int32(): "INT", pa.int64(): "BIGINT",
    TIMESTAMP: "TIMESTAMP",
}


def _spark_type(t: pa.DataType) -> str:
    if pa.types.is_list(t):
        return f"ARRAY<{_spark_type(t.value_type)}>"
    if pa.types.is_struct(t):
        return "STRUCT<" + ", ".join(f"`{f.name}`: {_spark_type(f.type)}" for f in t) + ">"
    return _SPARK_TYPES[t]


def spark_ddl(table: str) -> str:
    """The table's schema as a Spark DDL string (``"capture STRING, ts TIMESTAMP, ..."``), for
    ``spark.read.schema(spark_ddl("exchanges")).parquet(path)``: with it the Hive partition
    columns ``date``/``hour`` keep their types instead of being inferred from the directory
    names (Spark would make ``date`` a DATE and ``hour`` an INT)."""
    return ", ".join(f"`{f.name}` {_spark_type(f.type)}" for f in SCHEMAS[table])


def _type_name(t: pa.DataType) -> str:
    if t == TIMESTAMP:
        return "timestamp[us, UTC]"
    if pa.types.is_list(t):
        return f"list<{_type_name(t.value_type)}>"
    if pa.types.is_struct(t):
        return "struct<" + ", ".join(f"{f.name}: {_type_name(f.type)}" for f in t) + ">"
    return str(t)


def description(field: pa.Field) -> str:
    """The description of a field (from its metadata)."""
    return (field.metadata or {}).get(b"description", b"").decode()


def schema_markdown() -> str:
    """The generated part of ``docs/parquet-schema.md``: one section per table with every
    column's name, Arrow type, Spark type, nullability and description."""
    out = [f"Schema version: **{SCHEMA_VERSION}** (Parquet key-value metadata "
           f"`{META_VERSION_KEY}`; the table name is in `{META_TABLE_KEY}`).", ""]
    for table in ALL_TABLES:
        out += [f"### `{table}`", "", TABLE_DESCRIPTIONS[table], "",
                "| column | type | Spark | null | meaning |",
                "| --- | --- | --- | --- | --- |"]
        for f in SCHEMAS[table]:
            desc = description(f).replace("|", "\\|")
            spark = _spark_type(f.type).replace("`", "")
            out.append(f"| `{f.name}` | `{_type_name(f.type)}` | `{spark}` | "
                       f"{'yes' if f.nullable else 'no'} | {desc} |")
        out.append("")
    return "\n".join(out)


DOC_BEGIN = ("<!-- BEGIN GENERATED by kafkasniff.export.schema (python -m "
             "kafkasniff.export.schema docs/parquet-schema.md): do not edit by hand -->")
DOC_END = "<!-- END GENERATED -->"


def with_generated_doc(text: str) -> str:
    """``text`` (a Markdown page holding :data:`DOC_BEGIN` ... :data:`DOC_END`) with the
    block between the markers replaced by :func:`schema_markdown`."""
    start = text.index(DOC_BEGIN) + len(DOC_BEGIN)
    end = text.index(DOC_END, start)
    return text[:start] + "\n\n" + schema_markdown() + "\n" + text[end:]


if __name__ == "__main__":  # regenerate the table section of docs/parquet-schema.md
    import sys
    from pathlib import Path

    for arg in sys.argv[1:] or ["docs/parquet-schema.md"]:
        p = Path(arg)
        p.write_text(with_generated_doc(p.read_text()))
        print(f"updated {p}")
