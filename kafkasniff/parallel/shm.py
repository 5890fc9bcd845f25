"""A bounded single-producer / single-consumer channel of byte batches in shared memory.

Why not ``multiprocessing.Queue``: a queue pickles every batch, pushes it through a pipe in
64 KiB pieces and unpickles it on the other side; at the 100+ MB/s of a busy link that costs
more CPU than decoding. Here a batch is copied once into an anonymous shared mapping
(created before ``fork``) and only a 16-byte notice (offset, length, packet count) goes
through a pipe; the consumer copies the batch out and publishes how far it has read.

Layout: the first 64 bytes of the mapping hold the consumer's ``tail`` (absolute byte
position, u64); the data area (``capacity`` bytes) follows. A batch is always stored in one
piece: if it does not fit before the end of the area, the producer skips to the start (the
skipped bytes count as used until the consumer passes them). The pipe is the
synchronisation point: the consumer only reads a batch announced by a notice, and the
notice is written after the batch (``write(2)`` orders the two for the other process).

Bounded by construction: a batch that does not fit in the free space (or whose notice does
not fit in the pipe) is refused, and the caller counts its packets as queue drops (or waits,
with ``block=True``, when the source is a file that can wait).
"""

from __future__ import annotations

import mmap
import os
import select
import struct
import time

__all__ = ["Channel", "EMPTY"]

_HDR = 64
_tail_get = struct.Struct("<Q").unpack_from
_tail_set = struct.Struct("<Q").pack_into
_notice = struct.Struct("<QII")
_NOTICE = _notice.size        # 16 bytes: absolute start, length (0 = end), packet count
EMPTY = b""


class Channel:
    """See the module docstring. Create before ``fork``; one process puts, one gets.

    Args:
        capacity: bytes of the data area (rounded up to pages); the largest batch must fit.
    """

    def __init__(self, capacity: int) -> None:
        page = mmap.PAGESIZE
        capacity = max(page, -(-capacity // page) * page)
        self.capacity = capacity
        self.mm = mmap.mmap(-1, _HDR + capacity)     # MAP_SHARED | MAP_ANONYMOUS
        self.rfd, self.wfd = os.pipe()
        os.set_blocking(self.wfd, False)
        try:
            import fcntl
            fcntl.fcntl(self.wfd, 1031, 1 << 20)     # F_SETPIPE_SZ: room for 64Ki notices
        except (OSError, ImportError):
            pass
        self.head = 0          # producer: absolute position after the last batch put
        self._buf = b""        # consumer: notices read but not used yet

    # ----------------------------------------------------------------- producer
    def put(self, batch, count: int, block: bool = False, head: bytes = b"",
            timeout: float = 30.0) -> bool:
        """Store ``head + batch`` (bytes-like, at most ``capacity`` together) announcing
        ``count`` packets. Returns False if there is no room in the data area or for the
        notice in the pipe (never blocks unless ``block``, then for at most ``timeout``
        seconds in all: a consumer that died does not hang the producer)."""
        h = len(head)
        n = h + len(batch)
        cap = self.capacity
        if n > cap:
            return False
        give_up = time.monotonic() + timeout
        while True:
            start = self.head
            pos = start % cap
            if pos + n > cap:                  # keep batches contiguous: wrap to 0
                start += cap - pos
                pos = 0
            end = start + n
            tail = _tail_get(self.mm, 0)[0]
            if end - tail <= cap:
                break
            if not block or time.monotonic() > give_up:
                return False
            time.sleep(0.0005)
        if h:
            self.mm[_HDR + pos:_HDR + pos + h] = head
        self.mm[_HDR + pos + h:_HDR + pos + n] = batch
        if not self._notify(_notice.pack(start, n, count), block, give_up):
            return False
        self.head = end
        return True

    def _notify(self, notice: bytes, block: bool, give_up: float) -> bool:
        """Write a notice to the pipe; when it is full, wait (``block``) until the monotonic
        time ``give_up``."""
        while True:
            try:
                os.write(self.wfd, notice)
                return True
            except BlockingIOError:
                if not block or time.monotonic() > give_up:
                    return False
                select.select([], [self.wfd], [], 0.01)

    def close_producer(self, timeout: float = 10.0) -> bool:
        """Announce the end (the consumer's ``get`` returns ``None``); False if the pipe
        stayed full for ``timeout`` seconds."""
        return self._notify(_notice.pack(self.head, 0, 0), True, time.monotonic() + timeout)

    # ----------------------------------------------------------------- consumer
    def get(self, timeout: float):
        """The next batch as ``(bytes, packet count)``, :data:`EMPTY` after ``timeout``
        seconds without one, or ``None`` once the producer closed."""
        if len(self._buf) < _NOTICE:
            ready, _, _ = select.select([self.rfd], [], [], timeout)
            if not ready:
                return EMPTY
            data = os.read(self.rfd, 64 * _NOTICE)
            if not data:
                return None
            self._buf += data
            if len(self._buf) < _NOTICE:
                return EMPTY
        start, n, count = _notice.unpack_from(self._buf, 0)
        self._buf = self._buf[_NOTICE:]
        if n == 0:
            return None
        pos = _HDR + start % self.capacity
        batch = self.mm[pos:pos + n]             # a copy (bytes)
        _tail_set(self.mm, 0, start + n)
        return batch, count

    def backlog_bytes(self) -> int:
        """Bytes put and not yet consumed (producer's view)."""
        return self.head - _tail_get(self.mm, 0)[0]
