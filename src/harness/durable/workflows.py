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
ledger; then it runs the activity again. A cancel (Temporal's, ``TemporalEngine.cancel``)
stops the running activity at its next heartbeat, or the wait.

Clients learn how each run ended without polling: the update :meth:`TurnWorkflow.next_end`
returns once the workflow has more ends than the caller has seen.

Runs in Temporal's workflow sandbox: deterministic code only, and nothing of Harness but the
references it passes (:mod:`harness.durable.refs`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, CancelledError

with workflow.unsafe.imports_passed_through():
    from harness.durable.refs import SegmentEnd, TurnRef

__all__ = ["SEGMENT", "TurnInput", "TurnSettings", "TurnWorkflow", "turn_workflow_id"]

SEGMENT = "harness.turn.segment"
"""The activity that runs a turn from where the store says it is (its name on the queue)."""


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


@dataclass(frozen=True)
class TurnInput:
    ref: TurnRef
    settings: TurnSettings


@workflow.defn(name="harness.turn")
class TurnWorkflow:
    """A session's turn: its segments, the decisions it waits for, how it ended (module docs)."""

    def __init__(self) -> None:
        self.ends: list[SegmentEnd] = []
        self.decisions = 0

    @workflow.run
    async def run(self, given: TurnInput) -> SegmentEnd:
        ref, settings = given.ref, given.settings
        retries = RetryPolicy(
            initial_interval=timedelta(seconds=settings.first_retry_seconds),
            backoff_coefficient=2.0,
            maximum_interval=timedelta(seconds=max(30.0, settings.first_retry_seconds)),
            maximum_attempts=settings.max_attempts,
        )
        try:
            while True:
                seen = self.decisions
                try:
                    end: SegmentEnd = await workflow.execute_activity(
                        SEGMENT,
                        ref,
                        result_type=SegmentEnd,
                        start_to_close_timeout=timedelta(seconds=settings.turn_seconds),
                        heartbeat_timeout=timedelta(seconds=settings.heartbeat_seconds),
                        retry_policy=retries,
                        cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                    )
                except ActivityError as error:
                    if isinstance(error.cause, CancelledError):
                        raise asyncio.CancelledError from error
                    end = SegmentEnd("failed", error=_cause(error))
                self.ends.append(end)
                if end.kind != "paused":
                    break
                await self._decided_after(seen)
                ref = TurnRef(ref.agent, ref.session_id, ref.turn, ref.user_id, None)
        except asyncio.CancelledError:
            end = SegmentEnd("cancelled")
            self.ends.append(end)
        await workflow.wait_condition(workflow.all_handlers_finished)
        return end

    async def _decided_after(self, seen: int) -> None:
        await workflow.wait_condition(lambda: self.decisions > seen)

    @workflow.signal
    def decided(self) -> None:
        """Decisions were recorded in the ledger: continue the paused turn."""
        self.decisions += 1

    @workflow.query
    def seen(self) -> int:
        """How many runs have ended so far: what :meth:`next_end` is asked after."""
        return len(self.ends)

    @workflow.update
    async def next_end(self, seen: int) -> SegmentEnd:
        """The end of the run after the ``seen`` first ones, once there is one."""
        await workflow.wait_condition(lambda: len(self.ends) > seen)
        return self.ends[seen]


def _cause(error: BaseException) -> str:
    """The innermost message of an activity's failure: what the worker raised."""
    while error.__cause__ is not None:
        error = error.__cause__
    return str(error) or type(error).__name__
