"""Model adapters and model specs.

A *model spec* names a model on the command line or in ``HARNESS_MODEL``:

- ``openai:<model>``: any OpenAI-compatible chat-completions endpoint; honours
  ``OPENAI_BASE_URL`` and needs ``OPENAI_API_KEY`` (any value for a local server);
- ``anthropic:<model>``: Anthropic's messages API; needs ``ANTHROPIC_API_KEY`` and the
  ``anthropic`` extra;
- ``scripted:<path>``: a :class:`ScriptedChatModel` replaying a JSON script.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from harness.errors import ConfigError
from harness.kernel import ChatModel
from harness.models._overflow import looks_like_context_overflow
from harness.models.scripted import ScriptedChatModel, ScriptTurn

if TYPE_CHECKING:
    from harness.models.anthropic import AnthropicChatModel
    from harness.models.openai import OpenAIChatModel

__all__ = [
    "AnthropicChatModel",
    "OpenAIChatModel",
    "ScriptTurn",
    "ScriptedChatModel",
    "looks_like_context_overflow",
    "resolve_model",
]

_SPECS = "openai:<model>, anthropic:<model> or scripted:<path>"


def resolve_model(spec: str | None = None, *, env: Mapping[str, str] | None = None) -> ChatModel:
    """Build the model a spec names; without a spec, use ``HARNESS_MODEL``.

    Raises:
        ConfigError: No spec, an unknown spec, a missing API key or a missing extra.
    """
    env = os.environ if env is None else env
    spec = (spec or env.get("HARNESS_MODEL") or "").strip()
    if not spec:
        msg = f"no model configured: pass --model {_SPECS}, or set HARNESS_MODEL"
        raise ConfigError(msg)
    kind, _, name = spec.partition(":")
    name = name.strip()
    if kind == "scripted" and name:
        return ScriptedChatModel.from_file(name)
    if kind == "openai" and name:
        if not env.get("OPENAI_API_KEY"):
            msg = (
                "OPENAI_API_KEY is not set: export it (any non-empty value works for a local "
                "OpenAI-compatible server, with OPENAI_BASE_URL pointing at it)"
            )
            raise ConfigError(msg)
        from harness.models.openai import OpenAIChatModel

        return OpenAIChatModel(
            name, api_key=env["OPENAI_API_KEY"], base_url=env.get("OPENAI_BASE_URL") or None
        )
    if kind == "anthropic" and name:
        if not env.get("ANTHROPIC_API_KEY"):
            msg = "ANTHROPIC_API_KEY is not set: export your Anthropic API key"
            raise ConfigError(msg)
        from harness.models.anthropic import AnthropicChatModel

        return AnthropicChatModel(
            name, api_key=env["ANTHROPIC_API_KEY"], base_url=env.get("ANTHROPIC_BASE_URL") or None
        )
    msg = f"unknown model spec {spec!r}: use {_SPECS}"
    raise ConfigError(msg)


def __getattr__(name: str) -> object:
    # The SDK-backed adapters are imported on first use, so `import harness` stays light and
    # a missing optional SDK only matters to the code that asks for it.
    if name == "OpenAIChatModel":
        from harness.models.openai import OpenAIChatModel

        return OpenAIChatModel
    if name == "AnthropicChatModel":
        from harness.models.anthropic import AnthropicChatModel

        return AnthropicChatModel
    raise AttributeError(name)
