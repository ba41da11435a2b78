r"""The prompt a local model reads: ChatML, with tools offered as text and chosen by grammar.

SmolLM2 and many small instruction models (Qwen, Hermes, ...) were trained on ChatML turns:
``<|im_start|>role\n...<|im_end|>``. Tools follow the layout of llama-cpp-python's
``chatml-function-calling`` format, which such models follow well enough once a grammar keeps
them on the rails:

- the system turn lists each function as ``functions.<name>: <description>`` and its JSON
  schema, and says that an answer starts with ``message:`` or with ``functions.<name>:``;
- an assistant turn is ``message:\n<text>`` and/or ``functions.<name>:\n<JSON arguments>``;
- a tool result is a user turn ``Result of functions.<name>:\n<text>``. (llama-cpp-python's
  own template drops ``tool`` messages, so a model served that way never sees its results.)

Without tools, the turns carry plain text.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Final

from harness.kernel import Msg, ToolSchema
from harness.models._shared import system_text

__all__ = ["END", "MESSAGE", "choice_grammar", "render"]

START: Final = "<|im_start|>"
END: Final = "<|im_end|>"

MESSAGE: Final = "message"
"""What the model says first when it answers in text rather than with a call."""


def render(messages: Sequence[Msg], tools: Sequence[ToolSchema]) -> str:
    """The whole prompt, ending where the assistant's answer starts."""
    turns: list[tuple[str, str]] = []
    for message in messages:
        if message.role == "system":
            turns.append(("system", system_text(message)))
        elif message.role == "user":
            turns.append(("user", message.text))
        elif message.role == "assistant":
            turns.append(("assistant", _assistant(message, tools_offered=bool(tools))))
        else:
            for result in message.tool_results:
                label = "Error from" if result.is_error else "Result of"
                turns.append(("user", f"{label} functions.{result.name}:\n{result.text}"))
    if tools:
        offer = _offer(tools)
        if turns and turns[0][0] == "system":
            turns[0] = ("system", f"{turns[0][1]}\n\n{offer}" if turns[0][1] else offer)
        else:
            turns.insert(0, ("system", offer))
    body = "".join(f"{START}{role}\n{text}{END}\n" for role, text in turns)
    return f"{body}{START}assistant\n"


def choice_grammar(tools: Sequence[ToolSchema], *, allow_message: bool) -> str:
    """A GBNF grammar for the first words of an answer: ``message:`` or one function's name."""
    options = [f"functions.{tool.name}:" for tool in tools]
    if allow_message:
        options.insert(0, f"{MESSAGE}:")
    return "root ::= " + " | ".join(json.dumps(option) for option in options) + "\n"


def _assistant(message: Msg, *, tools_offered: bool) -> str:
    parts: list[str] = []
    if message.text:
        parts.append(f"{MESSAGE}:\n{message.text}" if tools_offered else message.text)
    for use in message.tool_uses:
        parts.append(f"functions.{use.name}:\n{json.dumps(use.input, ensure_ascii=False)}")
    return "\n".join(parts)


def _offer(tools: Sequence[ToolSchema]) -> str:
    listed = "\n\n".join(
        f"functions.{tool.name}: {tool.description}\n"
        f"{json.dumps(tool.parameters or {'type': 'object', 'properties': {}})}"
        for tool in tools
    )
    return (
        f"You can call these functions:\n\n{listed}\n\n"
        f"Answer either with a message, starting with '{MESSAGE}:' on a line of its own, or "
        "with a function call: 'functions.<name>:' on a line of its own, then the arguments "
        "as one JSON object."
    )
