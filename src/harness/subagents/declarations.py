"""Which subagents an agent may spawn: the built-in one, Python declarations, workspace files.

Sources, in the order the prompt lists them:

1. the built-in ``general-purpose`` subagent (same tools and settings as the parent);
2. declarations given in Python: :class:`SubagentSpec` (a prompt, tools, model) or
   :class:`SubagentFactory` (any function that builds the child);
3. ``subagents/*.md`` in the workspace, and in the caller's namespace
   (``users/<user>/subagents/*.md``, whose files hide shared files of the same name)::

       ---
       name: researcher
       description: Finds and summarizes sources on a topic.
       tools: [read_file, memory_search]     # or "read_file, memory_search"
       model: openai:gpt-4o-mini             # optional; the parent's model by default
       max_iters: 6                          # optional; 10 by default, the parent's at most
       ---
       You are a careful researcher. ...      (the body is the system prompt)

A file with a missing or malformed field is skipped with a warning that names the file and the
problem. The files are the model's to write, so they can narrow an agent (fewer tools, their own
prompt) but not widen it: a ``model:`` that the operator did not list in
``SubagentsConfig.allowed_models`` skips the file, ``tools:`` only keeps tools the parent
has, and ``max_iters:`` is at most the parent's. Two declarations of one name are an error
naming both, wherever they come from: the original silently kept the last one, so the model
could spawn a different agent than the one the prompt described.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from harness.errors import ConfigError
from harness.kernel import ChatModel
from harness.workspace import SUBAGENTS_DIR, WorkspaceManager
from harness.workspace.frontmatter import FrontMatterError, parse_front_matter, string_list

if TYPE_CHECKING:
    from harness.subagents.children import SubagentAgent

__all__ = [
    "DEFAULT_SUBAGENT_MAX_ITERS",
    "GENERAL_PURPOSE",
    "Declaration",
    "SubagentCatalog",
    "SubagentFactory",
    "SubagentSpec",
    "general_purpose",
    "parse_declaration",
]

logger = logging.getLogger(__name__)

GENERAL_PURPOSE: Final = "general-purpose"
DEFAULT_SUBAGENT_MAX_ITERS: Final = 10
PYTHON_SOURCE: Final = "HarnessAgent(subagents=...)"

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")

GENERAL_PURPOSE_DESCRIPTION: Final = (
    "A general-purpose subagent with the same tools and settings as you, for any complex, "
    "self-contained task you can hand over completely."
)
GENERAL_PURPOSE_PROMPT: Final = (
    "You are a capable general-purpose subagent. Work through the task you are given on your "
    "own and report what you found or did."
)


def general_purpose(max_iters: int) -> SubagentSpec:
    """The built-in subagent: the parent's tools and settings, for any delegable task."""
    return SubagentSpec(
        name=GENERAL_PURPOSE,
        description=GENERAL_PURPOSE_DESCRIPTION,
        sys_prompt=GENERAL_PURPOSE_PROMPT,
        max_iters=max_iters,
        source="the built-in general-purpose subagent",
    )


def _check_name(name: str, source: str) -> None:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        msg = (
            f"subagent name {name!r} ({source}) must be 1-64 letters, digits, '-', '_' or '.', "
            "starting with a letter or digit"
        )
        raise ConfigError(msg)


def _check_description(description: object, name: str, source: str) -> None:
    if not isinstance(description, str) or not description.strip():
        msg = f"subagent {name!r} ({source}) needs a non-empty description"
        raise ConfigError(msg)


@dataclass(frozen=True, kw_only=True)
class SubagentSpec:
    """A subagent built as a leaf :class:`~harness.HarnessAgent` from a prompt.

    Args:
        name: The id the model passes to ``agent_spawn``.
        description: What it is for; the model reads it to choose.
        sys_prompt: Its system prompt (the subagent-context section is added to it).
        tools: Allow-list of the child's tool names; None keeps every inherited tool.
        model: Its model or a model spec; None uses the parent's model.
        max_iters: Reasoning steps per call.
        source: Where it was declared, for error messages.
    """

    name: str
    description: str
    sys_prompt: str = ""
    tools: tuple[str, ...] | None = None
    model: ChatModel | str | None = None
    max_iters: int = DEFAULT_SUBAGENT_MAX_ITERS
    source: str = PYTHON_SOURCE

    def __post_init__(self) -> None:
        _check_name(self.name, self.source)
        _check_description(self.description, self.name, self.source)
        if isinstance(self.max_iters, bool) or not isinstance(self.max_iters, int):
            msg = f"subagent {self.name!r} ({self.source}): max_iters must be an integer"
            raise ConfigError(msg)
        if self.max_iters < 1:
            msg = f"subagent {self.name!r} ({self.source}): max_iters must be at least 1"
            raise ConfigError(msg)
        if self.tools is not None:
            object.__setattr__(self, "tools", tuple(self.tools))


@dataclass(frozen=True, kw_only=True)
class SubagentFactory:
    """A subagent built by your own function from the options its parent passes down.

    ``build`` receives the child's :class:`~harness.AgentOptions`: the parent's options as it
    runs them (its model, workspace, tools, hooks, memory and compaction settings...), with
    this declaration's name, the subagent context as the prompt and no subagents
    (``docs/subagents.md``, "What a child inherits"). It returns any agent with
    ``async call(text, *, ctx) -> Msg``: ``HarnessAgent.from_options(replace(options, ...))``,
    a :class:`~harness.kernel.ReActAgent`, or your own. (The argument is typed ``Any`` here
    because the options module builds on this one; annotate yours with ``AgentOptions``.)
    """

    name: str
    description: str
    build: Callable[[Any], SubagentAgent]
    source: str = PYTHON_SOURCE

    def __post_init__(self) -> None:
        _check_name(self.name, self.source)
        _check_description(self.description, self.name, self.source)
        if not callable(self.build):
            msg = f"subagent {self.name!r} ({self.source}): build must be callable"
            raise ConfigError(msg)


