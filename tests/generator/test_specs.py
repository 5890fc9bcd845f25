"""The definitions generator (kafkasniff.generator.specs) and the committed ``dissectors/``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kafkasniff.errors import DefinitionError
from kafkasniff.protocol.codegen import compile_plan
from click.testing import CliRunner

from kafkasniff.cli import main
from kafkasniff.generator.specs import GENERATED_NOTE, generate, snake_case, strip_comments
from kafkasniff.protocol.schema import Definitions

from tests.protocol.encoder import encode, example_value

REPO = Path(__file__).resolve().parents[2]
DISSECTORS = REPO / "dissectors"


def _kafka_protocol_dir() -> Path | None:
    for candidate in (REPO / "../shared/kafka-protocol", Path("/work/shared/kafka-protocol")):
        if (candidate / "messages").is_dir():
            return candidate.resolve()
    return None


KAFKA_PROTOCOL = _kafka_protocol_dir()
needs_specs = pytest.mark.skipif(
    KAFKA_PROTOCOL is None,
    reason="Kafka JSON specs not found (looked for ../shared/kafka-protocol next to the repo "
           "and /work/shared/kafka-protocol)")


# --------------------------------------------------------------------------- committed output

@needs_specs
def test_regenerating_gives_the_committed_dissectors(tmp_path):
    out = tmp_path / "dissectors"
    written = generate(KAFKA_PROTOCOL / "messages", out,
                       dropped_dir=KAFKA_PROTOCOL / "messages-dropped-versions",
                       errors_file=KAFKA_PROTOCOL / "errors.json",
                       manifest_file=KAFKA_PROTOCOL / "manifest.json")
    committed = sorted(p.name for p in DISSECTORS.iterdir() if p.is_file())
    regenerated = sorted(p.name for p in out.iterdir())
    assert regenerated == committed
    assert sorted(p.name for p in written) == committed
    different = [n for n in committed if (out / n).read_bytes() != (DISSECTORS / n).read_bytes()]
    assert different == [], f"regenerate dissectors/: {different} differ"


@needs_specs
def test_regenerating_twice_is_deterministic_and_removes_stale_files(tmp_path):
    out = tmp_path / "d"
    args = dict(dropped_dir=KAFKA_PROTOCOL / "messages-dropped-versions")
    generate(KAFKA_PROTOCOL / "messages", out, **args)
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    (out / "StaleRequest.json").write_text(json.dumps({"generated": GENERATED_NOTE}))
    (out / "mine.json").write_text("{}")  # not generated: kept
    generate(KAFKA_PROTOCOL / "messages", out, **args)
    second = {p.name: p.read_bytes() for p in out.iterdir()}
    assert second.pop("mine.json") == b"{}"
    assert second == first


def test_committed_files_say_they_are_generated():
    for p in DISSECTORS.glob("*.json"):
        assert json.loads(p.read_text(encoding="utf-8"))["generated"] == GENERATED_NOTE, p.name


def test_index_has_every_api_key_and_the_error_table():
    index = json.loads((DISSECTORS / "index.json").read_text(encoding="utf-8"))
    keys = [a["api_key"] for a in index["apis"]]
    assert len(keys) == 95 and keys == list(range(95))
    for a in index["apis"]:
        assert (DISSECTORS / f"{a['request']}.json").is_file()
        assert (DISSECTORS / f"{a['response']}.json").is_file()
    by_key = {a["api_key"]: a for a in index["apis"]}
    assert by_key[0]["name"] == "Produce" and by_key[18]["name"] == "ApiVersions"
    assert by_key[1]["valid_versions"] == [0, 18]
    errors = json.loads((DISSECTORS / "errors.json").read_text(encoding="utf-8"))["errors"]
    assert len(errors) == 138
    codes = [e["code"] for e in errors]
    assert codes == sorted(codes) and len(set(codes)) == len(codes)
    named = {e["code"]: e["name"] for e in errors}
    assert named[-1] == "UNKNOWN_SERVER_ERROR" and named[0] == "NONE"
    assert named[35] == "UNSUPPORTED_VERSION" and named[6] == "NOT_LEADER_OR_FOLLOWER"


def test_dropped_versions_are_restored():
    defs = Definitions(DISSECTORS)
    # Kafka 4.0 dropped Produce v0-v2 (KIP-896); the old spec restores them.
    assert defs.apis[0].min_version == 0
    assert defs.message_versions("ProduceRequest") == list(range(0, 14))
    assert defs.layout("ProduceRequest", 0) is not defs.layout("ProduceRequest", 13)


# --------------------------------------------------------------------------- snake_case

@pytest.mark.parametrize("name, key", [
    ("ThrottleTimeMs", "throttle_time_ms"),
    ("KRaftVersion", "kraft_version"),
    ("V3AndBelowTopics", "v3_and_below_topics"),
    ("isKRaftController", "is_kraft_controller"),
    ("ErrorCode", "error_code"),
    ("TopicId", "topic_id"),
    ("name", "name"),
])
def test_snake_case(name, key):
    assert snake_case(name) == key


def test_strip_comments_keeps_string_literals():
    text = '{"a": "x // y /* z */ \\" // q", // gone\n "b": /* gone */ 1}'
    assert json.loads(strip_comments(text)) == {"a": 'x // y /* z */ " // q', "b": 1}


# --------------------------------------------------------------------------- a tiny spec dir

TINY_REQUEST = r'''// Licensed to nobody: a hand-written spec for the generator's tests.
// "validVersions": "99" in a comment must not count
{
  "apiKey": 90, /* block comment, "with a string" inside */
  "type": "request",
  "listeners": ["controller", "broker"],
  "name": "TinyRequest",
  "validVersions": "2-3",
  "flexibleVersions": "2+",
  "fields": [
    { "name": "ThrottleTimeMs", "type": "int32", "versions": "0+",
      "about": "prose is not copied", "default": "http://x//y/*z*/" },
    { "name": "ClientId", "type": "string", "versions": "1+", "nullableVersions": "1+",
      "flexibleVersions": "none" },
    { "name": "Topics", "type": "[]TinyTopic", "versions": "0+", "fields": [
      { "name": "Name", "type": "string", "versions": "0+", "entityType": "topicName" },
      { "name": "Cursor", "type": "Cursor", "versions": "3+" },
      { "name": "PartitionIds", "type": "[]int32", "versions": "0+" }
    ]},
    { "name": "ClusterId", "type": "string", "versions": "2+", "nullableVersions": "2+",
      "taggedVersions": "2+", "tag": 0, "default": "null" }
  ],
  "commonStructs": [
    { "name": "Cursor", "versions": "0+", "fields": [
      { "name": "Offset", "type": "int64", "versions": "0+", "default": -1 }
    ]}
  ]
}
'''

TINY_REQUEST_DROPPED = r'''{
  "apiKey": 90, "type": "request", "name": "TinyRequest", "validVersions": "0-3",
  "flexibleVersions": "none",
  "fields": [
    { "name": "ThrottleTimeMs", "type": "int32", "versions": "0+" }
  ]
}
'''

TINY_RESPONSE = '''{
  "apiKey": 90, "type": "response", "name": "TinyResponse", "validVersions": "2-3",
  "flexibleVersions": "2+",
  "fields": [ { "name": "ErrorCode", "type": "int16", "versions": "0+" } ]
}
'''

TINY_HEADER = '''{ "type": "header", "name": "TinyHeader", "validVersions": "0",
  "flexibleVersions": "none",
  "fields": [ { "name": "CorrelationId", "type": "int32", "versions": "0+" } ] }
'''

TINY_ERRORS = [{"code": 1, "name": "B", "retriable": True, "message": "x"},
               {"code": -1, "name": "A", "retriable": False, "message": None}]


def _i32(name, key, **kw):
    return {"name": name, "key": key, "type": "int32", "versions": [0, None], **kw}


EXPECTED_TINY_REQUEST = {
    "generated": GENERATED_NOTE,
    "name": "TinyRequest",
    "type": "request",
    "api_key": 90,
    "valid_versions": [0, 3],
    "listeners": ["broker", "controller"],
    "layouts": [
        {
            "versions": [2, 3],
            "flexible_versions": [2, None],
            "fields": [
                _i32("ThrottleTimeMs", "throttle_time_ms", default="http://x//y/*z*/"),
                {"name": "ClientId", "key": "client_id", "type": "string", "versions": [1, None],
                 "nullable_versions": [1, None], "flexible_versions": "none"},
                {"name": "Topics", "key": "topics", "type": "array", "items": "struct",
                 "struct": "TinyTopic", "versions": [0, None]},
                {"name": "ClusterId", "key": "cluster_id", "type": "string", "versions": [2, None],
                 "nullable_versions": [2, None], "tagged_versions": [2, None], "tag": 0,
                 "default": "null"},
            ],
            "structs": {
                "Cursor": {"versions": [0, None], "fields": [
                    {"name": "Offset", "key": "offset", "type": "int64", "versions": [0, None],
                     "default": "-1"}]},
                "TinyTopic": {"versions": [0, None], "fields": [
                    {"name": "Name", "key": "name", "type": "string", "versions": [0, None],
                     "entity_type": "topicName"},
                    {"name": "Cursor", "key": "cursor", "type": "struct", "struct": "Cursor",
                     "versions": [3, None]},
                    {"name": "PartitionIds", "key": "partition_ids", "type": "array",
                     "items": "int32", "versions": [0, None]},
                ]},
            },
        },
        {
            "versions": [0, 1],
            "flexible_versions": None,
            "fields": [_i32("ThrottleTimeMs", "throttle_time_ms")],
            "structs": {},
        },
    ],
}


@pytest.fixture
def tiny(tmp_path):
    specs = tmp_path / "kp" / "messages"
    dropped = tmp_path / "kp" / "dropped"
    specs.mkdir(parents=True)
    dropped.mkdir()
    (specs / "TinyRequest.json").write_text(TINY_REQUEST, encoding="utf-8")
    (specs / "TinyResponse.json").write_text(TINY_RESPONSE, encoding="utf-8")
    (specs / "TinyHeader.json").write_text(TINY_HEADER, encoding="utf-8")
    (dropped / "TinyRequest.json").write_text(TINY_REQUEST_DROPPED, encoding="utf-8")
    (tmp_path / "kp" / "errors.json").write_text(json.dumps(TINY_ERRORS), encoding="utf-8")
    (tmp_path / "kp" / "manifest.json").write_text(
        json.dumps({"repository": "r", "tip_commit": "c", "tip_commit_date": "d"}))
    return specs, dropped, tmp_path / "out"


def test_tiny_spec_dir_gives_the_expected_definitions(tiny):
    specs, dropped, out = tiny
    written = generate(specs, out, dropped_dir=dropped)
    assert sorted(p.name for p in written) == sorted(
        ["TinyRequest.json", "TinyResponse.json", "TinyHeader.json", "index.json", "errors.json"])
    text = (out / "TinyRequest.json").read_text(encoding="utf-8")
    assert json.loads(text) == EXPECTED_TINY_REQUEST
    assert "prose" not in text and "about" not in text and "Licensed" not in text
    index = json.loads((out / "index.json").read_text(encoding="utf-8"))
    assert index["apis"] == [{"api_key": 90, "request": "TinyRequest", "name": "Tiny",
                              "valid_versions": [0, 3], "flexible_versions": [2, None],
                              "listeners": ["broker", "controller"], "response": "TinyResponse"}]
    assert index["other"] == [{"name": "TinyHeader", "type": "header", "file": "TinyHeader.json",
                               "valid_versions": [0, 0]}]
    assert index["source"] == {"specs": "messages", "dropped_versions": "dropped",
                               "repository": "r", "tip_commit": "c", "tip_commit_date": "d"}
    errors = json.loads((out / "errors.json").read_text(encoding="utf-8"))["errors"]
    assert errors == [{"code": -1, "name": "A", "retriable": False},
                      {"code": 1, "name": "B", "retriable": True}]


def test_tiny_definitions_load_and_decode(tiny):
    specs, dropped, out = tiny
    generate(specs, out, dropped_dir=dropped)
    defs = Definitions(out)
    info = defs.apis[90]
    assert (info.name, info.min_version, info.max_version, info.flexible_from) == ("Tiny", 0, 3, 2)
    assert defs.message_versions("TinyRequest") == [0, 1, 2, 3]
    v1 = defs.plan("TinyRequest", 1)
    assert [f.key for f in v1.fields] == ["throttle_time_ms"] and not v1.flexible
    v3 = defs.plan("TinyRequest", 3)
    assert v3.flexible and [f.key for f in v3.fields] == ["throttle_time_ms", "client_id", "topics"]
    client_id = v3.fields[1]
    assert client_id.nullable and not client_id.compact  # field-level flexibleVersions "none"
    assert v3.fields[2].compact
    assert [f.key for f in v3.fields[2].struct.fields] == ["name", "cursor", "partition_ids"]
    assert v3.tagged[0].key == "cluster_id" and v3.tagged[0].compact and v3.tagged[0].nullable
    assert [f.key for f in defs.plan("TinyRequest", 2).fields[2].struct.fields] == \
        ["name", "partition_ids"]
    body = (b"\x00\x00\x00\x07"              # throttle_time_ms
            + b"\x00\x02id"                    # client_id: int16 length although flexible
            + b"\x02"                           # topics: compact count 1
            + b"\x02t"                          #   name
            + b"\x00" * 7 + b"\x05" + b"\x00"    #   cursor: offset int64, empty tagged section
            + b"\x02" + b"\x00\x00\x00\x09"      #   partition_ids: compact count 1
            + b"\x00"                           #   topic's tagged section
            + b"\x01" + b"\x00\x03" + b"\x03ab")   # 1 tagged field: tag 0, 3 bytes, "ab"
    value, end = compile_plan(v3)(body, 0)
    assert end == len(body)
    assert value == {"throttle_time_ms": 7, "client_id": "id",
                     "topics": [{"name": "t", "cursor": {"offset": 5}, "partition_ids": [9]}],
                     "cluster_id": "ab"}
    assert encode(v3, value) == body
    assert encode(v3, example_value(v3)) != body


def test_cli_main(tiny):
    specs, dropped, out = tiny
    run = CliRunner().invoke
    r = run(main, ["definitions", "generate", "--specs", str(specs), "--dropped", str(dropped),
                   "-o", str(out)])
    assert r.exit_code == 0
    assert "wrote 5 files" in r.stdout
    (specs / "TinyResponse.json").write_text("{nope", encoding="utf-8")
    r = run(main, ["definitions", "generate", "--specs", str(specs), "-o", str(out)])
    assert r.exit_code == 2
    assert "TinyResponse.json" in r.stderr


@pytest.mark.parametrize("name, text", [
    ("Broken.json", '{"name": "BrokenRequest", "type": "request", '),
    ("NoVersions.json", '{"name": "NoVersionsRequest", "type": "request", "apiKey": 91}'),
    ("BadRange.json", '{"name": "BadRangeRequest", "type": "request", "apiKey": 91, '
                      '"validVersions": "one-two", "fields": []}'),
    ("NoFieldType.json", '{"name": "NoFieldTypeRequest", "type": "request", "apiKey": 91, '
                         '"validVersions": "0", "fields": [{"name": "X", "versions": "0+"}]}'),
    ("UnknownStruct.json", '{"name": "UnknownStructRequest", "type": "request", "apiKey": 91, '
                           '"validVersions": "0", "fields": [{"name": "X", "type": "[]Nope", '
                           '"versions": "0+"}]}'),
    ("TagAlone.json", '{"name": "TagAloneRequest", "type": "request", "apiKey": 91, '
                      '"validVersions": "0", "flexibleVersions": "0+", "fields": '
                      '[{"name": "X", "type": "int8", "versions": "0+", "tag": 0}]}'),
    ("NoApiKey.json", '{"name": "NoApiKeyRequest", "type": "request", "validVersions": "0", '
                      '"fields": []}'),
    ("StructNoFields.json", '{"name": "StructNoFieldsRequest", "type": "request", '
                            '"apiKey": 91, "validVersions": "0", "fields": [], '
                            '"commonStructs": [{"name": "S"}]}'),
    ("TypeNotText.json", '{"name": "TypeNotTextRequest", "type": "request", "apiKey": 91, '
                         '"validVersions": "0", "fields": [{"name": "X", "type": 5, '
                         '"versions": "0+"}]}'),
    ("NotAnObject.json", '[1, 2]'),
])
def test_malformed_spec_raises_with_the_file_name(tmp_path, name, text):
    specs = tmp_path / "messages"
    specs.mkdir()
    (specs / name).write_text(text, encoding="utf-8")
    with pytest.raises(DefinitionError) as ei:
        generate(specs, tmp_path / "out")
    assert name in str(ei.value)


def test_malformed_error_table_raises(tiny):
    specs, dropped, out = tiny
    (specs.parent / "errors.json").write_text('[{"name": "NO_CODE"}]', encoding="utf-8")
    with pytest.raises(DefinitionError, match="errors.json"):
        generate(specs, out)


def test_missing_or_empty_spec_dir_raises(tmp_path):
    with pytest.raises(DefinitionError):
        generate(tmp_path / "absent", tmp_path / "out")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DefinitionError):
        generate(tmp_path / "empty", tmp_path / "out")


def test_request_without_response_raises(tiny):
    specs, dropped, out = tiny
    os.remove(specs / "TinyResponse.json")
    with pytest.raises(DefinitionError, match="90"):
        generate(specs, out)


@pytest.mark.parametrize("index", ['{"apis": [{"name": "X"}]}', '{"other": []}', '[]'])
def test_malformed_definitions_index_raises(tmp_path, index):
    (tmp_path / "index.json").write_text(index, encoding="utf-8")
    with pytest.raises(DefinitionError, match="index.json"):
        Definitions(tmp_path)
