from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import harness.filesystem._local_storage as local_storage
from _outcomes import answer
from harness import HarnessAgent, RuntimeContext
from harness.compaction.eviction import (
    DEFAULT_EXCLUDED_TOOLS,
    DEFAULT_TOOL_RESULT_EVICTION,
    PlaceholderRef,
    ToolResultEvictionConfig,
    delete_old_evictions,
    eviction_stem,
    parse_placeholder,
    render_placeholder,
)
from harness.filesystem import _beneath
from harness.hooks.tool_result_eviction import ToolResultEvictionHook
from harness.kernel import ImageBlock, Msg, PostActing, TextBlock, ToolResultBlock, ToolUseBlock
from harness.models import ScriptedChatModel
from harness.workspace import WorkspaceManager

OUTPUT = "0123456789" * 10  # 100 characters
SMALL = ToolResultEvictionConfig(max_result_chars=20, preview_chars=4)
READ_HINT = (
    "Read it in pieces, not all at once: call `read_file` with path `{path}`, a line "
    "`offset` and a `limit`, and continue from the next line until you have what you need."
)


def digest(call_id: str, text: str) -> str:
    return hashlib.sha256(call_id.encode() + b"\0" + text.encode()).hexdigest()[:16]


def make_hook(
    workspace: Path, config: ToolResultEvictionConfig = SMALL, agent: str = "bot"
) -> ToolResultEvictionHook:
    return ToolResultEvictionHook(WorkspaceManager(workspace), agent_name=agent, config=config)


def post_acting(
    output: str | list[TextBlock | ImageBlock],
    *,
    call_id: str = "call_1",
    tool: str = "execute",
    user_id: str | None = None,
    is_error: bool = False,
) -> PostActing:
    return PostActing(
        ctx=RuntimeContext(session_id="s1", user_id=user_id),
        agent="bot",
        memory=[],
        call_id="c1",
        tool_call=ToolUseBlock(id=call_id, name=tool, input={}),
        result=ToolResultBlock(id=call_id, name=tool, output=output, is_error=is_error),
        latency_s=0.0,
    )


async def run(hook: ToolResultEvictionHook, event: PostActing) -> ToolResultBlock:
    await hook.on_event(event)
    return event.result


def stored_files(root: Path) -> list[str]:
    return sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and not p.name.startswith(".")
    )


# -- the limit ---------------------------------------------------------------------------------


async def test_a_result_over_the_limit_is_replaced_by_a_placeholder(workspace: Path) -> None:
    event = post_acting(OUTPUT)
    original = event.result

    result = await run(make_hook(workspace), event)

    assert result is not original
    assert result.text.startswith("Tool output was too large (100 chars, 1 line)")
    assert OUTPUT not in result.text
    assert (result.id, result.name, result.is_error) == ("call_1", "execute", False)
    assert original.output == OUTPUT  # the tool's own result object is not edited


async def test_a_result_exactly_at_the_limit_stays(workspace: Path) -> None:
    event = post_acting("x" * 20)
    original = event.result

    result = await run(make_hook(workspace), event)

    assert result is original
    assert stored_files(workspace) == []


async def test_one_character_over_the_limit_is_evicted(workspace: Path) -> None:
    result = await run(make_hook(workspace), post_acting("x" * 21))

    assert result.text.startswith("Tool output was too large (21 chars")
    assert len(stored_files(workspace)) == 1


async def test_the_default_limit_is_80000_characters(workspace: Path) -> None:
    hook = make_hook(workspace, DEFAULT_TOOL_RESULT_EVICTION)

    kept = await run(hook, post_acting("y" * 80_000, call_id="a"))
    evicted = await run(hook, post_acting("y" * 80_001, call_id="b"))

    assert kept.text == "y" * 80_000
    assert evicted.text.startswith("Tool output was too large (80,001 chars, 1 line)")
    assert "Preview (first 2,000 chars):\n" + "y" * 2_000 + "\n\n" in evicted.text


async def test_only_text_parts_count_and_images_are_kept(workspace: Path) -> None:
    image = ImageBlock(url="https://example.com/a.png")
    event = post_acting([TextBlock(text="a" * 15), image, TextBlock(text="b" * 10)])

    result = await run(make_hook(workspace), event)

    assert isinstance(result.output, list)
    assert result.output[1] == image
    assert result.text.startswith("Tool output was too large (25 chars")
    [path] = stored_files(workspace)
    assert (workspace / path).read_text() == "a" * 15 + "b" * 10


