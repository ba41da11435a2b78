"""A small real disk for the tests of what happens when it is full: a tmpfs of 1 MiB.

Mounting one needs root. Without it the test skips with the reason, and fails in CI (where
the suite runs as root), so a missing check never passes unseen.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

__all__ = ["fill", "small_disk"]
from _required import unavailable


@contextlib.contextmanager
def small_disk(where: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs at ``where``, unmounted afterwards."""
    where.mkdir(parents=True)
    reason = None
    if os.geteuid() != 0:
        reason = "mounting a small tmpfs needs root"
    else:
        mounted = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)],
            capture_output=True,
            text=True,
            check=False,
        )
        if mounted.returncode != 0:
            reason = f"cannot mount a tmpfs here: {mounted.stderr.strip()}"
    if reason is not None:
        unavailable(reason)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(disk: Path) -> Path:
    """Fill the disk to the last byte; the filler file, to remove later."""
    filler = disk / "filler"
    with contextlib.suppress(OSError), filler.open("wb") as handle:
        while True:
            handle.write(b"\0" * 4096)
            handle.flush()
    return filler
