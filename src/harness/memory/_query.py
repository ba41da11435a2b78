"""The query side of the memory index: from any text a person types to an FTS5 expression.

A question such as "When did Anna move to Berlin?" is cut into words; stop words ("when", "did",
"to") are dropped, and so is a noun that frames the question ("what kind of food"); irregular
verb and noun forms are widened to their siblings ("buy" also looks for "bought"), because the
``porter`` stemmer only handles regular endings, and so are the other ways people write a word:
short forms ("kids" for "children", "fave") and British spellings ("colour"); and each remaining
word becomes one *clause*: a quoted phrase restricted to the ``content``, ``cjk`` (for Latin
words written against CJK text) and ``context`` columns, OR the same phrase in the line's
*window*, ``{content near}``: the line with its neighbours' words. The two are separate phrases,
each with its own idf, so a row scores the BM25 of its line plus that of its window; the window
phrase is never rarer than the line's own, since every line holding a word holds it in its
window too. A run of Chinese, Japanese or Korean becomes clauses over the ``cjk`` column: its
bigrams, minus question words (什么, 언제) and kana-only bigrams (ます), or a prefix query for a
single character. A compound is looked for however it is written: "roadtrip" also as the phrase
"road trip", and two words in a row ("work out") also as one ("workout"); these clauses come
last. Clauses are OR'ed, so a line needs only one of them and BM25 ranks lines that hold more
(and rarer) ones first.

Nothing the user types reaches FTS5 syntax: a clause holds only letters, digits and CJK
characters, always inside double quotes, so ``"``, ``*``, ``:``, ``^``, ``NEAR``, ``AND``,
parentheses and the like are either dropped or searched as plain words.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Final

from harness.memory._fts import CJK_CHARS, STOP_WORDS


def _words(text: str) -> list[str]:
    """The whitespace-separated words of ``text`` (long vocabularies stay readable)."""
    return text.split()


__all__ = [
    "MAX_CLAUSES",
    "all_of",
    "analyze",
    "any_of",
    "key_clause",
    "own_part",
    "split_word",
    "without",
]

MAX_CLAUSES: Final = 24
"""At most this many clauses per query: a pasted paragraph searches its first words, and the
cost of a query stays bounded whatever its length."""

_MAX_WORD: Final = 64
_FRAMES: Final = frozenset(_words("kind kinds sort sorts type types"))
"""Nouns that, followed by "of", frame a question rather than say what it is about."""
_COMPOUND_PART: Final = 3
"""Each part of a word tried apart has at least this many letters ("roadtrip" as "road trip"
and "roa dtrip", never "ro adtrip"), and so has the first of two words tried as one, which is
no stop word ("work out" and "set up" as "workout" and "setup", "in to" never)."""
_LATIN_COLUMNS: Final = "{content cjk context}"
_OR_NEAR: Final = " OR ({content near} : "
_SPLIT: Final = re.compile(r'\(\{content cjk context\} : "([^\W\d_]+) ([^\W\d_]+)"\)')
"""A clause of a word written apart (what ``_apart`` writes): its two parts."""
_TOKEN: Final = re.compile(f"([{CJK_CHARS}]+)|((?:(?![{CJK_CHARS}])[^\\W_])+)")
_HIRAGANA_ONLY: Final = re.compile("[\u3040-\u309f]+")


_CJK_STOP_GRAMS: Final = frozenset(
    _words(
        """
        什么 时候 哪里 哪儿 怎么 为什 多少 哪个 哪些 几时 是否 一下 知道 记得 告诉
        言っ 教え 覚え 何時 何処
        언제 어디 무엇 누구 어떻 습니 니까 나요 어요 해요 세요 니다 에서 했어 있어 알려 기억
        """
    )
)

_IRREGULAR_GROUPS: Final = """
    arise arose arisen | awake awoke awoken | become became | begin began begun | bend bent |
    bleed bled | blow blew blown | break broke broken | breed bred |
    bring brought | build built | burn burnt | buy bought | catch caught | choose chose chosen |
    cling clung | come came | cost | creep crept | cut | deal dealt | dig dug |
    draw drew drawn | dream dreamt | drink drank drunk | drive drove driven | eat ate eaten |
    fall fell fallen | feed fed | feel felt | fight fought | find found | flee fled |
    fly flew flown | forbid forbade forbidden | forget forgot forgotten |
    forgive forgave forgiven | freeze froze frozen | give gave given | grow grew grown |
    hang hung | hear heard | hide hid hidden | hold held | hurt | keep kept | kneel knelt |
    know knew known | lay laid | lead led | learn learnt | leave left | lend lent | lose lost |
    make made | mean meant | meet met | mistake mistook mistaken | overcome overcame |
    pay paid | quit | read | ride rode ridden | ring rang rung | run ran | say said |
    see saw seen | seek sought | sell sold | send sent | sew sewn | shake shook shaken |
    shine shone | shoot shot | shrink shrank shrunk | sing sang sung | sink sank sunk | sit sat |
    sleep slept | slide slid | speak spoke spoken | spell spelt | spend spent | spill spilt |
    spin spun | stand stood | steal stole stolen | stick stuck | sting stung | strike struck |
    swear swore sworn | sweep swept | swim swam swum | swing swung | take took taken |
    teach taught | tear tore torn | tell told | think thought | throw threw thrown |
    undergo underwent undergone | understand understood | wake woke woken | wear wore worn |
    weave wove woven | weep wept | win won | withdraw withdrew withdrawn | write wrote written |
    person people | man men | woman women | mouse mice | foot feet |
    tooth teeth | wife wives | knife knives
