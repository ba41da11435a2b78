"""A gated tool's side effects, counted in a file outside the agent."""

from __future__ import annotations

from pathlib import Path
from typing import Any


class Witness:
    """The side effects, in a file outside the agent."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def runs(self) -> list[str]:
        return self.path.read_text().split() if self.path.exists() else []

    def tools(self) -> list[Any]:
        path = self.path

        async def deploy(target: str) -> str:
            """Deploy.

            Args:
                target: Where.
            """
            with path.open("a") as file:
                file.write(f"deploy:{target}\n")
            return f"deployed {target}"

        async def note(text: str) -> str:
            """Note.

            Args:
                text: What.
            """
            with path.open("a") as file:
                file.write("note\n")
            return "noted"

        return [deploy, note]
