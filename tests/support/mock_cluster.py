"""librdkafka's built-in mock Kafka cluster, driven through ctypes.

librdkafka (the C library inside the ``confluent-kafka`` wheel) contains a small Kafka
broker implementation meant for tests: ``rd_kafka_mock_cluster_new()`` starts N brokers
listening on random TCP ports of 127.0.0.1, all served by one mock thread. They speak
the real Kafka wire protocol, so any client (librdkafka, kafka-python, aiokafka) can
produce, fetch, join consumer groups and commit offsets against them, and the traffic on
the loopback interface is real Kafka traffic that tcpdump can capture.

The mock also injects faults: per-API error codes, per-broker response delays (RTT),
brokers going down, forced API version ranges, and it can record which requests arrived.
It implements the produce/consume/group/transaction APIs (librdkafka 2.16: Produce,
Fetch, ListOffsets, Metadata, OffsetCommit/Fetch, FindCoordinator, Join/Sync/Leave/
Heartbeat, InitProducerId, the transaction APIs, OffsetForLeaderEpoch, telemetry,
ConsumerGroupHeartbeat and the share-group APIs), not the admin APIs (CreateTopics,
DescribeConfigs, ListGroups, DescribeGroups, DeleteRecords, ...): they are absent from its
ApiVersions answer, and a request for one makes the mock log "unsupported" and close the
connection. It never reports a non-zero throttle_time_ms.

The C API is declared in librdkafka's ``src/rdkafka_mock.h``. librdkafka calls it
experimental and outside its ABI guarantees; this module binds only functions present in
the librdkafka 2.x series, and fails with :class:`MockClusterError` if one is missing.

Usage::

    with MockCluster(num_brokers=3) as cluster:
        cluster.create_topic("orders", partitions=3)
        producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers})
        ...
        producer.flush(); del producer          # close clients before the cluster

Lifetime rules: every ``MockCluster`` owns one ``rd_kafka_t`` handle (a client with no
bootstrap servers that librdkafka needs for bookkeeping) and one mock cluster. ``close()``
destroys the mock cluster first (joining its thread and closing all of its sockets), then
the handle (joining librdkafka's internal threads), so no thread outlives ``close()``.
Clients still connected when the cluster closes simply see their connections drop.
Several clusters may exist at once and a process may create any number in sequence.
"""

from __future__ import annotations

import ctypes
import glob
import importlib.util
import os
import threading
import weakref
from collections import Counter
from typing import NamedTuple

from kafkasniff.errors import KafkaSniffError

__all__ = [
    "MockCluster",
    "MockClusterError",
    "MockRequest",
    "find_librdkafka",
    "librdkafka_version",
]

_RD_KAFKA_PRODUCER = 0
_RD_KAFKA_CONF_OK = 0
_ERRSTR_SIZE = 512

#: Environment variable naming a librdkafka shared object to use instead of the one
#: shipped inside the confluent-kafka wheel.
LIBRDKAFKA_ENV = "KAFKASNIFF_LIBRDKAFKA"


class MockClusterError(KafkaSniffError):
    """librdkafka or its mock cluster could not be loaded, created or configured.

    Attributes:
        error_code: the librdkafka ``rd_kafka_resp_err_t`` returned by the failing call,
            or ``None`` when the failure is not a librdkafka error code.
    """

    def __init__(self, message: str, *, error_code: int | None = None) -> None:
        self.error_code = error_code
        super().__init__(message)


class MockRequest(NamedTuple):
    """One request the mock cluster received while request tracking was on.

    Attributes:
        api_key: Kafka API key of the request (0 = Produce, 1 = Fetch, ...).
        broker_id: id of the mock broker that received it (1..num_brokers).
        timestamp_us: when the mock broker read it, in microseconds of librdkafka's
            monotonic clock (``rd_clock()``, CLOCK_MONOTONIC on Linux; comparable with
            ``time.monotonic_ns() // 1000``, not with wall-clock time).
    """

    api_key: int
    broker_id: int
    timestamp_us: int


# --------------------------------------------------------------------------- library


