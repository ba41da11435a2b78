"""Model adapters and model specs.

A *model spec* names a model on the command line or in ``HARNESS_MODEL``:

- ``openai:<model>``: any OpenAI-compatible chat-completions endpoint; honours
  ``OPENAI_BASE_URL`` and needs ``OPENAI_API_KEY`` (any value for a local server);
- ``anthropic:<model>``: Anthropic's messages API; needs ``ANTHROPIC_API_KEY`` and the
  ``anthropic`` extra;
- ``local`` or ``local:<file.gguf>``: a :class:`LocalChatModel` run in-process (the
  ``local`` extra); plain ``local`` uses the bundled SmolLM2-135M-Instruct weights;
- ``scripted:<path>``: a :class:`ScriptedChatModel` replaying a JSON script.

``HARNESS_CONTEXT_WINDOW`` (or ``context_window=``) sets a local model's context size.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from harness.errors import ConfigError
from harness.kernel import ChatModel
from harness.models._overflow import looks_like_context_overflow
from harness.models._shared import DEFAULT_LOCAL_CONTEXT_WINDOW
from harness.models.prices import Price, cost_of, load_prices
from harness.models.scripted import ScriptedChatModel, ScriptTurn

if TYPE_CHECKING:
    from harness.models.anthropic import AnthropicChatModel
    from harness.models.local import LocalChatModel
    from harness.models.openai import OpenAIChatModel

__all__ = [
    "CONTEXT_WINDOW_ENV",
    "DEFAULT_LOCAL_CONTEXT_WINDOW",
    "MIN_CONTEXT_WINDOW",
    "AnthropicChatModel",
    "LocalChatModel",
    "OpenAIChatModel",
    "Price",
    "ScriptTurn",
    "ScriptedChatModel",
    "context_window_from",
    "cost_of",
    "load_prices",
    "looks_like_context_overflow",
    "resolve_model",
]

_SPECS = "openai:<model>, anthropic:<model>, local[:<file.gguf>] or scripted:<path>"

CONTEXT_WINDOW_ENV = "HARNESS_CONTEXT_WINDOW"

MIN_CONTEXT_WINDOW = 256
"""The smallest window ``--context-window`` and ``HARNESS_CONTEXT_WINDOW`` take: below it not
even a short prompt and its answer fit, and compaction's fractions of it round to nothing."""
"""A local model's context size by default: SmolLM2's training context, room for the harness's
prompt, its tools and a conversation."""


def resolve_model(
    spec: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    context_window: int | None = None,
    options: Mapping[str, Any] | None = None,
) -> ChatModel:
    """Build the model a spec names; without a spec, use ``HARNESS_MODEL``.

    Args:
        spec: The model spec (see the module docstring).
        env: Where the variables are read; ``os.environ`` by default.
        context_window: A local model's context size in tokens; ``HARNESS_CONTEXT_WINDOW``,
            then the local model's default, when not given.
        options: Default request fields (``temperature``, ``max_tokens``, ...), as the
            adapters' ``options`` argument.

    Raises:
        ConfigError: No spec, an unknown spec, a missing API key, a missing extra, or an
            option the model does not take.
    """
    try:
        return _resolve(spec, os.environ if env is None else env, context_window, options or {})
    except ValueError as exc:  # an adapter refusing an option or a size
        raise ConfigError(str(exc)) from None


def _resolve(
    spec: str | None,
    env: Mapping[str, str],
    context_window: int | None,
    options: Mapping[str, Any],
) -> ChatModel:
    spec = (spec or env.get("HARNESS_MODEL") or "").strip()
    if not spec:
        msg = f"no model configured: pass --model {_SPECS}, or set HARNESS_MODEL"
        raise ConfigError(msg)
    kind, _, name = spec.partition(":")
    name = name.strip()
    if kind == "scripted" and name:
        if options:
            msg = f"a scripted model takes no options (got {', '.join(sorted(options))})"
            raise ConfigError(msg)
        return ScriptedChatModel.from_file(name)
    if kind == "local":
        from harness.models.local import LocalChatModel

        window = context_window or context_window_from(env) or DEFAULT_LOCAL_CONTEXT_WINDOW
        return LocalChatModel(name or None, n_ctx=window, options=options)
    if kind == "openai" and name:
        if not env.get("OPENAI_API_KEY"):
            msg = (
                "OPENAI_API_KEY is not set: export it (any non-empty value works for a local "
                "OpenAI-compatible server, with OPENAI_BASE_URL pointing at it)"
            )
            raise ConfigError(msg)
        from harness.models.openai import OpenAIChatModel

        return OpenAIChatModel(
            name,
            api_key=env["OPENAI_API_KEY"],
            base_url=env.get("OPENAI_BASE_URL") or None,
            options=options,
        )
    if kind == "anthropic" and name:
        if not env.get("ANTHROPIC_API_KEY"):
            msg = "ANTHROPIC_API_KEY is not set: export your Anthropic API key"
            raise ConfigError(msg)
        from harness.models.anthropic import AnthropicChatModel

        return AnthropicChatModel(
            name,
            api_key=env["ANTHROPIC_API_KEY"],
            base_url=env.get("ANTHROPIC_BASE_URL") or None,
            options=options,
        )
    msg = f"unknown model spec {spec!r}: use {_SPECS}"
    raise ConfigError(msg)


def context_window_from(env: Mapping[str, str]) -> int | None:
    """``HARNESS_CONTEXT_WINDOW`` as a number of tokens, or None when it is not set.

    Raises:
        ConfigError: It is set to something other than a positive whole number.
    """
    raw = env.get(CONTEXT_WINDOW_ENV, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < MIN_CONTEXT_WINDOW:
        msg = (
            f"{CONTEXT_WINDOW_ENV}={raw!r} is not a number of tokens of at least "
            f"{MIN_CONTEXT_WINDOW}"
        )
        raise ConfigError(msg)
    return int(raw)


def __getattr__(name: str) -> object:
    # The SDK-backed adapters are imported on first use, so `import harness` stays light and
    # a missing optional SDK only matters to the code that asks for it.
    if name == "OpenAIChatModel":
        from harness.models.openai import OpenAIChatModel

        return OpenAIChatModel
    if name == "AnthropicChatModel":
        from harness.models.anthropic import AnthropicChatModel

        return AnthropicChatModel
    if name == "LocalChatModel":
        from harness.models.local import LocalChatModel

        return LocalChatModel
    raise AttributeError(name)
