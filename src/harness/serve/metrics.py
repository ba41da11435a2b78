"""Prometheus metrics of a served agent: its turns, their tokens and errors, its HTTP requests.

``GET /metrics`` answers them in Prometheus' text format (:func:`metrics_text`). What is
counted comes from two places:

- every turn's events, through :meth:`TurnMetrics.observe`, a pass-through of the events that
  :meth:`harness.serve.turns.Turns.run` yields: how each turn ended (``outcome``), its tokens,
  its error codes, its time, and how many turns hold a session right now;
- every HTTP request, by :class:`HttpMetrics`, a middleware: method and status.

The metrics are the process's, as Prometheus' client keeps them. ``harness serve --workers N``
runs each worker in a process of its own; it sets ``PROMETHEUS_MULTIPROC_DIR`` to a fresh
directory before starting them, each worker writes its values there, and a scrape, whichever
worker answers it, sums every worker's (``prometheus_client``'s multiprocess mode). Metrics say
how many and how long, never what: no label holds a user, a session or any text.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any, Final

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client import multiprocess as _multiprocess
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "CONTENT_TYPE",
    "LIMITS",
    "MULTIPROC_ENV",
    "OUTCOMES",
    "TURN_METRICS",
    "HttpMetrics",
    "TurnMetrics",
    "TurnTracker",
    "count_limited",
    "metrics_text",
    "worker_stopped",
]

MULTIPROC_ENV: Final = "PROMETHEUS_MULTIPROC_DIR"
"""Where the workers of one server write their values (set by ``harness serve --workers N``)."""

CONTENT_TYPE: Final = CONTENT_TYPE_LATEST
"""The media type of :func:`metrics_text`'s answer."""

OUTCOMES: Final = ("completed", "failed", "paused", "cancelled", "timeout")
"""How a turn ends: its reply saved; an error; waiting for approval; stopped by its client or
the server's shutdown; past ``turn_timeout``."""

Event = tuple[str, Mapping[str, Any]]
"""A turn's event as :meth:`~harness.serve.turns.Turns.run` yields it: its name, its data."""

