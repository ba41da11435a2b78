"""A subagent whose behaviour a test controls, and a factory declaration for it."""

from __future__ import annotations

import asyncio

from harness import RuntimeContext
from harness.kernel import Finished, Msg
from harness.subagents import SubagentFactory


class Child:
    """Records its calls; may wait for a gate or raise; replies ``<reply>`` (or ``#<n>``)."""

    def __init__(
        self,
        reply: str = "done",
        *,
        gate: asyncio.Event | None = None,
        error: Exception | None = None,
        numbered: bool = False,
    ) -> None:
        self.reply = reply
        self.gate = gate
        self.error = error
        self.numbered = numbered
        self.calls: list[tuple[str, RuntimeContext]] = []
        self.started = asyncio.Event()
        self.cancelled = asyncio.Event()
        self.finished = asyncio.Event()

    async def call(self, msgs: str, *, ctx: RuntimeContext) -> Finished:
        self.calls.append((msgs, ctx))
        self.started.set()
        try:
            if self.gate is not None:
                await self.gate.wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        if self.error is not None:
            raise self.error
        self.finished.set()
        text = f"{self.reply} #{len(self.calls)}" if self.numbered else self.reply
        return Finished(Msg(role="assistant", content=text))


def factory(child: Child, name: str = "worker") -> SubagentFactory:
    return SubagentFactory(name=name, description=f"The {name} subagent.", build=lambda _: child)
