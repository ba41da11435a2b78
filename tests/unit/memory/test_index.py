from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.errors import StorageError
from harness.memory._query import _IRREGULAR_GROUPS, _VARIANT_GROUPS, analyze
from harness.memory.index import INDEX_FILE, IndexStats, MemoryIndex, SearchHit
from harness.workspace import safe_segment

DAILY = """## Memory Flush — 2026-03-14T10:00:00Z
- Anna moved to Berlin in March 2026.
- Tom prefers green tea over coffee.

- Booked a dentist appointment for Friday.
"""


@pytest.fixture
def index(tmp_path: Path) -> Iterator[MemoryIndex]:
    with MemoryIndex(tmp_path) as opened:
        yield opened


def _write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _message(content: str, kind: str = "message") -> str:
    return json.dumps({"type": kind, "role": "user", "content": content})


# --- schema and lifecycle -----------------------------------------------------------------


def test_open_creates_the_database_in_base_dir_with_recorded_migrations(tmp_path: Path) -> None:
    index = MemoryIndex(tmp_path).open()
    index.close()
    conn = sqlite3.connect(tmp_path / INDEX_FILE)
    names = [row[0] for row in conn.execute("SELECT name FROM _harness_migrations ORDER BY name")]
    mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    conn.close()
    assert names == [
        "m001_lines_and_fts",
        "m002_vectors",
        "m003_neighbours_and_speakers",
        "m004_resolved_days",
        "m005_place_keys",
        "m006_named_regions",
    ]
    assert mode == "wal"


def test_open_is_idempotent_and_reopening_keeps_rows(tmp_path: Path) -> None:
    index = MemoryIndex(tmp_path)
    assert index.open() is index.open()
    index.index_from_string("memory/2026-03-14.md", DAILY)
    index.close()
    index.close()
    with MemoryIndex(tmp_path) as again:
        conn = sqlite3.connect(tmp_path / INDEX_FILE)
        assert conn.execute("SELECT count(*) FROM _harness_migrations").fetchone() == (6,)
        conn.close()
        assert again.search("Berlin", snippets=False)[0].line_number == 2


@pytest.mark.parametrize(
    ("migration", "line", "question", "found"),
    [
        (
            "m004_resolved_days",
            "- Ann: I went to a support group yesterday.",
            "Where did Ann go on 7 May 2023?",
            "support group",
        ),
        (
            "m005_place_keys",
            "- Ann: Took a short trip last week to Rome.",
            "Which cities has Ann visited?",
            "Rome",
        ),
        (
            "m006_named_regions",
            "- Ann: Took a short trip last week to England.",
            "Which countries has Ann visited?",
            "England",
        ),
    ],
)
def test_an_index_made_before_a_migration_that_adds_keys_is_indexed_again(
    tmp_path: Path, migration: str, line: str, question: str, found: str
) -> None:
    """The migration drops the rows whose context lacks its keys; a catch-up restores them."""
    workspace = tmp_path / "workspace"
    (workspace / "memory").mkdir(parents=True)
    (workspace / "memory" / "2023-05-08.md").write_text(
        f"# 2023-05-08\n{line}\n- Ann: I went hiking.\n"
    )
    with MemoryIndex(tmp_path) as index:
        index.index_all_from_workspace(workspace)
    conn = sqlite3.connect(tmp_path / INDEX_FILE)
    with conn:  # what an index of the previous version holds: no keys, no record of the migration
        conn.execute("UPDATE memory_lines SET context = 'May 8 2023'")
        conn.execute("DELETE FROM _harness_migrations WHERE name = ?", (migration,))
    conn.close()
    with MemoryIndex(tmp_path) as index:
        stats = index.index_all_from_workspace(workspace)
        hit = index.search(question, 1, snippets=False)[0]
    assert stats.indexed == 1
    assert found in hit.content


def test_a_file_that_is_not_a_database_raises_storage_error_naming_the_fix(tmp_path: Path) -> None:
    (tmp_path / INDEX_FILE).write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StorageError, match="delete it and run a re-index"):
        MemoryIndex(tmp_path).open()


