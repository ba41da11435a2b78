"""Prompt sections: text a hook appends to the system message of a step's request.

The workspace context, the skills and the subagents each add one. They share this module, not
each other's, so any of their hooks can be left out of an agent (or deleted) without the others.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.kernel import Msg, TextBlock

__all__ = ["SystemSection", "inject_section"]


def inject_section(
    messages: list[Msg],
    section: str | Sequence[str],
    metadata: Mapping[str, Any] | None = None,
) -> list[Msg]:
    """Append ``section`` (one block, or several) to the leading system message (a copy).

    ``metadata`` is merged into that message's metadata. When the first message is not a
    system message, one named ``workspace_context`` is put first: the history behind it is
    never searched (a system message a caller put further down stays as it is), so a step
    costs the same however long the conversation is.
    """
    blocks = [
        TextBlock(text=text) for text in ((section,) if isinstance(section, str) else section)
    ]
    if messages and messages[0].role == "system":
        message = messages[0]
        update: dict[str, Any] = {"content": [*message.content, *blocks]}
        if metadata:
            update["metadata"] = {**message.metadata, **metadata}
        return [message.model_copy(update=update), *messages[1:]]
    added = Msg(
        role="system", name="workspace_context", content=blocks, metadata=dict(metadata or {})
    )
    return [added, *messages]


class SystemSection:
    """Appends a section to a step's system message, reusing the result between steps.

    Steps with the same system message and section get the very same injected message: it is
    built once, not copied at every step, and the next hook that adds a section sees an
    unchanged message and can reuse its own result too. ``section`` (and ``metadata``) should
    be the same object from step to step while unchanged (they are compared by identity).
    """

    def __init__(self) -> None:
        self._last: tuple[Msg, object, object, Msg] | None = None

    def apply(
        self,
        messages: list[Msg],
        section: str | Sequence[str],
        metadata: Mapping[str, Any] | None = None,
    ) -> list[Msg]:
        if not messages or messages[0].role != "system":
            return inject_section(messages, section, metadata)
        last = self._last
        if (
            last is None
            or last[0] is not messages[0]
            or last[1] is not section
            or last[2] is not metadata
        ):
            injected = inject_section(messages[:1], section, metadata)[0]
            last = self._last = (messages[0], section, metadata, injected)
        return [last[3], *messages[1:]]