_TURN_BUCKETS: Final = (0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
"""Seconds: a turn takes from a fraction of a second (a cached answer) to minutes (tools)."""
_METHODS: Final = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"})
"""Methods counted by name; any other is ``other``, so a client cannot grow the label set."""

_REGISTRY: Final = CollectorRegistry(auto_describe=True)
"""This process's harness metrics (Prometheus' default registry is left to the application)."""

_turns = Counter(
    "harness_turns_total", "Turns, by how they ended.", ["outcome"], registry=_REGISTRY
)
_tokens = Counter(
    "harness_tokens_total",
    "Model tokens of the served turns (every step), input and output.",
    ["kind"],
    registry=_REGISTRY,
)
_errors = Counter(
    "harness_turn_errors_total",
    "Turns that ended in an error event, by its code (turn_timeout among them).",
    ["code"],
    registry=_REGISTRY,
)
_seconds = Histogram(
    "harness_turn_seconds",
    "Seconds from a turn holding its session to its end (its reply, pause or error).",
    buckets=_TURN_BUCKETS,
    registry=_REGISTRY,
)
_busy = Gauge(
    "harness_sessions_busy",
    "Turns running now (each holds its session).",
    registry=_REGISTRY,
    multiprocess_mode="livesum",
)
_requests = Counter(
    "harness_http_requests_total",
    "HTTP requests answered, by method and status.",
    ["method", "status"],
    registry=_REGISTRY,
)
_limited = Counter(
    "harness_limited_total",
    "Requests refused by a per-user limit, by the limit (harness.serve.limits).",
    ["limit"],
    registry=_REGISTRY,
)
LIMITS: Final = ("rate_limited", "too_many_turns", "token_limit", "cost_limit")
for _outcome in OUTCOMES:
    _turns.labels(_outcome)
for _limit in LIMITS:
    _limited.labels(_limit)


def count_limited(limit: str) -> None:
    """Count a request a per-user limit refused."""
    _limited.labels(limit if limit in LIMITS else "other").inc()


for _kind in ("input", "output"):
    _tokens.labels(_kind)


class TurnTracker:
    """One turn's part of the metrics: give it each event, then :meth:`end` it.

    The first outcome event (``turn.completed``, ``turn.paused``, ``error``) ends the turn;
    :meth:`end` without one counts it as cancelled (or failed, given an exception), and is
    harmless after one. A turn that never started (its session stayed busy) counts nothing.
    """

    def __init__(self) -> None:
        self._started: float | None = None
        self._ended = False

    def event(self, event: Event) -> None:
        """Count what ``event`` says about the turn."""
        name, data = event
        if name == "turn.started":
            if self._started is None:
                self._started = time.perf_counter()
                _busy.inc()
        elif name == "step.completed":
            _tokens.labels("input").inc(_count(data.get("input_tokens")))
            _tokens.labels("output").inc(_count(data.get("output_tokens")))
        elif name == "turn.completed":
            self._end("completed")
        elif name == "turn.paused":
            self._end("paused")
        elif name == "error":
            code = str(data.get("code") or "unknown")[:64]
            if not self._ended:
                _errors.labels(code).inc()
            self._end("timeout" if code == "turn_timeout" else "failed")

    def end(self, failure: BaseException | None = None) -> None:
        """The turn's events are over: cancelled (failed, for an exception) if none ended it."""
        if self._started is not None and not self._ended:
            if failure is not None and not isinstance(
                failure, (asyncio.CancelledError, GeneratorExit)
            ):
                _errors.labels("internal_error").inc()
                self._end("failed")
            else:
                self._end("cancelled")

    def _end(self, outcome: str) -> None:
        if self._ended or self._started is None:
            return
        self._ended = True
        _turns.labels(outcome).inc()
        _seconds.observe(time.perf_counter() - self._started)
        _busy.dec()


class TurnMetrics:
    """Counts served turns from their events; one for the process (:data:`TURN_METRICS`)."""

    def track(self) -> TurnTracker:
        """A tracker for one turn, for code that sees the events one by one."""
        return TurnTracker()

    async def observe(self, events: AsyncIterator[Event]) -> AsyncGenerator[Event, None]:
        """``events`` unchanged, counted on the way.

        Owns ``events``: closing this closes them (as ``contextlib.aclosing`` around
        ``Turns.run`` did), so the turn's session is released as before.
        """
        tracker = self.track()
        failure: BaseException | None = None
        try:
            async with contextlib.AsyncExitStack() as stack:
                closing = getattr(events, "aclose", None)
                if closing is not None:
                    stack.push_async_callback(closing)
                async for event in events:
                    tracker.event(event)
                    yield event
        except BaseException as exc:
            failure = exc
            raise
        finally:
            tracker.end(failure)


TURN_METRICS: Final = TurnMetrics()
"""The process's turn metrics; ``GET /metrics`` shows them."""


class HttpMetrics:
    """Counts each HTTP request by method and status when its response starts."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method = scope["method"] if scope["method"] in _METHODS else "other"
        counted = False

        async def sending(message: Message) -> None:
            nonlocal counted
            if message["type"] == "http.response.start" and not counted:
                counted = True
                _requests.labels(method, str(message["status"])).inc()
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            if not counted:  # the client left, or the app failed, before any answer
                _requests.labels(method, "none").inc()


def metrics_text() -> bytes:
    """The metrics in Prometheus' text format: every worker's, summed, under ``--workers N``.

    Reads the workers' files in multiprocess mode: call it off the event loop.
    """
    directory = os.environ.get(MULTIPROC_ENV)
    if directory:
        registry = CollectorRegistry()
        _multiprocess.MultiProcessCollector(registry, path=directory)  # type: ignore[no-untyped-call]
        return generate_latest(registry)
    return generate_latest(_REGISTRY)


def worker_stopped() -> None:
    """Forget this process's live gauges (turns running) when it stops, in multiprocess mode.

    Its counters stay counted: a worker that uvicorn restarts loses none of the totals.
    """
    if os.environ.get(MULTIPROC_ENV):
        _multiprocess.mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]


def _count(value: Any) -> int:
    return value if isinstance(value, int) and value > 0 else 0


if not os.environ.get(MULTIPROC_ENV):  # the process's own; meaningless summed over workers
    ProcessCollector(registry=_REGISTRY)
    PlatformCollector(registry=_REGISTRY)
    GCCollector(registry=_REGISTRY)