Declaration = SubagentSpec | SubagentFactory


def parse_declaration(text: str, source: str) -> SubagentSpec:
    """A :class:`SubagentSpec` from a ``subagents/*.md`` file.

    Raises:
        ConfigError: A required field is missing or a field is malformed; the message names
            ``source`` and the problem.
    """
    try:
        data, body = parse_front_matter(text)
        tools = string_list(data["tools"], "tools") if data.get("tools") is not None else None
    except FrontMatterError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    for key in ("name", "description"):
        if not isinstance(data.get(key), str) or not data[key].strip():
            msg = f"{source}: the front matter needs '{key}' (a non-empty string)"
            raise ConfigError(msg)
    model = data.get("model")
    if model is not None and (not isinstance(model, str) or not model.strip()):
        msg = f"{source}: 'model' must be a model spec such as 'openai:gpt-4o-mini'"
        raise ConfigError(msg)
    max_iters: Any = data.get("max_iters", data.get("maxIters", DEFAULT_SUBAGENT_MAX_ITERS))
    if isinstance(max_iters, bool) or not isinstance(max_iters, int) or max_iters < 1:
        msg = f"{source}: 'max_iters' must be a positive integer, got {max_iters!r}"
        raise ConfigError(msg)
    return SubagentSpec(
        name=data["name"].strip(),
        description=" ".join(data["description"].split()),
        sys_prompt=body,
        tools=tools,
        model=model.strip() if model else None,
        max_iters=max_iters,
        source=source,
    )


class SubagentCatalog:
    """The subagents available to a caller: built-in, Python, and the workspace's files.

    The workspace's files are read (off the event loop) at most once per ``refresh_seconds``
    per user, so edits show up within a second without a directory walk at every step. They are
    the model's to write, so they may only narrow the parent: a model outside
    ``allowed_models`` skips the file, and ``max_iters`` above ``max_declared_iters`` (the
    parent's steps) is lowered to it.
    """

    def __init__(
        self,
        workspace: WorkspaceManager,
        declarations: Sequence[Declaration] = (),
        *,
        general_purpose: SubagentSpec | None = None,
        refresh_seconds: float = 1.0,
        allowed_models: Iterable[str] = (),
        max_declared_iters: int | None = None,
    ) -> None:
        self.workspace = workspace
        self.refresh_seconds = refresh_seconds
        self.allowed_models = frozenset(allowed_models)
        self.max_declared_iters = max_declared_iters
        fixed = [general_purpose] if general_purpose is not None else []
        self._fixed = _by_name([*fixed, *declarations])
        self._cache: dict[str | None, tuple[float, dict[str, Declaration]]] = {}

    async def entries(self, user_id: str | None) -> dict[str, Declaration]:
        """Every subagent the caller may spawn, by name, in the order the prompt lists them.

        A file declaring a name already taken (by the operator's declarations, the built-in
        one, or a file earlier in name order) is skipped with a warning: the model writes these
        files, and one it got wrong must not stop every later call.
        """
        cached = self._cache.get(user_id)
        now = time.monotonic()
        if cached is not None and now - cached[0] < self.refresh_seconds:
            return cached[1]
        entries = dict(self._fixed)
        for spec in await self._load_files(user_id):
            earlier = entries.get(spec.name)
            if earlier is not None:
                logger.warning(
                    "skipped subagent declaration %s: the name %r is taken by %s; rename it",
                    spec.source,
                    spec.name,
                    earlier.source,
                )
                continue
            entries[spec.name] = spec
        self._cache[user_id] = (now, entries)
        return entries

    async def _load_files(self, user_id: str | None) -> list[SubagentSpec]:
        paths = [
            path
            for path in await self.workspace.list_files(SUBAGENTS_DIR, user_id)
            if path.endswith(".md") and path.count("/") == 1
        ]
        found = await self.workspace.read_first(paths, user_id)
        specs = []
        for path in paths:
            entry = found.get(path)
            if entry is None:  # empty, or removed since it was listed
                logger.warning("skipped subagent declaration %s: the file is empty", path)
                continue
            try:
                spec = parse_declaration(entry.text, entry.path)
            except ConfigError as exc:
                logger.warning("skipped subagent declaration %s", exc)
                continue
            if isinstance(spec.model, str) and spec.model not in self.allowed_models:
                logger.warning(
                    "skipped subagent declaration %s: its model %r is not one the operator "
                    "allows (SubagentsConfig.allowed_models: %s); without 'model:' it runs on "
                    "the parent's model",
                    entry.path,
                    spec.model,
                    ", ".join(sorted(self.allowed_models)) or "none",
                )
                continue
            limit = self.max_declared_iters
            if limit is not None and spec.max_iters > limit:
                logger.warning(
                    "subagent declaration %s asks for max_iters %d; it gets the parent's %d",
                    entry.path,
                    spec.max_iters,
                    limit,
                )
                spec = dataclasses.replace(spec, max_iters=limit)
            specs.append(spec)
        return specs


def _by_name(declarations: Iterable[Declaration]) -> dict[str, Declaration]:
    entries: dict[str, Declaration] = {}
    for declaration in declarations:
        earlier = entries.get(declaration.name)
        if earlier is not None:
            msg = (
                f"two subagents are named {declaration.name!r}: one in {earlier.source}, "
                f"one in {declaration.source}; rename or remove one of them"
            )
            raise ConfigError(msg)
        entries[declaration.name] = declaration
    return entries
