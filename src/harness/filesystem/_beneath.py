"""Using a file exactly where its path was checked, following no symbolic link on the way.

A path is checked by resolving it (every link followed, the result inside the namespace) and
then used. Between the two, anything that can write the workspace (a command in the sandbox,
another process) can swap a directory of the path for a link to ``/``, and a plain ``open`` of
the checked path would follow it out: to read a host file, to list a host directory, or to
write one. So the resolved path, which by construction holds no link, is walked one component
at a time, each opened relative to its parent's descriptor with ``O_NOFOLLOW``: a component
that has become a link since the check fails the walk instead of being followed. Every
operation then acts on a name inside the directory descriptor the walk ended on (``openat``,
``renameat``, ``unlinkat``), never on the path again. (``openat2(RESOLVE_BENEATH)`` does the
walk in one call, but Python has no binding for it; this works on every Linux.)

Only regular files are opened, and never in a way that can wait: every open of a file adds
``O_NONBLOCK`` (so a FIFO put where a file should be answers at once instead of holding a worker
thread until someone writes to it) and checks with ``fstat`` that it opened a regular file
(:class:`NotAFile` otherwise). A read takes a ``limit`` and stops there (:class:`TooLarge`), so a
sparse or growing file is never read whole into memory.

Writes are atomic here as well: the new bytes go to a temporary file in the same directory,
are flushed to disk, and replace the old file by rename, whose directory is then flushed too
(and every directory the walk made, up to the last one: :func:`sync_up`); a crash leaves the
old file or the new one, never a mix. A process killed in the middle leaves its
temporary file behind; :func:`remove_stray_temporaries` deletes those that no writer holds the
lock of (writers take the file's sidecar lock around the temporary file's life).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "HeldFile",
    "LinkSwapped",
    "Made",
    "NotAFile",
    "TooLarge",
    "append",
    "append_whole",
    "directory_beneath",
    "locked",
    "lstat",
    "make_directories",
    "open_appending",
    "read_beneath",
    "remove_stray_temporaries",
    "replace",
    "stat_beneath",
    "sync_directory",
    "sync_up",
]

_WALK = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_HELD = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
"""How every file is opened: no link followed, and nothing that can wait (a FIFO, a device)."""
_CHUNK = 1 << 20
_TEMPORARY = re.compile(r"\.(.+)\.[A-Za-z0-9_]{8}\.tmp")
"""A temporary file of a replace (``.<name>.<8 chars>.tmp``, as ``tempfile`` names them too)."""
_NEW_FILE_MODE = 0o600
"""Files are created private to their owner; a replaced file keeps the mode it had."""


class LinkSwapped(OSError):
    """A component of a checked path turned into a symbolic link before it was used."""


class NotAFile(OSError):
    """The name is something other than a regular file or a directory (a FIFO, a socket...)."""


class TooLarge(OSError):
    """A read found more bytes than its limit allows; ``size`` is how many it saw at least."""

    def __init__(self, path: object, size: int, limit: int) -> None:
        super().__init__(errno.EFBIG, f"over the limit of {limit:,} bytes", str(path))
        self.size = size
        self.limit = limit


@dataclass(slots=True)
class Made:
    """What a walk with ``create`` made: the directories above the held one with a new entry.

    ``levels`` is how far up from the held directory :func:`sync_up` must reach so that every
    directory the walk made is recorded in its parent on the disk: 0 when it made none, 1 when
    it made only the held directory (its parent holds the new entry), and so on.
    """

    levels: int = 0


@contextlib.contextmanager
def directory_beneath(
    root: Path, directory: Path, *, create: bool = False, made: Made | None = None
) -> Iterator[int]:
    """A descriptor of ``directory`` (a resolved path inside ``root``), reached link-free.

    With ``create``, ``root`` and the missing directories on the way are made (each then opened with
    ``O_NOFOLLOW``, so one swapped in right after it was made is refused all the same), and
    ``made`` learns how many (:class:`Made`): a new directory reaches the disk only when its
    parent is synced (:func:`sync_up`), which the write that needed it does when it makes
    anything durable.

    Raises:
        LinkSwapped: A component is a symbolic link now.
        FileNotFoundError: A directory is missing (and ``create`` is off).
        NotADirectoryError: A component is a file.
    """
    flags = _HELD if directory == root else _WALK
    parts = directory.relative_to(root).parts
    levels = 0
    try:
        fd = os.open(root, flags)
    except FileNotFoundError:
        if not create:
            raise
        os.makedirs(root, exist_ok=True)  # the root is the operator's; only below it is walked
        fd = os.open(root, flags)
        levels = len(parts) + 1  # the root's own entry, in its parent
    try:
        for index, part in enumerate(parts):
            flags = _HELD if index == len(parts) - 1 else _WALK
            try:
                inner = _step(fd, part, flags, directory)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):  # made meanwhile by another writer
                    os.mkdir(part, 0o777, dir_fd=fd)
                    levels = max(levels, len(parts) - index)
                inner = _step(fd, part, flags, directory)
            os.close(fd)
            fd = inner
        if made is not None:
            made.levels = levels
        yield fd
    finally:
        os.close(fd)


def read_beneath(root: Path, path: Path, *, limit: int) -> bytes:
    """The bytes of ``path``, a resolved path inside ``root``, read where it was checked.

    At most ``limit`` bytes are read: a file holding more (by its size, or by what a read
    finds, for a file that grows meanwhile) raises :class:`TooLarge` without being read whole.

    Raises:
        LinkSwapped: A component is a symbolic link now (it was not when the path resolved).
        FileNotFoundError, NotADirectoryError: The file or a directory on its way is gone.
        IsADirectoryError: ``path`` is a directory.
        NotAFile: ``path`` is a FIFO, a socket or a device.
        TooLarge: The file holds more than ``limit`` bytes.
        OSError: The file cannot be read.
    """
    if path == root:
        raise IsADirectoryError(errno.EISDIR, "is a directory", str(path))
    with directory_beneath(root, path.parent) as directory:
        fd = _step(directory, path.name, os.O_RDONLY | _FILE, path)
    try:
        size = _regular(fd, path).st_size
        if size > limit:
            raise TooLarge(path, size, limit)
        chunks = []
        left = limit + 1  # one byte more than allowed tells a file that grew past the limit
        while left > 0 and (chunk := os.read(fd, min(_CHUNK, left))):
            chunks.append(chunk)
            left -= len(chunk)
        if left <= 0:
            raise TooLarge(path, limit + 1, limit)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _regular(fd: int, path: object) -> os.stat_result:
    """The ``fstat`` of an opened file, which must be a regular file.

    Raises:
        IsADirectoryError, NotAFile: It is something else.
    """
    found = os.fstat(fd)
    if stat.S_ISREG(found.st_mode):
        return found
    if stat.S_ISDIR(found.st_mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory", str(path))
    raise NotAFile(errno.ENXIO, "is not a regular file (a FIFO, a socket or a device)", str(path))


def stat_beneath(root: Path, path: Path) -> os.stat_result | None:
    """What ``path`` is (a link is reported as the link itself); None when it is not there.

    Raises:
        LinkSwapped: A directory on the way is a symbolic link now.
    """
    try:
        if path == root:
            return os.stat(root)
        with directory_beneath(root, path.parent) as directory:
            return lstat(directory, path.name)
    except (FileNotFoundError, NotADirectoryError):
        return None


def lstat(directory: int, name: str) -> os.stat_result | None:
    """The entry ``name`` of a held directory, not following a link; None when missing."""
    try:
        return os.stat(name, dir_fd=directory, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return None


@contextlib.contextmanager
def locked(directory: int, name: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on the sidecar ``.<name>.lock`` of a held directory.

    A sidecar, not the file itself, because atomic replacement changes the file's inode.
    """
    lock = f".{name}.lock"
    fd = os.open(lock, os.O_WRONLY | os.O_CREAT | _FILE, 0o644, dir_fd=directory)
    try:
        _regular(fd, lock)
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def replace(directory: int, name: str, data: bytes, *, sync: bool = True, above: int = 0) -> None:
    """Atomically replace (or create) ``name`` in a held directory, keeping the old mode.

    Synced, the file, then its directory (the rename), then the ``above`` directories over it
    whose entries are new (:class:`Made`), reach the disk before this returns. ``sync=False``
    leaves out every ``fsync``: the rename is still atomic, so a crashed process leaves the old
    file or the new one, but after a power loss the disk may hold either (or, on a file system
    that does not order the data before the rename, an empty file). For files whose loss on a
    power cut costs nothing that was accepted (a session's state, outside ``session_fsync``).
    """
    old = lstat(directory, name)
    mode = stat.S_IMODE(old.st_mode) if old and stat.S_ISREG(old.st_mode) else _NEW_FILE_MODE
    temporary = f".{name}.{secrets.token_hex(4)}.tmp"
    fd = os.open(
        temporary,
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
        _NEW_FILE_MODE,
        dir_fd=directory,
    )
    try:
        try:
            os.fchmod(fd, mode)
            _write_all(fd, data)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, name, src_dir_fd=directory, dst_dir_fd=directory)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=directory)
        raise
    if sync:
        sync_up(directory, above)  # the rename itself reaches the disk, and new directories


