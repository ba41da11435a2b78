"""Search over conversation logs: neighbours, speaker labels and snippets (see _fts, _search,
_snippets). Each test states a guarantee a reader of the results relies on."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.memory._fts import rows_for, total_rows
from harness.memory._search import LABEL_MIN_ROWS
from harness.memory.index import SNIPPET_CHARS, MemoryIndex, SearchHit

CHAT = """# 2023-05-08

## Conversation at 1:56 pm

- Caroline: Hey Mel! I went to a support group yesterday.
- Melanie: Caroline, that sounds brave. How was it, Caroline?
- Caroline: It was powerful. I researched adoption agencies afterwards.
- Melanie: Caroline, I'm proud of you. Caroline, tell me more.
- Caroline: Sure!

## Conversation at 7:00 pm

- Melanie: I painted a lake sunrise today.
- Caroline: Lovely! Where is the lake?
"""


@pytest.fixture
def index(tmp_path: Path) -> Iterator[MemoryIndex]:
    with MemoryIndex(tmp_path) as opened:
        yield opened


def _near(rel: str, text: str) -> dict[int, str]:
    return {row[0]: row[4] for row in rows_for(rel, text)}


# --- neighbours ---------------------------------------------------------------------------


def test_a_turn_is_indexed_with_the_words_of_its_neighbours() -> None:
    near = _near("memory/2023-05-08.md", CHAT)
    assert {"support", "group", "researched"} <= set(near[6].split())
    assert "brave" not in near[6].split()  # its own words are in its content
    assert "the" not in near[6].split()  # stop words are never looked for
    assert near[1] == near[3] == ""  # headings have none


def test_a_line_that_is_not_a_turn_has_no_neighbours_words() -> None:
    near = _near("MEMORY.md", "- Anna moved to Berlin.\n- Tom lives in Munich.\n")
    assert set(near.values()) == {""}  # facts stand alone


def test_neighbours_do_not_cross_a_heading() -> None:
    near = _near("memory/2023-05-08.md", CHAT)
    assert "painted" not in near[9]  # the last line of the first conversation
    assert "sure" not in near[13]  # the first line of the second
    assert "lovely" in near[13]


def test_neighbours_do_not_cross_files(index: MemoryIndex) -> None:
    index.index_from_string("memory/2023-05-08.md", "- Anna: we talked about kayaks\n")
    index.index_from_string("memory/2023-05-09.md", "- Tom: the zeppelin flew over\n")
    hits = index.search("zeppelin", snippets=False)
    assert [h.path for h in hits] == ["memory/2023-05-09.md"]
    (snippet,) = index.search("zeppelin kayaks", limit=1)  # one snippet, of one file
    assert "\n" not in snippet.content


def test_a_line_found_through_its_neighbour_ranks_below_the_line_itself(
    index: MemoryIndex,
) -> None:
    index.index_from_string(
        "memory/2023-05-08.md",
        "- Anna: What did you think of Becoming Nicole?\n- Tom: It taught me self-acceptance.\n"
        "- Anna: Nice.\n- Tom: Yes.\n",
    )
    hits = index.search("What did Tom take away from Becoming Nicole?", snippets=False)
    lines = [h.line_number for h in hits]
    assert lines[0] == 1
    assert 2 in lines  # the answer shares no word with the question


# --- speaker labels -------------------------------------------------------------------------


def test_a_speaker_named_in_the_question_is_a_label_not_a_word(index: MemoryIndex) -> None:
    index.index_from_string("memory/2023-05-08.md", CHAT)
    _, params = index.search_sql("What did Caroline research?")
    assert "caroline" not in params["query"]
    assert "research" in params["query"]
    # Melanie's lines name Caroline twice each; the line Caroline said about research wins.
    (best, *_) = index.search("What did Caroline research?", snippets=False)
    assert best.content == "- Caroline: It was powerful. I researched adoption agencies afterwards."


def test_a_label_stays_a_word_when_nothing_else_is_left(index: MemoryIndex) -> None:
    index.index_from_string("memory/2023-05-08.md", CHAT)
    _, params = index.search_sql("Who is Caroline?")
    assert "caroline" in params["query"]
    assert index.search("Who is Caroline?", snippets=False)


def test_a_name_is_a_label_only_once_it_starts_enough_lines(index: MemoryIndex) -> None:
    rare = "".join(f"- Zed: line {i} about tea\n" for i in range(LABEL_MIN_ROWS - 1))
    index.index_from_string("memory/2023-05-08.md", rare)
    assert "zed" in index.search_sql("What tea did Zed drink?")[1]["query"]
    index.index_from_string("memory/2023-05-09.md", "- Zed: one more about coffee\n")
    assert "zed" not in index.search_sql("What tea did Zed drink?")[1]["query"]
    index.remove("memory/2023-05-09.md")  # the labels go with the file's rows
    assert "zed" in index.search_sql("What tea did Zed drink?")[1]["query"]


def test_labels_are_learned_per_user(index: MemoryIndex) -> None:
    index.index_from_string("users/alice/memory/2023-05-08.md", CHAT)
    index.index_from_string("users/bob/MEMORY.md", "- Caroline lent me a lake map.\n")
    alices = index.search_sql("What did Caroline research?", user_id="alice")[1]["query"]
    bobs = index.search_sql("What lake did Caroline map?", user_id="bob")[1]["query"]
    assert "caroline" not in alices
    assert "caroline" in bobs  # bob's memory never learned the label
    assert {h.path for h in index.search("Caroline lake", user_id="bob")} == {"users/bob/MEMORY.md"}


def test_transcript_roles_are_labels(index: MemoryIndex) -> None:
    entries = [
        {"type": "message", "role": role, "content": text}
        for role, text in [
            ("user", "I love the assistant's advice"),
            ("assistant", "Try a sourdough starter"),
            ("user", "Sourdough it is"),
            ("assistant", "Feed it daily"),
            ("assistant", "And keep it warm"),
        ]
    ]
    text = "\n".join(json.dumps(e) for e in entries) + "\n"
    index.index_from_string("agents/main/sessions/s.log.jsonl", text)
    assert (
        "assistant"
        not in index.search_sql("What did the assistant suggest, sourdough?")[1]["query"]
    )


# --- snippets --------------------------------------------------------------------------------


def test_adjacent_hits_become_one_snippet_with_its_line_range(index: MemoryIndex) -> None:
    index.index_from_string("memory/2023-05-08.md", CHAT)
    best = index.search("support group brave", limit=1)[0]
    assert best.line_number <= 5
    assert best.last_line >= 6
    assert "- Caroline: Hey Mel! I went to a support group yesterday." in best.content
    assert "- Melanie: Caroline, that sounds brave. How was it, Caroline?" in best.content


def test_filling_stops_at_a_heading(index: MemoryIndex) -> None:
    index.index_from_string("memory/2023-05-08.md", CHAT)
    (snippet,) = index.search("painted lake sunrise", limit=1, budget=5000)
    assert (snippet.line_number, snippet.last_line) == (13, 14)
    assert "#" not in snippet.content


def test_the_best_line_is_cut_to_a_budget_it_does_not_fit(index: MemoryIndex) -> None:
    long = "- " + " ".join(["filler"] * 100) + " needle"
    index.index_from_string("MEMORY.md", long + "\n")
    (snippet,) = index.search("needle", limit=1, budget=50)
    assert snippet.content == long[:50]


_WORDS = ["tea", "lake", "kayak", "zeppelin", "museum", "sourdough", "bike", "Rome"]
_LINE = st.lists(st.sampled_from(_WORDS), min_size=1, max_size=12).map(" ".join)
_FILE = st.lists(
    st.one_of(_LINE.map(lambda s: f"- Ann: {s}"), _LINE, st.just("## Later"), st.just("")),
    min_size=1,
    max_size=30,
)


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    files=st.lists(_FILE, min_size=1, max_size=3),
    query=st.lists(st.sampled_from(_WORDS), min_size=1, max_size=3).map(" ".join),
    limit=st.integers(1, 6),
    budget=st.one_of(st.none(), st.integers(1, 800)),
)
def test_snippets_stay_in_budget_and_never_repeat_a_line(
    tmp_path_factory: pytest.TempPathFactory,
    files: list[list[str]],
    query: str,
    limit: int,
    budget: int | None,
) -> None:
    texts = {
        f"memory/2023-05-0{i + 1}.md": "\n".join(lines) + "\n" for i, lines in enumerate(files)
    }
    with MemoryIndex(tmp_path_factory.mktemp("snippets")) as index:
        for path, text in texts.items():
            index.index_from_string(path, text)
        hits = index.search(query, limit, budget=budget)
    allowed = SNIPPET_CHARS * limit if budget is None else budget
    assert len(hits) <= limit
    assert sum(len(h.content) for h in hits) <= allowed
    seen: set[tuple[str, int]] = set()
    for hit in hits:
        assert isinstance(hit, SearchHit)
        lines = texts[hit.path].split("\n")
        shown = [(n, line.strip()) for n, line in enumerate(lines, 1) if line.strip()]
        inside = [line for n, line in shown if hit.line_number <= n <= hit.last_line]
        if len(inside) == 1 and len(hit.content) < len(inside[0]):  # the best line, cut
            assert inside[0].startswith(hit.content)
        else:
            assert hit.content == "\n".join(inside)  # consecutive lines, whole
        span = {(hit.path, n) for n, _ in shown if hit.line_number <= n <= hit.last_line}
        assert not span & seen, "a line returned twice"
        seen |= span


# --- a file that grows is indexed in place ---------------------------------------------------


def _stored(index: MemoryIndex, path: str) -> list[tuple[object, ...]]:
    conn = index._connection()
    first, count = conn.execute(
        "SELECT first_id, rows FROM memory_files WHERE path = ?", (path,)
    ).fetchone()
    rows = conn.execute(
        "SELECT id, line_number, content, cjk, context, near, speaker FROM memory_lines "
        "WHERE path = ? ORDER BY id",
        (path,),
    ).fetchall()
    assert [row[0] for row in rows] == list(range(first, first + count))  # consecutive ids
    return [row[1:] for row in rows]


_CHAT_LINE = st.one_of(
    st.tuples(st.sampled_from(["Ann", "Bo"]), _LINE).map(lambda t: f"- {t[0]}: {t[1]}"),
    _LINE,
    st.just("## Conversation at noon"),
    st.just(""),
    st.just("- " + "long " * 450 + "tea"),  # split into rows
    st.just("- Ann: I swam yesterday, and two weeks ago"),  # a day the line means
)


@settings(deadline=None)
@given(
    start=st.lists(_CHAT_LINE, max_size=25).map("\n".join),
    added=st.lists(_CHAT_LINE, min_size=1, max_size=8).map("\n".join),
    newline=st.booleans(),
    path=st.sampled_from(["memory/2023-05-08.md", "users/ann/MEMORY.md"]),
)
def test_appended_lines_leave_the_rows_a_fresh_index_would_have(
    tmp_path_factory: pytest.TempPathFactory, start: str, added: str, newline: bool, path: str
) -> None:
    grown = start + ("\n" if newline else "") + added
    with MemoryIndex(tmp_path_factory.mktemp("grow")) as index:
        index.index_from_string(path, start)
        index.index_from_string("memory/other.md", "- Bo: a file written after it\n")
        index.index_from_string(path, grown)
        assert _stored(index, path) == [tuple(row) for row in rows_for(path, grown)]
        conn = index._connection()
        (count,) = conn.execute("SELECT count(*) FROM memory_lines").fetchone()
        assert total_rows(conn) == count  # the row count the idf uses


def test_a_transcript_that_grows_is_indexed_in_place(index: MemoryIndex) -> None:
    def entry(role: str, text: str) -> str:
        return json.dumps({"type": "message", "role": role, "content": text}) + "\n"

    path = "agents/main/sessions/s.log.jsonl"
    text = entry("user", "hello there") + entry("assistant", "hi\nhow are you") * 3
    index.index_from_string(path, text)
    first = _stored(index, path)
    grown = text + entry("user", "I bought a kayak")
    assert index.index_from_string(path, grown) == 5  # the last two entries again, one new
    assert _stored(index, path) == [tuple(row) for row in rows_for(path, grown)]
    assert _stored(index, path)[:-5] == first[:-4]
    assert index.search("kayak", snippets=False)[0].line_number == 5


def test_a_file_changed_before_its_end_or_grown_past_its_room_is_indexed_anew(
    index: MemoryIndex,
) -> None:
    path = "memory/2023-05-08.md"
    text = "".join(f"- Ann: line {i} about tea\n" for i in range(10))
    index.index_from_string(path, text)
    edited = text.replace("line 3", "line three") + "- Bo: more\n"
    assert index.index_from_string(path, edited) == 11  # every row again
    assert _stored(index, path) == [tuple(row) for row in rows_for(path, edited)]
    much = edited + "".join(f"- Bo: new line {i}\n" for i in range(100))  # past its spare ids
    assert index.index_from_string(path, much) == 111
    assert _stored(index, path) == [tuple(row) for row in rows_for(path, much)]
