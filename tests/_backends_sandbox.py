"""The sandbox and composite backends of the filesystem contract suites.

``sandbox``: a :class:`SandboxFilesystem` in the test's directory (its file operations are the
local ones; the factory checks that bubblewrap works, since the backend exists for it).
``composite``: a :class:`CompositeFilesystem` whose default is one local directory and whose
``memory/`` route is another, so every contract test that touches ``memory/`` crosses a route.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from _required import unavailable
from harness.filesystem import (
    AbstractFilesystem,
    CompositeFilesystem,
    LocalFilesystem,
    SandboxFilesystem,
)

__all__ = ["FACTORIES"]


async def _require_bwrap(fs: SandboxFilesystem) -> None:
    problem = await fs.check()
    if problem is None:
        return
    unavailable(f"the bubblewrap sandbox does not work here: {problem}")


@asynccontextmanager
async def _sandbox(tmp_path: Path) -> AsyncIterator[AbstractFilesystem]:
    fs = SandboxFilesystem(tmp_path / "workspace")
    await _require_bwrap(fs)
    try:
        yield fs
    finally:
        await fs.aclose()


@asynccontextmanager
async def _composite(tmp_path: Path) -> AsyncIterator[AbstractFilesystem]:
    fs = CompositeFilesystem(
        LocalFilesystem(tmp_path / "a"), {"memory/": LocalFilesystem(tmp_path / "b")}
    )
    try:
        yield fs
    finally:
        await fs.aclose()


FACTORIES = {"sandbox": _sandbox, "composite": _composite}
