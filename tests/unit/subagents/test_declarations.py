"""Subagent declarations: the ``subagents/*.md`` format, Python declarations, the catalog."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from harness import AgentOptions, HarnessAgent
from harness.errors import ConfigError
from harness.models import ScriptedChatModel
from harness.subagents import (
    DEFAULT_SUBAGENT_MAX_ITERS,
    GENERAL_PURPOSE,
    SubagentAgent,
    SubagentCatalog,
    SubagentFactory,
    SubagentsConfig,
    SubagentSpec,
    general_purpose,
    parse_declaration,
)
from harness.workspace import WorkspaceManager, user_prefix

SOURCE = "subagents/researcher.md"


def declaration(front: str, body: str = "You research things.") -> str:
    return f"---\n{front}\n---\n{body}\n"


def write(workspace: Path, rel: str, text: str) -> None:
    path = workspace / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def write_agent(workspace: Path, rel: str, name: str, description: str = "Does things.") -> None:
    write(workspace, rel, declaration(f"name: {name}\ndescription: {description}"))


def catalog(workspace: Path, *declarations: SubagentSpec | SubagentFactory) -> SubagentCatalog:
    return SubagentCatalog(
        WorkspaceManager(workspace),
        declarations,
        general_purpose=general_purpose(7),
        refresh_seconds=0,
    )


def never_built(options: AgentOptions) -> SubagentAgent:
    raise AssertionError("not built in these tests")


# -- parse_declaration ---------------------------------------------------------------------


def test_a_full_declaration_gives_every_field() -> None:
    text = declaration(
        "name: researcher\n"
        "description: >\n  Finds and summarizes\n  sources.\n"
        "tools: [read_file, memory_search]\n"
        "model: openai:gpt-4o-mini\n"
        "max_iters: 6",
        body="You are a careful researcher.\n\nCite sources.",
    )
    spec = parse_declaration(text, SOURCE)
    assert spec.name == "researcher"
    assert spec.description == "Finds and summarizes sources."
    assert spec.tools == ("read_file", "memory_search")
    assert spec.model == "openai:gpt-4o-mini"
    assert spec.max_iters == 6
    assert spec.sys_prompt == "You are a careful researcher.\n\nCite sources."
    assert spec.source == SOURCE


def test_optional_fields_have_defaults() -> None:
    spec = parse_declaration(declaration("name: r\ndescription: d", body=""), SOURCE)
    assert spec.tools is None  # every inherited tool
    assert spec.model is None  # the parent's model
    assert spec.max_iters == DEFAULT_SUBAGENT_MAX_ITERS == 10
    assert spec.sys_prompt == ""


@pytest.mark.parametrize(
    "tools",
    [
        "[read_file, memory_search]",
        "read_file, memory_search",
        "read_file,memory_search",
        "\n  - read_file\n  - memory_search",
        '"read_file , memory_search ,"',
    ],
)
def test_tools_as_a_list_or_a_comma_separated_string_are_the_same(tools: str) -> None:
    spec = parse_declaration(declaration(f"name: r\ndescription: d\ntools: {tools}"), SOURCE)
    assert spec.tools == ("read_file", "memory_search")


@pytest.mark.parametrize("key", ["max_iters", "maxIters"])
def test_max_iters_is_read_under_either_spelling(key: str) -> None:
    spec = parse_declaration(declaration(f"name: r\ndescription: d\n{key}: 3"), SOURCE)
    assert spec.max_iters == 3


@pytest.mark.parametrize("value", ["0", "-2", "1.5", "'4'", "true", "null", "[3]"])
def test_max_iters_must_be_a_positive_integer(value: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_declaration(declaration(f"name: r\ndescription: d\nmax_iters: {value}"), SOURCE)
    assert SOURCE in str(raised.value)
    assert "max_iters" in str(raised.value)


def test_dashes_inside_yaml_values_do_not_end_the_front_matter() -> None:
    text = (
        "---\n"
        "name: r\n"
        "description: before --- after\n"
        "notes: |\n"
        "  first\n"
        "  ---\n"
        "  second\n"
        "---\n"
        "The body.\n"
        "---\n"
        "More body.\n"
    )
    spec = parse_declaration(text, SOURCE)
    assert spec.description == "before --- after"
    assert spec.sys_prompt == "The body.\n---\nMore body."


def test_a_byte_order_mark_and_crlf_line_ends_are_accepted() -> None:
    text = "\ufeff---\r\nname: r\r\ndescription: d\r\n---\r\nBody.\r\n"
    spec = parse_declaration(text, SOURCE)
    assert (spec.name, spec.description, spec.sys_prompt) == ("r", "d", "Body.")


MALFORMED = [
    pytest.param("name: r\ndescription: d\n", "does not start with a '---' line", id="no-front"),
    pytest.param("---\nname: r\ndescription: d\nBody\n", "not closed", id="unclosed"),
    pytest.param(declaration("name: [r\ndescription: d"), "not valid YAML", id="bad-yaml"),
    pytest.param(declaration("- name: r"), "must be a mapping", id="not-a-mapping"),
    pytest.param(declaration("description: d"), "needs 'name'", id="no-name"),
    pytest.param(declaration("name: '  '\ndescription: d"), "needs 'name'", id="blank-name"),
    pytest.param(declaration("name: 42\ndescription: d"), "needs 'name'", id="int-name"),
    pytest.param(declaration("name: r"), "needs 'description'", id="no-description"),
    pytest.param(declaration("name: r\ndescription: ''"), "needs 'description'", id="blank"),
    pytest.param(declaration("name: r\ndescription: d\nmax_iters: 0"), "max_iters", id="iters"),
    pytest.param(declaration("name: r\ndescription: d\ntools: 5"), "'tools' must", id="tools"),
    pytest.param(
        declaration("name: r\ndescription: d\ntools: [read_file, 3]"), "'tools' must", id="item"
    ),
    pytest.param(
        declaration("name: r\ndescription: d\ntools: {a: 1}"), "'tools' must", id="tools-map"
    ),
    pytest.param(declaration("name: r\ndescription: d\nmodel: 5"), "'model'", id="model"),
    pytest.param(declaration("name: a b\ndescription: d"), "must be 1-64 letters", id="bad-name"),
]


@pytest.mark.parametrize(("text", "problem"), MALFORMED)
def test_a_malformed_declaration_is_an_error_naming_the_file_and_the_problem(
    text: str, problem: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_declaration(text, SOURCE)
    assert SOURCE in str(raised.value)
    assert problem in str(raised.value)


# -- SubagentSpec and SubagentFactory --------------------------------------------------------


@pytest.mark.parametrize("name", ["", "-lead", ".hidden", "a b", "a/b", "../x", "x" * 65, "é"])
def test_a_bad_name_is_a_config_error(name: str) -> None:
    with pytest.raises(ConfigError, match="must be 1-64 letters, digits"):
        SubagentSpec(name=name, description="d")
    with pytest.raises(ConfigError, match="must be 1-64 letters, digits"):
        SubagentFactory(name=name, description="d", build=never_built)


@pytest.mark.parametrize("name", ["a", "Researcher_2", "web.search", "x" * 64, "9-lives"])
def test_good_names_are_accepted(name: str) -> None:
    assert SubagentSpec(name=name, description="d").name == name


@pytest.mark.parametrize("description", ["", "   \n"])
def test_an_empty_description_is_a_config_error(description: str) -> None:
    with pytest.raises(ConfigError, match=r"'r' .* needs a non-empty description"):
        SubagentSpec(name="r", description=description)
    with pytest.raises(ConfigError, match=r"'r' .* needs a non-empty description"):
        SubagentFactory(name="r", description=description, build=never_built)


@pytest.mark.parametrize(
    ("max_iters", "problem"),
    [(0, "at least 1"), (-1, "at least 1"), (True, "an integer"), (2.0, "an integer")],
)
def test_max_iters_of_a_spec_must_be_a_positive_integer(max_iters: Any, problem: str) -> None:
    with pytest.raises(ConfigError, match=f"'r' .*max_iters must be {problem}"):
        SubagentSpec(name="r", description="d", max_iters=max_iters)


def test_a_factory_needs_a_callable_build() -> None:
    bad: Any = "not callable"
    with pytest.raises(ConfigError, match=r"'r' .*build must be callable"):
        SubagentFactory(name="r", description="d", build=bad)


def test_a_spec_keeps_its_tools_as_a_tuple() -> None:
    tools: Any = ["read_file", "whoami"]
    spec = SubagentSpec(name="r", description="d", tools=tools)
    assert spec.tools == ("read_file", "whoami")


# -- the catalog ---------------------------------------------------------------------------


async def test_the_built_in_comes_first_then_python_then_files(workspace: Path) -> None:
    write_agent(workspace, "subagents/zeta.md", "zeta")
    write_agent(workspace, "subagents/alpha.md", "alpha")
    python = SubagentSpec(name="py-one", description="From Python.")
    factory = SubagentFactory(name="py-two", description="Built.", build=never_built)
    entries = await catalog(workspace, python, factory).entries(None)
    assert list(entries) == [GENERAL_PURPOSE, "py-one", "py-two", "alpha", "zeta"]
    assert entries[GENERAL_PURPOSE].max_iters == 7  # type: ignore[union-attr]
    assert entries["py-one"] is python
    assert entries["py-two"] is factory
    assert entries["alpha"].source == "subagents/alpha.md"


async def test_without_the_built_in_only_declarations_are_listed(workspace: Path) -> None:
    write_agent(workspace, "subagents/alpha.md", "alpha")
    plain = SubagentCatalog(WorkspaceManager(workspace), refresh_seconds=0)
    assert list(await plain.entries(None)) == ["alpha"]


@pytest.mark.parametrize(("text", "problem"), MALFORMED)
async def test_a_malformed_file_is_skipped_with_a_warning_and_the_others_load(
    workspace: Path, caplog: pytest.LogCaptureFixture, text: str, problem: str
) -> None:
    write(workspace, "subagents/broken.md", text)
    write_agent(workspace, "subagents/good.md", "good")
    with caplog.at_level(logging.WARNING, logger="harness.subagents"):
        entries = await catalog(workspace).entries(None)
    assert list(entries) == [GENERAL_PURPOSE, "good"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "subagents/broken.md" in warnings[0]
    assert problem in warnings[0]


async def test_only_markdown_files_directly_in_subagents_are_read(workspace: Path) -> None:
    write_agent(workspace, "subagents/top.md", "top")
    write_agent(workspace, "subagents/nested/deeper.md", "deeper")
    write_agent(workspace, "subagents/notes.txt", "notes")
    write_agent(workspace, "subagents/top.md.bak", "backup")
    write_agent(workspace, "users/alice/subagents/nested/mine.md", "mine")
    write_agent(workspace, "agents/x/subagents/elsewhere.md", "elsewhere")
    for user in (None, "alice"):
        assert list(await catalog(workspace).entries(user)) == [GENERAL_PURPOSE, "top"]


async def test_two_files_with_one_name_keep_the_first_and_warn_naming_both(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A name declared twice skips the later file; it used to fail every call of every user."""
    write_agent(workspace, "subagents/first.md", "same", "The first.")
    write_agent(workspace, "subagents/second.md", "same", "The second.")
    write_agent(workspace, "subagents/other.md", "other")
    with caplog.at_level(logging.WARNING, logger="harness.subagents"):
        entries = await catalog(workspace).entries(None)
    assert list(entries) == [GENERAL_PURPOSE, "same", "other"]
    assert entries["same"].description == "The first."
    assert "subagents/second.md" in caplog.text
    assert "taken by subagents/first.md" in caplog.text


