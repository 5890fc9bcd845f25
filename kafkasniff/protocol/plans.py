"""Decoding plans: the layout of one struct at one version, every version decision taken.

A plan says which fields are present, which are nullable, which use the compact (flexible)
encoding and which are tagged. :mod:`.schema` builds plans from the generated definitions;
the compiled fast decoder (:mod:`.codegen`), the lenient interpreter (:mod:`.lenient`) and the
plan walker (:mod:`.walk`) work from them, so they cannot disagree on the layout. This module
imports nothing of the project: it is the vocabulary the others share.
"""

from __future__ import annotations

from dataclasses import dataclass

#: bytes of each fixed-size Kafka primitive
FIXED_SIZES = {"int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint16": 2, "uint32": 4,
               "float64": 8, "bool": 1, "uuid": 16}
#: ``struct`` format code of each fixed-size primitive (big-endian unpacks)
STRUCT_CODES = {"int8": "b", "int16": "h", "int32": "i", "int64": "q", "uint16": "H",
                "uint32": "I", "float64": "d", "bool": "?", "uuid": "16s"}


@dataclass(frozen=True, slots=True)
class FieldPlan:
    """One field of a struct at one version.

    Attributes:
        key: snake_case name used in decoded dicts.
        kind: ``int8`` ... ``uuid``, ``string``, ``bytes``, ``records``, ``struct``, ``array``.
        items: element kind for arrays (a primitive kind or ``struct``), else ``None``.
        struct: the element/struct plan for struct kinds, else ``None``.
        compact: compact (uvarint-length) encoding for strings/bytes/records/arrays.
        nullable: null allowed at this version.
        tag: the tag number of a tagged field, else ``None``.
        entity_type: Kafka's ``entityType`` (``topicName``, ``brokerId`` ...), or ``None``.
    """

    key: str
    kind: str
    items: str | None
    struct: "StructPlan | None"
    compact: bool
    nullable: bool
    tag: int | None
    entity_type: str | None


@dataclass(frozen=True, slots=True)
class StructPlan:
    """A struct (or a whole message body) at one version.

    Attributes:
        name: struct or message name.
        fields: the untagged fields in wire order.
        tagged: tagged fields by tag number.
        flexible: whether a tagged-field section ends the struct.
    """

    name: str
    fields: tuple[FieldPlan, ...]
    tagged: dict[int, FieldPlan]
    flexible: bool
