"""Tools: plain Python functions the model may call.

A tool is any function, sync or async. Its JSON schema comes from the signature and the
Google-style docstring: the first paragraph describes the tool, the ``Args:`` section describes
each parameter, a parameter with a default is optional in the schema, and ``X | None = None``
is offered to the model as an optional ``X``. A parameter annotated :class:`RuntimeContext` is
not shown to the model; it receives the context of the call that runs the tool. Nor is one
annotated :class:`~harness.kernel.ToolContext` (or ``ToolContext | None``): it receives the
call the tool runs in (:mod:`harness.kernel.tool_context`), None when the tool is called
without one.

Running a tool never raises into the agent loop: unknown tools, arguments that fail validation
and exceptions inside the tool all come back as a :class:`ToolResultBlock` with
``is_error=True`` and a message the model can act on. A tool whose work waits for a decision (a
subagent whose own call waits for approval) returns a :class:`~harness.kernel.Paused` instead
of a result, and its call pauses with it: the agent reads every tool's value
(:meth:`Toolkit.invoke`), the toolkit never looks at what it is. A tool that refuses
or fails without raising returns its message as a :class:`ToolFailure`, which is marked
``is_error`` too. Sync tools run in a worker thread so they cannot block the event loop.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import re
import types
import weakref
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, Union, get_args, get_origin, get_type_hints

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PydanticUserError,
    ValidationError,
    create_model,
)

from harness.context import RuntimeContext
from harness.kernel.message import ImageBlock, TextBlock, ToolResultBlock, ToolUseBlock
from harness.kernel.model import INVALID_ARGUMENTS_KEY, ToolSchema
from harness.kernel.tool_context import ToolContext

__all__ = ["Tool", "ToolFailure", "Toolkit", "Vouched"]

logger = logging.getLogger(__name__)

_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters):\s*$")
_SECTION_HEADER = re.compile(r"^\s*[A-Z][A-Za-z ]*:\s*$")
_ARG_LINE = re.compile(r"^\s*\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its description and per-argument descriptions."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    args: dict[str, str] = {}
    current: str | None = None
    in_args = False
    in_description = True
    arg_indent = 0
    for line in lines:
        if _ARGS_HEADER.match(line):
            in_args, current, in_description = True, None, False
            continue
        if in_args:
            if _SECTION_HEADER.match(line) and not line.startswith(" "):
                in_args, current = False, None
                continue
            indent = len(line) - len(line.lstrip())
            match = _ARG_LINE.match(line)
            if match and (current is None or indent <= arg_indent):
                current, arg_indent = match.group(1), indent
                args[current] = match.group(2).strip()
            elif current is not None and line.strip():
                args[current] = f"{args[current]} {line.strip()}".strip()
            continue
        if _SECTION_HEADER.match(line) and not line.startswith(" "):
            # The description ends at the first section; keep looking for ``Args:``.
            in_description = False
        elif in_description:
            description.append(line)
    text = "\n".join(description).strip()
    return text.split("\n\n")[0].replace("\n", " ").strip(), args


def _strip_none(annotation: Any) -> Any:
    """``X | None`` -> ``X`` (for a parameter whose default is None)."""
    if get_origin(annotation) in (Union, types.UnionType):
        members = [arg for arg in get_args(annotation) if arg is not type(None)]
        if len(members) == 1:
            return members[0]
    return annotation


def _clean_schema(node: Any) -> Any:
    """Drop pydantic's ``title`` keys, which only add noise for the model."""
    if isinstance(node, dict):
        return {
            key: _clean_schema(value)
            for key, value in node.items()
            if not (key == "title" and isinstance(value, str))
        }
    if isinstance(node, list):
        return [_clean_schema(item) for item in node]
    return node


class ToolFailure(str):
    """A tool's answer that reports a failure: the text the model reads, marked ``is_error``.

    Return it instead of raising when the message is already the one the model should see
    (``return ToolFailure("Error: no such file")``); it is a ``str``, so callers that compare
    a tool's answer as text keep working.
    """

    __slots__ = ()


class Vouched(str):
    """A harness tool's answer, with how far the harness vouches for it (``trust``).

    The memory tools answer with the user's own memory, labelled: reading it must not lower
    what the model writes next as a web page does. ``trust`` becomes the result's
    :attr:`~harness.kernel.ToolResultBlock.trust`; only the harness's code makes one.
    """

    trust: str

    def __new__(cls, text: str, trust: str) -> Vouched:
        made = super().__new__(cls, text)
        made.trust = trust
        return made


