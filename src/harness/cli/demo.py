"""The offline tour: a scripted session against a throw-away workspace.

No model can be reached offline, so the tour drives a real :class:`HarnessAgent` with the
:class:`ScriptedChatModel`. The script and every file the agent writes stay in the workspace for
the user to inspect. Later capabilities add steps here.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import tempfile
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any, Final

from rich.panel import Panel
from rich.text import Text

from harness.agent import HarnessAgent, default_workspace
from harness.approvals import ApprovalRule
from harness.cli._common import checked_workspace, replied
from harness.cli._output import PLAIN, out
from harness.cli.trace import timeline_table, totals_line
from harness.compaction import CompactionConfig, ToolResultEvictionConfig
from harness.context import RuntimeContext
from harness.errors import ConfigError
from harness.filesystem import SandboxFilesystem
from harness.kernel import Msg, TextBlock
from harness.memory import MemoryConfig, Provenance
from harness.memory.index import index_file
from harness.memory.render import SUMMARY_NAME
from harness.models import ScriptedChatModel
from harness.observability import read_trace, summarize
from harness.tools import MemoryTools
from harness.workspace import WorkspaceManager, init_workspace

__all__ = ["DEMO_SCRIPT", "run_demo"]

AGENTS = """\
# Tour guide

You are the Harness tour guide. Answer in one or two sentences.
"""

MEMORY = """\
# Memory

- The user's name is Ada; she prefers metric units.
"""

DEMO_SCRIPT: Final[dict[str, Any]] = json.loads(
    resources.files("harness.cli").joinpath("demo_script.json").read_text(encoding="utf-8")
)
"""The tour's script: the agent's answers (a tool call, the restored session, a delegation),
the subagent's, and the memory model's (a flush that keeps a fact, one that finds nothing new,
a consolidation). Package data, ``harness/cli/demo_script.json``; its turns are tried in order,
so the background step's comes before the one matching "42" (its requests carry random ids,
which may contain a "42")."""

RELEASE_NOTES_SKILL = """\
---
name: release-notes
description: Writes release notes in the team's template.
---
Load `template.md` of this skill with read_file and fill in its sections, one bullet per change.
"""

RELEASE_NOTES_TEMPLATE = """\
## Highlights
- ...

