"""Finding and decoding the record data of an exchange.

``records`` fields appear in Produce requests, Fetch and ShareFetch responses and
FetchSnapshot responses, nested under a topic (name or id) and a partition. A
:class:`RecordsLocator` walks only the paths of a plan that lead to such fields (an interest
tree, as :mod:`.summary` does for errors and topics) and returns them with their topic,
partition and field path. :func:`decode_located` decodes each with
:func:`kafkasniff.protocol.records.decode_records`, attaches the result to the
:class:`RawRecords` object, and turns record problems into issues; :func:`summarize`
condenses them into what a line of ``read`` shows.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkasniff.issues import IssueKind
from kafkasniff.protocol.lenient import BodyIssue
from kafkasniff.protocol.primitives import RawRecords
from kafkasniff.protocol.records import decode_records
from kafkasniff.protocol.schema import StructPlan

_PARTITION_KEYS = ("partition_index", "index", "partition")
_REC, _ARR, _STRUCT = 1, 2, 3


@dataclass(frozen=True, slots=True)
class LocatedRecords:
    """One ``records`` field with where it is.

    Attributes:
        topic: topic name as on the wire (``None`` when only an id is on the wire).
        topic_id: topic id text (Kafka uuid form) when on the wire, else ``None``.
        partition: partition index, ``None`` if the layout has none.
        field_path: dotted path of the field, e.g. ``topic_data[0].partition_data[1].records``.
        records: the field (``RawRecords``; ``.decoded`` is set by :func:`decode_located`).
        resolved_topic: the name of ``topic_id`` learnt from responses seen earlier on any
            connection (for display only: exports keep to what is on the wire), else None.
    """

    topic: str | None
    topic_id: str | None
    partition: int | None
    field_path: str
    records: RawRecords
    resolved_topic: str | None = None

    @property
    def display_topic(self) -> str:
        """The best name to show: on the wire, else resolved, else the id, else ``?``."""
        return self.topic or self.resolved_topic or self.topic_id or "?"


@dataclass(frozen=True, slots=True)
class RecordsSummary:
    """Record data of one message (request or response), condensed.

    Attributes:
        batches / records: counts (record batches or top-level messages; records in them).
        codecs: distinct codecs, in order of appearance (``none``, ``gzip`` ...).
        magics: distinct message format versions (0, 1, 2).
        records_bytes: bytes of the records fields on the wire (batch headers included).
        compressed_bytes: bytes of the batches' record sections as sent (compressed or not).
        uncompressed_bytes: the same sections after decompression (``None`` if some batch
            could not be decompressed, or was cut); ``compressed_bytes / uncompressed_bytes``
            is the compression ratio.
        first_offset / last_offset: smallest base offset and largest last offset.
        min_timestamp_ms / max_timestamp_ms: over the batches (``None`` for magic 0 only).
        timestamp_types: distinct ``create_time`` / ``log_append_time``.
        producer_ids: distinct producer ids other than -1.
        transactional / control: some batch is transactional / a control batch.
        crc_errors: batches whose CRC did not match.
        partial: some records data ended inside a batch (normal at the end of a Fetch).
    """

    batches: int
    records: int
    codecs: tuple[str, ...]
    magics: tuple[int, ...]
    records_bytes: int
    compressed_bytes: int
    uncompressed_bytes: int | None
    first_offset: int | None
    last_offset: int | None
    min_timestamp_ms: int | None
    max_timestamp_ms: int | None
    timestamp_types: tuple[str, ...]
    producer_ids: tuple[int, ...]
    transactional: bool
    control: bool
    crc_errors: int
    partial: bool


class RecordsLocator:
    """Finds the ``records`` fields of decoded bodies, by plan (cached interest trees)."""

    def __init__(self) -> None:
        self._trees: dict[int, tuple] = {}

    def tree(self, plan: StructPlan) -> tuple:
        """``(topic_key, topic_id_key, partition_key, children)`` for a struct plan; children
        are ``(key, kind, subtree)`` leading to records fields; ``()`` when none."""
        cached = self._trees.get(id(plan))
        if cached is not None:
            return cached
        self._trees[id(plan)] = ()
        children = []
        topic_key = topic_id_key = part_key = None
        for f in list(plan.fields) + list(plan.tagged.values()):
            if f.kind == "records":
                children.append((f.key, _REC, None))
            elif f.kind in ("array", "struct") and f.struct is not None:
                sub = self.tree(f.struct)
                if sub:
                    children.append((f.key, _ARR if f.kind == "array" else _STRUCT, sub))
            elif f.kind == "string" and f.entity_type == "topicName":
                topic_key = f.key
            elif f.kind == "uuid" and f.key == "topic_id":
                topic_id_key = f.key
            elif f.kind == "int32" and f.key in _PARTITION_KEYS:
                part_key = f.key
        tree = (topic_key, topic_id_key, part_key, tuple(children)) if children else ()
        self._trees[id(plan)] = tree
        return tree

    def find(self, plan: StructPlan, body: dict | None) -> list[LocatedRecords]:
        """Every records field of ``body`` (decoded with ``plan``), in wire order."""
        out: list[LocatedRecords] = []
        tree = self.tree(plan)
        if tree and body:
            self._walk(tree, body, "", None, None, None, out)
        return out

    def _walk(self, tree, d, path, topic, topic_id, part, out) -> None:
        topic_key, topic_id_key, part_key, children = tree
        if topic_key is not None and d.get(topic_key) is not None:
            topic = d[topic_key]
        if topic_id_key is not None and d.get(topic_id_key) is not None:
            topic_id = d[topic_id_key]
        if part_key is not None and d.get(part_key) is not None:
            part = d[part_key]
        for key, kind, sub in children:
            v = d.get(key)
            if v is None:
                continue
            p = f"{path}.{key}" if path else key
            if kind == _REC:
                if type(v) is RawRecords:
                    out.append(LocatedRecords(topic, topic_id, part, p, v))
            elif kind == _ARR:
                for i, item in enumerate(v):
                    self._walk(sub, item, f"{p}[{i}]", topic, topic_id, part, out)
            else:
                self._walk(sub, v, p, topic, topic_id, part, out)


_ISSUE_KINDS = {
    "crc_mismatch": IssueKind.CRC_MISMATCH,
    "decompression_error": IssueKind.DECOMPRESSION_ERROR,
    "decompression_limit": IssueKind.DECOMPRESSION_LIMIT,
    "truncated_batch": IssueKind.TRUNCATED_BATCH,
    "record_decode_error": IssueKind.RECORD_DECODE_ERROR,
    "unknown_magic": IssueKind.UNKNOWN_MAGIC,
    "unknown_codec": IssueKind.UNKNOWN_CODEC,
}


def decode_located(located: list[LocatedRecords], *, with_records: bool, max_uncompressed_bytes: int,
                   defs, partial_is_issue: bool) -> list[BodyIssue]:
    """Decode every located records field in place; returns the issues (offsets are frame
    offsets). ``partial_is_issue``: a batch cut at the end of the data is a problem here
    (a Produce request) rather than normal (a Fetch response)."""
    issues: list[BodyIssue] = []
    for loc in located:
        raw = loc.records
        if raw.decoded is None:
            raw.decoded = decode_records(raw.data, with_records=with_records,
                                         max_uncompressed_bytes=max_uncompressed_bytes, defs=defs)
        rs = raw.decoded
        base = raw.offset if raw.offset >= 0 else 0
        for ri in rs.issues:
            issues.append(BodyIssue(_ISSUE_KINDS.get(ri.kind, IssueKind.RECORD_DECODE_ERROR),
                                    ri.message, loc.field_path, base + ri.offset))
        if partial_is_issue and rs.partial_tail_bytes:
            issues.append(BodyIssue(IssueKind.TRUNCATED_BATCH,
                                    f"the records data ends {rs.partial_tail_bytes} bytes into "
                                    f"an incomplete batch", loc.field_path,
                                    base + rs.size_bytes - rs.partial_tail_bytes))
    return issues


def summarize(located: list[LocatedRecords]) -> RecordsSummary | None:
    """Condense decoded records fields (``None`` when there are none)."""
    if not located:
        return None
    batches = records = crc = compressed = size = 0
    uncompressed: int | None = 0
    codecs: dict[str, None] = {}
    magics: dict[int, None] = {}
    ttypes: dict[str, None] = {}
    pids: dict[int, None] = {}
    first = last = tmin = tmax = None
    transactional = control = partial = False
    for loc in located:
        rs = loc.records.decoded
        size += loc.records.size_bytes
        if rs is None:
            uncompressed = None
            continue
        if rs.partial_tail_bytes:
            partial = True
        for b in rs.batches:
            batches += 1
            records += b.record_count
            codecs[b.codec] = None
            magics[b.magic] = None
            if b.timestamp_type:
                ttypes[b.timestamp_type] = None
            if b.producer_id is not None and b.producer_id >= 0:
                pids[b.producer_id] = None
            if b.crc_ok is False:
                crc += 1
            transactional |= b.transactional
            control |= b.control
            partial |= b.partial
            if b.partial:
                continue  # a cut last batch (normal in Fetch) has no sizes to add
            compressed += b.compressed_bytes
            if b.uncompressed_bytes is None or uncompressed is None:
                uncompressed = None
            else:
                uncompressed += b.uncompressed_bytes
            first = b.base_offset if first is None else min(first, b.base_offset)
            last = b.last_offset if last is None else max(last, b.last_offset)
            for ts in (b.base_timestamp_ms, b.max_timestamp_ms):
                if ts is not None and ts >= 0:
                    tmin = ts if tmin is None else min(tmin, ts)
                    tmax = ts if tmax is None else max(tmax, ts)
    return RecordsSummary(batches, records, tuple(codecs), tuple(magics), size, compressed,
                          uncompressed,
                          first, last, tmin, tmax, tuple(ttypes), tuple(pids), transactional,
                          control, crc, partial)
