"""Test helpers that talk to real Kafka client code (never imported by the core).

:mod:`kafkasniff.testing.mock_cluster` drives librdkafka's built-in mock Kafka cluster
through ctypes; the capture script (``captures/make_captures.py``), live-capture tests and
benchmarks use it to get real Kafka traffic on the loopback interface without a broker.
"""
