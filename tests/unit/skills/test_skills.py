"""Skills: the SKILL.md format, per-user resolution, the prompt section and ``load_skill``."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest

from _outcomes import answer
from harness import HarnessAgent, RuntimeContext
from harness.errors import ConfigError
from harness.filesystem import IsolationScope, LocalFilesystem
from harness.hooks import SkillsHook
from harness.hooks.skills import skills_section
from harness.kernel import Msg, PreReasoning, TextBlock, ToolResultBlock
from harness.models import ScriptedChatModel
from harness.skills import MAX_DESCRIPTION_CHARS, Skill, SkillRepository, parse_skill
from harness.skills import repository as skills_repository
from harness.tools import FilesystemTools, SkillTools
from harness.tools.skills import MAX_LISTED_RESOURCES, format_skill
from harness.workspace import WorkspaceManager

ALICE = RuntimeContext(session_id="s1", user_id="alice")
BOB = RuntimeContext(session_id="s1", user_id="bob")
NOBODY = RuntimeContext(session_id="s1")


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def skill_md(name: str, description: str, body: str = "") -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n{body}\n"


def add_skill(
    root: Path, name: str, description: str, body: str = "", *, user: str | None = None
) -> Path:
    base = root / (f"users/{user}/skills" if user else "skills") / name
    write(base, "SKILL.md", skill_md(name, description, body))
    return base


def repo(root: Path, refresh_seconds: float = 0) -> SkillRepository:
    return SkillRepository(WorkspaceManager(root), refresh_seconds=refresh_seconds)


def tools(root: Path) -> SkillTools:
    return SkillTools(repo(root))


def system_text(request: list[Msg]) -> str:
    return "\n\n".join(
        block.text
        for m in request
        if m.role == "system"
        for block in m.content
        if isinstance(block, TextBlock)
    )


# -- parse_skill ---------------------------------------------------------------------------


def test_parse_gives_name_description_instructions_and_other_keys() -> None:
    text = (
        "---\nname: report\ndescription: >\n  Writes the weekly\n  report.\n"
        "license: MIT\n---\n\nStep 1.\n\nStep 2.\n"
    )
    skill = parse_skill(text, "skills/report/SKILL.md", folder="report")
    assert skill.name == "report"
    assert skill.description == "Writes the weekly report."
    assert skill.instructions == "Step 1.\n\nStep 2."
    assert dict(skill.metadata) == {"license": "MIT"}
    assert skill.folder == "skills/report"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("no front matter", "does not start with a '---'"),
        ("---\nname: r\ndescription: d\n", "not closed"),
        ("---\nname: [r\n---\n", "not valid YAML"),
        ("---\ndescription: d\n---\n", "needs 'name'"),
        ("---\nname: r\n---\n", "needs 'description'"),
        ("---\nname: r\ndescription: '  '\n---\n", "needs 'description'"),
        ("---\nname: 3\ndescription: d\n---\n", "needs 'name'"),
        ("---\nname: ../x\ndescription: d\n---\n", "must be 1-64 letters"),
        ("---\nname: other\ndescription: d\n---\n", "its folder is 'r'"),
    ],
)
def test_parse_rejects_bad_files_naming_the_file_and_the_problem(text: str, problem: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_skill(text, "skills/r/SKILL.md", folder="r")
    assert str(raised.value).startswith("skills/r/SKILL.md: ")
    assert problem in str(raised.value)


def test_parse_rejects_a_description_too_long_for_the_prompt() -> None:
    fits = parse_skill(skill_md("r", "x" * MAX_DESCRIPTION_CHARS), "s", folder="r")
    assert len(fits.description) == MAX_DESCRIPTION_CHARS
    with pytest.raises(ConfigError, match="at most 1024"):
        parse_skill(skill_md("r", "x" * (MAX_DESCRIPTION_CHARS + 1)), "s", folder="r")


# -- the repository ------------------------------------------------------------------------


async def test_skills_are_found_with_their_resources(workspace: Path) -> None:
    base = add_skill(workspace, "report", "Writes reports.", "Use the template.")
    write(base, "templates/weekly.md", "# Week")
    write(base, "examples/deep/one.txt", "1")
    write(base, ".hidden", "lock")
    write(base, ".cache/x", "x")
    write(workspace, "skills/README.md", "not a skill")
    write(workspace, "skills/empty-folder/notes.md", "no SKILL.md here")
    skills = await repo(workspace).skills(None)
    assert list(skills) == ["report"]
    skill = skills["report"]
    assert skill.instructions == "Use the template."
    assert skill.resources == (
        "skills/report/examples/deep/one.txt",
        "skills/report/templates/weekly.md",
    )
    assert skill.source == "skills/report/SKILL.md"
    assert skill.user_id is None


async def test_skills_are_sorted_by_name(workspace: Path) -> None:
    for name in ("zeta", "alpha", "mid"):
        add_skill(workspace, name, f"{name} things")
    assert list(await repo(workspace).skills(None)) == ["alpha", "mid", "zeta"]


async def test_a_users_skill_replaces_the_shared_one_for_that_user_only(workspace: Path) -> None:
    shared = add_skill(workspace, "report", "Shared report.", "shared body")
    write(shared, "templates/shared.md", "s")
    own = add_skill(workspace, "report", "Alice's report.", "alice body", user="alice")
    write(own, "templates/alice.md", "a")
    add_skill(workspace, "private", "Only alice has it.", user="alice")
    repository = repo(workspace)

    alice = await repository.skills("alice")
    assert list(alice) == ["private", "report"]
    assert alice["report"].description == "Alice's report."
    assert alice["report"].instructions == "alice body"
    assert alice["report"].resources == ("skills/report/templates/alice.md",)
    assert alice["report"].source == "users/alice/skills/report/SKILL.md"
    assert alice["report"].user_id == "alice"

    bob = await repository.skills("bob")
    assert list(bob) == ["report"]
    assert bob["report"].description == "Shared report."
    assert bob["report"].resources == ("skills/report/templates/shared.md",)
    assert list(await repository.skills(None)) == ["report"]


async def test_invalid_skills_are_skipped_with_a_warning_naming_the_file(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    add_skill(workspace, "good", "Works.")
    write(workspace, "skills/nofront/SKILL.md", "just text")
    write(workspace, "skills/nodesc/SKILL.md", "---\nname: nodesc\n---\nbody")
    write(workspace, "skills/wrong/SKILL.md", skill_md("right", "d"))
    write(workspace, "skills/blank/SKILL.md", "")
    with caplog.at_level(logging.WARNING, logger="harness.skills"):
        skills = await repo(workspace).skills(None)
    assert list(skills) == ["good"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 4
    by_file = {
        name: next(w for w in warnings if f"skills/{name}/SKILL.md" in w)
        for name in ("nofront", "nodesc", "wrong", "blank")
    }
    assert "does not start with a '---'" in by_file["nofront"]
    assert "needs 'description'" in by_file["nodesc"]
    assert "named 'right' but its folder is 'wrong'" in by_file["wrong"]
    assert "empty" in by_file["blank"]


async def test_a_users_broken_skill_leaves_the_shared_one(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    add_skill(workspace, "report", "Shared report.")
    write(workspace, "users/alice/skills/report/SKILL.md", "---\nname: report\n---\n")
    with caplog.at_level(logging.WARNING, logger="harness.skills"):
        skills = await repo(workspace).skills("alice")
    assert skills["report"].description == "Shared report."
    assert any("users/alice/skills/report/SKILL.md" in r.getMessage() for r in caplog.records)


async def test_edits_show_up_after_the_refresh_interval(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The repository's clock, moved by hand: no sleep past the interval, and no slow moment of
    # a loaded machine that passes it before the cached read.
    now = [1000.0]
    monkeypatch.setattr(skills_repository, "time", SimpleNamespace(monotonic=lambda: now[0]))
    add_skill(workspace, "report", "Old.")
    repository = repo(workspace, refresh_seconds=0.2)
    first = await repository.skills(None)
    assert first["report"].description == "Old."
    add_skill(workspace, "report", "New.")
    add_skill(workspace, "extra", "Added.")
    now[0] += 0.19
    assert await repository.skills(None) is first  # cached within the interval
    now[0] += 0.02  # past it
    second = await repository.skills(None)
    assert second["report"].description == "New."
    assert list(second) == ["extra", "report"]


async def test_the_cache_is_per_user(workspace: Path) -> None:
    add_skill(workspace, "shared", "S.")
    repository = repo(workspace, refresh_seconds=60)
    assert list(await repository.skills("bob")) == ["shared"]
    add_skill(workspace, "mine", "M.", user="alice")
    assert list(await repository.skills("alice")) == ["mine", "shared"]
    assert list(await repository.skills("bob")) == ["shared"]


def test_a_negative_refresh_is_refused(workspace: Path) -> None:
    with pytest.raises(ValueError, match="refresh_seconds"):
        SkillRepository(WorkspaceManager(workspace), refresh_seconds=-1)


# -- load_skill ----------------------------------------------------------------------------


async def test_load_skill_returns_instructions_and_resources(workspace: Path) -> None:
    base = add_skill(workspace, "report", "Writes reports.", "1. Read the template.\n2. Fill it.")
    write(base, "templates/weekly.md", "# Week")
    out = await tools(workspace).load_skill("report", NOBODY)
    assert out == (
        "Skill: report (skills/report)\n\n"
        "1. Read the template.\n2. Fill it.\n\n"
        "Resources (read them with read_file when the instructions refer to them):\n"
        "- skills/report/templates/weekly.md"
    )


async def test_load_skill_without_resources_or_body_says_so(workspace: Path) -> None:
    add_skill(workspace, "bare", "Nothing else.")
    out = await tools(workspace).load_skill(" bare ", NOBODY)
    assert "(SKILL.md has no instructions beyond its description)" in out
    assert out.endswith("This skill has no other files.")


async def test_load_skill_of_an_unknown_name_lists_the_skills(workspace: Path) -> None:
    add_skill(workspace, "alpha", "A.")
    add_skill(workspace, "beta", "B.")
    out = await tools(workspace).load_skill("gamma", NOBODY)
    assert out == "Error: no skill named 'gamma'; available skills: alpha, beta"
    assert (await tools(workspace).load_skill("", NOBODY)).startswith("Error: name is required")


async def test_load_skill_with_no_skills_at_all(workspace: Path) -> None:
    assert await tools(workspace).load_skill("x", NOBODY) == (
        "Error: there are no skills in this workspace"
    )


async def test_load_skill_resolves_per_user(workspace: Path) -> None:
    add_skill(workspace, "report", "Shared.", "shared body")
    add_skill(workspace, "report", "Alice's.", "alice body", user="alice")
    skill_tools = tools(workspace)
    assert "alice body" in await skill_tools.load_skill("report", ALICE)
    assert "shared body" in await skill_tools.load_skill("report", BOB)
    assert "Error: no skill named" in await skill_tools.load_skill("nope", ALICE)


@pytest.mark.parametrize(
    ("ctx", "own", "expected"),
    [(ALICE, True, "alice template"), (BOB, False, "shared template")],
)
async def test_listed_resources_are_readable_with_read_file_as_the_user(
    workspace: Path, ctx: RuntimeContext, own: bool, expected: str
) -> None:
    shared = add_skill(workspace, "report", "Shared.")
    write(shared, "templates/shared.md", "shared template")
    mine = add_skill(workspace, "report", "Alice's.", user="alice")
    write(mine, "templates/alice.md", "alice template")
    out = await tools(workspace).load_skill("report", ctx)
    paths = [line[2:] for line in out.splitlines() if line.startswith("- ")]
    assert paths == [f"skills/report/templates/{'alice' if own else 'shared'}.md"]
    read = await FilesystemTools(LocalFilesystem(workspace)).read_file(paths[0], ctx)
    assert read.splitlines()[0] == f"1\t{expected}"


async def test_under_a_whole_workspace_scope_own_resources_carry_the_user_prefix(
    workspace: Path,
) -> None:
    mine = add_skill(workspace, "report", "Alice's.", user="alice")
    write(mine, "t.md", "alice template")
    backend = LocalFilesystem(workspace, scope=IsolationScope.GLOBAL)
    skill_tools = SkillTools(SkillRepository(WorkspaceManager(workspace, backend)))
    out = await skill_tools.load_skill("report", ALICE)
    assert "- users/alice/skills/report/t.md" in out.splitlines()
    read = await FilesystemTools(backend).read_file("users/alice/skills/report/t.md", ALICE)
    assert read.splitlines()[0] == "1\talice template"


def test_a_long_resource_list_is_capped() -> None:
    skill = Skill(
        name="big",
        description="d",
        instructions="i",
        resources=tuple(f"skills/big/f{i:03}" for i in range(MAX_LISTED_RESOURCES + 5)),
    )
    lines = format_skill(skill).splitlines()
    assert sum(line.startswith("- ") for line in lines) == MAX_LISTED_RESOURCES
    assert lines[-1] == "... and 5 more; glob_files('**/*', path='skills/big') lists them all."


# -- the hook ------------------------------------------------------------------------------


def test_the_section_lists_names_and_descriptions() -> None:
    skills = [
        Skill(name="a", description="Does A.", instructions="secret A"),
        Skill(name="b", description="Does B.", instructions="secret B"),
    ]
    section = skills_section(skills)
    assert section.startswith("## Skills\n")
    assert "`load_skill(name)`" in section
    assert section.endswith("### Available skills\n- `a`: Does A.\n- `b`: Does B.")


def test_the_hook_comes_before_user_hooks_and_the_workspace_context(workspace: Path) -> None:
    hook = SkillsHook(WorkspaceManager(workspace))
    assert 80 < hook.priority < 100
    assert hook.tools() == [hook.skill_tools.load_skill]


async def test_the_hook_leaves_the_prompt_alone_without_skills(workspace: Path) -> None:
    hook = SkillsHook(WorkspaceManager(workspace))
    messages = [Msg(role="system", content="base"), Msg(role="user", content="hi")]
    event = PreReasoning(
        agent="a", ctx=NOBODY, step=0, messages=list(messages), tools=[], memory=[], call_id="c1"
    )
    await hook.on_event(event)
    assert event.messages == messages
    assert event.messages[0] is messages[0]


def scripted(*turns: dict[str, object]) -> ScriptedChatModel:
    return ScriptedChatModel([*turns, {"text": "done", "repeat": True}])


def agent(workspace: Path, model: ScriptedChatModel) -> HarnessAgent:
    """An agent with the built-in skills off and a hook that re-reads skills at every step."""
    return HarnessAgent(
        model=model,
        workspace=workspace,
        memory=None,
        subagents=None,
        skills=False,
        hooks=[SkillsHook(WorkspaceManager(workspace), refresh_seconds=0)],
    )


async def test_through_an_agent_the_prompt_lists_skills_and_load_skill_loads_one(
    workspace: Path,
) -> None:
    base = add_skill(workspace, "report", "Writes the weekly report.", "SECRET-STEPS")
    write(base, "templates/weekly.md", "# Week")
    add_skill(workspace, "review", "Reviews code.", "REVIEW-BODY")
    model = scripted({"tool_calls": [{"name": "load_skill", "input": {"name": "report"}}]})
    async with agent(workspace, model) as harness:
        reply = answer(await harness.call("write the report", ctx=ALICE))
    assert reply.text == "done"
    first = system_text(model.requests[0])
    assert "## Skills" in first
    assert "- `report`: Writes the weekly report." in first
    assert "- `review`: Reviews code." in first
    assert "SECRET-STEPS" not in first
    assert "REVIEW-BODY" not in first
    # before the workspace context (900), which is appended last
    assert first.index("## Skills") < first.index("## Session Context")
    (result,) = [
        block.text
        for m in model.requests[1]
        for block in m.content
        if isinstance(block, ToolResultBlock) and block.name == "load_skill"
    ]
    assert result.startswith("Skill: report (skills/report)\n\nSECRET-STEPS")
    assert "- skills/report/templates/weekly.md" in result


async def test_through_an_agent_each_user_sees_their_own_skills(workspace: Path) -> None:
    add_skill(workspace, "report", "Shared report.")
    add_skill(workspace, "report", "Alice's report.", user="alice")
    model = scripted()
    async with agent(workspace, model) as harness:
        answer(await harness.call("hi", ctx=ALICE))
        answer(await harness.call("hi", ctx=BOB))
    assert "- `report`: Alice's report." in system_text(model.requests[0])
    assert "- `report`: Shared report." in system_text(model.requests[1])
    assert "Alice's report." not in system_text(model.requests[1])


async def test_through_an_agent_no_skills_means_no_section(workspace: Path) -> None:
    model = scripted()
    async with agent(workspace, model) as harness:
        answer(await harness.call("hi", ctx=ALICE))
    assert "## Skills" not in system_text(model.requests[0])
