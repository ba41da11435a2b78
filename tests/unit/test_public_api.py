from __future__ import annotations

import importlib
import inspect

import pytest

PACKAGES = [
    "harness",
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