def test_atomic_rolls_back_every_statement_of_a_failed_block(index: MemoryIndex) -> None:
    index.index_from_string("MEMORY.md", "- kept")

    def fail() -> None:
        with index.atomic() as conn:
            conn.execute("DELETE FROM memory_files")
            with index.atomic() as inner:
                inner.execute("DELETE FROM memory_lines")
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        fail()
    assert [h.content for h in index.search("kept", snippets=False)] == ["- kept"]


def test_nested_atomic_rolls_back_only_the_savepoint(index: MemoryIndex) -> None:
    def fail() -> None:
        with index.atomic() as inner:
            inner.execute("INSERT INTO memory_meta (key, value) VALUES ('b', '2')")
            raise ValueError("inner")

    with index.atomic() as conn:
        conn.execute("INSERT INTO memory_meta (key, value) VALUES ('a', '1')")
        with pytest.raises(ValueError, match="inner"):
            fail()
    with index.atomic() as conn:
        rows = conn.execute("SELECT key FROM memory_meta WHERE key IN ('a', 'b')").fetchall()
    assert rows == [("a",)]


# --- indexing one file --------------------------------------------------------------------


def test_index_from_string_counts_rows_and_keeps_original_line_numbers(index: MemoryIndex) -> None:
    assert index.index_from_string("memory/2026-03-14.md", DAILY) == 4
    hits = index.search("dentist appointment", snippets=False)
    assert hits[0] == SearchHit(
        path="memory/2026-03-14.md",
        line_number=5,
        content="- Booked a dentist appointment for Friday.",
        rank=hits[0].rank,
    )
    assert hits[0].rank > 0


def test_reindexing_a_path_replaces_its_rows(index: MemoryIndex) -> None:
    index.index_from_string("MEMORY.md", "- likes sailing")
    assert index.index_from_string("MEMORY.md", "- likes chess") == 1
    assert index.search("sailing", snippets=False) == []
    assert [h.content for h in index.search("chess", snippets=False)] == ["- likes chess"]


def test_unchanged_content_is_skipped_by_its_hash(index: MemoryIndex) -> None:
    assert index.index_from_string("MEMORY.md", DAILY) == 4
    assert index.index_from_string("MEMORY.md", DAILY) == 0


def test_blank_content_removes_the_rows_of_the_path(index: MemoryIndex) -> None:
    index.index_from_string("MEMORY.md", "- likes sailing")
    assert index.index_from_string("MEMORY.md", "  \n\n ") == 0
    assert index.search("sailing", snippets=False) == []


def test_remove_forgets_a_path_and_other_paths_stay(index: MemoryIndex) -> None:
    index.index_from_string("memory/2026-01-01.md", "- sailing in Kiel")
    index.index_from_string("memory/2026-01-02.md", "- sailing in Split")
    index.remove("memory/2026-01-01.md")
    assert [h.path for h in index.search("sailing", snippets=False)] == ["memory/2026-01-02.md"]


def test_paths_are_normalized_and_escapes_refused(index: MemoryIndex) -> None:
    index.index_from_string("/memory//2026-01-01.md", "- sailing")
    assert [h.path for h in index.search("sailing", snippets=False)] == ["memory/2026-01-01.md"]
    with pytest.raises(ValueError, match=r"\.\."):
        index.index_from_string("../outside.md", "- x")


def test_an_over_long_line_is_split_into_bounded_rows(index: MemoryIndex) -> None:
    line = " ".join(["filler"] * 600 + ["needle"])
    index.index_from_string("MEMORY.md", line)
    hits = index.search("needle", snippets=False)
    assert hits[0].content.endswith("needle")  # the other pieces hold it as a neighbour
    assert {h.line_number for h in hits} == {1}
    assert all(len(h.content) <= 2000 for h in hits)


# --- transcripts --------------------------------------------------------------------------


