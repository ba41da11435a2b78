"""What the harness's modules import, read from their source (for the layering checks)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"


def imported_modules(source: str, package: str) -> list[str]:
    """Every module an import statement in ``source`` names, relative imports resolved."""
    modules: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
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
