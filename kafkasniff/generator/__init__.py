"""Build-time generators (run by ``kafkasniff definitions generate``, never by decoding).

- :mod:`kafkasniff.generator.specs`: Apache Kafka's JSON message specs -> the normalized
  definitions in ``dissectors/`` (one file per message, ``index.json``, ``errors.json``).
- :mod:`kafkasniff.generator.api_keys`: the definitions' index -> the API-key constants of
  ``kafkasniff/protocol/apis.py``.
"""
