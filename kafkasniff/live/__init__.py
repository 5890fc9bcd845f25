"""Live capture: ``kafkasniff live`` (see docs/live.md).

* :mod:`kafkasniff.live.bpf` - interfaces, BPF filters compiled by libpcap (via scapy) and
  adjusted for the kernel (snap length, cooked captures, loopback duplicates);
* :mod:`kafkasniff.live.backends` - TPACKET_V3 mmap ring (default), plain AF_PACKET socket,
  pcap stream on stdin;
* :mod:`kafkasniff.live.engine` - capture process, N decoder processes partitioned by
  connection, bounded queues, drop accounting, orderly stop;
* :mod:`kafkasniff.live.shm` - the bounded shared-memory queues between the processes;
* :mod:`kafkasniff.live.outputs` - decoder-side rendering, pcapng rotation, stats lines;
* :mod:`kafkasniff.live.tui` - the terminal UI's live data source;
* :mod:`kafkasniff.live.command` - the click command ``live_command``.

Nothing here is imported by the headless file commands.
"""