## Fixes
- ...
"""

LOG_ANALYST = """\
---
name: log-analyst
description: Reads the server log and reports its errors.
tools: [read_server_log]
max_iters: 4
---
You read logs and report only the errors, with their times.
"""


def convert_miles(miles: float) -> str:
    """Convert miles to kilometres.

    Args:
        miles: The distance in miles.
    """
    return f"{miles * 1.609344:.1f} km"


async def run_demo(workspace: Path | None) -> Path:
    """Run the tour in ``workspace`` (a new temporary directory when None); returns it."""
    if workspace is None:
        # A workspace inside a fresh directory, so the search index beside it (in the
        # workspace's parent) is the tour's own too.
        workspace = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="harness-demo-"))
        workspace = workspace / "workspace"
    # A given path is checked as every command checks its workspace: a file, a name too long
    # or one that is not UTF-8 is one line and exit code 2, not a traceback from _prepare.
    root = (await asyncio.to_thread(checked_workspace, workspace)).root
    await asyncio.to_thread(_refuse_a_used, root)
    await asyncio.to_thread(_prepare, root)
    # The operator vouches for the memory it seeded, as `harness memory adopt` does.
    await Provenance.for_workspace(WorkspaceManager(root)).adopt("ada", "MEMORY.md", MEMORY)
    script = root / "demo-script.json"
    ctx = RuntimeContext(session_id="tour", user_id="ada")

    out.rule("Harness offline tour")
    out.print(
        f"Workspace: {root}\nModel: scripted ({script.name}), no network needed.\n",
        highlight=False,
        markup=False,
        soft_wrap=True,  # a long path stays on one line, whole
    )

    memory = MemoryConfig(auto_consolidate=False)  # the tour consolidates in its own step
    model = ScriptedChatModel.from_file(script)
    first = HarnessAgent(
        name="guide", model=model, workspace=root, tools=[convert_miles], memory=memory
    )
    question = "I run my first marathon in Lisbon in May. How far is a marathon?"
    reply = replied(await first.call(question, ctx=ctx))
    await first.aclose()
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
        "the tool's result went back to it and it answered.",
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
    second = HarnessAgent(
        name="guide", model=model, workspace=root, tools=[convert_miles], memory=memory
    )
    follow_up = "What did I ask you before?"
    reply = replied(await second.call(follow_up, ctx=ctx))
    restored = len(model.requests[0]) - 2  # minus the system message and the new question
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

    daily = f"users/ada/memory/{datetime.now().astimezone().date().isoformat()}.md"
    log = await asyncio.to_thread((root / daily).read_text, encoding="utf-8")
    out.print(Panel(Text(log.strip()), title=f"3. Memory flushed after each call: {daily}"))
    out.print(
        "  After each call the memory model extracted new facts into the user's daily log "
        "(the second call had nothing new: NO_REPLY).\n",
        highlight=False,
    )

    maintenance = second.maintenance
    assert maintenance is not None
    assert maintenance.consolidator is not None
    await maintenance.consolidator.consolidate("ada")
    await maintenance.index_file_for("ada")
    consolidated = await asyncio.to_thread(
        (root / "users/ada/MEMORY.md").read_text, encoding="utf-8"
    )
    out.print(Panel(Text(consolidated.strip()), title="4. Consolidated into users/ada/MEMORY.md"))

    query = "when is the Lisbon marathon"
    found = await MemoryTools(second.workspace, maintenance).memory_search(query, ctx)
    out.print(Panel(Text(found), title=f"5. memory_search({query!r}), as the agent sees it"))
    await second.aclose()
    await _long_session(root, script, ctx)
    await _delegation(root, script)
    await _skill(root, script)
    await _trace(root)
    await _sandbox(root, script)
    await _approval(root, script)

    # Plain lines rather than a table: a path must stay whole, to be copied, at any width.
    out.rule("12. Files in the workspace")
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.name.endswith(".lock")):
        size = path.stat().st_size
        out.print(f"{size:>9,}  {path.relative_to(root).as_posix()}", **PLAIN)
    index = await asyncio.to_thread(index_file, root)
    out.print(
        f"\nThe search index is {index} (a cache: delete it and "
        f"{command_line(root, 'memory index')} rebuilds it).\nLook around: {root}\n"
        "Next, a workspace of your own: `harness init`, then "
        "`harness chat --model openai:<model>` (see the README for a local OpenAI-compatible "
        "server).",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )
    return root


def command_line(root: Path, command: str) -> str:
    """``harness COMMAND`` in backticks, as the tour prints a command to try on its workspace.

    With ``--workspace`` (quoted for the shell) unless the tour's workspace is the one every
    command uses by default: copied without it, a command would silently create and read
    ``./.harness/workspace`` instead of the tour's.
    """
    default = default_workspace().expanduser().absolute()
    where = "" if root.absolute() == default else f" --workspace {shlex.quote(str(root))}"
    return f"`harness {command}{where}`"


def read_server_log() -> str:
    """Read today's server log."""
    lines = [
        f"12:{i // 60:02d}:{i % 60:02d} INFO request served in {20 + i % 7} ms" for i in range(400)
    ]
    lines[123] = "12:02:03 ERROR upstream timeout after 30000 ms"
    return "\n".join(lines)


def _log_guide(root: Path, script: Path, **options: Any) -> HarnessAgent:
    """The tour's agent with the server-log tool, as steps 6 and 7 build it (fresh each time)."""
    return HarnessAgent(
        name="guide",
        model=ScriptedChatModel.from_file(script),
        workspace=root,
        tools=[convert_miles, read_server_log],
        memory=MemoryConfig(auto_consolidate=False),
        **options,
    )


async def _long_session(root: Path, script: Path, ctx: RuntimeContext) -> None:
    """Step 6: a huge tool result is evicted to a file, and the grown session is compacted."""
    agent = _log_guide(
        root,
        script,
        # Small limits, so a short tour shows what a long session does.
        tool_result_eviction=ToolResultEvictionConfig(max_result_chars=2_000, preview_chars=120),
        compaction=CompactionConfig(trigger_messages=8, trigger_tokens=0, keep_messages=4),
    )
    question = "Check the server log, please."
    reply = replied(await agent.call(question, ctx=ctx))
    await agent.aclose()
    saved = await agent.sessions.load(ctx)
    placeholder = next(r.text for m in saved for r in m.tool_results)
    records = await agent.compactions.read("tour", "ada")
    summary = saved[0].text if saved and saved[0].name == SUMMARY_NAME else "(none)"
    body = Text()
    body.append(f"you: {question}\nguide: {reply.text}\n\n", style="bold")
    size = len(read_server_log())
    body.append(f"The tool's {size:,}-character result, as the session keeps it:\n")
    body.append(placeholder[:400] + "\n...\n\n", style="dim")
    body.append(
        f"Compacted: {records[-1]['messages_before']} messages -> "
        f"{records[-1]['messages_after']}; the summary that replaced the start:\n"
        if records
        else "No compaction happened.\n"
    )
    body.append(summary[:600], style="dim")
    out.print(Panel(body, title="6. A long session: eviction and compaction"))
    out.print(
        "  The full result is a file under large_tool_results/; the whole conversation is in "
        f"the transcript; {command_line(root, 'sessions show tour --user ada --agent guide')} "
        "lists the compaction.\n",
        **PLAIN,  # a command stays whole, to be copied, at any width
    )


