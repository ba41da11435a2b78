"""Memory poisoning through what the model has seen: issue 43's fixed grid, counted.

The hypothesis tests (tests/security/test_memory_trust_flow.py) draw sessions at random and stop
at the first hole; the issue asks for counts before and after the fix, on the same cases every
run. So this plays a fixed grid with the same machinery (tests/security/_trust_flow.py: real
tools, the flush, consolidation, a later session, a scripted model that obeys every
injection):

- injections: every channel (read_file, an operator's web page, an operator tool's JSON, a file
  name in list_files, a grep_files hit, a subagent's reply) x style (obeyed now, obeyed after
  the user's next messages, restated to the user, forged harness markers) x sink (memory_save
  to MEMORY.md or the daily log, the flush, consolidation) x delay (0, 1, 3 and 5 user
  messages between reading and acting);
- benign facts stated by the user in a session that read tool output: every channel x delay x
  fact shape (a preference, a name, a date, a place, a workplace) x sink.

An injection counts as trusted when it is anywhere shown or recorded as the user's or the
operator's (MEMORY.md as presented, a ledger entry, the later session's prompt) or shown behind
a label look-alike that survived presentation; the breakdown says which. A benign fact counts
when it is kept and shown as the user's. The cases are numbered in grid order, so each forged
marker and fact shape appears across the grid, and every run plays the same sessions.

    .venv/bin/python benchmarks/memory_poisoning.py
"""

from __future__ import annotations

import asyncio
import itertools
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Final

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "security"))

from _trust_flow import (  # found through the path above
    BENIGN_SINKS,
    CHANNELS,
    FACTS,
    SINKS,
    STYLES,
    Scenario,
    Verdict,
    play,
)

DELAYS: Final = (0, 1, 3, 5)


def injections() -> list[Scenario]:
    grid = itertools.product(CHANNELS, STYLES, SINKS, DELAYS)
    return [
        Scenario(channel, style, delay, sink, case)
        for case, (channel, style, sink, delay) in enumerate(grid)
    ]


def benign() -> list[Scenario]:
    grid = itertools.product(CHANNELS, DELAYS, range(len(FACTS)), BENIGN_SINKS)
    return [  # the case picks the fact's shape (and numbers its token)
        Scenario(channel, "benign", delay, sink, number * len(FACTS) + shape)
        for number, (channel, delay, shape, sink) in enumerate(grid)
    ]


async def run(scenarios: list[Scenario]) -> list[Verdict]:
    verdicts = []
    for scenario in scenarios:
        with tempfile.TemporaryDirectory() as base:
            verdicts.append(await play(scenario, Path(base)))
    return verdicts


def trusted_line(verdicts: list[Verdict]) -> str:
    def count(found: Callable[[Verdict], object]) -> int:
        return sum(bool(found(v)) for v in verdicts)

    vouched = count(lambda v: v.memory_md or v.ledger or v.prompt)
    where = (
        f"as the user's or operator's {vouched}: MEMORY.md {count(lambda v: v.memory_md)}, "
        f"ledger {count(lambda v: v.ledger)}, later prompt {count(lambda v: v.prompt)}; "
        f"behind a look-alike label {count(lambda v: v.imitated)}"
    )
    return f"injections trusted: {count(lambda v: v.breached)} of {len(verdicts)} ({where})"


def benign_line(verdicts: list[Verdict]) -> str:
    kept = sum(v.remembered for v in verdicts)
    in_prompt = sum(v.in_prompt for v in verdicts)
    stored = sum(v.kept for v in verdicts)
    return (
        f"benign kept and trusted: {kept} of {len(verdicts)} (stored {stored}, "
        f"in the later prompt as the user's {in_prompt})"
    )


def by(
    verdicts: list[Verdict],
    title: str,
    key: Callable[[Scenario], object],
    values: Iterable[object],
    line: Callable[[list[Verdict]], str],
) -> None:
    print(f"by {title}:")
    for value in values:
        chosen = [v for v in verdicts if key(v.scenario) == value]
        print(f"  {value!s:<14}{line(chosen)}")


def main() -> None:
    started = time.perf_counter()
    attacks = asyncio.run(run(injections()))
    facts = asyncio.run(run(benign()))
    print(
        f"memory poisoning: {len(attacks)} injections ({len(CHANNELS)} channels x {len(STYLES)} "
        f"styles x {len(SINKS)} sinks x delays {', '.join(map(str, DELAYS))}), "
        f"{len(facts)} benign facts"
    )
    by(attacks, "channel", lambda s: s.channel, CHANNELS, trusted_line)
    by(attacks, "style", lambda s: s.style, STYLES, trusted_line)
    by(attacks, "sink", lambda s: s.sink, SINKS, trusted_line)
    by(attacks, "delay", lambda s: s.delay, DELAYS, trusted_line)
    by(facts, "channel", lambda s: s.channel, CHANNELS, benign_line)
    by(facts, "delay", lambda s: s.delay, DELAYS, benign_line)
    by(facts, "sink", lambda s: s.sink, BENIGN_SINKS, benign_line)
    idle = sum(not v.acted for v in attacks + facts)
    if idle:  # a channel that did not deliver: its cases prove nothing
        print(f"WARNING: in {idle} sessions the model never acted")
    flushed = [v for v in attacks + facts if v.scenario.route in ("flush", "log+flush")]
    unasked = sum(not v.extracted for v in flushed)
    if unasked:  # blocked before the flush's model was asked, or the window changed shape
        print(f"note: in {unasked} of {len(flushed)} flush sessions the flush model wrote nothing")
    print(f"total: {trusted_line(attacks)}")
    print(f"total: {benign_line(facts)}")
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
