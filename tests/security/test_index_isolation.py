"""Hole 4 of the trust boundary: two workspaces in one parent directory never share an index.

The search index sits beside the workspace: ``<parent>/memory_index.db`` for the first one of a
directory, ``<parent>/.<name>.memory_index.db`` for any other (``index_file``). An index serves
only the workspace that claimed it: no other workspace's search or indexing ever reads or
writes it, so neither tenant reads the other's memory.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from _steps import one_step

from harness import RuntimeContext
from harness.errors import StorageError
from harness.memory.index import MemoryIndex

SECRET = "Alice bank PIN is 4242"


async def turn(workspace: Path, name: str, arguments: dict[str, str]) -> str:
    """One call whose model uses one tool; the tool's result."""
    results = await one_step(
        workspace, [{"name": name, "input": arguments}], RuntimeContext(session_id="s1")
    )
    return results[-1]  # this call's; the session holds the earlier ones too


def rows_mentioning(index: Path, text: str) -> int:
    with sqlite3.connect(index) as conn:
        query = "SELECT count(*) FROM memory_lines WHERE content LIKE ?"
        count: int = conn.execute(query, (f"%{text}%",)).fetchone()[0]
    return count


async def test_the_second_tenants_search_finds_only_its_own_memory(tmp_path: Path) -> None:
    tenant_a, tenant_b = tmp_path / "tenantA", tmp_path / "tenantB"
    await turn(tenant_a, "memory_save", {"fact": SECRET})
    assert "4242" in await turn(tenant_a, "memory_search", {"query": "bank PIN"})
    await turn(tenant_b, "memory_save", {"fact": "Bob bank PIN is 1234"})

    found = await turn(tenant_b, "memory_search", {"query": "bank PIN"})

    assert "4242" not in found
    assert "1234" in found


async def test_the_second_tenant_writes_nothing_into_the_first_tenants_index(
    tmp_path: Path,
) -> None:
    tenant_a, tenant_b = tmp_path / "tenantA", tmp_path / "tenantB"
    await turn(tenant_a, "memory_save", {"fact": SECRET})

    await turn(tenant_b, "memory_save", {"fact": "Bob locker code is 1234"})

    index = tmp_path / "memory_index.db"
    assert rows_mentioning(index, "4242") >= 1
    assert rows_mentioning(index, "locker code") == 0
    assert rows_mentioning(tmp_path / ".tenantB.memory_index.db", "4242") == 0
    assert "locker code" in (tenant_b / "memory").joinpath(
        next(p.name for p in (tenant_b / "memory").glob("*.md"))
    ).read_text(encoding="utf-8")  # the fact itself is kept, in tenant B's own files


def test_every_operation_of_an_index_bound_to_another_workspace_is_refused(
    tmp_path: Path,
) -> None:
    with MemoryIndex(tmp_path, workspace=tmp_path / "a") as index:
        index.index_from_string("memory/x.md", SECRET)

    other = MemoryIndex(tmp_path)  # the shared file, opened without saying whose
    neighbour = MemoryIndex(tmp_path, workspace=tmp_path / "b")  # its own file
    with other, neighbour:
        with pytest.raises(StorageError, match="belongs to the workspace"):
            other.index_all_from_workspace(tmp_path / "b")
        with pytest.raises(StorageError, match="belongs to the workspace"):
            neighbour.index_all_from_workspace(tmp_path / "a")
    assert neighbour.path != other.path
    assert rows_mentioning(tmp_path / "memory_index.db", "Bob") == 0
