"""Contract tests for tools and the toolkit (harness.kernel.toolkit)."""

import asyncio
import enum
import threading
from collections.abc import Awaitable, Callable
from datetime import date
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from _outcomes import answer
from harness.context import RuntimeContext
from harness.kernel import (
    ImageBlock,
    Msg,
    Paused,
    ReActAgent,
    TextBlock,
    Tool,
    ToolContext,
    Toolkit,
    ToolResultBlock,
    ToolUseBlock,
)
from harness.models import ScriptedChatModel


def use(name: str, call_id: str = "call_1", **arguments: Any) -> ToolUseBlock:
    return ToolUseBlock(id=call_id, name=name, input=arguments)


CTX = RuntimeContext(session_id="s1", user_id="u1")


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


def search(
    query: str,
    limit: int = 10,
    tags: list[str] | None = None,
    mode: Literal["fast", "deep"] = "fast",
    color: Color | None = None,
    scale: float = 1.5,
) -> str:
    """Search the notes for a query.

    This second paragraph explains more and is not part of the description.

    Args:
        query: What to look for,
            continued on a second line.
        limit (int): How many hits at most.
        tags: Only notes with these tags.
        mode: How hard to look.
        color: Only notes of this color.

    Returns:
        The hits, one per line.
    """
    return f"{query}|{limit}|{tags}|{mode}|{color}|{scale}"


# --- schema -----------------------------------------------------------------------------------


def test_schema_from_type_hints_and_google_docstring() -> None:
    tool = Tool.from_function(search)

    assert tool.name == "search"
    assert tool.description == "Search the notes for a query."
    assert tool.schema.name == "search"
    assert tool.schema.description == "Search the notes for a query."
    assert tool.schema.parameters == {
        "$defs": {"Color": {"enum": ["red", "blue"], "type": "string"}},
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": "What to look for, continued on a second line.",
            },
            "limit": {"type": "integer", "default": 10, "description": "How many hits at most."},
            "tags": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Only notes with these tags.",
            },
            "mode": {
                "type": "string",
                "enum": ["fast", "deep"],
                "default": "fast",
                "description": "How hard to look.",
            },
            "color": {"$ref": "#/$defs/Color", "description": "Only notes of this color."},
            "scale": {"type": "number", "default": 1.5},
        },
        "required": ["query"],
    }


def test_optional_none_parameters_are_optional_without_null() -> None:
    def note(text: str, title: str | None = None, count: int | None = None) -> str:
        """Write a note."""
        return text

    params = Tool.from_function(note).schema.parameters

    assert params["required"] == ["text"]
    assert params["properties"]["title"] == {"type": "string"}
    assert params["properties"]["count"] == {"type": "integer"}


def test_optional_none_with_several_types_keeps_the_non_null_options() -> None:
    def pick(value: int | str | None = None) -> str:
        return str(value)

    prop = Tool.from_function(pick).schema.parameters["properties"]["value"]

    assert prop == {"anyOf": [{"type": "integer"}, {"type": "string"}]}


def test_tool_without_parameters_or_docstring() -> None:
    def ping() -> str:
        return "pong"

    tool = Tool.from_function(ping)

    assert tool.description == ""
    assert tool.schema.parameters == {"type": "object", "properties": {}}


def test_arguments_header_and_other_sections_end_the_args() -> None:
    def move(src: str, dst: str) -> None:
        """Move a file.

        Arguments:
            src: Source path.
            dst: Destination path.

        Raises:
            OSError: never shown to the model.
        """

    params = Tool.from_function(move).schema.parameters

    assert params["properties"] == {
        "src": {"type": "string", "description": "Source path."},
        "dst": {"type": "string", "description": "Destination path."},
    }
    assert params["required"] == ["src", "dst"]


def test_name_and_description_overrides() -> None:
    toolkit = Toolkit()

    tool = toolkit.register(search, name="find", description="Find things.")

    assert tool.name == "find"
    assert toolkit.names == ["find"]
    assert toolkit.schemas()[0].name == "find"
    assert toolkit.schemas()[0].description == "Find things."


