"""The turn as a Temporal workflow: run the turn's activity, wait for decisions, run it again.

One workflow per session at a time (its id names the agent, user and session:
:func:`turn_workflow_id`), so the workflow id serializes a session's turns across every worker.
The workflow holds no conversation: each run of :data:`SEGMENT` reads the session from the
store, continues the turn from where the store says it is, and returns how it ended
(:class:`~harness.durable.refs.SegmentEnd`). A worker that dies mid-run stops heartbeating;
Temporal retries the activity on another worker (with backoff), which continues the same turn
from the store (:mod:`harness.durable.activities`).

A turn that pauses for approval keeps its workflow open, waiting (days, if need be, with no
process held) for the :meth:`TurnWorkflow.decided` signal, sent once decisions are in the
ledger; then it runs the activity again. When the requests expire first, it runs it again as
well: the gate reads them as rejected and the turn goes on, so no session is held forever. A
cancel (Temporal's, ``TemporalEngine.cancel``) stops the running activity at its next
heartbeat, or the wait.

Clients learn how each run ended without polling: the update :meth:`TurnWorkflow.next_end`
returns once the workflow has more ends than the caller has seen.

Runs in Temporal's workflow sandbox: deterministic code only, and nothing of Harness but the
references it passes (:mod:`harness.durable.refs`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, CancelledError

with workflow.unsafe.imports_passed_through():
    from harness.durable.refs import SegmentEnd, TaskRef, TurnRef

__all__ = [
    "SEGMENT",
    "TASK",
    "TaskInput",
    "TaskWorkflow",
    "TurnInput",
    "TurnSettings",
    "TurnWorkflow",
    "task_workflow_id",
    "turn_workflow_id",
]

SEGMENT = "harness.turn.segment"
"""The activity that runs a turn from where the store says it is (its name on the queue)."""


TASK = "harness.task.run"
"""The activity that runs a background task to its end (its name on the queue)."""


def task_workflow_id(agent: str, user_id: str | None, task_id: str) -> str:
    """The workflow id of a background task: one workflow per task, ever."""
    return f"harness-task/{agent}/{user_id or '-'}/{task_id}"


def turn_workflow_id(agent: str, user_id: str | None, session_id: str) -> str:
    """The workflow id of a session's turns: one turn at a time per session, in every worker."""
    return f"harness-turn/{agent}/{user_id or '-'}/{session_id}"


@dataclass(frozen=True)
class TurnSettings:
    """How the workflow runs its activity: time limits and retries (the engine's config)."""

    heartbeat_seconds: float
    turn_seconds: float
    max_attempts: int
    first_retry_seconds: float

    @property
    def retries(self) -> RetryPolicy:
        """Retries with backoff: the first after ``first_retry_seconds``, doubling to 30 s."""
        return RetryPolicy(
            initial_interval=timedelta(seconds=self.first_retry_seconds),
            backoff_coefficient=2.0,
            maximum_interval=timedelta(seconds=max(30.0, self.first_retry_seconds)),
            maximum_attempts=self.max_attempts,
        )


@dataclass(frozen=True)
class TurnInput:
    ref: TurnRef
    settings: TurnSettings


@dataclass(frozen=True)
class TaskInput:
    ref: TaskRef
    settings: TurnSettings


@workflow.defn(name="harness.turn")
class TurnWorkflow:
    """A session's turn: its segments, the decisions it waits for, how it ended (module docs)."""

    def __init__(self) -> None:
        self.ends: list[SegmentEnd] = []
        self.streams: list[str] = []
        """The event stream of each continuation asked for (:meth:`decided`), in order."""

    @workflow.run
    async def run(self, given: TurnInput) -> SegmentEnd:
        ref, settings = given.ref, given.settings
        try:
            while True:
                seen = len(self.streams)
                try:
                    end: SegmentEnd = await workflow.execute_activity(
                        SEGMENT,
                        ref,
                        result_type=SegmentEnd,
                        schedule_to_close_timeout=timedelta(seconds=settings.turn_seconds),
                        heartbeat_timeout=timedelta(seconds=settings.heartbeat_seconds),
                        retry_policy=settings.retries,
                        cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                    )
                except ActivityError as error:
                    if isinstance(error.cause, CancelledError):
                        raise asyncio.CancelledError from error
                    end = SegmentEnd("failed", error=_cause(error))
                self.ends.append(end)
                if end.kind != "paused":
                    break
                if not await self._decided_after(seen, end.expires_in):
                    self.streams.append(str(workflow.uuid4()))  # expired: the gate refuses them
                ref = replace(ref, text=None, stream=self.streams[seen])
        except asyncio.CancelledError:
            end = SegmentEnd("cancelled")
            self.ends.append(end)
        await workflow.wait_condition(workflow.all_handlers_finished)
        return end

    async def _decided_after(self, seen: int, expires_in: float | None) -> bool:
        """Wait for a decision; False when the requests expired first."""
        try:
            await workflow.wait_condition(lambda: len(self.streams) > seen, timeout=expires_in)
        except TimeoutError:
            return False
        return True

    @workflow.signal
    def decided(self, stream: str) -> None:
        """Decisions were recorded in the ledger: continue the paused turn, as ``stream``."""
        self.streams.append(stream)

    @workflow.query
    def seen(self) -> int:
        """How many runs have ended so far: what :meth:`next_end` is asked after."""
        return len(self.ends)

    @workflow.update
    async def next_end(self, seen: int) -> SegmentEnd:
        """The end of the run after the ``seen`` first ones, once there is one."""
        await workflow.wait_condition(lambda: len(self.ends) > seen)
        return self.ends[seen]


@workflow.defn(name="harness.task")
class TaskWorkflow:
    """A background task: one activity, retried on another worker when its own dies.

    Its status is the task record's, in the store; the workflow returns the one it ended with.
    """

    @workflow.run
    async def run(self, given: TaskInput) -> str:
        settings = given.settings
        status: str = await workflow.execute_activity(
            TASK,
            given.ref,
            result_type=str,
            schedule_to_close_timeout=timedelta(seconds=settings.turn_seconds),
            heartbeat_timeout=timedelta(seconds=settings.heartbeat_seconds),
            retry_policy=settings.retries,
        )
        return status


def _cause(error: BaseException) -> str:
    """The innermost message of an activity's failure: what the worker raised."""
    while error.__cause__ is not None:
        error = error.__cause__
    return str(error) or type(error).__name__
