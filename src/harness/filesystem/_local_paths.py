"""Where a path of a local workspace lives on disk, and how it is reached there.

:class:`LocalPaths` turns a path a call names into a :class:`Target`: the namespace it is
confined to (:class:`~harness.filesystem.base.Confinement`), its directories resolved, and a
symbolic link that leads out of the namespace refused. The functions below then reach a
target's bytes where it was checked, walking from the workspace root one directory descriptor at
a time and following no link (:mod:`._beneath`), so a directory swapped for a link after the
check is refused, never followed out.

Both halves of :class:`~harness.filesystem.local.LocalFilesystem` build on this module: the
tool operations (:mod:`._local_tools`) and the storage operations (:mod:`._local_storage`).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TypeVar

from harness.context import RuntimeContext
from harness.filesystem._beneath import (
    LinkSwapped,
    Made,
    directory_beneath,
    locked,
    read_beneath,
    stat_beneath,
)
from harness.filesystem._semantics import BadName, SymlinkEscape, check_names, shown_path
from harness.filesystem.base import Confinement, IsolationScope, check_path, namespace_prefix
from harness.layout import USERS_DIR
from harness.paths import normalize

__all__ = [
    "MAX_PATH_BYTES",
    "LocalPaths",
    "Target",
    "checked_read",
    "checked_stat",
    "followed_link",
    "held_directory",
    "inside",
    "is_directory",
    "locked_file",
    "swapped_link",
]


_R = TypeVar("_R")

MAX_PATH_BYTES: Final = 4096
"""The longest whole path (root included, in bytes) Linux takes."""

_PLAIN_KEPT: Final = 1024
"""Storage paths whose resolution is kept (see :meth:`LocalPaths._storage_target`)."""


@dataclass(frozen=True, slots=True)
class Target:
    """Where a path lives on disk.

    ``leaf`` has its directories resolved but not its last component (so a symbolic link
    itself can be deleted or moved); ``path`` is resolved all the way (what reads and writes
    use). Both are inside ``namespace``, which is inside ``root`` (the workspace directory,
    resolved), where every walk to them starts.
    """

    rel: str
    leaf: Path
    path: Path
    namespace: Path
    root: Path
    hidden: Path | None = None
    """A directory inside the namespace the call must not see (``users/`` for a no-user call)."""

    def allows(self, path: Path) -> bool:
        """Whether a resolved path is part of what this call may see."""
        return inside(path, self.namespace) and (
            self.hidden is None or not inside(path, self.hidden)
        )


class LocalPaths:
    """Path resolution for a workspace directory on local disk (``root``), per namespace.

    It runs on a worker thread (it touches the disk), inside the operation that needs it.
    """

    root: Path
    scope: IsolationScope
    _real_root: Path | None
    _plain: dict[str, Target]
    """Storage paths (``ctx=None``) whose directories held no symbolic link when resolved."""

    def _resolve_root(self) -> Path:
        """The root with its links resolved, once it exists (it is the operator's choice)."""
        real = self.root.resolve()
        if real.is_dir():
            self._real_root = real
        return real

    def _resolve(self, path: str, ctx: RuntimeContext | None) -> Target:
        """Where ``path`` lives for this call.

        Raises:
            PathOutsideWorkspace: The path escapes (``..``, ``~``, NUL, another namespace, a
                symbolic link leading out) or names something the disk cannot hold.
        """
        if not isinstance(path, str):
            msg = f"a path must be a string, got {type(path).__name__}"
            raise TypeError(msg)
        check_path(path, self.scope, ctx)
        rel = normalize(path)
        check_names(path, rel)
        prefix = namespace_prefix(self.scope, ctx)
        root = self._real_root or self._resolve_root()
        base = root / prefix if prefix else root
        lexical = base / rel if rel else base
        confinement = Confinement.of(rel, self.scope, ctx)
        namespace = root / confinement.directory if confinement.directory else root
        if len(os.fsencode(lexical)) >= MAX_PATH_BYTES:
            msg = (
                f"path {shown_path(path)} is too long for the disk ({len(rel.encode())} bytes); "
                "use a shorter path with fewer directories"
            )
            raise BadName(msg)
        try:
            parent = lexical.parent.resolve() if rel else base.parent
            leaf = parent / lexical.name if rel else base
            real = leaf.resolve() if leaf.is_symlink() else leaf  # parent is resolved already
        except (OSError, RuntimeError) as exc:  # a symlink loop (RuntimeError before 3.13)
            msg = f"path {shown_path(path)} runs into a loop of symbolic links"
            raise BadName(msg) from exc
        hidden = namespace / USERS_DIR if confinement.hides_users else None
        target = Target(rel, leaf, real, namespace, root, hidden)
        if not (target.allows(leaf.parent) or leaf == namespace) or not target.allows(real):
            msg = (
                f"path {shown_path(path)} leads out of the caller's namespace through a symbolic "
                "link; use a path whose links stay inside"
            )
            raise SymlinkEscape(msg)
        return target

    def _storage_target(self, path: str, ctx: RuntimeContext | None) -> tuple[Target, bool]:
        """:meth:`_resolve` for a storage operation, and whether it is a kept resolution.

        The harness's own writes (a session's append before every step) name the same few
        paths again and again, and resolving one (``realpath``, a ``stat`` per directory)
        cost as much as the write. When the directories of a path held no symbolic link, its
        resolution is the path itself and is kept. That never weakens the confinement: the
        operation still walks from the root following no link (:mod:`._beneath`), so a
        directory made a link since is refused; the caller then resolves afresh
        (:meth:`_retry_fresh`) and does what a fresh resolution would have done. The file itself
        is checked at every use (a link there is resolved as :meth:`_resolve` does).
        """
        if ctx is not None:
            return self._resolve(path, ctx), False
        kept = self._plain.get(path)
        if kept is not None and not kept.leaf.is_symlink():
            return kept, True
        target = self._resolve(path, ctx)
        lexical = target.root / normalize(path)
        if target.rel and target.path == target.leaf and target.leaf == lexical:
            if len(self._plain) >= _PLAIN_KEPT:
                self._plain.clear()
            self._plain[path] = target
        return target, False

    def _retry_fresh(
        self, path: str, ctx: RuntimeContext | None, operation: Callable[[Target], _R]
    ) -> _R:
        """Run ``operation`` on the path's target; on a kept one a link refused, afresh.

        A :class:`SymlinkEscape` from a kept target comes from a walk, before anything was
        read or written; the path is resolved again and the operation runs once more.
        """
        target, kept = self._storage_target(path, ctx)
        if not kept:
            return operation(target)
        try:
            return operation(target)
        except SymlinkEscape:
            self._plain.pop(path, None)
            return operation(self._resolve(path, ctx))

    def _display(self, target: Target, real: Path) -> str:
        """The namespace-relative path of a real path found under ``target``."""
        below = real.relative_to(target.path).as_posix()
        if below == ".":
            return target.rel
        return f"{target.rel}/{below}" if target.rel else below


def followed_link(target: Target, link: Path) -> tuple[Path, os.stat_result] | None:
    """Where a symbolic link met in a listing leads and what is there, when the call may see it.

    None for a link leading out of what the call sees, dangling, or in a loop.
    """
    try:
        resolved = link.resolve(strict=True)
        if not target.allows(resolved):
            return None
        found = stat_beneath(target.root, resolved)
    except (OSError, RuntimeError):  # a loop, or changed meanwhile
        return None
    if found is None or stat.S_ISLNK(found.st_mode):
        return None
    return resolved, found


def is_directory(found: os.stat_result | None) -> bool:
    """Whether a stat found a directory."""
    return found is not None and stat.S_ISDIR(found.st_mode)


def inside(path: Path, directory: Path) -> bool:
    """Whether ``path`` is ``directory`` or below it (both resolved)."""
    return path == directory or path.is_relative_to(directory)


def checked_read(target: Target, shown: str, limit: int) -> bytes:
    """The file's bytes (at most ``limit``), opened where its path was checked (:mod:`._beneath`).

    Raises:
        PathOutsideWorkspace: A directory of the path became a symbolic link after the check.
        TooLarge, NotAFile: See :func:`._beneath.read_beneath`.
    """
    try:
        return read_beneath(target.root, target.path, limit=limit)
    except LinkSwapped:
        raise swapped_link(shown) from None


def checked_stat(target: Target, path: Path, shown: str) -> os.stat_result | None:
    """What is at a resolved path of ``target`` (None: nothing), reached following no link.

    Raises:
        PathOutsideWorkspace: A directory of the path, or the path itself, is a symbolic link
            now (none was when the path resolved).
    """
    try:
        found = stat_beneath(target.root, path)
    except LinkSwapped:
        raise swapped_link(shown) from None
    if found is not None and stat.S_ISLNK(found.st_mode):
        raise swapped_link(shown)
    return found


@contextlib.contextmanager
def held_directory(
    target: Target, directory: Path, shown: str, *, create: bool = False, made: Made | None = None
) -> Iterator[int]:
    """A descriptor of a directory of ``target``, reached following no link (see :mod:`._beneath`).

    ``made`` learns which directories ``create`` made (:class:`~._beneath.Made`).

    Raises:
        PathOutsideWorkspace: A directory on the way became a symbolic link after the check.
    """
    try:
        with directory_beneath(target.root, directory, create=create, made=made) as held:
            yield held
    except LinkSwapped:
        raise swapped_link(shown) from None


@contextlib.contextmanager
def locked_file(
    target: Target, shown: str, *, create: bool = True, made: Made | None = None
) -> Iterator[int]:
    """The held directory of ``target``'s file, with the file's sidecar lock taken."""
    with (
        held_directory(target, target.path.parent, shown, create=create, made=made) as directory,
        locked(directory, target.path.name),
    ):
        yield directory


def swapped_link(shown: str) -> SymlinkEscape:
    """The refusal of a path whose directory became a symbolic link while it was used."""
    return SymlinkEscape(
        f"path {shown_path(shown)} leads out of the caller's namespace through a symbolic link "
        "(it changed while being used); use a path whose links stay inside"
    )
