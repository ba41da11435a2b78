"""Questions that ask for a list, and their hits spread over the files that hold one.

"What books has Melanie read?", "Where has Jon travelled?", "What do Jon and Gina both like?"
ask for several things, each most likely told on a day of its own: the evidence of a list is
spread over the daily logs. Ranked by their words alone, the best lines of such a question
crowd into one or two days (the day Melanie talked about books holds a dozen lines that say
"book"), and the few hits a search returns hold one item of the list. So the hits of a list
question are re-ranked by :func:`spread`: each keeps :data:`SPREAD` of its score for every
better hit of its file that is not beside it (a line beside a hit joins that hit's snippet
anyway). A list question still gets a day's lines when nothing better is found elsewhere.

A question asks for a list (:func:`asks_for_list`) when it

- names two people's shared things: "both", "in common";
- asks for things in the plural: "What books…", "Which cities…", "What kinds of art…" (the
  noun before the verb ends in a plural "s");
- is in the present perfect, experience gathered over time: "Where has Melanie camped?",
  "Who have written notes…" ("has" or "have" with no "do" before it and no "to" after it:
  "What does Melanie have in her car?" and "Jon has to go" are not).

Deterministic and English only, like :mod:`harness.memory._dates`; a question this misreads
gets its hits in another order, never fewer of them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from harness.memory._search import Hit

__all__ = ["SPREAD", "asks_for_list", "spread"]

SPREAD: Final = 0.8
"""What a list question's hit keeps of its score per better, non-adjacent hit of its file."""

_BOTH: Final = re.compile(r"\b(?:both|in common)\b")
_PLURAL: Final = re.compile(
    r"^\W*(?:what|which)\s+(?:(?:kinds|types|sorts)\s+of\b|(?:(?:kind|type|sort)\s+of\s+)?"
    r"(?:[\w+/&'-]+\s+){0,2}?[\w-]*[^\W\dsu_]s\s+(?:has|have|does|do|did|is|are|was|were)\b)"
)
"""What/which, then "kinds of" or up to three words, the last a plural ("books", not "class")."""
_PERFECT: Final = re.compile(r"^(?:(?!\b(?:do|does|did)\b).)*?\b(?:has|have)\s+(?!to\b)\w")
"""A "has" or "have" that another word follows, with no "do" before it (the main verb)."""


def asks_for_list(question: str) -> bool:
    """Whether ``question`` asks for several things (see the module doc)."""
    text = question.casefold()
    return bool(_BOTH.search(text) or _PLURAL.match(text) or _PERFECT.match(text))


def spread(hits: Sequence[Hit]) -> list[Hit]:
    """``hits`` (best first) re-ranked so that one file's lines do not crowd out the others'.

    A hit's score is multiplied by :data:`SPREAD` for each better hit of its file that is
    neither beside it nor one line from it (those join its snippet, see
    :mod:`harness.memory._snippets`).
    """
    better: dict[str, list[int]] = {}
    scored: list[Hit] = []
    for hit in hits:
        row_id, path = hit[0], hit[1]
        taken = better.setdefault(path, [])
        crowd = sum(1 for other in taken if abs(other - row_id) > 2)
        scored.append((*hit[:4], hit[4] * SPREAD**crowd) if crowd else hit)
        taken.append(row_id)
    return sorted(scored, key=lambda hit: (-hit[4], -hit[0]))
