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

from kafkasniff.content.budgets import BudgetMeter, Budgets
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

    def find(self, plan: StructPlan, body: dict | None,
             names: dict[str, str] | None = None) -> list[LocatedRecords]:
        """Every records field of ``body`` (decoded with ``plan``), in wire order.

        ``names``: topic id -> name learnt so far; a field whose struct carries only a topic
        id gets that id's name as ``resolved_topic``."""
        out: list[LocatedRecords] = []

        def visit(tag, key, v, struct, node, topic, topic_id, partition, path):
            if type(v) is RawRecords:
                out.append(LocatedRecords(
                    topic, topic_id, partition, f"{path}.{key}" if path else key, v,
                    names.get(topic_id) if names and topic is None else None))

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
    "spec_departure": IssueKind.SPEC_DEPARTURE,
}


def decode_located(located: list[LocatedRecords], *, with_records: bool,
                   max_uncompressed_bytes: int, defs, partial_is_issue: bool,
                   meter: BudgetMeter | None = None) -> list[BodyIssue]:
    """Decode every located records field (the fields of one frame) in place; returns the
    issues (offsets are frame offsets). ``partial_is_issue``: a batch cut at the end of the
    data is a problem here (a Produce request) rather than normal (a Fetch response).

    ``meter``: the capture's :class:`~kafkasniff.content.budgets.BudgetMeter`; the frame's
    and the capture's decompression and record budgets bound the decoding, and reaching one
    is a single ``budget_exhausted`` issue (per frame for a frame budget, per capture for a
    capture budget) naming what was skipped.
    """
    issues: list[BodyIssue] = []
    if meter is not None:
        budgets = meter.budgets
        frame_bytes = budgets.limit("frame_uncompressed_bytes")
        frame_records = budgets.limit("frame_records")
        skipped: dict[str, int] = {}    # a plain dict: one per frame with records
    for loc in located:
        raw = loc.records
        if raw.decoded is None:
            if meter is None:
                raw.decoded = decode_records(raw.data, with_records=with_records,
                                             max_uncompressed_bytes=max_uncompressed_bytes,
                                             defs=defs)
            else:
                meter.record_bytes += raw.size_bytes
                capture_bytes = meter.capture_uncompressed_left()
                capture_records = meter.capture_records_left()
                rs = raw.decoded = decode_records(
                    raw.data, with_records=with_records,
                    max_uncompressed_bytes=max_uncompressed_bytes, defs=defs,
                    max_total_uncompressed_bytes=min(frame_bytes, capture_bytes),
                    max_records=min(frame_records, capture_records))
                frame_bytes -= rs.decompressed_bytes
                meter.uncompressed_bytes += rs.decompressed_bytes
                n = 0
                if with_records:
                    n = sum(len(b.records) for b in rs.batches if b.records is not None)
                    frame_records -= n
                    meter.records += n
                if rs.not_decompressed:
                    name = ("capture_uncompressed_bytes" if capture_bytes <= frame_bytes
                            + rs.decompressed_bytes else "frame_uncompressed_bytes")
                    skipped[name] = skipped.get(name, 0) + rs.not_decompressed
                if rs.not_decoded:
                    name = ("capture_records" if capture_records <= frame_records + n
                            else "frame_records")
                    skipped[name] = skipped.get(name, 0) + rs.not_decoded
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
    if meter is not None and skipped:
        for name, count in skipped.items():
            meter.skipped[name] += count
            capture_wide = name.startswith("capture_")
            if capture_wide and not meter.first_report(name):
                continue
            issues.append(BodyIssue(IssueKind.BUDGET_EXHAUSTED,
                                    _budget_message(name, budgets, count, capture_wide),
                                    located[0].field_path, max(located[0].records.offset, 0)))
    return issues


def _budget_message(name: str, budgets: Budgets, count: int, capture_wide: bool) -> str:
    what = ("not decompressed (their sizes are unknown; counts, offsets and timestamps come "
            "from the batch headers)" if name.endswith("_bytes") else
            "summarised without their records")
    if name == "capture_uncompressed_bytes":
        limit = (f"{budgets.capture_uncompressed_bytes} bytes or "
                 f"{budgets.capture_uncompressed_ratio}x the record bytes seen")
    else:
        limit = f"{getattr(budgets, name)}"
    later = "; the batches after it in this capture are too (counted in the budgets " \
            "summary)" if capture_wide else ""
    return (f"budget {name} ({limit}) spent: {count} record batch(es) of this frame "
            f"{what}{later}; raise it with --budget {name}=N")


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
            # a count the records section cannot hold (a record_decode_error says so) adds
            # only what could fit: one crafted header must not add two billion records
            n = b.record_count
            if b.magic == 2 and b.uncompressed_bytes is not None \
                    and n > b.uncompressed_bytes // 7:
                n = b.uncompressed_bytes // 7
            records += max(n, 0)
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