def test_transcripts_index_only_message_entries_by_jsonl_line(index: MemoryIndex) -> None:
    lines = [
        _message("We talked about the Lisbon trip"),
        _message("Summary: the user planned a Lisbon trip", kind="summary"),
        "{not json",
        json.dumps(["a", "list"]),
        json.dumps({"type": "message", "content": ["not", "a", "string"]}),
        "",
        _message("First line\nSecond line about Lisbon"),
    ]
    rel = "agents/main/sessions/s1.log.jsonl"
    index.index_from_string(rel, "\n".join(lines) + "\n")
    hits = index.search("Lisbon", limit=10, snippets=False)
    assert sorted((h.line_number, h.content) for h in hits[:2]) == [
        (1, "We talked about the Lisbon trip"),
        (7, "Second line about Lisbon"),
    ]
    assert [(h.line_number, h.content) for h in hits[2:]] == [(7, "First line")]  # a neighbour
    assert index.search("Summary planned", snippets=False) == []


# --- questions ----------------------------------------------------------------------------


def test_a_natural_language_question_finds_the_inflected_fact(index: MemoryIndex) -> None:
    index.index_from_string(
        "memory/2026-03-14.md",
        "- Anna moved to Berlin in March 2026.\n- Tom lives in Munich.\n- Berlin is rainy.\n",
    )
    hits = index.search("When did Anna move to Berlin?", snippets=False)
    assert hits[0].content == "- Anna moved to Berlin in March 2026."
    assert len(hits) == 2  # terms are OR'ed: the Berlin line matches too, ranked below
    (snippet,) = index.search("When did Anna move to Berlin?")  # the three lines, as one
    assert (snippet.line_number, snippet.last_line) == (1, 3)


def test_search_sql_ors_the_content_words_and_binds_the_query(index: MemoryIndex) -> None:
    index.index_from_string("MEMORY.md", "- Anna moved to Berlin.")
    sql, params = index.search_sql("When did Anna move to Berlin?", 5, user_id="alice")
    assert ":query" in sql
    assert "Anna" not in sql
    assert params == {
        "query": (
            '(({content cjk context} : "anna") OR ({content near} : "anna")) '
            'OR (({content cjk context} : "berlin") OR ({content near} : "berlin")) '
            'OR (({content cjk context} : "move") OR ({content near} : "move"))'
        ),
        "owner": "alice",
        "limit": 5,
    }


def test_search_sql_of_a_query_without_words_selects_nothing(index: MemoryIndex) -> None:
    index.index_from_string("MEMORY.md", "- Anna")
    sql, params = index.search_sql("?!")
    assert params == {}
    with index.atomic() as conn:
        assert conn.execute(sql).fetchall() == []


def test_possessives_plurals_and_irregular_verbs_match(index: MemoryIndex) -> None:
    index.index_from_string(
        "MEMORY.md",
        "- Anna's cats are called Miso and Tofu.\n- Bought a red bike in June.\n- Went to Porto.\n"
        "- Drew a horse on the fridge door.\n",
    )
    assert index.search("What is the name of Anna's cat?", snippets=False)[0].line_number == 1
    assert index.search("Which bike did I buy?", snippets=False)[0].line_number == 2
    assert index.search("When did I go to Porto?", snippets=False)[0].line_number == 3
    assert index.search("What have I drawn on?", snippets=False)[0].line_number == 4


def test_short_forms_and_british_spellings_find_the_word_as_written(index: MemoryIndex) -> None:
    index.index_from_string(
        "MEMORY.md",
        "- Our children love the park.\n- My favorite color is teal.\n- Sent Mum a photo.\n",
    )
    assert index.search("Where do the kids play?", snippets=False)[0].line_number == 1
    assert index.search("What is my fave colour?", snippets=False)[0].line_number == 2
    assert index.search("Which pics did my mother get?", snippets=False)[0].line_number == 3


def test_kind_of_frames_a_question_and_is_not_looked_for(index: MemoryIndex) -> None:
    index.index_from_string(
        "MEMORY.md", "- Mia is so kind, such a kind soul.\n- Pasta for dinner again.\n"
    )
    hits = index.search("What kind of food was dinner?", snippets=False)
    assert [h.line_number for h in hits] == [2]
    assert index.search("Who is kind?", snippets=False)[0].line_number == 1


