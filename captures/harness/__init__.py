"""The capture harness of ``captures/make_captures.py``: what every scenario shares.

* :mod:`harness.values`: Kafka API/error names (kafkasniff's generated definitions), clocks,
  the truth-file record layout;
* :mod:`harness.tcpdump`: ``tcpdump -i lo`` writing ``NAME.pcap``, with its loss checks;
* :mod:`harness.client_logs`: :class:`~harness.client_logs.RequestLog`, the requests the
  clients report (librdkafka, kafka-python and aiokafka debug logs);
* :mod:`harness.run`: :class:`~harness.run.Run`, one scenario against the librdkafka mock
  cluster and the truth it records; :class:`~harness.run.ScenarioRun`, what any scenario
  returns;
* :mod:`harness.rdkafka`, :mod:`harness.kafka_python`, :mod:`harness.messages`: client
  helpers and the sample records several scenarios send;
* :mod:`harness.checks`: the tshark cross-check of a written capture;
* :mod:`harness.registry`: finds the scenarios, one module each in ``captures/scenarios/``.

Importing the package puts the repository root (``kafkasniff``, ``tests.support``) and
``captures/`` (``_common``) on ``sys.path``, as the entry point does.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
CAPTURES = ROOT / "captures"
for _p in (ROOT, CAPTURES):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))
