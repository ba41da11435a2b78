"""Tool-result eviction: huge tool outputs go to a workspace file, the context keeps a pointer.

One shell command or web fetch can return more text than the whole context window holds. When
the text of a tool result is longer than ``max_result_chars`` (strictly), the full text is
written to a file and the result that memory keeps is replaced by a short placeholder: the
size, where the file is, how to read it back in pieces, and the first and last
``preview_chars`` characters. Nothing is lost, and the context stays small.

On disk, in the namespace of the call's user (``users/<user>/`` for a call made for a user,
the workspace root otherwise)::

    <directory>/<agent>/<tool>-<hash>.txt     the full text, UTF-8

``<agent>`` is the agent's name made into one path segment
(:func:`~harness.workspace.safe_segment`). ``<tool>`` is the tool's name with every character
outside ``[A-Za-z0-9_-]`` replaced by ``_``, at most 40 characters, so a person browsing the
directory sees what produced each file. ``<hash>`` is the first 16 hex digits of
SHA-256 over the tool-call id, a NUL byte and the text. The id is hashed, never used as a name:
some providers send ids of more than a kilobyte, which would exceed the file-name limit and
make every write fail (then the huge result would silently stay in context). Hashing the
content with the id means a call id used twice (ids are only unique per response for some
providers, and scripted models restart at ``call_0``) gives two files. A file is never
overwritten: it is written to a temporary name and hard-linked to its final name, which fails
if that name exists; an existing file with the very same bytes is reused, anything else moves
on to ``<tool>-<hash>-2.txt`` and so on. A file under its final name is always complete.

The placeholder keeps the result's id, name and ``is_error`` (a failing command's output can
be as large as a successful one's, so error results are evicted too, and the model still sees
that the call failed); image parts of the output are kept after the placeholder text. Its first
line has a fixed form::

    Tool output was too large (<N> chars, <L> lines) and has been saved to `<path>`.

A result is recognised as an earlier placeholder, and never evicted again, when its text starts
with that exact line *and* the file it names exists in the caller's namespace under
``<directory>/`` with exactly ``N`` characters. A tool whose real output merely starts like a
placeholder is therefore still evicted. (:class:`~harness.kernel.ToolResultBlock` has no
metadata field, so the marker has to live in the text.)

Evicted files are working data, not memory: :func:`delete_old_evictions` removes the ones older
than ``max_age_days`` from every namespace, for the maintenance pass to call.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from harness.errors import PathOutsideWorkspace, StorageError
from harness.kernel import ImageBlock, TextBlock, ToolResultBlock
from harness.workspace import USERS_DIR, WorkspaceManager, normalize, safe_segment, scoped

__all__ = [
    "DEFAULT_EVICTION_DIRECTORY",
    "DEFAULT_EXCLUDED_TOOLS",
    "DEFAULT_MAX_AGE_DAYS",
    "DEFAULT_MAX_RESULT_CHARS",
    "DEFAULT_PREVIEW_CHARS",
    "DEFAULT_TOOL_RESULT_EVICTION",
    "PLACEHOLDER_PREFIX",
    "PlaceholderRef",
    "ToolResultEvictionConfig",
    "delete_old_evictions",
    "evict_tool_result",
    "eviction_stem",
    "evictions_cleanup",
    "parse_placeholder",
    "render_placeholder",
]

logger = logging.getLogger(__name__)

DEFAULT_MAX_RESULT_CHARS: Final = 80_000
"""Results with more text characters than this are evicted (about 20,000 tokens)."""

DEFAULT_PREVIEW_CHARS: Final = 2_000
"""Characters of the head, and of the tail, shown in the placeholder."""

DEFAULT_EVICTION_DIRECTORY: Final = "large_tool_results"
"""Where evicted results go, relative to the caller's namespace of the workspace."""

DEFAULT_EXCLUDED_TOOLS: Final = frozenset(
    {
        "read_file",
        "write_file",
        "edit_file",
        "grep_files",
        "glob_files",
        "list_files",
        "memory_search",
        "memory_get",
        "session_search",
    }
)
"""Tools whose results are never evicted: they read the workspace already (evicting a read
would only make the agent read the copy), and they cap or page their own output. The shell
is deliberately not among them."""

DEFAULT_MAX_AGE_DAYS: Final = 7.0
"""Age after which :func:`delete_old_evictions` removes an evicted file."""

PLACEHOLDER_PREFIX: Final = "Tool output was too large ("
"""How every placeholder starts."""

