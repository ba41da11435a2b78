"""``harness memory``: index, search, consolidate and maintain long-term memory."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import Progress
from rich.table import Table

from harness.cli._common import (
    ModelOpt,
    StoreOpt,
    UserOpt,
    VerboseOpt,
    WorkspaceOpt,
    opened_workspace,
    run_async,
)
from harness.cli._output import err, out, setup_logging
from harness.compaction import evictions_cleanup
from harness.memory import (
    DEFAULT_MEMORY,
    MemoryHistory,
    MemoryIndex,
    MemoryMaintenance,
    MemoryVersion,
)
from harness.memory.index import IndexStats
from harness.memory.maintenance import sync_index
from harness.models import resolve_model
from harness.workspace import WorkspaceManager

__all__ = ["memory_app"]

memory_app = typer.Typer(
    help="Long-term memory: the search index, consolidation and upkeep.",
    no_args_is_help=True,
)

PLAIN: dict[str, Any] = {"markup": False, "highlight": False, "soft_wrap": True}


@asynccontextmanager
async def _maintenance(
    workspace: Path | None, store: str | None, model: str | None, *, need_model: bool
) -> AsyncIterator[MemoryMaintenance]:
    async with opened_workspace(workspace, store) as manager:
        llm = resolve_model(model) if need_model or model else None
        running = MemoryMaintenance.for_workspace(
            manager, config=DEFAULT_MEMORY, model=llm, cleanup=evictions_cleanup(manager)
        )
        try:
            yield running
        finally:
            await running.release()
            close = getattr(llm, "aclose", None)
            if close is not None:
                await close()


@asynccontextmanager
async def _caught_up_index(
    manager: WorkspaceManager,
    *,
    rebuild: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> AsyncIterator[tuple[MemoryIndex, IndexStats]]:
    """The local index of the workspace, open and brought up to date with its files.

    The index is a cache beside the local directory, also when the files live in a store:
    only files changed since it last saw them are read.
    """
    index = MemoryIndex(manager.root.parent, workspace=manager.root)
    await asyncio.to_thread(index.open)
    try:
        if rebuild:
            await asyncio.to_thread(index.clear)
        yield index, await sync_index(index, manager, progress=progress)
    finally:
        await asyncio.to_thread(index.close)


@memory_app.command("index")
def index_command(
    workspace: WorkspaceOpt = None,
    store: StoreOpt = None,
    user: UserOpt = None,
    rebuild: Annotated[
        bool, typer.Option("--rebuild", help="Drop the index and build it anew.")
    ] = False,
    verbose: VerboseOpt = False,
) -> None:
    """Bring the search index up to date with the memory files and transcripts.

    The index is one cache for the whole workspace, every user's namespace included, so
    --user changes nothing here.
    """
    setup_logging(verbose)

    async def _index() -> tuple[IndexStats, float]:
        started = time.perf_counter()
        with Progress(console=err, transient=True, disable=not err.is_terminal) as progress:
            task = progress.add_task("indexing", total=None)

            def advance(done: int, total: int) -> None:
                progress.update(task, completed=done, total=total)

            async with (
                opened_workspace(workspace, store) as manager,
                _caught_up_index(manager, rebuild=rebuild, progress=advance) as (_, stats),
            ):
                pass
        return stats, time.perf_counter() - started

    stats, seconds = run_async(_index())
    out.print(
        f"Indexed {stats.indexed} files ({stats.unchanged} unchanged, {stats.removed} removed) "
        f"in {seconds:.2f} s",
        **PLAIN,
    )


@memory_app.command("search")
def search_command(
    query: Annotated[str, typer.Argument(help="What to look for, in plain words.")],
    workspace: WorkspaceOpt = None,
    store: StoreOpt = None,
    user: UserOpt = None,
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, max=200, help="How many hits.")
    ] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="Print the hits as JSON.")] = False,
    lines: Annotated[
        bool, typer.Option("--lines", help="One line per hit instead of snippets of lines.")
    ] = False,
) -> None:
    """Search long-term memory as the agent's memory_search does, for one user."""

    async def _search() -> list[dict[str, object]]:
        async with (
            opened_workspace(workspace, store) as manager,
            _caught_up_index(manager) as (index, _),
        ):
            hits = await index.asearch(query, limit, user_id=user, snippets=not lines)
        return [
            {
                "path": h.path,
                "line_number": h.line_number,
                "last_line": h.last_line,
                "content": h.content,
                "rank": h.rank,
            }
            for h in hits
        ]

    hits = run_async(_search())
    if as_json:
        out.print_json(json.dumps(hits, ensure_ascii=False))
        return
    if not hits:
        out.print(f"No matching memories found for: {query}", **PLAIN)
        return
    table = Table("path", "lines", "content", "rank")
    table.columns[0].overflow = "fold"  # a path is shown whole, folded if it must be
    for hit in hits:
        first, last = hit["line_number"], hit["last_line"]
        span = f"{first}" if first == last else f"{first}-{last}"
        table.add_row(str(hit["path"]), span, str(hit["content"]), f"{hit['rank']:.3g}")
    out.print(table)


