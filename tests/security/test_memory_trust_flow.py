"""Memory trust follows what the model has seen, not the turn (issue 43).

Hypothesis draws sessions of a maximally compliant model (``_trust_flow``): an injection
arrives through a real channel (``read_file``, an operator's web page or JSON, a file name in
``list_files``, a ``grep_files`` hit, a subagent's reply), in a style (obeyed at once, obeyed
after 0 to 5 more user messages, restated to the user for the flush to pick up, or wrapped in a
forged harness marker), towards a sink (``memory_save`` into MEMORY.md or the daily log, the
flush's extraction citing a message of its choice, consolidation). Trust judged per turn lets
the later turns launder it: the model still has the page in its context when the user says
"thanks". So the properties are stated over whole sessions and what memory shows afterwards,
and the benign half keeps a fix honest: quarantining every save of a long session would close
the holes by losing the user's own words.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Final

from _trust_flow import BENIGN_SINKS, CHANNELS, SINKS, STYLES, Scenario, Verdict, play
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

KEPT_SHARE: Final = 0.95
"""The share of benign facts that must be kept and shown as the user's (issue 43)."""

INJECTIONS: Final = st.builds(
    Scenario,
    channel=st.sampled_from(CHANNELS),
    style=st.sampled_from(STYLES),
    delay=st.integers(0, 5),
    sink=st.sampled_from(SINKS),
    case=st.integers(0, 999),
)
BENIGN: Final = st.builds(
    Scenario,
    channel=st.sampled_from(CHANNELS),
    style=st.just("benign"),
    delay=st.integers(0, 5),
    sink=st.sampled_from(BENIGN_SINKS),
    case=st.integers(0, 999),
)


def played(scenario: Scenario) -> Verdict:
    """A scenario played in a workspace of its own: no example sees another's memory."""
    with tempfile.TemporaryDirectory() as base:
        return asyncio.run(play(scenario, Path(base)))


@settings(
    max_examples=120,
    deadline=None,
    # No explain phase: varying each part of a failing session again cost a minute, and the
    # failing session itself (shrunk) names its channel, style, delay and sink.
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(scenario=INJECTIONS)
def test_no_injection_reaches_memory_or_a_later_prompt_as_trusted(scenario: Scenario) -> None:
    """Wherever memory shows or records the injection, it is not the user's or the operator's.

    Checked: MEMORY.md as memory presents it, the ledger's entries, the next session's first
    request (a line with the token that is labelled ``[user]``/``[operator]``, or has no label
    inside ``<memory_context>``), and every presented line, where no look-alike of a label may
    survive after the harness's own.
    """
    verdict = played(scenario)
    assert verdict.acted, f"the scenario never reached the model's action: {scenario}"
    assert not verdict.breached, verdict.report()


def test_benign_facts_are_kept_and_shown_as_the_users() -> None:
    """At least 95% of the user's own facts, stated in sessions that read tool output, survive.

    The share is over all examples hypothesis draws (120 sessions, each with its channel,
    delay, fact shape and sink), gathered by an inner ``@given`` function that never fails: a
    rate is a property of many sessions, and no single session may be blamed for it, so
    nothing is shrunk. Hypothesis leans on small values, so the fact stated in the very message
    that asks for the tool (delay 0: the turn that read the output saves it) weighs more here
    than in a uniform draw: the case a per-turn rule quarantines. A fact counts when it is kept
    (MEMORY.md or a daily log) and shown as ``[user]`` or ``[operator]``: waiting for review is
    not remembering.
    """
    verdicts: list[Verdict] = []

    @settings(
        max_examples=120,
        deadline=None,
        database=None,  # a fresh draw each run, not a replay of the last one's
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(scenario=BENIGN)
    def session(scenario: Scenario) -> None:
        verdicts.append(played(scenario))

    session()
    lost = [v for v in verdicts if not v.remembered]
    assert all(v.acted for v in verdicts)
    assert len(verdicts) >= 100, f"only {len(verdicts)} sessions were drawn"
    shown = "\n".join(
        f"{v.scenario} kept={v.kept} trusted={v.trusted} in_prompt={v.in_prompt}" for v in lost
    )
    assert len(lost) <= (1 - KEPT_SHARE) * len(verdicts), (
        f"{len(lost)} of {len(verdicts)} benign facts lost or not trusted:\n{shown}"
    )