async def test_error_results_are_evicted_and_stay_errors(workspace: Path) -> None:
    result = await run(make_hook(workspace), post_acting(OUTPUT, is_error=True))

    assert result.is_error is True
    assert result.text.startswith("Tool output was too large")


# -- excluded tools ----------------------------------------------------------------------------


@pytest.mark.parametrize("tool", sorted(DEFAULT_EXCLUDED_TOOLS))
async def test_excluded_tools_are_never_evicted(workspace: Path, tool: str) -> None:
    event = post_acting(OUTPUT, tool=tool)
    original = event.result

    assert await run(make_hook(workspace), event) is original
    assert stored_files(workspace) == []


def test_the_default_exclusions_are_the_workspace_and_memory_readers() -> None:
    assert {
        "read_file",
        "write_file",
        "edit_file",
        "grep_files",
        "glob_files",
        "list_files",
        "memory_search",
        "memory_get",
        "session_search",
    } == DEFAULT_EXCLUDED_TOOLS
    assert "execute" not in DEFAULT_EXCLUDED_TOOLS


async def test_a_configured_exclusion_set_replaces_the_default(workspace: Path) -> None:
    config = ToolResultEvictionConfig(
        max_result_chars=20, preview_chars=4, excluded_tools=frozenset({"execute"})
    )
    hook = make_hook(workspace, config)

    kept = await run(hook, post_acting(OUTPUT, tool="execute"))
    evicted = await run(hook, post_acting(OUTPUT, tool="read_file"))

    assert kept.text == OUTPUT
    assert evicted.text.startswith("Tool output was too large")


# -- placeholder and file ----------------------------------------------------------------------


async def test_placeholder_layout(workspace: Path) -> None:
    result = await run(make_hook(workspace), post_acting(OUTPUT))

    path = f"large_tool_results/bot/execute-{digest('call_1', OUTPUT)}.txt"
    assert result.output == (
        f"Tool output was too large (100 chars, 1 line) and has been saved to `{path}`.\n"
        + READ_HINT.format(path=path)
        + "\n\nPreview (first 4 chars):\n0123\n\n... and last 4 chars:\n6789"
    )


def test_placeholder_counts_lines_and_separates_thousands() -> None:
    text = "line\n" * 30_000  # 150,000 characters, 30,000 lines

    placeholder = render_placeholder(text, "large_tool_results/a/b.txt", 3)

    assert placeholder.startswith(
        "Tool output was too large (150,000 chars, 30,000 lines) and has been saved to "
        "`large_tool_results/a/b.txt`.\n"
    )
    assert placeholder.endswith("Preview (first 3 chars):\nlin\n\n... and last 3 chars:\nne\n")


def test_the_preview_is_at_most_half_the_text_and_absent_when_zero() -> None:
    half = render_placeholder("abcdefghijk", "d/f.txt", 100)
    none = render_placeholder("abcdefghijk", "d/f.txt", 0)

    assert half.endswith("Preview (first 5 chars):\nabcde\n\n... and last 5 chars:\nghijk")
    assert none == (
        "Tool output was too large (11 chars, 1 line) and has been saved to `d/f.txt`.\n"
        + READ_HINT.format(path="d/f.txt")
    )


async def test_the_file_holds_the_full_output(workspace: Path) -> None:
    text = "première ligne\n" + "日本語 " * 40 + "\n\ttab\r\nend\n"

    result = await run(make_hook(workspace), post_acting(text, call_id="c9"))

    path = f"large_tool_results/bot/execute-{digest('c9', text)}.txt"
    assert stored_files(workspace) == [path]
    assert (workspace / path).read_bytes() == text.encode("utf-8")
    assert f"`{path}`" in result.text


async def test_the_file_name_is_short_and_safe_for_any_tool_name(workspace: Path) -> None:
    result = await run(make_hook(workspace), post_acting(OUTPUT, tool="mcp/srv:run tool"))
    long_tool = "t" * 300
    await run(make_hook(workspace), post_acting(OUTPUT, call_id="c2", tool=long_tool))

    names = [Path(p).name for p in stored_files(workspace)]
    assert f"mcp_srv_run_tool-{digest('call_1', OUTPUT)}.txt" in names
    assert f"{'t' * 40}-{digest('c2', OUTPUT)}.txt" in names
    assert result.name == "mcp/srv:run tool"