async def _delegation(root: Path, script: Path) -> None:
    """Step 7: a declared subagent works in the background; its result reaches the agent."""
    ctx = RuntimeContext(session_id="delegation", user_id="ada")
    agent = _log_guide(root, script)
    assert agent.tasks is not None
    ask = "Have the log analyst check today's log in the background."
    first = replied(await agent.call(ask, ctx=ctx))
    (task,) = await agent.tasks.records("ada", session_id="delegation")
    task = await agent.tasks.wait(task, 10)
    later = "Any news?"
    second = replied(await agent.call(later, ctx=ctx))
    await agent.aclose()
    # A later process: a new agent continues the same child, found in the session's registry.
    restarted = _log_guide(root, script)
    follow_up = "Ask the log analyst what to check first."
    third = replied(await restarted.call(follow_up, ctx=ctx))
    await restarted.aclose()
    saved = await agent.sessions.load(ctx)
    notice = next(m.text for m in saved if m.metadata.get("reminder") == "task_delivery")
    body = Text()
    body.append(f"you: {ask}\nguide: {first.text}\n", style="bold")
    body.append(
        f"\nTask {task.task_id} ({task.agent_id}): {task.describe_status}; the result is in "
        f"users/ada/{agent.tasks.result_path(task.task_id)}.\n"
        "At the next step the agent was told, once:\n"
    )
    body.append(notice + "\n\n", style="dim")
    body.append(f"you: {later}\nguide: {second.text}", style="bold")
    body.append("\n\nA new agent (as after a restart), same session:\n")
    body.append(f"you: {follow_up}\nguide: {third.text}", style="bold")
    out.print(Panel(body, title="7. A subagent in the background"))
    out.print(
        "  The subagent is declared in subagents/log-analyst.md; "
        f"{command_line(root, 'tasks list --user ada --agent guide')} lists its task. The new "
        "agent found the child in users/ada/agents/guide/children/delegation.json and "
        "continued its conversation with agent_send.\n",
        **PLAIN,
    )


async def _skill(root: Path, script: Path) -> None:
    """Step 8: the prompt lists a skill; the agent loads it and reads its resource."""
    ctx = RuntimeContext(session_id="skills", user_id="ada")
    model = ScriptedChatModel.from_file(script)
    agent = HarnessAgent(name="guide", model=model, workspace=root, memory=None, subagents=None)
    ask = "Write the release notes, please."
    reply = replied(await agent.call(ask, ctx=ctx))
    await agent.aclose()
    saved = await agent.sessions.load(ctx)
    calls = [f"{b.name}({json.dumps(b.input)})" for m in saved for b in m.tool_uses]
    body = Text()
    body.append(f"you: {ask}\n", style="bold")
    body.append(f"The prompt listed: {_skills_line(model.requests[0])}\n")
    body.append("The agent called: " + ", then ".join(calls) + "\n\n")
    body.append(f"guide: {reply.text}", style="bold")
    out.print(Panel(body, title="8. A skill, loaded when needed"))
    out.print(
        "  Only the skill's name and description are in every prompt; its instructions and "
        "files are read when the agent decides to use it (skills/release-notes/).\n",
        highlight=False,
    )


async def _trace(root: Path) -> None:
    """Step 9: every call left a trace; here is the skill call's, as `harness trace` shows it."""
    where, records = await read_trace(WorkspaceManager(root), "guide", "skills", "ada")
    assert records is not None
    (call,) = summarize(records)
    out.rule("9. The trace of a call")
    out.print(timeline_table(call.call_id, records))
    out.print(f"totals: {totals_line(call)}", **PLAIN)
    out.print(
        f"  Every session has one ({where}); "
        f"{command_line(root, 'trace skills --user ada --agent guide')} shows it, `--json` for "
        "scripts.\n",
        **PLAIN,
    )


async def _sandbox(root: Path, script: Path) -> None:
    """Step 10: the same workspace on the sandbox backend; the agent runs a shell command."""
    ctx = RuntimeContext(session_id="sandbox", user_id="ada")
    sandbox = SandboxFilesystem(root)
    agent = HarnessAgent(
        name="guide",
        model=ScriptedChatModel.from_file(script),
        workspace=root,
        filesystem=sandbox,
        memory=None,
        subagents=None,
    )
    ask = "Run a command in the sandbox."
    reply = replied(await agent.call(ask, ctx=ctx))
    await agent.aclose()
    saved = await agent.sessions.load(ctx)
    result = next(r.text for m in saved for r in m.tool_results)
    problem = await sandbox.check()
    body = Text()
    body.append(f"you: {ask}\n", style="bold")
    body.append(f"execute -> {result}\n\n", style="dim")
    body.append(f"guide: {reply.text}", style="bold")
    out.print(Panel(body, title="10. The same agent in a bubblewrap sandbox"))
    out.print(
        "  Only ada's namespace is writable (mounted at /workspace); the system is read-only, "
        "there is no network and no host home."
        if problem is None
        else f"  The sandbox does not work on this machine: {problem}",
        highlight=False,
        soft_wrap=True,
    )
    out.print()


