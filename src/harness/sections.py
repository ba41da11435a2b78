"""Prompt sections: text a hook appends to the system message of a step's request.

The workspace context, the skills and the subagents each add one. They share this module, not
each other's, so any of their hooks can be left out of an agent (or deleted) without the others.
"""

from __future__ import annotations

from harness.kernel import Msg, TextBlock

__all__ = ["SystemSection", "inject_section"]


def inject_section(messages: list[Msg], section: str) -> list[Msg]:
    """Append ``section`` as a new text block of the first system message (a copy).

    Without a system message, one named ``workspace_context`` is put first.
    """
    for index, message in enumerate(messages):
        if message.role == "system":
            content = [*message.content, TextBlock(text=section)]
            updated = message.model_copy(update={"content": content})
            return [*messages[:index], updated, *messages[index + 1 :]]
    return [Msg(role="system", name="workspace_context", content=section), *messages]


class SystemSection:
    """Appends a section to a step's system message, reusing the result between steps.

    Steps with the same system message and section get the very same injected message: it is
    built once, not copied at every step, and the next hook that adds a section sees an
    unchanged message and can reuse its own result too.
    """

    def __init__(self) -> None:
        self._last: tuple[Msg, str, Msg] | None = None

    def apply(self, messages: list[Msg], section: str) -> list[Msg]:
        if not messages or messages[0].role != "system":
            return inject_section(messages, section)
        last = self._last
        if last is None or last[0] is not messages[0] or last[1] is not section:
            last = self._last = (messages[0], section, inject_section(messages[:1], section)[0])
        return [last[2], *messages[1:]]
