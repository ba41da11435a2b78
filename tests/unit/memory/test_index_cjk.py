from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.memory.index import MemoryIndex

LINES = [
    "- 我们下周去北京出差",  # 1
    "- 李娜喜欢喝绿茶，不喜欢咖啡",  # 2  # noqa: RUF001
    "- 我有一只猫，叫小白",  # 3  # noqa: RUF001
    "- 東京に住んでいます",  # 4
    "- 田中さんは大阪に引っ越しました",  # 5
    "- 서울에서 일하고 있어요",  # 6
    "- 민수는 부산에 살아요",  # 7
    "- Anna moved to 上海 in May",  # 8
]


@pytest.fixture
def index(tmp_path: Path) -> Iterator[MemoryIndex]:
    with MemoryIndex(tmp_path) as opened:
        opened.index_from_string("memory/2026-03-14.md", "\n".join(LINES) + "\n")
        yield opened


@pytest.mark.parametrize(
    ("query", "line"),
    [
        ("北京", 1),  # a two-character word inside a sentence
        ("出差", 1),  # ... at the end of it
        ("下周去北京", 1),
        ("我们什么时候去北京出差？", 1),  # a question around the words  # noqa: RUF001
        ("绿茶", 2),
        ("李娜喜欢喝什么？", 2),  # noqa: RUF001
        ("猫", 3),  # one character
        ("小白", 3),
        ("東京", 4),
        ("東京に住んでいますか", 4),
        ("大阪", 5),
        ("田中さんはどこに引っ越しましたか", 5),
        ("서울", 6),  # a noun with a particle attached in the text
        ("서울에서 일해요?", 6),
        ("부산", 7),
        ("上海", 8),
        ("Anna 上海", 8),
    ],
)
def test_cjk_words_inside_sentences_are_found(index: MemoryIndex, query: str, line: int) -> None:
    hits = index.search(query, snippets=False)
    assert hits, query
    assert hits[0].line_number == line


def test_a_single_character_at_the_end_of_a_run_is_found(index: MemoryIndex) -> None:
    assert [h.line_number for h in index.search("差", snippets=False)] == [1]
    assert [h.line_number for h in index.search("白", snippets=False)] == [3]


def test_a_cjk_word_that_is_absent_finds_nothing(index: MemoryIndex) -> None:
    assert index.search("广州", snippets=False) == []


def test_half_width_and_full_width_forms_match(tmp_path: Path) -> None:
    with MemoryIndex(tmp_path / "w") as index:
        index.index_from_string("MEMORY.md", "- ｶﾀｶﾅの名前はテスト\n- ABC社で働く\n")
        assert [h.line_number for h in index.search("カタカナ", snippets=False)] == [1]
        assert [h.line_number for h in index.search("ＡＢＣ", snippets=False)] == [2]  # noqa: RUF001