def append(directory: int, name: str, data: bytes) -> None:
    """Append ``data`` to ``name`` (created if missing) with one write, under its ``flock``."""
    fd = os.open(name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _FILE, 0o644, dir_fd=directory)
    try:
        _regular(fd, name)
        fcntl.flock(fd, fcntl.LOCK_EX)
        append_whole(fd, data)
    finally:
        os.close(fd)  # closing releases the lock


class HeldFile:
    """A file kept open for appending, with its directory and its sidecar lock's file.

    For a writer that appends to one file many times: the walk to it (:func:`directory_beneath`)
    and the opens are done once, and each append is a write under the sidecar lock. Before it
    writes, the append checks that the name still holds the file it opened; when the file was
    replaced (an atomic :func:`replace`) or removed, it writes nothing and says so, and the
    caller opens the file afresh.

    Whether the file is new is kept, with how many directories above its own the walk to it
    made (:class:`Made`): the first sync (:meth:`sync`, or a synced :meth:`replace`) syncs
    those directories too, so a new file's appends are not synced into a file a power loss
    unnames. Appends that are never synced never wait for a directory.
    """

    def __init__(self, directory: int, name: str, *, made: int = 0) -> None:
        """Hold ``name`` (created if missing) in a held directory (its descriptor duplicated).

        ``made``: the :attr:`Made.levels` of the walk that reached the directory.
        """
        self.name = name
        self._directory = os.dup(directory)
        self._lock = self._file = -1
        try:
            self._lock = os.open(
                f".{name}.lock", os.O_WRONLY | os.O_CREAT | _FILE, 0o644, dir_fd=directory
            )
            _regular(self._lock, f".{name}.lock")
            self._file, created = open_appending(directory, name)
            self._inode = _regular(self._file, name).st_ino
        except BaseException:
            self.close()
            raise
        self._unsynced_above: int | None = made if created or made else None
        """The directories to sync up to at the first sync; None once they are (or need not)."""

    def append(self, data: bytes) -> bool:
        """Append ``data`` with one write under the sidecar lock; False if the file was replaced."""
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        try:
            now = lstat(self._directory, self.name)
            if now is None or now.st_ino != self._inode:
                return False
            append_whole(self._file, data)
            return True
        finally:
            fcntl.flock(self._lock, fcntl.LOCK_UN)

    def sync(self) -> None:
        """``fsync`` the held file, and, the first time, the directories its creation changed."""
        os.fsync(self._file)
        if self._unsynced_above is not None:
            sync_up(self._directory, self._unsynced_above)
            self._unsynced_above = None

    def replace(self, name: str, data: bytes, *, sync: bool = True) -> None:
        """:func:`replace` a file of the held file's directory (or the file itself), under its lock.

        The directory is the one the held file was reached by, so no walk from the root is
        needed; the sidecar lock excludes every other writer of that file, as a ``put`` does.
        Synced, it also syncs the directories above that the walk made, if not yet synced.
        """
        with locked(self._directory, name):
            replace(self._directory, name, data, sync=sync, above=self._unsynced_above or 0)
        if sync:  # that synced the directory naming the held file, and those above it made
            self._unsynced_above = None

    def close(self) -> None:
        for fd in (self._file, self._lock, self._directory):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._file = self._lock = self._directory = -1


