"""kafkasniff.protocol.decoder.BodyDecoder: unknown keys, unknown versions, the KIP-511
ApiVersions answer, trailing bytes, the lenient fallback and the shared decoder cache.
Bodies are hand-built with tests/pairing/frames.py."""

from __future__ import annotations

import pytest

from kafkasniff.errors import DefinitionError
from kafkasniff.issues import IssueKind
from kafkasniff.protocol.decoder import UNSUPPORTED_VERSION_CODE, BodyDecoder
from kafkasniff.protocol.schema import Definitions, load_definitions

from tests.pairing.frames import (
    API_VERSIONS,
    HEARTBEAT,
    METADATA,
    api_versions_v0_response_body,
    api_versions_v3_response_body,
    heartbeat_v0_request_body,
    heartbeat_v0_response_body,
    i16,
    i32,
    metadata_v1_response_body,
)

DEFS = load_definitions()
HEARTBEAT_MAX = DEFS.apis[HEARTBEAT].max_version


@pytest.fixture
def decoder() -> BodyDecoder:
    return BodyDecoder(DEFS)


def kinds(result) -> list[str]:
    return [i.kind for i in result.issues]


# --------------------------------------------------------------------------- clean decodes

def test_clean_decode_at_an_offset(decoder):
    """A body after a header decodes from ``offset``; ``end`` is a payload offset."""
    payload = b"HEADER" + heartbeat_v0_request_body("group-7", 12, "member-x")
    res = decoder.decode(HEARTBEAT, 0, False, payload, 6)
    assert res.value == {"group_id": "group-7", "generation_id": 12, "member_id": "member-x"}
    assert (res.complete, res.issues, res.layout_version, res.assumed_version, res.end) == (
        True, [], 0, None, len(payload))


# --------------------------------------------------------------------------- unknown api key

def test_unknown_api_key_keeps_the_body_raw(decoder):
    """An api_key the definitions do not know: no value, one unknown_api_key issue at the
    body's offset, nothing consumed."""
    res = decoder.decode(9999, 0, False, b"\x00\x01abc", 2)
    assert res.value is None and res.complete is False
    assert kinds(res) == [IssueKind.UNKNOWN_API_KEY]
    assert res.issues[0].offset == 2 and "9999" in res.issues[0].message
    assert res.end == 2 and res.layout_version is None


def test_strict_decoder_of_unknown_api_key_raises(decoder):
    with pytest.raises(DefinitionError, match="unknown api_key 9999"):
        decoder.strict_decoder(9999, 0, False)


# --------------------------------------------------------------------------- unknown versions

def test_version_above_the_definitions_is_decoded_as_the_newest(decoder):
    """A version newer than the definitions is decoded with the newest one, marked
    assumed_version, with an unsupported_version issue naming both versions first."""
    v = HEARTBEAT_MAX + 3
    # after a 4-byte header: the v4 layout, throttle_time_ms int32, error_code, no tags
    res = decoder.decode(HEARTBEAT, v, True, b"\x00" * 4 + i32(0) + i16(27) + b"\x00", 4)
    assert res.layout_version == HEARTBEAT_MAX and res.assumed_version == HEARTBEAT_MAX
    assert res.issues[0].kind == IssueKind.UNSUPPORTED_VERSION
    assert res.issues[0].message == (f"Heartbeat v{v} is not in the definitions "
                                     f"(v0-v{HEARTBEAT_MAX}): decoded as v{HEARTBEAT_MAX}")
    assert res.issues[0].offset == 4
    assert res.value == {"throttle_time_ms": 0, "error_code": 27}
    assert res.complete and kinds(res) == [IssueKind.UNSUPPORTED_VERSION]


def test_negative_version_is_decoded_as_the_oldest(decoder):
    res = decoder.decode(HEARTBEAT, -1, False, heartbeat_v0_request_body(), 0)
    assert (res.layout_version, res.assumed_version) == (0, 0)
    assert kinds(res) == [IssueKind.UNSUPPORTED_VERSION]
    assert res.value == {"group_id": "g1", "generation_id": 3, "member_id": "m-1"}


def test_nearest_version(decoder):
    info = DEFS.apis[METADATA]
    assert decoder.nearest_version(METADATA, info.max_version + 10) == info.max_version
    assert decoder.nearest_version(METADATA, info.min_version - 1) == info.min_version
    assert decoder.nearest_version(METADATA, 5) == 5
    assert decoder.nearest_version(9999, 1) is None


def test_known_version_has_no_unsupported_issue(decoder):
    for _ in range(2):  # the second time goes through the remembered (api_key, version)
        res = decoder.decode(HEARTBEAT, 0, False, heartbeat_v0_request_body(), 0)
        assert res.issues == [] and res.assumed_version is None


# --------------------------------------------------------------------------- KIP-511

