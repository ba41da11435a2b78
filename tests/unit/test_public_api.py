from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import zipfile
from pathlib import Path

import pytest

import harness
import harness.errors

SURFACE = Path(__file__).with_name("public_surface.json")
"""Every public package's ``__all__``, pinned: a change to the public surface shows in review."""

PACKAGES = [
    "harness",
    "harness.errors",
    "harness.kernel",
    "harness.models",
    "harness.workspace",
    "harness.session",
    "harness.hooks",
    "harness.memory",
    "harness.compaction",
    "harness.tools",
    "harness.subagents",
    "harness.filesystem",
    "harness.stores",
    "harness.skills",
    "harness.mcp",
    "harness.observability",
    "harness.serve",
    "harness.approvals",
    "harness.durable",
]


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_importable(name: str) -> None:
    module = importlib.import_module(name)
    assert len(set(module.__all__)) == len(module.__all__)
    for item in module.__all__:
        assert getattr(module, item) is not None


@pytest.mark.parametrize("name", PACKAGES)
def test_every_public_name_is_exported(name: str) -> None:
    module = importlib.import_module(name)
    public = {
        attr
        for attr, value in vars(module).items()
        if not attr.startswith("_")
        and (inspect.isclass(value) or inspect.isfunction(value))
        and value.__module__.startswith(name + ".")
    }
    assert public <= set(module.__all__)


def test_top_level_names() -> None:
    import harness

    assert {"HarnessAgent", "RuntimeContext", "HarnessError", "ConfigError", "ModelError"} <= set(
        harness.__all__
    )
    assert issubclass(harness.ContextOverflowError, harness.ModelError)
    assert issubclass(harness.RateLimitError, harness.ModelError)
    assert issubclass(harness.ModelError, harness.HarnessError)
    assert issubclass(harness.PathOutsideWorkspace, ValueError)


def test_the_public_surface_is_exactly_the_pinned_one() -> None:
    pinned = json.loads(SURFACE.read_text(encoding="utf-8"))
    assert sorted(pinned) == sorted(PACKAGES)
    for name in PACKAGES:
        exported = sorted(importlib.import_module(name).__all__)
        assert exported == pinned[name], (
            f"the public names of {name} changed; if that is meant, update {SURFACE.name} "
            "in the same commit"
        )


def _exceptions_defined_in_harness() -> list[type[BaseException]]:
    found: dict[type[BaseException], None] = {}
    for info in pkgutil.walk_packages(harness.__path__, "harness."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == info.name
            ):
                found[value] = None
    return list(found)


def test_every_exception_a_package_exports_lives_in_the_errors_tree() -> None:
    for name in PACKAGES:
        module = importlib.import_module(name)
        for item in module.__all__:
            value = getattr(module, item)
            if inspect.isclass(value) and issubclass(value, BaseException):
                assert value.__module__ == "harness.errors", f"{name}.{item}"
                assert issubclass(value, harness.errors.HarnessError), f"{name}.{item}"
                assert item in harness.errors.__all__, f"{name}.{item}"


def test_exceptions_outside_errors_py_are_private_control_flow() -> None:
    """A class raised across modules belongs in errors.py; only private helpers stay put."""
    exported = {
        id(getattr(importlib.import_module(name), item))
        for name in PACKAGES
        for item in importlib.import_module(name).__all__
    }
    for error in _exceptions_defined_in_harness():
        if error.__module__ == "harness.errors":
            continue
        private = error.__name__.startswith("_") or any(
            part.startswith("_") for part in error.__module__.split(".")
        )
        where = f"{error.__module__}.{error.__name__}"
        assert private, where
        assert id(error) not in exported, where


def test_the_wheel_ships_py_typed(tmp_path: Path) -> None:
    """Users' type checkers read the package's hints only if the wheel has the marker."""
    from hatchling.builders.wheel import WheelBuilder

    root = Path(harness.__file__).resolve().parents[2]
    wheel = next(
        iter(WheelBuilder(str(root)).build(directory=str(tmp_path), versions=["standard"]))
    )
    with zipfile.ZipFile(wheel) as built:
        names = set(built.namelist())
    assert "harness/py.typed" in names
    assert "harness/errors.py" in names
    assert "harness/cli/demo_script.json" in names  # the tour's script, read as package data