def sync(directory: int, name: str) -> None:
    """``fsync`` the file ``name`` of a held directory, opened following no link; none: no-op."""
    try:
        fd = os.open(name, os.O_RDONLY | _FILE, dir_fd=directory)
    except FileNotFoundError:
        return
    try:
        _regular(fd, name)
        os.fsync(fd)
    finally:
        os.close(fd)


def open_appending(
    directory: int, name: str, *, readable: bool = False, mode: int = 0o644
) -> tuple[int, bool]:
    """Open ``name`` of a held directory for appending, creating it; and whether it was new.

    A new file's name reaches the disk only with its directory (:func:`sync_up`), which a
    durable writer syncs when, and only when, the file is new.
    """
    flags = (os.O_RDWR if readable else os.O_WRONLY) | os.O_APPEND | _FILE
    while True:
        try:
            return os.open(name, flags | os.O_CREAT | os.O_EXCL, mode, dir_fd=directory), True
        except FileExistsError:
            pass
        try:
            return os.open(name, flags, dir_fd=directory), False
        except FileNotFoundError:  # removed between the two opens: create it after all
            continue


def make_directories(path: Path, mode: int) -> int:
    """Make the directory ``path`` and its missing parents; how many it made.

    That is the :attr:`Made.levels` of ``path``: how far up from it :func:`sync_up` must reach
    for every new directory to be named on the disk. (Counted before they are made: a writer
    making them at the same moment can only add one sync more.)
    """
    missing = 0
    probe = path
    while not probe.exists():
        missing += 1
        probe = probe.parent
    path.mkdir(parents=True, exist_ok=True, mode=mode)
    return missing