MAX_TOOL_NAME_CHARS: Final = 40
"""Characters of the (sanitized) tool name kept in an evicted file's name."""

_HASH_HEX: Final = 16
_MAX_NAME_ATTEMPTS: Final = 100
_SECONDS_PER_DAY: Final = 86_400
_UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_FIRST_LINE = re.compile(
    r"Tool output was too large \((?P<chars>\d{1,3}(?:,\d{3})*) chars, "
    r"\d{1,3}(?:,\d{3})* lines?\) and has been saved to `(?P<path>[^`\n]+)`\."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResultEvictionConfig:
    """When tool results are moved out of the context, and where to.

    Args:
        max_result_chars: A result is evicted when its text has strictly more characters.
        preview_chars: Characters of the head and of the tail shown in the placeholder (each
            at most half of the text); 0 shows none.
        directory: Where evicted results go, relative to the caller's namespace of the
            workspace. It must stay inside it: no absolute path, no ``..``, and not under
            ``users/`` (that would reach into users' namespaces).
        excluded_tools: Names of tools whose results are never evicted.
        max_age_days: Age after which :func:`delete_old_evictions` deletes an evicted file.

    Raises:
        ValueError: A field is out of range or the directory leaves the namespace.
    """

    max_result_chars: int = DEFAULT_MAX_RESULT_CHARS
    preview_chars: int = DEFAULT_PREVIEW_CHARS
    directory: str = DEFAULT_EVICTION_DIRECTORY
    excluded_tools: frozenset[str] = DEFAULT_EXCLUDED_TOOLS
    max_age_days: float = DEFAULT_MAX_AGE_DAYS

    def __post_init__(self) -> None:
        if self.max_result_chars < 1:
            msg = f"max_result_chars must be positive, got {self.max_result_chars}"
            raise ValueError(msg)
        if self.preview_chars < 0:
            msg = f"preview_chars must be zero or more, got {self.preview_chars}"
            raise ValueError(msg)
        if not self.max_age_days > 0:
            msg = f"max_age_days must be positive, got {self.max_age_days}"
            raise ValueError(msg)
        object.__setattr__(self, "directory", _checked_directory(self.directory))
        if isinstance(self.excluded_tools, str):
            msg = f"excluded_tools must be a set of names, got the string {self.excluded_tools!r}"
            raise ValueError(msg)
        object.__setattr__(self, "excluded_tools", frozenset(self.excluded_tools))


def _checked_directory(directory: str) -> str:
    text = directory.replace("\\", "/").strip()
    if "`" in text or any(ord(char) < 32 for char in text):
        # The path is quoted in backticks in the placeholder, which must stay parseable.
        msg = f"directory must not contain backticks or control characters, got {directory!r}"
        raise ValueError(msg)
    if text.startswith("/") or re.match(r"[A-Za-z]:", text):
        msg = (
            f"directory must be relative to the workspace, got the absolute path {directory!r}; "
            f"use a relative path such as {DEFAULT_EVICTION_DIRECTORY!r}"
        )
        raise ValueError(msg)
    try:
        rel = normalize(text)
    except PathOutsideWorkspace as exc:
        msg = f"directory must stay inside the workspace, got {directory!r}: {exc}"
        raise ValueError(msg) from exc
    if not rel:
        msg = f"directory must name a folder inside the workspace, got {directory!r}"
        raise ValueError(msg)
    if rel.split("/")[0] == USERS_DIR:
        msg = f"directory must not be under {USERS_DIR}/ (the users' namespaces), got {directory!r}"
        raise ValueError(msg)
    return rel


DEFAULT_TOOL_RESULT_EVICTION: Final = ToolResultEvictionConfig()
"""Tool-result eviction with every default."""


# -- pure helpers ------------------------------------------------------------------------------


def eviction_stem(tool_name: str, call_id: str, data: bytes) -> str:
    """The file name, without extension, under which a result is first tried.

    ``<tool>-<hash>``: the tool's name with every character outside ``[A-Za-z0-9_-]`` replaced
    by ``_`` and cut to 40 characters, and 16 hex digits of SHA-256 over the call id, a NUL byte
    and the result's UTF-8 bytes. At most 57 characters whatever the id, so the name is always
    valid; different content under a reused id gets a different name.

    Args:
        tool_name: The tool that produced the result.
        call_id: The tool call's id, however long.
        data: The result's text, encoded as it is stored.
    """
    tool = _UNSAFE_NAME_CHARS.sub("_", tool_name)[:MAX_TOOL_NAME_CHARS] or "tool"
    digest = hashlib.sha256(call_id.encode("utf-8", "replace") + b"\0" + data).hexdigest()
    return f"{tool}-{digest[:_HASH_HEX]}"


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def render_placeholder(text: str, path: str, preview_chars: int) -> str:
    """The text that replaces an evicted result in the context.

    Layout (``p = min(preview_chars, len(text) // 2)``; the preview part is left out when
    ``p`` is 0)::

        Tool output was too large (<N> chars, <L> lines) and has been saved to `<path>`.
        Read it in pieces, not all at once: call `read_file` with path `<path>`, a line
        `offset` and a `limit`, and continue from the next line until you have what you need.

        Preview (first <p> chars):
        <first p chars>

        ... and last <p> chars:
        <last p chars>

    (The second and third lines above are one line.) Numbers are thousands-separated.

    Args:
        text: The full text of the result.
        path: The workspace path it was saved to, as ``read_file`` takes it.
        preview_chars: The configured preview length.
    """
    lines = text.count("\n") + (0 if text.endswith("\n") else 1)
    head = (
        f"{PLACEHOLDER_PREFIX}{len(text):,} chars, {_count(lines, 'line')}) "
        f"and has been saved to `{path}`.\n"
        f"Read it in pieces, not all at once: call `read_file` with path `{path}`, a line "
        "`offset` and a `limit`, and continue from the next line until you have what you need."
    )
    p = min(preview_chars, len(text) // 2)
    if p <= 0:
        return head
    return (
        f"{head}\n\n"
        f"Preview (first {p:,} chars):\n{text[:p]}\n\n"
        f"... and last {p:,} chars:\n{text[-p:]}"
    )


@dataclass(frozen=True, slots=True)
class PlaceholderRef:
    """What a placeholder's first line says: the evicted text's length and where it is."""

    chars: int
    path: str


def parse_placeholder(text: str) -> PlaceholderRef | None:
    """Read the first line of a placeholder; None when ``text`` does not start like one.

    This only checks the form. Whether the file exists (and so whether ``text`` really is a
    placeholder rather than output that happens to look like one) is for the caller to check.
    """
    if not text.startswith(PLACEHOLDER_PREFIX):
        return None
    match = _FIRST_LINE.fullmatch(text.partition("\n")[0])
    if match is None:
        return None
    return PlaceholderRef(int(match["chars"].replace(",", "")), match["path"])


# -- eviction ----------------------------------------------------------------------------------


async def evict_tool_result(
    workspace: WorkspaceManager,
    result: ToolResultBlock,
    *,
    tool_name: str,
    agent_name: str,
    user_id: str | None,
    config: ToolResultEvictionConfig = DEFAULT_TOOL_RESULT_EVICTION,
) -> ToolResultBlock:
    """Evict one tool result if it is too large; returns the result memory should keep.

    Returns ``result`` itself when nothing is to be done: the tool is excluded, the text is not
    over the limit, the result is already a placeholder, or the file could not be written (a
    warning is logged; keeping the full result is better than losing it). Otherwise returns a
    placeholder with the same id, name and ``is_error``.

    Args:
        workspace: Where the file goes.
        result: The tool's result.
        tool_name: The called tool's name (as the model called it).
        agent_name: The agent's name; evicted files are grouped per agent.
        user_id: The caller's user; the file goes to that user's namespace.
        config: Limits, directory and excluded tools.
    """
    if tool_name in config.excluded_tools:
        return result
    text = result.text
    if len(text) <= config.max_result_chars:
        return result
    if await _is_placeholder(workspace, text, user_id, config):
        return result
    directory = f"{config.directory}/{safe_segment(agent_name)}"
    try:
        name = await _store(workspace, scoped(directory, user_id), tool_name, result.id, text)
    except Exception as exc:  # any failure: keep the result rather than lose it
        logger.warning(
            "could not save the %s-character result of tool %r (call %.80r) under %s: %s; "
            "keeping it in the context",
            f"{len(text):,}",
            tool_name,
            result.id,
            scoped(directory, user_id),
            exc,
        )
        return result
    placeholder = render_placeholder(text, f"{directory}/{name}", config.preview_chars)
    output: str | list[TextBlock | ImageBlock]
    if isinstance(result.output, str):
        output = placeholder
    else:
        images = [part for part in result.output if isinstance(part, ImageBlock)]
        output = [TextBlock(text=placeholder), *images] if images else placeholder
    return result.model_copy(update={"output": output})


async def _is_placeholder(
    workspace: WorkspaceManager, text: str, user_id: str | None, config: ToolResultEvictionConfig
) -> bool:
    """Whether ``text`` is a placeholder this module wrote, backed by its file."""
    ref = parse_placeholder(text)
    if ref is None:
        return False
    try:
        path = normalize(ref.path)
    except PathOutsideWorkspace:
        return False
    if path != ref.path or not path.startswith(f"{config.directory}/"):
        return False
    try:
        stored = await workspace.read_own(path, user_id, limit=None)  # evicted: big by nature
    except (OSError, ValueError):  # a name the file system refuses is not one we wrote
        return False
    return stored is not None and len(stored) == ref.chars


async def _store(
    workspace: WorkspaceManager, directory: str, tool_name: str, call_id: str, text: str
) -> str:
    """Write ``text`` as a new file ``<stem>[-k].txt`` in ``directory``; returns its name.

    Each name is created with a create-only compare-and-set, so nothing is ever overwritten and
    a file under its final name is always complete; a file already holding the same bytes is
    reused (the same result evicted twice).

    Raises:
        StorageError: No free name was found or the file could not be written.
    """
    from harness.filesystem import MISSING

    # A lone surrogate (undecodable bytes a tool passed through) cannot be encoded; replacing
    # it keeps the character count and loses nothing readable.
    data = text.encode("utf-8", "replace")
    stem = eviction_stem(tool_name, call_id, data)
    for name in _names(stem):
        path = f"{directory}/{name}"
        if await workspace.put_bytes(path, data, if_version=MISSING) is not None:
            return name
        existing = await workspace.get_bytes(path)
        if existing is not None and existing[0] == data:
            return name
    msg = f"no free file name for {stem} in {directory} after {_MAX_NAME_ATTEMPTS} attempts"
    raise StorageError(msg)


def _names(stem: str) -> Iterable[str]:
    yield f"{stem}.txt"
    for k in range(2, _MAX_NAME_ATTEMPTS + 1):
        yield f"{stem}-{k}.txt"


# -- cleanup -----------------------------------------------------------------------------------


async def delete_old_evictions(
    workspace: WorkspaceManager,
    config: ToolResultEvictionConfig = DEFAULT_TOOL_RESULT_EVICTION,
    *,
    now: datetime,
) -> list[str]:
    """Delete evicted files older than ``config.max_age_days``, in every namespace.

    Without this the directory only grows (every large output of every session stays
    forever). Looks at ``<directory>/<agent>/`` of the shared namespace and of every
    ``users/<user>/`` namespace, and judges age by modification time. A file that cannot be
    deleted is logged and skipped, so one bad file does not stop the pass. A placeholder still in
    some old session then points to a missing file, which ``read_file`` reports as missing.

    Args:
        workspace: The workspace to clean.
        config: Gives the directory and the age.
        now: The current time, timezone-aware (the maintenance pass's clock).

    Returns:
        The workspace paths (from the workspace root) of the deleted files, sorted.

    Raises:
        ValueError: ``now`` is naive.
    """
    if now.tzinfo is None or now.utcoffset() is None:
        msg = f"now must be timezone-aware, got the naive datetime {now.isoformat()}"
        raise ValueError(msg)
    cutoff = now.timestamp() - config.max_age_days * _SECONDS_PER_DAY
    namespaces = [""] + [f"{USERS_DIR}/{name}/" for name in await workspace.list_dirs(USERS_DIR)]
    deleted: list[str] = []
    for namespace in namespaces:
        base = f"{namespace}{config.directory}"
        for agent in await workspace.list_dirs(base):
            for info in await workspace.list_own(f"{base}/{agent}"):
                if info.modified >= cutoff:
                    continue
                try:
                    await workspace.delete(info.path)
                except (OSError, StorageError) as exc:
                    logger.warning("could not delete old evicted result %s: %s", info.path, exc)
                    continue
                deleted.append(info.path)
    return sorted(deleted)


def evictions_cleanup(
    workspace: WorkspaceManager, config: ToolResultEvictionConfig = DEFAULT_TOOL_RESULT_EVICTION
) -> Callable[[datetime], Awaitable[list[str]]]:
    """:func:`delete_old_evictions` of ``workspace``, as the memory worker's daily cleanup.

    Memory maintenance runs it (``MemoryMaintenance(cleanup=...)``) without importing this
    package, which builds on memory.
    """

    async def cleanup(now: datetime) -> list[str]:
        return await delete_old_evictions(workspace, config, now=now)

    return cleanup
