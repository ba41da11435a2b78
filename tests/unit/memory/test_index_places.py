"""Places as keys (harness.memory._places): a line that names a place is found by a question
that asks for one. Each test states a guarantee a reader relies on."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.memory._places import PLACE_KEY, asks_for_place, matchable, names_a_place
from harness.memory.index import INDEX_FILE, MemoryIndex

_TEXT = resources.files("harness.memory").joinpath("places.txt").read_text(encoding="utf-8")
GAZETTEER = [line for line in _TEXT.splitlines() if line and not line.startswith("#")]


@pytest.fixture
def index(tmp_path: Path) -> Iterator[MemoryIndex]:
    with MemoryIndex(tmp_path) as opened:
        yield opened


# --- what a line names ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "said",
    [
        "Took a short trip last week to Rome.",
        "We ate in Rome's best place",
        "We flew to New York City",
        "she moved to the Netherlands",
        "- Ann: it was hot in Rio de Janeiro",
        "a gift from my grandma, who lives in Sweden.",
        "we visited Paris, Lyon and Berlin",
        "a road trip across Bosnia and Herzegovina",
        "- Ann: Back from St. Louis!",
        "- Ann: I live in São Paulo now",
        # places GeoNames lists as no country or city
        "I got the idea from that trip to England a few years ago",
        "- Ann: Back from Europe, and so tired",
        "we moved to the East Coast in May",
        "a cruise around the Caribbean",
    ],
)
def test_a_place_after_a_preposition_of_place_is_named(said: str) -> None:
    assert names_a_place(said)


@pytest.mark.parametrize(
    "said",
    [
        "Nice pic!",  # a city's name that is a word at the start of a sentence
        "- Ann: I love Nice.",  # a place not after a preposition of place is passed over
        "- Ann: Thanks, Sofia!",  # a city's name that is a person's
        "We went to rome",  # names are matched as written
        "we went to the park with my kids",
        "We went to Atlantis",
        "",
    ],
)
def test_a_line_that_names_no_place_is_not_keyed(said: str) -> None:
    assert not names_a_place(said)


@given(
    st.sampled_from(GAZETTEER),
    st.sampled_from(["We went to {}.", "I live in {}!", "Back from {}'s airport", "near {}, far"]),
)
def test_every_place_of_the_gazetteer_is_found_after_a_preposition(name: str, frame: str) -> None:
    assert names_a_place(f"Last year. {frame.format(name)}")


def test_the_gazetteer_holds_only_names_the_index_can_find() -> None:
    assert len(GAZETTEER) > 5000
    assert all(matchable(name) for name in GAZETTEER)
    assert not matchable("'s-Hertogenbosch")
    assert not matchable("Sector 3")


@given(st.text(max_size=300))
def test_any_text_is_read_without_error(text: str) -> None:
    assert names_a_place(text) in (True, False)


@pytest.mark.parametrize(
    ("question", "asks"),
    [
        ("Which cities has Jon visited?", True),
        ("Where did Caroline move from 4 years ago?", True),
        ("What country is Caroline's grandma from?", True),
        ("Has Maria travelled abroad?", True),
        ("What states has Maria vacationed at?", True),
        ("Has Ann been overseas?", True),
        ("Which state did Ann move to?", True),
        ("What is the state of the project?", False),
        ("The state is fine, what next?", False),
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


def test_a_country_geonames_lists_as_part_of_one_is_a_place(index: MemoryIndex) -> None:
    """England is no country of GeoNames (the United Kingdom is), but people name it as one."""
    index.index_from_string(
        "memory/2023-05-08.md",
        "# 2023-05-08\n- Maria: I got the idea from that trip to England, the castles!\n"
        "- Maria: My sister came over for dinner.\n",
    )
    hits = index.search("What European countries has Maria been to?", 2, snippets=False)
    assert "England" in hits[0].content


def test_the_key_is_in_the_context_of_the_rows_that_name_a_place_only(
    index: MemoryIndex, tmp_path: Path
) -> None:
    index.index_from_string("memory/2023-05-08.md", _LOG)
    conn = sqlite3.connect(tmp_path / INDEX_FILE)
    keyed = [
        content
        for content, context in conn.execute("SELECT content, context FROM memory_lines")
        if PLACE_KEY in context.split()
    ]
    conn.close()
    assert keyed == ["- Jon: Took a short trip last week to Rome to clear my mind a little."]