def test_api_versions_unsupported_version_answer_in_the_v0_layout(decoder):
    """KIP-511: a broker answers an ApiVersions version it does not support with
    UNSUPPORTED_VERSION in the v0 body layout: decoded as v0, cleanly."""
    payload = api_versions_v0_response_body(error_code=UNSUPPORTED_VERSION_CODE,
                                            keys=((18, 0, 3),))
    res = decoder.decode(API_VERSIONS, 3, True, payload, 0)
    assert res.value == {"error_code": 35,
                         "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 3}]}
    assert (res.complete, res.issues, res.layout_version, res.assumed_version) == (
        True, [], 0, None)


def test_api_versions_unsupported_version_in_its_own_layout(decoder):
    """The same error written in the request's own (flexible) layout decodes with it."""
    payload = api_versions_v3_response_body(error_code=35, keys=((18, 0, 3),),
                                            throttle_time_ms=7)
    res = decoder.decode(API_VERSIONS, 3, True, payload, 0)
    assert res.layout_version == 3 and res.issues == []
    assert res.value["throttle_time_ms"] == 7 and res.value["error_code"] == 35


def test_api_versions_unsupported_version_fitting_no_layout(decoder):
    """Fitting neither layout: decoded leniently as v0, the issue saying so."""
    res = decoder.decode(API_VERSIONS, 3, True, i16(35) + b"\x01", 0)
    assert res.layout_version == 0 and res.complete is False
    assert res.value == {"error_code": 35}
    [issue] = res.issues
    assert issue.kind == IssueKind.BODY_DECODE_ERROR
    assert issue.message.startswith("ApiVersions v3 error answer (UNSUPPORTED_VERSION) fits "
                                    "neither the v0 layout (KIP-511) nor the v3 layout; as v0: ")
    assert (issue.field_path, issue.offset) == ("api_keys", 2)


def test_api_versions_other_errors_use_the_request_version(decoder):
    """Only UNSUPPORTED_VERSION switches layouts: another error in v3 stays v3."""
    payload = api_versions_v3_response_body(error_code=1, keys=())
    res = decoder.decode(API_VERSIONS, 3, True, payload, 0)
    assert res.layout_version == 3 and res.issues == [] and res.value["error_code"] == 1


# --------------------------------------------------------------------------- departures

def test_trailing_bytes_issue(decoder):
    """Bytes after a complete body: complete value, a trailing_bytes issue at its end."""
    payload = b"\x00\x00\x00\x09" + heartbeat_v0_response_body(27) + b"xyz"
    res = decoder.decode(HEARTBEAT, 0, True, payload, 4)
    assert res.value == {"error_code": 27} and res.complete
    [issue] = res.issues
    assert issue.kind == IssueKind.TRAILING_BYTES
    assert issue.offset == 6 and res.end == 6
    assert issue.message == "3 trailing bytes after the body (body ends at offset 6 of a " \
                            "9-byte frame)"


def test_lenient_fallback_on_a_truncated_body(decoder):
    """A body cut short: what was decoded is kept, a body_decode_error names the field
    path and the payload offset where the bytes ran out."""
    body = metadata_v1_response_body(topics=(("orders", 0, ((0, 0, 1), (0, 1, 1))),))
    cut = body[:-10]
    res = decoder.decode(METADATA, 1, True, cut, 0)
    assert res.complete is False and res.layout_version == 1
    [issue] = res.issues
    assert issue.kind == IssueKind.BODY_DECODE_ERROR
    assert issue.field_path == "topics[0].partitions[1].replica_nodes[0]"
    assert issue.offset == len(cut) - 2 == res.end
    assert issue.message == "int32: need 4 bytes, 2 left"
    parts = res.value["topics"][0]["partitions"]
    assert parts[0] == {"error_code": 0, "partition_index": 0, "leader_id": 1,
                        "replica_nodes": [1], "isr_nodes": [1]}
    assert parts[1]["partition_index"] == 1 and parts[1]["replica_nodes"] == []
    assert res.value["brokers"][0]["host"] == "broker-1"


def test_try_strict(decoder):
    """try_strict returns a value only when the strict decoder consumes exactly the rest."""
    body = heartbeat_v0_response_body(5)
    assert decoder.try_strict(HEARTBEAT, 0, True, body, 0) == {"error_code": 5}
    assert decoder.try_strict(HEARTBEAT, 0, True, body + b"x", 0) is None
    assert decoder.try_strict(HEARTBEAT, 0, True, body[:1], 0) is None


# --------------------------------------------------------------------------- cache

def test_strict_decoder_comes_from_the_definitions_cache():
    """Every BodyDecoder of one Definitions shares its compiled decoders."""
    a, b = BodyDecoder(DEFS), BodyDecoder(DEFS)
    fn = a.strict_decoder(METADATA, 1, True)
    assert fn is b.strict_decoder(METADATA, 1, True)
    assert fn is DEFS.compiled("MetadataResponse", 1)
    assert a.strict_decoder(METADATA, 1, False) is DEFS.compiled("MetadataRequest", 1)
    assert fn is not a.strict_decoder(METADATA, 2, True)
    value, end = fn(metadata_v1_response_body(), 0)
    assert end == len(metadata_v1_response_body()) and value["controller_id"] == 1


def test_other_definitions_have_their_own_cache():
    other = Definitions(DEFS.directory)
    assert BodyDecoder(other).strict_decoder(METADATA, 1, True) is not \
        BodyDecoder(DEFS).strict_decoder(METADATA, 1, True)
