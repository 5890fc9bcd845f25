"""The summary store without a screen: rows equal to the pipeline's, filters, sort, search, memory per row."""

from __future__ import annotations

from array import array

import pytest

from kafkasniff.output.filters import Filter
from kafkasniff.tui.store import sort_rows
from tests.conftest import decode_capture
from tests.tui.conftest import ERR, loaded_store


@pytest.fixture(scope="module")
def err_store():
    return loaded_store(ERR)


def test_rows_match_the_pipeline(err_store):
    _, store = err_store
    ref = decode_capture(ERR).exchanges
    assert len(store) == len(ref)
    for i, ex in enumerate(ref):
        r = store.row(i)
        assert (r.conn_id, r.client, r.broker, r.client_id, r.api_key, r.api_name,
                r.api_version, r.correlation_id, r.status, r.latency_ns, r.errors,
                r.throttle_time_ms, r.topics, r.req_bytes, r.resp_bytes) == \
            (ex.conn_id, ex.client, ex.broker, ex.client_id, ex.api_key, ex.api_name,
             ex.api_version, ex.correlation_id, ex.status, ex.latency_ns, ex.errors,
             ex.throttle_time_ms, ex.topics, ex.request_bytes, ex.response_bytes)
        assert r.issue_kinds == tuple(sorted({str(i.kind) for i in ex.issues}))
        assert [i.to_dict() for i in store.row_issues(i)] == [i.to_dict() for i in ex.issues]
        assert r.req_seq == (ex.request.seq if ex.request else -1)


@pytest.mark.parametrize("f,check", [
    (Filter(errors_only=True), lambda ex: bool(ex.errors)),
    (Filter(issues_only=True), lambda ex: bool(ex.issues)),
    (Filter(apis=("produce", "1")), lambda ex: ex.api_name in ("Produce", "Fetch")),
    (Filter(client="*consumer*"), lambda ex: "consumer" in (ex.client_id or "")),
    (Filter(client="=ks-producer-err"), lambda ex: ex.client_id == "ks-producer-err"),
    (Filter(client="127.0.0.1:53190"), lambda ex: ex.client == "127.0.0.1:53190"),
    (Filter(broker="36231"), lambda ex: ex.broker.endswith(":36231")),
    (Filter(topic="ks-err*"), lambda ex: any(t.startswith("ks-err") for t in ex.topics)),
    (Filter(status="unanswered"), lambda ex: ex.status == "unanswered"),
    (Filter(min_latency_ms=30), lambda ex: (ex.latency_ns or -1) >= 30_000_000),
    (Filter(apis=("Fetch",), errors_only=True, min_latency_ms=1),
     lambda ex: ex.api_name == "Fetch" and ex.errors and (ex.latency_ns or -1) >= 1e6),
])
def test_filters(err_store, f, check):
    _, store = err_store
    ref = decode_capture(ERR).exchanges
    got = list(store.filter_rows(store.compile(f), 0, len(store)))
    assert got == [i for i, ex in enumerate(ref) if check(ex)]
    assert got, f
    # filtering in two parts (rows arriving later) gives the same rows
    comp = store.compile(f)
    half = len(store) // 2
    assert list(store.filter_rows(comp, 0, half)) + \
        list(store.filter_rows(comp, half, len(store))) == got


@pytest.mark.parametrize("key", ["latency", "api", "client_id", "errors", "bytes", "time",
                                 "topics", "corr"])
def test_sort_is_stable_and_arrow_matches_python(err_store, key):
    _, store = err_store
    view = array("i", range(len(store)))
    for reverse in (False, True):
        got = store.sort(view, key, reverse)
        from kafkasniff.tui.store import SORT_KEYS

        col, table = SORT_KEYS[key]
        ranks = getattr(store.tables, table).ranks() if table else None
        # the Python path (used below 2000 rows) on a view long enough for Arrow
        big = array("i", list(view) * 30)
        arrow = sort_rows(big, store.columns[col], ranks, reverse)
        keyf = (lambda i: ranks[store.columns[col][i]]) if ranks else store.columns[col].__getitem__
        assert list(arrow) == sorted(big, key=keyf, reverse=reverse)
        vals = [keyf(i) for i in got]
        assert vals == sorted(vals, reverse=reverse)


def test_search(err_store):
    _, store = err_store
    m = store.search_matcher("NOT_COORD")
    hits = [i for i in range(len(store)) if m(i)]
    assert hits and all("NOT_COORDINATOR" in store.row(i).errors for i in hits)
    m = store.search_matcher("15")
    assert any(store.row(i).correlation_id == 15 for i in range(len(store)) if m(i))
    assert not any(store.search_matcher("no-such-thing")(i) for i in range(len(store)))
    assert any(store.search_matcher("unanswered")(i) for i in range(len(store)))


def test_memory_per_row_is_small(err_store):
    _, store = err_store
    n = len(store)
    bytes_per_row = sum(c.itemsize for c in store.columns.values())
    assert bytes_per_row < 130
    # the arrays really are that compact (no per-row objects)
    assert all(isinstance(c, array) for c in store.columns.values())
    assert sum(c.buffer_info()[1] * c.itemsize for c in store.columns.values()) / n < 140
