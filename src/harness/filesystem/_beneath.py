"""Opening a file exactly where its path was checked, following no symbolic link on the way.

A path is checked by resolving it (every link followed, the result inside the namespace) and
then used. Between the two, anything that can write the workspace (a command in the sandbox,
another process) can swap a directory of the path for a link to ``/``, and a plain ``open`` of
the checked path would follow it out. So the resolved path, which by construction holds no
link, is opened one component at a time, each relative to its parent's descriptor with
``O_NOFOLLOW``: a component that has become a link since the check fails the open instead of
being followed. (``openat2(RESOLVE_BENEATH)`` does the same in one call, but Python has no
binding for it; this walk works on every Linux.)
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

__all__ = ["LinkSwapped", "read_beneath"]

_DIRECTORY = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class LinkSwapped(OSError):
    """A component of a checked path turned into a symbolic link before it was opened."""


def read_beneath(root: Path, path: Path) -> bytes:
    """The bytes of ``path``, a resolved path inside ``root``, read where it was checked.

    Raises:
        LinkSwapped: A component is a symbolic link now (it was not when the path resolved).
        FileNotFoundError, NotADirectoryError: The file or a directory on its way is gone.
        IsADirectoryError: ``path`` is a directory.
        OSError: The file cannot be read.
    """
    fd = _open(root, path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", str(path))
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _open(root: Path, path: Path, flags: int) -> int:
    parts = path.relative_to(root).parts
    if not parts:
        raise IsADirectoryError(errno.EISDIR, "is a directory", str(path))
    fd = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            inner = _step(fd, part, _DIRECTORY, path)
            os.close(fd)
            fd = inner
        return _step(fd, parts[-1], flags | os.O_NOFOLLOW, path)
    finally:
        os.close(fd)


def _step(directory: int, name: str, flags: int, path: Path) -> int:
    try:
        return os.open(name, flags, dir_fd=directory)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(directory, name):
            msg = f"{name!r} on the way to {path} became a symbolic link after the path was checked"
            raise LinkSwapped(errno.ELOOP, msg) from None
        raise


def _is_link(directory: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(name, dir_fd=directory).st_mode)
    except OSError:
        return False
