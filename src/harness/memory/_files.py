"""Which workspace files the memory index reads, who owns them, and how a change is noticed.

Indexed: ``MEMORY.md``, ``memory/*.md`` (not ``memory/archive/``, not dot-files) and
``agents/*/sessions/*.log.jsonl``, at the workspace root (shared) and under every
``users/<segment>/`` (owned by that user). Symbolic links are not followed, so a link cannot
pull a file from outside the workspace, or from another user, into search results. A file over
its :func:`read_limit` is indexed as empty, with a warning. A file whose name is not UTF-8 is
skipped with a warning naming it.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Collection
from pathlib import Path

from harness.filesystem import DEFAULT_MAX_STORAGE_BYTES
from harness.workspace import (
    AGENTS_DIR,
    MAX_TEXT_BYTES,
    MEMORY_DIR,
    MEMORY_MD,
    USERS_DIR,
    WorkspaceManager,
)

__all__ = ["digest", "named_in_utf8", "owner_of", "read_limit", "scan", "scan_workspace"]

logger = logging.getLogger(__name__)


def owner_of(path: str) -> str:
    """The owner of a workspace path: ``<segment>`` under ``users/<segment>/``, else ``""``."""
    parts = path.split("/", 2)
    return parts[1] if len(parts) == 3 and parts[0] == USERS_DIR else ""


def digest(text: str) -> str:
    """The content hash stored per file (SHA-256 of the UTF-8 text)."""
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()


def read_limit(path: str) -> int:
    """The most the index reads of a file.

    A memory file (the model writes them): what ``read_file`` would read of it. A transcript
    (the harness's own): the storage read's cap.
    """
    return DEFAULT_MAX_STORAGE_BYTES if path.endswith(".log.jsonl") else MAX_TEXT_BYTES


def _entries(directory: Path) -> list[os.DirEntry[str]]:
    """The entries of a directory, none when it is a link (its files are not the owner's)."""
    if directory.is_symlink():
        return []
    try:
        with os.scandir(directory) as it:
            return [e for e in it if not e.name.startswith(".")]
    except (FileNotFoundError, NotADirectoryError):
        return []


def named_in_utf8(path: str) -> bool:
    """Whether ``path`` can be indexed; a name that is not UTF-8 is skipped with a warning.

    Such a name (easy to make from a shell in the sandbox) reaches Python with surrogate
    escapes, which SQLite cannot store: left in, it would stop the indexing of every file.
    """
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        shown = path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        logger.warning("not indexed: %s: its name is not valid UTF-8; rename the file", shown)
        return False
    return True


def scan(workspace: Path) -> dict[str, tuple[int, int]]:
    """Workspace path -> (size, mtime_ns) of every indexable file, from one ``scandir`` each."""
    found: dict[str, tuple[int, int]] = {}

    def add(rel: str, entry: os.DirEntry[str]) -> None:
        if not named_in_utf8(rel):
            return
        if entry.is_file(follow_symlinks=False):
            stat = entry.stat(follow_symlinks=False)
            found[rel] = (stat.st_size, stat.st_mtime_ns)

    roots = [("", workspace)]
    for user in _entries(workspace / USERS_DIR):
        if user.is_dir(follow_symlinks=False):
            roots.append((f"{USERS_DIR}/{user.name}/", Path(user.path)))
    for prefix, root in roots:
        for entry in _entries(root):
            if entry.name == MEMORY_MD:
                add(prefix + MEMORY_MD, entry)
        for entry in _entries(root / MEMORY_DIR):
            if entry.name.endswith(".md"):
                add(f"{prefix}{MEMORY_DIR}/{entry.name}", entry)
        for agent in _entries(root / AGENTS_DIR):
            if agent.is_dir(follow_symlinks=False):
                for entry in _entries(Path(agent.path) / "sessions"):
                    if entry.name.endswith(".log.jsonl"):
                        add(f"{prefix}{AGENTS_DIR}/{agent.name}/sessions/{entry.name}", entry)
    return found


async def scan_workspace(
    workspace: WorkspaceManager, owners: Collection[str] | None = None
) -> dict[str, tuple[int, int]]:
    """:func:`scan` through the workspace's backend (a store shared by several workers).

    The (size, mtime_ns) pairs come from the backend's listings, so unchanged files are not
    fetched again. ``owners`` (as :func:`owner_of` names them, ``""`` for the shared files)
    limits the listing to those namespaces; None lists every one.
    """
    found: dict[str, tuple[int, int]] = {}

    async def add(directory: str, keep: Callable[[str], bool]) -> None:
        for info in await workspace.list_own(directory):
            name = info.path.rsplit("/", 1)[-1]
            if keep(name) and not name.startswith(".") and named_in_utf8(info.path):
                found[info.path] = (info.size, int(info.modified * 1_000_000_000))

    names = await workspace.list_dirs(USERS_DIR) if owners is None else owners
    roots = [f"{USERS_DIR}/{name}/" for name in names if name]
    if owners is None or "" in owners:
        roots.insert(0, "")
    for prefix in roots:
        await add(prefix.rstrip("/"), lambda name: name == MEMORY_MD)
        await add(f"{prefix}{MEMORY_DIR}", lambda name: name.endswith(".md"))
        for agent in await workspace.list_dirs(f"{prefix}{AGENTS_DIR}"):
            sessions = f"{prefix}{AGENTS_DIR}/{agent}/sessions"
            await add(sessions, lambda name: name.endswith(".log.jsonl"))
    return found
