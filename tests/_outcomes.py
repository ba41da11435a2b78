"""How a test reads a call's outcome (harness.kernel.outcome) when it expects one kind.

A call returns :class:`~harness.kernel.Finished` or :class:`~harness.kernel.Paused` and
raises the rest; a test that expects an answer (or a pause) says so with these, and fails
naming what it got instead.
"""

from __future__ import annotations

from typing import TypeVar

from harness.kernel import Ended, Finished, Msg, Paused

T = TypeVar("T")


def answer(outcome: Ended) -> Msg:
    """The reply of a call the test expects to finish."""
    assert isinstance(outcome, Finished), f"the call did not finish: {outcome!r}"
    return outcome.reply


def waits(outcome: Ended) -> Paused:
    """The pause of a call the test expects to wait for decisions."""
    assert isinstance(outcome, Paused), f"the call did not pause: {outcome!r}"
    return outcome


def ran(result: T | Paused) -> T:
    """What a tool gave, for a tool the test expects not to pause."""
    assert not isinstance(result, Paused), f"the tool paused: {result!r}"
    return result