"""

_VARIANT_GROUPS: Final = """
    kid child children | fave fav favorite favourite | pic photo picture | mom mum mother |
    dad father | grandma grandmother | grandpa grandfather | hubby husband |
    color colour | favor favour | honor honour | humor humour | neighbor neighbour |
    center centre | theater theatre | travelled traveled | travelling traveling
"""
"""Words people write in more than one way, one form per stem (the stemmer finds "kids")."""

_FORMS: Final[dict[str, tuple[str, ...]]] = {
    form: tuple(group.split())
    for group in f"{_IRREGULAR_GROUPS}|{_VARIANT_GROUPS}".split("|")
    for form in group.split()
    if len(group.split()) > 1
}
"""A word -> every form of its group (itself included), when it has a group."""


def _forms(word: str) -> tuple[str, ...]:
    """The forms to look for ``word`` as, a plural ("kids", "pics") by its singular's group."""
    forms = _FORMS.get(word)
    if forms is None and word.endswith("s"):
        forms = _FORMS.get(word[:-1])
    return forms or (word,)


def _phrase(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def _latin_clauses(words: Sequence[str]) -> list[str]:
    kept = [w for w in words if w not in STOP_WORDS and (len(w) > 1 or w.isdigit())]
    if not kept:  # a query made only of stop words ("The Who") still searches its words
        kept = list(words)
    expanded: list[str] = []
    for word in kept:
        expanded.extend(_forms(word))
        if word.isdigit() and word[0] == "0" and word.strip("0"):  # "05" also finds "5"
            expanded.append(word.lstrip("0"))
    return [_word_clause(w) for w in expanded if len(w) <= _MAX_WORD]


def _unframed(words: Sequence[str]) -> list[str]:
    """``words`` without a noun that frames the question: "what kind of food" asks for food.

    "kind" would match "your kind words" instead; "I kind of like it" says nothing either.
    """
    return [
        word
        for word, after in itertools.zip_longest(words, words[1:], fillvalue="")
        if word not in _FRAMES or after != "of"
    ]


def _joined(words: Sequence[str]) -> list[str]:
    """Two words in a row as one: "work out" -> "workout", "set up" -> "setup"."""
    return [
        _word_clause(first + second)
        for first, second in itertools.pairwise(words)
        if _part(first) and second.isalpha() and 1 < len(second) <= _MAX_WORD // 2
    ]


def _apart(words: Sequence[str]) -> list[str]:
    """A word as two ("roadtrip" -> "road trip"), at every split into parts.

    Every split is tried, since which one is a compound is not known without a dictionary; a
    split that is not one ("roa dtrip") is a phrase no line holds. A split is looked for in
    the line's own text: a window is a set of words, with no order.
    """
    return [
        f"({_LATIN_COLUMNS} : {_phrase(f'{word[:i]} {word[i:]}')})"
        for word in words
        if _part(word)
        for i in range(_COMPOUND_PART, len(word) - _COMPOUND_PART + 1)
    ]


def _part(word: str) -> bool:
    """Whether ``word`` is tried in a compound: letters, at least a part long, no stop word."""
    return (
        word.isalpha() and _COMPOUND_PART <= len(word) <= _MAX_WORD // 2 and word not in STOP_WORDS
    )


def split_word(clause: str) -> str | None:
    """The clause of the word that ``clause`` writes apart ("road trip": "roadtrip"), if any."""
    found = _SPLIT.fullmatch(clause)
    return None if found is None else _word_clause(found[1] + found[2])


def _word_clause(word: str) -> str:
    return f"({_LATIN_COLUMNS} : {_phrase(word)}){_OR_NEAR}{_phrase(word)})"


def _cjk_clauses(run: str) -> list[str]:
    if len(run) == 1:
        return [f"cjk : {_phrase(run)} *"]
    grams = [run[i : i + 2] for i in range(len(run) - 1)]
    # A question word such as 什么 is dropped together with the two bigrams that straddle it
    # (娜什, 么时 in 李娜什么时候): they span a word boundary and match only by accident.
    stop = {j for i, g in enumerate(grams) if g in _CJK_STOP_GRAMS for j in (i, i + 1)}
    useful = [
        g
        for i, g in enumerate(grams)
        if i not in stop and i + 1 not in stop and not _HIRAGANA_ONLY.fullmatch(g)
    ] or grams
    return [f"cjk : {_phrase(g)}" for g in useful]


def analyze(text: str) -> list[str]:
    """The clauses of a query, in order of appearance, without duplicates; ``[]`` if none.

    Never raises: any string, however hostile, yields well-formed clauses or nothing.
    """
    normalized = unicodedata.normalize("NFKC", text).casefold()
    words: list[str] = []
    clauses: list[str] = []
    for cjk, word in _TOKEN.findall(normalized):
        if cjk:
            clauses.extend(_cjk_clauses(cjk))
        else:
            words.append(word)
    words = _unframed(words)
    if words:
        clauses = _latin_clauses(words) + clauses + _joined(words) + _apart(words)
    return list(dict.fromkeys(clauses))[:MAX_CLAUSES]


def key_clause(token: str) -> str:
    """The clause of a key token the index puts in a row's ``context`` (the place key)."""
    return f"(context : {_phrase(token)})"


def own_part(clause: str) -> str:
    """The part of a clause that matches the line's own text, without its window phrase."""
    return clause.partition(_OR_NEAR)[0]


def without(text: str, labels: Iterable[str]) -> str:
    """``text`` without the labels (:func:`~harness.memory._fts.label_key` forms) it holds.

    Matched whatever the case or the punctuation between a label's words.
    """
    normalized = unicodedata.normalize("NFKC", text).casefold()
    for label in labels:
        words = r"[\W_]+".join(re.escape(word) for word in label.split())
        normalized = re.sub(rf"(?<![^\W_]){words}(?![^\W_])", " ", normalized)
    return normalized


def any_of(clauses: Iterable[str]) -> str:
    """An FTS5 expression matching rows that satisfy at least one clause."""
    return " OR ".join(f"({clause})" for clause in clauses)


def all_of(clauses: Iterable[str]) -> str:
    """An FTS5 expression matching rows that satisfy every clause."""
    return " AND ".join(f"({clause})" for clause in clauses)
