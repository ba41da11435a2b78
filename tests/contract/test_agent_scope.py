"""``IsolationScope.AGENT``: each agent's files in a namespace of its own,
``agents/<agent>/files/``, shared by every user and session of that agent and reached by no
other agent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness import HarnessAgent, RuntimeContext
from harness.errors import PathOutsideWorkspace
from harness.filesystem import IsolationScope, LocalFilesystem, check_path, namespace_prefix
from harness.models import ScriptedChatModel
from harness.tools import FilesystemTools
from harness.workspace import agent_files_dir

AGENT = IsolationScope.AGENT

agent_names = st.text(min_size=1, max_size=20).filter(lambda s: s.strip() != "")
segments = st.one_of(
    st.sampled_from(["..", ".", "", "~", "agents", "files", "users", "sessions", "/"]),
    agent_names,
    st.text(st.sampled_from("ab./\\~"), max_size=6),
)
paths = st.lists(segments, max_size=6).map("/".join)


@given(a=agent_names, b=agent_names, path=paths, user=st.none() | agent_names)
def test_no_path_of_one_agent_reaches_another_agents_files(
    a: str, b: str, path: str, user: str | None
) -> None:
    ctx = RuntimeContext(session_id="s", user_id=user, agent=a)
    own, other = agent_files_dir(a), agent_files_dir(b)
    try:
        target = check_path(path, AGENT, ctx)
    except PathOutsideWorkspace:
        return
    assert target == own or target.startswith(own + "/"), (path, target)
    if agent_files_dir(a) != agent_files_dir(b):
        assert target != other, (path, target)
        assert not target.startswith(other + "/"), (path, target)


def test_the_namespace_is_the_agents_own_directory() -> None:
    ctx = RuntimeContext(session_id="s1", user_id="alice", agent="writer")
    assert namespace_prefix(AGENT, ctx) == "agents/writer/files/"
    assert check_path("/notes/a.md", AGENT, ctx) == "agents/writer/files/notes/a.md"
    assert namespace_prefix(IsolationScope.GLOBAL, ctx) == ""


def test_a_call_that_names_no_agent_is_refused() -> None:
    with pytest.raises(PathOutsideWorkspace, match=r"RuntimeContext\(agent=\.\.\.\)"):
        check_path("notes.md", AGENT, RuntimeContext(session_id="s1"))


async def test_agents_do_not_see_each_others_files_and_their_users_share_them(
    workspace: Path,
) -> None:
    tools = FilesystemTools(LocalFilesystem(workspace, scope=AGENT))
    alice_of_a = RuntimeContext(session_id="s1", user_id="alice", agent="a")
    bob_of_a = RuntimeContext(session_id="s2", user_id="bob", agent="a")
    of_b = RuntimeContext(session_id="s1", user_id="alice", agent="b")
    assert await tools.write_file("plan.md", "the secret plan", alice_of_a) == "Written to plan.md"
    assert (workspace / "agents" / "a" / "files" / "plan.md").read_text() == "the secret plan"
    assert "the secret plan" in await tools.read_file("plan.md", bob_of_a)  # one agent, any user
    for path in ("plan.md", "../a/files/plan.md", "/agents/a/files/plan.md"):
        assert (await tools.read_file(path, of_b)).startswith("Error: "), path
    for listing in (
        await tools.list_files(of_b, "/"),
        await tools.glob_files("**/*", of_b),
        await tools.grep_files("secret", of_b),
    ):
        assert "plan.md" not in listing, listing
    # The harness's records beside the agent's files are not in its namespace.
    assert "No match" in await tools.grep_files("secret", of_b)


async def test_a_harness_agents_file_tools_write_into_its_own_namespace(workspace: Path) -> None:
    script: list[dict[str, Any]] = [
        {
            "match": "^remember",
            "tool_calls": [
                {"name": "write_file", "input": {"path": "notes.md", "content": "blue"}}
            ],
        },
        {"match": "^look", "tool_calls": [{"name": "read_file", "input": {"path": "notes.md"}}]},
        {"text": "done", "repeat": True},
    ]
    fs = LocalFilesystem(workspace, scope=AGENT)
    for name in ("first", "second"):
        agent = HarnessAgent(
            model=ScriptedChatModel(script),
            name=name,
            workspace=workspace,
            filesystem=fs,
            memory=None,
            trace=False,
        )
        async with agent:
            await agent.call("remember" if name == "first" else "look")
            messages = await agent.sessions.read(RuntimeContext(session_id="default"))
    assert (workspace / "agents" / "first" / "files" / "notes.md").read_text() == "blue"
    (result,) = [block for m in messages for block in m.tool_results]
    assert result.is_error  # the second agent has no notes.md of its own
    assert "not found" in result.text