def sync_directory(path: Path, levels: int = 0) -> None:
    """:func:`sync_up` from the directory at ``path``: an operator's path, not a checked one."""
    directory = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        sync_up(directory, levels)
    finally:
        os.close(directory)


def sync_up(directory: int, levels: int) -> None:
    """``fsync`` a held directory, then each of the ``levels`` directories above it.

    A new file or directory is on the disk only once the directory that names it is synced
    (POSIX; some file systems do it with the file's own ``fsync``, others do not), so a durable
    write syncs every directory whose entry it created, up to the last one it made. The way up
    is ``..``: if a directory was moved meanwhile, the ones synced are where it is now.
    """
    os.fsync(directory)
    fd = directory
    try:
        for _ in range(levels):
            parent = os.open("..", _HELD, dir_fd=fd)
            if fd != directory:
                os.close(fd)
            fd = parent
            os.fsync(fd)
    finally:
        if fd != directory:
            os.close(fd)


def append_whole(fd: int, data: bytes) -> None:
    """Append all of ``data`` to the file at ``fd``, or nothing; the caller holds its lock.

    A disk that fills part way through a write takes the bytes that fit and says how many, and
    refuses the rest only at the next write: an append that wrote once and trusted it left a torn
    record while its caller believed it whole. What a failed append wrote is cut off again, so
    the file ends where it did, and the next append does not glue its record onto a torn one.
    """
    end = os.lseek(fd, 0, os.SEEK_END)
    try:
        _write_all(fd, data)
    except OSError:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, end)
        raise


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _step(directory: int, name: str, flags: int, path: Path) -> int:
    try:
        return os.open(name, flags, dir_fd=directory)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(directory, name):
            msg = f"{name!r} on the way to {path} became a symbolic link after the path was checked"
            raise LinkSwapped(errno.ELOOP, msg) from None
        raise


def _is_link(directory: int, name: str) -> bool:
    found = lstat(directory, name)
    return found is not None and stat.S_ISLNK(found.st_mode)


def remove_stray_temporaries(root: Path) -> list[str]:
    """Delete the temporary files that killed writers left under ``root``; their paths.

    A temporary file whose file's sidecar lock can be taken has no writer (a writer holds the
    lock from before it creates the file until after the rename), so it is a stray. The walk
    follows no link.
    """
    removed = []
    for directory, _, names, held in os.fwalk(root):
        for name in names:
            match = _TEMPORARY.fullmatch(name)
            if match is None or not _unlocked(held, match.group(1)):
                continue
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=held)
                removed.append(os.path.join(directory, name))
    return removed


def _unlocked(directory: int, name: str) -> bool:
    """Whether nobody holds the sidecar lock of ``name`` (taken and let go at once)."""
    try:
        fd = os.open(f".{name}.lock", os.O_RDONLY | _FILE, dir_fd=directory)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True
