#!/usr/bin/env python3
"""Regenerate the Kafka packet captures in ``captures/`` and their ground truth.

Usage (as root, because tcpdump captures on the loopback interface)::

    .venv/bin/python captures/make_captures.py                 # every scenario
    .venv/bin/python captures/make_captures.py kafka_python    # some scenarios
    .venv/bin/python captures/make_captures.py --out /tmp/caps kafka_python
    .venv/bin/python captures/make_captures.py --list
    .venv/bin/python captures/make_captures.py --check         # tshark cross-check only
    .venv/bin/python captures/make_captures.py --crafted        # crafted_* (craft_captures.py)

Each scenario is one module in ``captures/scenarios/`` (found by
:func:`harness.registry.discover`, run in module-name order). A scenario starts a librdkafka
mock Kafka cluster (:class:`tests.support.mock_cluster.MockCluster`, brokers on random
127.0.0.1 ports) or its own peer, starts ``tcpdump -i lo`` filtered on the broker ports, runs
real Kafka clients (confluent-kafka/librdkafka, kafka-python, aiokafka) against it, closes
them and stops tcpdump with SIGINT; this script then writes the truth and cross-checks:

* ``OUT/NAME.pcap``: the packets (nanosecond pcap, Linux loopback = Ethernet);
* ``OUT/NAME.truth.json``: what the clients and the mock said happened, recorded from
  client callbacks, client debug logs and the mock's request tracking, never from the
  pcap. The decoder's tests compare their decode against it. See captures/README.md for
  the field list.

``OUT`` is ``captures/`` unless ``--out DIR`` names another directory. The shared machinery
(tcpdump, client-log parsing, the mock-cluster run, client helpers, checks) is the
``captures/harness`` package. Traffic no client or the mock can produce (SASL, old
compressed message sets, Kafka 0.7, throttling, ...) is built by
``captures/craft_captures.py``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # harness, scenarios, _common

from harness import CAPTURES  # noqa: E402  (also puts the repository root on sys.path)
from harness.registry import discover  # noqa: E402
from harness.run import abort_active, clear_active  # noqa: E402

log = logging.getLogger("make_captures")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenarios", nargs="*", help="scenario names (default: all)")
    parser.add_argument("--list", action="store_true", help="list scenario names")
    parser.add_argument("--check", action="store_true",
                        help="only cross-check existing captures with tshark")
    parser.add_argument("--out", type=Path, default=CAPTURES, metavar="DIR",
                        help="directory the captures are written to / checked in "
                             "(default: captures/; created if missing)")
    parser.add_argument("--crafted", action="store_true",
                        help="run captures/craft_captures.py instead (the crafted captures; "
                             "no root needed)")
    args = parser.parse_args(argv)
    out_dir: Path = args.out.resolve()
    if args.crafted:
        import craft_captures

        return craft_captures.main(args.scenarios + (["--list"] if args.list else [])
                                   + (["--check"] if args.check else [])
                                   + ["--out", str(out_dir)])
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    scenarios = discover()
    if args.list:
        print("\n".join(scenarios))
        return 0
    unknown = [s for s in args.scenarios if s not in scenarios]
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(unknown)}")
    names = args.scenarios or list(scenarios)
    if args.check:
        for name in names:
            print(name, json.dumps(scenarios[name].check(name, out_dir)))
        return 0
    if os.geteuid() != 0:
        log.warning("not root: tcpdump may fail to open the loopback interface")
    out_dir.mkdir(parents=True, exist_ok=True)
    for noisy in ("kafka", "aiokafka"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    for name in names:
        scenario = scenarios[name]
        t0 = time.monotonic()
        clear_active()
        try:
            run = scenario.run(out_dir)
        except BaseException:
            abort_active()
            (out_dir / f"{name}.pcap").unlink(missing_ok=True)
            raise
        path = run.finish()
        if shutil.which("tshark"):
            log.info("%s: tshark check %s", name, json.dumps(scenario.check(name, out_dir)))
        pcap = out_dir / f"{name}.pcap"
        log.info("%s: %s (%d bytes), %s, %d requests logged, %.1f s", name, pcap,
                 pcap.stat().st_size, path.name, len(run.truth["requests"]),
                 time.monotonic() - t0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
