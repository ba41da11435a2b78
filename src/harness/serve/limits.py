"""Per-user limits of a served agent: requests per minute, turns at once, tokens and cost a day.

A host of other people's agents gives each key (each user) a budget. The operator sets it
(:class:`UserLimits`, ``ServeConfig(limits=...)``, ``harness serve --limit-...``), never a user,
and one :class:`Limiter` applies it on the paths every request goes through:

- **requests per minute**: every authenticated request (:meth:`ServeState.authenticate`)
  counts, in a sliding minute;
- **turns at once**: a new turn of a user with that many running is refused before it starts
  (:meth:`TurnStreams.start`);
- **tokens and cost a day** (UTC): each turn's steps are charged when it ends, to the user's
  day in the workspace's ``usage`` ledger (beside the workspace, or in the store that several
  workers share), and a new turn of a user whose day is spent is refused. The cost of a step
  is its input and output tokens at the operator's price for its model (:class:`Price`); a
  model with no price counts tokens and no cost.

A refused request gets 429 with ``Retry-After`` (the seconds until the minute, a turn or the
day frees up) and a code that names the limit: ``rate_limited``, ``too_many_turns``,
``token_limit``, ``cost_limit``; each refusal counts in ``harness_limited_total{limit}``.

Trust boundary: the limits and prices are the operator's; the user is the key's, never a
header or a body field. Requests per minute and turns at once are kept per worker process
(several workers each allow them); the day's tokens and cost are the ledger's, shared by every
worker of the store. A turn that starts under the day's budget runs to its end: the budget is
checked when a turn starts, so a long turn may go past it by what it spends.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from harness.errors import ConfigError, RequestRefused
from harness.models.prices import Price, cost_of
from harness.serve.metrics import count_limited
from harness.workspace import WorkspaceManager
from harness.workspace.ledger import Record, ledger_for, user_key

__all__ = ["Limiter", "Spent", "UserLimits"]

LEDGER_KIND: Final = "usage"
_MINUTE: Final = 60.0


@dataclass(frozen=True, slots=True)
class UserLimits:
    """What each user (each key) may use; None: no limit of that kind.

    Args:
        requests_per_minute: Authenticated requests in any sliding minute, per worker.
        concurrent_turns: Turns running at once, per worker.
        tokens_per_day: Model tokens (input and output, every step) in a UTC day.
        cost_per_day: Cost in a UTC day, at ``prices``.
        prices: The price of each model by the name its steps report (``gpt-4o-mini``).
    """

    requests_per_minute: int | None = None
    concurrent_turns: int | None = None
    tokens_per_day: int | None = None
    cost_per_day: float | None = None
    prices: Mapping[str, Price] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("requests_per_minute", "concurrent_turns", "tokens_per_day"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ConfigError(f"the limit {name} must be a whole number of 1 or more")
        cost = self.cost_per_day
        if cost is not None and (not isinstance(cost, int | float) or not cost > 0):
            raise ConfigError("the limit cost_per_day must be a number above 0")
        if cost is not None and not self.prices:
            raise ConfigError("cost_per_day needs prices: the price of each model served")

    @property
    def daily(self) -> bool:
        """Whether a day's spending is limited (and so charged)."""
        return self.tokens_per_day is not None or self.cost_per_day is not None


@dataclass(frozen=True, slots=True)
class Spent:
    """What one user spent in one day: tokens and cost."""

    tokens: int = 0
    cost: float = 0.0

    @classmethod
    def of(cls, records: Sequence[Record]) -> Spent:
        tokens = sum(int(r.get("tokens") or 0) for r in records)
        return cls(tokens, sum(float(r.get("cost") or 0.0) for r in records))


class Limiter:
    """Applies one :class:`UserLimits` to the users of one served agent (module docs)."""

    def __init__(
        self,
        limits: UserLimits,
        workspace: WorkspaceManager,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.limits = limits
        self.ledger = ledger_for(workspace, LEDGER_KIND)
        self.clock = clock
        self._requests: dict[str | None, deque[float]] = {}

    def admit_request(self, user: str | None) -> None:
        """Count a request of ``user``; refuse it past the minute's limit.

        Raises:
            RequestRefused: 429 ``rate_limited``.
        """
        limit = self.limits.requests_per_minute
        if limit is None:
            return
        now = self.clock()
        seen = self._requests.setdefault(user, deque())
        while seen and seen[0] <= now - _MINUTE:
            seen.popleft()
        if len(seen) >= limit:
            wait = seen[0] + _MINUTE - now
            self._refuse("rate_limited", f"more than {limit} requests in a minute", wait)
        seen.append(now)

    async def admit_turn(self, user: str | None, running: int) -> None:
        """Refuse a new turn of ``user`` (who runs ``running`` here) past a limit.

        Raises:
            RequestRefused: 429 ``too_many_turns``, ``token_limit`` or ``cost_limit``.
        """
        limits = self.limits
        at_once = limits.concurrent_turns
        if at_once is not None and running >= at_once:
            message = f"{running} turns of this user run already (at most {at_once} at once)"
            self._refuse("too_many_turns", message, 1.0)
        if not limits.daily:
            return
        spent = await self.spent(user)
        tomorrow = self._tomorrow()
        if limits.tokens_per_day is not None and spent.tokens >= limits.tokens_per_day:
            message = f"{spent.tokens} tokens used today (at most {limits.tokens_per_day})"
            self._refuse("token_limit", message, tomorrow)
        if limits.cost_per_day is not None and spent.cost >= limits.cost_per_day:
            message = f"{spent.cost:.4f} spent today (at most {limits.cost_per_day:g})"
            self._refuse("cost_limit", message, tomorrow)

    def cost(self, steps: Sequence[Mapping[str, Any]]) -> tuple[int, float]:
        """The tokens and cost of a turn's ``step.completed`` payloads."""
        tokens, cost = 0, 0.0
        for step in steps:
            given = _count(step.get("input_tokens")), _count(step.get("output_tokens"))
            tokens += sum(given)
            cost += cost_of(self.limits.prices, step.get("model"), *given) or 0.0
        return tokens, cost

    async def charge(self, user: str | None, steps: Sequence[Mapping[str, Any]]) -> None:
        """Charge a turn's steps to its user's day (nothing without a daily limit)."""
        if not self.limits.daily or not steps:
            return
        tokens, cost = self.cost(steps)
        record = {"tokens": tokens, "cost": cost, "at": self.clock()}
        await self.ledger.change(self._key(user), lambda _: [record])

    async def spent(self, user: str | None) -> Spent:
        """What ``user`` spent today."""
        return Spent.of(await self.ledger.records(self._key(user)))

    def _key(self, user: str | None) -> str:
        day = datetime.fromtimestamp(self.clock(), UTC).date().isoformat()
        return f"{user_key(user)}:{day}"

    def _tomorrow(self) -> float:
        now = datetime.fromtimestamp(self.clock(), UTC)
        midnight = datetime.combine(now.date() + timedelta(days=1), datetime.min.time(), UTC)
        return (midnight - now).total_seconds()

    @staticmethod
    def _refuse(code: str, message: str, wait: float) -> None:
        count_limited(code)
        retry = max(1, math.ceil(wait))
        raise RequestRefused(429, code, f"{message}; retry in {retry} s", retry_after=retry)


def _count(value: object) -> int:
    return value if isinstance(value, int) and value > 0 else 0
