"""The messages the live engine's processes exchange through ``multiprocessing`` queues.

One frozen, slotted dataclass per kind; receivers dispatch on ``type(msg)``. They are
pickled by the queues (frozen slotted dataclasses pickle by their fields), so every field
holds picklable values only. Packets do not travel here: they go through the shared-memory
channels of :mod:`kafkasniff.parallel.shm`.

* **Result queue** (every decoder -> collector, bounded): :class:`DecoderOutput`,
  :class:`DetailReply`, :class:`DecoderFed`, :class:`KeptExchanges`, :class:`DecoderDone`,
  :class:`DecoderFailed`.
* **Control queues** (collector -> decoder ``i``, one each): :class:`TopicIdsLearned`,
  :class:`AllFed`, :class:`DetailRequest`.
* **Error queue** (capture process -> collector): :class:`CaptureFailed`. (The damage a
  ``-r`` stream reader meets travels with the packets, to decoder 0, which reports it as
  ``read`` does: :meth:`kafkasniff.live.dispatch.Dispatcher.add_source_end`.)

A message is read-only once built, but the lists it carries are not copied: the sender must
not touch them after sending (the queue pickles them in a feeder thread).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "AllFed",
    "CaptureFailed",
    "DecoderDone",
    "DecoderFailed",
    "DecoderFed",
    "DecoderOutput",
    "DetailReply",
    "DetailRequest",
    "KeptExchanges",
    "TopicIdsLearned",
]


# --------------------------------------------------------------------------- result queue


@dataclass(frozen=True, slots=True)
class DecoderOutput:
    """What a decoder produced since its previous send (every 0.05-0.25 s, and at the end).

    Attributes:
        wid: the decoder's index (0 .. workers-1).
        items: rendered output in the order the decoder produced it, a list of
            ``(kind, text)``: ``kind`` ``"e"`` (exchange) or ``"i"`` (standalone issue),
            ``text`` one console line (several with ``--records``) or one JSON object, no
            trailing newline; ``""`` for output ``count``. Empty for output ``none``.
        learned: topic ids learnt from Metadata responses, a list of
            ``(topic_id, name, ts_ns)``: Kafka's text form of the uuid, the topic name, and
            the capture time (integer ns since the epoch) of the response that taught it.
        extra: the terminal UI's data (``LiveConfig.tui``, else empty), a list of
            ``("x", light Exchange)``, ``("i", DecodeIssue)``, ``("c", ConnectionSummary)``.
        stats: the decoder's ``PipelineStats.to_dict()`` so far (cumulative, not a delta).
        metrics: ``--metrics-port``: the exchanges' metrics since the previous send (a
            :meth:`kafkasniff.metrics.families.ExchangeMetrics.take_delta`), else ``None``.
    """

    wid: int
    items: list
    learned: list
    extra: list
    stats: dict
    metrics: dict | None = None


@dataclass(frozen=True, slots=True)
class DetailReply:
    """A decoder's answer to a :class:`DetailRequest`.

    Attributes:
        request_id: the request's id.
        exchange: the whole :class:`kafkasniff.model.Exchange` (decoded bodies, no frame
            bytes), or ``None`` when the decoder no longer keeps it.
    """

    request_id: int
    exchange: Any


@dataclass(frozen=True, slots=True)
class DecoderFed:
    """A decoder has fed its last packet to its pipeline and sent what it learnt (only with
    several decoders: the end barrier).

    Attributes:
        wid: the decoder's index.
    """

    wid: int


@dataclass(frozen=True, slots=True)
class KeptExchanges:
    """A decoder's last whole exchanges, handed over at the end for the terminal UI's detail
    view (which outlives the capture; only with ``LiveConfig.tui``).

    Attributes:
        wid: the decoder's index.
        exchanges: at most ``KEPT_AT_END`` whole :class:`kafkasniff.model.Exchange`, oldest
            first.
    """

    wid: int
    exchanges: list


@dataclass(frozen=True, slots=True)
class DecoderDone:
    """A decoder has finished: its last :class:`DecoderOutput` was sent before this.

    Attributes:
        wid: the decoder's index.
        stats: its final ``PipelineStats.to_dict()``.
    """

    wid: int
    stats: dict


@dataclass(frozen=True, slots=True)
class DecoderFailed:
    """A decoder raised; it sends nothing more.

    Attributes:
        wid: the decoder's index.
        error: ``"ExceptionType: message"``.
        traceback: the formatted traceback (shown with ``$KAFKASNIFF_DEBUG``).
    """

    wid: int
    error: str
    traceback: str


# --------------------------------------------------------------------------- control queues


@dataclass(frozen=True, slots=True)
class TopicIdsLearned:
    """Topic ids another decoder learnt (forwarded by the collector from its
    :class:`DecoderOutput`), so that exchanges held for them can be named.

    Attributes:
        learned: a list of ``(topic_id, name, ts_ns)`` as in :attr:`DecoderOutput.learned`.
    """

    learned: list


@dataclass(frozen=True, slots=True)
class AllFed:
    """Every decoder has fed its last packet (:class:`DecoderFed` or done) and its learnt
    topic ids were forwarded before this: a decoder waiting at the end barrier may release
    its held exchanges and finish. No fields."""


@dataclass(frozen=True, slots=True)
class DetailRequest:
    """The terminal UI asks the decoder of a connection for a kept whole exchange (answered
    with a :class:`DetailReply`).

    Attributes:
        request_id: chosen by the asker, echoed in the reply.
        key: ``(conn_id, correlation_id, ts_ns)`` of the exchange (``Exchange.ts_ns``: the
            capture time of its request's first packet, or its response's when the request
            was not captured; integer ns since the epoch).
    """

    request_id: int
    key: tuple


# --------------------------------------------------------------------------- error queue


@dataclass(frozen=True, slots=True)
class CaptureFailed:
    """The capture process raised; it has closed the decoder queues and stopped.

    Attributes:
        error: ``"ExceptionType: message"``.
        traceback: the formatted traceback (shown with ``$KAFKASNIFF_DEBUG``).
    """

    error: str
    traceback: str
