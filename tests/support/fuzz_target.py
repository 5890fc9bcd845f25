"""The in-process fuzz target: one capture file's bytes through every stage and every sink.

:func:`check` is what the hypothesis short run (``tests/test_fuzz_target.py``) and the
coverage-guided long run (``bench/bench_fuzz.py``, atheris) call with mutated captures. It
decodes ``data`` as a capture file with the options a mode byte selects (records on or off,
wire format auto, 0.8+ or 0.7, budgets at their defaults or small), renders every exchange
and issue as ``read`` and ``read --json`` do, feeds ``stats``' aggregator and builds
``export``'s rows, and checks the promises of issue 11:

- nothing raises but :class:`~kafkasniff.errors.CaptureError` (a capture that cannot be read
  at all: the CLI's one-line error, exit 2);
- no ``internal_error`` issue (a bug caught by the safety net is still a bug);
- decoded + skipped-with-reason bytes = the bytes of the capture (after gzip);
- every JSON line is valid JSON.

A broken promise raises :class:`PromiseBroken` (an ``AssertionError``); any other exception
escaping is a crash. Memory and time are bounded by whoever calls it (RLIMIT_AS, timeouts).

:func:`mutate` is the structure-aware mutation the short run and the long run share: it parses
a little-endian pcap, changes one packet (its TCP payload bytes, an int32 set to an edge
value, bytes inserted or removed with the lengths fixed), drops, duplicates or swaps packets,
or truncates or extends the file; inputs that are not pcap get raw byte mutations.
"""

from __future__ import annotations

import gzip
import io
import json
import random
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass

from kafkasniff.content.budgets import Budgets
from kafkasniff.errors import CaptureError
from kafkasniff.model import Exchange
from kafkasniff.pipeline import DECODED_BYTES, SKIPPED_BYTES, Pipeline, PipelineOptions, analyze

WIRE_FORMATS = ("auto", "modern", "0.7")
SMALL_BUDGETS = Budgets(frame_uncompressed_bytes=1 << 20, capture_uncompressed_bytes=4 << 20,
                        frame_records=1000, frame_issues=5, capture_issues=50,
                        pending_bytes=1 << 16)


class PromiseBroken(AssertionError):
    """The decoder broke one of its promises on this input (not a crash of the harness)."""


@dataclass(frozen=True)
class Mode:
    """Options chosen by a mode byte: bit 0 records, bits 1-2 wire format, bit 3 budgets."""

    with_records: bool
    wire_format: str
    small_budgets: bool

    @classmethod
    def of(cls, byte: int) -> Mode:
        return cls(bool(byte & 1), WIRE_FORMATS[((byte >> 1) & 3) % 3], bool(byte & 8))

    def options(self) -> PipelineOptions:
        extra = {"budgets": SMALL_BUDGETS} if self.small_budgets else {}
        return PipelineOptions(with_records=self.with_records, wire_format=self.wire_format,
                               **extra)


def _captured_size(data: bytes) -> int | None:
    """Bytes the capture holds (gzip inflated); None when the gzip stream is damaged (the
    reader then reports what it could read)."""
    if data[:2] != b"\x1f\x8b":
        return len(data)
    try:
        return len(gzip.decompress(data))
    except (OSError, EOFError, zlib.error):
        return None


def check(data: bytes, mode: Mode) -> dict:
    """Run ``data`` through the pipeline and every sink; raise :class:`PromiseBroken` if a
    promise breaks. Returns counts (``exchanges``, ``issues``, ``unreadable``)."""
    from kafkasniff.export.rows import exchange_rows, issue_row
    from kafkasniff.output.render import (
        issue_line,
        issue_to_dict,
        json_default,
        write_exchange,
    )
    from kafkasniff.stats.aggregate import Aggregator

    pipe = Pipeline(mode.options())
    agg = Aggregator()
    default = json_default(64)
    out = io.StringIO()
    exchanges = issues = 0
    try:
        for rec in analyze([io.BytesIO(data)], pipeline=pipe):
            if type(rec) is Exchange:
                exchanges += 1
                kinds = [i.kind for i in rec.issues]
                agg.add(rec)
                for as_json in (False, True):       # what read and read --json print
                    write_exchange(rec, out, as_json=as_json, with_records=mode.with_records,
                                   value_bytes=64, default=default)
                for rows in exchange_rows(rec, "fuzz", "c", defs=pipe.defs,
                                          with_records=mode.with_records).values():
                    for _row in rows:
                        pass
            else:
                issues += 1
                kinds = [rec.kind]
                agg.add_issue(rec)
                out.write(issue_line(rec))
                out.write(json.dumps(issue_to_dict(rec)))
                issue_row(rec, "fuzz", None)
            if "internal_error" in kinds:
                raise PromiseBroken(f"internal_error issue: {rec!r}"[:2000])
    except CaptureError:
        return {"exchanges": exchanges, "issues": issues, "unreadable": 1}
    agg.to_dict()
    json.dumps(pipe.stats.to_dict())
    ledger = pipe.stats.bytes
    unknown = set(ledger) - set(DECODED_BYTES) - set(SKIPPED_BYTES)
    if unknown:
        raise PromiseBroken(f"ledger entries without a reason: {sorted(unknown)}")
    total = _captured_size(data)
    if total is not None and sum(ledger.values()) != total:
        raise PromiseBroken(f"ledger sums to {sum(ledger.values())}, capture has {total} "
                            f"bytes: {dict(ledger)}")
    return {"exchanges": exchanges, "issues": issues, "unreadable": 0}


