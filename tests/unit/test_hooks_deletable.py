"""Each hook module can be deleted with its lines in ``assembly.py`` and the hooks index.

Only those two files may refer to a hook module, so what the hooks share (prompt sections, the
session key, the filesystem lifecycle protocol, the workspace section's settings) lives in the
layers below them. The check reads the source with :mod:`ast`: deferred imports and
``TYPE_CHECKING`` blocks count too.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
HOOKS = SRC / "harness" / "hooks"
ALLOWED = {SRC / "harness" / "assembly.py", HOOKS / "__init__.py"}


def hook_modules() -> list[str]:
    return sorted(
        f"harness.hooks.{path.stem}" for path in HOOKS.glob("*.py") if path.stem != "__init__"
    )


def references(source: str, module: str, exported: set[str]) -> bool:
    """Whether ``source`` imports ``module`` or a name the hooks index takes from it."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            if any(
                alias.name == module or alias.name.startswith(f"{module}.") for alias in node.names
            ):
                return True
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == module or node.module.startswith(f"{module}."):
                return True
            if node.module == "harness.hooks" and any(a.name in exported for a in node.names):
                return True
    return False


def exported_by(module: str) -> set[str]:
    """The names of ``harness.hooks`` that are defined in ``module``."""
    index = importlib.import_module("harness.hooks")
    return {
        name
        for name in index.__all__
        if getattr(getattr(index, name), "__module__", None) == module
    }


def test_every_hook_module_is_found() -> None:
    assert {"harness.hooks.trace", "harness.hooks.workspace_context"} <= set(hook_modules())


@pytest.mark.parametrize("module", hook_modules())
def test_only_the_agent_and_the_hooks_index_refer_to_a_hook_module(module: str) -> None:
    exported = exported_by(module)
    referring = sorted(
        str(path.relative_to(SRC))
        for path in SRC.rglob("*.py")
        if path not in ALLOWED and references(path.read_text(encoding="utf-8"), module, exported)
    )
    assert referring == [], f"{module} is imported by {referring}; move what they use below it"


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ("from harness.hooks.trace import AgentTraceHook", True),
        ("def f():\n    import harness.hooks.trace", True),
        ("from harness.hooks import AgentTraceHook", True),
        ("from harness.hooks import SkillsHook", False),
        ("from harness.sections import SystemSection", False),
    ],
)
def test_references_sees_every_form_of_import(source: str, found: bool) -> None:
    module = "harness.hooks.trace"
    assert references(source, module, exported_by(module)) is found
