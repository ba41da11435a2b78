from __future__ import annotations

from pathlib import Path

from harness.context import RuntimeContext
from harness.kernel import Msg
from harness.memory import SUMMARY_NAME, TranscriptWriter
from harness.tools import SessionTools
from harness.workspace import WorkspaceManager

ANN = RuntimeContext(session_id="trip", user_id="ann")


async def seed(workspace: Path) -> SessionTools:
    ws = WorkspaceManager(workspace)
    writer = TranscriptWriter(ws, "bot")
    await writer.offload(
        ANN,
        [
            Msg(id="a1", role="user", content="Plan the Lisbon trip for May"),
            Msg(id="a2", role="assistant", content="Booked the Lisbon hotel for May 3."),
            Msg(id="a3", role="user", name=SUMMARY_NAME, content="summary mentions Lisbon hotel"),
        ],
    )
    await writer.offload(
        RuntimeContext(session_id="work", user_id="ann"),
        [Msg(id="b1", role="user", content="Draft the quarterly report")],
    )
    await writer.offload(
        RuntimeContext(session_id="trip", user_id="bob"),
        [Msg(id="c1", role="user", content="Bob's Lisbon hotel secret")],
    )
    return SessionTools(ws, "bot")


async def test_search_needs_every_word_and_skips_summaries_and_other_users(
    workspace: Path,
) -> None:
    tools = await seed(workspace)
    out = await tools.session_search("lisbon HOTEL", ANN)
    assert out == (
        'Found 1 matches for "lisbon HOTEL":\n'
        "  [trip] a2 — [ASSISTANT]: Booked the Lisbon hotel for May 3."
    )
    assert await tools.session_search("nothing like this", ANN) == (
        "No matches found for: nothing like this"
    )
    assert await tools.session_search("  ", ANN) == "No query provided"


async def test_list_and_history(workspace: Path) -> None:
    tools = await seed(workspace)
    listing = await tools.session_list(ANN)
    assert listing.startswith("2 sessions:\n")
    assert "- trip: Plan the Lisbon trip for May (3 messages, updated " in listing
    assert "- work: Draft the quarterly report (1 messages, updated " in listing
    history = await tools.session_history("trip", ANN, last_n=1)
    assert history == (
        "Session trip (2 total messages, showing last 1):\n"
        "[ASSISTANT]: Booked the Lisbon hotel for May 3."
    )
    assert await tools.session_history("nope", ANN) == "Session not found: nope"
    assert await tools.session_list(RuntimeContext(user_id="carol")) == "No sessions found"
