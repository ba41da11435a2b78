from __future__ import annotations

import asyncio
import os
import re
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from _outcomes import answer
from harness import HarnessAgent, RuntimeContext
from harness.hooks import WorkspaceContextConfig, WorkspaceContextHook
from harness.kernel import CACHE_KEY, CACHE_PREFIX_BLOCKS, Msg, PreReasoning, TextBlock, ToolSchema
from harness.memory import MemoryConfig
from harness.models import ScriptedChatModel
from harness.sections import inject_section
from harness.workspace import WorkspaceManager


def event(
    ctx: RuntimeContext | None = None,
    tools: Sequence[str] = (),
    messages: list[Msg] | None = None,
) -> PreReasoning:
    return PreReasoning(
        ctx=ctx or RuntimeContext(session_id="s1"),
        agent="bot",
        memory=[],
        call_id="c1",
        step=0,
        messages=messages if messages is not None else [Msg(role="user", content="hi")],
        tools=[ToolSchema(name=name, description="") for name in tools],
    )


def hook(workspace: Path, **config: object) -> WorkspaceContextHook:
    return WorkspaceContextHook(
        WorkspaceManager(workspace),
        agent_name="bot",
        config=WorkspaceContextConfig(**config),  # type: ignore[arg-type]
    )


async def blocks_of(workspace: Path, ev: PreReasoning | None = None, **config: object) -> list[str]:
    """The blocks the hook adds to a request without a system message of its own."""
    ev = ev or event()
    await hook(workspace, **config).on_event(ev)
    system = ev.messages[0]
    assert system.role == "system"
    return [block.text for block in system.content]  # type: ignore[union-attr]


async def section_of(workspace: Path, ev: PreReasoning | None = None, **config: object) -> str:
    return "\n\n".join(await blocks_of(workspace, ev, **config))


def today() -> str:
    now = time.localtime()
    return f"{time.strftime('%A %b', now)} {now.tm_mday}, {now.tm_year}"


async def test_the_section_goes_from_shared_to_user_to_session(workspace: Path) -> None:
    (workspace / "AGENTS.md").write_text("Be kind.")
    (workspace / "users" / "ann").mkdir(parents=True)
    (workspace / "users" / "ann" / "MEMORY.md").write_text("- likes tea")
    shared, user, session = await blocks_of(
        workspace,
        event(RuntimeContext(session_id="s9", user_id="ann")),
        environment="Deployment: test",
    )
    assert shared.startswith("## Agent Context\nThis is the bot agent, working in the workspace ")
    assert "Deployment: test" in shared
    assert shared.endswith("<agents_context>\n    Be kind.\n  </agents_context>")
    assert "s9" not in shared
    assert "ann" not in shared
    assert today() not in shared
    assert user.startswith(
        "## User Context\nUser ID: ann\n  <memory_context>\n    [unknown] - likes tea"
    )
    assert session == f"## Session Context\nSession ID: s9\nToday is {today()}."


async def test_two_users_share_the_first_block_and_the_adapters_are_told_so(
    workspace: Path,
) -> None:
    context = hook(workspace)
    base = Msg(role="system", content="BASE")
    requests = []
    for user in ("ann", "bob"):
        ev = event(RuntimeContext(session_id=f"s-{user}", user_id=user), messages=[base])
        await context.on_event(ev)
        requests.append(ev.messages[0])
    ann, bob = requests
    assert ann.content[:2] == bob.content[:2]
    assert ann.content[2:] != bob.content[2:]
    assert ann.metadata[CACHE_PREFIX_BLOCKS] == bob.metadata[CACHE_PREFIX_BLOCKS] == 2
    assert ann.metadata[CACHE_KEY] != bob.metadata[CACHE_KEY]
    assert "ann" not in ann.metadata[CACHE_KEY]


async def test_the_legacy_layout_is_one_block_opening_with_the_session(workspace: Path) -> None:
    blocks = await blocks_of(
        workspace,
        event(RuntimeContext(session_id="s9", user_id="ann")),
        environment="Deployment: test",
        layout="legacy",
    )
    (text,) = blocks
    assert text.startswith("## Session Context\nThis is the bot agent, working in the workspace ")
    assert f"Today is {today()}." in text
    assert "Session ID: s9\nUser ID: ann\nDeployment: test" in text


