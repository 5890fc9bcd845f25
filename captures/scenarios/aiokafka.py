"""aiokafka producer and consumer group.

See the scenario's description in ``run()`` and captures/README.md."""

from __future__ import annotations

import asyncio
from pathlib import Path

from harness.messages import EVENT_MESSAGES, ORDER_MESSAGES
from harness.run import Run
from harness.values import TIMESTAMP_TYPES, now_ms, now_ns, record_fields

SCENARIO = "aiokafka"


def run(out_dir: Path) -> Run:
    """Run the scenario, writing ``out_dir/NAME.pcap``; return the run (its truth is
    written by ``finish()``)."""
    import aiokafka
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    run = Run(SCENARIO,
              "aiokafka producer (acks=all) writes 10 records, then a consumer-group member "
              "reads them, commits and stops.", out_dir=out_dir)
    run.truth["client_library"] = {"name": "aiokafka", "version": aiokafka.__version__}
    run.create_topic("ks-aio", 3)
    bs = run.cluster.bootstrap_servers

    async def main() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bs, client_id="ks-aio-producer",
                                    acks="all", linger_ms=5)
        await producer.start()
        msgs = ORDER_MESSAGES[:5] + EVENT_MESSAGES[:5]
        pending = []
        for key, value, headers in msgs:
            ts = now_ms()
            fut = await producer.send("ks-aio", key=key, value=value,
                                      headers=headers or None, timestamp_ms=ts)
            pending.append((fut, key, value, headers, now_ns(), ts))
        for fut, key, value, headers, t0, ts in pending:
            md = await fut
            run.add_produced(client="aiokafka", topic=md.topic, partition=md.partition,
                             offset=md.offset, **record_fields(key, value, headers),
                             timestamp_ms=ts,
                             delivery_report_timestamp=[
                                 None if md.timestamp_type is None
                                 else TIMESTAMP_TYPES.get(md.timestamp_type + 1),
                                 md.timestamp],
                             produce_call_ts_ns=t0, delivery_report_ts_ns=now_ns(),
                             error=None)
        await producer.stop()
        await asyncio.sleep(0.3)
        consumer = AIOKafkaConsumer("ks-aio", bootstrap_servers=bs,
                                    client_id="ks-aio-consumer", group_id="ks-aio-group",
                                    auto_offset_reset="earliest", enable_auto_commit=False,
                                    fetch_max_wait_ms=100)
        await consumer.start()
        got = 0
        try:
            async with asyncio.timeout(15):
                async for m in consumer:
                    run.add_consumed("aiokafka", m.topic, m.partition, m.offset, m.key,
                                     m.value, list(m.headers), m.timestamp)
                    got += 1
                    if got == len(msgs):
                        break
        except TimeoutError:
            run.truth["notes"].append(f"aiokafka consumer got {got} of {len(msgs)}")
        await consumer.commit()
        await consumer.stop()
        await asyncio.sleep(0.3)

    run.start_capture()
    with run.log.aiokafka("aiokafka"):
        asyncio.run(main())
    run.stop_capture()
    return run
