"""A served turn's events, kept beside its session so a client that left can come back for them.

Each event a served turn streams has an id, ``<turn>.<n>`` (the turn's id and the event's
place in it), sent as the SSE ``id:`` field. The events of the session's latest turn are also
appended to ``turn.jsonl`` in the session's directory, on whatever store the workspace uses::

    {"turn": "5f0c...", "started_at": 1764878400.0}          the header: which turn
    {"n": 0, "event": "turn.started", "data": {...}}          one line per event
    {"end": true}                                            the turn and its stream ended

so a client that reconnects with ``Last-Event-ID`` gets what it missed from any worker that
shares the store, and then the rest as it comes (:func:`replay`). The log is written by the
worker that runs the turn, behind the session's turn gate, so two turns never write one log;
the next turn of the session replaces it. Writes are batched (what arrived while the last
write was on its way goes in the next one), so a turn of many small text deltas costs a few
appends, not one per delta.

The log serves resumption only: the session's messages are the record of what was said. A log
that could not be written is logged and the turn goes on; only a resumed stream loses it.

``cancel.json`` beside it asks the worker running the turn it names to stop it: how a cancel
reaches a turn of another worker (:class:`CancelWatch`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from harness.errors import HarnessError
from harness.kernel.cancelling import cancel_and_wait
from harness.workspace import WorkspaceManager

__all__ = [
    "CANCEL_FILE",
    "ENDINGS",
    "TURN_LOG",
    "CancelWatch",
    "LoggedTurn",
    "TurnLogWriter",
    "event_id",
    "parse_event_id",
    "read_log",
    "replay",
    "request_cancel",
]

logger = logging.getLogger("harness.serve")

TURN_LOG: Final = "turn.jsonl"
CANCEL_FILE: Final = "cancel.json"

ENDINGS: Final = frozenset({"turn.completed", "turn.paused", "turn.cancelled", "error"})
"""The events after which a turn's conversation is over (a memory flush may still follow)."""


def event_id(turn: str, n: int) -> str:
    return f"{turn}.{n}"


def parse_event_id(text: str | None) -> tuple[str, int] | None:
    """The (turn, n) of an event id a client sent back; None for anything else."""
    if not text:
        return None
    turn, _, n = text.strip().rpartition(".")
    if not turn or not n.isdigit() or len(n) > 9:
        return None
    return turn, int(n)


@dataclass(frozen=True, slots=True)
class LoggedTurn:
    """What ``turn.jsonl`` holds: the turn's id, its events so far, and whether it ended."""

    turn: str
    events: list[tuple[str, Mapping[str, Any]]]
    ended: bool


async def read_log(workspace: WorkspaceManager, path: str) -> LoggedTurn | None:
    """The log at ``path``; None when there is none. A torn last line is left for later."""
    found = await workspace.get_bytes(path)
    if found is None:
        return None
    turn: str | None = None
    events: list[tuple[str, Mapping[str, Any]]] = []
    ended = False
    for line in found[0].split(b"\n"):
        try:
            record = json.loads(line)
        except ValueError:
            continue  # the line being written, or damage: what parses is what was sent
        if not isinstance(record, dict):
            continue
        if turn is None:
            turn = str(record.get("turn") or "")
        elif record.get("end"):
            ended = True
        elif isinstance(record.get("event"), str) and isinstance(record.get("data"), dict):
            events.append((record["event"], record["data"]))
    return LoggedTurn(turn, events, ended) if turn else None


