"""Hole 3 of the trust boundary: a link swapped in after a path was checked is never followed.

A path is checked (resolved, inside the namespace) and then opened. A process that can write
the workspace (a command in the sandbox) swapped ``d`` between a directory and a link to a host
directory while one step ran thousands of reads of ``d/secret.txt``: some reads returned the
host file. Files are now opened one component at a time beneath the checked path, following no
link, so every read returns the workspace's file or an error, never the host's.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from _backends import open_backend
from harness.filesystem import AbstractFilesystem

READS = 2_500
INSIDE = "inside the workspace\n"
OUTSIDE = "HOST FILE: outside the workspace\n"

SWAPPER = """
import os, sys
os.chdir(sys.argv[1])
outside = sys.argv[2]
while True:
    os.rename("d", "d.real")
    os.symlink(outside, "d")
    os.unlink("d")
    os.rename("d.real", "d")
"""
"""Swaps ``d`` between the real directory and a link to the host directory, as fast as it can."""


async def race(fs: AbstractFilesystem, root: Path, outside: Path) -> list[str]:
    """``READS`` reads (and storage gets) of d/secret.txt while the swapper runs."""
    swapper = await asyncio.create_subprocess_exec(
        sys.executable, "-c", SWAPPER, str(root), str(outside)
    )
    try:
        await asyncio.sleep(0.2)  # let it get going

        async def read() -> str:
            result = await fs.read("d/secret.txt")
            return result.data.content if result.data is not None else ""

        async def get() -> str:
            try:
                found = await fs.get("d/secret.txt")
            except Exception as exc:  # a refusal is a fine answer, a leak is not
                return type(exc).__name__
            return found[0].decode() if found is not None else ""

        answers = await asyncio.gather(*(read() if i % 2 else get() for i in range(READS)))
    finally:
        swapper.kill()
        await swapper.wait()
    return list(answers)


@pytest.mark.parametrize("backend", ["local", "sandbox"])
async def test_reads_racing_a_link_swapper_never_return_a_host_file(
    tmp_path: Path, backend: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(OUTSIDE, encoding="utf-8")
    async with open_backend(backend, tmp_path) as fs:
        assert (await fs.write("d/secret.txt", INSIDE)).error is None
        root = tmp_path / "workspace"
        assert (root / "d" / "secret.txt").is_file()

        answers = await race(fs, root, outside)

    leaks = [answer for answer in answers if "HOST FILE" in answer]
    assert leaks == [], f"{len(leaks)} of {READS} reads returned the host file"
    assert sum(answer == INSIDE for answer in answers) > 0  # the reads did run, and succeed
