"""What the harness's modules import, read from their source (for the layering checks)."""

from __future__ import annotations

import ast
from collections.abc import Collection
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"


def _absolute(node: ast.ImportFrom, package: str) -> str:
    """The module a ``from ... import`` names, a relative one resolved from ``package``."""
    if not node.level:
        return node.module or ""
    parts = package.split(".")
    base = ".".join(parts[: len(parts) - node.level + 1])
    return f"{base}.{node.module}" if node.module else base


def imported_modules(source: str, package: str) -> list[str]:
    """Every module an import statement in ``source`` names, relative imports resolved."""
    modules: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(node, package)
            if module == "harness":
                # `from harness import x` may import the submodule harness.x
                modules.extend(f"harness.{alias.name}" for alias in node.names)
            else:
                modules.append(module)
    return modules


def package_imports() -> dict[str, set[str]]:
    """Package -> the other harness packages its modules import, deferred imports included.

    A module directly in ``src/harness/`` counts as a package of its own name, and the
    package's ``__init__`` as ``harness``.
    """
    graph: dict[str, set[str]] = {}
    for path in (SRC / "harness").rglob("*.py"):
        parts = path.relative_to(SRC).with_suffix("").parts
        package = ".".join(parts[:-1])  # what a relative import starts from
        me = "harness" if parts == ("harness", "__init__") else parts[1]
        for module in imported_modules(path.read_text(encoding="utf-8"), package):
            target = module.split(".")
            if target[0] == "harness" and len(target) > 1 and target[1] != me:
                graph.setdefault(me, set()).add(target[1])
    return graph


def harness_modules() -> dict[str, Path]:
    """Every module of the harness by its dotted name (a package by its ``__init__``'s file)."""
    modules: dict[str, Path] = {}
    for path in (SRC / "harness").rglob("*.py"):
        parts = path.relative_to(SRC).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def module_imports(source: str, package: str, modules: Collection[str]) -> set[str]:
    """The modules of ``modules`` that ``source`` imports, deferred and ``TYPE_CHECKING`` ones too.

    ``from a.b import c`` imports the module ``a.b.c`` when there is one, else ``a.b`` itself
    (a name its ``__init__`` defines). ``package`` is what relative imports start from.
    """
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(node, package)
            for alias in node.names:
                if f"{module}.{alias.name}" in modules:
                    found.add(f"{module}.{alias.name}")
                elif module in modules:
                    found.add(module)
    return found


def module_graph() -> dict[str, set[str]]:
    """Module -> the other harness modules it imports (see :func:`module_imports`)."""
    modules = harness_modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = ".".join(path.relative_to(SRC).with_suffix("").parts[:-1])
        graph[name] = module_imports(path.read_text(encoding="utf-8"), package, modules) - {name}
    return graph