def test_runtime_context_parameter_is_hidden_from_the_schema() -> None:
    def whoami(greeting: str, ctx: RuntimeContext) -> str:
        return greeting

    def whoami_opt(ctx: RuntimeContext | None = None) -> str:
        return ""

    tool = Tool.from_function(whoami)
    opt = Tool.from_function(whoami_opt)

    assert tool.context_param == "ctx"
    assert tool.schema.parameters == {
        "type": "object",
        "properties": {"greeting": {"type": "string"}},
        "required": ["greeting"],
    }
    assert opt.context_param == "ctx"
    assert opt.schema.parameters == {"type": "object", "properties": {}}


async def test_runtime_context_parameter_receives_the_calls_context() -> None:
    seen: list[RuntimeContext] = []

    async def whoami(context: RuntimeContext) -> str:
        seen.append(context)
        return f"{context.user_id}@{context.session_id}"

    def whoami_sync(ctx: RuntimeContext | None = None) -> str:
        assert ctx is not None
        seen.append(ctx)
        return str(ctx.user_id)

    toolkit = Toolkit([whoami, whoami_sync])

    result = await toolkit.call(use("whoami"), CTX)
    result_sync = await toolkit.call(use("whoami_sync"), CTX)

    assert result.output == "u1@s1"
    assert result_sync.output == "u1"
    assert seen[0] is CTX
    assert seen[1] is CTX


async def test_a_tool_context_parameter_is_hidden_and_receives_the_call_it_runs_in() -> None:
    seen: list[ToolContext | None] = []

    def note(text: str, running: ToolContext | None = None) -> str:
        seen.append(running)
        return text

    model = ScriptedChatModel(
        [{"tool_calls": [{"name": "note", "input": {"text": "hi"}}]}, {"text": "done"}]
    )
    agent = ReActAgent(name="a", model=model, toolkit=[note])
    smuggled = await agent.toolkit.call(use("note", text="x", running={"agent": "b"}), CTX)
    await agent.toolkit.call(use("note", text="direct"), CTX)

    answer(await agent.call("take a note", ctx=CTX))

    assert Tool.from_function(note).schema.parameters["properties"] == {"text": {"type": "string"}}
    assert smuggled.is_error  # the model cannot pass one in
    [direct, running] = seen
    assert direct is None  # called without an agent's call
    assert running is not None
    assert running.ctx is CTX
    assert running.agent == "a"
    assert running.tool_call.name == "note"
    assert running.tool_call.input == {"text": "hi"}
    assert running.call_id.startswith("call-")
    assert [m.role for m in running.messages] == ["user", "assistant"]
    assert running.messages[0].text == "take a note"


def test_schemas_follow_registration_order_and_changes() -> None:
    def a() -> None: ...
    def b() -> None: ...

    toolkit = Toolkit([a])
    assert [s.name for s in toolkit.schemas()] == ["a"]

    toolkit.register(b)
    assert [s.name for s in toolkit.schemas()] == ["a", "b"]
    assert toolkit.names == ["a", "b"]
    assert len(toolkit) == 2
    assert "b" in toolkit

    toolkit.remove("a")
    toolkit.remove("never-registered")
    assert [s.name for s in toolkit.schemas()] == ["b"]
    assert "a" not in toolkit
    assert toolkit.get("a") is None


def test_decorator_registers_and_returns_the_function() -> None:
    toolkit = Toolkit()

    @toolkit.tool
    def shout(text: str) -> str:
        return text.upper()

    assert shout("x") == "X"
    tool = toolkit.get("shout")
    assert tool is not None
    assert tool.func is shout


# --- registration errors ----------------------------------------------------------------------


def test_duplicate_names_are_rejected() -> None:
    def dup() -> None: ...

    toolkit = Toolkit([dup])

    with pytest.raises(ValueError, match="a tool named 'dup' is already registered"):
        toolkit.register(dup)
    with pytest.raises(ValueError, match="'dup' is already registered"):
        toolkit.register(search, name="dup")
    assert toolkit.names == ["dup"]


def test_var_args_are_rejected() -> None:
    def star(*args: int) -> None: ...
    def double_star(x: int, **kwargs: int) -> None: ...

    with pytest.raises(TypeError, match=r"tool 'star': \*args and \*\*kwargs"):
        Tool.from_function(star)
    with pytest.raises(TypeError, match="tool 'double_star'"):
        Tool.from_function(double_star)