def test_a_compound_is_found_however_it_is_written(index: MemoryIndex) -> None:
    index.index_from_string(
        "MEMORY.md",
        "- The road trip was in May.\n- Drove on a dirt road, a long trip.\n"
        "- Workout three times a week.\n- Out of the office since June.\n"
        "- Router setup took an hour.\n",
    )
    closed = index.search("When was the roadtrip?", snippets=False)
    assert [h.line_number for h in closed] == [1]  # the words in that order, next to each other
    spaced = index.search("How often do I work out?", snippets=False)
    assert [h.line_number for h in spaced] == [3]
    assert [h.line_number for h in index.search("When did I set up?", snippets=False)] == [5]


@pytest.mark.parametrize("groups", [_IRREGULAR_GROUPS, _VARIANT_GROUPS])
def test_every_form_of_a_group_looks_for_the_whole_group(groups: str) -> None:
    """A word in two groups would silently lose one of them."""
    for group in groups.split("|"):
        forms = group.split()
        if len(forms) < 2:
            continue
        for form in forms:
            clauses = [c for c in analyze(form) if " OR " in c]  # not its compound splits
            assert len(clauses) == len(forms), form
            assert all(f'"{each}"' in " ".join(clauses) for each in forms), form


def test_a_line_that_shares_only_get_or_go_with_a_question_is_not_a_hit(
    index: MemoryIndex,
) -> None:
    """A chat says "Got it!" on every other line: it matched every question with get or go."""
    index.index_from_string(
        "MEMORY.md",
        "- Got to go, talk later!\n- Got it.\n- Went home early.\n- The dentist said all is fine.",
    )
    question = "When did I go to the dentist, and what did I get?"
    hits = index.search(question, snippets=False)
    assert [hit.content for hit in hits] == ["- The dentist said all is fine."]
    assert index.search("go", snippets=False)[0].line_number == 1  # nothing else to look for


def test_accents_and_case_fold(index: MemoryIndex) -> None:
    index.index_from_string("MEMORY.md", "- Lena studied in Zürich.")
    assert len(index.search("ZURICH", snippets=False)) == 1


def test_a_daily_files_date_and_heading_help_as_context(index: MemoryIndex) -> None:
    index.index_from_string("memory/2026-03-14.md", "- Bought flowers.\n")
    index.index_from_string("memory/2026-04-02.md", "- Bought a lamp.\n")
    index.index_from_string("MEMORY.md", "## Family\n- Maria lives in Lyon.\n")
    assert (
        index.search("What did I buy on March 14?", snippets=False)[0].content
        == "- Bought flowers."
    )
    assert index.search("family Lyon", snippets=False)[0].content == "- Maria lives in Lyon."
    assert index.search("family", snippets=False)[0].line_number in (1, 2)


def test_limit_bounds_hits_and_zero_returns_nothing(index: MemoryIndex) -> None:
    index.index_from_string("MEMORY.md", "\n".join(f"- sailing trip {i}" for i in range(30)))
    assert len(index.search("sailing", limit=7, snippets=False)) == 7
    assert index.search("sailing", limit=0, snippets=False) == []


def test_an_empty_index_returns_no_hits(index: MemoryIndex) -> None:
    assert index.search("anything", snippets=False) == []


# --- users --------------------------------------------------------------------------------


def test_a_user_sees_own_rows_never_shared_or_another_users(index: MemoryIndex) -> None:
    """Shared rows are the memory of calls without a user: no user's to see."""
    index.index_from_string("MEMORY.md", "- shared: the office wifi is Lighthouse")
    index.index_from_string("users/alice/memory/2026-03-14.md", "- alice: wifi password tulip")
    index.index_from_string("users/bob/MEMORY.md", "- bob: wifi password orchid")
    alice = {h.path for h in index.search("wifi", user_id="alice", snippets=False)}
    bob = {h.path for h in index.search("wifi", user_id="bob", snippets=False)}
    nobody = {h.path for h in index.search("wifi", snippets=False)}
    assert alice == {"users/alice/memory/2026-03-14.md"}
    assert bob == {"users/bob/MEMORY.md"}
    assert nobody == {"MEMORY.md"}
    assert index.search("Lighthouse", user_id="alice", snippets=False) == []
    assert index.search("orchid", user_id="alice", snippets=False) == []


