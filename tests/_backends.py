"""The filesystem backends every contract suite runs against.

``FACTORIES`` maps a backend's name to a factory ``factory(tmp_path)`` that builds a fresh, empty
filesystem for one test. ``tmp_path`` is unique per test: use it as the root directory, or to
derive a unique key prefix in a shared store. A factory returns either

- an async context manager yielding the filesystem (preferred: it can stop what it started), or
- an awaitable of the filesystem; the fixture then calls ``await fs.aclose()`` after the test.

The filesystem must use ``IsolationScope.USER`` (the default), so that ``users/<id>/`` is each
user's namespace and ``ctx=None`` sees the whole workspace.

Other backends join by defining their own ``FACTORIES`` (same form) in an optional module next to
this one: ``_backends_remote.py`` (``memory-store``, ``redis-store``) and ``_backends_sandbox.py``
(``sandbox``, ``composite``). A factory that cannot run here (no ``redis-server``, no
``bwrap``) calls ``pytest.skip`` outside CI and ``pytest.fail`` in CI (env ``CI`` set).
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import TypeAlias

from harness.filesystem import AbstractFilesystem, LocalFilesystem

Factory: TypeAlias = Callable[
    [Path], AbstractAsyncContextManager[AbstractFilesystem] | Awaitable[AbstractFilesystem]
]

OPTIONAL_MODULES = ("_backends_remote", "_backends_sandbox")
"""Modules that add backends when they exist (each written alongside its backend)."""

EXPECTED_BACKENDS = frozenset({"local", "memory-store", "redis-store", "sandbox", "composite"})
"""The backends the finished project registers."""


@asynccontextmanager
async def _local(tmp_path: Path) -> AsyncIterator[AbstractFilesystem]:
    fs = LocalFilesystem(tmp_path / "workspace")
    try:
        yield fs
    finally:
        await fs.aclose()


def _collect() -> dict[str, Factory]:
    factories: dict[str, Factory] = {"local": _local}
    for name in OPTIONAL_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:  # the module exists but something it imports is missing
                raise
            continue
        extra: dict[str, Factory] = module.FACTORIES
        clash = factories.keys() & extra.keys()
        if clash:
            msg = f"{name}.FACTORIES redefines backends {sorted(clash)}; pick other names"
            raise RuntimeError(msg)
        factories.update(extra)
    return factories


FACTORIES: dict[str, Factory] = _collect()


@asynccontextmanager
async def open_backend(name: str, tmp_path: Path) -> AsyncIterator[AbstractFilesystem]:
    """The filesystem ``FACTORIES[name]`` builds, released when the block ends."""
    made = FACTORIES[name](tmp_path)
    if isinstance(made, AbstractAsyncContextManager):  # anything with __aenter__/__aexit__
        async with made as fs:
            yield fs
        return
    fs = await made
    try:
        yield fs
    finally:
        await fs.aclose()
