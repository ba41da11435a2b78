"""The harness's own reads and writes of a user's files stay in that user's namespace.

The harness names a user's files ``users/<id>/...`` and reaches them with ``ctx=None``. Those
operations used to be confined to the workspace root only, so a link that alice's sandbox made
from her own ``MEMORY.md`` (or a directory on its way: ``memory/``, ``agents/``) to bob's put
bob's memory in alice's prompt, loaded bob's conversation as hers and appended her turns to
his files. Now the namespace a path names is where it may lead (``Confinement``): a link out of
it, to another user, to the shared root or to the host, is refused by every operation, and
what lies beyond it is neither read nor changed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.errors import PathOutsideWorkspace
from harness.filesystem import LocalFilesystem
from harness.workspace import WorkspaceManager

CANARY = b"bob-private-canary"

HARNESS_PATHS = [
    "MEMORY.md",
    "memory/2026-01-01.md",
    "memory/.consolidation_state",
    "agents/harness/context/s1/messages.jsonl",
    "agents/harness/sessions/s1.jsonl",
    "agents/harness/sessions/s1.log.jsonl",
    "agents/harness/tasks/task_1.json",
    "agents/harness/children/s1.json",
    "agents/harness/traces/s1.jsonl",
    "large_tool_results/harness/shell-1.txt",
    "AGENTS.md",
    "knowledge/KNOWLEDGE.md",
]

_TARGETS = ["bob-same", "bob-root", "shared", "host-file", "host-dir", "parent"]


def _seed(root: Path) -> None:
    """Bob's copy of every harness path, a shared copy, and a host file: all with the canary."""
    for rel in HARNESS_PATHS:
        for base in (root / "users" / "bob", root):
            file = base / rel
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_bytes(CANARY + b" " + rel.encode() + b"\n")
    (root.parent / "host.txt").write_bytes(CANARY + b" host\n")
    (root / "users" / "alice").mkdir(parents=True, exist_ok=True)


def _target(root: Path, kind: str, rel: str, depth: int) -> Path:
    """Where the link made at the ``depth``-th component of alice's ``rel`` points."""
    parts = rel.split("/")
    here = "/".join(parts[: depth + 1])
    return {
        "bob-same": root / "users" / "bob" / here,
        "bob-root": root / "users" / "bob",
        "shared": root / here,
        "host-file": root.parent / "host.txt",
        "host-dir": root.parent,
        "parent": root / "users",
    }[kind]


def _tree(root: Path) -> dict[str, bytes | str]:
    """Every entry under ``root``: a file's bytes, a link's target, a directory's mark."""
    found: dict[str, bytes | str] = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(directory) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                found[rel] = "-> " + os.readlink(path)
            elif path.is_file():
                found[rel] = path.read_bytes()
            else:
                found[rel] = "dir"
    return found


@settings(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    rel=st.sampled_from(HARNESS_PATHS),
    kind=st.sampled_from(_TARGETS),
    depth=st.integers(min_value=0, max_value=5),
    relative=st.booleans(),
)
async def test_a_link_out_of_a_namespace_is_refused_by_every_harness_operation(
    tmp_path_factory: pytest.TempPathFactory, rel: str, kind: str, depth: int, relative: bool
) -> None:
    root = tmp_path_factory.mktemp("links") / "ws"
    _seed(root)
    parts = rel.split("/")
    depth = min(depth, len(parts) - 1)
    link = root / "users" / "alice" / "/".join(parts[: depth + 1])
    target = _target(root, kind, rel, depth)
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(os.path.relpath(target, link.parent) if relative else target)
    others = {"bob": _tree(root / "users" / "bob"), "host": (root.parent / "host.txt").read_bytes()}
    shared = {name: (root / name).read_bytes() for name in ("MEMORY.md", "AGENTS.md")}

    workspace = WorkspaceManager(root, LocalFilesystem(root))
    path = f"users/alice/{rel}"
    with pytest.raises(PathOutsideWorkspace):
        await workspace.backend.get(path)
    with pytest.raises(PathOutsideWorkspace):
        await workspace.backend.put(path, b"alice wrote this\n")
    with pytest.raises(PathOutsideWorkspace):
        await workspace.backend.append(path, b"alice appended this\n")
    assert await workspace.read_own(rel, "alice") is None  # skipped, and told
    assert path in workspace.unusable
    assert isinstance(workspace.backend, LocalFilesystem)
    listing = await workspace.backend.glob("**", "users/alice")
    for entry in listing.entries:
        assert CANARY not in await _read(workspace, entry.path)

    assert _tree(root / "users" / "bob") == others["bob"]
    assert (root.parent / "host.txt").read_bytes() == others["host"]
    assert {name: (root / name).read_bytes() for name in shared} == shared


