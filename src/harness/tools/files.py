"""``read_file``: read a workspace file in pieces, so that no read floods the context.

It is what an evicted tool result's placeholder tells the agent to use: lines from a 0-based
``offset``, at most ``limit`` of them, numbered from 1, with long lines shortened and a cap on the
characters of one read; the last line says where to continue. Paths are workspace paths in the
caller's namespace (their own file first, then the shared one) and never leave the workspace.
The full set of filesystem tools comes with the filesystem backends; this one is here because
evicted results must be readable back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from harness.context import RuntimeContext
from harness.tools._paths import tool_path
from harness.workspace import WorkspaceManager

__all__ = ["DEFAULT_READ_LIMIT", "MAX_LINE_CHARS", "MAX_READ_CHARS", "FileTools"]

DEFAULT_READ_LIMIT: Final = 200
"""Lines one read returns when no limit is given."""

MAX_READ_CHARS: Final = 20_000
"""Characters one read returns at most, whatever the limit."""

MAX_LINE_CHARS: Final = 2_000
"""A longer line is shortened, with a marker saying so."""


class FileTools:
    """read_file over one workspace."""

    def __init__(self, workspace: WorkspaceManager) -> None:
        self.workspace = workspace

    def tools(self) -> list[Callable[..., Any]]:
        return [self.read_file]

    async def read_file(
        self,
        path: str,
        ctx: RuntimeContext,
        offset: int | None = None,
        limit: int | None = None,
    ) -> str:
        """Read lines of a workspace file, numbered; read big files in pieces.

        Args:
            path: The file, relative to the workspace.
            offset: The 0-based line to start at (default 0).
            limit: How many lines to read (default 200).
        """
        rel, error = tool_path(path)
        if error is not None:
            return error
        text = await self.workspace.read_text(rel, ctx.user_id)
        if not text:
            return f"Error: file not found or empty: {path}"
        lines = text.splitlines()
        start = max(offset or 0, 0)
        if start >= len(lines):
            return f"Error: offset {start} is past the end of the file ({len(lines)} lines)"
        count = max(limit or DEFAULT_READ_LIMIT, 1)
        shown: list[str] = []
        used = 0
        end = start
        for number in range(start, min(start + count, len(lines))):
            line = lines[number]
            if len(line) > MAX_LINE_CHARS:
                line = f"{line[:MAX_LINE_CHARS]}... [line cut: {len(line):,} chars]"
            row = f"{number + 1}\t{line}"
            if shown and used + len(row) > MAX_READ_CHARS:
                break
            shown.append(row)
            used += len(row) + 1
            end = number + 1
        if end < len(lines):
            shown.append(
                f"... (lines {start + 1}-{end} of {len(lines)}; continue with offset={end})"
            )
        return "\n".join(shown)
