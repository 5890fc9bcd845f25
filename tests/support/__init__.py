"""Test support that talks to real Kafka client code (never imported by ``kafkasniff``).

:mod:`tests.support.mock_cluster` drives librdkafka's built-in mock Kafka cluster through
ctypes; the capture script (``captures/make_captures.py``), the live-capture tests and the
benchmarks use it to get real Kafka traffic on the loopback interface without a broker.
:mod:`tests.support.kafka_broker` starts a real Apache Kafka KRaft broker from the jars
``tests/broker/fetch.sh`` fetched (``tests/broker/``). :mod:`tests.support.fuzz_target` is
the in-process fuzz target of ``tests/test_fuzz_target.py`` and ``bench/bench_fuzz.py``.
"""
