"""The kernel stands alone: it imports nothing from harness but itself, errors and context.

The check reads the source with :mod:`ast`, so it sees every import, including those inside
functions and ``if TYPE_CHECKING:`` blocks, whatever happens to be imported at test time.
"""

import ast
from pathlib import Path

import pytest

KERNEL = Path(__file__).resolve().parents[2] / "src" / "harness" / "kernel"
KERNEL_PACKAGE = "harness.kernel"
ALLOWED = ("harness.kernel", "harness.errors", "harness.context")


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
