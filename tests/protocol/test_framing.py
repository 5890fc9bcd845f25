"""Framer: size-prefixed Kafka frames out of one TCP stream direction.

Whole, byte by byte, random chunkings, trailing data, gaps inside and across frames,
oversize frames, joining mid-stream (TENTATIVE) and resync (HUNTING).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkasniff.issues import IssueKind
from kafkasniff.protocol.detect import request_validator
from kafkasniff.protocol.framing import Frame, Framer, FramerIssue
from kafkasniff.protocol.schema import load_definitions

from tests.pairing.frames import i32, metadata_v1_request, request_stream, response

DEFS = load_definitions()
FRAMES = request_stream(6)
STREAM = b"".join(FRAMES)
OFFSETS = [sum(len(f) for f in FRAMES[:i]) for i in range(len(FRAMES))]


def frames_of(events):
    return [e for e in events if isinstance(e, Frame)]


def issues_of(events):
    return [e for e in events if isinstance(e, FramerIssue)]


def req_framer(**kw) -> Framer:
    kw.setdefault("min_frame_bytes", 8)
    return Framer(request_validator(DEFS), **kw)


def feed_chunks(framer: Framer, data: bytes, cuts: list[int], start: int = 0, ts0: int = 1000):
    """Feed ``data`` split at ``cuts``; chunk i gets ts ``ts0 + i``. Returns (events, chunk spans)."""
    bounds = [0] + sorted(set(c for c in cuts if 0 < c < len(data))) + [len(data)]
    out, spans = [], []
    for i, (a, b) in enumerate(zip(bounds, bounds[1:])):
        out.extend(framer.feed(data[a:b], start + a, ts0 + i))
        spans.append((start + a, start + b, ts0 + i))
    return out, spans


def ts_of(spans, offset: int) -> int:
    for a, b, ts in spans:
        if a <= offset < b:
            return ts
    raise AssertionError(f"offset {offset} not fed")


def check_stream(events, spans, frames=FRAMES, offsets=OFFSETS, start: int = 0):
    got = frames_of(events)
    assert [f.payload for f in got] == [f[4:] for f in frames]
    assert [f.size for f in got] == [len(f) - 4 for f in frames]
    assert [f.stream_offset for f in got] == [start + o for o in offsets]
    assert all(f.missing_bytes == 0 for f in got)
    for f, raw in zip(got, frames):
        assert f.first_ts_ns == ts_of(spans, f.stream_offset)
        assert f.last_ts_ns == ts_of(spans, f.stream_offset + len(raw) - 1)
    assert issues_of(events) == []


# --------------------------------------------------------------------------- clean streams

def test_whole_stream_in_one_feed():
    fr = req_framer()
    events, spans = feed_chunks(fr, STREAM, [])
    check_stream(events, spans)
    assert all(f.first_ts_ns == f.last_ts_ns == 1000 for f in frames_of(events))
    assert fr.close(5000) == []


def test_byte_by_byte():
    fr = req_framer()
    events, spans = feed_chunks(fr, STREAM, list(range(len(STREAM))))
    check_stream(events, spans)
    # the first frame's first byte came in chunk 0, its last byte in chunk len-1
    assert frames_of(events)[0].first_ts_ns == 1000
    assert frames_of(events)[0].last_ts_ns == 1000 + len(FRAMES[0]) - 1
    assert fr.close(5000) == []


def test_start_offset_is_honoured():
    fr = req_framer(start_offset=10_000)
    events, spans = feed_chunks(fr, STREAM, [3, 50, 51], start=10_000)
    check_stream(events, spans, start=10_000)


@settings(max_examples=150, deadline=None)
@given(cuts=st.lists(st.integers(1, len(STREAM) - 1), max_size=40),
       start=st.sampled_from([0, 1, 2**40]))
def test_random_chunkings_give_the_same_frames(cuts, start):
    fr = req_framer(start_offset=start)
    events, spans = feed_chunks(fr, STREAM, cuts, start=start)
    check_stream(events, spans, start=start)
    assert fr.close(9999) == []


def test_response_direction_frames():
    raw = [response(1, b"\x00\x00"), response(2, b""), response(3, b"x" * 300)]
    fr = Framer(None, min_frame_bytes=4)
    events, spans = feed_chunks(fr, b"".join(raw), [1, 7, 9])
    check_stream(events, spans, raw, [0, len(raw[0]), len(raw[0]) + len(raw[1])])


def test_retransmitted_overlap_is_ignored():
    fr = req_framer()
    a = fr.feed(STREAM[:30], 0, 1)
    b = fr.feed(STREAM[:30], 0, 2)          # the same bytes again
    c = fr.feed(STREAM[20:], 20, 3)         # partial overlap
    got = frames_of(a + b + c)
    assert [f.payload for f in got] == [f[4:] for f in FRAMES]
    assert issues_of(a + b + c) == []


LARGE = [response(1, b"a" * 20_000), response(2, b"b" * 5), response(3, b"c" * 9_000)]
LARGE_STREAM = b"".join(LARGE)


def test_a_large_frame_over_many_segments_then_more_in_its_last_one():
    """A frame spanning many segments is held as they came and made at its last byte; the
    segment that ends it also carries the next frame whole and the start of a third."""
    fr = Framer(None, min_frame_bytes=4)
    end0 = len(LARGE[0])
    cuts = list(range(1448, end0, 1448)) + [end0 + len(LARGE[1]) + 3000]
    events, spans = feed_chunks(fr, LARGE_STREAM, cuts)
    check_stream(events, spans, LARGE, [0, end0, end0 + len(LARGE[1])])
    assert fr.close(9999) == []
    assert fr.framed_bytes == len(LARGE_STREAM)


def test_retransmission_inside_a_large_frame_is_ignored():
    """The expected offset counts the segments held for an unfinished frame: a segment sent
    again, or overlapping the last one, adds nothing."""
    fr = Framer(None, min_frame_bytes=4)
    out = fr.feed(LARGE_STREAM[:5000], 0, 1)
    out += fr.feed(LARGE_STREAM[5000:9000], 5000, 2)
    out += fr.feed(LARGE_STREAM[5000:9000], 5000, 3)         # the same segment again
    out += fr.feed(LARGE_STREAM[8000:], 8000, 4)             # overlapping the last one
    assert [f.payload for f in frames_of(out)] == [f[4:] for f in LARGE]
    assert [(f.first_ts_ns, f.last_ts_ns) for f in frames_of(out)] == [(1, 4), (4, 4), (4, 4)]
    assert fr.resync_bytes == 4000 + 1000
    assert issues_of(out) == []


@pytest.mark.parametrize("end", ["gap", "close"])
def test_a_large_frame_cut_while_held(end):
    """A gap or the end inside a frame whose segments are held reports it as a gap or an end
    inside any frame: the bytes held are its payload so far."""
    fr = Framer(None, min_frame_bytes=4)
    out = fr.feed(LARGE_STREAM[:3000], 0, 1) + fr.feed(LARGE_STREAM[3000:7000], 3000, 2)
    if end == "gap":
        out += fr.gap(7000, 1000, 3)
        out += fr.feed(LARGE_STREAM[8000:], 8000, 4)
        out += fr.close(5)
    else:
        out += fr.close(3)
    first = frames_of(out)[0]
    assert first.payload == LARGE[0][4:7000] and first.stream_offset == 0
    if end == "gap":        # sync kept: the frames after the damaged one are whole
        assert first.missing_bytes == 1000
        assert fr.after_gap_bytes == len(LARGE[0]) - 8000
        assert [f.payload for f in frames_of(out)[1:]] == [f[4:] for f in LARGE[1:]]
    else:
        assert first.missing_bytes == len(LARGE[0]) - 7000
        assert [i.kind for i in issues_of(out)] == [IssueKind.FRAME_TRUNCATED]


# --------------------------------------------------------------------------- trailing data

def test_trailing_partial_frame_then_close():
    last = FRAMES[-1]
    cut = len(STREAM) - 5                   # stream ends 5 bytes before the end of the last frame
    fr = req_framer()
    events = fr.feed(STREAM[:cut], 0, 100)
    assert len(frames_of(events)) == len(FRAMES) - 1
    assert issues_of(events) == []
    end = fr.close(777)
    [f] = frames_of(end)
    [issue] = issues_of(end)
    assert f.stream_offset == OFFSETS[-1]
    assert f.size == len(last) - 4
    assert f.missing_bytes == 5
    assert f.payload == last[4:-5]
    assert f.first_ts_ns == f.last_ts_ns == 100
    assert issue.kind == IssueKind.FRAME_TRUNCATED
    assert issue.stream_offset == OFFSETS[-1]
    assert issue.length_bytes == 5
    assert fr.close(778) == []              # idempotent


def test_trailing_partial_size_prefix_then_close():
    fr = req_framer()
    events = fr.feed(STREAM + b"\x00\x00", 0, 1)
    assert len(frames_of(events)) == len(FRAMES)
    end = fr.close(2)
    assert frames_of(end) == []
    [issue] = issues_of(end)
    assert issue.kind == IssueKind.FRAME_TRUNCATED
    assert issue.stream_offset == len(STREAM)
    assert issue.length_bytes == 2


def test_trailing_partial_frame_byte_by_byte():
    fr = req_framer()
    data = STREAM[:OFFSETS[2] + 9]
    events, _ = feed_chunks(fr, data, list(range(len(data))))
    assert len(frames_of(events)) == 2
    [f] = frames_of(fr.close(0))
    assert f.stream_offset == OFFSETS[2]
    assert f.missing_bytes == len(FRAMES[2]) - 9
    assert f.first_ts_ns == 1000 + OFFSETS[2]
    assert f.last_ts_ns == 1000 + OFFSETS[2] + 8


# --------------------------------------------------------------------------- gaps

@pytest.mark.parametrize("split", ["whole", "bytewise"])
def test_gap_inside_a_frame_keeps_sync(split):
    """A gap strictly inside frame 2: frame 2 comes out damaged, frames 3.. in sync."""
    g_off = OFFSETS[2] + 6
    g_len = 5
    assert g_off + g_len < OFFSETS[3]
    fr = req_framer()
    before = STREAM[:g_off]
    after = STREAM[g_off + g_len:]
    if split == "whole":
        events = fr.feed(before, 0, 10)
        events += fr.gap(g_off, g_len, 20)
        events += fr.feed(after, g_off + g_len, 30)
    else:
        events = []
        for i, b in enumerate(before):
            events += fr.feed(bytes([b]), i, 10)
        events += fr.gap(g_off, g_len, 20)
        for i, b in enumerate(after):
            events += fr.feed(bytes([b]), g_off + g_len + i, 30)
    got = frames_of(events)
    assert [f.stream_offset for f in got] == OFFSETS
    damaged = got[2]
    assert damaged.size == len(FRAMES[2]) - 4
    assert damaged.payload == FRAMES[2][4:6]
    # only the gap's bytes are missing: the captured rest is counted, not called lost (it
    # used to be reported as never captured)
    assert damaged.missing_bytes == g_len
    assert fr.after_gap_bytes == len(FRAMES[2]) - 6 - g_len
    assert damaged.first_ts_ns == 10 and damaged.last_ts_ns == 30
    for f, raw in zip(got[3:], FRAMES[3:]):
        assert f.payload == raw[4:] and f.missing_bytes == 0 and f.first_ts_ns == 30
    [issue] = issues_of(events)
    assert issue.kind == IssueKind.FRAME_DAMAGED
    assert issue.stream_offset == g_off
    assert issue.length_bytes == g_len
    assert fr.close(99) == []


def test_gap_ending_exactly_at_frame_end():
    g_off = OFFSETS[1] + 10
    g_end = OFFSETS[2]
    fr = req_framer()
    events = fr.feed(STREAM[:g_off], 0, 1) + fr.gap(g_off, g_end - g_off, 2)
    events += fr.feed(STREAM[g_end:], g_end, 3)
    got = frames_of(events)
    assert [f.stream_offset for f in got] == OFFSETS
    assert got[1].missing_bytes == g_end - g_off
    assert [i.kind for i in issues_of(events)] == [IssueKind.FRAME_DAMAGED]


def test_gap_right_after_the_size_prefix():
    g_off = OFFSETS[3] + 4
    g_end = OFFSETS[4] - 1
    fr = req_framer()
    events = fr.feed(STREAM[:g_off], 0, 1) + fr.gap(g_off, g_end - g_off, 2)
    events += fr.feed(STREAM[g_end:], g_end, 3)
    got = frames_of(events)
    assert [f.stream_offset for f in got] == OFFSETS
    assert got[3].payload == b"" and got[3].missing_bytes == g_end - g_off
    assert fr.after_gap_bytes == 1
    assert [f.payload for f in got[4:]] == [f[4:] for f in FRAMES[4:]]


def test_feed_past_the_expected_offset_is_an_implicit_gap():
    g_off = OFFSETS[2] + 6
    fr = req_framer()
    events = fr.feed(STREAM[:g_off], 0, 1) + fr.feed(STREAM[g_off + 4:], g_off + 4, 2)
    assert [f.stream_offset for f in frames_of(events)] == OFFSETS
    [issue] = issues_of(events)
    assert issue.kind == IssueKind.FRAME_DAMAGED and issue.length_bytes == 4


def test_gap_across_a_boundary_resyncs_on_the_next_valid_frame():
    """Gap from inside frame 1 to inside frame 2: frame 1 damaged, then hunting; the captured
    tail of frame 2 is skipped and reported; frames 3.. come out."""
    g_off = OFFSETS[1] + 8
    g_end = OFFSETS[2] + 3
    fr = req_framer()
    events = fr.feed(STREAM[:g_off], 0, 1) + fr.gap(g_off, g_end - g_off, 2)
    events += fr.feed(STREAM[g_end:], g_end, 3)
    got = frames_of(events)
    assert [f.stream_offset for f in got] == OFFSETS[:2] + OFFSETS[3:]
    assert got[1].missing_bytes == len(FRAMES[1]) - 8
    assert [f.payload for f in got[2:]] == [f[4:] for f in FRAMES[3:]]
    kinds = [i.kind for i in issues_of(events)]
    assert kinds == [IssueKind.FRAME_DAMAGED, IssueKind.RESYNC]
    damaged, resync = issues_of(events)
    assert damaged.stream_offset == g_off
    assert damaged.length_bytes == OFFSETS[2] - g_off   # the part of the gap inside frame 1
    assert resync.length_bytes == OFFSETS[3] - g_end     # captured bytes skipped
    assert fr.close(9) == []


def test_gap_between_frames_then_mid_frame_data_resyncs():
    g_off = OFFSETS[2]
    g_end = OFFSETS[2] + 11
    fr = req_framer()
    events = fr.feed(STREAM[:g_off], 0, 1) + fr.gap(g_off, g_end - g_off, 2)
    assert issues_of(events) == []
    events += fr.feed(STREAM[g_end:], g_end, 3)
    got = frames_of(events)
    assert [f.stream_offset for f in got] == OFFSETS[:2] + OFFSETS[3:]
    [resync] = issues_of(events)
    assert resync.kind == IssueKind.RESYNC
    assert resync.length_bytes == OFFSETS[3] - g_end
    assert resync.stream_offset == g_end


def test_gap_between_frames_landing_on_a_boundary_needs_no_resync():
    fr = req_framer()
    events = fr.feed(STREAM[:OFFSETS[2]], 0, 1) + fr.gap(OFFSETS[2], len(FRAMES[2]), 2)
    events += fr.feed(STREAM[OFFSETS[3]:], OFFSETS[3], 3)
    assert [f.stream_offset for f in frames_of(events)] == OFFSETS[:2] + OFFSETS[3:]
    assert issues_of(events) == []


def test_resync_after_a_clean_resync_reports_the_new_hunt_offset():
    """After a gap that lands on a boundary (hunt ends at once, no issue), a later hunt must
    report where *it* started skipping, not where the earlier one began."""
    extra = metadata_v1_request(99)
    data = STREAM + extra
    fr = req_framer()
    events = fr.feed(data[:OFFSETS[1]], 0, 1) + fr.gap(OFFSETS[1], len(FRAMES[1]), 2)
    events += fr.feed(data[OFFSETS[2]:OFFSETS[5]], OFFSETS[2], 3)
    assert [f.stream_offset for f in frames_of(events)] == [0] + OFFSETS[2:5]
    assert issues_of(events) == []
    g_end = OFFSETS[5] + 9
    events = fr.gap(OFFSETS[5], 9, 4) + fr.feed(data[g_end:], g_end, 5)
    assert [f.payload for f in frames_of(events)] == [extra[4:]]
    [resync] = issues_of(events)
    assert resync.kind == IssueKind.RESYNC
    assert resync.length_bytes == len(STREAM) - g_end
    assert resync.stream_offset == g_end
    assert resync.ts_ns in (4, 5)


def test_gap_while_skipping_the_rest_of_a_damaged_frame():
    """Gap inside frame 1 (framer skips the rest of it), then a second gap running from inside
    frame 1 into frame 2: frames 3.. come out, one resync counting the captured bytes skipped
    (the bytes lost in the gap are already counted by the gap, as for a single such gap)."""
    g1 = OFFSETS[1] + 6
    g2 = OFFSETS[1] + 20
    g2_end = OFFSETS[2] + 5
    fr = req_framer()
    events = fr.feed(STREAM[:g1], 0, 1) + fr.gap(g1, 3, 2)
    events += fr.feed(STREAM[g1 + 3:g2], g1 + 3, 3)
    events += fr.gap(g2, g2_end - g2, 4) + fr.feed(STREAM[g2_end:], g2_end, 5)
    got = frames_of(events)
    assert [f.stream_offset for f in got] == OFFSETS[:2] + OFFSETS[3:]
    kinds = [i.kind for i in issues_of(events)]
    assert kinds == [IssueKind.FRAME_DAMAGED, IssueKind.RESYNC]
    resync = issues_of(events)[1]
    assert resync.length_bytes == OFFSETS[3] - g2_end


def test_gap_inside_a_partial_size_prefix_resyncs():
    g_off = OFFSETS[2] + 2
    g_end = OFFSETS[2] + 20
    fr = req_framer()
    events = fr.feed(STREAM[:g_off], 0, 1) + fr.gap(g_off, g_end - g_off, 2)
    events += fr.feed(STREAM[g_end:], g_end, 3)
    assert [f.stream_offset for f in frames_of(events)] == OFFSETS[:2] + OFFSETS[3:]
    [resync] = issues_of(events)
    assert resync.kind == IssueKind.RESYNC
    # the 2 buffered bytes of the size prefix are dropped too, and counted
    assert resync.length_bytes == 2 + OFFSETS[3] - g_end
    assert resync.stream_offset == OFFSETS[2]


# --------------------------------------------------------------------------- bounds

def test_oversize_frame_is_reported_and_sync_regained():
    junk = i32(5000) + bytes(20)
    data = FRAMES[0] + junk + FRAMES[1] + FRAMES[2]
    for cuts in ([], list(range(len(data)))):
        fr = req_framer(max_frame_bytes=1000)
        events, _ = feed_chunks(fr, data, cuts)
        got = frames_of(events)
        assert [f.payload for f in got] == [f[4:] for f in FRAMES[:3]]
        off1 = len(FRAMES[0]) + len(junk)
        assert [f.stream_offset for f in got] == [0, off1, off1 + len(FRAMES[1])]
        too_large, resync = issues_of(events)
        assert too_large.kind == IssueKind.FRAME_TOO_LARGE
        assert too_large.stream_offset == len(FRAMES[0])
        assert "5000" in too_large.message
        assert resync.kind == IssueKind.RESYNC
        assert resync.stream_offset == len(FRAMES[0])
        assert resync.length_bytes == len(junk)


def test_frame_of_exactly_max_frame_bytes_passes_and_one_more_byte_does_not():
    """The bound is inclusive: a payload of ``max_frame_bytes`` is a frame, one of
    ``max_frame_bytes + 1`` is frame_too_large (whole segments and byte by byte)."""
    sizes = [len(f) - 4 for f in FRAMES]
    big = max(range(len(FRAMES)), key=lambda i: sizes[i])
    for cuts in ([], list(range(len(STREAM)))):
        fr = req_framer(max_frame_bytes=sizes[big])
        events, _ = feed_chunks(fr, STREAM, cuts)
        assert [f.size for f in frames_of(events)] == sizes
        assert issues_of(events) == []
        fr = req_framer(max_frame_bytes=sizes[big] - 1)
        events, _ = feed_chunks(fr, STREAM, cuts)
        too_large = [i for i in issues_of(events) if i.kind == IssueKind.FRAME_TOO_LARGE]
        assert [i.stream_offset for i in too_large] == [OFFSETS[big]]
        assert str(sizes[big]) in too_large[0].message
        assert OFFSETS[big] not in [f.stream_offset for f in frames_of(events)]


def test_negative_and_tiny_sizes_lose_sync():
    data = FRAMES[0] + i32(-7) + b"\x01\x02" + FRAMES[1]
    fr = req_framer()
    events = fr.feed(data, 0, 1)
    assert [f.payload for f in frames_of(events)] == [FRAMES[0][4:], FRAMES[1][4:]]
    [resync] = issues_of(events)
    assert resync.kind == IssueKind.RESYNC and resync.length_bytes == 6


def test_hunting_to_the_end_reports_skipped_bytes_at_close():
    fr = req_framer()
    events = fr.feed(FRAMES[0] + i32(-1) + b"not kafka at all", 0, 1)
    assert len(frames_of(events)) == 1 and issues_of(events) == []
    [resync] = fr.close(2)
    assert resync.kind == IssueKind.RESYNC
    assert resync.length_bytes == 4 + len(b"not kafka at all")
    assert resync.stream_offset == len(FRAMES[0])


# --------------------------------------------------------------------------- joined mid-stream

@pytest.mark.parametrize("bytewise", [False, True])
def test_tentative_start_inside_a_frame_resyncs_to_the_first_real_request(bytewise):
    drop = 7
    data = STREAM[drop:]
    fr = req_framer(synced=False, start_offset=drop)
    events, spans = feed_chunks(fr, data, list(range(len(data))) if bytewise else [],
                                start=drop)
    got = frames_of(events)
    assert [f.stream_offset for f in got] == OFFSETS[1:]
    assert [f.payload for f in got] == [f[4:] for f in FRAMES[1:]]
    [resync] = issues_of(events)
    assert resync.kind == IssueKind.RESYNC
    assert resync.stream_offset == drop
    assert resync.length_bytes == len(FRAMES[0]) - drop
    assert resync.ts_ns == 1000
    assert fr.close(0) == []


@pytest.mark.parametrize("drop", range(1, len(FRAMES[0])))
def test_tentative_start_at_every_offset_of_the_first_frame(drop):
    fr = req_framer(synced=False, start_offset=drop)
    events = fr.feed(STREAM[drop:], drop, 1)
    assert [f.stream_offset for f in frames_of(events)] == OFFSETS[1:]
    [resync] = issues_of(events)
    assert resync.length_bytes == len(FRAMES[0]) - drop


@pytest.mark.parametrize("start", [0, 1])
def test_tentative_start_exactly_at_a_boundary_has_no_issue(start):
    drop = OFFSETS[start]
    fr = req_framer(synced=False, start_offset=drop)
    events, spans = feed_chunks(fr, STREAM[drop:], [1, 13, 14, 40], start=drop)
    check_stream(events, spans, FRAMES[start:], OFFSETS[start:])


def test_tentative_non_kafka_stream_never_yields_frames():
    data = b"GET / HTTP/1.1\r\nHost: example\r\nAccept: */*\r\n\r\n" * 3
    fr = req_framer(synced=False)
    events = fr.feed(data, 0, 1)
    assert events == []
    [resync] = fr.close(2)
    assert resync.kind == IssueKind.RESYNC
    assert resync.length_bytes == len(data)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(STREAM)), st.integers(1, 40)), max_size=4),
       st.lists(st.integers(1, len(STREAM)), max_size=8), st.booleans())
def test_every_byte_fed_is_framed_or_counted(gaps, cuts, mid_stream):
    """Bytes fed = framed + skipped while hunting + captured after a gap inside a frame +
    a size prefix cut by the end (DESIGN: nothing is dropped silently), for any gaps."""
    lost = set()
    for off, n in gaps:
        lost.update(range(off, min(off + n, len(STREAM))))
    fr = req_framer(synced=not mid_stream)
    fed = 0
    bounds = [0] + sorted(set(c for c in cuts if 0 < c < len(STREAM))) + [len(STREAM)]
    for a, b in zip(bounds, bounds[1:]):
        i = a
        while i < b:
            j = i
            if i in lost:
                while j < b and j in lost:
                    j += 1
                fr.gap(i, j - i, 1)
            else:
                while j < b and j not in lost:
                    j += 1
                fr.feed(STREAM[i:j], i, 1)
                fed += j - i
            i = j
    fr.close(2)
    assert fr.framed_bytes + fr.resync_bytes + fr.after_gap_bytes + fr.truncated_bytes == fed