class TurnLogWriter:
    """Appends one turn's events to its log, a batch at a time, in the background.

    ``fresh=False`` goes on with a log the turn already has (a worker that took over a turn on
    the durable engine): no new header, the events numbered on from the caller's ``n``.
    """

    def __init__(
        self, workspace: WorkspaceManager, path: str, turn: str, *, fresh: bool = True
    ) -> None:
        self._workspace = workspace
        self._path = path
        self._turn = turn
        self._fresh = fresh
        self._pending: list[str] = []
        self._wake = asyncio.Event()
        self._ended = False
        self._mark = True
        self._task = asyncio.create_task(self._write(), name=f"turn-log-{turn[:8]}")

    def add(self, n: int, name: str, data: Mapping[str, Any]) -> None:
        """Queue the turn's ``n``-th event (they come in order, from 0)."""
        line = {"n": n, "event": name, "data": data}
        self._pending.append(json.dumps(line, ensure_ascii=False, default=str) + "\n")
        self._wake.set()

    async def close(self, *, end: bool = True) -> None:
        """Write what is left and the end mark, and wait for it.

        ``end=False`` leaves the mark out: the turn goes on elsewhere (a worker shutting down
        hands it to another). A caller cancelled meanwhile stops waiting; the writing goes on
        to its end.
        """
        self._mark = end
        self._ended = True
        self._wake.set()
        await asyncio.wait({self._task})

    async def _write(self) -> None:
        header = {"turn": self._turn, "started_at": time.time()}
        try:
            if self._fresh:
                await self._workspace.write_text(self._path, json.dumps(header) + "\n")
            while True:
                await self._wake.wait()
                self._wake.clear()
                batch, self._pending = self._pending, []
                if self._ended and self._mark:
                    batch.append('{"end": true}\n')
                if batch:
                    await self._workspace.append_text(self._path, "".join(batch))
                if self._ended and not self._pending:
                    return
        except HarnessError as exc:
            logger.warning(
                "turn %s: its events could not be kept for resuming: %s", self._turn, exc
            )


async def replay(
    read: Callable[[], Awaitable[LoggedTurn | None]],
    after: int,
    running: Callable[[], Awaitable[bool]],
    ping_seconds: float,
    *,
    poll_seconds: float = 0.25,
) -> AsyncIterator[tuple[str, str, Mapping[str, Any]] | None]:
    """The logged events after the ``after``-th, as (id, name, data), until the turn's end.

    For a turn another worker runs (or ran): the log is read again every ``poll_seconds``
    while it grows. It ends at the end mark, or when the turn stopped running without one (its
    worker died): with an ``error`` event ``turn_lost`` unless the turn had already said how
    it ended. A None after each ``ping_seconds`` without news, for the caller's pings.
    """
    seen = after
    quiet = 0
    last = time.monotonic()
    while True:
        logged = await read()
        if logged is None:
            return
        for n in range(seen + 1, len(logged.events)):
            name, data = logged.events[n]
            yield event_id(logged.turn, n), name, data
        fresh = len(logged.events) - 1 > seen
        seen = max(seen, len(logged.events) - 1)
        if logged.ended:
            return
        if fresh:
            quiet, last = 0, time.monotonic()
        else:
            quiet += 1
            if quiet >= 4 and not await running():
                if not any(name in ENDINGS for name, _ in logged.events):
                    message = "the worker running this turn stopped; the session keeps its steps"
                    yield (
                        event_id(logged.turn, seen + 1),
                        "error",
                        {"code": "turn_lost", "message": message},
                    )
                return
            if time.monotonic() - last >= ping_seconds:
                last = time.monotonic()
                yield None
        await asyncio.sleep(poll_seconds)


class CancelWatch:
    """Stops a running turn when ``cancel.json`` beside it names it: a cancel from any worker.

    Read once per ``poll_seconds`` while the turn runs.
    """

    def __init__(
        self,
        workspace: WorkspaceManager,
        path: str,
        turn: str,
        stop: Callable[[], None],
        poll_seconds: float = 1.0,
    ) -> None:
        self._workspace = workspace
        self._path = path
        self._turn = turn
        self._stop = stop
        self._poll = poll_seconds
        self._task = asyncio.create_task(self._watch(), name=f"turn-cancel-{turn[:8]}")

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self._poll)
            with contextlib.suppress(HarnessError, ValueError):
                found = await self._workspace.get_bytes(self._path)
                if found is not None and json.loads(found[0]).get("turn") == self._turn:
                    self._stop()
                    return

    async def aclose(self) -> None:
        await cancel_and_wait(self._task)


async def request_cancel(workspace: WorkspaceManager, path: str, turn: str) -> None:
    """Ask the worker running ``turn`` to stop it (it reads this within a second)."""
    await workspace.write_text(path, json.dumps({"turn": turn, "at": time.time()}))
