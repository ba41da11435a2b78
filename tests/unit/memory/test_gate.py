from __future__ import annotations

from datetime import UTC, datetime, timedelta

from harness.memory import PeriodicGate


class FakeClock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def test_claims_once_per_gap_with_inclusive_boundary() -> None:
    clock = FakeClock()
    gate = PeriodicGate(clock)
    gap = timedelta(minutes=30)
    assert gate.try_claim("k", gap) is True
    assert gate.try_claim("k", gap) is False
    clock.now += gap - timedelta(microseconds=1)
    assert gate.try_claim("k", gap) is False
    clock.now += timedelta(microseconds=1)  # exactly one gap later
    assert gate.try_claim("k", gap) is True


def test_keys_are_independent_and_zero_gap_always_claims() -> None:
    gate = PeriodicGate(FakeClock())
    assert gate.try_claim("user:a", timedelta(hours=1))
    assert gate.try_claim("user:b", timedelta(hours=1))
    assert gate.try_claim("z", timedelta(0))
    assert gate.try_claim("z", timedelta(0))


def test_reset_forgets() -> None:
    gate = PeriodicGate(FakeClock())
    gate.try_claim("k", timedelta(hours=1))
    gate.reset("k")
    assert gate.try_claim("k", timedelta(hours=1))
