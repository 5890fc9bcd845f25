"""The API-key constants generator (kafkasniff.generator.api_keys) and the committed
``kafkasniff/protocol/apis.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafkasniff.errors import DefinitionError
from kafkasniff.generator.api_keys import api_keys_source, write_api_keys
from kafkasniff.protocol import apis

REPO = Path(__file__).resolve().parents[2]
INDEX = REPO / "dissectors" / "index.json"


def test_committed_module_matches_the_committed_index():
    committed = (REPO / "kafkasniff" / "protocol" / "apis.py").read_text(encoding="utf-8")
    assert committed == api_keys_source(json.loads(INDEX.read_text(encoding="utf-8"))), \
        "regenerate with kafkasniff definitions generate ... --api-keys kafkasniff/protocol/apis.py"


def test_names_are_kafka_api_names_in_upper_snake_case():
    assert (apis.PRODUCE, apis.FETCH, apis.API_VERSIONS, apis.SASL_HANDSHAKE,
            apis.SASL_AUTHENTICATE, apis.OFFSET_FOR_LEADER_EPOCH, apis.SHARE_FETCH) == \
        (0, 1, 18, 17, 36, 23, 78)
    assert apis.SASL_TOKEN == -2
    index = json.loads(INDEX.read_text(encoding="utf-8"))
    consts = {v for k, v in vars(apis).items() if k.isupper()}
    assert consts == {a["api_key"] for a in index["apis"]} | {-2}


def test_write_and_malformed_index(tmp_path):
    idx = tmp_path / "index.json"
    idx.write_text(json.dumps({"apis": [{"api_key": 0, "name": "Produce"},
                                        {"api_key": 36, "name": "SaslAuthenticate"}]}))
    out = write_api_keys(idx, tmp_path / "apis.py")
    ns: dict = {}
    exec(out.read_text(), ns)  # noqa: S102 - our own generated source
    assert (ns["PRODUCE"], ns["SASL_AUTHENTICATE"], ns["SASL_TOKEN"]) == (0, 36, -2)
    with pytest.raises(DefinitionError):
        api_keys_source({"apis": [{"api_key": 0}]})
    with pytest.raises(DefinitionError):
        api_keys_source({"apis": [{"api_key": 0, "name": "Produce"},
                                  {"api_key": 1, "name": "produce"}]})
    idx.write_text("{nope")
    with pytest.raises(DefinitionError):
        write_api_keys(idx, tmp_path / "x.py")
