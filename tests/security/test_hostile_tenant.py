"""Generative hostile tenants: random sequences of hostile actions never reach another tenant.

Users share one workspace and one agent over the real sandbox, and any user's model may be
steered by a prompt injection. Each example draws an attacker (a user, or the call without a
user, which writes the shared root), a victim and a few actions of one class (links, special
files, malformed declarations, forged records, pathological patterns, hostile names and ids),
plays them through the attacker's file tools and ``execute``, and then checks every other
caller: (a) its next call answers in time and still sees its own memory, (b) it sees no
canary of anyone else, (c) its namespace (and the host beside the workspace) is byte for byte
what it was, (d) the event loop never stalled, (e) the attacker saw nothing of the victims or
the host. See ``_hostile.py`` for the grammar and the checks.

The explicit tests below are examples that failed once: each stays a regular test.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from _hostile import (
    KEPT,
    KEPT_FILES,
    Attack,
    BigFile,
    Declaration,
    Fifo,
    ForgedTask,
    Harmless,
    Link,
    any_action,
    attacks,
    declarations,
    forged_records,
    links,
    names,
    patterns,
    run_attack,
    special_files,
)
from hypothesis import HealthCheck, Phase, given, settings

from _required import unavailable
from harness.filesystem import SandboxFilesystem

EXAMPLES = int(os.environ.get("HARNESS_HOSTILE_EXAMPLES", "6"))
"""Examples per class (the combined test draws twice as many); raise it for a longer hunt."""

PHASES = (Phase.explicit, Phase.generate) + (
    (Phase.shrink,) if os.environ.get("HARNESS_HOSTILE_SHRINK") else ()
)
"""No shrinking by default: a failing example can take a minute (the limits of its calls),
and shrinking replays it dozens of times. HARNESS_HOSTILE_SHRINK=1 turns it on."""

HOSTILE = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,  # nothing written under the repository
    phases=PHASES,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
    ],
)


@pytest.fixture(scope="module")
def sandbox_works() -> None:
    """The real sandbox, or a skip (a printed reason) outside CI and a failure in CI."""

    async def check() -> str | None:
        with tempfile.TemporaryDirectory() as directory:
            fs = SandboxFilesystem(Path(directory) / "workspace")
            try:
                return await fs.check()
            finally:
                await fs.aclose()

    problem = asyncio.run(check())
    if problem is None:
        return
    unavailable(f"the bubblewrap sandbox does not work here: {problem}")


def holds(attack: Attack, base: Path) -> None:
    """Play ``attack``; fail with every property it broke."""
    result = run_attack(attack, base)
    if result.skipped is not None:
        unavailable(result.skipped)
    notes = "".join(f"\n  note: {note}" for note in result.notes)
    assert not result.violations, "\n".join(result.violations) + notes


Check = Callable[[Attack], None]


# -- a baseline: an attacker doing nothing hostile breaks nothing ---------------------------------


def test_a_harmless_attacker_breaks_no_property(sandbox_works: None, tmp_path: Path) -> None:
    """Without this, a failure below could be the checks' own noise."""
    holds(Attack((Harmless(),)), tmp_path)
    holds(Attack((Harmless(),), attacker=None), tmp_path)


# -- examples that failed: each stays a regular test -------------------------------------------