def find_librdkafka() -> str:
    """Return the path of the librdkafka shared object to load.

    Order: ``$KAFKASNIFF_LIBRDKAFKA``; the copy bundled in the confluent-kafka wheel
    (``site-packages/confluent_kafka.libs/librdkafka-<hash>.so*`` on Linux,
    ``confluent_kafka/.dylibs/librdkafka*.dylib`` on macOS); a system ``librdkafka``.

    Raises:
        MockClusterError: no librdkafka was found.
    """
    env = os.environ.get(LIBRDKAFKA_ENV)
    if env:
        if not os.path.exists(env):
            raise MockClusterError(f"${LIBRDKAFKA_ENV} names a missing file: {env}")
        return env
    spec = importlib.util.find_spec("confluent_kafka")
    if spec is not None and spec.submodule_search_locations:
        for pkg_dir in spec.submodule_search_locations:
            site = os.path.dirname(pkg_dir)
            patterns = [
                os.path.join(site, "confluent_kafka.libs", "librdkafka*.so*"),
                os.path.join(pkg_dir, ".libs", "librdkafka*.so*"),
                os.path.join(pkg_dir, ".dylibs", "librdkafka*.dylib"),
            ]
            for pattern in patterns:
                found = sorted(glob.glob(pattern))
                if found:
                    return found[0]
    import ctypes.util

    system = ctypes.util.find_library("rdkafka")
    if system:
        return system
    raise MockClusterError(
        "librdkafka not found: install confluent-kafka (its wheel bundles librdkafka) "
        f"or set ${LIBRDKAFKA_ENV} to a librdkafka shared object"
    )


_c_void_p = ctypes.c_void_p
_c_char_p = ctypes.c_char_p
_i16 = ctypes.c_int16
_i32 = ctypes.c_int32
_i64 = ctypes.c_int64
_int = ctypes.c_int
_size_t = ctypes.c_size_t

# name: (restype, argtypes). Signatures follow src/rdkafka.h and src/rdkafka_mock.h.
_SIGNATURES: dict[str, tuple[object, list[object]]] = {
    "rd_kafka_version_str": (_c_char_p, []),
    "rd_kafka_err2name": (_c_char_p, [_int]),
    "rd_kafka_conf_new": (_c_void_p, []),
    "rd_kafka_conf_destroy": (None, [_c_void_p]),
    "rd_kafka_conf_set": (_int, [_c_void_p, _c_char_p, _c_char_p, _c_char_p, _size_t]),
    "rd_kafka_new": (_c_void_p, [_int, _c_void_p, _c_char_p, _size_t]),
    "rd_kafka_destroy": (None, [_c_void_p]),
    "rd_kafka_mock_cluster_new": (_c_void_p, [_c_void_p, _int]),
    "rd_kafka_mock_cluster_destroy": (None, [_c_void_p]),
    "rd_kafka_mock_cluster_bootstraps": (_c_char_p, [_c_void_p]),
    "rd_kafka_mock_topic_create": (_int, [_c_void_p, _c_char_p, _int, _int]),
    "rd_kafka_mock_topic_set_error": (None, [_c_void_p, _c_char_p, _int]),
    "rd_kafka_mock_clear_request_errors": (None, [_c_void_p, _i16]),
    "rd_kafka_mock_push_request_errors_array": (
        None, [_c_void_p, _i16, _size_t, ctypes.POINTER(_int)]),
    # variadic: argtypes are set per call, see broker_push_request_error_rtts()
    "rd_kafka_mock_broker_push_request_error_rtts": (_int, []),
    "rd_kafka_mock_broker_error_stack_cnt": (
        _int, [_c_void_p, _i32, _i16, ctypes.POINTER(_size_t)]),
    "rd_kafka_mock_partition_set_leader": (_int, [_c_void_p, _c_char_p, _i32, _i32]),
    "rd_kafka_mock_partition_set_follower": (_int, [_c_void_p, _c_char_p, _i32, _i32]),
    "rd_kafka_mock_broker_set_down": (_int, [_c_void_p, _i32]),
    "rd_kafka_mock_broker_set_up": (_int, [_c_void_p, _i32]),
    "rd_kafka_mock_broker_set_rtt": (_int, [_c_void_p, _i32, _int]),
    "rd_kafka_mock_broker_set_rack": (_int, [_c_void_p, _i32, _c_char_p]),
    "rd_kafka_mock_coordinator_set": (_int, [_c_void_p, _c_char_p, _c_char_p, _i32]),
    "rd_kafka_mock_set_apiversion": (_int, [_c_void_p, _i16, _i16, _i16]),
    "rd_kafka_mock_group_initial_rebalance_delay_ms": (None, [_c_void_p, _i32]),
    "rd_kafka_mock_set_controller_id": (None, [_c_void_p, _i32]),
    "rd_kafka_mock_start_request_tracking": (None, [_c_void_p]),
    "rd_kafka_mock_stop_request_tracking": (None, [_c_void_p]),
    "rd_kafka_mock_clear_requests": (None, [_c_void_p]),
    "rd_kafka_mock_get_requests": (_c_void_p, [_c_void_p, ctypes.POINTER(_size_t)]),
    "rd_kafka_mock_request_api_key": (_i16, [_c_void_p]),
    "rd_kafka_mock_request_id": (_i32, [_c_void_p]),
    "rd_kafka_mock_request_timestamp": (_i64, [_c_void_p]),
    "rd_kafka_mock_request_destroy_array": (None, [_c_void_p, _size_t]),
}

