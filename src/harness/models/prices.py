"""What a model's tokens cost: the operator's price table.

One table serves two readers: the per-user cost limit of ``harness serve``
(:mod:`harness.serve.limits`) and the cost of each call in a trace
(:func:`harness.observability.summarize`, ``harness trace --prices``). Prices are the
operator's, never a model's or a user's. A trace is priced when it is read, so its files hold
tokens only and a new table re-prices old calls.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.errors import ConfigError

__all__ = ["Price", "cost_of", "load_prices"]


@dataclass(frozen=True, slots=True)
class Price:
    """What a model's tokens cost, per million (in the operator's currency)."""

    input_per_million: float
    output_per_million: float

    def __post_init__(self) -> None:
        for name in ("input_per_million", "output_per_million"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise ConfigError(f"a price's {name} must be a number of 0 or more, not {value!r}")

    def of(self, input_tokens: int, output_tokens: int) -> float:
        per_token = input_tokens * self.input_per_million + output_tokens * self.output_per_million
        return per_token / 1_000_000


def cost_of(
    prices: Mapping[str, Price], model: object, input_tokens: int, output_tokens: int
) -> float | None:
    """The cost of one model step, or None when its model has no price in the table."""
    price = prices.get(str(model or ""))
    return None if price is None else price.of(input_tokens, output_tokens)


def load_prices(path: Path) -> dict[str, Price]:
    """The price table of a JSON file, in the operator's currency per million tokens.

    ``{"<model>": {"input": 0.15, "output": 0.6}}``.

    Raises:
        ConfigError: It cannot be read, or is not such a table (saying which entry).
    """
    try:
        table = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"cannot read the price table {path}: {exc}") from None
    if not isinstance(table, dict):
        raise ConfigError(f"the price table {path} must be a JSON object of models")
    prices: dict[str, Price] = {}
    for model, price in table.items():
        if not isinstance(price, dict) or set(price) != {"input", "output"}:
            msg = (
                f"the price of {model!r} in {path} must be "
                '{"input": <per million>, "output": <per million>}'
            )
            raise ConfigError(msg)
        prices[model] = Price(price["input"], price["output"])
    return prices
