"""``harness memory``: index, search, consolidate and maintain long-term memory."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Final

import typer
from rich.progress import Progress
from rich.table import Table
from rich.text import Text

from harness.cli._common import (
    ModelOpt,
    StoreOpt,
    UserOpt,
    VerboseOpt,
    WorkspaceOpt,
    looked_in,
    opened_workspace,
    run_async,
    valid_text,
)
from harness.cli._output import PLAIN, err, out, setup_logging
from harness.compaction import evictions_cleanup
from harness.errors import StorageError
from harness.memory import (
    DEFAULT_MEMORY,
    MemoryHistory,
    MemoryIndex,
    MemoryMaintenance,
    MemoryVersion,
)
from harness.memory.index import IndexStats, index_owner
from harness.memory.maintenance import sync_index
from harness.memory.provenance import Decision, Entry, MemoryBook, Provenance, excluded_record
from harness.models import resolve_model
from harness.workspace import MEMORY_DIR, MEMORY_MD, WorkspaceManager

__all__ = ["memory_app"]

memory_app = typer.Typer(
    help="Long-term memory: the search index, consolidation and upkeep.",
    no_args_is_help=True,
)


logger = logging.getLogger(__name__)


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
    if rebuild:
        await asyncio.to_thread(_open_anew, index, manager.root)
    else:
        await asyncio.to_thread(index.open)
    try:
        if rebuild:
            await asyncio.to_thread(index.clear)
        yield index, await sync_index(index, manager, progress=progress)
    finally:
        await asyncio.to_thread(index.close)


_REPLACEABLE: Final = frozenset(
    {
        sqlite3.SQLITE_ERROR,  # a schema of another program, or of another version
        sqlite3.SQLITE_CORRUPT,
        sqlite3.SQLITE_SCHEMA,
        sqlite3.SQLITE_CONSTRAINT,
        sqlite3.SQLITE_MISMATCH,
        sqlite3.SQLITE_FORMAT,
        sqlite3.SQLITE_NOTADB,
    }
)
"""What SQLite says of a file that --rebuild replaces: its content is unusable. Not among them:
a busy or locked database (another process is using it), and a file that cannot be opened or
written (a directory, permissions, a full disk), which a new file would not fix."""


def _open_anew(index: MemoryIndex, workspace: Path) -> None:
    """Open the index for ``--rebuild``, making the file anew when what is there is unusable.

    The index is derived data: the memory files are the truth, and a file that is not a
    database, holds another program's tables or a schema this version cannot use loses
    nothing when it is replaced. An index that another workspace of the same parent directory
    claimed is still refused, also when it is damaged (docs/security.md, "One index, one
    workspace"): it is that workspace's, and replacing it would take it away from it.
    """
    try:
        index.open()
        return
    except StorageError as exc:
        cause = exc.__cause__
        code = getattr(cause, "sqlite_errorcode", None)
        unusable = isinstance(code, int) and code & 0xFF in _REPLACEABLE
        if not unusable or not index.path.is_file():
            raise  # the refusal of another workspace's index has no SQLite cause
        owner = index_owner(index.path)
        if owner is not None and owner != str(workspace.absolute()):
            msg = (
                f"the memory index {index.path} is unusable and belongs to the workspace "
                f"{owner}, not {workspace.absolute()}: rebuild it from that workspace"
            )
            raise StorageError(msg) from exc
    logger.warning("replacing the unusable memory index %s", index.path)
    for suffix in ("", "-wal", "-shm", "-journal"):
        index.path.with_name(index.path.name + suffix).unlink(missing_ok=True)
    index.open()


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
    query: Annotated[
        str, typer.Argument(help="What to look for, in plain words.", callback=valid_text)
    ],
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

    async def _search() -> tuple[list[dict[str, object]], str]:
        async with (
            opened_workspace(workspace, store) as manager,
            _caught_up_index(manager) as (index, _),
        ):
            hits = await index.asearch(query, limit, user_id=user, snippets=not lines)
        found: list[dict[str, object]] = [
            {
                "path": h.path,
                "line_number": h.line_number,
                "last_line": h.last_line,
                "content": h.content,
                "rank": h.rank,
            }
            for h in hits
        ]
        return found, str(manager.root)

    hits, root = run_async(_search())
    if as_json:
        out.print_json(json.dumps(hits, ensure_ascii=False))
        return
    if not hits:
        where = looked_in(root, user)
        out.print(f"No matching memories found for: {query} (in {where})", **PLAIN)
        return
    table = Table("path", "lines", "content", "rank")
    table.columns[0].overflow = "fold"  # a path is shown whole, folded if it must be
    for hit in hits:
        first, last = hit["line_number"], hit["last_line"]
        span = f"{first}" if first == last else f"{first}-{last}"
        # Text, not str: a cell's str is read as markup, and memory may hold "[/x]".
        path, content = Text(str(hit["path"])), Text(str(hit["content"]))
        table.add_row(path, span, content, f"{hit['rank']:.3g}")
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
        str | None,
        typer.Argument(help="Print this saved version instead of the list.", callback=valid_text),
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
        table.add_row(Text(saved.id), Text(saved.path), str(saved.size))
    out.print(table)


@memory_app.command("restore")
def restore_command(
    version: Annotated[
        str, typer.Argument(help="A version from `harness memory history`.", callback=valid_text)
    ],
    workspace: WorkspaceOpt = None,
    store: StoreOpt = None,
    user: UserOpt = None,
) -> None:
    """Put a saved version back as MEMORY.md; the text it replaces is saved as a version too."""

    async def _restore() -> str | None:
        async with _maintenance(workspace, store, None, need_model=False) as running:
            saved = await MemoryHistory(running.workspace).restore(version, user)
            await running.index_file_for(user)  # searched as restored, by every worker
            return saved

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


def _describe(entry: Entry, why: str) -> str:
    where = f"session {entry.session_id}" if entry.session_id else "no session"
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(entry.at))
    head = f"{entry.id}  {entry.trust}  {entry.writer}, {where}, {when}"
    return f"{head}\n  {entry.path}: {entry.text}\n  kept out of the prompt: {why}"


@memory_app.command("review")
def review_command(
    workspace: WorkspaceOpt = None,
    store: StoreOpt = None,
    user: UserOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per entry.")] = False,
) -> None:
    """List the memory entries kept out of the prompt, and why: waiting for review, or rejected.

    Trust one with `harness memory promote ID` (the next consolidation may merge it into
    MEMORY.md), or keep it out with `harness memory reject ID`; the latest decision counts,
    so either can be undone. Nothing is deleted: a rejected entry stays in the history.
    """

    async def _excluded() -> tuple[MemoryBook, list[Entry]]:
        async with opened_workspace(workspace, store) as manager:
            book = await Provenance.for_workspace(manager).book(user)
            return book, book.excluded()

    book, excluded = run_async(_excluded())
    if as_json:
        for entry in excluded:
            out.print(json.dumps(excluded_record(book, entry), ensure_ascii=False), **PLAIN)
        return
    if not excluded:
        who = f"user {user!r}" if user is not None else "the shared memory (no --user)"
        out.print(f"no memory entries of {who} are kept out of the prompt", **PLAIN)
        return
    for entry in excluded:
        out.print(_describe(entry, book.why(entry)), **PLAIN)


def _review(
    entry_id: str, decision: Decision, workspace: Path | None, store: str | None, user: str | None
) -> None:
    async def _decide() -> Entry:
        async with opened_workspace(workspace, store) as manager:
            return await Provenance.for_workspace(manager).review(user, entry_id, decision)

    try:
        entry = run_async(_decide())
    except KeyError as exc:
        err.print(f"error: {exc.args[0]}", **PLAIN)
        raise typer.Exit(1) from None
    done = "promoted: it may reach MEMORY.md" if decision == "promote" else "rejected"
    out.print(f"{entry.id} {done}\n  {entry.path}: {entry.text}", **PLAIN)


EntryArg = Annotated[
    str, typer.Argument(help="An entry id from `harness memory review`.", callback=valid_text)
]


@memory_app.command("promote")
def promote_command(
    entry_id: EntryArg,
    workspace: WorkspaceOpt = None,
    store: StoreOpt = None,
    user: UserOpt = None,
) -> None:
    """Trust an entry (one that waits, or one rejected before): it may reach MEMORY.md."""
    _review(entry_id, "promote", workspace, store, user)


@memory_app.command("reject")
def reject_command(
    entry_id: EntryArg,
    workspace: WorkspaceOpt = None,
    store: StoreOpt = None,
    user: UserOpt = None,
) -> None:
    """Reject an entry: kept in the history, out of the prompt and search (undo: promote)."""
    _review(entry_id, "reject", workspace, store, user)


@memory_app.command("adopt")
def adopt_command(
    workspace: WorkspaceOpt = None,
    store: StoreOpt = None,
    user: UserOpt = None,
    logs: Annotated[
        bool, typer.Option("--logs", help="Adopt the daily logs (memory/*.md) as well.")
    ] = False,
) -> None:
    """Vouch for MEMORY.md as the operator's (once: lines from before provenance are unknown)."""

    async def _adopt() -> int:
        async with opened_workspace(workspace, store) as manager:
            provenance = Provenance.for_workspace(manager)
            paths = [MEMORY_MD]
            if logs:
                found = await manager.list_own(MEMORY_DIR, user)
                paths += sorted(info.path for info in found if info.path.endswith(".md"))
            adopted = 0
            for path in paths:
                text = await manager.read_own(path, user) or ""
                adopted += len(await provenance.adopt(user, path, text))
            return adopted

    count = run_async(_adopt())
    out.print(f"adopted {count} line(s) as the operator's", **PLAIN)
