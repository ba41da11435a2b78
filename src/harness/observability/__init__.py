"""Observability: per-session trace files, their totals, and OpenTelemetry spans.

:class:`~harness.hooks.AgentTraceHook` produces both; ``harness trace SESSION`` reads the
files. Code outside the reasoning loop (the memory flush, background tasks) adds its own
records with :func:`record`.
"""

from harness.observability.trace_file import (
    MAX_ARGUMENT_CHARS,
    MAX_MESSAGE_CHARS,
    TRACES_DIR,
    CallSummary,
    read_trace,
    record,
    summarize,
    total,
    trace_path,
)

__all__ = [
    "MAX_ARGUMENT_CHARS",
    "MAX_MESSAGE_CHARS",
    "TRACES_DIR",
    "CallSummary",
    "read_trace",
    "record",
    "summarize",
    "total",
    "trace_path",
]
