"""Decoding one frame's content: the one path every consumer of frame bytes takes.

A :class:`ContentDecoder` turns the payload of one Kafka frame (the bytes after its size
prefix) into a :class:`DecodedFrame`: the header, the body decoded with the compiled decoder
(lenient fallback), and then what the body carries: secrets redacted unless ``show_secrets``
(:mod:`.sasl`), the consumer protocol inside group APIs (:mod:`.embedded`), the record data of
``records`` fields (:mod:`.records`). The pipeline's pairing stage (:mod:`kafkasniff.pairing`)
and the TUI's detail view (:mod:`kafkasniff.tui.detail`) both decode through it, so the detail
view shows exactly what ``read --json`` shows.

It also summarises an exchange (errors, throttle time, topics: :mod:`.summary`) and guesses
the layout of a response whose request was not captured (:meth:`ContentDecoder.guess_response`).

Sans-IO and stateless per frame; the only state it keeps across frames is the topic-id
registry (learnt from responses, shared by every connection) and the consumer protocol type
of each group (SyncGroup < v5 does not repeat it).
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkasniff.content.budgets import BudgetMeter, Budgets
from kafkasniff.content.embedded import GROUP_APIS, EmbeddedDecoder, embedded_topics
from kafkasniff.content.records import RecordsLocator, decode_located, summarize
from kafkasniff.content.sasl import REDACTED_APIS, Redacted, is_secret_api, parse_token, redact_body
from kafkasniff.content.summary import Summarizer, TopicRegistry
from kafkasniff.errors import DecodeError
from kafkasniff.frozen import fast_init
from kafkasniff.issues import IssueKind
from kafkasniff.model import LocatedRecords, RecordsSummary
from kafkasniff.protocol import legacy07
from kafkasniff.protocol.compression import DEFAULT_MAX_BYTES
from kafkasniff.protocol.decoder import STRICT_ERRORS, BodyDecoder
from kafkasniff.protocol.headers import (
    decode_request_header,
    decode_response_header,
    peek_correlation_id,
    peek_request_ids,
    response_header_version,
)
from kafkasniff.protocol.lenient import BodyIssue
from kafkasniff.protocol.plans import StructPlan
from kafkasniff.protocol.schema import Definitions

__all__ = ["ContentDecoder", "DecodedFrame", "ExchangeSummary", "OrphanGuess"]

#: orphan responses of at most this many bytes have the layouts that fit them remembered
#: (:meth:`ContentDecoder.guess_response`)
ORPHAN_MEMO_BYTES = 1024
#: payloads remembered at most (the memo starts again when full): about 1 MB
ORPHAN_MEMO_ENTRIES = 1024


@dataclass(slots=True)
class DecodedFrame:
    """What one frame holds, decoded.

    Attributes:
        header: the header fields as :attr:`kafkasniff.model.Message.header` holds them
            (requests: ``api_key``, ``api_version``, ``correlation_id``, ``client_id``;
            responses: ``correlation_id``; ``_unknown_tagged_fields`` when present; Kafka 0.7:
            ``request_type`` / ``error_code``; raw SASL tokens: nothing).
        body: the decoded body (partial when ``complete`` is False), ``None`` when it could
            not be decoded; an undecodable body of a secret-bearing API is
            ``{"_raw_body": Redacted(...)}`` instead of bytes unless ``show_secrets``.
        raw_body: the undecoded body bytes when ``body`` is ``None``, else ``None``.
        complete: the whole body layout was decoded.
        body_offset: offset of the body in the payload (the header's length).
        issues: departures in the header and body, in order; offsets are payload offsets.
        api_key / api_version: of the request (for a response: what it was decoded as; -1
            when unknown).
        layout_version: the version whose layout decoded the body (``None`` if none did).
        assumed_version: set when the wire version was unknown and a nearest one assumed.
        plan: the body's plan (``None`` when not decoded with a Kafka layout).
        records: the record data condensed (``None`` when the body has none).
        located: every records field with its topic and partition, decoded.
        header_error: why the header could not be decoded (then ``body`` is ``None``).
    """

    header: dict
    body: dict | None
    raw_body: bytes | None
    complete: bool
    body_offset: int
    issues: list[BodyIssue]
    api_key: int = -1
    api_version: int = -1
    layout_version: int | None = None
    assumed_version: int | None = None
    plan: StructPlan | None = None
    records: RecordsSummary | None = None
    located: tuple[LocatedRecords, ...] = ()
    header_error: DecodeError | None = None

    @property
    def layout_body(self) -> dict | None:
        """The body when a Kafka layout decoded it (``plan`` set), else ``None``."""
        return self.body if self.plan is not None else None


@fast_init
@dataclass(frozen=True, slots=True)
class ExchangeSummary:
    """What an operator asks of an exchange first (see :meth:`ContentDecoder.summarize`).

    Attributes:
        errors: distinct error names of the response, in order of first appearance.
        throttle_time_ms: the response's throttle time, ``None`` if its layout has none.
        topics: topic names, ids resolved through responses seen earlier (what ``read``
            shows); wire_topics / topic_ids: names and ids as carried by the exchange itself.
    """

    errors: tuple[str, ...] = ()
    throttle_time_ms: int | None = None
    topics: tuple[str, ...] = ()
    wire_topics: tuple[str, ...] = ()
    topic_ids: tuple[str, ...] = ()


@fast_init
@dataclass(frozen=True, slots=True)
class OrphanGuess:
    """The layout guess for a response without its request (see
    :meth:`ContentDecoder.guess_response`).

    Attributes:
        frame: the response decoded as the only API whose response layout fits the whole
            payload, or its raw form (``header`` with the correlation_id, ``raw_body`` after
            it) when no single API fits.
        versions: the versions of that API whose layouts fit (ascending; ``frame`` is decoded
            as the newest), ``()`` when not inferred.
        fitting_apis: api_keys whose response layouts fit, in api_key order.
    """

    frame: DecodedFrame
    versions: tuple[int, ...] = ()
    fitting_apis: tuple[int, ...] = ()

    @property
    def inferred(self) -> bool:
        """Exactly one API fits, and ``frame`` is decoded with its layout."""
        return bool(self.versions)


class ContentDecoder:
    """Decodes frame contents for one analysis (see the module docstring).

    Args:
        defs: the definitions to decode with.
        with_records: decode every record of record batches, not only batch headers.
        max_uncompressed_bytes: bound on one batch's decompressed size (bytes).
        show_secrets: keep SASL tokens, SCRAM credentials, delegation-token HMACs and
            sensitive configs instead of redacting them.
        registry: the topic-id registry to learn into and resolve from (default: a new one).
        budgets: the analysis' :class:`~kafkasniff.content.budgets.Budgets` (default: the
            documented defaults); what was spent is in :attr:`meter`.
    """

    def __init__(self, defs: Definitions, *, with_records: bool = False,
                 max_uncompressed_bytes: int = DEFAULT_MAX_BYTES, show_secrets: bool = False,
                 registry: TopicRegistry | None = None, budgets: Budgets | None = None
                 ) -> None:
        self.defs = defs
        self.decoder = BodyDecoder(defs)
        self.summarizer = Summarizer(defs, registry)
        self.locator = RecordsLocator()
        self.with_records = with_records
        self.max_uncompressed_bytes = max_uncompressed_bytes
        self.show_secrets = show_secrets
        self.meter = BudgetMeter(budgets)
        self.embedded = EmbeddedDecoder(defs, meter=self.meter)
        self._candidates: list = []
        # orphan payload bytes after the correlation_id -> the layouts that fit them
        self._orphan_fits: dict[bytes, dict] = {}

    @property
    def registry(self) -> TopicRegistry:
        """The topic-id registry (topic id text -> name) this decoder learns into."""
        return self.summarizer.registry

    # ------------------------------------------------------------------ frames
    def decode_request(self, payload: bytes, *, mechanism: str | None = None) -> DecodedFrame:
        """Decode a request frame payload.

        ``mechanism``: the connection's SASL mechanism (to parse SaslAuthenticate tokens).
        A header that cannot be decoded (too short, a client_id running past the frame, bad
        tagged fields) gives ``header_error``, the api_key, api_version and correlation_id of
        its first 8 bytes when present, and the bytes after them raw (redacted for a
        secret-bearing API).
        """
        try:
            hdr = decode_request_header(self.defs, payload)
        except DecodeError as exc:
            if len(payload) < 8:
                out = self._raw({}, payload, len(payload), None)
            else:
                api_key, api_version, corr = peek_request_ids(payload)
                out = self._raw({"api_key": api_key, "api_version": api_version,
                                 "correlation_id": corr, "client_id": None}, payload, 8, api_key)
                out.api_key, out.api_version = api_key, api_version
            out.header_error = exc
            return out
        header = {"api_key": hdr.api_key, "api_version": hdr.api_version,
                  "correlation_id": hdr.correlation_id, "client_id": hdr.client_id}
        if hdr.tagged_fields:
            header["_unknown_tagged_fields"] = hdr.tagged_fields
        out = self._body(header, hdr.api_key, hdr.api_version, False, payload, hdr.size,
                         None, mechanism)
        if hdr.tagged_fields:
            _check_header_tags(hdr.tagged_fields, out.issues)
        if hdr.client_id_offset >= 0:
            out.issues.insert(0, BodyIssue(
                IssueKind.SPEC_DEPARTURE, "client_id is not valid UTF-8 (shown with \\x "
                "escapes)", "header.client_id", hdr.client_id_offset))
        return out

    def decode_response(self, payload: bytes, api_key: int, api_version: int, *,
                        request_body: dict | None = None,
                        mechanism: str | None = None) -> DecodedFrame:
        """Decode a response frame payload as the answer to ``api_key`` at ``api_version``.

        ``request_body``: the decoded request (group APIs read its group id / protocol type).
        A header that cannot be decoded gives ``header_error`` and the raw body after the
        correlation_id (redacted for secret-bearing APIs).
        """
        hv = response_header_version(self.defs, api_key, api_version)
        try:
            corr, body_offset, tagged = decode_response_header(payload, hv)
        except DecodeError as exc:
            out = self._raw({"correlation_id": peek_correlation_id(payload)}, payload, 4,
                            api_key)
            out.header_error = exc
            out.api_key, out.api_version = api_key, api_version
            return out
        header = {"correlation_id": corr}
        if tagged:
            header["_unknown_tagged_fields"] = tagged
        out = self._body(header, api_key, api_version, True, payload, body_offset,
                         request_body, mechanism)
        if tagged:
            _check_header_tags(tagged, out.issues)
        return out

    def decode_sasl_token(self, payload: bytes, from_client: bool,
                          mechanism: str | None) -> DecodedFrame:
        """A raw SASL token frame (KIP-43, after SaslHandshake v0): the token described by
        :func:`~.sasl.parse_token` (secrets redacted unless ``show_secrets``)."""
        desc = parse_token(mechanism, payload, from_client, self.show_secrets)
        return DecodedFrame({}, desc, None, True, 0, [])

    def decode_request_07(self, payload: bytes) -> DecodedFrame:
        """A Kafka 0.7 request frame (:func:`kafkasniff.protocol.legacy07.decode_request_07`);
        ``api_key`` is the request type."""
        rtype, body, issues = legacy07.decode_request_07(
            payload, max_uncompressed_bytes=self.max_uncompressed_bytes)
        return self._frame_07({"request_type": rtype}, body, issues, payload, rtype)

    def decode_response_07(self, payload: bytes, request_type: int,
                           request_body: dict | None) -> DecodedFrame:
        """A Kafka 0.7 response frame to a request of ``request_type``
        (:func:`kafkasniff.protocol.legacy07.decode_response_07`)."""
        body, issues = legacy07.decode_response_07(
            request_type, payload, request_body,
            max_uncompressed_bytes=self.max_uncompressed_bytes)
        if "error_code" not in body:        # shorter than its error_code
            return self._frame_07({}, None, issues, payload, request_type)
        return self._frame_07({"error_code": body["error_code"]}, body, issues, payload,
                              request_type)

    # ------------------------------------------------------------------ orphans
    def guess_response(self, payload: bytes) -> OrphanGuess:
        """The layout of a response whose request was not captured: every distinct response
        layout of every API is tried on the whole payload (strict decoders only); when the
        layouts that fit all belong to one API, the payload is decoded as that API's newest
        fitting version (secrets redacted, record data decoded). Otherwise it stays raw.

        Which layouts fit depends only on the bytes after the correlation_id: for payloads
        of at most :data:`ORPHAN_MEMO_BYTES`, the fitting layouts are remembered by those
        bytes (at most :data:`ORPHAN_MEMO_ENTRIES` of them), so that the same answer to many
        clients (each an orphan on a connection the capture joined, or one evicted from a
        full connection table) is tried against every layout once, not each time (1.4 ms
        an orphan)."""
        key = bytes(payload[4:]) if len(payload) <= ORPHAN_MEMO_BYTES else None
        memo = self._orphan_fits
        fits = memo.get(key) if key is not None else None
        if fits is None:
            fits = self._fitting_layouts(payload)
            if key is not None:
                if len(memo) >= ORPHAN_MEMO_ENTRIES:
                    memo.clear()
                memo[key] = fits
        if len(fits) != 1:
            return OrphanGuess(self.raw_response(payload), (), tuple(fits))
        api_key, candidates = next(iter(fits.items()))
        version, body_offset, fn = max(candidates, key=lambda c: c[0])
        value, _ = fn(payload, body_offset)
        plan = self.defs.plan(self.defs.apis[api_key].response, version)
        issues, records, located = self._postprocess(api_key, plan, True, value, None, None)
        frame = DecodedFrame({"correlation_id": peek_correlation_id(payload)}, value, None, True,
                             body_offset, issues,
                             api_key, version, version, None,
                             plan, records, located)
        return OrphanGuess(frame, tuple(sorted(c[0] for c in candidates)), (api_key,))

    def _fitting_layouts(self, payload: bytes) -> dict[int, list[tuple[int, int, object]]]:
        """api_key -> ``[(version, body offset, strict decoder)]`` of every response layout
        that decodes the whole of ``payload``."""
        try:
            _, v1_offset, _ = decode_response_header(payload, 1)
        except DecodeError:
            v1_offset = -1
        size = len(payload)
        fits: dict[int, list[tuple[int, int, object]]] = {}
        for hv, fn, aliases in self._orphan_candidates():
            body_offset = 4 if hv == 0 else v1_offset
            if body_offset < 0:
                continue
            try:
                _, end = fn(payload, body_offset)
            except STRICT_ERRORS:
                continue
            if end != size:
                continue
            for api_key, version in aliases:
                fits.setdefault(api_key, []).append((version, body_offset, fn))
        return fits

    @staticmethod
    def raw_response(payload: bytes) -> DecodedFrame:
        """A response kept raw: its correlation_id, and the bytes after it undecoded."""
        return DecodedFrame({"correlation_id": peek_correlation_id(payload)}, None,
                            bytes(payload[4:]), False, 4, [])

    def _orphan_candidates(self) -> list[tuple[int, object, list[tuple[int, int]]]]:
        """Distinct response layouts an orphan may have: ``(header_version, strict decoder,
        [(api_key, version), ...])``; versions with identical layouts share one entry."""
        if not self._candidates:
            by_layout: dict[tuple[int, str], tuple[int, object, list]] = {}
            for key, info in sorted(self.defs.apis.items()):
                for v in self.defs.message_versions(info.response):
                    hv = response_header_version(self.defs, key, v)
                    fn = self.decoder.strict_decoder(key, v, True)
                    entry = by_layout.setdefault((hv, fn._layout), (hv, fn, []))
                    entry[2].append((key, v))
            self._candidates = list(by_layout.values())
        return self._candidates

    # ------------------------------------------------------------------ exchanges
    def summarize(self, api_key: int, request: DecodedFrame | None,
                  response: DecodedFrame | None) -> ExchangeSummary:
        """Errors, throttle time and topics of an exchange from its decoded frames (frames
        without a plan count as absent); teaches the registry the topic ids it carries."""
        if api_key not in self.defs.apis:
            return ExchangeSummary()
        qplan = request.plan if request is not None and request.body is not None else None
        rplan = response.plan if response is not None and response.body is not None else None
        qbody = request.body if qplan is not None else None
        rbody = response.body if rplan is not None else None
        s = self.summarizer.summarize(qplan, qbody, rplan, rbody)
        topics, wire_topics = s.topics, s.wire_topics
        if api_key in GROUP_APIS:
            more = tuple(embedded_topics(qbody) + embedded_topics(rbody))
            if more:
                topics = tuple(dict.fromkeys(topics + more))
                wire_topics = tuple(dict.fromkeys(wire_topics + more))
        return ExchangeSummary(s.errors, s.throttle_time_ms, topics, wire_topics, s.topic_ids)

    # ------------------------------------------------------------------ internals
    def _raw(self, header: dict, payload: bytes, body_offset: int,
             api_key: int | None) -> DecodedFrame:
        """A frame whose body stays undecoded: raw bytes, or a redaction marker for a
        secret-bearing API."""
        raw = bytes(payload[body_offset:])
        body = None
        if api_key is not None and not self.show_secrets and is_secret_api(api_key):
            body, raw = {"_raw_body": Redacted("undecoded body of a secret-bearing API",
                                               len(raw))}, None
        return DecodedFrame(header, body, raw, False, body_offset, [])

    def _body(self, header: dict, api_key: int, api_version: int, is_response: bool,
              payload: bytes, body_offset: int, request_body: dict | None,
              mechanism: str | None) -> DecodedFrame:
        try:
            out = self._decode_body(header, api_key, api_version, is_response, payload,
                                    body_offset, request_body, mechanism)
            limit = self.meter.budgets.frame_issues
            if 0 < limit < len(out.issues):
                more = sum(i.count for i in out.issues[limit:])
                self.meter.skipped["frame_issues"] += more
                out.issues[limit:] = [BodyIssue(
                    IssueKind.BUDGET_EXHAUSTED, f"budget frame_issues ({limit}) spent: "
                    f"{more} more issues of this frame not listed; raise it "
                    f"with --budget frame_issues=N", "", out.issues[limit].offset, more)]
            return out
        except Exception as exc:  # noqa: BLE001 - a bug must not lose the frame's exchange
            out = self._raw(header, payload, body_offset, api_key)
            out.api_key, out.api_version = api_key, api_version
            out.issues = [BodyIssue(IssueKind.INTERNAL_ERROR,
                                    f"internal error while decoding this body "
                                    f"({type(exc).__name__}: {exc}); body kept raw, please "
                                    f"report it", "", body_offset)]
            return out

    def _decode_body(self, header: dict, api_key: int, api_version: int, is_response: bool,
                     payload: bytes, body_offset: int, request_body: dict | None,
                     mechanism: str | None) -> DecodedFrame:
        result = self.decoder.decode(api_key, api_version, is_response, payload, body_offset)
        if result.value is None:
            out = self._raw(header, payload, body_offset, api_key)
            out.issues = result.issues
        else:
            info = self.defs.apis[api_key]
            plan = self.defs.plan(info.response if is_response else info.request,
                                  result.layout_version)
            extra, records, located = self._postprocess(
                api_key, plan, is_response, result.value, request_body, mechanism)
            result.issues.extend(extra)
            # positional (the fields' order): a call with keywords took twice as long
            return DecodedFrame(header, result.value, None, result.complete, body_offset,
                                result.issues, api_key, api_version, result.layout_version,
                                result.assumed_version, plan, records, located)
        out.api_key, out.api_version = api_key, api_version
        return out

    def _postprocess(self, api_key: int, plan: StructPlan, is_response: bool, body: dict,
                     request_body: dict | None, mechanism: str | None
                     ) -> tuple[list[BodyIssue], RecordsSummary | None, tuple]:
        """After a body decode with ``plan``: redact secrets unless ``show_secrets``, decode
        the consumer protocol in group APIs and the record data in records fields. Returns
        ``(issues, records summary, located records)``."""
        if api_key in REDACTED_APIS:
            redact_body(api_key, is_response, body, mechanism, self.show_secrets)
        issues = self.embedded.apply(api_key, is_response, body, request_body) \
            if api_key in GROUP_APIS else []
        if not self.locator.has_records(plan):
            return issues, None, ()
        located = self.locator.find(plan, body, self.registry.names)
        if not located:
            return issues, None, ()
        issues += decode_located(located, with_records=self.with_records,
                                 max_uncompressed_bytes=self.max_uncompressed_bytes,
                                 defs=self.defs, partial_is_issue=not is_response,
                                 meter=self.meter)
        return issues, summarize(located), tuple(located)

    @staticmethod
    def _frame_07(header: dict, body: dict | None, issues: list, payload: bytes,
                  request_type: int) -> DecodedFrame:
        complete = not any(i.kind == IssueKind.BODY_DECODE_ERROR for i in issues)
        raw = bytes(payload[2:]) if body is None else None
        return DecodedFrame(header, body, raw, complete, 2, list(issues), request_type, -1)


def _check_header_tags(tagged: list[dict], issues: list) -> None:
    """KIP-482: tagged fields appear in ascending tag order, each tag once. One
    spec_departure for a header that breaks it (not one per field)."""
    bad = [(a["tag"], b["tag"]) for a, b in zip(tagged, tagged[1:]) if b["tag"] <= a["tag"]]
    if bad:
        first, second = bad[0]
        issues.insert(0, BodyIssue(
            IssueKind.SPEC_DEPARTURE, f"header tagged fields out of order: tag {second} after "
            f"tag {first} ({len(bad)} of {len(tagged)} fields; tags must ascend, KIP-482)",
            "header._tagged_fields", -1))
