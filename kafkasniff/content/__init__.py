"""What frames carry, decoded: the content stage between framing/pairing and the sinks.

- :mod:`kafkasniff.content.frames`: :class:`~kafkasniff.content.frames.ContentDecoder`, the
  one path that decodes a frame's header and body and what the body carries (the pipeline's
  pairing and the TUI's detail view both use it), exchange summaries, orphan layout guesses;
- :mod:`kafkasniff.content.records`: record data in ``records`` fields (message sets, record
  batches, every codec), located with their topic and partition;
- :mod:`kafkasniff.content.embedded`: protocols inside ``bytes`` fields (the consumer group
  protocol of JoinGroup, SyncGroup, DescribeGroups);
- :mod:`kafkasniff.content.sasl`: SASL tokens, a connection's SASL state, secret redaction;
- :mod:`kafkasniff.content.summary`: errors, throttle time, topics, the topic-id registry.

Sans-IO: no socket, file, textual, pyarrow or pyspark.
"""
