"""Decoding one capture on several cores: ``read``, ``stats`` and ``export`` with
``--jobs N`` (docs/performance.md).

One process reads the capture and routes packets by connection (both directions to one
decoder, :mod:`~kafkasniff.capture.flows`) in batches through shared memory
(:mod:`~kafkasniff.parallel.shm`) to N decoder processes (:mod:`~kafkasniff.parallel.worker`),
each running a :class:`~kafkasniff.pipeline.Pipeline`. What is global across connections —
connection ids, topic ids learnt from Metadata on another connection, the idle-connection
clock, the ``capture_issues`` budget, the order of the output — is kept by the reader
(:mod:`~kafkasniff.parallel.engine`), so the output is the same as with one process.
The messages between them are in :mod:`~kafkasniff.parallel.wire`; ``export``'s driver is
:mod:`~kafkasniff.parallel.export`.

The live engine (:mod:`kafkasniff.live`) shares the channel and the flow hash.
"""
