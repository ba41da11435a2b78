"""Globs, grep and the scans of model-written text do bounded work whatever the model picks.

The globs were translated to Python regexes, which backtrack: ``*a*a*a*a*a*a*a*a*b`` against a
long name of ``a`` ran for hours inside one C call holding the GIL, so every user of the
process and ``/healthz`` froze. :class:`~harness.filesystem._semantics.Glob` matches without
backtracking; here it is held to the regex translation's answers on inputs small enough for
the regex to answer, and to finishing on the inputs that made the regex explode. Grep kept
every matching line of every file before the tool cut the list to 200; it now stops at
:data:`~harness.filesystem.MAX_GREP_MATCHES`, and says it stopped.
"""

from __future__ import annotations

import re
import signal
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from harness.context import RuntimeContext
from harness.filesystem import MAX_GREP_MATCHES, LocalFilesystem, RemoteFilesystem
from harness.filesystem._semantics import Glob, matching_lines
from harness.hooks.workspace_context import _clean
from harness.memory._fts import _GLUED, _LATIN_WORD, CJK_CHARS, cjk_grams
from harness.stores import InMemoryStore
from harness.tools import FilesystemTools


def _regex_oracle(pattern: str) -> re.Pattern[str]:
    """The glob semantics as a regex (what the backends used before): right, but backtracking."""
    if not pattern:
        return re.compile(r"(?!)")
    parts = pattern.split("/")
    out = []
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            out.append(".*" if last else "(?:[^/]+/)*")
            continue
        i, name = 0, []
        while i < len(part):
            char = part[i]
            if char == "*":
                name.append("[^/]*")
            elif char == "?":
                name.append("[^/]")
            elif char == "[" and (close := part.find("]", i + 2)) != -1:
                body = part[i + 1 : close]
                negate = body[:1] in ("!", "^")
                body = body[1:] if negate else body
                escaped = body.replace("\\", "\\\\").replace("^", "\\^").replace("[", "\\[")
                name.append(f"[{'^/' if negate else ''}{escaped}]")
                i = close
            else:
                name.append(re.escape(char))
            i += 1
        out.append("".join(name) + ("" if last else "/"))
    with warnings.catch_warnings():  # "[?--]" is a range to re; its future-syntax warning is not
        warnings.simplefilter("ignore", FutureWarning)
        return re.compile("".join(out), re.DOTALL)


_NAME_PATTERN = st.text(alphabet="ab*?[]!-/", max_size=8).filter(
    lambda p: "//" not in p and not p.startswith("/") and not p.endswith("/")
)
_PATTERN = st.lists(
    st.one_of(st.just("**"), _NAME_PATTERN.filter(lambda p: p and "/" not in p)),
    min_size=1,
    max_size=4,
).map("/".join)
_PATH = st.lists(st.text(alphabet="ab-!", min_size=1, max_size=5), max_size=4).map("/".join)


@given(_PATTERN, _PATH)
@example("[?--]", "")  # a class the regex reads as a range and warns about
def test_the_glob_matcher_answers_as_the_regex_translation_did(pattern: str, path: str) -> None:
    try:
        oracle = _regex_oracle(pattern)
    except re.error:  # a reversed range such as [b-a]: the regex refused the whole pattern
        return
    assert Glob(pattern).fullmatch(path) == (oracle.fullmatch(path) is not None)


@contextmanager
def _watchdog(seconds: int) -> Iterator[None]:
    """Fail, rather than hang, if the block runs longer than ``seconds`` (a backtracking
    matcher would take hours here; the bound is for liveness, not speed)."""

    def expire(*_: object) -> None:
        raise TimeoutError(f"still matching after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize(
    ("pattern", "path"),
    [
        ("*a" * 30 + "*b", "a" * 200),
        ("/".join(["**"] * 40) + "/x", "/".join(["d"] * 200)),
        ("/".join(["**", "*a*a*a*a*a*a*"] * 12) + "/b", "/".join(["a" * 30] * 100)),
    ],
)
def test_patterns_that_made_the_regex_explode_finish(pattern: str, path: str) -> None:
    with _watchdog(60):
        assert not Glob(pattern).fullmatch(path)


@given(st.text(alphabet="ab\n\r", max_size=40), st.text(alphabet="ab\r", max_size=3))
def test_grep_finds_the_lines_a_split_finds(text: str, pattern: str) -> None:
    expected = [
        (number, line.removesuffix("\r"))
        for number, line in enumerate(text.split("\n"), start=1)
        if pattern in line
    ]
    assert [(m.line, m.text) for m in matching_lines("f", text, pattern, 10**9)] == expected
    assert len(matching_lines("f", text, pattern, 2)) == min(2, len(expected))


ALICE = RuntimeContext(user_id="alice", session_id="s")


@pytest.fixture(params=["local", "store"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> LocalFilesystem | RemoteFilesystem:
    if request.param == "local":
        return LocalFilesystem(tmp_path / "ws")
    return RemoteFilesystem(InMemoryStore())


async def test_grep_stops_at_its_limit_and_says_so(
    backend: LocalFilesystem | RemoteFilesystem,
) -> None:
    lines = MAX_GREP_MATCHES * 3
    await backend.upload([("big.txt", b"hit\n" * lines), ("z.txt", b"hit\n")], ALICE)
    result = await backend.grep("hit", "/", ctx=ALICE)
    assert result.truncated
    assert len(result.matches) == MAX_GREP_MATCHES
    answer = await FilesystemTools(backend).grep_files("hit", ALICE)
    assert "the search stopped at" in answer.splitlines()[-1]
    small = await backend.grep("hit", "z.txt", ctx=ALICE)
    assert (len(small.matches), small.truncated) == (1, False)


async def test_a_glob_pattern_too_long_is_refused(
    backend: LocalFilesystem | RemoteFilesystem,
) -> None:
    result = await backend.glob("a" * 5_000, "/", ALICE)
    assert result.error is not None
    assert "characters long" in result.error.message


# -- the text the model writes, as the harness scans it ---------------------------------------

_GLUED_ORACLE = re.compile(f"(?<=[{CJK_CHARS}]){_LATIN_WORD}|{_LATIN_WORD}(?=[{CJK_CHARS}])")
"""What the index took for a Latin word glued to CJK text: right, but quadratic in a word."""
_COMMENT_ORACLE = re.compile(r"<!--.*?-->", re.DOTALL)
"""The HTML comments the prompt leaves out: right, but quadratic in unclosed comments."""


@given(st.text(alphabet="ab 日本_1-!", max_size=30))
def test_glued_words_are_found_as_the_regex_found_them(text: str) -> None:
    assert _GLUED.findall(text) == _GLUED_ORACLE.findall(text)


@given(st.text(alphabet="<!-> a", max_size=30))
def test_comments_are_left_out_as_the_regex_left_them(text: str) -> None:
    assert _clean(text) == _COMMENT_ORACLE.sub("", text).strip()


def test_model_written_text_that_made_the_scans_quadratic_is_scanned_at_once() -> None:
    """A 2-million-letter word (the index), two million unclosed comments (the prompt)."""
    with _watchdog(60):
        assert _GLUED.findall("a" * 2_000_000 + " ") == []
        assert cjk_grams("a" * 2_000_000 + "日") == "日 " + "a" * 2_000_000
        assert _clean("<!--" * 2_000_000) == "<!--" * 2_000_000
