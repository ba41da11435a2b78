"""Dates as keys (harness.memory._dates): the days a question names rank first, and a line's
"yesterday" is found under the day it means. Each test states a guarantee a reader relies on."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.memory._dates import day_words, named_days, resolved_days, without_days
from harness.memory._fts import TOKENIZER, rows_for
from harness.memory.index import MemoryIndex

TUESDAY = date(2023, 5, 9)


@pytest.fixture
def index(tmp_path: Path) -> Iterator[MemoryIndex]:
    with MemoryIndex(tmp_path) as opened:
        yield opened


# --- relative phrases -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("said", "means"),
    [
        ("I went to a support group yesterday.", "May 8 2023 d20230508"),
        ("Last night was loud", "May 8 2023 d20230508"),
        ("See you tomorrow!", "May 10 2023 d20230510"),
        ("We met 3 days ago", "May 6 2023 d20230506"),
        ("two weeks ago I quit", "April 25 2023 d20230425"),
        ("a couple of weeks ago", "April 25 2023 d20230425"),
        ("last week was busy", "May 2 2023 d20230502"),
        ("last Tuesday we swam", "May 2 2023 d20230502"),  # written on a Tuesday: the one before
        ("last Friday we swam", "May 5 2023 d20230505"),
        ("last month I moved", "April 2023 m202304"),
        ("six months ago", "November 2022 m202211"),
        ("last year", "2022"),
        ("next month", "June 2023 m202306"),
    ],
)
def test_a_relative_phrase_resolves_against_the_day_it_was_written(said: str, means: str) -> None:
    assert resolved_days(said, TUESDAY) == means


def test_months_and_years_roll_over() -> None:
    assert resolved_days("last month", date(2024, 1, 15)) == "December 2023 m202312"
    assert resolved_days("next month", date(2023, 12, 1)) == "January 2024 m202401"
    assert resolved_days("yesterday", date(2024, 3, 1)) == "February 29 2024 d20240229"


def test_vague_or_unknown_phrases_are_not_dates() -> None:
    for said in ("recently", "a while ago", "the last one", "next to me", "lastly", "agog"):
        assert resolved_days(said, TUESDAY) == ""


def test_a_dated_line_is_indexed_under_its_day_and_the_day_it_means() -> None:
    rows = rows_for("memory/2023-05-09.md", "# 2023-05-09\n- Ann: I swam yesterday.\n- Ann: Hi")
    contexts = {content: context for _, content, _, context, *_ in rows}
    assert contexts["- Ann: I swam yesterday."] == contexts["- Ann: Hi"] + " May 8 2023 d20230508"
    assert contexts["- Ann: Hi"].startswith("May 9 2023")
    undated = rows_for("MEMORY.md", "- Ann: I swam yesterday.")
    assert undated[0][3] == ""  # no day to count from: nothing is guessed


def test_a_transcript_message_resolves_against_its_timestamp() -> None:
    entry = {"type": "message", "role": "user", "timestamp": "2023-05-09T10:00:00Z"}
    text = json.dumps({**entry, "content": "I swam yesterday"})
    (row,) = rows_for("agents/a/sessions/s.log.jsonl", text)
    assert row[3] == "May 9 2023 d20230509 May 8 2023 d20230508"


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=200), day=st.dates())
def test_any_line_on_any_day_resolves_to_date_words_or_nothing(text: str, day: date) -> None:
    words = resolved_days(f"{text} yesterday last week 2 years ago next month", day)
    months = "January|February|March|April|May|June|July|August|September|October|November|December"
    key = r"[dm]\d{6}(?:\d\d)?"
    assert all(
        word.isdigit() or word in months.split("|") or re.fullmatch(key, word)
        for word in words.split()
    )


# --- days a question names --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "phrase"),
    [
        ("What did Gina find on 1 February, 2023?", "d20230201"),
        ("What happened on February 1st, 2023?", "d20230201"),
        ("What happened on Feb. 1 2023?", "d20230201"),
        ("the 1st of Feb", '"February 1"'),
        ("notes of 2023-02-01", "d20230201"),
        (
            "in Feb 2023",
            "(m202302 " + "".join(f"OR d202302{d:02} " for d in range(1, 29))[:-1] + ")",
        ),
    ],
)
def test_a_question_names_a_day_in_any_common_form(question: str, phrase: str) -> None:
    assert named_days(question) == f"context : ({phrase})"


def test_words_that_only_look_like_dates_name_no_day() -> None:
    for question in ("May I ask about Ann?", "2023 was long", "on 2023-02-30", "31 February 2023"):
        assert named_days(question) is None


def test_the_named_days_are_taken_out_of_the_words_searched() -> None:
    assert without_days("What did Gina find on 1 February, 2023?").split() == [
        "What",
        "did",
        "Gina",
        "find",
        "on",
        "?",
    ]


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=120), day=st.dates(date(1800, 1, 1), date(2999, 12, 31)))
def test_any_text_gives_an_expression_fts5_accepts_or_none(text: str, day: date) -> None:
    """Whatever a user types around a date, the expression is well-formed (never an error).

    Years 1800 to 2999 are dates; other four-digit numbers are just numbers."""
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(content, context, tokenize='{TOKENIZER}')")
    conn.execute("INSERT INTO t VALUES ('x', ?)", (day_words(day),))
    for asked in (text, f"{text} on {day.day} {day:%B}, {day.year} {text}"):
        expression = named_days(asked)
        if expression is not None:
            conn.execute("SELECT rowid FROM t WHERE t MATCH ?", (expression,)).fetchall()
    expression = named_days(f"{text} on {day.isoformat()}")
    assert expression is not None
    assert conn.execute("SELECT count(*) FROM t WHERE t MATCH ?", (expression,)).fetchone() == (1,)


# --- search -----------------------------------------------------------------------------------

OTHER_DAY = """# 2023-05-20

- Gina: I found a new supplier for the store and a supplier for the shelves, supplier heaven.
"""

THE_DAY = """# 2023-02-01

- Gina: One wholesaler said yes today, so the store grows.
- Jon: Great news!
"""


def test_the_rows_of_a_named_day_rank_first(index: MemoryIndex) -> None:
    index.index_from_string("memory/2023-05-20.md", OTHER_DAY)
    index.index_from_string("memory/2023-02-01.md", THE_DAY)
    question = "What supplier did Gina find for her store on 1 February, 2023?"
    assert "wholesaler" in index.search(question, 1, snippets=False)[0].content
    undated = "What supplier did Gina find for her store?"
    assert "supplier heaven" in index.search(undated, 1, snippets=False)[0].content


def test_a_named_day_with_no_matching_row_leaves_the_ranking_alone(index: MemoryIndex) -> None:
    index.index_from_string("memory/2023-05-20.md", OTHER_DAY)
    asked = "What supplier did Gina find for her store on 3 March, 2021?"
    assert "supplier heaven" in index.search(asked, 1, snippets=False)[0].content


def test_yesterday_is_found_under_the_day_it_means(index: MemoryIndex) -> None:
    index.index_from_string(
        "memory/2023-05-08.md",
        "# 2023-05-08\n- Ann: I went to a support group yesterday.\n- Ann: I went hiking.\n",
    )
    index.index_from_string("memory/2023-05-09.md", "# 2023-05-09\n- Ann: I went out again.\n")
    hit = index.search("Where did Ann go on 7 May 2023?", 1, snippets=False)[0]
    assert "support group" in hit.content