@dataclass(frozen=True, slots=True)
class Tool:
    """A registered tool: the function, its schema and how to call it."""

    name: str
    description: str
    func: Callable[..., Any]
    input_model: type[BaseModel]
    schema: ToolSchema
    context_param: str | None
    tool_context_param: str | None = None

    @classmethod
    def from_function(
        cls, func: Callable[..., Any], *, name: str | None = None, description: str | None = None
    ) -> Tool:
        """Build a tool from a function's signature and docstring.

        Describing a function is slow (pydantic builds a model and its JSON schema), and
        agents are built often (a subagent per spawn, an agent per request), each with new
        bound methods of the same functions: the description is cached per function.
        """
        underlying = getattr(func, "__func__", func)
        key = (inspect.ismethod(func), name, description)
        try:
            cached = _DESCRIBED.get(underlying, {}).get(key)
        except TypeError:  # not weakly referenceable: described every time
            return cls._describe(func, name, description)
        if cached is None:
            cached = cls._describe(func, name, description)
            _DESCRIBED.setdefault(underlying, {})[key] = cached
        return replace(cached, func=func)

    @classmethod
    def _describe(cls, func: Callable[..., Any], name: str | None, description: str | None) -> Tool:
        tool_name = name if name is not None else getattr(func, "__name__", "")
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", tool_name):
            msg = f"tool name {tool_name!r} must be 1-64 letters, digits, '_' or '-'"
            raise ValueError(msg)
        summary, arg_docs = _parse_docstring(inspect.getdoc(func))
        try:
            hints = get_type_hints(func)
        except NameError as exc:
            msg = (
                f"tool {tool_name!r}: cannot resolve its type hints ({exc}); define the types "
                "it uses at module level"
            )
            raise TypeError(msg) from exc
        fields: dict[str, Any] = {}
        context_param: str | None = None
        tool_context_param: str | None = None
        for param in inspect.signature(func).parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                msg = f"tool {tool_name!r}: *args and **kwargs cannot be described to a model"
                raise TypeError(msg)
            annotation = hints.get(param.name, Any)
            if annotation is RuntimeContext or _strip_none(annotation) is RuntimeContext:
                context_param = param.name
                continue
            if annotation is ToolContext or _strip_none(annotation) is ToolContext:
                tool_context_param = param.name
                continue
            doc = arg_docs.get(param.name)
            if param.default is inspect.Parameter.empty:
                fields[param.name] = (annotation, Field(description=doc))
            else:
                if param.default is None:
                    annotation = _strip_none(annotation) | None
                fields[param.name] = (annotation, Field(default=param.default, description=doc))
        try:
            model = create_model(
                f"{tool_name}_input", __config__=ConfigDict(extra="forbid"), **fields
            )
            parameters = _clean_schema(model.model_json_schema())
        except PydanticUserError as exc:
            msg = (
                f"tool {tool_name!r}: a parameter type cannot be described as JSON schema "
                f"({str(exc).splitlines()[0]}); use JSON types, dataclasses or pydantic models"
            )
            raise TypeError(msg) from exc
        for prop_name, prop in parameters.get("properties", {}).items():
            if fields[prop_name][1].default is None and "anyOf" in prop:
                options = [opt for opt in prop.pop("anyOf") if opt.get("type") != "null"]
                prop.pop("default", None)
                prop.update(options[0] if len(options) == 1 else {"anyOf": options})
        parameters.pop("additionalProperties", None)
        parameters.setdefault("properties", {})
        text = description if description is not None else summary
        schema = ToolSchema(name=tool_name, description=text, parameters=parameters)
        return cls(tool_name, text, func, model, schema, context_param, tool_context_param)

    async def run(
        self, call: ToolUseBlock, ctx: RuntimeContext, context: ToolContext | None = None
    ) -> ToolResultBlock:
        """Validate the arguments, run the function, and wrap whatever happens as a result."""
        return tool_result(call, await self.invoke(call, ctx, context))

    async def invoke(
        self, call: ToolUseBlock, ctx: RuntimeContext, context: ToolContext | None = None
    ) -> Any:
        """Validate the arguments and run the function: its value as it returned it.

        A call that could not run (its arguments do not validate) or that raised is its error
        result. The agent reads the value (:func:`tool_result`), so that a value the loop must
        see as it is (a :class:`~harness.kernel.Paused`) reaches it unwrapped.
        """
        raw = call.input.get(INVALID_ARGUMENTS_KEY)
        if isinstance(raw, str):
            shown = raw if len(raw) <= 200 else raw[:200] + "..."
            return _error(
                call,
                f"the arguments of tool '{self.name}' are not a JSON object: {shown!r}; "
                "call it again with a JSON object that matches its schema",
            )
        try:
            parsed = self.input_model.model_validate(call.input)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'input'}: {err['msg']}"
                for err in exc.errors()
            )
            return _error(call, f"invalid arguments for tool '{self.name}': {problems}")
        kwargs = {key: getattr(parsed, key) for key in type(parsed).model_fields}
        if self.context_param is not None:
            kwargs[self.context_param] = ctx
        if self.tool_context_param is not None:
            kwargs[self.tool_context_param] = context
        if inspect.iscoroutinefunction(self.func):
            return await _guarded(call, lambda: self.func(**kwargs))
        return await _guarded(call, lambda: asyncio.to_thread(self.func, **kwargs))


