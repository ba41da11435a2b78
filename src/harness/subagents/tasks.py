"""Durable background tasks: subagent runs whose results are never lost.

Each task has a record, ``agents/<agent>/tasks/<task id>.json`` in the caller's namespace,
written through the workspace (so through its filesystem backend), and, once it completes, its
full result in ``<task id>.result.md`` next to it. The rules the original broke, kept here:

- **Results first.** The result file is written before the record says ``completed``; a reader
  that sees ``completed`` always finds the result.
- **Failures are failures.** An exception makes the task ``failed`` with its message, never
  ``completed`` with an error string.
- **Cancel means stop.** :meth:`TaskRepository.cancel` cancels the child's coroutine (and so its
  running tool call) and the task ends ``cancelled``. A task run by another process is flagged
  ``cancel_requested``; its owner sees the flag at its next heartbeat and stops it.
- **Restarts lose nothing.** Finished tasks and their results stay readable by any later
  process. A running task whose owner died stops heart-beating; once its last heartbeat is
  ``stale_after_seconds`` old (inclusive) any reader marks it ``failed: worker lost`` instead of
  reporting it running forever.
- **Bounded.** At most ``max_running`` tasks of one repository run at once; the others wait,
  ``pending``, in submission order.
- **On a durable engine, a task outlives its worker.** With a :attr:`TaskRepository.launcher`
  (the Temporal engine's, :mod:`harness.durable`), a new background task is handed to the
  engine instead of run here: a workflow of its own runs it on any worker
  (:meth:`TaskRepository.run_here`), Temporal's heartbeats stand for the record's, and a worker
  that dies hands it to another, which continues the child's session from the store. Its
  record names :data:`ENGINE` as its worker and is never found lost.
- **Waiting for a person is not running.** A task whose child's tool call waits for approval is
  ``waiting``: it holds no slot, needs no heartbeat (so it is never found lost), and its
  requests are handed to :attr:`TaskRepository.on_wait` (the parent's approval ledger). A
  decision continues it (:meth:`TaskRepository.resume`, in any process, once: the first to
  claim it runs it); a task whose requests all expired is continued at its parent's next step
  (:meth:`TaskRepository.overdue`), so its child reads them as rejected.

A finished task is *undelivered* until the parent's next reasoning step in its session has been
told about it (see :mod:`harness.hooks.subagents`), whichever worker or process ran it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, Final, cast

from pydantic import BaseModel, ConfigDict, ValidationError

from harness.context import RuntimeContext
from harness.kernel.cancelling import cancel_and_wait
from harness.kernel.outcome import Paused, pending_of
from harness.memory.config import Clock, utc_now
from harness.workspace import AGENTS_DIR, TASKS_DIR, WorkspaceManager, safe_segment, scoped

__all__ = [
    "ENGINE",
    "WORKER_LOST",
    "TaskRecord",
    "TaskRepository",
    "TaskStatus",
]

logger = logging.getLogger(__name__)

WORKER_LOST: Final = "worker lost"
ENGINE: Final = "engine"
"""The ``worker`` of a task the durable engine runs: whichever of its workers is alive."""
MAX_TASK_TEXT: Final = 500


class TaskStatus(StrEnum):
    """Where a task is in its life; the last three are final."""

    PENDING = "pending"
    RUNNING = "running"
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in (TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED)

    @property
    def at_rest(self) -> bool:
        """Nothing runs it: it is final, or it waits for a person's decision."""
        return self.terminal or self is TaskStatus.WAITING


class TaskRecord(BaseModel):
    """The persisted state of one background task."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    task_id: str
    agent_id: str
    status: TaskStatus
    user_id: str | None = None
    session_id: str
    agent_key: str | None = None
    label: str | None = None
    task: str = ""
    worker: str = ""
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    heartbeat_at: datetime | None = None
    result_path: str | None = None
    error: str | None = None
    cancel_requested: bool = False
    delivered_at: datetime | None = None
    approvals: tuple[str, ...] = ()
    """While ``waiting``: the approval ids it waits for (shown to the model and the user)."""
    waiting_until: datetime | None = None
    """While ``waiting``: when the last of its requests expires."""
    attempt: str = ""
    """Which run of the task this is: a new one each time it is continued after a wait."""

    @property
    def describe_status(self) -> str:
        """``failed: <why>`` for a failed task, else the status."""
        if self.status is TaskStatus.FAILED:
            return f"failed: {self.error or 'unknown error'}"
        return self.status.value


Work = Callable[[], Awaitable[str | Paused]]
"""A task's work: its child's reply, or the child's pause (the task then waits for approval)."""

