"""Turns that outlive their worker: a session's turns as Temporal workflows (optional).

Without an engine nothing here is used: a turn runs in the process that took it. With one
(``harness serve --engine temporal://HOST:PORT``, or :class:`TemporalEngine` in Python), a
turn is a workflow whose activity continues the session from the store, so another worker
finishes it when its own dies, and a turn that waits for approval waits in Temporal, holding
no process. ``docs/durable-execution.md`` says what survives what.

Needs the ``temporal`` extra (``temporalio``).
"""

from __future__ import annotations

from harness.errors import ConfigError, install_hint

try:
    import temporalio  # noqa: F401
except ImportError as exc:  # an optional extra: say how to install it
    msg = f"the durable engine needs the temporalio package: {install_hint('temporal')} ({exc})"
    raise ConfigError(msg) from exc

from harness.durable.engine import EngineConfig, TemporalEngine
from harness.durable.refs import SegmentEnd, TurnRef

__all__ = ["EngineConfig", "SegmentEnd", "TemporalEngine", "TurnRef"]
