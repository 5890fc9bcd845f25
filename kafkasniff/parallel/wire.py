"""What the reader and the decoder processes of ``--jobs N`` send each other.

Reader -> decoder ``i``: batches in decoder ``i``'s shared-memory
:class:`~kafkasniff.parallel.shm.Channel`. A batch is a :data:`batch_header` (the reader's
clock: the index of the last packet it had read when it sent the batch) and records, each a
:data:`record_header` then ``length`` bytes. ``kind`` >= 0 is a packet of that pcap
``LINKTYPE_*`` (the bytes are the frame); the negative kinds are:

* :data:`TICK` - look for idle connections at capture time ``ts_ns`` (once per second of
  capture time, after packet ``index``: the clock ``--jobs 1`` expires on);
* :data:`SECRETS` - a pcapng Decryption Secrets Block: ``<u32 type>`` + its data;
* :data:`SOURCE` - the capture file the next packets come from (its name, UTF-8);
* :data:`END` - no more packets; ``ts_ns`` is the last packet's time.

Reader -> decoder ``i``, apart from the batches (so that they do not wait behind them): a
pickled :class:`Control` per message in decoder ``i``'s control channel.

Decoder -> reader: pickled tuples on a pipe (:class:`multiprocessing.connection.Connection`):
``("progress", wid, clock, opens, learned, items, done_upto)``, ``("done", wid, stats,
result)``, ``("error", wid, message, traceback)``.

Every record the decoders produce is ordered by a key ``(index, phase, tie, sub)``: the
packet index it was produced at, the phase within that packet (0: the packet itself, 1: the
idle connections closed after it, 2: capture file damage reported by the reader), a tie
break between decoders (the connection's id for phase 1 and the end of the capture) and
its rank in that call. Merging the decoders' records by key gives ``--jobs 1``'s order.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from kafkasniff.capture.pcapfile import PACKED_RECORD

__all__ = ["Control", "END", "END_INDEX", "SECRETS", "SOURCE", "TICK",
           "batch_header", "record_header"]

#: ``<u64 clock>``: every packet up to this index that belongs to the decoder is in this
#: batch or an earlier one
batch_header = struct.Struct("<Q")
#: ``ts_ns`` (int64 ns since the epoch), ``length`` (bytes that follow), ``orig_len``
#: (packet bytes on the wire), ``kind`` (link type, or a negative kind), ``index`` (the
#: packet's position in the whole capture, from 0): the reader's
#: :meth:`~kafkasniff.capture.pcapfile.PacketSource.pack_records` writes the packets' records
#: and a decoder reads them back with :func:`~kafkasniff.capture.pcapfile.packed_records`
record_header = PACKED_RECORD

TICK = -1
SECRETS = -2
SOURCE = -3
END = -4

#: the packet index of what the end of the capture produces (after every packet)
END_INDEX = 1 << 62


@dataclass
class Control:
    """What the reader tells a decoder after every decoder has reported progress.

    Attributes:
        upto: every decoder has decoded every packet up to this index (:data:`END_INDEX`
            once all have finished): records produced up to it can be completed.
        conn_ids: the global ids of this decoder's next connections, in the order it
            opened them (ids count connections in the order of the packets that opened
            them, as ``--jobs 1`` numbers them).
        learned: topic ids other decoders learnt: ``(topic_id, name, index)``.
    """

    upto: int = -1
    conn_ids: list = field(default_factory=list)
    learned: list = field(default_factory=list)

    def absorb(self, newer: "Control") -> None:
        """Add ``newer`` (not sent yet) to this one."""
        self.upto = max(self.upto, newer.upto)
        self.conn_ids.extend(newer.conn_ids)
        self.learned.extend(newer.learned)
