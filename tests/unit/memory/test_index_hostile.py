"""Any query text yields hits or [], never an exception (FTS5 syntax never leaks through)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.memory.index import MemoryIndex

HOSTILE = [
    "",
    " ",
    "\t\n\r",
    '"',
    '""',
    '"""',
    '"unbalanced',
    "'",
    "*",
    "**",
    "berlin*",
    "*berlin",
    ":",
    "content:",
    "content: berlin",
    "{content}: berlin",
    "{content context} : x",
    "cjk:北京",
    "^",
    "^berlin",
    "NEAR",
    "NEAR(",
    "NEAR(berlin anna, 2)",
    "AND",
    "OR",
    "NOT",
    "AND OR NOT",
    "berlin AND",
    "OR berlin",
    "NOT berlin",
    "berlin NOT anna",
    "(",
    ")",
    "()",
    "((berlin)",
    "[berlin]",
    "{",
    "}",
    "{}",
    "-",
    "--",
    "-berlin",
    "+",
    "berlin + anna",
    "a",
    "I",
    "the",
    "?",
    "!!!",
    "..",
    "../../etc/passwd",
    "; DROP TABLE memory_lines; --",
    "' OR '1'='1",
    "\x00",
    "berlin\x00anna",
    "\x01\x02\x1b[31m",
    "\u200b",
    "\ufeffberlin",
    "😀",
    "🇩🇪 Berlin 🐈",
    "👩‍👩‍👧",
    "e\u0301",
    "\ud800",
    "Ω≈ç√∫",
    "ǅemal",
    "İstanbul",
    "ß",
    "ﬁ",
    "①②③",
    "²³",
    "x" * 10_000,
    "berlin " * 2_000,
    "北" * 5_000,
    " ".join(f"w{i}" for i in range(3_000)),
    "%",
    "_",
    "berlin%",
    "\\",
    '\\"',
    "rank",
    "bm25(memory_lines_fts)",
    "rowid",
    "memory_lines_fts",
    "0",
    "-1",
    "1e309",
    "NaN",
]


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemoryIndex]:
    with MemoryIndex(tmp_path_factory.mktemp("hostile")) as opened:
        opened.index_from_string(
            "MEMORY.md",
            "- Anna moved to Berlin.\n- 我们下周去北京出差\n- NEAR the AND gate\n- 50% off\n",
        )
        opened.index_from_string("users/alice/MEMORY.md", "- Alice: Berlin (again)\n")
        yield opened


def test_there_are_at_least_fifty_hostile_queries() -> None:
    assert len(set(HOSTILE)) >= 50


@pytest.mark.parametrize("query", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_queries_never_raise(index: MemoryIndex, query: str) -> None:
    for user in (None, "alice", "../bob", "\x00"):
        hits = index.search(query, user_id=user, snippets=False)
        assert isinstance(hits, list)
        assert len(hits) <= 10
    index.search_sql(query)


def test_operator_words_are_searched_as_words(index: MemoryIndex) -> None:
    hits = index.search("NEAR", snippets=False)
    assert hits[0].content == "- NEAR the AND gate"
    assert all("NEAR" in h.content or h.line_number in (2, 4) for h in hits)  # its neighbours
    assert index.search('"Berlin"', snippets=False)[0].content == "- Anna moved to Berlin."


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(max_size=200))
def test_any_text_never_raises(index: MemoryIndex, query: str) -> None:
    assert isinstance(index.search(query, snippets=False), list)