async def test_files_are_injected_in_loaded_context(workspace: Path) -> None:
    (workspace / "AGENTS.md").write_text("# Persona\n<!-- not for the model -->\nBe kind.\n")
    (workspace / "MEMORY.md").write_text("- likes tea\n")
    (workspace / "knowledge" / "deep").mkdir(parents=True)
    (workspace / "knowledge" / "KNOWLEDGE.md").write_text("Glossary here.")
    (workspace / "knowledge" / "deep" / "faq.md").write_text("q")
    (workspace / "SOUL.md").write_text("Soul line")
    text = await section_of(workspace, context_files=("SOUL.md", "missing.md"), layout="legacy")
    loaded = text[text.rindex("<loaded_context>") :]
    assert loaded == (
        "<loaded_context>\n"
        "  <agents_context>\n    # Persona\n\n    Be kind.\n  </agents_context>\n"
        "  <memory_context>\n    [unknown] - likes tea\n  </memory_context>\n"
        "  <domain_knowledge_context>\n    Glossary here.\n\n    Knowledge files:\n"
        "    - knowledge/deep/faq.md\n  </domain_knowledge_context>\n"
        "  <soul_md>\n    Soul line\n  </soul_md>\n"
        "</loaded_context>"
    )
    assert "not for the model" not in text


async def test_files_are_injected_as_elements_of_their_blocks(workspace: Path) -> None:
    (workspace / "AGENTS.md").write_text("# Persona\n<!-- not for the model -->\nBe kind.\n")
    (workspace / "MEMORY.md").write_text("- likes tea\n")
    (workspace / "knowledge" / "deep").mkdir(parents=True)
    (workspace / "knowledge" / "KNOWLEDGE.md").write_text("Glossary here.")
    (workspace / "knowledge" / "deep" / "faq.md").write_text("q")
    (workspace / "SOUL.md").write_text("Soul line")
    shared, user, _ = await blocks_of(workspace, context_files=("SOUL.md", "missing.md"))
    assert shared.endswith("  <agents_context>\n    # Persona\n\n    Be kind.\n  </agents_context>")
    assert user == (
        "## User Context\n"
        "  <memory_context>\n    [unknown] - likes tea\n  </memory_context>\n"
        "  <domain_knowledge_context>\n    Glossary here.\n\n    Knowledge files:\n"
        "    - knowledge/deep/faq.md\n  </domain_knowledge_context>\n"
        "  <soul_md>\n    Soul line\n  </soul_md>"
    )
    assert "not for the model" not in shared


async def test_empty_workspace_renders_empty_elements(workspace: Path) -> None:
    shared, user, _ = await blocks_of(workspace)
    assert shared.endswith("  <agents_context></agents_context>")
    assert "  <memory_context></memory_context>" in user
    (legacy,) = await blocks_of(workspace, layout="legacy")
    assert "  <agents_context></agents_context>\n  <memory_context></memory_context>" in legacy


async def test_appended_as_new_block_of_first_system_message(workspace: Path) -> None:
    system = Msg(role="system", content="BASE")
    ev = event(messages=[system, Msg(role="user", content="hi")])
    await hook(workspace).on_event(ev)
    first = ev.messages[0]
    assert first.id == system.id
    assert first.content[0] == TextBlock(text="BASE")
    assert len(first.content) == 4
    assert system.content == [TextBlock(text="BASE")]  # the original is not mutated
    assert system.metadata == {}


def test_inserts_a_system_message_when_there_is_none() -> None:
    messages = inject_section([Msg(role="user", content="hi")], "SECTION")
    assert [(m.role, m.name, m.text) for m in messages] == [
        ("system", "workspace_context", "SECTION"),
        ("user", None, "hi"),
    ]


async def test_memory_is_cut_to_budget_with_a_notice(workspace: Path) -> None:
    lines = [f"- fact number {i:04d}" for i in range(2000)]
    (workspace / "MEMORY.md").write_text("\n".join(lines))
    text = await section_of(workspace, event(tools=["memory_search"]), max_context_tokens=2000)
    memory = text[text.index("<memory_context>") : text.index("</memory_context>")]
    assert "- fact number 0000" in memory
    assert "- fact number 1999" not in memory
    notice = re.search(
        r"\.\.\. \(memory truncated: showing (\d+) of (\d+) lines of MEMORY\.md: "
        r"use memory_search for the rest\) \.\.\.",
        memory,
    )
    assert notice is not None
    assert int(notice.group(2)) == len(lines)
    # the whole section stays within the budget, give or take the notice and tags
    assert len(text) // 4 <= 2000
    # only whole lines are kept, each behind its label
    shown = [line.strip() for line in memory.splitlines()[1:] if "fact number" in line]
    assert all(re.fullmatch(r"\[unknown\] - fact number \d{4}", line) for line in shown)
    assert int(notice.group(1)) == len(shown)


