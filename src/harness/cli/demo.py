"""The offline tour: a scripted session against a throw-away workspace.

No model can be reached offline, so the tour drives a real :class:`HarnessAgent` with the
:class:`ScriptedChatModel`. The script and every file the agent writes stay in the workspace for
the user to inspect. Later capabilities add steps here.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

from rich.panel import Panel
from rich.table import Table

from harness.agent import HarnessAgent
from harness.cli._output import out
from harness.context import RuntimeContext
from harness.models import ScriptedChatModel
from harness.workspace import init_workspace

__all__ = ["DEMO_SCRIPT", "run_demo"]

AGENTS = """\
# Tour guide

You are the Harness tour guide. Answer in one or two sentences.
"""

MEMORY = """\
# Memory

- The user's name is Ada; she prefers metric units.
"""

DEMO_SCRIPT = {
    "log": "demo-requests.jsonl",
    "turns": [
        {
            "match": "(?i)how far",
            "tool_calls": [{"name": "convert_miles", "input": {"miles": 26.2}}],
        },
        {"match": "42", "text": "A marathon is about 42.2 km, Ada."},
        {"match": "(?i)what did i ask", "text": "You asked how far a marathon is: 42.2 km."},
    ],
}
"""The tour's script: a tool call, its answer, and an answer that needs the restored session."""


def convert_miles(miles: float) -> str:
    """Convert miles to kilometres.

    Args:
        miles: The distance in miles.
    """
    return f"{miles * 1.609344:.1f} km"


async def run_demo(workspace: Path | None) -> Path:
    """Run the tour in ``workspace`` (a new temporary directory when None); returns it."""
    root = workspace or Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="harness-demo-"))
    await asyncio.to_thread(_prepare, root)
    script = root / "demo-script.json"
    ctx = RuntimeContext(session_id="tour", user_id="ada")

    out.rule("Harness offline tour")
    out.print(
        f"Workspace: {root}\nModel: scripted ({script.name}), no network needed.\n",
        highlight=False,
        markup=False,
        soft_wrap=True,  # a long path stays on one line, whole
    )

    model = ScriptedChatModel.from_file(script)
    first = HarnessAgent(name="guide", model=model, workspace=root, tools=[convert_miles])
    question = "How far is a marathon?"
    reply = await first.call(question, ctx=ctx)
    request = model.requests[0]
    system = request[0].text if request and request[0].role == "system" else ""
    out.print(
        Panel(
            f"[bold]you:[/bold] {question}\n[bold]guide:[/bold] {reply.text}",
            title="1. A call with a tool",
        )
    )
    tool_calls = [block for m in await first.sessions.load(ctx) for block in m.tool_uses]
    out.print(
        f"  The model called {tool_calls[0].name}({json.dumps(tool_calls[0].input)}); "
        "the tool's result "
        "went back to it and it answered.",
        highlight=False,
    )
    out.print(
        "  Workspace context in the system prompt: "
        f"AGENTS.md {'yes' if 'Tour guide' in system else 'no'}, "
        f"MEMORY.md {'yes' if 'Ada' in system else 'no'}, "
        f"session id {'yes' if 'Session ID: tour' in system else 'no'}.\n",
        highlight=False,
    )

    # A second agent and model stand for a new process: nothing is shared but the workspace.
    model = ScriptedChatModel.from_file(script)
    second = HarnessAgent(name="guide", model=model, workspace=root, tools=[convert_miles])
    follow_up = "What did I ask you before?"
    reply = await second.call(follow_up, ctx=ctx)
    restored = len(model.requests[-1]) - 2  # minus the system message and the new question
    out.print(
        Panel(
            f"[bold]you:[/bold] {follow_up}\n[bold]guide:[/bold] {reply.text}",
            title="2. The session, restored",
        )
    )
    out.print(
        f"  A fresh agent restored {restored} earlier messages of session 'tour' from disk.\n",
        highlight=False,
    )

    table = Table(title="3. Files in the workspace", show_lines=False)
    table.add_column("path")
    table.add_column("bytes", justify="right")
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.name != ".lock"):
        table.add_row(path.relative_to(root).as_posix(), str(path.stat().st_size))
    out.print(table)
    out.print(
        f"\nLook around: {root}\nNext: `harness init`, then `harness chat --model openai:<model>` "
        "(see the README for a local OpenAI-compatible server).",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )
    return root


def _prepare(root: Path) -> None:
    init_workspace(root)
    (root / "AGENTS.md").write_text(AGENTS, encoding="utf-8")
    (root / "MEMORY.md").write_text(MEMORY, encoding="utf-8")
    (root / "demo-script.json").write_text(
        json.dumps(DEMO_SCRIPT, indent=2) + "\n", encoding="utf-8"
    )
    (root / "demo-requests.jsonl").unlink(missing_ok=True)
