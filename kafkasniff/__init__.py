"""kafkasniff: a Kafka wire-traffic sniffer and protocol analyzer.

Packets (pcap, pcapng, live) -> TCP reassembly -> Kafka framing -> header decode and pairing
by correlation_id -> body decode -> sinks (console, stats, JSON Lines, Parquet, TUI).
See ``docs/architecture.md``.
"""

__version__ = "0.1.0"