FAILED_ONCE = {
    # 2. big real files at kept paths: the loop stalls (d) on the attacker's own file
    "big-MEMORY.md": Attack((BigFile("MEMORY.md", 3),)),
    "1-MB-MEMORY.md-shared-root": Attack((BigFile("MEMORY.md", 1),), None),
    "big-knowledge": Attack((BigFile("knowledge/KNOWLEDGE.md", 12),)),
    "big-messages": Attack((BigFile("agents/harness/context/{session}/messages.jsonl", 12),)),
    "big-transcript": Attack((BigFile("agents/harness/sessions/{session}.jsonl", 12),)),
    # 3. declarations: the shared ones stop every user's call (a), nesting stalls the loop (d)
    "shared-duplicate-subagents": Attack((Declaration("subagent", "plain", "duplicate"),), None),
    "shared-general-purpose": Attack((Declaration("subagent", "plain", "general-purpose"),), None),
    "shared-nested-map": Attack((Declaration("subagent", "nested-map", "fresh", 5000),), None),
    "nested-list": Attack((Declaration("subagent", "nested-list", "fresh", 5000),)),
    "huge-front-matter": Attack((Declaration("subagent", "huge", "fresh"),)),
    # 4. a forged unfinished task naming another tenant: written there (c), noticed there (b)
    "task-naming-the-victim": Attack((ForgedTask("victim", "running", "same", "own"),)),
    "task-naming-no-user": Attack((ForgedTask("nouser", "pending", "other", "own"),)),
}


@pytest.mark.parametrize("attack", list(FAILED_ONCE.values()), ids=list(FAILED_ONCE))
def test_an_example_that_failed_once_holds(
    sandbox_works: None, tmp_path: Path, attack: Attack
) -> None:
    holds(attack, tmp_path)


# -- every kept path at once: one FIFO or one link each ------------------------------------------

EVERYTHING_AT_ONCE = {
    "fifos": Attack(tuple(Fifo(path) for path in KEPT_FILES)),
    "fifos-shared-root": Attack(tuple(Fifo(path) for path in KEPT_FILES), None),
    "links": Attack(tuple(Link(path, "victim") for path in KEPT)),
    "links-shared-root": Attack(tuple(Link(path, "victim") for path in KEPT), None),
    "absolute-links": Attack(tuple(Link(path, "victim-absolute") for path in KEPT)),
}
"""More FIFOs than the default executor has threads (a thread blocked on each would starve
every tenant), and links from every kept path at once."""


@pytest.mark.parametrize("attack", list(EVERYTHING_AT_ONCE.values()), ids=list(EVERYTHING_AT_ONCE))
def test_every_kept_path_at_once_harms_no_other_tenant(
    sandbox_works: None, tmp_path: Path, attack: Attack
) -> None:
    holds(attack, tmp_path)


# -- the generative tests, one per class and one for all ----------------------------------------


@HOSTILE
@given(attack=attacks(links()))
def test_links_from_kept_paths_reach_no_other_tenant(
    sandbox_works: None, tmp_path: Path, attack: Attack
) -> None:
    holds(attack, tmp_path)


@HOSTILE
@given(attack=attacks(special_files()))
def test_fifos_huge_files_and_swapped_kinds_harm_no_other_tenant(
    sandbox_works: None, tmp_path: Path, attack: Attack
) -> None:
    holds(attack, tmp_path)


@HOSTILE
@given(attack=attacks(declarations()))
def test_malformed_declarations_harm_no_other_tenant(
    sandbox_works: None, tmp_path: Path, attack: Attack
) -> None:
    holds(attack, tmp_path)


@HOSTILE
@given(attack=attacks(forged_records()))
def test_forged_records_reach_no_other_tenant(
    sandbox_works: None, tmp_path: Path, attack: Attack
) -> None:
    holds(attack, tmp_path)


@HOSTILE
@given(attack=attacks(patterns(), max_actions=2))
def test_pathological_patterns_stall_no_other_tenant(
    sandbox_works: None, tmp_path: Path, attack: Attack
) -> None:
    holds(attack, tmp_path)


@HOSTILE
@given(attack=attacks(names(), hostile_ids=True))
def test_hostile_names_and_ids_reach_no_other_tenant(
    sandbox_works: None, tmp_path: Path, attack: Attack
) -> None:
    holds(attack, tmp_path)


@settings(HOSTILE, max_examples=2 * EXAMPLES)
@given(attack=attacks(any_action(), hostile_ids=True, max_actions=4))
def test_any_mix_of_hostile_actions_reaches_no_other_tenant(
    sandbox_works: None, tmp_path: Path, attack: Attack
) -> None:
    holds(attack, tmp_path)
