"""Walking decoded bodies along their plan: a field-predicate walk with topic/partition context.

Everything that reads a decoded body for some of its fields goes through one
:class:`PlanWalker`: the summary of an exchange (error codes, topic names and ids), the
record data (``records`` fields), the exported partition rows and the TUI's per-partition
errors. A walker is built with a *predicate* over :class:`~.plans.FieldPlan` that returns a
tag for the fields it wants (``None`` for the others). For each plan it compiles, once, an
*interest tree* holding only the paths that lead to wanted fields, so a large Fetch response
is walked only where such fields are.

While walking, the walker keeps the *topic/partition context* every consumer needs: the
nearest topic name (a ``string`` field Kafka marks ``entityType: topicName``), topic id (the
``uuid`` field ``topic_id``) and partition index (the ``int32`` field ``partition_index``,
``index`` or ``partition``) of the enclosing structs. It calls back
``visit(tag, key, value, struct, node, topic, topic_id, partition, path)`` for every wanted
field present and not null, in wire order (a struct's fields in order, arrays item by item):

- ``tag``: what the predicate returned; ``key``: the field name; ``value``: its value;
- ``struct``: the dict holding the field; ``node``: its :class:`Node` (which key of that struct
  holds its topic name, topic id and partition index, if any);
- ``topic`` / ``topic_id`` / ``partition``: the context (``None`` when no enclosing struct
  carries one);
- ``path``: the dotted path of the holding struct (``topics[0].partitions[2]``, ``""`` at the
  top) when the walk was asked for paths, else ``""``.

With ``partition_structs=True`` the walker also calls ``visit(PARTITION, key, index, ...)``
on entering every *partition struct* (a struct with a partition index below a struct that
carries a topic name or id), before its fields.

A field the predicate selects is a leaf: the walk does not descend into it.
"""

from __future__ import annotations

from typing import Callable

from kafkasniff.protocol.plans import FieldPlan, StructPlan
from kafkasniff.protocol.primitives import ZERO_UUID

#: field names of a partition index (int32) in Kafka's specs (``partition_id``: the
#: ElectLeaders answer's ``PartitionId``)
PARTITION_KEYS = ("partition_index", "index", "partition", "partition_id")
#: the tag of the callback made on entering a partition struct (``partition_structs=True``)
PARTITION = "__partition__"

Visit = Callable[[object, str, object, dict, "Node", object, object, object, str], None]
_ARRAY = 1
_STRUCT = 2


def _field_or(d: dict, key, default):
    """``d[key]`` when ``key`` is not ``None`` and ``d`` holds a non-null value there, else
    ``default`` (a struct's topic context: its own topic name or id, else the enclosing
    one). A C function when compiled (``walk.pxd``)."""
    if key is not None:
        v = d.get(key)
        if v is not None:
            return v
    return default


class Node:
    """The interest tree of one struct plan (built by :meth:`PlanWalker.tree`; read-only by
    convention, an extension type with C fields when this module is compiled).

    Attributes:
        entries: in wire order, ``(key, tag, None)`` for a wanted field and
            ``(key, _ARRAY | _STRUCT, subnode)`` for a struct or array of structs leading to
            wanted fields.
        topic_key / topic_id_key / partition_key: the struct's field holding a topic name, a
            topic id, a partition index (``None`` when it has none).
        in_topic: this struct or an enclosing one has a topic name or topic id field.
        partition_struct: a partition index with a topic field at this level or above.
    """

    __slots__ = ("entries", "topic_key", "topic_id_key", "partition_key", "in_topic",
                 "partition_struct")

    def __init__(self, entries: tuple, topic_key: str | None, topic_id_key: str | None,
                 partition_key: str | None, in_topic: bool, partition_struct: bool) -> None:
        self.entries = entries
        self.topic_key = topic_key
        self.topic_id_key = topic_id_key
        self.partition_key = partition_key
        self.in_topic = in_topic
        self.partition_struct = partition_struct

    def __repr__(self) -> str:
        return (f"Node(entries={self.entries!r}, topic_key={self.topic_key!r}, "
                f"topic_id_key={self.topic_id_key!r}, partition_key={self.partition_key!r}, "
                f"in_topic={self.in_topic!r}, partition_struct={self.partition_struct!r})")