@pytest.mark.parametrize("name", ["", "has space", "dotted.name", "x" * 65, "<lambda>", "é"])
def test_bad_tool_names_are_rejected(name: str) -> None:
    with pytest.raises(ValueError, match="must be 1-64 letters, digits, '_' or '-'"):
        Tool.from_function(search, name=name)


def test_lambda_needs_an_explicit_name() -> None:
    with pytest.raises(ValueError, match="'<lambda>'"):
        Toolkit([lambda: None])
    toolkit = Toolkit()
    toolkit.register(lambda: None, name="noop")
    assert toolkit.names == ["noop"]


@pytest.mark.parametrize("name", ["a", "a-b_C9", "x" * 64])
def test_good_tool_names_are_accepted(name: str) -> None:
    assert Tool.from_function(search, name=name).name == name


# --- running ----------------------------------------------------------------------------------


async def test_arguments_are_validated_and_defaults_applied() -> None:
    toolkit = Toolkit([search])

    result = await toolkit.call(use("search", query="q", tags=["a"], color="red"), CTX)

    assert result == ToolResultBlock(
        id="call_1", name="search", output="q|10|['a']|fast|Color.RED|1.5"
    )


async def test_sync_tool_runs_off_the_event_loop_thread() -> None:
    threads: list[int] = []

    def where() -> str:
        threads.append(threading.get_ident())
        return "ok"

    result = await Toolkit([where]).call(use("where"), CTX)

    assert result.output == "ok"
    assert threads != [threading.get_ident()]
    assert len(threads) == 1


async def test_blocking_sync_tool_does_not_block_the_loop() -> None:
    started = threading.Event()
    release = threading.Event()

    def block() -> str:
        started.set()
        # If this ran on the loop thread, nothing could set `release` and it would time out.
        return "released" if release.wait(timeout=5) else "timed out"

    task = asyncio.create_task(Toolkit([block]).call(use("block"), CTX))
    assert await asyncio.to_thread(started.wait, 5)
    release.set()

    assert (await task).output == "released"


async def test_async_tool_runs_on_the_loop() -> None:
    threads: list[int] = []

    async def where(n: int) -> int:
        threads.append(threading.get_ident())
        await asyncio.sleep(0)
        return n * 2

    result = await Toolkit([where]).call(use("where", n=21), CTX)

    assert result.output == "42"
    assert threads == [threading.get_ident()]


async def test_sync_tool_returning_an_awaitable_is_awaited() -> None:
    async def later() -> str:
        return "awaited"

    def deferred() -> Awaitable[str]:
        return later()

    result = await Toolkit([deferred]).call(use("deferred"), CTX)

    assert result.output == "awaited"


async def test_invalid_argument_type_is_an_error_result_naming_the_field() -> None:
    result = await Toolkit([search]).call(use("search", query="q", limit="many"), CTX)

    assert result.is_error is True
    assert result.id == "call_1"
    assert result.name == "search"
    assert result.output == (
        "Error: invalid arguments for tool 'search': limit: "
        "Input should be a valid integer, unable to parse string as an integer"
    )


async def test_missing_and_unknown_arguments_are_error_results() -> None:
    toolkit = Toolkit([search])

    missing = await toolkit.call(use("search"), CTX)
    unknown = await toolkit.call(use("search", query="q", bogus=1), CTX)
    bad_enum = await toolkit.call(use("search", query="q", mode="slow"), CTX)
    nested = await toolkit.call(use("search", query="q", tags=["ok", 3]), CTX)

    assert missing.is_error
    assert missing.output == "Error: invalid arguments for tool 'search': query: Field required"
    assert unknown.is_error
    assert unknown.output == (
        "Error: invalid arguments for tool 'search': bogus: Extra inputs are not permitted"
    )
    assert bad_enum.is_error
    assert bad_enum.output == (
        "Error: invalid arguments for tool 'search': mode: Input should be 'fast' or 'deep'"
    )
    assert nested.is_error
    assert nested.output == (
        "Error: invalid arguments for tool 'search': tags.1: Input should be a valid string"
    )


