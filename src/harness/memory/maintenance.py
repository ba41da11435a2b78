"""Memory maintenance: one worker per workspace per process, off the event loop's hot path.

The worker owns the workspace's search index and runs two kinds of job:

- a consolidation of one user's memory, requested after calls (at most once per
  ``consolidation_min_gap`` per user, by the process-wide :data:`PROCESS_GATE`, so rebuilding
  agents does not defeat the throttle) and run in the background, never blocking a call;
- a full pass every ``maintenance_interval`` (6 h by default; the first one an interval after
  the worker starts): for the shared namespace and every user's, daily logs older than
  ``daily_retention_days`` move to ``memory/archive/``, memory is consolidated, transcripts,
  background task records and results, traces and subagent registries not written for
  ``session_retention_days``
  are deleted, and so is whatever the worker's ``cleanup`` finds old (the agent's: evicted
  tool results older than their ``max_age_days``, 7); then the index catches up with the files.
  The cleanup is passed in, so memory needs nothing of compaction, which builds on memory.

Agents share the worker of their workspace: :meth:`MemoryMaintenance.for_workspace` returns
the one the process already has (or makes it), nothing starts until the first job, and
:meth:`release` stops it when its last agent closes. A job in progress when it stops is
cancelled; every write it makes is atomic, so nothing is left half done. Time decisions use an
injectable clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Collection, Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import ClassVar, Final

from harness.context import RuntimeContext
from harness.errors import UnusableFile, WorkspaceError
from harness.kernel import ChatModel
from harness.memory._files import owner_of, read_limit, scan_workspace
from harness.memory.changes import ChangeFeed
from harness.memory.config import Clock, MemoryConfig, utc_now
from harness.memory.consolidation import ConsolidationResult, MemoryConsolidator
from harness.memory.gate import PROCESS_GATE, Gate
from harness.memory.history import MemoryHistory
from harness.memory.index import IndexStats, MemoryIndex
from harness.memory.provenance import Provenance
from harness.memory.transcript import SESSIONS_INDEX
from harness.workspace import (
    AGENTS_DIR,
    CHILDREN_DIR,
    MEMORY_DIR,
    MEMORY_MD,
    TASKS_DIR,
    TRACES_DIR,
    USERS_DIR,
    WorkspaceManager,
    safe_segment,
    scoped,
    user_from_segment,
)

__all__ = ["Cleanup", "MaintenanceReport", "MemoryMaintenance", "sync_index"]

Cleanup = Callable[[datetime], Awaitable[list[str]]]
"""Deletes what is old at the given time and returns the workspace paths it deleted."""

Job = Callable[[], Awaitable[object]]
"""A piece of background work: called once, when its turn in its queue comes."""

logger = logging.getLogger(__name__)

_SKIPS_SAID: Final = 1_000
"""How many unusable feed entries one worker names in its log; past them it skips quietly."""


def _shown(text: str) -> str:
    """Text from the store for a log line: cut, and escaped (no line break, no control)."""
    return repr(text[:200] + ("..." if len(text) > 200 else ""))


ARCHIVE_DIR = f"{MEMORY_DIR}/archive"


async def sync_index(
    index: MemoryIndex,
    workspace: WorkspaceManager,
    *,
    progress: Callable[[int, int], None] | None = None,
    owners: Collection[str] | None = None,
) -> IndexStats:
    """Bring an open index up to date with the workspace's files, changed ones only.

    On the local disk the index scans the directory itself; on another backend (a store
    shared by several workers) the memory files are listed through it and only those whose
    size or time changed since the index last saw them are fetched; ``owners`` limits that to
    some namespaces (``""`` for the shared files, a user's segment for theirs), the rows of
    the others kept as they are. ``progress(done, total)`` is called from a worker thread
    after each file.
    """
    if workspace.is_local:
        return await index.aindex_all_from_workspace(workspace.root, progress=progress)
    found = await scan_workspace(workspace, owners)
    known = await asyncio.to_thread(index.known_files)
    texts = {
        path: await workspace.read_own(path, limit=read_limit(path)) or ""
        for path, stamp in found.items()
        if known.get(path) != stamp
    }
    return await asyncio.to_thread(
        index.index_files,
        found,
        lambda path: texts.get(path, ""),
        (lambda _: False) if owners is None else (lambda path: owner_of(path) not in owners),
        progress=progress,
    )


@dataclass
class MaintenanceReport:
    """What a full pass did."""

    archived: list[str] = field(default_factory=list)
    consolidated: list[str] = field(default_factory=list)
    pruned: list[str] = field(default_factory=list)
    """Transcripts not written for ``session_retention_days``."""
    expired: list[str] = field(default_factory=list)
    """Background task records and results, and traces, not written for as long."""
    evictions_deleted: list[str] = field(default_factory=list)
    indexed_files: int = 0


class MemoryMaintenance:
    """The search index and maintenance worker of one workspace."""

    _running: ClassVar[dict[tuple[Path, MemoryConfig, int], MemoryMaintenance]] = {}
    """The workers of this process, by workspace, memory configuration and memory model."""

    def __init__(
        self,
        workspace: WorkspaceManager,
        *,
        config: MemoryConfig,
        model: ChatModel | None,
        index: MemoryIndex | None,
        gate: Gate = PROCESS_GATE,
        clock: Clock = utc_now,
        cleanup: Cleanup | None = None,
        provenance: Provenance | None = None,
    ) -> None:
        self.workspace = workspace
        self.cleanup = cleanup
        self.config = config
        self.index = index
        self.gate = gate
        # What the gate's keys name this workspace by: its directory, or (on a shared backend,
        # where every worker has its own directory) the one shared workspace.
        self.key = str(workspace.root) if workspace.is_local else "shared"
        self.clock = clock
        self.consolidator = (
            MemoryConsolidator(
                workspace,
                model,
                max_memory_tokens=config.max_memory_tokens,
                max_output_tokens=config.consolidation_max_output_tokens,
                history=MemoryHistory(workspace, keep=config.memory_history, clock=clock),
                provenance=provenance,
                clock=clock,
            )
            if model is not None
            else None
        )
        self._jobs: asyncio.Queue[Job] = asyncio.Queue()
        self._queued: set[asyncio.Future[None]] = set()
        """What ends when a queued consolidation has run: ended when the worker stops."""
        self._worker: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._holders = 0
        self._index_open = False
        self._to_index: dict[str, None] = {}
        self._indexer: asyncio.Task[None] | None = None
        self._catching_up: asyncio.Task[None] | None = None
        self._chains: dict[str, asyncio.Task[None]] = {}
        self._background: set[asyncio.Task[None]] = set()
        self._held: dict[tuple[str | None, ...], list[tuple[str, Job]]] = {}
        self._key: tuple[Path, MemoryConfig, int] | None = None  # its entry in _running
        # With a store, every worker has an index of its own: the others' changes come from
        # the store's change feed, each namespace's from where this worker last looked.
        where = None if workspace.is_local else workspace.out_of_reach("memory-changes")
        self.changes = None if where is None or isinstance(where, Path) else ChangeFeed(where)
        self._seen: dict[str, int] = {}
        self._skipped: set[str] = set()  # feed entries no worker can use, said once each

    @classmethod
    def for_workspace(
        cls,
        workspace: WorkspaceManager,
        *,
        config: MemoryConfig,
        model: ChatModel | None,
        clock: Clock = utc_now,
        cleanup: Cleanup | None = None,
        gate: Gate = PROCESS_GATE,
        provenance: Provenance | None = None,
    ) -> MemoryMaintenance:
        """The worker of this workspace, configuration and model; pair it with :meth:`release`.

        Agents that share all three (a parent and its subagents, say) share one worker. An
        agent with another memory configuration or memory model has a worker of its own, so
        its consolidations use its own model and limits; the workers of one workspace share
        its index file, as workers of several processes do, and the gate's claims (one
        consolidation of a user per ``consolidation_min_gap``, one maintenance pass per
        ``maintenance_interval``, whichever worker claims it). Nothing starts here: the index
        opens and the worker starts at the first job.
        """
        key = (workspace.root, config, id(model))
        running = cls._running.get(key)
        if running is None:
            index = (
                MemoryIndex(workspace.root.parent, workspace=workspace.root)
                if config.index
                else None
            )
            running = cls(
                workspace,
                config=config,
                model=model,
                index=index,
                gate=gate,
                clock=clock,
                cleanup=cleanup,
                provenance=provenance,
            )
            running._key = key
            cls._running[key] = running
        running._holders += 1
        return running

    async def release(self) -> None:
        """Let go of the worker; the last holder stops it and closes the index."""
        self._holders -= 1
        if self._holders > 0:
            return
        if self._key is not None and self._running.get(self._key) is self:
            del self._running[self._key]
        with contextlib.suppress(RuntimeError):  # an indexer left on a closed event loop
            await self.settled()
        catching_up, self._catching_up = self._catching_up, None
        if catching_up is not None and not catching_up.done():
            catching_up.cancel()
            with contextlib.suppress(RuntimeError):
                await asyncio.wait({catching_up})
        worker, self._worker = self._worker, None
        if worker is not None:
            with contextlib.suppress(RuntimeError):  # a worker left on a closed event loop
                while not worker.done():
                    worker.cancel()
                    await asyncio.wait({worker}, timeout=0.1)
            for ran in list(self._queued):  # never to run: nothing waits for them any more
                if not ran.done():
                    ran.set_result(None)
        if self.index is not None and self._index_open:
            await asyncio.to_thread(self.index.close)
            self._index_open = False

    async def start(self) -> None:
        """Open the index and start the worker on the running event loop (idempotent)."""
        loop = asyncio.get_running_loop()
        if self.index is not None and not self._index_open:
            await asyncio.to_thread(self.index.open)
            self._index_open = True
        if self._worker is None or self._loop is not loop or self._worker.done():
            # A worker left on another event loop (closed with it) is replaced, with its queue.
            self._loop = loop
            self._jobs = asyncio.Queue()
            if self.index is not None:
                # Catch up with files written while no worker ran (or after the index was
                # deleted, or edited by hand); cheap when nothing changed, since unchanged
                # files are skipped. Searches wait for it (:meth:`ready`).
                self._catching_up = loop.create_task(self._catch_up())
            self._worker = loop.create_task(self._work(), name="harness-memory-maintenance")

    async def request_consolidation(
        self,
        user_id: str | None,
        on_done: Callable[[ConsolidationResult], Awaitable[None]] | None = None,
    ) -> asyncio.Future[None] | None:
        """Queue a consolidation of the user's memory unless one ran within the minimum gap.

        ``on_done`` gets its result (to trace it) once it has run. Returns what ends when the
        consolidation has run (or failed, or the worker stopped first), so the work a call
        leaves behind can include it; None when nothing was queued.
        """
        if self.consolidator is None:
            return None
        key = f"consolidate:{self.key}:{user_id or ''}"
        if not await self.gate.claim(key, self.config.consolidation_min_gap):
            return None
        await self.start()
        ran: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queued.add(ran)
        ran.add_done_callback(self._queued.discard)

        async def job() -> None:
            try:
                await self._consolidate(user_id, on_done)
            finally:
                if not ran.done():
                    ran.set_result(None)

        self._jobs.put_nowait(job)
        return ran

    @contextlib.contextmanager
    def holding(self, ctx: RuntimeContext) -> Iterator[None]:
        """Hold back the work a call of ``ctx``'s session schedules until the block ends.

        The agent runs each call inside this block, so the memory work the call leaves behind
        (its flush, its transcript, a consolidation request) starts once the call has returned,
        instead of sharing the event loop and the worker threads with the end of the call (its
        last save). Held work starts in the order it was scheduled, also when the call failed
        or was cancelled. Keyed by agent, user and session: one call at a time holds a key
        (the session's lease), so nothing is held for longer than its own call.
        """
        held = _call_of(ctx)
        if held in self._held:  # an outer block holds the call's work, and will start it
            yield
            return
        self._held[held] = []
        try:
            yield
        finally:
            for key, job in self._held.pop(held, []):
                self._start(key, job)

    def schedule(self, key: str, job: Job, *, ctx: RuntimeContext | None = None) -> None:
        """Run ``job`` in the background, after the jobs scheduled earlier under the same key.

        For the work a call leaves behind (its memory flush, its transcript): the call returns
        at once, jobs of one session run in order, and :meth:`settled` (which searches and
        :meth:`release` await) waits for them. Given the call's ``ctx``, a job scheduled while
        that call runs starts when it returns (:meth:`holding`).
        """
        held = self._held.get(_call_of(ctx)) if ctx is not None else None
        if held is not None:
            held.append((key, job))
        else:
            self._start(key, job)

    def _start(self, key: str, job: Job) -> None:
        previous = self._chains.get(key)

        async def chained() -> None:
            if previous is not None:
                await asyncio.gather(previous, return_exceptions=True)
            try:
                await job()
            except Exception:
                logger.exception("background memory work for %s failed", key)

        task = asyncio.get_running_loop().create_task(chained())
        self._chains[key] = task
        self._background.add(task)

        def done(finished: asyncio.Task[None]) -> None:
            self._background.discard(finished)
            if self._chains.get(key) is finished:
                del self._chains[key]

        task.add_done_callback(done)

    def pending(self, key: str) -> asyncio.Task[None] | None:
        """The last job scheduled under ``key`` while it runs (it ends after those before it)."""
        return self._chains.get(key)

    def schedule_index(self, path: str) -> None:
        """Index a file that was just written, in the background; the call does not wait.

        Searches wait for scheduled indexing first (:meth:`settled`), so what a call wrote is
        found by the next search.
        """
        if self.index is None:
            return
        self._to_index[path] = None
        if self._indexer is None or self._indexer.done():
            self._indexer = asyncio.get_running_loop().create_task(self._drain_index())

    async def ready(self) -> None:
        """Wait until the index holds every file: the start-up catch-up, then :meth:`settled`."""
        catching_up = self._catching_up
        if catching_up is not None and not catching_up.done():
            await asyncio.shield(catching_up)
        await self.settled()

    async def ready_for(self, user_id: str | None) -> None:
        """:meth:`ready`, and with a store, the user's memory as every worker left it.

        On the local disk every process writes the one index beside the workspace. With a
        store each worker keeps an index of its own, which would otherwise learn of another
        worker's writes only at its next start or maintenance pass: the files the change feed
        (:mod:`harness.memory.changes`) names since this worker last looked, in the shared
        namespace and the user's, are indexed again (a namespace is listed whole the first
        time, or when the feed no longer holds all it missed).

        An entry whose path no workspace file can have (one that climbs out with ``..``, a
        directory) is skipped, said once: one bad record never stops a worker there. Any other
        failure (the store away) leaves the feed where it was, for the next search.
        """
        await self.ready()
        if self.index is None or self.changes is None:
            return
        for owner in {"", safe_segment(user_id) if user_id else ""}:
            try:
                changes = await self.changes.since(owner, self._seen.get(owner))
                if changes.paths is None:
                    await sync_index(self.index, self.workspace, owners={owner})
                for path in changes.paths or ():
                    try:
                        await self._index_one(path)
                    except (WorkspaceError, UnusableFile, ValueError) as exc:
                        self._skip(path, exc)
            except Exception as exc:  # the search goes on with what the index holds
                logger.warning("could not bring the index up to date from the store: %s", exc)
                continue
            self._seen[owner] = changes.seq

    def _skip(self, path: str, exc: Exception) -> None:
        """Pass over a feed entry this index cannot use; the log says so once, on one line."""
        if path in self._skipped or len(self._skipped) >= _SKIPS_SAID:
            return
        self._skipped.add(path)
        logger.warning(
            "skipped a memory change the index cannot use: %s (%s: %s)",
            _shown(path),
            type(exc).__name__,
            _shown(str(exc)),
        )

    async def settled(self) -> None:
        """Wait until the background work scheduled so far is done and its files indexed."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)
        indexer = self._indexer
        if indexer is not None and not indexer.done():
            await asyncio.shield(indexer)

    async def _drain_index(self) -> None:
        while self._to_index:
            path = next(iter(self._to_index))
            del self._to_index[path]
            try:
                await self.index_file(path)
            except Exception as exc:
                logger.warning("could not index %s (the next re-index will): %s", path, exc)

    async def index_file(self, path: str) -> None:
        """Bring the index up to date with one workspace file this process wrote (or deleted).

        With a store, the other workers are told of it through the change feed.
        """
        if self.index is None:
            return
        await self._index_one(path)
        await self._noted(path)

    async def _index_one(self, path: str) -> None:
        assert self.index is not None
        await self.start()
        text = await self.workspace.read_own(path, limit=read_limit(path)) or ""
        await self.index.aindex_from_string(path, text)

    async def _noted(self, *paths: str) -> None:
        """Tell the other workers of a store that these indexed files changed."""
        if self.changes is not None:
            for path in paths:
                await self.changes.note(owner_of(path), path)

    async def run(self) -> MaintenanceReport:
        """One full pass: archive, consolidate, prune every namespace, then re-index."""
        report = MaintenanceReport()
        for user_id in await self._namespaces():
            archived = await self._archive(user_id)
            report.archived += archived
            changed = list(archived)
            if self.consolidator is not None:
                result = await self.consolidator.consolidate(user_id)
                if result.updated:
                    report.consolidated.append(user_id or "(shared)")
                    changed.append(MEMORY_MD)
            pruned, expired = await self._prune(user_id)
            report.pruned += pruned
            report.expired += expired
            await self._noted(*(scoped(path, user_id) for path in changed + pruned))
        if self.cleanup is not None:  # the agent's: evicted tool results past their age
            report.evictions_deleted = await self.cleanup(self.clock())
        if self.index is not None:
            await self.start()
            report.indexed_files = (await self.sync_index()).indexed
        return report

    async def run_if_due(self) -> MaintenanceReport | None:
        """:meth:`run`, unless a pass ran within ``maintenance_interval``; None if it did not.

        The claim is the gate's: with a store's gate, one worker of all that share it runs.
        """
        gap = self.config.maintenance_interval
        if not await self.gate.claim(f"maintenance:{self.key}", gap):
            return None
        return await self.run()

    async def _work(self) -> None:
        interval = self.config.maintenance_interval.total_seconds()
        loop = asyncio.get_running_loop()
        due = loop.time() + interval
        while True:
            # asyncio.timeout, not wait_for: on Python 3.11, wait_for can swallow the
            # cancellation that stops the worker when a job arrives in the same loop step.
            job: Job | None = None
            try:
                async with asyncio.timeout(max(0.0, due - loop.time())):
                    job = await self._jobs.get()
            except TimeoutError:
                job = None
            try:
                if job is None:
                    # One worker per interval runs the pass, however many share the store.
                    if await self.gate.claim(
                        f"maintenance:{self.key}", self.config.maintenance_interval
                    ):
                        await self.run()
                    due = loop.time() + interval
                else:
                    await job()
            except Exception:
                logger.exception("memory maintenance of %s failed", self.workspace.root)

    async def _consolidate(
        self,
        user_id: str | None,
        on_done: Callable[[ConsolidationResult], Awaitable[None]] | None = None,
    ) -> None:
        assert self.consolidator is not None
        result = await self.consolidator.consolidate(user_id)
        if result.updated:
            await self.index_file_for(user_id)
        if on_done is not None:
            await on_done(result)

    async def sync_index(self) -> IndexStats:
        """Bring the index up to date with the workspace's files (see :func:`sync_index`)."""
        assert self.index is not None
        return await sync_index(self.index, self.workspace)

    async def _catch_up(self) -> None:
        assert self.index is not None
        try:
            await self.sync_index()
        except Exception as exc:
            logger.warning(
                "could not index %s (the next re-index will): %s", self.workspace.root, exc
            )

    async def index_file_for(self, user_id: str | None) -> None:
        """Re-index the user's MEMORY.md (after a consolidation rewrote it)."""
        await self.index_file(scoped(MEMORY_MD, user_id))

    async def _namespaces(self) -> list[str | None]:
        users = [user_from_segment(seg) for seg in await self.workspace.list_dirs(USERS_DIR)]
        return [None, *sorted(u for u in users if u is not None)]

    async def _archive(self, user_id: str | None) -> list[str]:
        cutoff = self.clock().astimezone().date() - timedelta(days=self.config.daily_retention_days)
        moved = []
        for info in await self.workspace.list_own(MEMORY_DIR, user_id):
            name = info.path.rsplit("/", 1)[-1]
            try:
                day = date.fromisoformat(name.removesuffix(".md"))
            except ValueError:
                continue
            if name.endswith(".md") and day < cutoff:
                await self.workspace.move(info.path, f"{ARCHIVE_DIR}/{name}", user_id)
                moved.append(info.path)
        return moved

    async def _prune(self, user_id: str | None) -> tuple[list[str], list[str]]:
        """Delete what was not written for ``session_retention_days``: (transcripts, the rest).

        The rest is every agent's background tasks, traces and registries of the subagents its
        sessions started. A running task's heartbeat keeps its record fresh. A record goes
        before its result, so no reader finds a completed task without its result.
        """
        cutoff = (self.clock() - timedelta(days=self.config.session_retention_days)).timestamp()
        pruned: list[str] = []
        expired: list[str] = []
        for agent in await self.workspace.list_dirs(AGENTS_DIR, user_id):
            for directory, deleted in (
                ("sessions", pruned),
                (TASKS_DIR, expired),
                (TRACES_DIR, expired),
                (CHILDREN_DIR, expired),
            ):
                old = [
                    info.path
                    for info in await self.workspace.list_own(
                        f"{AGENTS_DIR}/{agent}/{directory}", user_id
                    )
                    if info.modified < cutoff and info.path.rsplit("/", 1)[-1] != SESSIONS_INDEX
                ]
                for path in sorted(old, key=lambda path: not path.endswith(".json")):
                    await self.workspace.delete(path, user_id)
                    deleted.append(path)
        return pruned, expired


def _call_of(ctx: RuntimeContext) -> tuple[str | None, ...]:
    """Which session's call a context is: the agent, the user and the session."""
    return (ctx.agent, ctx.user_id, ctx.session_id)
