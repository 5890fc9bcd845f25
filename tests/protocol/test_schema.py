"""Plans must not depend on the order in which they are built (a cache keyed too loosely
once gave ShareFetchRequest v1 the FetchPartition struct of FetchRequest v1)."""

from kafkasniff.protocol.schema import Definitions


def _all(defs: Definitions) -> list[tuple[str, int]]:
    out = []
    for info in defs.apis.values():
        for name in (info.request, info.response):
            out.extend((name, v) for v in defs.message_versions(name))
    return out


def test_plans_are_independent_of_build_order():
    forward, backward = Definitions(), Definitions()
    names = _all(forward)
    plans = {k: forward.plan(*k) for k in names}
    for k in reversed(names):
        assert backward.plan(*k) == plans[k], k


def test_same_struct_names_in_different_messages_stay_apart():
    defs = Definitions()
    fetch = defs.plan("FetchRequest", 1)
    share = defs.plan("ShareFetchRequest", 1)
    fetch_part = next(f for f in fetch.fields if f.key == "topics").struct.fields[1].struct
    share_part = next(f for f in share.fields if f.key == "topics").struct.fields[1].struct
    assert "fetch_offset" in [f.key for f in fetch_part.fields]
    assert "fetch_offset" not in [f.key for f in share_part.fields]
