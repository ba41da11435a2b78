"""Places as keys (harness.memory._places): a line that names a place is found by a question
that asks for one, and by its country. Each test states a guarantee a reader relies on."""

from __future__ import annotations

from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.memory._places import PLACE_KEY, asks_for_place, matchable, place_words
from harness.memory.index import MemoryIndex


def _gazetteer() -> list[tuple[str, str, str]]:
    text = resources.files("harness.memory").joinpath("places.tsv").read_text(encoding="utf-8")
    rows = [line.split("\t") for line in text.splitlines() if line and not line.startswith("#")]
    return [(name, country, continent) for name, country, continent in rows]


GAZETTEER = _gazetteer()


@pytest.fixture
def index(tmp_path: Path) -> Iterator[MemoryIndex]:
    with MemoryIndex(tmp_path) as opened:
        yield opened


HOP_WORDS = {
    word
    for _, country, continent in GAZETTEER
    for word in f"{country} {continent} European Asian African American Oceanian Antarctic".split()
}


# --- what a line names ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("said", "words"),
    [
        ("Took a short trip last week to Rome.", "Italy Europe European"),
        ("We ate in Rome's best place", "Italy Europe European"),
        ("We flew to New York City and on to Toronto", "United States North America Canada"),
        ("she moved to the Netherlands", "Europe European"),
        ("- Ann: it was hot in Rio de Janeiro", "Brazil South America American"),
        ("a gift from my grandma, who lives in Sweden.", "Europe European"),
        ("we visited Rome, Paris and Berlin", "Italy France Germany Europe"),
        ("a road trip across Bosnia and Herzegovina", "Europe European"),
        ("- Ann: Back from St. Louis!", "United States North America American"),
    ],
)
def test_a_line_naming_a_place_holds_the_key_its_country_and_continent(
    said: str, words: str
) -> None:
    found = place_words(said).split()
    assert found[:1] == [PLACE_KEY]
    assert set(words.split()) <= set(found)


@pytest.mark.parametrize(
    "said",
    [
        "Nice pic!",  # a city's name that is a word at the start of a sentence
        "- Ann: I love Nice.",  # a place not after a preposition of place is passed over
        "- Ann: Thanks, Sofia!",  # a city's name that is a person's
        "We went to rome",  # names are matched as written
        "we went to the park with my kids",
        "",
    ],
)
def test_a_line_naming_no_place_holds_nothing(said: str) -> None:
    assert place_words(said) == ""


def test_names_do_not_overlap_and_the_longest_wins() -> None:
    """ "New York" is not also York, England."""
    assert "Kingdom" not in place_words("I live in New York now")
    assert "Kingdom" in place_words("I lived in New York and in York")


@given(
    st.sampled_from(GAZETTEER),
    st.sampled_from(["We went to {}.", "I live in {}!", "Back from {}'s airport", "near {}, far"]),
)
def test_every_place_of_the_gazetteer_is_found_after_a_preposition(
    place: tuple[str, str, str], frame: str
) -> None:
    name, country, continent = place
    found = place_words(f"Last year. {frame.format(name)}").split()
    assert found[:1] == [PLACE_KEY]
    assert set(f"{country} {continent}".split()) <= set(found)


def test_the_gazetteer_holds_only_names_the_index_can_find() -> None:
    assert all(matchable(name) for name, _, _ in GAZETTEER)
    assert not matchable("'s-Hertogenbosch")
    assert not matchable("Sector 3")


@given(st.text(max_size=300))
def test_any_text_gives_the_key_and_gazetteer_words_or_nothing(text: str) -> None:
    found = place_words(text).split()
    assert found == [] or (found[0] == PLACE_KEY and set(found[1:]) <= HOP_WORDS)


@pytest.mark.parametrize(
    ("question", "asks"),
    [
        ("Which cities has Jon visited?", True),
        ("Where did Caroline move from 4 years ago?", True),
        ("What country is Caroline's grandma from?", True),
        ("Has Maria travelled abroad?", True),
        ("What did Melanie paint recently?", False),
        ("When did Jon lose his job?", False),
    ],
)
def test_a_question_asks_for_a_place_by_its_words(question: str, asks: bool) -> None:
    assert asks_for_place(question) is asks


# --- search -------------------------------------------------------------------------------------


_LOG = """# 2023-05-08
- Jon: Took a short trip last week to Rome to clear my mind a little.
- Gina: Visited my mom on Sunday, she says hi.
- Jon: The studio visit went well, the city council liked it.
- Gina: My cat knocked over the plant again.
"""


def test_a_question_that_asks_for_a_place_finds_the_line_that_names_one(
    index: MemoryIndex,
) -> None:
    """The Rome line shares no word with the question: the place key alone finds it."""
    index.index_from_string("memory/2023-05-08.md", _LOG)
    hits = index.search("Which cities has Jon visited?", 2, snippets=False)
    assert any("Rome" in hit.content for hit in hits)


def test_a_question_that_names_a_country_finds_its_cities(index: MemoryIndex) -> None:
    index.index_from_string("memory/2023-05-08.md", _LOG)
    hit = index.search("Has Jon ever been to Italy?", 1, snippets=False)[0]
    assert "Rome" in hit.content
