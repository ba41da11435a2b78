"""List questions (harness.memory._lists): a question that asks for several things gets hits
from several files, not the one file that says its words most often. Each test states a
guarantee a reader relies on."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.memory._lists import SPREAD, asks_for_list, spread
from harness.memory._search import Hit
from harness.memory.index import MemoryIndex


@pytest.fixture
def index(tmp_path: Path) -> Iterator[MemoryIndex]:
    with MemoryIndex(tmp_path) as opened:
        yield opened


# --- which questions ask for a list -------------------------------------------------------------


@pytest.mark.parametrize(
    "question",
    [
        "What books has Melanie read?",
        "Which cities has Jon visited?",
        "What kinds of art does Caroline make?",
        "What martial arts has John done?",
        "Where has Melanie camped?",
        "Who have written notes of gratitude to Maria?",
        "What do Jon and Gina both have in common?",
        "Did Jon and Gina both take part in dance competitions?",
    ],
)
def test_a_question_that_asks_for_several_things_is_a_list_question(question: str) -> None:
    assert asks_for_list(question)


@pytest.mark.parametrize(
    "question",
    [
        "What did Caroline research?",
        "What does Melanie have in her car?",  # "have" is the main verb
        "Jon has to leave early, what time is it?",  # "has to" is not the perfect
        "What workout class did Maria start?",  # "class" is not a plural
        "What status did Gina's store reach?",
        "When did Jon lose his job?",
        "",
    ],
)
def test_a_question_about_one_thing_is_not_a_list_question(question: str) -> None:
    assert not asks_for_list(question)


@given(st.text(max_size=300))
def test_any_text_is_read_without_error(text: str) -> None:
    assert asks_for_list(text) in (True, False)


# --- how hits are spread ------------------------------------------------------------------------

_HITS = st.lists(
    st.tuples(st.sampled_from(["a.md", "b.md", "c.md"]), st.floats(0, 100)),
    max_size=40,
).map(
    lambda drawn: sorted(
        ((i, path, i, f"line {i}", score) for i, (path, score) in enumerate(drawn)),
        key=lambda hit: (-hit[4], -hit[0]),
    )
)


@given(_HITS)
def test_spreading_reorders_the_hits_and_loses_none(hits: list[Hit]) -> None:
    spread_hits = spread(hits)
    assert Counter(hit[:4] for hit in spread_hits) == Counter(hit[:4] for hit in hits)
    scores = [hit[4] for hit in spread_hits]
    assert scores == sorted(scores, reverse=True)


@given(_HITS)
def test_a_hit_loses_score_only_to_better_hits_of_its_own_file_that_are_not_beside_it(
    hits: list[Hit],
) -> None:
    after = {hit[0]: hit[4] for hit in spread(hits)}
    for rank, (row_id, path, _, _, score) in enumerate(hits):
        crowd = sum(1 for other in hits[:rank] if other[1] == path and abs(other[0] - row_id) > 2)
        assert after[row_id] == pytest.approx(score * SPREAD**crowd)


# --- search -------------------------------------------------------------------------------------


def _book_club_day() -> str:
    """One day that says "book" on many lines, two lines apart (each its own snippet)."""
    lines = ["# 2023-03-01"]
    for i in range(8):
        lines += [f"- Ann: The book club book {i} was a good book, a book of books.", "- Bo: ok"]
        lines.append("- Bo: sure")
    return "\n".join(lines) + "\n"


_OTHER_DAYS = {
    "memory/2023-04-02.md": "# 2023-04-02\n- Ann: Finished Dune last night, what a book.\n",
    "memory/2023-05-09.md": "# 2023-05-09\n- Ann: Started a book by Ursula Le Guin.\n",
    "memory/2023-06-20.md": "# 2023-06-20\n- Ann: Reread my favourite childhood book.\n",
}


@pytest.mark.parametrize("snippets", [True, False])
def test_a_list_question_gets_hits_from_the_days_that_mention_one_item_each(
    index: MemoryIndex, snippets: bool
) -> None:
    """Ranked by words alone, the book-club day's lines take all five hits (fails without
    the spread: every hit is of 2023-03-01); the list is told over four days."""
    index.index_from_string("memory/2023-03-01.md", _book_club_day())
    for path, text in _OTHER_DAYS.items():
        index.index_from_string(path, text)
    hits = index.search("What books has Ann read?", 5, snippets=snippets)
    days = {hit.path for hit in hits}
    assert set(_OTHER_DAYS) <= days
    question = "What was the book club book 3 Ann talked about?"  # about one thing: no spread
    assert {hit.path for hit in index.search(question, 5, snippets=snippets)} == {
        "memory/2023-03-01.md"
    }