async def _read(workspace: WorkspaceManager, path: str) -> bytes:
    try:
        found = await workspace.backend.get(path)
    except PathOutsideWorkspace:
        return b""
    return found[0] if found is not None else b""


async def test_a_shared_path_never_leads_into_a_users_namespace(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    _seed(root)
    (root / "AGENTS.md").unlink()
    (root / "AGENTS.md").symlink_to(root / "users" / "bob" / "MEMORY.md")
    workspace = WorkspaceManager(root, LocalFilesystem(root))
    assert await workspace.read_text("AGENTS.md", "alice") == ""
    with pytest.raises(PathOutsideWorkspace):
        await workspace.backend.get("AGENTS.md")


_SESSION = "agents/harness/context/s1"
_SWAPS = st.sampled_from(["append", "append", "append", "out", "bob", "inside", "back", "close"])


@settings(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(operations=st.lists(_SWAPS, min_size=1, max_size=20))
async def test_a_held_session_file_writes_nowhere_a_link_swapped_in_points(
    tmp_path_factory: pytest.TempPathFactory, operations: list[str]
) -> None:
    """The appender a call holds (``Storage.appender``) keeps writing where its walk found the
    file, so a directory swapped for a link while it is held (to the host, to bob, or inside
    alice's namespace) redirects nothing; a fresh walk through a link out is refused. Every
    record that was accepted is in alice's namespace exactly once, and a refused one nowhere."""
    root = tmp_path_factory.mktemp("held") / "ws"
    _seed(root)
    others = {"bob": _tree(root / "users" / "bob"), "host": _host(root)}
    session = root / "users" / "alice" / _SESSION
    session.mkdir(parents=True)
    aside = root / "users" / "alice" / "aside"
    fs = LocalFilesystem(root)
    appender = fs.appender(f"users/alice/{_SESSION}/messages.jsonl")
    accepted: list[bytes] = []
    refused: list[bytes] = []
    try:
        for number, operation in enumerate(operations):
            if operation == "append":
                record = b"record-%d\n" % number
                try:
                    await appender.append(record)
                except PathOutsideWorkspace:
                    refused.append(record)
                else:
                    accepted.append(record)
            elif operation == "close":
                await appender.aclose()
            elif operation == "back" and session.is_symlink():
                session.unlink()
                aside.rename(session)
            elif operation != "back" and not session.is_symlink():
                session.rename(aside)
                session.symlink_to(
                    {
                        "out": root.parent,
                        "bob": root / "users" / "bob" / _SESSION,
                        "inside": aside,
                    }[operation],
                    target_is_directory=True,
                )
    finally:
        await appender.aclose()

    assert _tree(root / "users" / "bob") == others["bob"]
    assert _host(root) == others["host"]
    alice = b"".join(
        found for found in _tree(root / "users" / "alice").values() if isinstance(found, bytes)
    )
    for record in accepted:
        assert alice.count(record) == 1, record
    for record in refused:
        assert record not in alice


def _host(root: Path) -> dict[str, bytes | str]:
    """What the workspace's parent holds outside the workspace."""
    return {rel: found for rel, found in _tree(root.parent).items() if rel.split("/")[0] != "ws"}