Launcher = Callable[["TaskRecord", str, RuntimeContext], Awaitable[object]]
"""``launcher(record, task, ctx)``: hand a new task (its record saved, its whole text, the
spawning call's context) to the engine that will run it."""

OnWait = Callable[["TaskRecord", Sequence[Mapping[str, Any]]], Awaitable[object]]
"""``on_wait(record, pending)``: record the requests a task's child waits for, durably,
before the task is said to wait (raising makes the task fail instead)."""


class TaskRepository:
    """The background tasks of one agent in one workspace.

    Args:
        workspace: Where records and results are kept.
        agent: The parent agent's name (``agents/<agent>/tasks/``).
        max_running: Tasks that run at once; more wait as ``pending``.
        heartbeat_seconds: How often a running task's record is refreshed.
        stale_after_seconds: A record not refreshed for this long belongs to a dead worker.
        clock: The current time (injectable for tests).
    """

    def __init__(
        self,
        workspace: WorkspaceManager,
        agent: str,
        *,
        max_running: int = 8,
        heartbeat_seconds: float = 10.0,
        stale_after_seconds: float = 60.0,
        clock: Clock = utc_now,
        on_finish: Callable[[TaskRecord], Awaitable[object]] | None = None,
    ) -> None:
        if max_running < 1:
            msg = f"max_running must be at least 1, got {max_running}"
            raise ValueError(msg)
        if stale_after_seconds <= heartbeat_seconds:
            msg = "stale_after_seconds must be longer than heartbeat_seconds"
            raise ValueError(msg)
        self.workspace = workspace
        self.directory = f"{AGENTS_DIR}/{safe_segment(agent)}/{TASKS_DIR}"
        self.max_running = max_running
        self.heartbeat_seconds = heartbeat_seconds
        self.stale_after = timedelta(seconds=stale_after_seconds)
        self.clock = clock
        self.on_finish = on_finish  # e.g. the trace's record of the task
        self.launcher: Launcher | None = None
        """Hands new background tasks to a durable engine; None: they run in this process."""
        self.on_wait: OnWait | None = None
        """Where a task's waiting requests go (the parent's approvals); None: a task whose
        child waits for approval fails, as nobody could decide it."""
        self.worker = f"{socket.gethostname()}:{os.getpid()}"
        self._live: dict[str, tuple[TaskRecord, asyncio.Task[None]]] = {}
        self._slots: asyncio.Semaphore | None = None
        self._heartbeat: asyncio.Task[None] | None = None
        # Per (user, session): tasks the parent has not been told about, finished or not.
        self._unreported: dict[tuple[str | None, str], dict[str, None]] = {}
        # Per user: when its task records were last listed, and each record's time then.
        self._listings: dict[str | None, tuple[datetime, dict[str, float]]] = {}

    # -- paths ---------------------------------------------------------------------------

    def record_path(self, task_id: str) -> str:
        return f"{self.directory}/{safe_segment(task_id)}.json"

    def result_path(self, task_id: str) -> str:
        return f"{self.directory}/{safe_segment(task_id)}.result.md"

    # -- starting tasks ------------------------------------------------------------------

    async def submit(
        self,
        ctx: RuntimeContext,
        *,
        agent_id: str,
        work: Work,
        task: str = "",
        agent_key: str | None = None,
        label: str | None = None,
    ) -> TaskRecord:
        """Queue ``work`` as a background task; it starts when a slot is free.

        With a slot free now, the task is recorded as running at once (one write fewer). With a
        :attr:`launcher`, it is recorded ``pending`` and handed to the engine instead.
        """
        if self.launcher is not None:
            record = self._new(ctx, agent_id, TaskStatus.PENDING, task, agent_key, label)
            record = record.model_copy(update={"worker": ENGINE})
            await self._save(record)
            await self.launcher(record, task, ctx)
            return record
        slots = self._slots_here()
        holding = not slots.locked()
        if holding:
            await slots.acquire()  # free: returns without waiting
        record = self._new(
            ctx,
            agent_id,
            TaskStatus.RUNNING if holding else TaskStatus.PENDING,
            task,
            agent_key,
            label,
        )
        if holding:
            record = record.model_copy(update={"started_at": record.created_at})
        try:
            await self._save(record)
        except BaseException:
            if holding:
                slots.release()
            raise
        self._start(record, self._queued(record, work, holding=holding))
        return record

    async def adopt(
        self,
        ctx: RuntimeContext,
        *,
        agent_id: str,
        running: Awaitable[str | Paused],
        task: str = "",
        agent_key: str | None = None,
        label: str | None = None,
    ) -> TaskRecord:
        """Track a run that is already under way (a synchronous call that timed out).

        It is not queued (it already runs), so it may briefly exceed ``max_running``.
        """
        record = self._new(ctx, agent_id, TaskStatus.RUNNING, task, agent_key, label)
        record = record.model_copy(update={"started_at": record.created_at})
        await self._save(record)

        async def _await_running() -> str | Paused:
            return await running

        self._start(record, self._execute(record, _await_running))
        return record

    def _new(
        self,
        ctx: RuntimeContext,
        agent_id: str,
        status: TaskStatus,
        task: str,
        agent_key: str | None,
        label: str | None,
    ) -> TaskRecord:
        now = self.clock()
        assert ctx.session_id is not None
        return TaskRecord(
            task_id=f"task_{uuid.uuid4().hex[:16]}",
            agent_id=agent_id,
            status=status,
            user_id=ctx.user_id,
            session_id=ctx.session_id,
            agent_key=agent_key,
            label=label,
            task=task[:MAX_TASK_TEXT],
            worker=self.worker,
            created_at=now,
            heartbeat_at=now,
        )

    def _start(self, record: TaskRecord, runner: Awaitable[None]) -> None:
        async def _run() -> None:
            try:
                await runner
            finally:
                self._live.pop(record.task_id, None)

        self._live[record.task_id] = (record, asyncio.create_task(_run()))
        if self._heartbeat is None or self._heartbeat.done():
            self._heartbeat = asyncio.create_task(self._beat())

    def _slots_here(self) -> asyncio.Semaphore:
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_running)
        return self._slots

    async def run_here(
        self, record: TaskRecord, work: Work, *, handed_over: Callable[[], bool] = lambda: False
    ) -> TaskRecord:
        """Run a task the engine handed to this worker to its final (or waiting) status.

        A task already final, or waiting, is left as it is: a retry after the worker that ran
        it died once it had settled. A cancel while ``handed_over()`` says the task goes on
        elsewhere (this worker shuts down) leaves it unsettled. Returns the record as it ends.
        """
        current = await self._load(record.task_id, record.user_id) or record
        if current.status.at_rest:
            return current
        now = self.clock()
        changes = {"status": TaskStatus.RUNNING, "started_at": now, "heartbeat_at": now}
        running = await self._update(current, changes)
        if running.status is TaskStatus.RUNNING:
            await self._execute(running, work, handed_over=handed_over)
        return await self._load(record.task_id, record.user_id) or running

    async def _queued(self, record: TaskRecord, work: Work, *, holding: bool) -> None:
        """Run ``work`` in a slot: the one ``submit`` took, or the next one to come free."""
        slots = self._slots_here()

        async def _in_slot() -> str | Paused:
            nonlocal holding
            if not holding:
                await slots.acquire()
                holding = True
                now = self.clock()
                changes = {"status": TaskStatus.RUNNING, "started_at": now, "heartbeat_at": now}
                if (await self._update(record, changes)).status is not TaskStatus.RUNNING:
                    raise asyncio.CancelledError  # cancelled while it waited
            return await work()

        try:
            await self._execute(record, _in_slot)
        finally:
            if holding:
                slots.release()

    async def _execute(
        self, record: TaskRecord, work: Work, *, handed_over: Callable[[], bool] = lambda: False
    ) -> None:
        """Run ``work`` to a final status; the result is saved before ``completed``."""
        try:
            result = await work()
            if pending := pending_of(result):
                await self._wait(record, pending)
                return
            reply = cast(str, result)  # a value that waits for nothing is the child's reply
            try:
                written = await self.workspace.write_text(
                    self.result_path(record.task_id), reply, record.user_id
                )
            except OSError as exc:
                error = f"the result could not be saved: {exc}"
                await self._settle(record, TaskStatus.FAILED, error=error)
                return
            await self._settle(record, TaskStatus.COMPLETED, result_path=written)
        except asyncio.CancelledError:
            if not handed_over():
                await self._settle(record, TaskStatus.CANCELLED)
            raise
        except Exception as exc:
            logger.warning("task %s (%s) failed: %r", record.task_id, record.agent_id, exc)
            await self._settle(record, TaskStatus.FAILED, error=str(exc) or type(exc).__name__)

    async def _wait(self, record: TaskRecord, pending: Sequence[Mapping[str, Any]]) -> None:
        """The child waits for approval: its requests are recorded, then the task waits."""
        if self.on_wait is None:
            error = (
                f"its subagent waits for {len(pending)} approval(s) nobody can give here "
                "(this agent has no approval policy to record them in)"
            )
            await self._settle(record, TaskStatus.FAILED, error=error)
            return
        try:
            await self.on_wait(record, pending)
        except Exception as exc:
            logger.warning("task %s could not wait for approval: %r", record.task_id, exc)
            error = f"its approval requests could not be recorded: {exc}"
            await self._settle(record, TaskStatus.FAILED, error=error)
            return
        expiries = [p.get("expires_at") for p in pending]
        until = max((e for e in expiries if isinstance(e, int | float)), default=None)
        changes: dict[str, object] = {
            "status": TaskStatus.WAITING,
            "approvals": tuple(str(p.get("id")) for p in pending),
            "waiting_until": datetime.fromtimestamp(until, UTC) if until is not None else None,
            "heartbeat_at": self.clock(),
        }
        waiting = await self._update(record, changes)
        self._unreport(waiting)  # watched until it finishes, here or anywhere
        logger.info("task %s waits for approval: %s", record.task_id, ", ".join(waiting.approvals))

    async def resume(self, task_id: str, user_id: str | None, work: Work) -> bool:
        """Continue a ``waiting`` task with ``work`` (its child, given the decisions).

        Whether this call continues it: the first claim wins, in this process or any other
        sharing the workspace, so a task runs once however many decisions arrive at once. It
        waits for a slot like a new task.
        """
        record = await self._load(task_id, user_id)
        if record is None or record.status is not TaskStatus.WAITING or task_id in self._live:
            return False
        attempt = uuid.uuid4().hex
        claim: dict[str, object] = {
            "status": TaskStatus.PENDING,
            "attempt": attempt,
            "approvals": (),
            "waiting_until": None,
            "worker": self.worker,
            "heartbeat_at": self.clock(),
        }
        claimed = await self._update(
            record, claim, when=lambda current: current.status is TaskStatus.WAITING
        )
        if claimed.attempt != attempt:
            return False  # another decision, here or elsewhere, continued it first
        self._start(claimed, self._queued(claimed, work, holding=False))
        return True

    async def overdue(self, ctx: RuntimeContext) -> list[TaskRecord]:
        """The session's waiting tasks whose requests have all expired (nobody decided)."""
        assert ctx.session_id is not None
        watched = self._unreported.get((ctx.user_id, ctx.session_id))
        if not watched:
            return []
        now = self.clock()
        found = []
        for task_id in list(watched):
            record = await self._load(task_id, ctx.user_id)
            if (
                record is not None
                and record.status is TaskStatus.WAITING
                and record.waiting_until is not None
                and record.waiting_until < now
            ):
                found.append(record)
        return found

    async def _settle(self, record: TaskRecord, status: TaskStatus, **changes: object) -> None:
        settled = await self._update(
            record, {"status": status, "finished_at": self.clock(), **changes}
        )
        if settled.status.terminal and settled.delivered_at is None:
            self._unreport(settled)
        if self.on_finish is not None:
            await self.on_finish(settled)

    async def _beat(self) -> None:
        """Refresh the records of this process's unfinished tasks; obey remote cancels."""
        while self._live:
            await asyncio.sleep(self.heartbeat_seconds)
            for record, handle in list(self._live.values()):
                try:
                    fresh = await self._update(record, {"heartbeat_at": self.clock()})
                except OSError as exc:
                    logger.warning("heartbeat of task %s failed: %s", record.task_id, exc)
                    continue
                if fresh.cancel_requested:
                    handle.cancel()

    # -- reading -------------------------------------------------------------------------

    async def get(self, task_id: str, user_id: str | None) -> TaskRecord | None:
        """The task's record (a lost worker's task reported as failed); None if unknown."""
        record = await self._load(task_id, user_id)
        live = self._live.get(task_id)
        if record is None and live is not None and live[0].user_id == user_id:
            record = live[0]  # its file is unreadable or forged: this process knows better
        return await self._check_alive(record) if record is not None else None

    async def records(
        self,
        user_id: str | None,
        *,
        status: TaskStatus | None = None,
        session_id: str | None = None,
    ) -> list[TaskRecord]:
        """The user's tasks (optionally of one status or parent session), oldest first."""
        records = []
        for info in await self.workspace.list_own(self.directory, user_id):
            if not info.path.endswith(".json"):
                continue
            task_id = info.path.rsplit("/", 1)[-1].removesuffix(".json")
            record = await self.get(task_id, user_id)
            if record is None:
                continue
            if status is not None and record.status is not status:
                continue
            if session_id is not None and record.session_id != session_id:
                continue
            records.append(record)
        records.sort(key=lambda r: (r.created_at, r.task_id))
        return records

    async def result(self, record: TaskRecord) -> str | None:
        """The full result of a completed task."""
        if record.result_path is None:
            return None
        return await self.workspace.read_own(self.result_path(record.task_id), record.user_id)

    async def wait(self, record: TaskRecord, seconds: float) -> TaskRecord:
        """Wait up to ``seconds`` for the task to finish; its record either way."""
        entry = self._live.get(record.task_id)
        if entry is not None:
            await asyncio.wait([entry[1]], timeout=seconds)
        else:  # run elsewhere (or waiting for a person: not worth waiting for): poll it
            loop = asyncio.get_running_loop()
            deadline = loop.time() + seconds
            record = await self.get(record.task_id, record.user_id) or record
            while not record.status.at_rest and loop.time() < deadline:
                await asyncio.sleep(min(0.5, max(0.0, deadline - loop.time())))
                record = await self.get(record.task_id, record.user_id) or record
        return await self.get(record.task_id, record.user_id) or record

    # -- cancelling ----------------------------------------------------------------------

    async def cancel(self, task_id: str, user_id: str | None) -> TaskRecord | None:
        """Stop a task; returns its record afterwards (None if unknown)."""
        record = await self.get(task_id, user_id)
        if record is None or record.status.terminal:
            return record
        entry = self._live.get(task_id)
        if entry is not None:
            entry[1].cancel()
            await asyncio.wait([entry[1]])
        else:  # its owner stops it at the next heartbeat; it is cancelled from now on
            changes = {
                "cancel_requested": True,
                "status": TaskStatus.CANCELLED,
                "finished_at": self.clock(),
            }
            await self._update(record, changes)
        return await self.get(task_id, user_id)

    async def aclose(self, grace_seconds: float = 30.0) -> None:
        """Let this process's tasks finish for up to ``grace_seconds``, then cancel the rest."""
        handles = [handle for _, handle in self._live.values()]
        if handles:
            _, pending = await asyncio.wait(handles, timeout=grace_seconds)
            for handle in pending:
                handle.cancel()
            if pending:
                await asyncio.wait(pending)
        if self._heartbeat is not None:
            await cancel_and_wait(self._heartbeat)
            self._heartbeat = None

    # -- completion notices --------------------------------------------------------------

    async def undelivered(self, ctx: RuntimeContext) -> list[TaskRecord]:
        """Finished tasks of this session that the parent has not been told about yet.

        This process's own tasks are known the moment they finish. Tasks of other workers
        sharing the workspace, and of earlier processes, are found by listing the user's
        records at most once per ``heartbeat_seconds`` (reading only the records that changed);
        an unfinished one is then read at every call until it finishes or its worker is found
        lost, so a task whose process died is reported ``failed: worker lost``.
        """
        assert ctx.session_id is not None
        await self._discover(ctx.user_id)
        pending = self._unreported.get((ctx.user_id, ctx.session_id))
        if not pending:
            return []
        records = []
        for task_id in list(pending):
            found = await self.get(task_id, ctx.user_id)
            if found is None or found.delivered_at is not None:
                pending.pop(task_id, None)
            elif found.status.terminal:
                records.append(found)
        return records

    async def _discover(self, user_id: str | None) -> None:
        """Note the user's undelivered tasks written since the last listing (see above)."""
        now = self.clock()
        listed = self._listings.get(user_id)
        if listed is not None and now - listed[0] < timedelta(seconds=self.heartbeat_seconds):
            return
        seen = {} if listed is None else listed[1]
        current: dict[str, float] = {}
        for info in await self.workspace.list_own(self.directory, user_id):
            if not info.path.endswith(".json"):
                continue
            current[info.path] = info.modified
            if seen.get(info.path) == info.modified:
                continue
            task_id = info.path.rsplit("/", 1)[-1].removesuffix(".json")
            record = await self._load(task_id, user_id)
            if record is not None and record.delivered_at is None:
                self._unreport(record)
        self._listings[user_id] = (now, current)

    def _unreport(self, record: TaskRecord) -> None:
        self._unreported.setdefault((record.user_id, record.session_id), {})[record.task_id] = None

    async def mark_delivered(self, records: list[TaskRecord]) -> None:
        """Remember that the parent has been told about these tasks."""
        now = self.clock()
        for record in records:
            await self._update(record, {"delivered_at": now})
            pending = self._unreported.get((record.user_id, record.session_id))
            if pending is not None:
                pending.pop(record.task_id, None)

    # -- storage -------------------------------------------------------------------------

    async def _load(self, task_id: str, user_id: str | None) -> TaskRecord | None:
        """The record of ``task_id`` in ``user_id``'s namespace, if it is that task's.

        The model can write its own namespace, records included, so what a record says of
        whose it is proves nothing: it is the user whose namespace it was read from, and the
        task whose file it is. A record that names another user or task is refused (and
        logged), so a forged one can never send a notice, a result or a write to anyone else.
        """
        try:
            path = self.record_path(task_id)
        except ValueError:
            return None
        text = await self.workspace.read_own(path, user_id)
        return _owned(_parse(text, path) if text else None, user_id, task_id, path)

    async def _save(self, record: TaskRecord) -> None:
        await self.workspace.write_text(
            self.record_path(record.task_id), _dump(record), record.user_id
        )

    async def _update(
        self,
        record: TaskRecord,
        changes: dict[str, object],
        when: Callable[[TaskRecord], bool] | None = None,
    ) -> TaskRecord:
        """Apply ``changes`` to the stored record under its lock; a final status stays final.

        Once a record is final only ``delivered_at`` may still change, so a late writer (a
        heartbeat, or the run ending after a cancel) never resurrects a task.
        """
        path = self.record_path(record.task_id)
        result: list[TaskRecord] = []

        def transform(text: str) -> str:
            parsed = _parse(text, path) if text else None
            stored = _owned(parsed, record.user_id, record.task_id, path)
            current = stored or record
            if when is not None and not when(current):
                allowed: dict[str, object] = {}
            elif current.status.terminal:
                allowed = {k: v for k, v in changes.items() if k == "delivered_at"}
            else:
                allowed = changes
            updated = current.model_copy(update=allowed) if allowed else current
            result.append(updated)
            return _dump(updated) if updated is not stored else text

        await self.workspace.update_text(path, transform, record.user_id)
        return result[-1]

    async def _check_alive(self, record: TaskRecord) -> TaskRecord:
        if record.status.terminal or record.task_id in self._live:
            return record
        if not self._stale(record):
            return record
        last = record.heartbeat_at or record.created_at
        error = (
            f"{WORKER_LOST} (no heartbeat from {record.worker or 'its worker'} "
            f"since {last:%Y-%m-%dT%H:%M:%SZ})"
        )
        changes = {"status": TaskStatus.FAILED, "error": error, "finished_at": self.clock()}
        return await self._update(record, changes, when=self._stale)

    def _stale(self, record: TaskRecord) -> bool:
        """Run by nobody now, and not refreshed for ``stale_after`` (the boundary counts).

        A waiting task is never stale: no process runs it until a decision continues it.
        """
        last = record.heartbeat_at or record.created_at
        if record.worker == ENGINE:  # the engine watches its workers' heartbeats
            return False
        return not record.status.at_rest and self.clock() - last >= self.stale_after


def _owned(
    record: TaskRecord | None, user_id: str | None, task_id: str, path: str
) -> TaskRecord | None:
    """``record`` if it is task ``task_id`` of ``user_id`` (where it was read from), else None.

    A record that names another user or task was not written by the harness for this file:
    it is refused, and logged.
    """
    if record is None or (record.user_id, record.task_id) == (user_id, task_id):
        return record
    logger.warning(
        "ignored the task record %s: it names user %r and task %r, but it lies in the "
        "namespace of %r as task %r",
        scoped(path, user_id),
        record.user_id,
        record.task_id,
        user_id,
        task_id,
    )
    return None


def _dump(record: TaskRecord) -> str:
    return record.model_dump_json(indent=1) + "\n"


def _parse(text: str, path: str) -> TaskRecord | None:
    try:
        return TaskRecord.model_validate_json(text)
    except ValidationError as exc:
        logger.warning("ignored the unreadable task record %s: %s", path, exc.errors()[0]["msg"])
        return None
