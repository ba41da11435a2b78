"""A small real disk for the tests of what happens when it is full: a tmpfs of 1 MiB.

Mounting one needs root. Without it the test skips with the reason, and fails in CI (where
the suite runs as root), so a missing check never passes unseen.
"""

from __future__ import annotations

import contextlib
import errno
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
    """Fill the disk to its last page; the filler file, to remove later.

    Only "no space left" ends the filling. A tmpfs's pages are memory, and a write can be
    refused for a moment when memory is short (the suite runs a local model beside this
    test): such a write is tried again. Had it ended the filling, the disk would have been
    left with room, and the turn meant to fail for want of it saved (seen once in CI).
    """
    filler = disk / "filler"
    refused = 0
    with filler.open("wb", buffering=0) as handle:
        while True:
            try:
                handle.write(b"\0" * _PAGE)
            except OSError as error:
                if error.errno == errno.ENOSPC:
                    break
                refused += 1
                if refused > _RETRIES:
                    raise
    usage = os.statvfs(disk)
    left = usage.f_bavail * usage.f_frsize
    assert left < _PAGE, f"{disk} still has {left} bytes free after filling it"
    return filler


_PAGE = 4096
_RETRIES = 1000