async def _approval(root: Path, script: Path) -> None:
    """Step 11: a gated tool waits for a person; another process approves it; it runs once."""
    ctx = RuntimeContext(session_id="approval", user_id="ada")
    published: list[str] = []

    async def publish_changelog(channel: str) -> str:
        """Post the changelog to a channel.

        Args:
            channel: Where to post it.
        """
        published.append(channel)
        return f"Published to {channel}."

    def agent() -> HarnessAgent:
        return HarnessAgent(
            name="guide",
            model=ScriptedChatModel.from_file(script),
            workspace=root,
            tools=[publish_changelog],
            approvals={"publish_changelog": ApprovalRule(description="Posts to a public channel")},
            memory=None,
            subagents=None,
        )

    ask = "Publish the changelog, please."
    first = agent()
    try:
        pending = (await first.call(ask, ctx=ctx)).pending
    finally:
        await first.aclose()
    (request,) = pending
    later = agent()  # as another process would: the session and the ledger carry the pause
    reply = replied(await later.resume({request["id"]: "approve"}, ctx=ctx, by="the tour"))
    await later.aclose()
    body = Text()
    body.append(f"you: {ask}\n", style="bold")
    body.append(
        f"The call waited before it ran: {request['tool']}({json.dumps(request['arguments'])}), "
        f"{request['description']!r}, approval {request['id']}.\n"
        f"A new agent approved it; the tool ran {len(published)} time(s).\n\n"
    )
    body.append(f"guide: {reply.text}", style="bold")
    out.print(Panel(body, title="11. A tool call that waits for approval"))
    out.print(
        "  The pause is kept in the session and in the approval ledger beside the workspace "
        f"({root.parent.name}/.{root.name}.approvals/), out of the agent's reach. This "
        "session's approvals: "
        f"{command_line(root, 'approvals list --session approval --user ada --agent guide')}. "
        f"From the command line: {command_line(root, 'run --approval TOOL PROMPT')}, then "
        f"{command_line(root, 'approvals list')} and {command_line(root, 'approvals approve ID')} "
        "(docs/approvals.md).\n",
        **PLAIN,
    )


def _skills_line(request: list[Msg]) -> str:
    """The skill's line in the system message of ``request`` (each hook adds its own block)."""
    blocks = request[0].content if request and request[0].role == "system" else []
    lines = [line for b in blocks if isinstance(b, TextBlock) for line in b.text.splitlines()]
    return next((line for line in lines if "`release-notes`" in line), "(none)")


def _refuse_a_used(root: Path) -> None:
    """Refuse a workspace that already holds files: the tour writes its own over them.

    Its AGENTS.md, memory and subagent would replace a workspace's own, and its scripted model
    answers only a tour that starts afresh (a second tour in one directory met the first one's
    sessions and stopped with the script exhausted).

    Raises:
        ConfigError: ``root`` is not empty.
    """
    if any(root.iterdir()):
        msg = (
            f"the workspace {root} already holds files (an earlier tour's, or a workspace of "
            "yours), and the tour would write its own AGENTS.md and memory over them: pass a "
            "new or empty directory with --workspace, or none for a temporary one"
        )
        raise ConfigError(msg)


def _prepare(root: Path) -> None:
    init_workspace(root)
    (root / "AGENTS.md").write_text(AGENTS, encoding="utf-8")
    # Ada's own memory: a user sees her namespace's MEMORY.md, never the shared one.
    (root / "users/ada").mkdir(parents=True, exist_ok=True)
    (root / "users/ada/MEMORY.md").write_text(MEMORY, encoding="utf-8")
    (root / "subagents").mkdir(exist_ok=True)
    (root / "subagents/log-analyst.md").write_text(LOG_ANALYST, encoding="utf-8")
    (root / "skills/release-notes").mkdir(parents=True, exist_ok=True)
    (root / "skills/release-notes/SKILL.md").write_text(RELEASE_NOTES_SKILL, encoding="utf-8")
    (root / "skills/release-notes/template.md").write_text(RELEASE_NOTES_TEMPLATE, encoding="utf-8")
    (root / "demo-script.json").write_text(
        json.dumps(DEMO_SCRIPT, indent=2) + "\n", encoding="utf-8"
    )
    (root / "demo-requests.jsonl").unlink(missing_ok=True)
