"""The workspace path policy: every path a caller names stays inside the workspace.

A workspace path is relative to the workspace root. A leading ``/`` means the workspace root (the
agent's view of the world starts there), backslashes are separators, and the following are
refused with :class:`~harness.errors.PathOutsideWorkspace`: a ``..`` segment, a ``~`` home
reference, and a symbolic link that leads outside. A name that merely contains dots
(``some..dir``) is an ordinary name.
"""

from __future__ import annotations

from pathlib import Path

from harness.errors import PathOutsideWorkspace

__all__ = ["normalize", "resolve_inside"]


def normalize(path: str) -> str:
    """Return the workspace-relative POSIX form of ``path``, or raise if it would escape.

    ``""``, ``"/"`` and ``"."`` all mean the workspace root and normalize to ``""``.
    """
    text = path.replace("\\", "/").strip()
    if text.startswith("~"):
        msg = f"path {path!r} refers to a home directory; use a path inside the workspace"
        raise PathOutsideWorkspace(msg)
    parts = [part for part in text.split("/") if part not in ("", ".")]
    if ".." in parts:
        msg = f"path {path!r} climbs out with '..'; use a path inside the workspace"
        raise PathOutsideWorkspace(msg)
    return "/".join(parts)  # what PurePosixPath(*parts) makes of them, without its parsing


def resolve_inside(root: Path, path: str) -> Path:
    """Resolve a workspace path to a local path under ``root``, following symbolic links.

    Raises:
        PathOutsideWorkspace: The path escapes, directly or through a symbolic link.
    """
    rel = normalize(path)
    base = root.resolve()
    target = (base / rel).resolve()
    if target != base and base not in target.parents:
        msg = f"path {path!r} leads outside the workspace (through a symbolic link)"
        raise PathOutsideWorkspace(msg)
    return target