@memory_app.command("consolidate")
def consolidate_command(
    workspace: WorkspaceOpt = None,
    store: StoreOpt = None,
    user: UserOpt = None,
    model: ModelOpt = None,
    verbose: VerboseOpt = False,
) -> None:
    """Merge the daily logs written since the last run into MEMORY.md (needs a model)."""
    setup_logging(verbose)

    async def _consolidate() -> tuple[bool, str]:
        async with _maintenance(workspace, store, model, need_model=True) as running:
            assert running.consolidator is not None
            result = await running.consolidator.consolidate(user)
            if result.updated:
                await running.index_file_for(user)
                return True, f"MEMORY.md updated from {len(result.merged)} daily logs"
            return not result.refused, f"MEMORY.md unchanged: {result.reason}"

    fine, line = run_async(_consolidate())
    if not fine:  # refused: the model's answer would have lost memory
        err.print(line, **PLAIN)
        raise typer.Exit(1)
    out.print(line, **PLAIN)


@memory_app.command("history")
def history_command(
    version: Annotated[
        str | None, typer.Argument(help="Print this saved version instead of the list.")
    ] = None,
    workspace: WorkspaceOpt = None,
    store: StoreOpt = None,
    user: UserOpt = None,
) -> None:
    """List the saved versions of MEMORY.md, newest first (each rewrite keeps the one before)."""

    async def _history() -> list[MemoryVersion] | str:
        async with opened_workspace(workspace, store) as manager:
            history = MemoryHistory(manager)
            return await history.read(version, user) if version else await history.versions(user)

    found = run_async(_history())
    if isinstance(found, str):
        out.print(found, end="", **PLAIN)
        return
    if not found:
        out.print("no saved versions of MEMORY.md", **PLAIN)
        return
    table = Table("version", "path", "bytes")
    for saved in found:
        table.add_row(saved.id, saved.path, str(saved.size))
    out.print(table)


@memory_app.command("restore")
def restore_command(
    version: Annotated[str, typer.Argument(help="A version from `harness memory history`.")],
    workspace: WorkspaceOpt = None,
    store: StoreOpt = None,
    user: UserOpt = None,
) -> None:
    """Put a saved version back as MEMORY.md; the text it replaces is saved as a version too."""

    async def _restore() -> str | None:
        async with opened_workspace(workspace, store) as manager:
            return await MemoryHistory(manager).restore(version, user)

    saved = run_async(_restore())
    kept = f"; the text it replaced is version {saved}" if saved else ""
    out.print(f"MEMORY.md restored from version {version}{kept}", **PLAIN)


@memory_app.command("maintain")
def maintain_command(
    workspace: WorkspaceOpt = None,
    store: StoreOpt = None,
    user: UserOpt = None,
    model: ModelOpt = None,
    verbose: VerboseOpt = False,
) -> None:
    """Run the maintenance pass now: archive, consolidate, prune, re-index.

    Daily logs past retention move to memory/archive/, memory is consolidated (left out without
    a model configured), old transcripts, background tasks, traces and subagent registries are
    deleted, and the index catches up.

    Maintenance covers every namespace, so --user changes nothing here.
    """
    setup_logging(verbose)

    async def _maintain() -> list[str]:
        has_model = bool(model or os.environ.get("HARNESS_MODEL"))
        async with _maintenance(workspace, store, model, need_model=has_model) as running:
            report = await running.run()
        return [
            f"archived {len(report.archived)} daily logs",
            f"consolidated {', '.join(report.consolidated) or 'nothing'}"
            + ("" if has_model else " (no model configured)"),
            f"pruned {len(report.pruned)} transcript files",
            f"deleted {len(report.expired)} old task, trace and subagent registry files",
            f"deleted {len(report.evictions_deleted)} old evicted tool results",
            f"re-indexed {report.indexed_files} files",
        ]

    for line in run_async(_maintain()):
        out.print(line, **PLAIN)
