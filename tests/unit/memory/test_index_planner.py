"""The bounded-cost query plan, exercised on small data by shrinking the budget."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.memory import _search
from harness.memory._query import analyze, split_word
from harness.memory.index import MemoryIndex


@pytest.fixture
def index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MemoryIndex]:
    monkeypatch.setattr(_search, "RANK_BUDGET", 5)
    with MemoryIndex(tmp_path) as opened:
        yield opened


def _lines(*lines: str) -> str:
    return "\n".join(lines) + "\n"


def test_rare_clauses_are_ranked_by_bm25_and_frequent_ones_add_their_idf(
    index: MemoryIndex,
) -> None:
    common = [f"- dentist reminder number {i}" for i in range(20)]
    index.index_from_string(
        "MEMORY.md", _lines(*common, "- Anna has a cat", "- Anna booked the dentist")
    )
    sql, params = index.search_sql("Anna dentist?")
    assert sql == _search.BM25_SQL
    assert params["query"] == '(({content cjk context} : "anna") OR ({content near} : "anna"))'
    hits = index.search("Anna dentist?", snippets=False)
    assert hits[0].content == "- Anna booked the dentist"
    assert hits[1].content == "- Anna has a cat"


def test_when_every_clause_is_frequent_the_newest_rows_holding_the_rarest_pair_come_first(
    index: MemoryIndex,
) -> None:
    old = [f"- dentist appointment in {m}" for m in ("March", "April", "May")]
    noise = [f"- dentist invoice {i}" for i in range(10)] + [f"- appointment {i}" for i in range(8)]
    index.index_from_string("memory/2026-01-01.md", _lines(*old, *noise))
    index.index_from_string("memory/2026-06-01.md", _lines("- dentist appointment moved to June"))
    sql, params = index.search_sql("dentist appointment")
    assert sql == _search.NEWEST_SQL
    assert params["query"] in (
        # the candidates hold both in their own text (the lists with neighbours are longer)
        f'(({{content cjk context}} : "{a}")) AND (({{content cjk context}} : "{b}"))'
        for a, b in (("appointment", "dentist"), ("dentist", "appointment"))
    )
    hits = index.search("dentist appointment", limit=4, snippets=False)
    assert [h.content for h in hits] == [
        "- dentist appointment moved to June",
        "- dentist appointment in May",
        "- dentist appointment in April",
        "- dentist appointment in March",
    ]


def test_frequent_clauses_still_prefer_rows_with_more_of_the_query(index: MemoryIndex) -> None:
    lines = [f"- dentist appointment {i}" for i in range(12)]
    index.index_from_string("MEMORY.md", _lines("- dentist appointment with Maria", *lines))
    assert index.search("Maria dentist appointment", snippets=False)[0].content == (
        "- dentist appointment with Maria"
    )
    index.index_from_string("memory/more.md", _lines(*[f"- Maria {i}" for i in range(12)]))
    hits = index.search("Maria dentist appointment", snippets=False)
    assert hits[0].content == "- dentist appointment with Maria"


def test_the_newest_rows_are_those_the_searcher_may_see(index: MemoryIndex) -> None:
    index.index_from_string("MEMORY.md", _lines(*[f"- shared wifi code {i}" for i in range(8)]))
    index.index_from_string(
        "users/bob/MEMORY.md", _lines(*[f"- bob wifi code {i}" for i in range(300)])
    )
    shared = index.search("wifi code", limit=8, snippets=False)
    assert len(shared) == 8
    assert all(h.path == "MEMORY.md" for h in shared)
    assert (
        index.search("wifi code", limit=50, user_id="alice", snippets=False) == []
    )  # no row of hers
    bob = index.search("wifi code", limit=3, user_id="bob", snippets=False)
    assert [h.content for h in bob] == [
        "- bob wifi code 299",
        "- bob wifi code 298",
        "- bob wifi code 297",
    ]


def test_a_single_frequent_word_returns_its_newest_lines(index: MemoryIndex) -> None:
    index.index_from_string("MEMORY.md", _lines(*[f"- coffee note {i}" for i in range(30)]))
    assert [h.content for h in index.search("coffee", limit=2, snippets=False)] == [
        "- coffee note 29",
        "- coffee note 28",
    ]


def test_a_frequency_estimated_above_the_row_count_adds_the_least_idf(index: MemoryIndex) -> None:
    index.index_from_string("MEMORY.md", _lines("- Anna has a cat", "- Tom has a dog"))
    conn = index._connection()
    hits = {hit[0]: hit for hit in _search.keyword_hits(conn, analyze("cat"), "", 5)}
    before = {row: hit[4] for row, hit in hits.items()}
    clause = analyze("dog")[0]
    _search._add_idf(conn, hits, [(10**9, clause)])  # far more rows than the index holds
    assert all(0 <= hits[row][4] - before[row] <= 1e-3 for row in hits)


def test_the_newest_rows_of_a_searcher_outnumbered_by_others_are_still_found(
    index: MemoryIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_search, "RANK_BUDGET", 10)  # every clause is "frequent"
    index.index_from_string(
        "MEMORY.md", _lines(*[f"- wifi code {i} of the house" for i in range(5)])
    )
    index.index_from_string(
        "users/bob/MEMORY.md", _lines(*[f"- bob wifi code {i}" for i in range(600)])
    )
    sql, _ = index.search_sql("wifi code")
    assert sql == _search.NEWEST_SQL
    hits = index.search("wifi code", limit=5, snippets=False)  # the shared rows: older, fewer
    assert sorted(h.content for h in hits) == [f"- wifi code {i} of the house" for i in range(5)]
    bobs = index.search("wifi code", limit=5, user_id="bob", snippets=False)
    assert {h.path for h in bobs} == {"users/bob/MEMORY.md"}


@pytest.mark.parametrize("absent", ["xyzzy", "dentsit", "appointments xyzzy plugh"])
def test_a_word_no_row_holds_does_not_hide_the_frequent_words_matches(
    index: MemoryIndex, absent: str
) -> None:
    """A typo or a word never written matches nothing; the other words still find their rows.

    Such a clause is the rarest, so it alone filled the budget of rows to rank, and the query
    came back empty though every other word matched many rows.
    """
    index.index_from_string("MEMORY.md", _lines(*[f"- dentist appointment {i}" for i in range(12)]))
    hits = index.search(f"dentist {absent}", limit=3, snippets=False)
    assert [h.content for h in hits] == [f"- dentist appointment {i}" for i in (11, 10, 9)]


_VOCABULARY = ("dentist", "appointment", "coffee", "garden", "invoice", "paris")
_ABSENT = st.text(alphabet="qxzj", min_size=2, max_size=14)  # letters no vocabulary word has


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lines=st.lists(
        st.lists(st.sampled_from(_VOCABULARY), min_size=1, max_size=4), min_size=8, max_size=40
    ),
    words=st.lists(st.sampled_from(_VOCABULARY), min_size=1, max_size=3),
    absent=_ABSENT,
)
def test_a_word_no_row_holds_changes_no_search(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    lines: list[list[str]],
    words: list[str],
    absent: str,
) -> None:
    monkeypatch.setattr(_search, "RANK_BUDGET", 5)  # most words are frequent: every plan runs
    text = _lines(*(f"- {' '.join(line)} {i}" for i, line in enumerate(lines)))
    with MemoryIndex(tmp_path_factory.mktemp("absent")) as index:
        index.index_from_string("MEMORY.md", text)
        query = " ".join(words)
        found = [h.content for h in index.search(query, limit=4, snippets=False)]
        assert bool(found) == any(set(words) & set(line) for line in lines)
        for typed in (f"{query} {absent}", f"{absent} {query}"):
            assert [h.content for h in index.search(typed, limit=4, snippets=False)] == found


def test_a_word_is_looked_for_apart_only_while_the_memory_seldom_writes_it(
    index: MemoryIndex,
) -> None:
    """Splitting a common word ("motivated": "motiv ated") costs a read of both halves' rows."""
    index.index_from_string("memory/a.md", _lines("- The road trip was in May."))
    assert [h.content for h in index.search("roadtrip", snippets=False)] == [
        "- The road trip was in May."
    ]
    index.index_from_string("memory/b.md", _lines(*[f"- roadtrip plan {i}" for i in range(6)]))
    assert "- The road trip was in May." not in [
        h.content for h in index.search("roadtrip", limit=10, snippets=False)
    ]


_WORDS = st.one_of(
    st.text(max_size=14), st.sampled_from(["roadtrip", "work", "out", "children", "grandma"])
)


@given(st.lists(_WORDS, max_size=30))
def test_a_split_comes_after_the_word_it_splits(words: list[str]) -> None:
    """The planner probes a split only once it knows how often the memory writes its word."""
    clauses = analyze(" ".join(words))
    for i, clause in enumerate(clauses):
        word = split_word(clause)
        assert word is None or word in clauses[:i]
        if clause.startswith("({content cjk context}") and " OR " not in clause:  # a split
            assert word is not None, clause
