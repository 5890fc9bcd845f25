"""Live capture: ``kafkasniff live`` (see docs/live.md).

The live engine: one capture process, N decoder processes, the collector (main process).

::

    kernel: filter, PACKET_FANOUT_HASH -> N TPACKET_V3 rings (one per decoder)
      --(capture process: moves whole blocks)--> N bounded shared-memory queues
      --(decoder process i: Pipeline, render, export, topic-id sharing)--> result queue
      --(main process: collector)--> stdout lines / JSON Lines / stats / TUI source

* The **capture process** (:mod:`kafkasniff.live.capture`) only moves bytes. With the ring
  backend the kernel has already partitioned packets by flow (a symmetric hash: both
  directions of a connection go to the same ring), and each retired block of ring ``i`` is
  copied as it is into decoder ``i``'s queue (:mod:`kafkasniff.parallel.shm`); a block whose
  queue is full stays in its ring until there is room (the ring is the second half of the
  buffer; when it overflows the kernel drops and counts). With the plain socket backend,
  socket ``i`` feeds decoder ``i`` in batches of ``<ts_ns, caplen, orig_len, link_type>`` +
  bytes; with a pcap stream the capture process hashes each packet's flow itself
  (:func:`kafkasniff.live.dispatch.partition`). Those batches are sent when they reach
  ``batch_bytes`` or are ``flush_ms`` old, and dropped (counted as *queue drops*) when the
  queue is full: the capture process never blocks. It also writes ``--write`` pcapng files
  and publishes its counters (packets, kernel received / dropped from
  ``PACKET_STATISTICS``, queue drops) in shared memory.
* Each **decoder process** (:mod:`kafkasniff.live.decoder`) runs a
  :class:`kafkasniff.pipeline.Pipeline` over the packets of its connections (reassembly and
  pairing are exact), renders exchanges and issues (console line or JSON), writes
  ``--export`` files, prepares the TUI's data, and sends text and its
  :class:`~kafkasniff.pipeline.PipelineStats` to the collector. Connection ids are made
  unique across decoders (decoder ``i`` numbers from ``i * CONN_ID_STRIDE``).
  Topic ids learnt from one connection name topics on others (Fetch v13+ carries ids learnt
  from Metadata on another connection, maybe decoded by another decoder): learnt ids are
  forwarded by the collector to the other decoders, and an exchange whose ids are not known
  yet is held back (at most ``topic_hold_s``) until another decoder reports learning them at
  or before the exchange's completion, so it shows the names ``kafkasniff read`` shows.
* The **collector** (main process, :mod:`kafkasniff.live.collector`) writes what decoders
  send, counts, prints periodic stats, and stops everything in order: on Ctrl-C / SIGTERM /
  ``--duration`` / ``-c`` it sets the stop event; the capture process swaps in a
  drop-everything filter (no new packet is accepted), reads what the kernel already holds
  (blocks retire within ``retire_ms``) and hands it all to the decoders, closes the pcapng
  file; decoders drain their queues, call ``Pipeline.finish()``, wait for each other (topic
  ids), send their last results; the collector flushes every output and prints the summary.

Nothing is lost silently: ``kernel_received = captured + kernel_drops`` and
``captured = decoded + queue_drops`` hold at the end, and every output shows the drops.

Modules:

* :mod:`kafkasniff.live.bpf` - interfaces, BPF filters compiled by libpcap (via scapy) and
  adjusted for the kernel (snap length, cooked captures, loopback duplicates);
* :mod:`kafkasniff.live.backends` - TPACKET_V3 mmap ring (default), plain AF_PACKET socket,
  pcap stream on stdin;
* :mod:`kafkasniff.live.config` - ``LiveConfig``, the shared counter slots and limits the
  parts below share;
* :mod:`kafkasniff.live.messages` - the messages between the processes (frozen dataclasses
  on the result, control and error queues);
* :mod:`kafkasniff.live.dispatch` - flow partitioning, per-decoder batches, queue drops;
* :mod:`kafkasniff.live.capture` - the capture process;
* :mod:`kafkasniff.live.decoder` - the decoder processes;
* :mod:`kafkasniff.live.collector` - the collector (``LiveSession``, ``Snapshot``): starts
  the processes, collects, orderly stop;
* :mod:`kafkasniff.live.procs` - what the child process bodies share (signals, profiling);
* :mod:`kafkasniff.parallel.shm` - the bounded shared-memory queues between the processes;
* :mod:`kafkasniff.live.outputs` - decoder-side rendering, pcapng rotation, stats lines;
* :mod:`kafkasniff.live.tui` - the terminal UI's live data source;
* :mod:`kafkasniff.cli.live` - the click command ``live_command``.

Nothing here is imported by the headless file commands.
"""
