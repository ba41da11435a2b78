"""The order hooks run in, event by event, is the one ``HOOK_ORDER`` states.

The chain sorts hooks by priority and keeps the assembly's order for ties; a priority changed
in a hook module, or a line moved in ``assembly.py``, changes what runs first. This builds an
agent with every capability on (a sandboxed workspace, compaction, approvals, memory, and a
hook of the application's) and reads the chain's own dispatch order for every event type, so
the table, the docs and the code cannot drift apart.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness import HarnessAgent
from harness.assembly import HOOK_ORDER, USER_HOOKS
from harness.compaction import CompactionConfig
from harness.filesystem import SandboxFilesystem
from harness.kernel import Event, Hook
from harness.kernel import events as kernel_events
from harness.models import ScriptedChatModel
from harness.workspace import WorkspaceManager

ARCHITECTURE = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"


class Yours(Hook):
    """An application's hook, at the default priority, for every event."""


def event_types() -> list[type[Event]]:
    return [
        value
        for value in vars(kernel_events).values()
        if isinstance(value, type) and issubclass(value, Event) and value is not Event
    ]


async def test_every_event_runs_its_hooks_in_the_order_of_the_table(tmp_path: Path) -> None:
    backend = SandboxFilesystem(tmp_path / "ws")
    agent = HarnessAgent(
        model=ScriptedChatModel([]),
        workspace=WorkspaceManager(tmp_path / "ws", backend),
        compaction=CompactionConfig(context_window=32_000),
        approvals=["deploy"],
        hooks=[Yours()],
    )
    try:
        ran = {
            event.__name__: tuple(
                USER_HOOKS if isinstance(hook, Yours) else type(hook).__name__
                for hook in agent.delegate.hooks.for_event(event)
            )
            for event in event_types()
        }
    finally:
        await agent.aclose()

    assert ran == dict(HOOK_ORDER)


def test_the_architecture_page_shows_the_table() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text.split("## Hook order, event by event", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \| (.+) \|$", section, flags=re.MULTILINE)
    shown = {event: tuple(h.strip().strip("`") for h in hooks.split("→")) for event, hooks in rows}

    assert shown == dict(HOOK_ORDER)


@pytest.mark.parametrize("event", sorted(HOOK_ORDER))
def test_the_trace_sees_every_event_first(event: str) -> None:
    assert HOOK_ORDER[event][0] == "AgentTraceHook"
