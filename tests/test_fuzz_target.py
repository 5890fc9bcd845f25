"""The short fuzz run: hypothesis drives the structure-aware mutations of
``tests/support/fuzz_target.py`` over the committed captures (a fixed seed corpus) and checks
every promise on each input: nothing raises, no internal_error, the byte ledger adds up. The
long, coverage-guided run is ``bench/bench_fuzz.py``."""

from __future__ import annotations

import os
import random
import struct

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from kafkasniff.pipeline import Pipeline
from tests.conftest import CAPTURES
from tests.support import fuzz_target as ft

# a million records rendered three ways take 20 s a run: those two stay in bench/bench_fuzz.py
SLOW = {"records_1m.pcap", "control_batch_bomb.pcap", "fuzz-d1f98dda.pcap"}
SEEDS = sorted(p for p in [*CAPTURES.glob("*.pcap"), *(CAPTURES / "regressions").glob("*.pcap")]
               if p.stat().st_size <= 64 * 1024 and p.name not in SLOW)
SEED_BYTES = {p.name: p.read_bytes() for p in SEEDS}

SHORT = settings(max_examples=int(os.environ.get("KAFKASNIFF_FUZZ_EXAMPLES", 500)),
                 deadline=None, derandomize=True, database=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def test_the_seed_corpus_holds_every_kind_of_capture():
    names = set(SEED_BYTES)
    assert {"crafted_sasl.pcap", "crafted_kafka07.pcap", "tls_handshake.pcap",
            "record_count_implausible.pcap", "sasl_plain_api_key_99.pcap"} <= names


@pytest.mark.parametrize("name", sorted(SEED_BYTES))
def test_every_seed_keeps_every_promise(name):
    for mode in range(16):
        ft.check(SEED_BYTES[name], ft.Mode.of(mode))


@SHORT
@given(name=st.sampled_from(sorted(SEED_BYTES)), mode=st.integers(0, 15),
       rounds=st.integers(1, 4), rng=st.randoms(use_true_random=False))
def test_mutated_captures_keep_every_promise(name, mode, rounds, rng: random.Random):
    data = SEED_BYTES[name]
    for _ in range(rounds):
        data = ft.mutate(data, rng)
    ft.check(data, ft.Mode.of(mode))


def test_a_ledger_that_does_not_add_up_is_caught(monkeypatch):
    """The target would notice a byte lost in silence (here: packet headers not counted)."""
    real = Pipeline.account_source

    def lose_headers(self, accounting):
        real(self, accounting)
        self.stats.bytes.pop("packet_headers", None)

    monkeypatch.setattr(Pipeline, "account_source", lose_headers)
    with pytest.raises(ft.PromiseBroken, match="ledger sums to"):
        ft.check(SEED_BYTES["kafka_python.pcap"], ft.Mode.of(0))


def test_an_unreadable_file_is_a_capture_error_not_a_crash():
    assert ft.check(b"not a capture at all", ft.Mode.of(0))["unreadable"] == 1


def test_a_payload_mutation_fixes_the_record_and_ip_lengths():
    """A packet whose payload changed length keeps a pcap record and an IPv4 header that
    say so (else the mutation would test the reader's damage handling only)."""
    header, recs = ft.split_pcap(SEED_BYTES["kafka_python.pcap"])
    rec = next(r for r in recs if len(r) > 16 + ft.ETH_IP_TCP)
    grown = rec + bytearray(b"extra payload")
    ft._set_lengths(grown)
    n = len(grown) - 16
    assert struct.unpack_from("<II", grown, 8) == (n, n)
    assert struct.unpack_from(">H", grown, 16 + 16)[0] == n - 14
    assert ft.split_pcap(header + bytes(grown))[1] == [grown]
