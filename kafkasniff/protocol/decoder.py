"""Body decoding facade: (api_key, api_version, direction, payload) -> decoded body + issues.

Every (api_key, version, request|response) is compiled once into a strict fast decoder
(:mod:`.codegen`, cached by :meth:`~.schema.Definitions.compiled`). When it rejects a frame, the lenient interpreter
(:mod:`.lenient`) decodes what it can and reports where and why. Unknown api keys keep the
body raw; a version newer than the definitions is decoded best-effort with the nearest known
version, marked ``assumed_version``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field

from kafkasniff.errors import DefinitionError
from kafkasniff.issues import IssueKind
from kafkasniff.protocol.codegen import StrictDecodeFailure
from kafkasniff.protocol.headers import API_VERSIONS
from kafkasniff.protocol.lenient import BodyIssue, decode_lenient
from kafkasniff.protocol.schema import ApiInfo, Definitions

#: what a compiled strict decoder raises on bytes that do not fit its layout (then the
#: lenient decoder explains where): catch these, never a bare Exception
STRICT_ERRORS = (IndexError, struct.error, UnicodeDecodeError, ValueError, StrictDecodeFailure,
                 RecursionError)
UNSUPPORTED_VERSION_CODE = 35


@dataclass(slots=True)
class BodyResult:
    """A decoded request or response body.

    Attributes:
        value: the decoded fields (see :mod:`.codegen` for value types), partial when
            ``complete`` is False, ``None`` when nothing could be decoded (unknown api_key).
        complete: the whole layout was decoded.
        issues: departures, in order (``BodyIssue``; offsets are frame-payload offsets).
        layout_version: the version whose layout was used (differs from the wire version for
            ``assumed_version`` decodes and ApiVersions UNSUPPORTED_VERSION answers).
        assumed_version: set when the wire version is unknown and a nearest one was assumed.
        end: offset after the last byte decoded.
    """

    value: dict | None
    complete: bool
    issues: list[BodyIssue] = field(default_factory=list)
    layout_version: int | None = None
    assumed_version: int | None = None
    end: int = 0


class BodyDecoder:
    """Decodes Kafka request and response bodies with compiled, cached decoders.

    Args:
        defs: the loaded :class:`Definitions`.
    """

    def __init__(self, defs: Definitions) -> None:
        self.defs = defs
        self._described: set[tuple[int, int]] = set()  # (api_key, version) with a layout
        # (api_key, version, is_response) -> strict decoder, for the versions the definitions
        # describe (no assumed version, no ApiVersions error answer to try first): a frame
        # of one goes straight to its decoder
        self._direct: dict[tuple[int, int, bool], Callable] = {}

    def strict_decoder(self, api_key: int, version: int, is_response: bool):
        """The compiled strict decoder ``fn(buf, pos) -> (dict, end)`` of the request or
        response of ``api_key`` at ``version`` (from the definitions' one decoder cache,
        :meth:`Definitions.compiled`).

        Raises DefinitionError if the definitions have no such api_key/version.
        """
        info = self.defs.apis.get(api_key)
        if info is None:
            raise DefinitionError(f"unknown api_key {api_key}")
        return self.defs.compiled(info.response if is_response else info.request, version)

    def nearest_version(self, api_key: int, version: int) -> int | None:
        """The closest version the definitions describe (``None`` for an unknown api_key)."""
        info = self.defs.apis.get(api_key)
        if info is None:
            return None
        if version > info.max_version:
            return info.max_version
        if version < info.min_version:
            return info.min_version
        name = info.request
        versions = self.defs.message_versions(name)
        return min(versions, key=lambda v: (abs(v - version), -v))

    def decode(self, api_key: int, version: int, is_response: bool, payload: bytes,
               offset: int) -> BodyResult:
        """Decode the body at ``payload[offset:]``.

        Never raises on bad data: problems are in ``BodyResult.issues`` (kinds
        ``unknown_api_key``, ``unsupported_version``, ``body_decode_error``,
        ``trailing_bytes``, ``spec_departure``).
        """
        fn = self._direct.get((api_key, version, is_response))
        if fn is not None:
            return self._run(fn, api_key, version, is_response, payload, offset)
        info = self.defs.apis.get(api_key)
        if info is None:
            return BodyResult(None, False, [BodyIssue(
                IssueKind.UNKNOWN_API_KEY, f"unknown api_key {api_key}: body kept raw", "", offset)],
                end=offset)
        issues: list[BodyIssue] = []
        layout_version = version
        assumed = None
        if (api_key, version) not in self._described and not self._has_layout(info, version):
            layout_version = self.nearest_version(api_key, version)
            assumed = layout_version
            issues.append(BodyIssue(
                IssueKind.UNSUPPORTED_VERSION,
                f"{info.name} v{version} is not in the definitions "
                f"(v{info.min_version}-v{info.max_version}): decoded as v{layout_version}",
                "", offset))
        # an ApiVersions answer may be an UNSUPPORTED_VERSION one in the v0 layout (KIP-511)
        api_versions_answer = is_response and api_key == API_VERSIONS and version > 0
        if api_versions_answer and len(payload) >= offset + 2 and \
                struct.unpack_from(">h", payload, offset)[0] == UNSUPPORTED_VERSION_CODE:
            result = self._api_versions_fallback(layout_version, payload, offset)
        else:
            result = self._decode_layout(api_key, layout_version, is_response, payload, offset)
            if assumed is None and not api_versions_answer:
                # a described version whose frames need no check first: the next frames
                # go straight to its decoder
                self._direct[(api_key, version, is_response)] = \
                    self.strict_decoder(api_key, version, is_response)
        result.issues[:0] = issues
        result.assumed_version = assumed
        return result

    def _has_layout(self, info: ApiInfo, version: int) -> bool:
        """Whether the definitions describe ``version`` of ``info`` (remembered when they do,
        so a frame of a known version does not search the layouts again)."""
        if info.min_version <= version <= info.max_version and \
                self.defs.layout(info.request, version) is not None:
            self._described.add((info.api_key, version))
            return True
        return False

    def _api_versions_fallback(self, version: int, payload: bytes, offset: int) -> BodyResult:
        """KIP-511: a broker answers an ApiVersions version it does not support with
        UNSUPPORTED_VERSION in the v0 body layout. Try v0, then ``version`` (the request's
        own version, or the nearest the definitions describe); if neither fits, decode
        leniently as v0 and say so."""
        for v in (0, version):
            value = self.try_strict(API_VERSIONS, v, True, payload, offset)
            if value is not None:
                return BodyResult(value, True, [], v, None, len(payload))
        result = self._decode_layout(API_VERSIONS, 0, True, payload, offset)
        context = (f"ApiVersions v{version} error answer (UNSUPPORTED_VERSION) fits neither the "
                   f"v0 layout (KIP-511) nor the v{version} layout; as v0: ")
        result.issues = [BodyIssue(i.kind, context + i.message, i.field_path, i.offset)
                         for i in result.issues]
        return result

    def _decode_layout(self, api_key: int, version: int, is_response: bool, payload: bytes,
                       offset: int) -> BodyResult:
        return self._run(self.strict_decoder(api_key, version, is_response), api_key, version,
                         is_response, payload, offset)

    def _run(self, fn: Callable, api_key: int, version: int, is_response: bool,
             payload: bytes, offset: int) -> BodyResult:
        """The body decoded by the strict decoder ``fn`` of its layout, or by the lenient one
        where ``fn`` rejects it."""
        try:
            value, end = fn(payload, offset)
        except STRICT_ERRORS:
            info = self.defs.apis[api_key]
            plan = self.defs.plan(info.response if is_response else info.request, version)
            res = decode_lenient(plan, payload, offset)
            issues = list(res.issues)
            if res.complete and res.end != len(payload):
                issues.append(_trailing(res.end, len(payload)))
            return BodyResult(res.value, res.complete, issues, version, None, res.end)
        issues = []
        if end != len(payload):
            issues.append(_trailing(end, len(payload)))
        return BodyResult(value, True, issues, version, None, end)

    def try_strict(self, api_key: int, version: int, is_response: bool, payload: bytes,
                   offset: int) -> dict | None:
        """Decode with the strict decoder only; ``None`` unless it consumes exactly the payload."""
        try:
            value, end = self.strict_decoder(api_key, version, is_response)(payload, offset)
        except STRICT_ERRORS:
            return None
        return value if end == len(payload) else None


def _trailing(end: int, total: int) -> BodyIssue:
    return BodyIssue(IssueKind.TRAILING_BYTES,
                     f"{total - end} trailing bytes after the body (body ends at offset {end} "
                     f"of a {total}-byte frame)", "", end)
