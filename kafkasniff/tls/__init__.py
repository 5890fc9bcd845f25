"""TLS on Kafka connections: recognising it (:mod:`.hello`) and following a TLS connection
(:mod:`.connection`). Sans-IO."""