async def test_notice_without_search_tool_does_not_advertise_it(workspace: Path) -> None:
    (workspace / "MEMORY.md").write_text("x" * 100 + "\n" + "y" * 50000)
    text = await section_of(workspace, max_context_tokens=1000)
    assert "memory truncated" in text
    assert "memory_search" not in text


async def test_memory_under_budget_is_whole(workspace: Path) -> None:
    (workspace / "MEMORY.md").write_text("- short")
    text = await section_of(workspace, max_context_tokens=1000)
    assert "memory truncated" not in text


async def test_guidance_follows_available_tools(workspace: Path) -> None:
    bare = await section_of(workspace)
    assert "## Domain Knowledge" in bare
    assert "## Memory Recall" not in bare
    assert "## Memory Persistence" not in bare
    full = await section_of(
        workspace, event(tools=["memory_search", "memory_get", "edit_file", "read_file"])
    )
    assert "## Memory Recall" in full
    assert "memory_get" in full
    assert "## Memory Persistence" in full
    assert "open the ones you need with read_file." in full


async def test_user_files_override_shared(workspace: Path) -> None:
    (workspace / "AGENTS.md").write_text("shared persona")
    (workspace / "users" / "ann").mkdir(parents=True)
    (workspace / "users" / "ann" / "MEMORY.md").write_text("ann's memory")
    (workspace / "MEMORY.md").write_text("shared memory")
    text = await section_of(workspace, event(RuntimeContext(session_id="s", user_id="ann")))
    assert "shared persona" in text
    assert "ann's memory" in text
    assert "shared memory" not in text


def test_config_rejects_bad_budget() -> None:
    with pytest.raises(ValueError, match="max_context_tokens"):
        WorkspaceContextConfig(max_context_tokens=0)


async def test_writes_through_the_manager_are_seen_at_the_next_step(workspace: Path) -> None:
    (workspace / "AGENTS.md").write_text("version one")
    agent: HarnessAgent

    async def rewrite_persona() -> str:
        """Rewrite AGENTS.md."""
        await agent.workspace.write_text("AGENTS.md", "version two, longer")
        return "done"

    model = ScriptedChatModel(
        [{"tool_calls": [{"name": "rewrite_persona", "input": {}}]}, {"text": "ok"}]
    )
    agent = HarnessAgent(
        memory=None, model=model, workspace=workspace, sys_prompt="BASE", tools=[rewrite_persona]
    )
    answer(await agent.call("go", ctx=RuntimeContext(session_id="s")))
    first, second = (request[0].text for request in model.requests)
    assert "version one" in first
    assert "version two, longer" in second
    saved = await agent.sessions.load(RuntimeContext(session_id="s"))
    assert all(m.role != "system" for m in saved)
    assert all("loaded_context" not in m.text for m in saved)


async def test_outside_edits_are_seen_once_the_snapshot_expires(workspace: Path) -> None:
    (workspace / "AGENTS.md").write_text("before")
    context = hook(workspace, refresh_seconds=0.05)
    ev = event()
    await context.on_event(ev)
    (workspace / "AGENTS.md").write_text("after the edit")
    cached = event()
    await context.on_event(cached)
    assert "before" in cached.messages[0].text
    await asyncio.sleep(0.06)
    fresh = event()
    await context.on_event(fresh)
    assert "after the edit" in fresh.messages[0].text


async def test_refresh_zero_checks_every_step(workspace: Path) -> None:
    (workspace / "MEMORY.md").write_text("- one")
    context = hook(workspace, refresh_seconds=0, memory_refresh="step")
    for text in ("- one", "- two two"):
        (workspace / "MEMORY.md").write_text(text)
        ev = event()
        await context.on_event(ev)
        assert text in ev.messages[0].text