async def test_several_invalid_arguments_are_all_named() -> None:
    def pair(a: int, b: int) -> int:
        return a + b

    result = await Toolkit([pair]).call(use("pair", a="x"), CTX)

    assert result.is_error
    assert result.output == (
        "Error: invalid arguments for tool 'pair': a: Input should be a valid integer, "
        "unable to parse string as an integer; b: Field required"
    )


async def test_exception_in_tool_is_an_error_result() -> None:
    async def explode(path: str) -> str:
        raise FileNotFoundError(f"no such file: {path}")

    def explode_sync() -> str:
        msg = "bad state"
        raise RuntimeError(msg)

    toolkit = Toolkit([explode, explode_sync])

    result = await toolkit.call(use("explode", path="a.txt"), CTX)
    result_sync = await toolkit.call(use("explode_sync", call_id="c2"), CTX)

    assert result == ToolResultBlock(
        id="call_1",
        name="explode",
        output="Error: FileNotFoundError: no such file: a.txt",
        is_error=True,
    )
    assert result_sync == ToolResultBlock(
        id="c2", name="explode_sync", output="Error: RuntimeError: bad state", is_error=True
    )


async def test_unknown_tool_lists_available_tools() -> None:
    def alpha() -> None: ...
    def beta() -> None: ...

    result = await Toolkit([alpha, beta]).call(use("gamma"), CTX)
    empty = await Toolkit().call(use("gamma"), CTX)

    assert result == ToolResultBlock(
        id="call_1",
        name="gamma",
        output="Error: unknown tool 'gamma'. Available tools: alpha, beta",
        is_error=True,
    )
    assert empty.output == "Error: unknown tool 'gamma'. Available tools: none"
    assert empty.is_error


class Point(BaseModel):
    x: int
    y: int


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("plain text", "plain text"),
        ("", ""),
        (None, "(no output)"),
        ({"name": "é", "items": [1, None, True]}, '{"name": "é", "items": [1, null, true]}'),
        ([1, 2], "[1, 2]"),
        ([], "[]"),
        (42, "42"),
        (Point(x=1, y=2), '{"x":1,"y":2}'),
        ({"day": date(2024, 1, 2)}, '{"day": "2024-01-02"}'),
    ],
)
async def test_return_values_become_text_output(value: object, expected: str) -> None:
    def produce() -> object:
        return value

    result = await Toolkit([produce]).call(use("produce"), CTX)

    assert result.is_error is False
    assert result.output == expected


async def test_block_return_values_are_kept_as_blocks() -> None:
    blocks: list[TextBlock | ImageBlock] = [
        TextBlock(text="chart:"),
        ImageBlock(data="aGk=", media_type="image/png"),
    ]

    def many() -> list[TextBlock | ImageBlock]:
        return blocks

    def one() -> TextBlock:
        return TextBlock(text="single")

    toolkit = Toolkit([many, one])

    many_result = await toolkit.call(use("many"), CTX)
    one_result = await toolkit.call(use("one"), CTX)

    assert many_result.output == blocks
    assert one_result.output == [TextBlock(text="single")]
    assert many_result.text == "chart:"


async def test_cancellation_propagates_out_of_a_running_tool() -> None:
    started = asyncio.Event()
    finished: list[str] = []

    async def wait_forever() -> str:
        started.set()
        await asyncio.Event().wait()
        finished.append("returned")
        return "never"

    task = asyncio.create_task(Toolkit([wait_forever]).call(use("wait_forever"), CTX))
    await started.wait()
    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()
    assert finished == []


async def test_cancellation_propagates_while_a_sync_tool_runs() -> None:
    started = threading.Event()
    release = threading.Event()

    def block() -> str:
        started.set()
        release.wait(timeout=5)
        return "done"

    task = asyncio.create_task(Toolkit([block]).call(use("block"), CTX))
    assert await asyncio.to_thread(started.wait, 5)
    task.cancel()
    try:
        with pytest.raises(asyncio.CancelledError):
            await task
    finally:
        release.set()


