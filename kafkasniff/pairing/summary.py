"""What an operator asks of an exchange first: errors, throttle time, topics.

Extraction is driven by the plans (:mod:`kafkasniff.protocol.schema`), not by guessing from
values: error codes are the int16 fields whose Kafka name ends in ``ErrorCode`` (top level,
per partition, per resource, per member ...), topic names are the fields Kafka marks with
``entityType: topicName``, topic ids are the uuid fields named ``TopicId``. For each plan an
*interest tree* keeps only the paths that lead to such fields, so walking a large Fetch
response touches nothing else.

Topic ids are resolved through a :class:`TopicRegistry` fed by every struct that carries both
a topic name and a topic id (Metadata, CreateTopics, DescribeTopicPartitions responses ...).
"""

from __future__ import annotations

from typing import NamedTuple

from kafkasniff.protocol.primitives import ZERO_UUID
from kafkasniff.protocol.schema import Definitions, StructPlan

_ERROR = 1
_TOPIC = 2
_TOPIC_LIST = 3
_TOPIC_ID = 4
_STRUCT = 5
_ARRAY = 6


class TopicRegistry:
    """Topic id (Kafka text form) -> name, learnt from responses seen so far.

    Bounded: at most ``max_topics`` ids are kept (oldest forgotten first).
    """

    def __init__(self, max_topics: int = 1_000_000) -> None:
        self.names: dict[str, str] = {}
        self.max_topics = max_topics
        # new (id, name) pairs, kept only when a caller drains them (record_learned=True)
        self.learned: list[tuple[str, str]] = []
        self.record_learned = False

    def learn(self, topic_id: str, name: str) -> None:
        """Remember that ``topic_id`` names ``name`` (the zero uuid is ignored); a new or
        changed pair is also appended to :attr:`learned`."""
        if topic_id == ZERO_UUID or not name:
            return
        if self.names.get(topic_id) == name:
            return
        if topic_id not in self.names and len(self.names) >= self.max_topics:
            self.names.pop(next(iter(self.names)))
        self.names[topic_id] = name
        if self.record_learned:
            self.learned.append((topic_id, name))

    def resolve(self, topic_id: str) -> str:
        """The name of ``topic_id`` if known, else the id itself."""
        return self.names.get(topic_id, topic_id)


def _interest(plan: StructPlan, cache: dict) -> tuple:
    tree = cache.get(id(plan))
    if tree is not None:
        return tree
    cache[id(plan)] = ()  # recursion guard
    items = []
    fields = list(plan.fields) + list(plan.tagged.values())
    for f in fields:
        if f.kind == "int16" and f.key.endswith("error_code"):
            items.append((f.key, _ERROR, None))
        elif f.entity_type == "topicName" and f.kind == "string":
            items.append((f.key, _TOPIC, None))
        elif f.entity_type == "topicName" and f.kind == "array" and f.items == "string":
            items.append((f.key, _TOPIC_LIST, None))
        elif f.kind == "uuid" and f.key == "topic_id":
            items.append((f.key, _TOPIC_ID, None))
        elif f.kind in ("struct", "array") and f.struct is not None:
            sub = _interest(f.struct, cache)
            if sub:
                items.append((f.key, _STRUCT if f.kind == "struct" else _ARRAY, sub))
    tree = tuple(items)
    cache[id(plan)] = tree
    return tree


class Summarizer:
    """Extracts errors, throttle time and topics from decoded bodies.

    Args:
        defs: the definitions (for error names and plans).
        registry: where topic ids are learnt and resolved.
    """

    def __init__(self, defs: Definitions, registry: TopicRegistry | None = None) -> None:
        self.defs = defs
        self.registry = registry if registry is not None else TopicRegistry()
        self._trees: dict[int, tuple] = {}

    def tree(self, plan: StructPlan) -> tuple:
        """The interest tree of a plan (cached)."""
        return _interest(plan, self._trees)

    def walk(self, plan: StructPlan, body: dict, errors: dict[int, int], topics: dict[str, None],
             topic_ids: list[str]) -> None:
        """Collect error codes (code -> count), topic names and topic ids from ``body``."""
        self._walk(self.tree(plan), body, errors, topics, topic_ids)

    def _walk(self, tree: tuple, d: dict, errors: dict, topics: dict, topic_ids: list) -> None:
        name = None
        tid = None
        for key, action, sub in tree:
            v = d.get(key)
            if v is None:
                continue
            if action == _ERROR:
                if v:
                    errors[v] = errors.get(v, 0) + 1
            elif action == _ARRAY:
                for item in v:
                    self._walk(sub, item, errors, topics, topic_ids)
            elif action == _TOPIC:
                topics[v] = None
                name = v
            elif action == _TOPIC_ID:
                if v != ZERO_UUID:  # the zero uuid means "no id, use the name"
                    topic_ids.append(v)
                    tid = v
            elif action == _STRUCT:
                self._walk(sub, v, errors, topics, topic_ids)
            elif action == _TOPIC_LIST:
                for t in v:
                    if t is not None:  # a null item is a spec departure, reported as such
                        topics[t] = None
        if name is not None and tid is not None:
            self.registry.learn(tid, name)

    def summarize(self, request_plan: StructPlan | None, request_body: dict | None,
                  response_plan: StructPlan | None, response_body: dict | None
                  ) -> "Summary":
        """Errors, throttle time and topics of one exchange (see :class:`Summary`)."""
        errors: dict[int, int] = {}
        names: dict[str, None] = {}
        ids: list[str] = []
        throttle = None
        if response_body is not None and response_plan is not None:
            self.walk(response_plan, response_body, errors, names, ids)
            throttle = response_body.get("throttle_time_ms")
        if request_body is not None and request_plan is not None:
            self.walk(request_plan, request_body, {}, names, ids)
        wire_names = tuple(names)
        resolve = self.registry.resolve
        topics = dict(names)
        for tid in ids:
            topics[resolve(tid)] = None
        return Summary(tuple(self.defs.error_name(c) for c in errors), throttle, tuple(topics),
                       errors, wire_names, tuple(dict.fromkeys(ids)))


class Summary(NamedTuple):
    """What :meth:`Summarizer.summarize` found in one exchange.

    Attributes:
        errors: distinct error names, in order of first appearance.
        throttle_time_ms: the response's throttle time, ``None`` if its layout has none.
        topics: topic names, with topic ids resolved through responses seen earlier
            (unresolved ids kept as text) — what ``read`` and ``stats`` show.
        error_counts: error code -> occurrences in the response.
        wire_topics: topic names as carried by the exchange itself (no resolution).
        topic_ids: topic ids as carried by the exchange itself (zero uuid excluded).
    """

    errors: tuple[str, ...]
    throttle_time_ms: int | None
    topics: tuple[str, ...]
    error_counts: dict[int, int]
    wire_topics: tuple[str, ...]
    topic_ids: tuple[str, ...]
