"""Loading the generated definitions (``dissectors/``) and turning them into decoding plans.

A *plan* (:mod:`.plans`) is the layout of one struct at one version with every
version-dependent decision already taken. :class:`Definitions` builds plans and keeps the one
cache of compiled strict decoders (:meth:`Definitions.compiled`, compiled by :mod:`.codegen`)
that every decoding path shares.

Definitions directory lookup order: the ``directory`` argument, ``$KAFKASNIFF_DISSECTORS``,
the copy installed inside the package (``kafkasniff/dissectors``), the repository's
``dissectors/`` next to the package.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable

from kafkasniff.errors import DefinitionError
from kafkasniff.protocol import plandecode, prebuilt
from kafkasniff.protocol.codegen import compile_plan
from kafkasniff.protocol.plans import FieldPlan, StructPlan


def _in(rng, version: int) -> bool:
    if rng is None or rng == "none":
        return False
    lo, hi = rng
    return version >= lo and (hi is None or version <= hi)


@dataclass(frozen=True, slots=True)
class ApiInfo:
    """One API key as the definitions describe it.

    Attributes:
        api_key: the int16 API key.
        name: e.g. ``"Produce"``.
        min_version / max_version: valid version range (dropped versions included).
        flexible_from: first flexible version, or ``None`` if never flexible.
        request / response: message names of the two specs.
        listeners: which servers accept it (``broker``, ``controller``, ``zkBroker``).
    """

    api_key: int
    name: str
    min_version: int
    max_version: int
    flexible_from: int | None
    request: str
    response: str
    listeners: tuple[str, ...]

    def is_flexible(self, version: int) -> bool:
        """Whether ``version`` uses the flexible encoding (KIP-482); open-ended upwards."""
        return self.flexible_from is not None and version >= self.flexible_from


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """One Kafka error code: ``code`` (int16), ``name`` (e.g. ``NOT_LEADER_OR_FOLLOWER``), ``retriable``."""

    code: int
    name: str
    retriable: bool


def default_directory() -> Path:
    """The definitions directory to use when none is given (see module docstring).

    Raises DefinitionError when no directory holding an ``index.json`` is found.
    """
    env = os.environ.get("KAFKASNIFF_DISSECTORS")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parent.parent
    installed = here / "dissectors"
    if (installed / "index.json").is_file():
        return installed
    repo = here.parent / "dissectors"
    if (repo / "index.json").is_file():
        return repo
    raise DefinitionError("no Kafka definitions found: set $KAFKASNIFF_DISSECTORS or reinstall "
                          "kafkasniff (looked in kafkasniff/dissectors and ./dissectors)")


class Definitions:
    """The generated Kafka definitions, loaded lazily from a directory.

    Attributes:
        directory: where the JSON files are.
        prebuilt: use the decoders generated ahead of time while they are current
            (:mod:`kafkasniff.protocol.prebuilt`); False compiles every one at run time.
        apis: ``{api_key: ApiInfo}``.
        errors: ``{code: ErrorInfo}``.

    Raises DefinitionError when the directory or its index is missing or malformed.
    """

    def __init__(self, directory: Path | str | None = None, *, prebuilt: bool = True) -> None:
        self.directory = Path(directory) if directory is not None else default_directory()
        self.prebuilt = prebuilt
        index_path = self.directory / "index.json"
        try:
            index = json.loads(index_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise DefinitionError(f"{index_path}: cannot read definitions index: {exc}") from exc
        self.apis: dict[int, ApiInfo] = {}
        try:
            for a in index["apis"]:
                vv = a["valid_versions"] or [0, -1]
                fv = a.get("flexible_versions")
                self.apis[a["api_key"]] = ApiInfo(
                    api_key=a["api_key"], name=a["name"], min_version=vv[0], max_version=vv[1],
                    flexible_from=fv[0] if fv else None, request=a["request"],
                    response=a["response"], listeners=tuple(a.get("listeners", ())))
        except (LookupError, TypeError, AttributeError) as exc:
            raise DefinitionError(f"{index_path}: malformed definitions index: {exc!r}") from exc
        self.errors: dict[int, ErrorInfo] = {}
        errors_path = self.directory / "errors.json"
        if errors_path.is_file():
            try:
                for e in json.loads(errors_path.read_text(encoding="utf-8"))["errors"]:
                    self.errors[e["code"]] = ErrorInfo(e["code"], e["name"], e["retriable"])
            except (OSError, ValueError, LookupError, TypeError) as exc:
                raise DefinitionError(f"{errors_path}: cannot read error codes: {exc!r}") from exc
        self._messages: dict[str, dict] = {}
        self._sha256: dict[str, str] = {}
        self._plans: dict[tuple[str, str, int], StructPlan] = {}
        self._compiled: dict[tuple[str, int], Callable] = {}
        self._versions: dict[str, list[int]] = {}

    def message(self, name: str) -> dict:
        """The normalized definition of message ``name`` (e.g. ``"FetchResponse"``)."""
        m = self._messages.get(name)
        if m is None:
            path = self.directory / f"{name}.json"
            try:
                data = path.read_bytes()
                m = json.loads(data.decode("utf-8"))
            except (OSError, ValueError) as exc:
                raise DefinitionError(f"{path}: cannot read definition: {exc}") from exc
            self._messages[name] = m
            self._sha256[name] = hashlib.sha256(data).hexdigest()
        return m

    def message_sha256(self, name: str) -> str:
        """SHA-256 (hex) of the definition file of message ``name``, as read by
        :meth:`message` (raises as it does)."""
        self.message(name)
        return self._sha256[name]

    def error_name(self, code: int) -> str:
        """Kafka's name for an error code, or ``UNKNOWN_ERROR_CODE_<n>``."""
        info = self.errors.get(code)
        return info.name if info is not None else f"UNKNOWN_ERROR_CODE_{code}"

    def api_name(self, api_key: int) -> str:
        """The API name (``"Fetch"``) or ``"Unknown(<key>)"``."""
        info = self.apis.get(api_key)
        return info.name if info is not None else f"Unknown({api_key})"

    def message_versions(self, name: str) -> list[int]:
        """All versions a message's layouts cover, ascending (do not modify the list)."""
        got = self._versions.get(name)
        if got is None:
            out = []
            for lay in self.message(name)["layouts"]:
                lo, hi = lay["versions"]
                out.extend(range(lo, hi + 1))
            got = self._versions[name] = sorted(set(out))
        return got

    def layout(self, name: str, version: int) -> dict | None:
        """The layout of ``name`` that describes ``version``, or ``None``."""
        for lay in self.message(name)["layouts"]:
            if _in(lay["versions"], version):
                return lay
        return None

    def plan(self, name: str, version: int) -> StructPlan:
        """The decoding plan of message ``name`` at ``version``.

        Raises DefinitionError if no layout describes that version.
        """
        key = (name, "", version)
        plan = self._plans.get(key)
        if plan is None:
            lay = self.layout(name, version)
            if lay is None:
                raise DefinitionError(f"{name} has no version {version}")
            flexible = _in(lay["flexible_versions"], version)
            plan = self._struct_plan(lay, name, name, lay["fields"], version, flexible)
            self._plans[key] = plan
        return plan

    def compiled(self, name: str, version: int) -> Callable:
        """The compiled strict decoder of message ``name`` at ``version`` (cached here):
        ``fn(buf, pos) -> (value dict, end)``; it raises one of
        :data:`kafkasniff.protocol.decoder.STRICT_ERRORS` on bytes that do not fit.

        Its values and errors are those of the generated decoder: the one generated ahead of
        time (:mod:`kafkasniff.protocol.prebuilt`) while that is current for these
        definitions, else compiled now (:func:`.codegen.compile_plan`). When the compiled
        interpreter is installed (:mod:`.plandecode`), that decoder is the
        :class:`~.plandecode.PlanDecoder`'s ``reference``: the interpreter decodes, the
        reference takes every body it stops on.

        Raises DefinitionError if no layout describes that version.
        """
        fn = self._compiled.get((name, version))
        if fn is None:
            fn = self.generated(name, version)
            if plandecode.compiled():
                fn = plandecode.PlanDecoder(self.plan(name, version), fn)
            self._compiled[(name, version)] = fn
        return fn

    def generated(self, name: str, version: int) -> Callable:
        """The generated strict decoder of message ``name`` at ``version``, not cached: the
        one generated ahead of time while current, else compiled now. :meth:`compiled` is
        what decoding uses. Raises DefinitionError if no layout describes that version."""
        fn = prebuilt.decoder(name, version, self.message_sha256(name)) \
            if self.prebuilt else None
        return fn if fn is not None else compile_plan(self.plan(name, version))

    def _struct_plan(self, lay: dict, message: str, name: str, fields: list[dict], version: int,
                     flexible: bool) -> StructPlan:
        plain: list[FieldPlan] = []
        tagged: dict[int, FieldPlan] = {}
        for f in fields:
            if not _in(f["versions"], version):
                continue
            is_tagged = _in(f.get("tagged_versions"), version)
            fflex = f.get("flexible_versions")
            compact = flexible if fflex is None else (fflex != "none" and _in(fflex, version))
            sub = None
            if "struct" in f:
                # struct names are unique within a message, not across messages
                key = (message, f["struct"], version)
                sub = self._plans.get(key)
                if sub is None:
                    sdef = lay["structs"][f["struct"]]
                    sub = self._struct_plan(lay, message, f["struct"], sdef["fields"], version,
                                            flexible)
                    self._plans[key] = sub
            fp = FieldPlan(key=f["key"], kind=f["type"], items=f.get("items"), struct=sub,
                           compact=compact or is_tagged,
                           nullable=_in(f.get("nullable_versions"), version),
                           tag=f["tag"] if is_tagged else None,
                           entity_type=f.get("entity_type"))
            if is_tagged:
                tagged[f["tag"]] = fp
            else:
                plain.append(fp)
        return StructPlan(name=name, fields=tuple(plain), tagged=tagged, flexible=flexible)


@lru_cache(maxsize=4)
def load_definitions(directory: str | None = None) -> Definitions:
    """Shared, cached :class:`Definitions` for a directory (``None``: the default one).

    Raises DefinitionError as :class:`Definitions` does.
    """
    return Definitions(directory)