async def test_a_file_cannot_take_a_python_declarations_name(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_agent(workspace, "subagents/researcher.md", "researcher")
    python = SubagentSpec(name="researcher", description="From Python.", source="my_app.py")
    with caplog.at_level(logging.WARNING, logger="harness.subagents"):
        entries = await catalog(workspace, python).entries(None)
    assert entries["researcher"].description == "From Python."
    assert "subagents/researcher.md" in caplog.text
    assert "my_app.py" in caplog.text


async def test_a_file_cannot_take_the_built_in_name(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_agent(workspace, "subagents/mine.md", GENERAL_PURPOSE)
    with caplog.at_level(logging.WARNING, logger="harness.subagents"):
        entries = await catalog(workspace).entries(None)
    assert entries[GENERAL_PURPOSE].source != "subagents/mine.md"
    assert "subagents/mine.md" in caplog.text
    # without the built-in the same file is an ordinary subagent
    plain = SubagentCatalog(WorkspaceManager(workspace), refresh_seconds=0)
    assert list(await plain.entries(None)) == [GENERAL_PURPOSE]


async def test_two_python_declarations_with_one_name_fail_the_agents_construction(
    workspace: Path,
) -> None:
    first = SubagentSpec(name="twin", description="One.")
    second = SubagentFactory(
        name="twin", description="Two.", build=never_built, source="plugins/twin.py"
    )
    with pytest.raises(ConfigError) as raised:
        HarnessAgent(model=ScriptedChatModel([]), workspace=workspace, subagents=[first, second])
    assert "'twin'" in str(raised.value)
    assert "HarnessAgent(subagents=...)" in str(raised.value)
    assert "plugins/twin.py" in str(raised.value)
    with pytest.raises(ConfigError, match="'twin'"):
        HarnessAgent(
            model=ScriptedChatModel([]),
            workspace=workspace,
            subagents=SubagentsConfig(declarations=(first, first)),
        )


async def test_a_python_declaration_named_like_the_built_in_fails_construction(
    workspace: Path,
) -> None:
    mine = SubagentSpec(name=GENERAL_PURPOSE, description="Mine.")
    with pytest.raises(ConfigError, match="built-in"):
        HarnessAgent(model=ScriptedChatModel([]), workspace=workspace, subagents=[mine])
    # allowed once the built-in is turned off
    config = SubagentsConfig(declarations=(mine,), general_purpose=False)
    async with HarnessAgent(
        model=ScriptedChatModel([]), workspace=workspace, subagents=config, memory=None
    ):
        pass


async def test_a_users_file_hides_the_shared_file_for_that_user_only(workspace: Path) -> None:
    write_agent(workspace, "subagents/helper.md", "helper", "Shared helper.")
    write_agent(workspace, "subagents/common.md", "common", "Common.")
    write_agent(workspace, f"{user_prefix('alice')}subagents/helper.md", "helper", "Alice's.")
    write_agent(workspace, f"{user_prefix('alice')}subagents/private.md", "private", "Hers.")
    cat = catalog(workspace)

    alice = await cat.entries("alice")
    assert list(alice) == [GENERAL_PURPOSE, "common", "helper", "private"]
    assert alice["helper"].description == "Alice's."
    assert alice["helper"].source == "users/alice/subagents/helper.md"
    assert alice["common"].source == "subagents/common.md"

    for other in ("bob", None):
        entries = await cat.entries(other)
        assert list(entries) == [GENERAL_PURPOSE, "common", "helper"]
        assert entries["helper"].description == "Shared helper."


async def test_a_users_duplicate_is_skipped_for_that_user_only(workspace: Path) -> None:
    write_agent(workspace, "subagents/helper.md", "helper", "Shared.")
    write_agent(workspace, f"{user_prefix('alice')}subagents/other.md", "helper", "Alice's.")
    cat = catalog(workspace)
    assert (await cat.entries("alice"))["helper"].description == "Shared."
    assert (await cat.entries("bob"))["helper"].description == "Shared."


async def test_a_user_id_that_is_not_a_plain_segment_is_looked_up_safely(
    workspace: Path,
) -> None:
    user = "carol@example.com/../alice"
    write_agent(workspace, "subagents/helper.md", "helper", "Shared.")
    write_agent(workspace, f"{user_prefix(user)}subagents/helper.md", "helper", "Carol's.")
    write_agent(workspace, f"{user_prefix('alice')}subagents/helper.md", "helper", "Alice's.")
    entries = await catalog(workspace).entries(user)
    assert entries["helper"].description == "Carol's."


async def test_files_are_read_again_after_refresh_seconds(workspace: Path) -> None:
    write_agent(workspace, "subagents/first.md", "first")
    cat = catalog(workspace)
    assert list(await cat.entries(None)) == [GENERAL_PURPOSE, "first"]
    write_agent(workspace, "subagents/second.md", "second")
    (workspace / "subagents" / "first.md").unlink()
    assert list(await cat.entries(None)) == [GENERAL_PURPOSE, "second"]


async def test_within_refresh_seconds_the_files_are_not_read_again(workspace: Path) -> None:
    write_agent(workspace, "subagents/first.md", "first")
    cat = SubagentCatalog(WorkspaceManager(workspace), refresh_seconds=3600)
    assert list(await cat.entries(None)) == ["first"]
    write_agent(workspace, "subagents/second.md", "second")
    assert list(await cat.entries(None)) == ["first"]
    # each user has their own cache
    assert list(await cat.entries("alice")) == ["first", "second"]


async def test_a_skipped_duplicate_is_reported_again_until_fixed(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_agent(workspace, "subagents/a.md", "same", "A.")
    write_agent(workspace, "subagents/b.md", "same", "B.")
    cat = catalog(workspace)
    for _ in range(2):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="harness.subagents"):
            assert (await cat.entries(None))["same"].description == "A."
        assert "subagents/b.md" in caplog.text
    (workspace / "subagents" / "a.md").unlink()
    assert (await cat.entries(None))["same"].description == "B."


async def test_an_empty_file_is_skipped_with_a_warning(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write(workspace, "subagents/empty.md", "")
    write_agent(workspace, "subagents/good.md", "good")
    with caplog.at_level(logging.WARNING, logger="harness.subagents"):
        entries = await catalog(workspace).entries(None)
    assert list(entries) == [GENERAL_PURPOSE, "good"]
    assert "subagents/empty.md" in caplog.text
