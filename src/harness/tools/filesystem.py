r"""The model's filesystem tools, over any backend of the file-tool contract.

The backend is a :class:`~harness.filesystem.FileTools` (every built-in backend is one).

Six tools, as in the original's ``FilesystemTool``, and ``execute`` when the backend is a
:class:`~harness.filesystem.ShellFilesystem`. Each answers with text the model can act on, never
an exception:

- ``read_file(path, offset?, limit?)``: numbered lines (``<n>\t<text>``) from a 0-based
  ``offset``, at most ``limit`` (200) of them, lines longer than 2,000 characters cut, at most
  20,000 characters per read, and a last line saying where to continue (evicted tool results'
  placeholders tell the model to read them back this way). An empty file
  reads as ``System reminder: File exists but has empty contents``; a binary file is described,
  not dumped.
- ``write_file(path, content)``: ``Written to <path>``; an existing file is refused.
- ``edit_file(path, old_string, new_string, replace_all?)``: ``Edited <path> (<n>
  replacement(s))``.
- ``grep_files(pattern, path?, glob?)``: ``<path>:<line>:<text>`` lines, or ``No matches found``.
- ``glob_files(pattern, path?)``: ``<path> (<size> bytes)`` lines, or ``No matching files found``.
- ``list_files(path?)``: ``[DIR]  <path>`` / ``[FILE] <path> (<size> bytes)`` lines, or ``Empty or
  not a directory: <path>``.
- ``execute(command, working_directory?, timeout?)``: ``Exit code: <n>``, then a blank line and the
  output when there is any, then ``(output was truncated)`` when it was cut.

Failures read ``Error: <message>`` and are error results (``is_error``): every one takes one
path, ``_answers``. Listings are capped (200 lines, 20,000 characters) with a
last line saying how many more there were, so no single call floods the context. A call still
waiting after ``timeout_seconds`` (60 s; the backends bound their own work, so only a disk
that hangs gets there) is given up on with an error saying so.

Every tool takes the call's :class:`~harness.context.RuntimeContext` (injected by the toolkit,
hidden from the model) and hands it to the backend, whose namespace keeps users apart. Paths are
checked here as well (``..``, ``~``, NUL bytes, over-long names, another user's namespace) so a
bad path gets the same error whatever the backend. A user's ``read_file`` of a path they do not
have falls back to the shared file of that path (the shared AGENTS.md and knowledge files the
prompt lists), except under ``users/``; writes and edits always go to the user's own namespace.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import functools
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, TypeVar

from harness.context import RuntimeContext
from harness.errors import HarnessError, StorageError
from harness.filesystem.base import (
    FileInfo,
    FileTools,
    FsError,
    FsErrorCode,
    IsolationScope,
    ShellFilesystem,
    check_path,
)
from harness.kernel.toolkit import ToolFailure
from harness.layout import KEPT_BY_HARNESS, USERS_DIR, kept_by_harness, shared_with_users
from harness.paths import normalize

__all__ = [
    "DEFAULT_TOOL_SECONDS",
    "EMPTY_FILE_REMINDER",
    "MAX_LIST_CHARS",
    "MAX_LIST_LINES",
    "MAX_NAME_BYTES",
    "FilesystemTools",
]

_T = TypeVar("_T")

DEFAULT_TOOL_SECONDS: Final = 60.0
"""How long one file tool call may take before the model is told it was given up on."""

DEFAULT_READ_LIMIT: Final = 200
"""Lines one read returns when no limit is given."""

MAX_READ_CHARS: Final = 20_000
"""Characters one read returns at most, whatever the limit."""

MAX_LINE_CHARS: Final = 2_000
"""A longer line is shortened, with a marker saying so."""

EMPTY_FILE_REMINDER: Final = "System reminder: File exists but has empty contents"
"""What ``read_file`` answers for an empty file (the original's text)."""

MAX_LIST_LINES: Final = 200
"""Lines a grep, glob or listing returns at most; a last line counts the rest."""

MAX_LIST_CHARS: Final = MAX_READ_CHARS
"""Characters a grep, glob or listing returns at most."""

MAX_NAME_BYTES: Final = 255
"""The longest path segment (in UTF-8 bytes) most filesystems accept."""

_MAX_INLINE_BASE64: Final = MAX_LINE_CHARS
"""A binary file whose base64 is at most this long is shown; a bigger one is only described."""


class _Refused(Exception):
    """A file tool refuses a call or reports its failure; the message says what went wrong."""


def _refusal(error: FsError | None, fallback: str = "the operation failed") -> _Refused:
    return _Refused(error.message if error is not None else fallback)


_Method = Callable[..., Awaitable[str]]


def _answers(method: _Method) -> _Method:
    """The one path a file tool's answer takes: a refusal or a failure is an error result.

    A tool raises :class:`_Refused` (or lets a storage or path error through) for everything
    it did not do; here that becomes ``Error: <message>`` as a
    :class:`~harness.kernel.ToolFailure`, so the result is marked ``is_error`` (traces, the
    events API and OpenTelemetry count it as a failure) whatever the tool and the reason.
    """

    @functools.wraps(method)
    async def answer(*args: Any, **kwargs: Any) -> str:
        try:
            return await method(*args, **kwargs)
        except (_Refused, HarnessError, OSError, ValueError) as exc:
            return ToolFailure(f"Error: {exc}")

    return answer


def _cut(text: str) -> str:
    """One line shortened to :data:`MAX_LINE_CHARS`, with the marker ``read_file`` uses."""
    if len(text) > MAX_LINE_CHARS:
        return f"{text[:MAX_LINE_CHARS]}... [line cut: {len(text):,} chars]"
    return text


def _capped(rows: Sequence[str], what: str, *, stopped: bool = False) -> str:
    """Join rows, stopping at :data:`MAX_LIST_LINES` lines or :data:`MAX_LIST_CHARS` chars.

    ``stopped``: the search itself stopped after these rows, so how many more there are is
    not known.
    """
    shown: list[str] = []
    used = 0
    for row in rows:
        if len(shown) >= MAX_LIST_LINES or (shown and used + len(row) > MAX_LIST_CHARS):
            break
        shown.append(row)
        used += len(row) + 1
    rest = len(rows) - len(shown)
    if stopped:
        shown.append(
            f"... (more than {rest:,} more {what} not shown: the search stopped at "
            f"{len(rows):,}; narrow the path or pattern to see them)"
        )
    elif rest:
        shown.append(
            f"... ({rest:,} more {what} not shown; narrow the path or pattern to see them)"
        )
    return "\n".join(shown)


def _lines(content: str) -> list[str]:
    """The lines of a read's content: split at newlines, a CR before one dropped."""
    if not content:
        return []
    parts = content.split("\n")
    if parts[-1] == "":
        parts.pop()
    return [part.removesuffix("\r") for part in parts]


def _in_users(path: str) -> bool:
    """Whether a path is ``users/`` or in it (in any letter case: disks may ignore case)."""
    try:
        rel = normalize(path)
    except HarnessError:
        return True  # not a path a listing or a fallback should ever use
    return rel.split("/", 1)[0].casefold() == USERS_DIR


def _size(info: FileInfo) -> str:
    return f"{info.path} ({info.size} bytes)"


class FilesystemTools:
    """``read_file``, ``write_file``, ``edit_file``, ``grep_files``, ``glob_files``,
    ``list_files`` and, for a shell backend, ``execute``, over one filesystem.

    Args:
        fs: The backend. Its isolation scope decides where each call's paths live; the tools
            only pass the call's context on.
    """  # noqa: D205 (the tool names do not fit on one line)

    def __init__(self, fs: FileTools, *, timeout_seconds: float = DEFAULT_TOOL_SECONDS) -> None:
        if not isinstance(fs, FileTools):
            kind = type(fs).__name__
            msg = f"FilesystemTools needs a FileTools (an AbstractFilesystem), got {kind}"
            raise TypeError(msg)
        if not timeout_seconds > 0:
            msg = f"FilesystemTools timeout_seconds must be positive, got {timeout_seconds!r}"
            raise ValueError(msg)
        self.fs = fs
        self.timeout_seconds = timeout_seconds

    async def _bounded(self, operation: Awaitable[_T]) -> _T:
        """``operation``, given up on after ``timeout_seconds`` (a disk that hangs).

        The backends bound their own work (sizes, a walk's deadline), so this is the last line:
        the model gets an answer even when a disk stops answering, and the operation's thread
        stays in its namespace's lane until it returns.

        Raises:
            StorageError: The time ran out; whether a write was applied is then unknown.
        """
        try:
            async with asyncio.timeout(self.timeout_seconds):
                return await operation
        except TimeoutError:
            msg = (
                f"the file operation took longer than {self.timeout_seconds:g} s and was given up "
                "on (the disk may be slow); whether a write was applied is unknown: read the "
                "file to see"
            )
            raise StorageError(msg) from None

    def tools(self) -> list[Callable[..., Any]]:
        """The tools to register; ``execute`` only when the backend can run commands."""
        found: list[Callable[..., Any]] = [
            self.read_file,
            self.write_file,
            self.edit_file,
            self.grep_files,
            self.glob_files,
            self.list_files,
        ]
        if isinstance(self.fs, ShellFilesystem):
            found.append(self.execute)
        return found

    # -- path checks ---------------------------------------------------------------------

    def _check(
        self, path: str, ctx: RuntimeContext, *, required: bool = False, writing: bool = False
    ) -> None:
        """Refuse a path no backend should be given.

        The backend checks again; checking here gives every backend the same answer and keeps
        a path that cannot be right from reaching storage at all. ``writing``: the harness's
        own records (:data:`~harness.layout.KEPT_BY_HARNESS`) are refused too, whatever the
        backend.

        Raises:
            _Refused: What is wrong with the path.
        """
        if required and not path.strip():
            raise _Refused("path is required")
        try:
            check_path(path, self.fs.scope, ctx)
            kept = writing and kept_by_harness(normalize(path))
        except HarnessError as exc:
            raise _Refused(f"{exc}") from None
        if kept:
            raise _Refused(
                f"{path} is in {KEPT_BY_HARNESS}/, where the harness keeps its own "
                "records (sessions, transcripts, tasks, traces); read them, but write elsewhere"
            )
        for segment in path.replace("\\", "/").split("/"):
            size = len(segment.encode("utf-8", "surrogatepass"))
            if size > MAX_NAME_BYTES:
                raise _Refused(
                    f"a name in path {path[:80]!r}... is {size} bytes long; names are at "
                    f"most {MAX_NAME_BYTES} bytes, use a shorter one"
                )

    def _shared(self, path: str, ctx: RuntimeContext) -> RuntimeContext | None:
        """The shared context a user's read of ``path`` falls back to, or None for no fallback.

        Only what :func:`shared_with_users` shares (the persona, knowledge, skills, subagent
        declarations): never the memory, sessions, tasks or tool results of calls without a user.
        """
        if self.fs.scope is not IsolationScope.USER or not ctx.user_id or _in_users(path):
            return None
        if not shared_with_users(normalize(path)):
            return None
        return RuntimeContext(session_id=ctx.session_id, extra=ctx.extra)

    def _hidden(self, path: str, ctx: RuntimeContext) -> bool:
        """Whether a listed path is in the users' namespaces, which a no-user call never sees.

        The backend hides them already; this keeps a backend that forgets from leaking them.
        """
        return self.fs.scope is IsolationScope.USER and not ctx.user_id and _in_users(path)

    # -- the tools -----------------------------------------------------------------------

    @_answers
    async def read_file(
        self,
        path: str,
        ctx: RuntimeContext,
        offset: int | None = None,
        limit: int | None = None,
    ) -> str:
        """Read lines of a file, numbered; read big files in pieces.

        Args:
            path: The file, relative to the workspace.
            offset: The 0-based line to start at (default 0).
            limit: How many lines to read (default 200).
        """
        self._check(path, ctx, required=True)
        start = max(offset or 0, 0)
        count = max(limit or DEFAULT_READ_LIMIT, 1)
        result = await self._bounded(self.fs.read(path, start, count, ctx))
        if (
            result.error is not None
            and result.error.code is FsErrorCode.FILE_NOT_FOUND
            and (shared := self._shared(path, ctx)) is not None
        ):
            fallback = await self._bounded(self.fs.read(path, start, count, shared))
            if fallback.error is None or fallback.error.code is not FsErrorCode.FILE_NOT_FOUND:
                result = fallback
        if result.error is not None or result.data is None:
            raise _refusal(result.error, f"could not read {path}")
        data = result.data
        if data.encoding == "base64":
            return self._binary(path, data.content)
        lines = _lines(data.content)
        if data.content.strip() == EMPTY_FILE_REMINDER:
            lines = []
        total = max(data.total_lines, start + len(lines)) if lines else data.total_lines
        if not lines and total == 0:
            return EMPTY_FILE_REMINDER
        if start >= total or not lines:
            raise _Refused(f"offset {start} is past the end of the file ({total} lines)")
        shown: list[str] = []
        used = 0
        end = start
        for number, line in enumerate(lines[:count], start=start):
            row = f"{number + 1}\t{_cut(line)}"
            if shown and used + len(row) > MAX_READ_CHARS:
                break
            shown.append(row)
            used += len(row) + 1
            end = number + 1
        if end < total:
            shown.append(f"... (lines {start + 1}-{end} of {total}; continue with offset={end})")
        return "\n".join(shown)

    @staticmethod
    def _binary(path: str, content: str) -> str:
        """A binary file described (its size), with its base64 only when that is short."""
        try:
            size = len(base64.b64decode(content, validate=True))
        except (binascii.Error, ValueError):
            size = len(content) * 3 // 4
        head = f"{path} is a binary file ({size:,} bytes); it cannot be shown as text."
        if len(content) <= _MAX_INLINE_BASE64:
            return f"{head} Its content, base64-encoded:\n{content}"
        return f"{head} Use a tool made for this file type to inspect it."

    @_answers
    async def write_file(self, path: str, content: str, ctx: RuntimeContext) -> str:
        """Create a new file with the given content; an existing file is not overwritten.

        Args:
            path: The new file, relative to the workspace.
            content: The whole text of the file.
        """
        self._check(path, ctx, required=True, writing=True)
        result = await self._bounded(self.fs.write(path, content, ctx))
        if result.error is None:
            return f"Written to {path}"
        if result.error.code is FsErrorCode.ALREADY_EXISTS:
            raise _Refused(
                f"Cannot write to {path} because it already exists. Read and then make "
                "an edit, or write to a new path."
            )
        raise _refusal(result.error)

    @_answers
    async def edit_file(
        self,
        path: str,
        old_string: str,
        new_string: str,
        ctx: RuntimeContext,
        replace_all: bool | None = None,
    ) -> str:
        """Replace exact text in a file; it must occur once unless replace_all is set.

        Args:
            path: The file, relative to the workspace.
            old_string: The exact text to replace, with enough context to occur only once.
            new_string: The text to put in its place.
            replace_all: Replace every occurrence instead of exactly one (default false).
        """
        self._check(path, ctx, required=True, writing=True)
        old = old_string.replace("\r\n", "\n")
        new = new_string.replace("\r\n", "\n")
        if not old:
            raise _Refused("old_string is empty; give the exact text to replace")
        if old == new:
            raise _Refused("old_string and new_string are the same; nothing would change")
        result = await self._bounded(self.fs.edit(path, old, new, bool(replace_all), ctx))
        if result.error is None:
            return f"Edited {path} ({result.occurrences} replacement(s))"
        if result.error.code is FsErrorCode.NO_MATCH:
            raise _Refused("String not found in file")
        if result.error.code is FsErrorCode.NOT_UNIQUE:
            times = f" {result.occurrences} times" if result.occurrences > 1 else " more than once"
            raise _Refused(
                f"String appears{times} in file. Use replace_all=true to replace every "
                "occurrence, or add surrounding context to old_string so that it matches once."
            )
        raise _refusal(result.error)

    @_answers
    async def grep_files(
        self,
        pattern: str,
        ctx: RuntimeContext,
        path: str | None = None,
        glob: str | None = None,
    ) -> str:
        """Find lines containing a literal text (not a regular expression) in files.

        Args:
            pattern: The exact text to look for.
            path: The directory (or file) to search, relative to the workspace (default: all).
            glob: Only files whose name matches this pattern, e.g. "*.md".
        """
        if not pattern:
            raise _Refused("pattern is empty; give the text to look for")
        where = path if path is not None else "/"
        self._check(where, ctx)
        result = await self._bounded(self.fs.grep(pattern, where, glob or None, ctx))
        if result.error is not None:
            if result.error.code is FsErrorCode.FILE_NOT_FOUND:
                return "No matches found"
            raise _refusal(result.error)
        matches = [m for m in result.matches if not self._hidden(m.path, ctx)]
        if not matches:
            return "No matches found"
        rows = [f"{m.path}:{m.line}:{_cut(m.text)}" for m in matches]
        return _capped(rows, "matches", stopped=result.truncated)

    @_answers
    async def glob_files(self, pattern: str, ctx: RuntimeContext, path: str | None = None) -> str:
        """Find files whose path matches a glob pattern; "**" spans directories.

        Args:
            pattern: The pattern, relative to path: "*.md" matches files directly in it,
                "**/*.md" at any depth.
            path: The directory to search, relative to the workspace (default: all).
        """
        if not pattern.strip():
            raise _Refused("pattern is empty; give a glob pattern such as **/*.md")
        where = path if path is not None else "/"
        self._check(where, ctx)
        result = await self._bounded(self.fs.glob(pattern, where, ctx))
        if result.error is not None:
            if result.error.code is FsErrorCode.FILE_NOT_FOUND:
                return "No matching files found"
            raise _refusal(result.error)
        entries = [e for e in result.entries if not self._hidden(e.path, ctx)]
        if not entries:
            return "No matching files found"
        rows = [f"{e.path}/" if e.is_dir else _size(e) for e in entries]
        return _capped(rows, "files")

    @_answers
    async def list_files(self, ctx: RuntimeContext, path: str | None = None) -> str:
        """List the files and directories directly in a directory.

        Args:
            path: The directory, relative to the workspace (default: the workspace root).
        """
        where = path if path is not None else "/"
        self._check(where, ctx)
        result = await self._bounded(self.fs.ls(where, ctx))
        if result.error is not None:
            if result.error.code in (FsErrorCode.FILE_NOT_FOUND, FsErrorCode.NOT_A_DIRECTORY):
                return f"Empty or not a directory: {where}"
            raise _refusal(result.error)
        entries = [e for e in result.entries if not self._hidden(e.path, ctx)]
        if not entries:
            return f"Empty or not a directory: {where}"
        rows = [f"[DIR]  {e.path}" if e.is_dir else f"[FILE] {_size(e)}" for e in entries]
        return _capped(rows, "entries")

    @_answers
    async def execute(
        self,
        command: str,
        ctx: RuntimeContext,
        working_directory: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 (the command's limit, passed on)
    ) -> str:
        """Run a shell command in the workspace and return its exit code and output.

        Args:
            command: The command line, run with sh -c.
            working_directory: A directory relative to the workspace to run it in (default: the
                workspace root).
            timeout: Seconds to wait before the command is stopped (default: the backend's).
        """
        fs = self.fs
        if not isinstance(fs, ShellFilesystem):
            raise _Refused("this filesystem cannot run commands")
        if not command.strip():
            raise _Refused("command is empty; give a shell command to run")
        if timeout is not None and not timeout > 0:
            raise _Refused(f"timeout must be a positive number of seconds, got {timeout}")
        directory: str | None = None
        if working_directory is not None and working_directory.strip():
            directory = working_directory.strip()
            if directory.startswith(("/", "\\")):
                raise _Refused(
                    f"working_directory {working_directory!r} is an absolute path; give "
                    "a directory relative to the workspace"
                )
            try:
                self._check(directory, ctx)
            except _Refused as refused:
                raise _Refused(f"working_directory: {refused}") from None
        if directory is not None and not await fs.exists(directory, ctx):
            raise _Refused(
                f"working_directory {working_directory!r} does not exist in the "
                "workspace; create it first or leave working_directory out"
            )
        result = await fs.execute(command, timeout, directory, ctx)
        parts = [f"Exit code: {result.exit_code}"]
        output = result.output.rstrip("\n")
        if output.strip():
            parts += ["", output]
        if result.truncated:
            parts.append("(output was truncated)")
        return "\n".join(parts)
