"""Imports go one way: down the layers of docs/architecture.md; the kernel stands alone.

The checks read the source with :mod:`ast`, so they see every import, including those inside
functions and ``if TYPE_CHECKING:`` blocks, whatever happens to be imported at test time.
"""

from pathlib import Path

import pytest
from _imports import imported_modules, package_imports

KERNEL = Path(__file__).resolve().parents[2] / "src" / "harness" / "kernel"
KERNEL_PACKAGE = "harness.kernel"
ALLOWED = ("harness.kernel", "harness.errors", "harness.context")


def violations(source: str, package: str = KERNEL_PACKAGE) -> list[str]:
    """The harness modules ``source`` imports that the kernel may not depend on."""
    return [
        module
        for module in imported_modules(source, package)
        if (module == "harness" or module.startswith("harness."))
        and not any(module == ok or module.startswith(f"{ok}.") for ok in ALLOWED)
    ]


def kernel_files() -> list[Path]:
    return sorted(KERNEL.rglob("*.py"))


def test_kernel_sources_are_found() -> None:
    names = {path.name for path in kernel_files()}

    assert {"__init__.py", "agent.py", "message.py", "toolkit.py", "hooks.py"} <= names


@pytest.mark.parametrize("path", kernel_files(), ids=lambda path: path.name)
def test_kernel_module_imports_only_kernel_errors_and_context(path: Path) -> None:
    assert violations(path.read_text(encoding="utf-8")) == []


def test_kernel_uses_errors_and_context() -> None:
    used = {
        module
        for path in kernel_files()
        for module in imported_modules(path.read_text(encoding="utf-8"), KERNEL_PACKAGE)
    }

    assert {"harness.errors", "harness.context"} <= used


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import harness.memory", ["harness.memory"]),
        ("import harness", ["harness"]),
        ("from harness.hooks.trace import TraceHook", ["harness.hooks.trace"]),
        ("from harness import agent, errors", ["harness.agent"]),
        ("def f():\n    from harness.workspace import layout", ["harness.workspace"]),
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from harness.agent import X",
            ["harness.agent"],
        ),
        ("from ..session import store", ["harness.session"]),
        ("from .. import models", ["harness.models"]),
        ("from .message import Msg", []),
        ("from harness.kernel.message import Msg\nimport harness.context", []),
        ("from harness.errors import ModelError\nimport pydantic", []),
        ("import harnessing", []),
    ],
)
def test_the_check_itself(source: str, expected: list[str]) -> None:
    assert violations(source) == expected


LAYERS = (
    ("errors", "context"),
    ("layout", "paths"),
    ("kernel",),
    ("models", "stores", "sections"),
    ("filesystem",),
    ("workspace",),
    ("session", "skills", "observability", "mcp", "memory", "approvals"),
    ("compaction", "structured"),
    ("subagents",),
    ("options",),
    ("tools",),
    ("hooks",),
    ("assembly",),
    ("agent",),
    ("durable",),
    ("serve",),
    ("cli", "harness"),
)
"""From the bottom up: a package may import only packages of a lower layer (a module directly
in ``src/harness/`` is a package of its own name; ``harness`` is the package's ``__init__``)."""


def test_every_package_has_a_layer() -> None:
    ranked = [package for layer in LAYERS for package in layer]
    assert len(ranked) == len(set(ranked))
    assert set(package_imports()) <= set(ranked)


def test_imports_go_down_the_layers() -> None:
    rank = {package: i for i, layer in enumerate(LAYERS) for package in layer}
    upward = {
        (package, target)
        for package, targets in package_imports().items()
        for target in targets
        if rank[target] >= rank[package]
    }
    assert upward == set()
