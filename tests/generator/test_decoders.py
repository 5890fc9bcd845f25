"""The decoders generated ahead of time (kafkasniff.generator.decoders, committed in
``kafkasniff/protocol/prebuilt``) and when ``Definitions.compiled`` uses them.

Their behaviour is tested where every decoder is: ``tests/protocol/test_codegen.py``'s
round trips of every (api_key, version, direction) get their decoders from
``Definitions.compiled``, which hands out these; here: that they are current, that they are
the ones handed out, and that a changed definition or generator is compiled at run time."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kafkasniff.generator.decoders import message_names, write_decoders
from kafkasniff.protocol import plandecode, prebuilt
from kafkasniff.protocol.codegen import compile_plan, decoder_source
from kafkasniff.protocol.schema import Definitions

REPO = Path(__file__).resolve().parents[2]
PREBUILT = REPO / "kafkasniff" / "protocol" / "prebuilt"
AHEAD = "(generated ahead of time)"


def generated(fn):
    """The generated decoder behind what ``Definitions.compiled`` handed out: itself, or
    the reference of the compiled interpreter's ``PlanDecoder``."""
    if plandecode.compiled():
        assert isinstance(fn, plandecode.PlanDecoder)
        return fn.reference
    assert not isinstance(fn, plandecode.PlanDecoder)
    return fn


def test_committed_modules_are_a_fresh_generation(tmp_path):
    written = write_decoders(Definitions(prebuilt=False), tmp_path)
    fresh = {p.name: p.read_text(encoding="utf-8") for p in written}
    committed = {p.name: p.read_text(encoding="utf-8") for p in PREBUILT.glob("*.py")
                 if p.name != "__init__.py"}
    stale = sorted(name for name in fresh.keys() | committed.keys()
                   if fresh.get(name) != committed.get(name))
    assert not stale, (f"{len(stale)} stale module(s), first {stale[:3]}: regenerate with "
                       f"kafkasniff definitions generate ... --decoders "
                       f"kafkasniff/protocol/prebuilt (docs/definitions.md)")


def test_every_decoder_handed_out_was_generated_ahead_of_time_with_its_layout():
    defs, runtime = Definitions(), Definitions(prebuilt=False)
    count = 0
    for name in message_names(defs):
        for version in defs.message_versions(name):
            fn = defs.compiled(name, version)
            assert AHEAD in generated(fn).__doc__, (name, version)
            layout = decoder_source(defs.plan(name, version)).layout
            assert fn._layout == layout == runtime.compiled(name, version)._layout
            count += 1
    assert count >= 736        # every request and response version, and the inner messages


def test_a_changed_definition_is_compiled_at_run_time(tmp_path):
    """A definitions directory whose ApiVersionsResponse file differs in one byte (a newline
    at the end, same layouts): its decoders are compiled now; the others' files are the
    bundled ones, so theirs are still the generated ones."""
    d = tmp_path / "defs"
    shutil.copytree(Definitions().directory, d)
    path = d / "ApiVersionsResponse.json"
    path.write_bytes(path.read_bytes() + b"\n")
    defs = Definitions(d)
    changed = generated(defs.compiled("ApiVersionsResponse", 3))
    assert AHEAD not in changed.__doc__ and changed.__doc__.endswith("(generated).")
    assert changed._layout == Definitions().compiled("ApiVersionsResponse", 3)._layout
    assert AHEAD in generated(defs.compiled("ApiVersionsRequest", 3)).__doc__


def test_a_changed_generator_is_not_trusted(monkeypatch):
    monkeypatch.setattr(prebuilt, "generator_sha256", lambda: "0" * 64)
    fn = generated(Definitions().compiled("FetchResponse", 12))
    assert AHEAD not in fn.__doc__
    assert prebuilt.decoder("FetchResponse", 12, Definitions().message_sha256("FetchResponse")) \
        is None


def test_unknown_names_and_versions_are_none():
    sha = Definitions().message_sha256("FetchResponse")
    assert prebuilt.decoder("FetchResponse", 10_000, sha) is None
    assert prebuilt.decoder("NoSuchResponse", 0, sha) is None
    assert prebuilt.decoder("generator_sha256", 0, sha) is None   # not a message module
    assert prebuilt.decoder("FetchResponse", 12, "0" * 64) is None


@pytest.mark.parametrize("name, version", [("ProduceRequest", 3), ("FetchResponse", 16),
                                           ("ConsumerProtocolAssignment", 3)])
def test_generated_and_run_time_decoders_give_the_same_values(name, version):
    """The same bytes through both (round trips of every version: test_codegen.py)."""
    defs = Definitions()
    ahead, now = defs.compiled(name, version), compile_plan(defs.plan(name, version))
    assert AHEAD in generated(ahead).__doc__
    for buf in (b"\x00" * 64, b"\x00\x01" * 40, bytes(range(64))):
        try:
            want = now(buf, 0)
        except Exception as exc:  # noqa: BLE001 - the same error type is what is compared
            with pytest.raises(type(exc)):
                ahead(buf, 0)
        else:
            assert ahead(buf, 0) == want
