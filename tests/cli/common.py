"""What the command-line tests share: the sample captures and a click runner."""

from __future__ import annotations

import sys

from click.testing import CliRunner

from kafkasniff.cli import main
from tests.conftest import CAPTURES

PC = CAPTURES / "librdkafka_produce_consume.pcap"
ERR = CAPTURES / "librdkafka_errors_latency.pcap"
KAFKASNIFF = [sys.executable, "-m", "kafkasniff.cli"]

JSON_KEYS = {"type", "ts_ns", "connection", "api_key", "api_name", "api_version",
             "correlation_id", "client_id", "status", "latency_ns", "request_bytes",
             "response_bytes", "errors", "throttle_time_ms", "topics", "request", "response",
             "issues", "inferred", "assumed_version", "long_poll", "long_poll_rule"}


def run(*args, input=None):
    """``kafkasniff ARGS`` in process (exceptions propagate)."""
    return CliRunner().invoke(main, [str(a) for a in args], input=input, catch_exceptions=False)