async def test_registered_tool_object_is_reused() -> None:
    tool = Tool.from_function(search)
    run: Callable[..., Any] = tool.func

    toolkit = Toolkit([tool])

    assert toolkit.get("search") is tool
    assert run is search


def test_parameters_named_like_schema_keywords_are_kept() -> None:
    def publish(title: str, description: str = "", type: str = "post") -> str:
        """Publish a post.

        Args:
            title: The headline.
        """
        return title

    params = Tool.from_function(publish).schema.parameters

    assert params == {
        "type": "object",
        "properties": {
            "title": {"type": "string", "description": "The headline."},
            "description": {"type": "string", "default": ""},
            "type": {"type": "string", "default": "post"},
        },
        "required": ["title"],
    }


def test_args_after_another_section_are_still_read() -> None:
    def fetch(url: str, retries: int = 3) -> str:
        """Fetch a page.

        Note:
            Redirects are followed.

        Args:
            url: The page to fetch.
            retries: How often to try again.
        """
        return url

    tool = Tool.from_function(fetch)

    assert tool.description == "Fetch a page."
    assert tool.schema.parameters["properties"] == {
        "url": {"type": "string", "description": "The page to fetch."},
        "retries": {"type": "integer", "default": 3, "description": "How often to try again."},
    }


def test_sections_after_args_stay_out_of_the_description() -> None:
    def fetch(url: str) -> str:
        """Fetch a page.
        Args:
            url: The page to fetch.
        Returns:
            The page's HTML.
        """
        return url

    tool = Tool.from_function(fetch)

    assert tool.description == "Fetch a page."
    assert tool.schema.parameters["properties"]["url"]["description"] == "The page to fetch."


def test_unresolvable_type_hints_name_the_tool() -> None:
    def uses_missing(item: "Missing") -> str:  # type: ignore[name-defined]  # noqa: F821
        """Use a type that does not exist."""
        return "x"

    with pytest.raises(TypeError, match="tool 'uses_missing': cannot resolve its type hints"):
        Tool.from_function(uses_missing)


def test_types_without_a_json_schema_name_the_tool() -> None:
    class Opaque:
        pass

    def uses_opaque(item: Opaque) -> str:
        """Use a type pydantic cannot describe."""
        return "x"

    with pytest.raises(TypeError, match="tool 'uses_opaque': a parameter type cannot be described"):
        Tool.from_function(uses_opaque)


async def test_tools_of_two_instances_call_their_own_instance() -> None:
    # Descriptions are cached per function; the bound instance must not be.
    class Counter:
        def __init__(self, name: str) -> None:
            self.name = name

        async def whoami(self) -> str:
            """Say which counter this is."""
            return self.name

    first = Tool.from_function(Counter("a").whoami)
    second = Tool.from_function(Counter("b").whoami, description="Other text.")
    third = Tool.from_function(Counter("c").whoami)
    ctx = RuntimeContext()

    results = [
        await t.run(ToolUseBlock(id="1", name="whoami"), ctx) for t in (first, second, third)
    ]

    assert [r.output for r in results] == ["a", "b", "c"]
    assert (first.description, second.description) == ("Say which counter this is.", "Other text.")
    assert first.schema == third.schema


async def test_invoke_hands_back_what_the_tool_returned_for_the_loop_to_read() -> None:
    waiting = Paused(({"id": "r1"},), reply=Msg(role="assistant", content="the child waits"))

    async def child() -> Paused:
        """Wait like a subagent whose call waits for approval."""
        return waiting

    toolkit = Toolkit([child])

    assert await toolkit.invoke(use("child"), CTX) is waiting
    unknown = await toolkit.invoke(use("nope"), CTX)
    assert isinstance(unknown, ToolResultBlock)
    assert unknown.is_error


async def test_a_result_block_a_tool_makes_is_bound_to_its_call() -> None:
    def own() -> ToolResultBlock:
        """Answer with a result of its own making."""
        return ToolResultBlock(id="whatever", name="other", output="mine", is_error=True)

    result = await Toolkit([own]).call(use("own", call_id="c9"), CTX)

    assert (result.id, result.name, result.output, result.is_error) == ("c9", "own", "mine", True)