def is_topic_name(f: FieldPlan) -> bool:
    """A topic name field (``string``, ``entityType: topicName``)."""
    return f.kind == "string" and f.entity_type == "topicName"


def is_topic_id(f: FieldPlan) -> bool:
    """A topic id field (``uuid`` named ``TopicId``)."""
    return f.kind == "uuid" and f.key == "topic_id"


def is_partition_index(f: FieldPlan) -> bool:
    """A partition index field (``int32`` named ``PartitionIndex``, ``Index`` or ``Partition``)."""
    return f.kind == "int32" and f.key in PARTITION_KEYS


class PlanWalker:
    """Walks decoded bodies for the fields a predicate selects (see the module docstring).

    Args:
        select: ``select(field_plan) -> tag or None``.
        partition_structs: also call back on entering every partition struct (tag
            :data:`PARTITION`), and keep the paths leading to them in the trees.

    Trees are cached per plan (plans live as long as their definitions). When this module
    is compiled (docs/compiled.md), the walker and :class:`Node` are extension types and the
    walk a C function.
    """

    __slots__ = ("select", "partition_structs", "_trees", "_in_topic")

    def __init__(self, select: Callable[[FieldPlan], object], *,
                 partition_structs: bool = False) -> None:
        self.select = select
        self.partition_structs = partition_structs
        # id(plan) -> (plan, its tree) outside any topic struct / inside one (the plan is
        # kept so that ids stay unique; (plan, None) while its tree is being built)
        self._trees: dict[int, tuple[StructPlan, Node | None]] = {}
        self._in_topic: dict[int, tuple[StructPlan, Node | None]] = {}

    def tree(self, plan: StructPlan, in_topic: bool = False) -> Node | None:
        """The interest tree of ``plan`` (``None`` when no wanted field is below it)."""
        trees = self._in_topic if in_topic else self._trees
        hit = trees.get(id(plan))
        if hit is not None:
            return hit[1]
        trees[id(plan)] = (plan, None)    # recursion guard
        fields = list(plan.fields) + list(plan.tagged.values())
        topic_key = topic_id_key = partition_key = None
        for f in fields:
            if is_topic_name(f) and topic_key is None:
                topic_key = f.key
            elif is_topic_id(f):
                topic_id_key = f.key
            elif is_partition_index(f) and partition_key is None:
                partition_key = f.key
        here_topic = in_topic or topic_key is not None or topic_id_key is not None
        entries = []
        select = self.select
        for f in fields:
            tag = select(f)
            if tag is not None:
                entries.append((f.key, tag, None))
            elif f.kind in ("array", "struct") and f.struct is not None:
                sub = self.tree(f.struct, here_topic)
                if sub is not None:
                    entries.append((f.key, _ARRAY if f.kind == "array" else _STRUCT, sub))
        part_struct = partition_key is not None and here_topic
        node = None
        if entries or (self.partition_structs and part_struct):
            node = Node(tuple(entries), topic_key, topic_id_key, partition_key, here_topic,
                        part_struct)
        trees[id(plan)] = (plan, node)
        return node

    def walk(self, plan: StructPlan, body: dict | None, visit: Visit, *,
             paths: bool = False) -> None:
        """Call ``visit`` for every wanted field of ``body`` (decoded with ``plan``); see the
        module docstring for the callback's arguments. Items of arrays that are not dicts
        (a partial decode) are skipped."""
        hit = self._trees.get(id(plan))
        node = hit[1] if hit is not None else self.tree(plan)
        if node is not None and type(body) is dict:
            self._walk(node, body, visit, None, None, None, "", paths)

    def gather(self, plan: StructPlan, body: dict | None, tags: tuple, counts: dict,
               names: dict, ids: list, pairs: list) -> None:
        """The walk of :meth:`walk` without a callback: what an exchange's summary collects
        (:mod:`kafkasniff.content.summary`), in wire order, into the containers given.

        ``tags`` is ``(count, name, names, topic_id)``, four of the tags the predicate
        returns; a selected field whose tag is

        - ``count``: a non-zero value counts once in ``counts`` (value -> occurrences);
        - ``name``: the value is added to ``names`` (a dict used as an ordered set, values
          ``None``);
        - ``names``: each non-null item of the list value is added to ``names``;
        - ``topic_id``: a value other than the zero uuid is appended to ``ids``, and
          ``(value, name)`` to ``pairs`` when the same struct holds a non-null topic name.

        Fields of other tags are skipped. Compiled, the whole walk runs in C (no Python
        call per field)."""
        hit = self._trees.get(id(plan))
        node = hit[1] if hit is not None else self.tree(plan)
        if node is not None and type(body) is dict:
            self._gather(node, body, tags, counts, names, ids, pairs)

    def partitions(self, plan: StructPlan, body: dict | None, out: list) -> None:
        """The partition structs of ``body`` (decoded with ``plan``) without a callback:
        ``(topic, topic_id, partition, struct)`` appended to ``out`` for each, in wire order,
        where :meth:`walk` would call ``visit(PARTITION, ...)``: ``topic`` / ``topic_id``
        the nearest enclosing topic name / id (``None`` when none), ``partition`` the
        struct's partition index (an ``int``), ``struct`` its dict. Only for a walker made
        with ``partition_structs=True`` (otherwise nothing is appended); wanted fields are
        not visited. Compiled, the whole walk runs in C."""
        hit = self._trees.get(id(plan))
        node = hit[1] if hit is not None else self.tree(plan)
        if node is not None and type(body) is dict and self.partition_structs:
            self._partitions(node, body, out, None, None)

    def _partitions(self, node: Node, d: dict, out: list, topic, topic_id) -> None:
        topic = _field_or(d, node.topic_key, topic)
        topic_id = _field_or(d, node.topic_id_key, topic_id)
        k = node.partition_key
        if k is not None and node.partition_struct:
            v = d.get(k)
            if type(v) is int:
                out.append((topic, topic_id, v, d))
        for key, tag, sub in node.entries:
            if sub is None:
                continue
            v = d.get(key)
            if tag == _ARRAY:
                if type(v) is list:
                    for item in v:
                        if type(item) is dict:
                            self._partitions(sub, item, out, topic, topic_id)
            elif type(v) is dict:
                self._partitions(sub, v, out, topic, topic_id)

    def _gather(self, node: Node, d: dict, tags: tuple, counts: dict, names: dict, ids: list,
                pairs: list) -> None:
        for key, tag, sub in node.entries:
            v = d.get(key)
            if v is None:
                continue
            if sub is None:
                if tag is tags[0]:
                    if v:
                        counts[v] = counts.get(v, 0) + 1
                elif tag is tags[1]:
                    names[v] = None
                elif tag is tags[3]:
                    if v != ZERO_UUID:  # the zero uuid means "no id, use the name"
                        ids.append(v)
                        name_key = node.topic_key
                        if name_key is not None:
                            name = d.get(name_key)
                            if name is not None:
                                pairs.append((v, name))
                elif tag is tags[2]:
                    for t in v:
                        if t is not None:  # a null item is a spec departure, reported so
                            names[t] = None
            elif tag == _ARRAY:
                if type(v) is list:
                    for item in v:
                        if type(item) is dict:
                            self._gather(sub, item, tags, counts, names, ids, pairs)
            elif type(v) is dict:
                self._gather(sub, v, tags, counts, names, ids, pairs)

    def _walk(self, node: Node, d: dict, visit: Visit, topic, topic_id, partition, path: str,
              paths: bool) -> None:
        topic = _field_or(d, node.topic_key, topic)
        topic_id = _field_or(d, node.topic_id_key, topic_id)
        k = node.partition_key
        if k is not None:
            v = d.get(k)
            if v is not None:
                partition = v
            if self.partition_structs and node.partition_struct and type(v) is int:
                visit(PARTITION, k, v, d, node, topic, topic_id, partition, path)
        for key, tag, sub in node.entries:
            v = d.get(key)
            if v is None:
                continue
            if sub is None:
                visit(tag, key, v, d, node, topic, topic_id, partition, path)
            elif tag == _ARRAY:
                if type(v) is not list:
                    continue
                if paths:
                    base = f"{path}.{key}" if path else key
                    for i, item in enumerate(v):
                        if type(item) is dict:
                            self._walk(sub, item, visit, topic, topic_id, partition,
                                       f"{base}[{i}]", True)
                else:
                    for item in v:
                        if type(item) is dict:
                            self._walk(sub, item, visit, topic, topic_id, partition, "", False)
            elif type(v) is dict:
                self._walk(sub, v, visit, topic, topic_id, partition,
                           (f"{path}.{key}" if path else key) if paths else "", paths)
