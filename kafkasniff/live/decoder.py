"""The decoder processes of the live engine.

Each runs a :class:`kafkasniff.pipeline.Pipeline` over the packets of its connections
(reassembly and pairing are exact: both directions of a connection come to one decoder),
and through a :class:`kafkasniff.live.outputs.DecoderSink` renders exchanges and issues,
writes ``--export`` files, prepares the terminal UI's data, shares the topic ids it learns
and holds exchanges whose ids are not known yet; it sends text and its statistics to the
collector (:mod:`kafkasniff.live.messages`). Connection ids are unique across decoders:
decoder ``i`` numbers from ``i * CONN_ID_STRIDE``.

See :mod:`kafkasniff.live` for how the parts fit together.
"""

from __future__ import annotations

import os
import queue as queue_mod
import struct
import time
import traceback

from kafkasniff.capture.pcapfile import packed_records, tpacket_v3_packets
from kafkasniff.live.backends import (FLAG_COOKED, FLAG_SKIP_OUTGOING, KIND_SECRETS,
                                      KIND_SOURCE_END, KIND_TPACKET_V3, batch_header)
from kafkasniff.live.config import CONN_ID_STRIDE, END_BARRIER_S, KEPT_AT_END, LiveConfig
from kafkasniff.live.messages import (AllFed, DecoderDone, DecoderFailed, DecoderFed,
                                      DecoderOutput, DetailReply, KeptExchanges)
from kafkasniff.live.procs import ignore_signals, profiled

__all__ = ["decoder_main"]


@profiled
def decoder_main(wid: int, cfg: LiveConfig, inq, ctlq, resq, defs=None) -> None:
    """Decoder process body: batches in, rendered exchanges and stats out.

    Args:
        wid: this decoder's index (0 .. ``cfg.workers`` - 1); its connection ids start at
            ``wid * CONN_ID_STRIDE``.
        cfg: the :class:`~kafkasniff.live.config.LiveConfig`.
        inq: its :class:`kafkasniff.parallel.shm.Channel`: batches from the capture process
            (``KIND_RECORDS``: :data:`~kafkasniff.live.dispatch.packet_record` + bytes per
            packet, read by :func:`~kafkasniff.capture.pcapfile.packed_records`;
            ``KIND_TPACKET_V3``: a whole ring block, walked by
            :func:`~kafkasniff.capture.pcapfile.tpacket_v3_packets`); closed at the end of
            capture.
        ctlq: its control queue from the collector:
            :class:`~kafkasniff.live.messages.TopicIdsLearned`,
            :class:`~kafkasniff.live.messages.DetailRequest`, and :class:`AllFed` at the end
            barrier.
        resq: the result queue to the collector (shared by the decoders):
            :class:`DecoderOutput` every 0.05-0.25 s, :class:`DetailReply`,
            :class:`DecoderFed`, then :class:`KeptExchanges` (TUI), :class:`DecoderDone`;
            or :class:`DecoderFailed` when this body raises (nothing propagates).
        defs: the protocol definitions, loaded once before the fork (``None``: loaded here).

    Returns quietly, sending nothing more, when the main process disappears.
    """
    ignore_signals()
    from kafkasniff.live.outputs import DecoderSink
    from kafkasniff.pipeline import Pipeline, PipelineOptions

    parent = os.getppid()
    orphan = False
    try:
        pipe = Pipeline(PipelineOptions(**cfg.pipeline, meta_records=True,
                                        first_conn_id=wid * CONN_ID_STRIDE), defs)
        sink = DecoderSink(cfg, pipe, wid)
        # what exists now (definitions) lives for the whole run: keep it out of the cyclic
        # collector's full sweeps (no collection first: see parallel.worker.decoder_main)
        import gc

        gc.freeze()
        if cfg.export:
            from kafkasniff.live.outputs import LiveExport

            sink.export = LiveExport(pipe, wid, **cfg.export)
            sink.export.known = sink.remote
        feed = pipe.feed
        handle = sink.handle
        st = pipe.stats

        def control(msgs: list) -> None:
            # topic ids from other decoders; detail requests, answered at once
            sink.apply_control(msgs)
            for rid, ex in sink.replies:
                _put(resq, DetailReply(rid, ex), parent)
            sink.replies.clear()

        def send() -> None:
            items, learned, extra = sink.take()
            _put(resq, DecoderOutput(wid, items, learned, extra, st.to_dict(),
                                     sink.take_metrics()), parent)

        last_send = time.monotonic()
        while True:
            msg = inq.get(0.05)
            if msg is None:
                break
            if not ctlq.empty():
                control(_drain(ctlq))
            if msg:
                buf = msg[0]
                kind, blt, bflags = batch_header.unpack_from(buf, 0)
                if kind == KIND_TPACKET_V3:
                    _feed_block(buf, _BATCH_HDR, blt, bflags, feed, handle)
                elif kind == KIND_SECRETS:
                    pipe.add_secrets(struct.unpack_from("<I", buf, _BATCH_HDR)[0],
                                     bytes(buf[_BATCH_HDR + 4:]))
                elif kind == KIND_SOURCE_END:
                    _source_end(pipe, handle, bytes(buf[_BATCH_HDR:]))
                else:
                    for _, _, pkt in packed_records(buf, _BATCH_HDR):
                        out = feed(pkt)
                        if out:
                            handle(out)
            now = time.monotonic()
            sink.tick(now)
            if sink.export is not None:
                sink.export.tick(now)
            if (sink.pending and now - last_send >= 0.05) or now - last_send >= 0.25:
                if os.getppid() != parent:
                    orphan = True               # the collector is gone: nobody reads
                    break
                send()
                last_send = now
        if orphan:
            return
        handle(pipe.finish())
        if cfg.workers > 1:
            # end barrier: every decoder has fed its last packet and its learnt topic ids
            # were forwarded before AllFed (one FIFO per decoder), so held exchanges get
            # every name the whole capture taught before they are released
            send()
            _put(resq, DecoderFed(wid), parent)
            deadline = time.monotonic() + END_BARRIER_S
            while time.monotonic() < deadline:
                try:
                    msg = ctlq.get(timeout=0.1)
                except queue_mod.Empty:
                    continue
                if type(msg) is AllFed:
                    break
                control([msg])
        sink.release_all()
        if sink.export is not None:
            sink.export.close()
        send()
        if cfg.tui and sink.recent:
            # the terminal UI outlives the capture: hand over the last whole exchanges
            _put(resq, KeptExchanges(wid, list(sink.recent.values())[-KEPT_AT_END:]), parent)
        _put(resq, DecoderDone(wid, st.to_dict()), parent)
    except _Orphaned:
        orphan = True
    except BaseException as exc:  # noqa: BLE001 - reported to the collector
        try:
            _put(resq, DecoderFailed(wid, f"{type(exc).__name__}: {exc}",
                                     traceback.format_exc()), parent)
        except _Orphaned:
            orphan = True
    finally:
        if orphan or os.getppid() != parent:
            resq.cancel_join_thread()           # nobody will read what is left
        resq.close()
        resq.join_thread()


