"""An import-linter contract type of the project's own: no ``_private`` name is imported
across packages.

Registered in ``pyproject.toml`` (``[tool.importlinter] contract_types``) and run by
``lint-imports`` in the test suite (tests/test_layers.py). A *package* is a top-level member
of the container (``kafkasniff.tui``, ``kafkasniff.pipeline`` ...): inside one package a
module may use another's private names; across packages only public names may be imported.
A private name is one starting with ``_`` that is not a dunder (``__version__`` is public),
or any name of a module whose own name starts with ``_``.
"""

from __future__ import annotations

import ast
import importlib.util

from importlinter import Contract, ContractCheck, fields, output


def _package(module: str, depth: int) -> str:
    return ".".join(module.split(".")[:depth + 1])


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _resolve(importer: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = importer.split(".")
    if not is_package:
        base = base[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


class PrivateNamesContract(Contract):
    """Options: ``containers`` (packages whose members are checked, e.g. ``kafkasniff``)."""

    type_name = "private names"
    containers = fields.ListField(subfield=fields.StringField())

    def check(self, graph, verbose: bool) -> ContractCheck:
        violations = []
        for container in self.containers:
            depth = container.count(".") + 1
            for module in sorted(m for m in graph.modules if m.startswith(container + ".")):
                spec = importlib.util.find_spec(module)
                if spec is None or not spec.origin or not spec.origin.endswith(".py"):
                    continue
                with open(spec.origin, encoding="utf-8") as f:
                    tree = ast.parse(f.read(), spec.origin)
                is_package = spec.origin.endswith("__init__.py")
                for node in ast.walk(tree):
                    if not isinstance(node, ast.ImportFrom):
                        continue
                    target = _resolve(module, is_package, node)
                    if not target.startswith(container + ".") or \
                            _package(target, depth) == _package(module, depth):
                        continue
                    names = [a.name for a in node.names]
                    bad = [n for n in names if _private(n)]
                    if any(_private(part) for part in target.split(".")):
                        bad = names
                    for name in bad:
                        violations.append(f"{module}:{node.lineno} imports {target}.{name}")
        return ContractCheck(kept=not violations, metadata={"violations": violations})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for line in check.metadata["violations"]:
            output.print_error(line)
            output.new_line()
