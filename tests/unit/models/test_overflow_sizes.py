"""The sizes a provider states when it refuses a request as too long (models/_overflow.py).

Issue 41: recovery guessed how much to shrink although the error said both numbers. These read
them from every wording the adapters meet, with drawn numbers and spellings, and refuse numbers
that cannot describe an overflow (the text is a server's, not trusted).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.errors import ContextOverflowError
from harness.models._overflow import (
    MAX_SCANNED,
    OverflowSizes,
    looks_like_context_overflow,
    overflow_error,
    overflow_sizes,
)

windows = st.integers(min_value=256, max_value=2_000_000)


@st.composite
def overflows(draw: st.DrawFn) -> tuple[int, int, int]:
    """A window, a prompt over it, and an answer's room (0: none stated)."""
    window = draw(windows)
    prompt = draw(st.integers(min_value=window, max_value=window * 3))
    answer = draw(st.integers(min_value=0, max_value=window))
    return window, prompt, answer


def spelled(n: int, commas: bool) -> str:
    return f"{n:,}" if commas else str(n)


def cased(text: str, upper: bool) -> str:
    return text.upper() if upper else text


@given(overflows(), st.booleans(), st.booleans())
def test_openai_style_with_the_completion_stated(
    sizes: tuple[int, int, int], commas: bool, upper: bool
) -> None:
    """OpenAI, vLLM, DeepSeek and llama-cpp-python's server (the CI's real server)."""
    window, prompt, answer = sizes

    def n(value: int) -> str:
        return spelled(value, commas)

    text = (
        f"This model's maximum context length is {n(window)} tokens. However, you requested "
        f"{n(prompt + answer)} tokens ({n(prompt)} in the messages, {n(answer)} in the "
        "completion). Please reduce the length of the messages or completion."
    )
    assert overflow_sizes(cased(text, upper)) == OverflowSizes(prompt + answer, window, answer)


@given(overflows())
def test_openai_style_without_a_completion(sizes: tuple[int, int, int]) -> None:
    window, prompt, _ = sizes
    resulted = (
        f"This model's maximum context length is {window} tokens. However, your messages "
        f"resulted in {prompt} tokens. Please reduce the length of the messages."
    )
    functions = (
        f"This model's maximum context length is {window} tokens. However, your messages "
        f"resulted in {prompt} tokens ({prompt - 10} in the messages, 10 in the functions)."
    )
    unset = (  # llama-cpp-python's server when the request sets no max_tokens
        f"This model's maximum context length is {window} tokens. However, you requested "
        f"{prompt} tokens ({prompt} in the messages, None in the completion)."
    )
    for text in (resulted, functions, unset):
        assert overflow_sizes(text) == OverflowSizes(prompt, window), text


@given(overflows())
def test_vllm_with_max_tokens_too_large(sizes: tuple[int, int, int]) -> None:
    window, prompt, answer = sizes
    prompt = window - 1 - (prompt - window) % (window - 1)  # the prompt fits...
    answer = max(answer, window - prompt + 1)  # ...with the answer's room it does not
    text = (
        f"'max_tokens' or 'max_completion_tokens' is too large: {answer}. This model's maximum "
        f"context length is {window} tokens and your request has {prompt} input tokens "
        f"({answer} > {window} - {prompt})."
    )
    assert overflow_sizes(text) == OverflowSizes(prompt + answer, window, answer)


@given(overflows(), st.booleans())
def test_llama_cpp_anthropic_and_gemini_wordings(sizes: tuple[int, int, int], upper: bool) -> None:
    window, prompt, answer = sizes
    plain = {
        f"request ({prompt} tokens) exceeds the available context size ({window} tokens), try "
        "increasing it": OverflowSizes(prompt, window),
        f"Requested tokens ({prompt}) exceed context window of {window}": OverflowSizes(
            prompt, window
        ),
        f"prompt is too long: {prompt} tokens > {window} maximum": OverflowSizes(prompt, window),
        f"The input token count ({prompt}) exceeds the maximum number of tokens allowed "
        f"({window}).": OverflowSizes(prompt, window),
    }
    for text, expected in plain.items():
        assert overflow_sizes(cased(text, upper)) == expected, text
    if prompt + answer > window and answer:
        anthropic = (
            f"input length and `max_tokens` exceed context limit: {prompt} + {answer} > "
            f"{window}, decrease input length or `max_tokens` and try again"
        )
        assert overflow_sizes(anthropic) == OverflowSizes(prompt + answer, window, answer)


@given(overflows())
def test_llama_cpp_servers_error_body(sizes: tuple[int, int, int]) -> None:
    window, prompt, _ = sizes
    body = {
        "code": 400,
        "message": "the request exceeds the available context size, try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": prompt,
        "n_ctx": window,
    }
    assert overflow_sizes(body["message"], body) == OverflowSizes(prompt, window)
    assert overflow_sizes({"error": body}) == OverflowSizes(prompt, window)
    assert overflow_sizes(str(body)) == OverflowSizes(prompt, window)  # a body seen as text
    assert looks_like_context_overflow(body["message"])


@given(windows, st.integers(min_value=1, max_value=10**6))
def test_numbers_that_describe_no_overflow_are_not_believed(window: int, below: int) -> None:
    """A request within the window, or parts that do not add up: no sizes, still an overflow."""
    fits = max(1, window - below)
    within = (
        f"This model's maximum context length is {window} tokens. However, you requested "
        f"{fits} tokens."
    )
    assert overflow_sizes(within) is None
    wrong_sum = (
        f"This model's maximum context length is {window} tokens. However, you requested "
        f"{window + below} tokens ({window + below + 5} in the messages, 7 in the completion)."
    )
    assert overflow_sizes(wrong_sum) is None
    assert overflow_sizes(f"prompt is too long: {10**12} tokens > {window} maximum") is None
    error = overflow_error("refused", within)
    assert isinstance(error, ContextOverflowError)
    assert (error.requested_tokens, error.limit_tokens, error.prompt_tokens) == (None,) * 3


@given(st.text(max_size=300))
def test_any_text_is_read_without_failing(text: str) -> None:
    sizes = overflow_sizes(text, {"n_ctx": text, "n_prompt_tokens": None})
    if sizes is not None:
        assert 0 < sizes.limit <= sizes.requested


def test_only_the_start_of_a_long_text_is_read() -> None:
    stated = "Requested tokens (3000) exceed context window of 2048"
    assert overflow_sizes(stated + " x" * 10_000) == OverflowSizes(3000, 2048)
    assert overflow_sizes("x" * MAX_SCANNED + stated) is None


def test_the_error_carries_the_sizes_and_the_prompt_without_the_answer() -> None:
    error = overflow_error(
        "OpenAI model 'smollm2' failed with HTTP 400: ...",
        "This model's maximum context length is 2048 tokens. However, you requested 2503 "
        "tokens (2471 in the messages, 32 in the completion).",
    )
    assert (error.requested_tokens, error.limit_tokens, error.answer_tokens) == (2503, 2048, 32)
    assert error.prompt_tokens == 2471
    assert str(error) == "OpenAI model 'smollm2' failed with HTTP 400: ..."


@pytest.mark.parametrize(
    "text",
    [
        "context_length_exceeded: 5000 characters",
        "This model's maximum context length is many tokens.",
        "Requested tokens (-5) exceed context window of 2048",
    ],
)
def test_an_overflow_without_readable_sizes_has_none(text: str) -> None:
    assert overflow_sizes(text) is None