async def _guarded(call: ToolUseBlock, work: Callable[[], Awaitable[Any]]) -> Any:
    """What ``work`` returns (awaited again if it is awaitable), or its error as the result.

    A tool's failure is the model's to read, never the loop's to raise.
    """
    try:
        value = await work()
        if inspect.isawaitable(value):
            value = await value
    except Exception as exc:
        logger.debug("tool %s failed", call.name, exc_info=True)
        return _error(call, f"{type(exc).__name__}: {exc}")
    return value


def tool_result(call: ToolUseBlock, value: Any) -> ToolResultBlock:
    """A tool's value as the result the model reads for ``call``.

    A :class:`ToolFailure` is an error result; a :class:`ToolResultBlock` (a call that could
    not run, or a tool that made its own result) is taken as it is, bound to ``call``.
    """
    if isinstance(value, ToolResultBlock):
        return value.model_copy(update={"id": call.id, "name": call.name})
    return ToolResultBlock(
        id=call.id,
        name=call.name,
        output=_to_output(value),
        is_error=isinstance(value, ToolFailure),
        trust=value.trust if isinstance(value, Vouched) else None,
    )


_DESCRIBED: weakref.WeakKeyDictionary[
    Callable[..., Any], dict[tuple[bool, str | None, str | None], Tool]
] = weakref.WeakKeyDictionary()


def _error(call: ToolUseBlock, text: str) -> ToolResultBlock:
    return ToolResultBlock(id=call.id, name=call.name, output=f"Error: {text}", is_error=True)


def _to_output(value: Any) -> str | list[TextBlock | ImageBlock]:
    if isinstance(value, str):
        return value
    if value is None:
        return "(no output)"
    if isinstance(value, TextBlock | ImageBlock):
        return [value]
    if (
        isinstance(value, list)
        and value
        and all(isinstance(v, TextBlock | ImageBlock) for v in value)
    ):
        return list(value)
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return json.dumps(value, ensure_ascii=False, default=str)


class Toolkit:
    """The tools an agent offers its model, by name."""

    def __init__(self, tools: Iterable[Callable[..., Any] | Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._schemas: list[ToolSchema] | None = None
        for tool in tools:
            self.register(tool)

    def register(
        self,
        func: Callable[..., Any] | Tool,
        *,
        name: str | None = None,
        description: str | None = None,
    ) -> Tool:
        """Add a function or a prepared :class:`Tool`; a second tool of one name is an error."""
        tool = (
            func
            if isinstance(func, Tool)
            else Tool.from_function(func, name=name, description=description)
        )
        if tool.name in self._tools:
            msg = f"a tool named {tool.name!r} is already registered"
            raise ValueError(msg)
        self._tools[tool.name] = tool
        self._schemas = None
        return tool

    def tool(self, func: Callable[..., Any]) -> Callable[..., Any]:
        """Decorator form of :meth:`register`; returns the function unchanged."""
        self.register(func)
        return func

    def remove(self, name: str) -> None:
        """Remove a tool; removing an absent tool is not an error."""
        if self._tools.pop(name, None) is not None:
            self._schemas = None

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    @property
    def tools(self) -> list[Tool]:
        return list(self._tools.values())

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def schemas(self) -> list[ToolSchema]:
        """The schemas of every tool, in registration order (cached until the set changes)."""
        if self._schemas is None:
            self._schemas = [tool.schema for tool in self._tools.values()]
        return self._schemas

    async def call(
        self, call: ToolUseBlock, ctx: RuntimeContext, context: ToolContext | None = None
    ) -> ToolResultBlock:
        """Run one tool call, in ``context`` when an agent runs it; raises only on cancellation."""
        return tool_result(call, await self.invoke(call, ctx, context))

    async def invoke(
        self,
        call: ToolUseBlock,
        ctx: RuntimeContext,
        context: ToolContext | None = None,
        *,
        instead: Callable[[], Awaitable[Any]] | None = None,
    ) -> Any:
        """Run one tool call and return its value unread (:meth:`Tool.invoke`).

        With ``instead``, that runs in the tool's place (a hook's :class:`~harness.kernel.Run`
        said so), its value and its failure read as the tool's would be.
        """
        if instead is not None:
            return await _guarded(call, instead)
        tool = self._tools.get(call.name)
        if tool is None:
            available = ", ".join(self._tools) or "none"
            return _error(call, f"unknown tool '{call.name}'. Available tools: {available}")
        return await tool.invoke(call, ctx, context)