async def test_the_agent_name_becomes_one_directory(workspace: Path) -> None:
    await run(make_hook(workspace, agent="Test Agent/../x"), post_acting(OUTPUT))

    [path] = stored_files(workspace)
    assert path.startswith("large_tool_results/Test%20Agent%2F%2E%2E%2Fx/execute-")


async def test_a_configured_directory_is_used(workspace: Path) -> None:
    config = ToolResultEvictionConfig(
        max_result_chars=20, preview_chars=4, directory="results///big/"
    )

    result = await run(make_hook(workspace, config), post_acting(OUTPUT))

    [path] = stored_files(workspace)
    assert path.startswith("results/big/bot/execute-")
    assert f"`{path}`" in result.text


async def test_results_go_to_the_callers_namespace(workspace: Path) -> None:
    result = await run(make_hook(workspace), post_acting(OUTPUT, user_id="alice"))

    name = f"execute-{digest('call_1', OUTPUT)}.txt"
    assert stored_files(workspace) == [f"users/alice/large_tool_results/bot/{name}"]
    # read_file resolves paths in the caller's namespace, so the placeholder names that path
    assert f"saved to `large_tool_results/bot/{name}`" in result.text
    text = await WorkspaceManager(workspace).read_own(f"large_tool_results/bot/{name}", "alice")
    assert text == OUTPUT
    assert await WorkspaceManager(workspace).read_own(f"large_tool_results/bot/{name}") is None


# -- never overwrite, never re-evict -----------------------------------------------------------


async def test_a_reused_call_id_never_overwrites_the_earlier_file(workspace: Path) -> None:
    hook = make_hook(workspace)
    first = await run(hook, post_acting("first " * 10, call_id="call_0"))
    first_text = first.text
    second = await run(hook, post_acting("second " * 10, call_id="call_0"))

    files = stored_files(workspace)
    assert len(files) == 2
    assert {(workspace / p).read_text() for p in files} == {"first " * 10, "second " * 10}
    assert first.text == first_text
    first_ref = parse_placeholder(first.text)
    second_ref = parse_placeholder(second.text)
    assert first_ref is not None
    assert second_ref is not None
    assert first_ref.path != second_ref.path
    assert (workspace / first_ref.path).read_text() == "first " * 10


async def test_the_same_output_under_the_same_id_reuses_its_file(workspace: Path) -> None:
    hook = make_hook(workspace)

    first = await run(hook, post_acting(OUTPUT))
    second = await run(hook, post_acting(OUTPUT))

    assert first.text == second.text
    assert len(stored_files(workspace)) == 1


async def test_an_occupied_name_is_left_alone_and_the_next_one_used(workspace: Path) -> None:
    stem = eviction_stem("execute", "call_1", OUTPUT.encode())
    occupied = workspace / "large_tool_results" / "bot" / f"{stem}.txt"
    occupied.parent.mkdir(parents=True)
    occupied.write_text("somebody else's file")

    result = await run(make_hook(workspace), post_acting(OUTPUT))

    assert occupied.read_text() == "somebody else's file"
    assert (occupied.parent / f"{stem}-2.txt").read_text() == OUTPUT
    assert f"`large_tool_results/bot/{stem}-2.txt`" in result.text