def test_user_ids_map_to_their_safe_segment(index: MemoryIndex) -> None:
    index.index_from_string(f"users/{safe_segment('a@b.c')}/MEMORY.md", "- secret handshake")
    assert len(index.search("handshake", user_id="a@b.c", snippets=False)) == 1
    assert index.search("handshake", user_id="a-b.c", snippets=False) == []


# --- whole workspaces ---------------------------------------------------------------------


def _workspace(root: Path) -> None:
    _write(root, "MEMORY.md", "# Memory\n- Anna moved to Berlin.\n")
    _write(root, "memory/2026-03-14.md", DAILY)
    _write(root, "memory/archive/2025-01-01.md", "- archived Berlin note\n")
    _write(root, "memory/.consolidation_state", "2026-03-14T00:00:00Z")
    _write(root, "memory/notes.txt", "Berlin text file")
    _write(root, "knowledge/KNOWLEDGE.md", "- Berlin knowledge\n")
    _write(root, "agents/main/sessions/s1.log.jsonl", _message("Berlin in the transcript") + "\n")
    _write(root, "agents/main/sessions/s1.jsonl", _message("Berlin in the plain jsonl") + "\n")
    _write(root, "users/alice/MEMORY.md", "- Alice visits Berlin.\n")
    _write(root, "users/alice/memory/2026-03-15.md", "- Alice flew to Berlin.\n")
    _write(
        root, "users/alice/agents/main/sessions/s2.log.jsonl", _message("Berlin for alice") + "\n"
    )


def test_index_all_indexes_memory_files_and_transcripts_in_every_namespace(
    index: MemoryIndex, workspace: Path
) -> None:
    _workspace(workspace)
    stats = index.index_all_from_workspace(workspace)
    assert stats == IndexStats(files=6, indexed=6, unchanged=0, removed=0, rows=10, embedded=0)
    shared = {h.path for h in index.search("Berlin", limit=50, snippets=False)}
    assert shared == {"MEMORY.md", "memory/2026-03-14.md", "agents/main/sessions/s1.log.jsonl"}
    paths = {h.path for h in index.search("Berlin", limit=50, user_id="alice", snippets=False)}
    assert paths == {
        "users/alice/MEMORY.md",
        "users/alice/memory/2026-03-15.md",
        "users/alice/agents/main/sessions/s2.log.jsonl",
    }


def test_index_all_skips_unchanged_files_and_reindexes_changed_ones(
    index: MemoryIndex, workspace: Path
) -> None:
    _workspace(workspace)
    index.index_all_from_workspace(workspace)
    daily = workspace / "memory/2026-03-14.md"
    with daily.open("a") as handle:
        handle.write("- Anna adopted a dog named Biscuit.\n")
    stats = index.index_all_from_workspace(workspace)
    # indexed in place: its last two lines again (their neighbours changed) and the new one
    assert (stats.indexed, stats.unchanged, stats.rows) == (1, 5, 3)
    assert index.search("Biscuit", snippets=False)[0].line_number == 6
    assert index.index_all_from_workspace(workspace).indexed == 0


