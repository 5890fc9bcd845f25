"""What an operator asks of an exchange first: errors, throttle time, topics.

Extraction is driven by the plans (:mod:`kafkasniff.protocol.plans`), not by guessing from
values: error codes are the int16 fields whose Kafka name ends in ``ErrorCode`` (top level,
per partition, per resource, per member ...), topic names are the fields Kafka marks with
``entityType: topicName``, topic ids are the uuid fields named ``TopicId``. The walk is the
project's one plan walker (:mod:`kafkasniff.protocol.walk`), so a large Fetch response is
walked only where such fields are.

Topic ids are resolved through a :class:`TopicRegistry` fed by every struct that carries both
a topic name and a topic id (Metadata, CreateTopics, DescribeTopicPartitions responses ...).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, NamedTuple

from kafkasniff.protocol.plans import FieldPlan, StructPlan
from kafkasniff.protocol.primitives import ZERO_UUID
from kafkasniff.protocol.schema import Definitions
from kafkasniff.protocol.walk import PlanWalker, is_topic_id, is_topic_name

ERROR = "error"
TOPIC = "topic"
TOPIC_LIST = "topic_list"
TOPIC_ID = "topic_id"
#: the tags in the order :meth:`~kafkasniff.protocol.walk.PlanWalker.gather` takes them
_TAGS = (ERROR, TOPIC, TOPIC_LIST, TOPIC_ID)


def summary_field(f: FieldPlan) -> str | None:
    """The summary's tag of a field: :data:`ERROR` for an int16 ``*ErrorCode``, :data:`TOPIC`
    for a topic name, :data:`TOPIC_LIST` for an array of topic names, :data:`TOPIC_ID` for a
    topic id; ``None`` for every other field."""
    if f.kind == "int16" and f.key.endswith("error_code"):
        return ERROR
    if is_topic_name(f):
        return TOPIC
    if f.entity_type == "topicName" and f.kind == "array" and f.items == "string":
        return TOPIC_LIST
    if is_topic_id(f):
        return TOPIC_ID
    return None


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


def resolve_topic_ids(topics: tuple[str, ...], topic_ids: tuple[str, ...], record_fields: tuple,
                      name_of: Callable[[str], str | None]) -> tuple[tuple, tuple] | None:
    """An exchange's ``topics`` and ``record_fields`` with the topic ids it carries named by
    ``name_of(topic_id)`` (a name, or ``None`` when not known), as one process would have
    named them: ids still in ``topics`` become names, records fields that carry only an id
    get ``resolved_topic``. Returns ``(topics, record_fields)``, or ``None`` when
    ``name_of`` names none of them. What the ``--jobs`` decoders and the live decoders do
    with topic ids another process learnt."""
    names = {}
    for tid in topic_ids:
        if tid in topics:
            name = name_of(tid)
            if name is not None:
                names[tid] = name
    if not names:
        return None
    if record_fields:
        record_fields = tuple(
            replace(loc, resolved_topic=names[loc.topic_id])
            if loc.topic is None and loc.resolved_topic is None and loc.topic_id in names
            else loc for loc in record_fields)
    return tuple(dict.fromkeys(names.get(t, t) for t in topics)), record_fields


class Summarizer:
    """Extracts errors, throttle time and topics from decoded bodies.

    Args:
        defs: the definitions (for error names and plans).
        registry: where topic ids are learnt and resolved.
    """

    def __init__(self, defs: Definitions, registry: TopicRegistry | None = None) -> None:
        self.defs = defs
        self.registry = registry if registry is not None else TopicRegistry()
        self.walker = PlanWalker(summary_field)

    def tree(self, plan: StructPlan) -> tuple:
        """The wire-order entries of the plan's interest tree (``(key, tag, subtree)``,
        ``()`` when it holds no such field); see :class:`~kafkasniff.protocol.walk.Node`."""
        node = self.walker.tree(plan)
        return node.entries if node is not None else ()

    def summarize(self, request_plan: StructPlan | None, request_body: dict | None,
                  response_plan: StructPlan | None, response_body: dict | None
                  ) -> "Summary":
        """Errors, throttle time and topics of one exchange (see :class:`Summary`); teaches
        the registry every (topic id, name) pair a struct of either body carries."""
        errors: dict[int, int] = {}
        names: dict[str, None] = {}
        ids: list[str] = []
        pairs: list[tuple[str, str]] = []
        gather = self.walker.gather
        throttle = None
        if response_body is not None and response_plan is not None:
            gather(response_plan, response_body, _TAGS, errors, names, ids, pairs)
            throttle = response_body.get("throttle_time_ms")
        if request_body is not None and request_plan is not None:
            gather(request_plan, request_body, _TAGS, {}, names, ids, pairs)
        if pairs:       # every (topic id, name) a struct carries, in wire order
            learn = self.registry.learn
            for topic_id, name in pairs:
                learn(topic_id, name)
        wire_names = tuple(names)
        if ids:
            resolve = self.registry.resolve
            topics = dict(names)
            for tid in ids:
                topics[resolve(tid)] = None
            resolved, unique_ids = tuple(topics), tuple(dict.fromkeys(ids))
        else:
            resolved, unique_ids = wire_names, ()
        return Summary(tuple(map(self.defs.error_name, errors)) if errors else (), throttle,
                       resolved, errors, wire_names, unique_ids)


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
