"""What a TCP connection carries: Kafka (and which side is the client), Kafka 0.7, TLS, or
something else, from its first bytes. Sans-IO.

A :class:`Classifier` holds the rules of one analysis (broker ports, detection on any port,
the wire format). :meth:`Classifier.start` opens the classification of one connection: a
connection with exactly one endpoint on a broker port has its broker known (the endpoint on
the port) and is Kafka even if its first bytes do not parse; with ``detect``, any other
connection is watched; without it, it is something else at once. The :class:`FirstBytes` of a
watched connection is fed the connection's first bytes per direction (and its gaps, and its
end) and answers ``None`` while it needs more, then a :class:`Verdict`:

- TLS when either direction starts with a TLS handshake record (or, joined mid-stream, with
  any TLS record header);
- Kafka 0.7 when one direction's first frames fit the 0.7 request layouts exactly (checked
  first: that check is exact, while the 0.8+ one accepts a 0.7 FETCH whose topic is 1-4
  bytes long);
- Kafka when one direction's first frames parse as Kafka request headers (known api_key,
  version in range, plausible size, printable client_id, and the next frame too when
  present); that direction's sender is the client. Joined mid-stream, where the first
  packet may be a response, both directions are waited for: a response can parse as a
  request too (its correlation_id read as api_key and api_version: a replica's Fetch
  responses read as "Produce v14, v15, ..."), until a request is answered by the other
  side (or the window is full), and the likelier request stream wins
  (:func:`~kafkasniff.protocol.detect.request_stream_score`: requests answered, defined
  versions, client ids, distinct correlation_ids);
- joined mid-stream: Kafka when a plausible request starts somewhere inside the window,
  followed by a second one (the capture began inside a frame);
- otherwise something else, once the window is full or can no longer fill.

The window is :data:`DETECT_WINDOW_BYTES` of each direction; a direction that carried
:data:`UNDECIDED_MAX_BYTES` or gaps in both directions end the wait, so the caller never holds
more than that per connection.
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

from kafkasniff.model import ConnectionKind
from kafkasniff.protocol.detect import looks_like_request_stream, request_stream_score
from kafkasniff.protocol.framing import ACCEPT, NEED_MORE
from kafkasniff.protocol.legacy07 import looks_like_07_request_stream
from kafkasniff.protocol.schema import Definitions
from kafkasniff.tls.hello import looks_like_tls, looks_like_tls_record

DEFAULT_PORTS = frozenset({9092})
#: first bytes of each direction a decision may read
DETECT_WINDOW_BYTES = 64 * 1024
#: bytes of one direction held at most while a connection is undecided
UNDECIDED_MAX_BYTES = 4 * DETECT_WINDOW_BYTES
WIRE_FORMATS = ("auto", "modern", "0.7")


class Verdict(NamedTuple):
    """What a connection carries.

    Attributes:
        kind: a :class:`~kafkasniff.model.ConnectionKind`.
        client_dir: the direction (0/1) whose sender is the client, -1 when unknown (TLS on
            no broker port, something else).
    """

    kind: ConnectionKind
    client_dir: int


OTHER = Verdict(ConnectionKind.OTHER, -1)


class Classifier:
    """The classification rules of one analysis.

    Args:
        defs: definitions (API keys and versions of plausible requests).
        validator: the request-frame validator
            (:func:`kafkasniff.protocol.detect.request_validator` of ``defs``).
        ports: broker ports; a connection with exactly one endpoint on one is Kafka.
        detect: also recognise Kafka on any port by its first bytes.
        wire_format: ``"auto"`` (Kafka 0.8+ and 0.7), ``"modern"`` (0.8+ only) or ``"0.7"``.

    Raises ValueError for an unknown ``wire_format``.
    """

    def __init__(self, defs: Definitions, validator, *, ports=DEFAULT_PORTS, detect: bool = True,
                 wire_format: str = "auto") -> None:
        if wire_format not in WIRE_FORMATS:
            raise ValueError(f"unknown wire format {wire_format!r} (expected one of "
                             f"{', '.join(WIRE_FORMATS)})")
        self.defs = defs
        self.validator = validator
        self.ports = frozenset(ports)
        self.detect = detect
        self.wire_format = wire_format

    def start(self, a_port: int, b_port: int, mid_stream: bool) -> FirstBytes | Verdict:
        """Begin with a connection between endpoint A (port ``a_port``, direction 0's sender)
        and B: its :class:`FirstBytes` to feed, or at once the verdict
        :data:`OTHER` (no broker port and no detection). ``mid_stream``: the handshake was not
        captured."""
        a_broker = a_port in self.ports
        b_broker = b_port in self.ports
        if a_broker != b_broker:
            return FirstBytes(self, 1 if a_broker else 0, mid_stream)
        if self.detect:
            return FirstBytes(self, -1, mid_stream)
        return OTHER


class FirstBytes:
    """The first bytes of one connection, until they say what it carries.

    Attributes:
        data: the first bytes of direction 0 and 1 (contiguous from offset 0, at most
            :data:`DETECT_WINDOW_BYTES` each).
        sizes: bytes seen of each direction, gaps included.
        client_dir: known (0/1) when one endpoint is on a broker port, else -1.
    """

    __slots__ = ("rules", "client_dir", "mid_stream", "data", "sizes", "scanned", "later")

    def __init__(self, rules: Classifier, client_dir: int, mid_stream: bool) -> None:
        self.rules = rules
        self.client_dir = client_dir
        self.mid_stream = mid_stream
        self.data = [bytearray(), bytearray()]
        self.sizes = [0, 0]
        # state of the mid-frame search per direction (see _chained_requests)
        self.scanned = [0, 0]
        self.later: list[list[tuple[int, int]]] = [[], []]

    # ------------------------------------------------------------------ input
    def on_data(self, direction: int, offset: int, data: bytes) -> Verdict | None:
        """In-order bytes of ``direction`` at stream ``offset``; the verdict, or ``None``."""
        first = self.data[direction]
        if offset == len(first) < DETECT_WINDOW_BYTES:   # contiguous from offset 0 only
            first += data
        self.sizes[direction] += len(data)
        return self._decide(False)

    def on_gap(self, direction: int, offset: int, length: int) -> Verdict | None:
        """``length`` bytes of ``direction`` at ``offset`` were never captured."""
        self.sizes[direction] = max(self.sizes[direction], offset + length)
        return self._decide(False)

    def on_close(self) -> Verdict:
        """The connection ended: the verdict on what was seen."""
        return self._decide(True)

    # ------------------------------------------------------------------ decision
    def _decide(self, closed: bool) -> Verdict | None:
        data, sizes = self.data, self.sizes
        # decide now when the window is full, or can no longer fill: both directions broken
        # by a gap, or one of them carried far more than the window
        final = closed or \
            max(len(data[0]), len(data[1])) >= DETECT_WINDOW_BYTES or \
            max(sizes) >= UNDECIDED_MAX_BYTES or \
            (sizes[0] > len(data[0]) and sizes[1] > len(data[1]))
        for d in (0, 1):
            first = data[d]
            if first and (looks_like_tls(bytes(first[:5 + 4])) or
                          (self.mid_stream and looks_like_tls_record(first))):
                return Verdict(ConnectionKind.TLS, self.client_dir)
        rules = self.rules
        wire = rules.wire_format
        known = self.client_dir
        waiting = False
        accepted: list[int] = []
        for d in ((known,) if known >= 0 else (0, 1)):
            first = bytes(data[d])
            if not first:
                waiting = True
                continue
            if wire != "modern":
                v = looks_like_07_request_stream(first)
                if v == ACCEPT:
                    return Verdict(ConnectionKind.KAFKA07, d)
                waiting |= v == NEED_MORE
            if wire != "0.7":
                v = looks_like_request_stream(rules.defs, first, rules.validator)
                if v == ACCEPT:
                    if known >= 0 or not self.mid_stream:
                        return Verdict(ConnectionKind.KAFKA, d)
                    accepted.append(d)
                waiting |= v == NEED_MORE
        if accepted:
            # joined mid-stream, either side may have spoken first: a response can parse as
            # a request too (its correlation_id read as api_key and version), so wait for
            # both directions and take the likelier request stream
            if len(accepted) == 1:
                if waiting and not final:
                    return None
                return Verdict(ConnectionKind.KAFKA, accepted[0])
            scores = [request_stream_score(rules.defs, bytes(data[d]), bytes(data[1 - d]))
                      for d in (0, 1)]
            if not final and max(scores[0][0], scores[1][0]) == 0:
                return None     # until a request sent after the capture began is answered
            return Verdict(ConnectionKind.KAFKA, 0 if scores[0] >= scores[1] else 1)
        if waiting and not final:
            return None
        if known >= 0:  # on a broker port: Kafka, even if its first bytes do not parse
            return Verdict(ConnectionKind.KAFKA07 if wire == "0.7" else ConnectionKind.KAFKA,
                           known)
        if self.mid_stream and wire != "0.7":
            # joined mid-frame: look for two chained plausible requests inside the window
            for d in (0, 1):
                if self._chained_requests(d):
                    return Verdict(ConnectionKind.KAFKA, d)
        return OTHER if final else None

    def _chained_requests(self, d: int) -> bool:
        """Does a plausible request start at some offset ``pos >= 1`` of direction ``d``'s
        first bytes, followed by a second plausible request whose header is in the window?

        Incremental, so that a connection arriving in many small segments costs linear, not
        quadratic, time: each call examines only the offsets new since the previous call,
        plus the offsets that more bytes could still turn into a match (``later``, as
        ``(bytes needed, offset)``); the others are settled, since a validator's REJECT
        depends only on bytes already present.
        """
        data = self.data[d]
        n = len(data)
        done = self.scanned[d]
        if n == done:
            return False
        self.scanned[d] = n
        validate = self.rules.validator
        keep = [e for e in self.later[d] if e[0] > n]
        retry = [pos for need, pos in self.later[d] if need <= n]
        for pos in itertools.chain(retry, range(max(1, done - 14), n - 14)):
            verdict = validate(data, pos, False)
            if verdict == ACCEPT:
                nxt = pos + 4 + int.from_bytes(data[pos:pos + 4], "big", signed=True)
                if nxt + 14 > n:
                    keep.append((nxt + 14, pos))
                    continue
                verdict = validate(data, nxt, False)
                if verdict == ACCEPT:
                    return True
            if verdict == NEED_MORE:
                keep.append((n + 1, pos))
        self.later[d] = keep
        return False