class _Orphaned(Exception):
    """The main process is gone."""


def _put(q, msg, parent: int) -> None:
    """``q.put(msg)``, waiting for room as long as the main process lives."""
    while True:
        try:
            q.put(msg, timeout=1.0)
            return
        except queue_mod.Full:
            if os.getppid() != parent:
                raise _Orphaned() from None


_BATCH_HDR = batch_header.size


def _feed_block(buf: bytes, base: int, link_type: int, flags: int, feed, handle) -> None:
    """Feed the packets of a TPACKET_V3 block (``buf[base:]``) to the pipeline, walked by
    :func:`~kafkasniff.capture.pcapfile.tpacket_v3_packets` (compiled: the packets are made
    in C), cooked headers built and outgoing copies skipped as the block's flags say."""
    for pkt in tpacket_v3_packets(buf, base, link_type, bool(flags & FLAG_COOKED),
                                  bool(flags & FLAG_SKIP_OUTGOING)):
        out = feed(pkt)
        if out:
            handle(out)


def _source_end(pipe, handle, data: bytes) -> None:
    """The end of a ``-r`` stream (decoder 0, after its last packet): its damage becomes
    standalone issues and its own bytes go into the ledger, as ``read`` does at the end of
    a file (:func:`kafkasniff.pipeline.analyze`)."""
    import pickle

    issues, accounting = pickle.loads(data)
    if issues:
        handle([pipe.feed_issue(i) for i in issues])
    if accounting:
        pipe.account_source(accounting)


def _drain(q) -> list:
    """Everything waiting in ``q`` now (a list, maybe empty), without blocking."""
    out = []
    while True:
        try:
            out.append(q.get_nowait())
        except queue_mod.Empty:
            return out
