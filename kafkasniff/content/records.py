"""Finding and decoding the record data of an exchange.

``records`` fields appear in Produce requests, Fetch and ShareFetch responses and
FetchSnapshot responses, nested under a topic (name or id) and a partition. A
:class:`RecordsLocator` finds them with the project's plan walker
(:mod:`kafkasniff.protocol.walk`) and returns them with their topic, partition and field
path (:class:`~kafkasniff.model.LocatedRecords`). :func:`decode_located` decodes each with
:func:`kafkasniff.protocol.records.decode_records`, attaches the result to the
:class:`RawRecords` object, and turns record problems into issues; :func:`summarize`
condenses them into what a line of ``read`` shows.
"""

from __future__ import annotations

from kafkasniff.issues import IssueKind
from kafkasniff.model import LocatedRecords, RecordsSummary
from kafkasniff.protocol.lenient import BodyIssue
from kafkasniff.protocol.plans import FieldPlan, StructPlan
from kafkasniff.protocol.primitives import RawRecords
from kafkasniff.protocol.records import decode_records
from kafkasniff.protocol.walk import PlanWalker

_RECORDS = "records"


def _records_field(f: FieldPlan) -> str | None:
    return _RECORDS if f.kind == "records" else None


class RecordsLocator:
    """Finds the ``records`` fields of decoded bodies, by plan, with their topic and partition
    (the project's plan walker, :mod:`kafkasniff.protocol.walk`)."""

    def __init__(self) -> None:
        self.walker = PlanWalker(_records_field)

    def has_records(self, plan: StructPlan) -> bool:
        """Whether bodies of ``plan`` can hold a records field."""
        return self.walker.tree(plan) is not None

    def find(self, plan: StructPlan, body: dict | None) -> list[LocatedRecords]:
        """Every records field of ``body`` (decoded with ``plan``), in wire order."""
        out: list[LocatedRecords] = []

        def visit(tag, key, v, struct, node, topic, topic_id, partition, path):
            if type(v) is RawRecords:
                out.append(LocatedRecords(topic, topic_id, partition,
                                          f"{path}.{key}" if path else key, v))

        if body:
            self.walker.walk(plan, body, visit, paths=True)
        return out


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