def test_a_touched_file_with_the_same_content_is_not_reindexed(
    index: MemoryIndex, workspace: Path
) -> None:
    _workspace(workspace)
    index.index_all_from_workspace(workspace)
    daily = workspace / "memory/2026-03-14.md"
    stat = daily.stat()
    os.utime(daily, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    stats = index.index_all_from_workspace(workspace)
    assert (stats.indexed, stats.unchanged) == (0, 6)


def test_index_all_after_index_from_string_records_the_stat_without_rewriting(
    index: MemoryIndex, workspace: Path
) -> None:
    _workspace(workspace)
    index.index_from_string("memory/2026-03-14.md", DAILY)
    stats = index.index_all_from_workspace(workspace)
    assert (stats.indexed, stats.unchanged) == (5, 1)


def test_index_all_removes_rows_of_deleted_files_only(index: MemoryIndex, workspace: Path) -> None:
    _workspace(workspace)
    index.index_all_from_workspace(workspace)
    index.index_from_string("knowledge/extra.md", "- Berlin extra")  # not scanned, not on disk
    _write(workspace, "knowledge/kept.md", "- Berlin kept")
    index.index_from_string("knowledge/kept.md", "- Berlin kept")  # not scanned, on disk
    (workspace / "users/alice/memory/2026-03-15.md").unlink()
    stats = index.index_all_from_workspace(workspace)
    assert stats.removed == 2
    paths = {h.path for h in index.search("Berlin", limit=50, user_id="alice", snippets=False)}
    assert "users/alice/memory/2026-03-15.md" not in paths
    shared = {h.path for h in index.search("Berlin", limit=50, snippets=False)}
    assert "knowledge/extra.md" not in shared
    assert "knowledge/kept.md" in shared


def test_index_all_reports_progress_for_every_file(index: MemoryIndex, workspace: Path) -> None:
    _workspace(workspace)
    calls: list[tuple[int, int]] = []
    index.index_all_from_workspace(
        workspace, progress=lambda done, total: calls.append((done, total))
    )
    assert calls == [(i, 6) for i in range(1, 7)]


def test_symbolic_links_are_not_followed(
    index: MemoryIndex, workspace: Path, tmp_path: Path
) -> None:
    secret = _write(tmp_path, "outside/secret.md", "- Berlin secret\n")
    (workspace / "memory").mkdir()
    (workspace / "memory/2026-01-01.md").symlink_to(secret)
    assert index.index_all_from_workspace(workspace).files == 0


def test_deleting_the_database_and_rebuilding_restores_identical_results(
    tmp_path: Path, workspace: Path
) -> None:
    _workspace(workspace)
    queries = ["Berlin", "When did Anna move?", "green tea", "dentist"]
    base = tmp_path / "idx"
    with MemoryIndex(base) as index:
        index.index_all_from_workspace(workspace)
        before = [index.search(q, user_id="alice", snippets=False) for q in queries]
    for suffix in ("", "-wal", "-shm"):
        (base / (INDEX_FILE + suffix)).unlink(missing_ok=True)
    with MemoryIndex(base) as index:
        assert index.search("Berlin", snippets=False) == []
        index.rebuild(workspace)
        assert [index.search(q, user_id="alice", snippets=False) for q in queries] == before


def test_rebuild_drops_rows_that_no_file_backs(index: MemoryIndex, workspace: Path) -> None:
    _workspace(workspace)
    index.index_from_string("memory/ghost.md", "- ghost Berlin line")
    stats = index.rebuild(workspace)
    assert stats.indexed == 6
    assert "memory/ghost.md" not in {
        h.path for h in index.search("Berlin", limit=50, snippets=False)
    }


# --- async facade -------------------------------------------------------------------------


async def test_async_facade_runs_in_worker_threads(index: MemoryIndex, workspace: Path) -> None:
    _workspace(workspace)
    loop = asyncio.get_running_loop()
    loop.slow_callback_duration = 0.05
    stats = await index.aindex_all_from_workspace(workspace)
    assert stats.indexed == 6
    assert await index.aindex_from_string("MEMORY.md", "- Anna moved to Paris.") == 1
    hits = await index.asearch("Where did Anna move? Paris?", snippets=False)
    assert hits[0].content == "- Anna moved to Paris."


def test_one_index_serves_one_workspace(tmp_path: Path) -> None:
    first, second = tmp_path / "ws1", tmp_path / "ws2"
    first.mkdir()
    second.mkdir()
    with MemoryIndex(tmp_path) as index:
        index.index_all_from_workspace(first)
        index.index_all_from_workspace(first)  # the same workspace again is fine
        with pytest.raises(StorageError, match=r"belongs to the workspace .*ws1, not .*ws2"):
            index.index_all_from_workspace(second)
