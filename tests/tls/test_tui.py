"""The terminal UI over TLS decrypted with a key log (``kafkasniff tui --tls-keylog``): the
rows are the decrypted exchanges, and the detail view, which finds plaintext frames by TCP
sequence number, shows decrypted exchanges from what it kept while loading or, past its
bound, decodes the capture again."""

from __future__ import annotations

import json

from kafkasniff.output.render import exchange_to_dict
from kafkasniff.pipeline import PipelineOptions
from kafkasniff.tui.source import FileSource
from tests.tls.test_decrypt import KEYLOG, PCAP, TRUTH, decode_tls
from tests.tui.conftest import load_store


def _source() -> FileSource:
    return FileSource([str(PCAP)], PipelineOptions(
        ports=frozenset(TRUTH["broker_ports"]), tls_keylog=(str(KEYLOG),)))


def _json(ex) -> str:
    return json.dumps(exchange_to_dict(ex), default=str, sort_keys=True)


def test_rows_and_kept_details_are_the_decrypted_exchanges():
    src = _source()
    store = load_store(src)
    cap, _ = decode_tls([KEYLOG])
    assert len(store) == len(cap.exchanges) >= 40
    for i, ex in enumerate(cap.exchanges):
        info = store.row(i)
        assert (info.api_name, info.correlation_id, info.client) == (
            ex.api_name, ex.correlation_id, ex.client)
        assert info.req_seq == -1          # plaintext offsets are no TCP sequence numbers
        d = src.detail(info, store.row_issues(i))
        assert d.exchange is not None and "decrypted from TLS 1." in d.note
        assert (d.exchange.correlation_id, d.exchange.tls) == (ex.correlation_id, ex.tls)


def test_details_past_the_kept_bound_are_decoded_again(monkeypatch):
    """With nothing kept, each detail decodes the capture again: the exchange equals what
    ``read --json --records --tls-keylog`` gives."""
    monkeypatch.setattr("kafkasniff.tui.store.MAX_KEPT_EXCHANGES", 0)
    src = _source()
    store = load_store(src)
    cap, _ = decode_tls([KEYLOG])       # with_records, as the detail view decodes
    for i in (0, len(store) // 2, len(store) - 1):
        d = src.detail(store.row(i), store.row_issues(i))
        assert "decoded again" in d.note
        assert _json(d.exchange) == _json(cap.exchanges[i])