_lib_lock = threading.Lock()
_lib: ctypes.CDLL | None = None


def _load() -> ctypes.CDLL:
    """Load librdkafka once per process and declare the signatures used here."""
    global _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        path = find_librdkafka()
        try:
            lib = ctypes.CDLL(path)
        except OSError as exc:
            raise MockClusterError(f"cannot load librdkafka from {path}: {exc}") from exc
        missing = []
        for name, (restype, argtypes) in _SIGNATURES.items():
            try:
                fn = getattr(lib, name)
            except AttributeError:
                missing.append(name)
                continue
            fn.restype = restype
            if argtypes:
                fn.argtypes = argtypes
        if missing:
            raise MockClusterError(
                f"{path} lacks the mock cluster API ({', '.join(missing)}); "
                "librdkafka >= 2.4 is needed"
            )
        _lib = lib
        return lib


def librdkafka_version() -> str:
    """Version string of the librdkafka that :class:`MockCluster` loads, e.g. ``"2.16.0"``."""
    return _load().rd_kafka_version_str().decode()


def _err_name(lib: ctypes.CDLL, err: int) -> str:
    name = lib.rd_kafka_err2name(err)
    return name.decode() if name else str(err)


# --------------------------------------------------------------------------- cluster


def _destroy(lib: ctypes.CDLL, handles: list[int | None]) -> None:
    """Destroy [mock_cluster, rd_kafka_t] in that order; idempotent."""
    mcluster, rk = handles
    handles[0] = handles[1] = None
    if mcluster:
        lib.rd_kafka_mock_cluster_destroy(mcluster)
    if rk:
        lib.rd_kafka_destroy(rk)


