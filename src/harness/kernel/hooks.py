"""Hooks: the agent's extension point for everything that is not the reasoning loop itself.

A hook has a ``priority`` (lower runs first; hooks of equal priority run in the order they
were registered; user hooks default to 100) and one coroutine, ``on_event``. A hook that only
cares about some events lists their types in ``events`` so the chain never calls it for the
others.

Where a hook keeps what it knows: one hook object serves every call of its agent, concurrent
ones included, so

- about a call: on the event (its :class:`~harness.context.RuntimeContext`, its memory), or in
  the hook's fields keyed by ``event.call_id`` and dropped at PostCall or Error;
- about a conversation, from one call to the next: in ``event.state`` under the hook's
  ``state_key`` (:mod:`harness.kernel.state`), which is saved and restored with the
  conversation, so any process continues it as this one would have; never in the hook's
  fields, which live only in this process;
- about the workspace or the world (caches of files, say): in its fields, keyed by what they
  depend on.

Lifecycle: an agent calls :meth:`Hook.attach` on each of its hooks once it is built (its
toolkit complete), before any event; that is where a hook keeps the agent if it adds tools at
run time or emits events of its own (:meth:`HookHost.emit`). Whoever builds a hook closes it
(:meth:`Hook.aclose`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar, Protocol

from harness.kernel.events import Event
from harness.kernel.toolkit import Tool, Toolkit

__all__ = ["DEFAULT_HOOK_PRIORITY", "Hook", "HookChain", "HookHost"]

DEFAULT_HOOK_PRIORITY = 100
"""The priority of a hook that does not set one: after the harness's own hooks up to 80,
before workspace context and session persistence at 900."""


class HookHost(Protocol):
    """The agent a hook is registered with, as the hook sees it (see :meth:`Hook.attach`)."""

    @property
    def toolkit(self) -> Toolkit:
        """The agent's own toolkit: a tool registered in it is offered from the next step."""
        ...

    async def emit(self, event: Event) -> None:
        """Dispatch an event the hook derived (a compaction's, say) to the agent's hooks."""
        ...


class Hook:
    """Base class of hooks. Override :meth:`on_event`; set ``priority`` and ``events``."""

    priority: int = DEFAULT_HOOK_PRIORITY
    events: ClassVar[tuple[type[Event], ...]] = ()
    """The event types this hook handles; empty means all."""
    state_key: ClassVar[str | None] = None
    """The key under which this hook keeps a JSON value in ``event.state``; None keeps none."""

    async def on_event(self, event: Event) -> None:
        """React to an event, mutating its documented mutable fields if needed."""

    def tools(self) -> Sequence[Callable[..., Any] | Tool]:
        """Tools this hook contributes to the agent's toolkit."""
        return ()

    def attach(self, agent: HookHost) -> None:
        """Called by each agent the hook is registered with, before any event reaches it.

        A hook may serve several agents (``HarnessAgent`` gives the caller's hooks to its
        subagents too); one that keeps its agent here keeps the first.
        """

    async def aclose(self) -> None:
        """Release what the hook holds (servers, background tasks) when its owner closes.

        Whoever builds a hook closes it: an agent closes the hooks it made, and the hooks an
        application passes in stay the application's.
        """

    def handles(self, event_type: type[Event]) -> bool:
        return not self.events or issubclass(event_type, self.events)


class HookChain:
    """Hooks sorted by priority (stable), dispatched per event type."""

    def __init__(self, hooks: Iterable[Hook] = ()) -> None:
        self.hooks: tuple[Hook, ...] = tuple(sorted(hooks, key=lambda hook: hook.priority))
        self._by_type: dict[type[Event], tuple[Hook, ...]] = {}

    def for_event(self, event_type: type[Event]) -> tuple[Hook, ...]:
        """The hooks that handle ``event_type``, in order (cached)."""
        hooks = self._by_type.get(event_type)
        if hooks is None:
            hooks = tuple(hook for hook in self.hooks if hook.handles(event_type))
            self._by_type[event_type] = hooks
        return hooks

    async def dispatch(self, event: Event) -> None:
        """Run every hook that handles the event, in order. A hook's exception propagates."""
        for hook in self.for_event(type(event)):
            await hook.on_event(event)
