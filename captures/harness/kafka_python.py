"""kafka-python helpers: the api_version the mock needs, codec stand-ins, send, consume."""

from __future__ import annotations

from typing import Any

from harness.run import Run
from harness.values import TIMESTAMP_TYPES, now_ms, now_ns, record_fields

#: kafka-python's ``api_version`` against the mock: without it kafka-python opens with
#: ApiVersions v4, cannot decode the mock's UNSUPPORTED_VERSION answer and fails to bootstrap
KAFKA_PYTHON_API_VERSION = (2, 3)


class _CramjamSnappy:
    """Stand-in for python-snappy's ``snappy`` module (raw snappy blocks via cramjam)."""

    @staticmethod
    def compress(data: bytes) -> bytes:
        import cramjam

        return bytes(cramjam.snappy.compress_raw(bytes(data)))

    @staticmethod
    def decompress(data: bytes) -> bytes:
        import cramjam

        return bytes(cramjam.snappy.decompress_raw(bytes(data)))


def kafka_python_codec_shims(run: Run) -> None:
    """Give kafka-python the codec modules it looks for when they are not installed.

    kafka-python 3.0.12 imports ``snappy`` (python-snappy) and ``xxhash`` (needed for
    the pre-0.10 lz4 framing; installed with the 'test' extra). python-snappy is not in the
    venv; cramjam (raw snappy) is. The stand-in only supplies the primitive (raw snappy
    block): the framing (xerial) stays kafka-python's own code in ``kafka.codec``.
    """
    import kafka.codec as kc

    shims = []
    # ``kc.snappy is _CramjamSnappy``: an earlier scenario of this process installed it
    if not kc.has_snappy() or kc.snappy is _CramjamSnappy:
        kc.snappy = _CramjamSnappy
        shims.append("snappy: kafka.codec.snappy = cramjam.snappy.compress_raw/decompress_raw "
                     "(python-snappy is not installed)")
    if getattr(kc, "xxhash", None) is None:
        raise SystemExit("kafka-python needs the xxhash package for the pre-0.10 lz4 framing: "
                         "pip install xxhash (it is in kafkasniff's 'test' extra)")
    if shims:
        run.truth["codec_shims"] = shims
        run.truth["notes"].append(
            "kafka-python's codec modules were supplemented in-process (see codec_shims): "
            "the bytes on the wire are kafka-python's framing around the same raw snappy "
            "blocks / LZ4 frames python-snappy / xxhash would have given.")


def kp_send_all(run: Run, producer: Any, label: str, topic: str,
                msgs: list[tuple[Any, Any, Any]], *, partition: int | None,
                with_timestamps: bool = True, **extra: Any) -> list[dict[str, Any]]:
    """Send with kafka-python, flush, and record every record (error included)."""
    pending = []
    for key, value, headers in msgs:
        ts = now_ms() if with_timestamps else None
        fut = producer.send(topic, key=key, value=value, headers=headers or None,
                            partition=partition, timestamp_ms=ts)
        pending.append((fut, key, value, headers, now_ns(), ts))
    try:
        producer.flush(10)
    except Exception as exc:  # a failed batch surfaces on its future below
        run.truth["notes"].append(f"{label}: flush raised {type(exc).__name__}: {exc}")
    out = []
    for fut, key, value, headers, t0, ts in pending:
        try:
            md = fut.get(timeout=10)
            entry = dict(client=label, topic=md.topic, partition=md.partition,
                         offset=md.offset, **record_fields(key, value, headers),
                         timestamp_ms=ts, delivery_report_timestamp=[None, md.timestamp],
                         produce_call_ts_ns=t0, delivery_report_ts_ns=now_ns(), error=None)
        except Exception as exc:
            err = type(exc).__name__
            if getattr(exc, "errno", None) is not None:
                err += f" ({exc.errno})"
            entry = dict(client=label, topic=topic, partition=partition, offset=None,
                         **record_fields(key, value, headers), timestamp_ms=ts,
                         delivery_report_timestamp=None, produce_call_ts_ns=t0,
                         delivery_report_ts_ns=now_ns(), error=err)
        entry.update(extra)
        run.add_produced(**entry)
        out.append(entry)
    return out


def kp_consume(run: Run, consumer: Any, label: str, want: int) -> int:
    """Iterate ``consumer`` until ``want`` records arrived (or its consumer_timeout_ms);
    record each in ``consumed``; return how many arrived."""
    got = 0
    for m in consumer:
        run.add_consumed(label, m.topic, m.partition, m.offset, m.key, m.value,
                         [(k, v) for k, v in (m.headers or [])], m.timestamp)
        run.truth["consumed"][-1]["timestamp_type"] = (
            None if m.timestamp_type is None else TIMESTAMP_TYPES.get(m.timestamp_type + 1))
        got += 1
        if got == want:
            break
    if got < want:
        run.truth["notes"].append(f"{label} received {got} of {want} records before timeout")
    return got