class MockCluster:
    """A running librdkafka mock Kafka cluster (context manager).

    Args:
        num_brokers: number of brokers, ids 1..num_brokers, each on its own random
            127.0.0.1 TCP port. Partitions of created topics get leaders round-robin.
        group_initial_rebalance_delay_ms: the mock's equivalent of the broker setting
            ``group.initial.rebalance.delay.ms`` (librdkafka's mock default is 3000 ms,
            which makes every first consumer-group join slow). ``None`` keeps the default.
        conf: extra librdkafka properties for the bookkeeping ``rd_kafka_t`` handle
            (for instance ``{"debug": "mock"}`` to log what the mock brokers do on stderr).
            ``log_level`` defaults to 4 (warnings) to hide the harmless "no
            bootstrap.servers" notice of that handle.

    Raises:
        MockClusterError: librdkafka is missing or lacks the mock API, a property is
            rejected, or the cluster cannot be created.
    """

    def __init__(self, num_brokers: int = 3, *, group_initial_rebalance_delay_ms: int | None = 0,
                 conf: dict[str, str] | None = None) -> None:
        if num_brokers < 1:
            raise ValueError(f"num_brokers must be >= 1, got {num_brokers}")
        lib = _load()
        self._lib = lib
        self._lock = threading.Lock()
        self._handles: list[int | None] = [None, None]
        self.num_brokers = num_brokers

        props = {"log_level": "4"}
        props.update(conf or {})
        errstr = ctypes.create_string_buffer(_ERRSTR_SIZE)
        cconf = lib.rd_kafka_conf_new()
        for key, value in props.items():
            if lib.rd_kafka_conf_set(cconf, key.encode(), str(value).encode(), errstr,
                                     _ERRSTR_SIZE) != _RD_KAFKA_CONF_OK:
                lib.rd_kafka_conf_destroy(cconf)
                raise MockClusterError(f"librdkafka rejected {key}={value!r}: "
                                       f"{errstr.value.decode(errors='replace')}")
        rk = lib.rd_kafka_new(_RD_KAFKA_PRODUCER, cconf, errstr, _ERRSTR_SIZE)
        if not rk:  # on failure the conf is still ours
            lib.rd_kafka_conf_destroy(cconf)
            raise MockClusterError(
                f"rd_kafka_new failed: {errstr.value.decode(errors='replace')}")
        mcluster = lib.rd_kafka_mock_cluster_new(rk, num_brokers)
        if not mcluster:
            lib.rd_kafka_destroy(rk)
            raise MockClusterError(f"rd_kafka_mock_cluster_new({num_brokers}) failed")
        self._handles[:] = [mcluster, rk]
        # Runs at close() or, if the caller forgets, at garbage collection / interpreter exit.
        self._finalizer = weakref.finalize(self, _destroy, lib, self._handles)

        self.bootstrap_servers: str = lib.rd_kafka_mock_cluster_bootstraps(mcluster).decode()
        """Comma-separated ``host:port`` list, broker 1 first, e.g. ``"127.0.0.1:40113,..."``."""
        self.broker_ports: list[int] = [int(hp.rsplit(":", 1)[1])
                                        for hp in self.bootstrap_servers.split(",")]
        """TCP ports of brokers 1..num_brokers, in broker id order."""
        if len(self.broker_ports) != num_brokers:
            self.close()
            raise MockClusterError(
                f"expected {num_brokers} brokers, bootstraps are {self.bootstrap_servers!r}")
        if group_initial_rebalance_delay_ms is not None:
            lib.rd_kafka_mock_group_initial_rebalance_delay_ms(
                mcluster, int(group_initial_rebalance_delay_ms))

    # ----------------------------------------------------------------- lifetime

    @property
    def broker_ids(self) -> list[int]:
        """Broker ids, ``[1, 2, ..., num_brokers]`` (same order as :attr:`broker_ports`)."""
        return list(range(1, self.num_brokers + 1))

    @property
    def broker_port_by_id(self) -> dict[int, int]:
        """``{broker_id: port}``."""
        return dict(zip(self.broker_ids, self.broker_ports))

    @property
    def closed(self) -> bool:
        """:meth:`close` has run (the brokers are gone)."""
        return self._handles[0] is None

    def close(self) -> None:
        """Destroy the mock cluster, then its ``rd_kafka_t``; idempotent.

        Blocks until librdkafka's mock thread and internal threads have been joined. Close
        (or destroy) clients first to avoid their reconnect noise.
        """
        with self._lock:
            self._finalizer()

    def __enter__(self) -> MockCluster:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else self.bootstrap_servers
        return f"MockCluster(num_brokers={self.num_brokers}, {state})"

    def _mc(self) -> int:
        mcluster = self._handles[0]
        if not mcluster:
            raise MockClusterError("mock cluster is closed")
        return mcluster

    def _check(self, what: str, err: int) -> None:
        if err:
            raise MockClusterError(f"{what} failed: {_err_name(self._lib, err)} ({err})",
                                   error_code=err)

    # ----------------------------------------------------------------- topology

    def create_topic(self, name: str, partitions: int, replication_factor: int = 1) -> None:
        """Create ``name`` with ``partitions`` partitions (leaders assigned round-robin).

        This is the mock's own call, not the CreateTopics API (which the mock brokers do
        not serve). Clients may also auto-create topics via Metadata with the mock's
        default of 4 partitions.

        Raises:
            MockClusterError: e.g. TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS.
        """
        self._check(f"create_topic({name!r})", self._lib.rd_kafka_mock_topic_create(
            self._mc(), name.encode(), int(partitions), int(replication_factor)))

    def partition_set_leader(self, topic: str, partition: int, broker_id: int) -> None:
        """Move the leader of ``topic`` [``partition``] to ``broker_id`` (-1: no leader).

        Bumps the partition's leader epoch; creates the topic if missing.
        """
        self._check(f"partition_set_leader({topic!r}, {partition})",
                    self._lib.rd_kafka_mock_partition_set_leader(
                        self._mc(), topic.encode(), int(partition), int(broker_id)))

    def partition_set_follower(self, topic: str, partition: int, broker_id: int) -> None:
        """Set the preferred read replica the mock returns to Fetch v11+ (KIP-392)."""
        self._check(f"partition_set_follower({topic!r}, {partition})",
                    self._lib.rd_kafka_mock_partition_set_follower(
                        self._mc(), topic.encode(), int(partition), int(broker_id)))

    def topic_set_error(self, topic: str, error_code: int) -> None:
        """Make Metadata (and AddPartitionsToTxn) report ``error_code`` for ``topic``; 0 clears."""
        self._lib.rd_kafka_mock_topic_set_error(self._mc(), topic.encode(), int(error_code))

    def coordinator_set(self, key_type: str, key: str, broker_id: int) -> None:
        """Pin the coordinator of a group or transaction to ``broker_id``.

        Args:
            key_type: ``"group"`` (key = group.id) or ``"transaction"`` (key =
                transactional.id). Without this the mock hashes the key over the brokers.
            broker_id: the coordinator FindCoordinator returns; need not exist.
        """
        if key_type not in ("group", "transaction"):
            raise ValueError(f"key_type must be 'group' or 'transaction', got {key_type!r}")
        self._check(f"coordinator_set({key_type!r}, {key!r})",
                    self._lib.rd_kafka_mock_coordinator_set(
                        self._mc(), key_type.encode(), key.encode(), int(broker_id)))

    def broker_set_down(self, broker_id: int) -> None:
        """Close the broker's client connections and refuse new ones (-1: all brokers).

        Does not move partition leadership: clients keep retrying that broker.
        """
        self._check(f"broker_set_down({broker_id})",
                    self._lib.rd_kafka_mock_broker_set_down(self._mc(), int(broker_id)))

    def broker_set_up(self, broker_id: int) -> None:
        """Accept connections on the broker again (-1: all brokers)."""
        self._check(f"broker_set_up({broker_id})",
                    self._lib.rd_kafka_mock_broker_set_up(self._mc(), int(broker_id)))

    def broker_set_rtt(self, broker_id: int, rtt_ms: int) -> None:
        """Delay every response of ``broker_id`` (-1: all brokers) by ``rtt_ms`` milliseconds.

        The mock holds each response for ``rtt_ms`` after the request was read, so the
        request-to-response latency seen on the wire grows by about that much. 0 removes it.
        """
        self._check(f"broker_set_rtt({broker_id}, {rtt_ms})",
                    self._lib.rd_kafka_mock_broker_set_rtt(self._mc(), int(broker_id),
                                                          int(rtt_ms)))

    def broker_set_rack(self, broker_id: int, rack: str) -> None:
        """Set the rack the broker reports in Metadata responses."""
        self._check(f"broker_set_rack({broker_id})",
                    self._lib.rd_kafka_mock_broker_set_rack(self._mc(), int(broker_id),
                                                           rack.encode()))

    def set_apiversion(self, api_key: int, min_version: int, max_version: int) -> None:
        """Restrict what the brokers advertise (ApiVersions) and accept for ``api_key``.

        ``min_version = max_version = -1`` removes the API. ``max_version`` must not exceed
        what the mock implements (e.g. Produce 0..7 or more depending on librdkafka version).
        """
        self._check(f"set_apiversion({api_key}, {min_version}, {max_version})",
                    self._lib.rd_kafka_mock_set_apiversion(self._mc(), int(api_key),
                                                          int(min_version), int(max_version)))

    def set_controller_id(self, broker_id: int) -> None:
        """Set the controller id that Metadata responses report (-1: no controller).

        The mock reports no controller by default, and librdkafka's admin client then
        waits (until its request timeout) for one before sending controller-bound requests
        such as DescribeCluster or DescribeTopics.
        """
        self._lib.rd_kafka_mock_set_controller_id(self._mc(), int(broker_id))

    def set_group_initial_rebalance_delay_ms(self, delay_ms: int) -> None:
        """How long the group coordinator waits for more members before the first rebalance."""
        self._lib.rd_kafka_mock_group_initial_rebalance_delay_ms(self._mc(), int(delay_ms))

    # ----------------------------------------------------------------- errors

    def push_request_errors(self, api_key: int, *error_codes: int) -> None:
        """Make the next ``len(error_codes)`` requests of ``api_key`` fail, in order.

        Cluster-wide: whichever broker receives the next such request answers with the
        next error code (a top-level or all-partitions error, as the API allows). Code
        ``-195`` (librdkafka's ``_TRANSPORT``) makes the broker drop the connection instead.
        Uses ``rd_kafka_mock_push_request_errors_array`` (same effect as the varargs call).
        """
        if not error_codes:
            return
        arr = (_int * len(error_codes))(*error_codes)
        self._lib.rd_kafka_mock_push_request_errors_array(self._mc(), int(api_key),
                                                          len(error_codes), arr)

    def clear_request_errors(self, api_key: int) -> None:
        """Drop the not-yet-used cluster-wide errors queued for ``api_key``."""
        self._lib.rd_kafka_mock_clear_request_errors(self._mc(), int(api_key))

    def broker_push_request_error_rtts(self, broker_id: int, api_key: int,
                                       *errors_and_rtts: tuple[int, int]) -> None:
        """Queue ``(error_code, rtt_ms)`` answers for the next ``api_key`` requests on one broker.

        Each of the next requests of ``api_key`` reaching ``broker_id`` is answered with
        the error (0 = none) after an extra ``rtt_ms`` milliseconds. Broker errors take
        precedence over cluster-wide ones. Calls the varargs C function with per-call
        ctypes argument types.
        """
        if not errors_and_rtts:
            return
        fn = self._lib.rd_kafka_mock_broker_push_request_error_rtts
        flat: list[int] = []
        for err, rtt_ms in errors_and_rtts:
            flat += [int(err), int(rtt_ms)]
        argtypes = [_c_void_p, _i32, _i16, _size_t] + [_int] * len(flat)
        call = ctypes.CFUNCTYPE(_int, *argtypes)(ctypes.cast(fn, ctypes.c_void_p).value)
        err = call(self._mc(), int(broker_id), int(api_key), len(errors_and_rtts), *flat)
        self._check(f"broker_push_request_error_rtts({broker_id}, {api_key})", err)

    def broker_error_stack_count(self, broker_id: int, api_key: int) -> int:
        """How many queued broker errors for ``api_key`` on ``broker_id`` are still unused."""
        cnt = _size_t(0)
        self._check(f"broker_error_stack_cnt({broker_id}, {api_key})",
                    self._lib.rd_kafka_mock_broker_error_stack_cnt(
                        self._mc(), int(broker_id), int(api_key), ctypes.byref(cnt)))
        return cnt.value

    # ----------------------------------------------------------------- tracking

    def start_request_tracking(self) -> None:
        """Record every request the brokers receive from now on (see :meth:`get_requests`)."""
        self._lib.rd_kafka_mock_start_request_tracking(self._mc())

    def stop_request_tracking(self) -> None:
        """Stop recording; requests already recorded are kept."""
        self._lib.rd_kafka_mock_stop_request_tracking(self._mc())

    def clear_requests(self) -> None:
        """Forget the recorded requests."""
        self._lib.rd_kafka_mock_clear_requests(self._mc())

    def get_requests(self) -> list[MockRequest]:
        """Requests recorded since tracking started, in arrival order.

        Returns:
            list of :class:`MockRequest` ``(api_key, broker_id, timestamp_us)``.
        """
        lib = self._lib
        cnt = _size_t(0)
        arr = lib.rd_kafka_mock_get_requests(self._mc(), ctypes.byref(cnt))
        if not arr:
            return []
        try:
            ptrs = ctypes.cast(arr, ctypes.POINTER(_c_void_p))
            out = []
            for i in range(cnt.value):
                req = ptrs[i]
                out.append(MockRequest(int(lib.rd_kafka_mock_request_api_key(req)),
                                       int(lib.rd_kafka_mock_request_id(req)),
                                       int(lib.rd_kafka_mock_request_timestamp(req))))
            return out
        finally:
            lib.rd_kafka_mock_request_destroy_array(arr, cnt.value)

    def request_counts(self) -> Counter[int]:
        """``Counter({api_key: number of recorded requests})``."""
        return Counter(r.api_key for r in self.get_requests())