async def test_unchanged_files_are_not_read_again(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workspace / "AGENTS.md").write_text("persona")
    context = hook(workspace)
    backend = context.workspace.backend
    reads: list[str] = []
    original = backend.get

    async def spy(
        path: str, ctx: object = None, *, limit: int | None = None
    ) -> tuple[bytes, str] | None:
        reads.append(path)
        return await original(path, limit=limit)

    monkeypatch.setattr(backend, "get", spy)
    for _ in range(5):
        await context.on_event(event())
    assert reads.count("AGENTS.md") == 1  # within refresh_seconds the snapshot is reused


@pytest.mark.parametrize("broken", ["directory", "fifo", "link out", "too big"])
async def test_an_unusable_memory_file_is_skipped_and_the_model_told(
    workspace: Path, broken: str
) -> None:
    """A MEMORY.md the model broke used to fail every later call before the model ran; now
    the call runs, the prompt names the file and why, and the note goes once it is repaired."""
    namespace = workspace / "users" / "ann"
    namespace.mkdir(parents=True)
    memory = namespace / "MEMORY.md"
    if broken == "directory":
        memory.mkdir()
    elif broken == "fifo":
        os.mkfifo(memory)
    elif broken == "link out":
        (workspace.parent / "host.md").write_text("host secret")
        memory.symlink_to(workspace.parent / "host.md")
    else:
        with memory.open("wb") as handle:
            handle.truncate(600 * 1024 * 1024)
    model = ScriptedChatModel([{"text": "ok", "repeat": True}])
    config = WorkspaceContextConfig(refresh_seconds=0, memory_refresh="step")
    ctx = RuntimeContext(user_id="ann", session_id="s")
    async with HarnessAgent(
        model=model, workspace=workspace, workspace_context=config, memory=None
    ) as agent:
        assert (answer(await agent.call("hi", ctx=ctx))).text == "ok"
        system = model.requests[-1][0].text
        assert "<unusable_files>" in system
        assert "- MEMORY.md: " in system
        assert "host secret" not in system
        if memory.is_dir() and not memory.is_symlink():
            memory.rmdir()
        else:
            memory.unlink()
        memory.write_text("- ann likes tea\n")
        answer(await agent.call("again", ctx=ctx))
        system = model.requests[-1][0].text
        assert "<unusable_files>" not in system
        assert "ann likes tea" in system


async def test_bookkeeping_writes_do_not_make_the_next_call_read_the_prompt_files(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call's own writes (its session, transcript, index marks, trace, all under agents/)
    used to make the next call read AGENTS.md, MEMORY.md and knowledge again; a memory_save
    into MEMORY.md still does, so the session's next call sees the change."""
    (workspace / "AGENTS.md").write_text("persona")
    (workspace / "MEMORY.md").write_text("- fact\n")
    model = ScriptedChatModel(
        [
            {"match": "save", "tool_calls": [
                {"name": "memory_save", "input": {"fact": "tea", "target": "MEMORY.md#Likes"}}
            ]},
            {"text": "ok", "repeat": True},
        ]
    )  # fmt: skip
    ctx = RuntimeContext(user_id="ann", session_id="s")
    memory = MemoryConfig(auto_consolidate=False)  # a consolidation rewrites MEMORY.md
    async with HarnessAgent(model=model, workspace=workspace, memory=memory) as agent:
        backend = agent.workspace.backend
        reads: list[str] = []
        original = backend.get

        async def spy(path: str, *, limit: int | None = None) -> tuple[bytes, str] | None:
            reads.append(path)
            return await original(path, limit=limit)

        monkeypatch.setattr(backend, "get", spy)
        assert agent.maintenance is not None
        answer(await agent.call("hi", ctx=ctx))
        await agent.maintenance.settled()  # the flush and the transcript write under agents/
        assert "AGENTS.md" in reads
        reads.clear()
        answer(await agent.call("again", ctx=ctx))
        await agent.maintenance.settled()
        prompt_only = ("AGENTS.md", "KNOWLEDGE.md")  # the files only the prompt reads
        assert [path for path in reads if path.endswith(prompt_only)] == []
        answer(await agent.call("save this", ctx=ctx))  # read again at the step after the save
        assert reads.count("AGENTS.md") == 1
        assert any("- tea" in message.text for message in model.requests[-1])  # a note
        await agent.maintenance.settled()
        reads.clear()
        answer(await agent.call("and now", ctx=ctx))
        assert [path for path in reads if path.endswith(prompt_only)] == []
