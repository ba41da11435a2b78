"""Prompt sections: text a hook appends to the system message of a step's request.

The workspace context, the skills and the subagents each add one. They share this module, not
each other's, so any of their hooks can be left out of an agent (or deleted) without the others.

What a section shows of a file is the file's author's (often the model's) to write, so text put
inside a section's element goes through :func:`escape_markup` first: a file cannot close the
element it is shown in, or open one of the harness's own.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from harness.kernel import Msg, TextBlock

__all__ = ["SystemSection", "escape_markup", "inject_section"]

_MARKUP: Final = re.compile(
    r"<(?=\s*/?\s*(?:[\w.]*[_-][\w.-]*|system|user|assistant|tool|instructions?)\b)",
    re.IGNORECASE,
)
"""The ``<`` of a tag the harness could have written: every tag of a section (``memory_context``,
``workspace_update``, a file's ``notes_md``) has an underscore or a hyphen in its name, and the
role names stand for turns of the conversation. Ordinary markup (``<div>``, ``a < b``) is kept."""


def escape_markup(text: str) -> str:
    """``text`` with every tag that imitates the harness's own written as ``&lt;tag``.

    What is left reads the same to a person and a model, but opens and closes nothing.
    """
    return _MARKUP.sub("&lt;", text)


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
