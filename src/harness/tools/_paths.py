"""The path a tool was given, as a workspace path or as the error the model should see."""

from __future__ import annotations

from harness.errors import PathOutsideWorkspace
from harness.kernel import ToolFailure
from harness.paths import normalize

__all__ = ["tool_path"]


def tool_path(path: str) -> tuple[str, ToolFailure | None]:
    """``(workspace path, None)``, or ``("", error text)`` for an empty or escaping path.

    Tools answer a bad path with an error the model can act on rather than raising.
    """
    try:
        rel = normalize(path)
    except PathOutsideWorkspace:
        return "", ToolFailure(f"Error: path traversal not allowed: {path}")
    return rel, (None if rel else ToolFailure("Error: path is required"))