# =========================================================================== mutation

_PCAP_LE = (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1")
_EDGES = (0, 1, -1, 2**31 - 1, -2**31, 0x7FFF, 0xFFFF, 2**24, 127, 128, 255, 256, 14, 4096)
ETH_IP_TCP = 14 + 20 + 32   # tcpdump on lo: Ethernet, IPv4 without options, TCP timestamps


def split_pcap(data: bytes) -> tuple[bytes, list[bytearray]] | None:
    """(file header, packet records with their 16-byte headers) of a little-endian pcap."""
    if data[:4] not in _PCAP_LE or len(data) < 24:
        return None
    recs = []
    pos = 24
    while pos + 16 <= len(data):
        incl = struct.unpack_from("<I", data, pos + 8)[0]
        if incl > len(data) - pos - 16:
            break
        recs.append(bytearray(data[pos:pos + 16 + incl]))
        pos += 16 + incl
    return data[:24], recs


def _set_lengths(rec: bytearray) -> None:
    n = len(rec) - 16
    struct.pack_into("<II", rec, 8, n, n)
    if n >= 34 and rec[16 + 12:16 + 14] == b"\x08\x00":     # IPv4 total length
        struct.pack_into(">H", rec, 16 + 16, min(n - 14, 0xFFFF))


def mutate(data: bytes, rng: random.Random,
           bytes_mutator: Callable[[bytes, int], bytes] | None = None) -> bytes:
    """One structure-aware mutation of ``data`` (see the module docstring).
    ``bytes_mutator(payload, max_size)``: a byte-level mutator for payloads (libFuzzer's
    through atheris); default: random byte changes."""
    mut = bytes_mutator or (lambda b, max_size: _flip(b, max_size, rng))
    parsed = split_pcap(data)
    if parsed is None or not parsed[1]:
        return mut(data, len(data) + 64)
    header, recs = parsed
    op = rng.randrange(10)
    i = rng.randrange(len(recs))
    rec = recs[i]
    payload_at = 16 + ETH_IP_TCP
    if op <= 3 and len(rec) > payload_at:                       # payload bytes
        body = mut(bytes(rec[payload_at:]), len(rec) - payload_at + 64)
        recs[i] = rec = rec[:payload_at] + bytearray(body)
        _set_lengths(rec)
    elif op == 4 and len(rec) >= payload_at + 4:                # an int32 to an edge value
        at = rng.randrange(payload_at, len(rec) - 3)
        v = rng.choice(_EDGES)
        struct.pack_into(">I", rec, at, v & 0xFFFFFFFF)
    elif op == 5:
        del recs[i]
    elif op == 6:
        recs.insert(i, bytearray(rec))
    elif op == 7 and i + 1 < len(recs):
        recs[i], recs[i + 1] = recs[i + 1], recs[i]
    elif op == 8:                                               # truncate the file
        flat = header + b"".join(recs)
        return flat[:rng.randrange(24, len(flat) + 1)]
    else:                                                       # raw bytes anywhere
        return mut(header + b"".join(recs), len(data) + 64)
    return header + b"".join(recs)


def _flip(data: bytes, max_size: int, rng: random.Random) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        r = rng.random()
        if not b or r < 0.2:
            at = rng.randrange(len(b) + 1)
            b[at:at] = rng.randbytes(rng.randint(1, 16))
        elif r < 0.35:
            at = rng.randrange(len(b))
            del b[at:at + rng.randint(1, 16)]
        else:
            b[rng.randrange(len(b))] = rng.randrange(256)
    return bytes(b[:max_size])
