"""A call's cost in its trace summary: the sum of its steps at the reader's prices, or None
when a step that reported tokens ran a model the table does not price (never a cost of 0)."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from harness.models import Price
from harness.observability import summarize, total

PRICES = {"small": Price(0.5, 1.5), "large": Price(3.0, 15.0)}

STEPS = st.lists(
    st.tuples(
        st.sampled_from(["small", "large", "unpriced", None]),
        st.one_of(st.none(), st.integers(0, 50_000)),
        st.one_of(st.none(), st.integers(0, 5_000)),
    ),
    max_size=6,
)


def records(
    call: str, steps: list[tuple[str | None, int | None, int | None]]
) -> list[dict[str, Any]]:
    head: list[dict[str, Any]] = [{"event": "PreCall", "call_id": call, "inputs": 1}]
    return head + [
        {
            "event": "PostReasoning",
            "call_id": call,
            "model": model,
            "input_tokens": taken,
            "output_tokens": out,
        }
        for model, taken, out in steps
    ]


def expected(steps: list[tuple[str | None, int | None, int | None]]) -> float | None:
    cost = 0.0
    for model, taken, out in steps:
        price = PRICES.get(model or "")
        if price is None:
            if taken or out:
                return None
            continue
        cost += price.of(taken or 0, out or 0)
    return cost


@given(st.lists(STEPS, min_size=1, max_size=4))
def test_each_calls_cost_is_its_priced_steps_or_unknown(calls: list[list[Any]]) -> None:
    traced = [r for n, steps in enumerate(calls) for r in records(f"call-{n}", steps)]
    summaries = summarize(traced, PRICES)
    for summary, steps in zip(summaries, calls, strict=True):
        want = expected(steps)
        assert (summary.cost is None) == (want is None)
        if want is not None and summary.cost is not None:
            assert math.isclose(summary.cost, want, rel_tol=1e-9, abs_tol=1e-12)
    costs = [s.cost for s in summaries]
    whole = total(summaries).cost
    if None in costs:
        assert whole is None
    else:
        assert whole is not None
        assert math.isclose(whole, sum(c for c in costs if c is not None), abs_tol=1e-12)
    assert all(s.cost is None for s in summarize(traced))  # no table: no cost