async def test_without_hard_links_the_file_is_still_created_exclusively(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_links(src: str, dst: str) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    hook = make_hook(workspace)

    first = await run(hook, post_acting(OUTPUT))
    again = await run(hook, post_acting(OUTPUT))
    other = await run(hook, post_acting("z" * 30))

    assert first.text == again.text
    assert len(stored_files(workspace)) == 2
    ref = parse_placeholder(other.text)
    assert ref is not None
    assert (workspace / ref.path).read_text() == "z" * 30


async def test_a_1500_character_call_id_still_gives_a_valid_file(workspace: Path) -> None:
    call_id = "sig_" + "A" * 1_496

    result = await run(make_hook(workspace), post_acting(OUTPUT, call_id=call_id))

    [path] = stored_files(workspace)
    assert Path(path).name == f"execute-{digest(call_id, OUTPUT)}.txt"
    assert len(Path(path).name) <= 61
    assert result.id == call_id
    assert (workspace / path).read_text() == OUTPUT


async def test_a_placeholder_is_never_evicted_again(workspace: Path) -> None:
    hook = make_hook(workspace)  # limit 20: the placeholder itself is far over it
    placeholder = (await run(hook, post_acting(OUTPUT))).text
    assert len(placeholder) > 20

    # the same text coming back, e.g. through a second eviction hook or a tool that echoes it
    event = post_acting(placeholder, call_id="call_2", tool="echo")
    again = await run(hook, event)

    assert again.text == placeholder
    assert len(stored_files(workspace)) == 1


async def test_output_that_only_looks_like_a_placeholder_is_evicted(workspace: Path) -> None:
    fake = (
        "Tool output was too large (100 chars, 1 line) and has been saved to "
        "`large_tool_results/bot/missing.txt`.\n" + "real data " * 10
    )

    result = await run(make_hook(workspace), post_acting(fake))

    [path] = stored_files(workspace)
    assert (workspace / path).read_text() == fake
    assert result.text != fake


async def test_a_placeholder_from_another_users_namespace_is_evicted(workspace: Path) -> None:
    hook = make_hook(workspace)
    placeholder = (await run(hook, post_acting(OUTPUT, user_id="alice"))).text

    result = await run(hook, post_acting(placeholder, call_id="c2", user_id="bob"))

    assert result.text != placeholder
    assert any(p.startswith("users/bob/") for p in stored_files(workspace))


def test_parse_placeholder() -> None:
    text = render_placeholder("q" * 12_345, "large_tool_results/a/b.txt", 10)

    assert parse_placeholder(text) == PlaceholderRef(12_345, "large_tool_results/a/b.txt")
    assert parse_placeholder("Tool output was too large (but this is real): data") is None
    assert parse_placeholder("plain output") is None


async def test_the_file_is_written_off_the_event_loop(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[int] = []
    real = _beneath.replace

    def recording(
        directory: int, name: str, data: bytes, *, sync: bool = True, above: int = 0
    ) -> None:
        threads.append(threading.get_ident())
        real(directory, name, data, sync=sync, above=above)

    monkeypatch.setattr(local_storage, "replace", recording)  # where the storage looks it up

    await run(make_hook(workspace), post_acting(OUTPUT))

    assert len(threads) == 1
    assert threads[0] != threading.get_ident()


# -- failures ----------------------------------------------------------------------------------


async def test_a_failing_write_keeps_the_original_result(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # a file where the agent's directory should be: the write cannot succeed
    (workspace / "large_tool_results").mkdir()
    (workspace / "large_tool_results" / "bot").write_text("in the way")
    event = post_acting(OUTPUT)
    original = event.result

    with caplog.at_level(logging.WARNING, logger="harness.compaction.eviction"):
        result = await run(make_hook(workspace), event)

    assert result is original
    assert "could not save the 100-character result of tool 'execute'" in caplog.text
    assert "keeping it in the context" in caplog.text


# -- configuration -----------------------------------------------------------------------------


def test_config_defaults() -> None:
    config = ToolResultEvictionConfig()

    assert config.max_result_chars == 80_000
    assert config.preview_chars == 2_000
    assert config.directory == "large_tool_results"
    assert config.max_age_days == 7
    assert config.excluded_tools == DEFAULT_EXCLUDED_TOOLS


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("directory", "/tmp/results", "absolute path '/tmp/results'"),
        ("directory", "C:/results", "absolute path 'C:/results'"),
        ("directory", "a/../../etc", "must stay inside the workspace"),
        ("directory", "~/results", "must stay inside the workspace"),
        ("directory", "", "must name a folder"),
        ("directory", "./", "must name a folder"),
        ("directory", "users/bob", "must not be under users/"),
        ("directory", "a`b", "backticks"),
        ("max_result_chars", 0, "max_result_chars must be positive, got 0"),
        ("preview_chars", -1, "preview_chars must be zero or more, got -1"),
        ("max_age_days", 0, "max_age_days must be positive, got 0"),
        ("excluded_tools", "read_file", "got the string 'read_file'"),
    ],
)
def test_bad_config_is_refused(field: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        ToolResultEvictionConfig(**{field: value})  # type: ignore[arg-type]


def test_a_directory_is_normalized() -> None:
    assert ToolResultEvictionConfig(directory="a\\b//c/").directory == "a/b/c"


# -- cleanup -----------------------------------------------------------------------------------


NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)


def put(root: Path, path: str, age: timedelta) -> None:
    target = root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("x")
    stamp = (NOW - age).timestamp()
    os.utime(target, (stamp, stamp))


async def test_cleanup_deletes_only_old_files_in_every_namespace(workspace: Path) -> None:
    old, young = timedelta(days=7, seconds=1), timedelta(days=6, hours=23)
    put(workspace, "large_tool_results/bot/a.txt", old)
    put(workspace, "large_tool_results/bot/b.txt", young)
    put(workspace, "large_tool_results/helper/c.txt", old)
    put(workspace, "users/alice/large_tool_results/bot/d.txt", old)
    put(workspace, "users/alice/large_tool_results/bot/e.txt", young)
    put(workspace, "users/b%40x.org/large_tool_results/bot/f.txt", old)
    put(workspace, "memory/2020-01-01.md", old)  # not an evicted result
    put(workspace, "users/alice/memory/2020-01-01.md", old)

    deleted = await delete_old_evictions(WorkspaceManager(workspace), SMALL, now=NOW)

    assert deleted == [
        "large_tool_results/bot/a.txt",
        "large_tool_results/helper/c.txt",
        "users/alice/large_tool_results/bot/d.txt",
        "users/b%40x.org/large_tool_results/bot/f.txt",
    ]
    assert stored_files(workspace) == [
        "large_tool_results/bot/b.txt",
        "memory/2020-01-01.md",
        "users/alice/large_tool_results/bot/e.txt",
        "users/alice/memory/2020-01-01.md",
    ]


async def test_cleanup_uses_the_configured_age_and_directory(workspace: Path) -> None:
    config = ToolResultEvictionConfig(directory="big", max_age_days=1)
    put(workspace, "big/bot/a.txt", timedelta(days=2))
    put(workspace, "big/bot/b.txt", timedelta(hours=12))
    put(workspace, "large_tool_results/bot/c.txt", timedelta(days=30))

    deleted = await delete_old_evictions(WorkspaceManager(workspace), config, now=NOW)

    assert deleted == ["big/bot/a.txt"]
    assert (workspace / "large_tool_results/bot/c.txt").exists()


async def test_cleanup_of_an_empty_workspace_deletes_nothing(workspace: Path) -> None:
    assert await delete_old_evictions(WorkspaceManager(workspace), SMALL, now=NOW) == []


async def test_cleanup_refuses_a_naive_time(workspace: Path) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        await delete_old_evictions(WorkspaceManager(workspace), SMALL, now=datetime(2026, 1, 1))


# -- through the agent -------------------------------------------------------------------------


async def test_the_session_keeps_the_placeholder_not_the_output(workspace: Path) -> None:
    huge = "".join(f"row {i:06d} " + "data " * 30 + "\n" for i in range(1_000))
    assert len(huge) > 80_000

    def dump() -> str:
        """Dump the table."""
        return huge

    model = ScriptedChatModel(
        [{"tool_calls": [{"name": "dump", "input": {}}]}, {"text": "The table has 1,000 rows."}]
    )
    agent = HarnessAgent(
        model=model,
        name="bot",
        workspace=workspace,
        tools=[dump],
        memory=None,
        hooks=[ToolResultEvictionHook(WorkspaceManager(workspace), agent_name="bot")],
    )
    ctx = RuntimeContext(session_id="s1", user_id="alice")

    reply = answer(await agent.call("dump the table", ctx=ctx))
    await agent.aclose()

    assert reply.text == "The table has 1,000 rows."
    session_file = agent.workspace.local_path(agent.sessions.path(ctx)).read_text()
    saved = [Msg.model_validate(json.loads(line)) for line in session_file.splitlines()]
    [result] = [r for m in saved for r in m.tool_results]
    assert result.text.startswith(f"Tool output was too large ({len(huge):,} chars, 1,000 lines)")
    assert len(result.text) < 4_500  # two 2,000-character previews and two lines
    assert huge not in session_file
    assert len(session_file) < 10_000
    ref = parse_placeholder(result.text)
    assert ref is not None
    assert (workspace / "users" / "alice" / ref.path).read_text() == huge
    # the model's second request carried the placeholder, too
    assert model.requests[1][-1].tool_results[0].text == result.text
