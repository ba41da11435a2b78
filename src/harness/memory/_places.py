"""Places as keys: which lines name a place, and which questions ask for one.

"Which cities has Jon visited?" is answered by "Took a short trip last week to Rome", which
shares no word with it. What they share is a kind of thing: the question asks for a place and
the line names one. So a line that names a known place (:func:`names_a_place`) carries one key
token in its ``context`` column, :data:`PLACE_KEY`, and a question that asks for a place
(:func:`asks_for_place`) searches for the key beside its words. The key is one more clause with
its own idf: it lifts the lines that name a place among those that match the question as well,
and finds the one that matches nothing else.

The key is all a line gains. Its country and continent as words ("Italy Europe" for Rome) were
tried and cost recall: FTS5's BM25 divides a row's score by the length of the whole row, so
every word the context gains lowers the score of the words the line itself holds.

The places are those of ``places.txt``: every country, US state and city of at least 100,000
people, from GeoNames, and the places people name that GeoNames lists as no country or city
("England", "Europe", "the Middle East", "the East Coast"); ``scripts/make-places`` writes it.
They are matched as written (capitalized: "nice" and "reading" are words) and only after a
preposition of place or a visit ("to Rome", "in the Netherlands", "visited Paris and Lyon"): a
city's name is also a person's ("Thanks, Sofia!") or a word at the start of a sentence ("Nice
pic!"). A place named otherwise ("my home country, Sweden") is passed over; a person after such
a word ("talked to Sofia") is taken for a place.

Deterministic and English only, like :mod:`harness.memory._dates`. What the model writes may
name places on its own lines, which changes only how its owner's rows rank; the gazetteer is a
file of the package.
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from typing import Final

__all__ = ["PLACE_KEY", "asks_for_place", "matchable", "names_a_place"]

PLACE_KEY: Final = "k0place"
"""The token in the ``context`` of every row that names a place (not a word anyone writes)."""

_MAX_WORDS: Final = 4  # "Rio de Janeiro", "Bosnia and Herzegovina"
_UPPER: Final = "A-ZÀ-ÖØ-ÞĀ-ž"  # and Latin Extended-A, whose cases alternate
_WORD: Final = f"(?:St\\.|[{_UPPER}][^\\W\\d_]*(?:-[^\\W\\d_]+)*)"  # "St. Louis", "Aix-en-Provence"
_PARTICLE: Final = (
    "(?:de|del|da|do|dos|das|la|le|les|el|es|al|am|an|and|der|di|du|en|of|on|sur|the|upon|y)"
)
_RUN: Final = f"{_WORD}(?: (?:{_PARTICLE} )*{_WORD})*"
"""Capitalized words in a row, with the lowercase particles place names hold between them."""
_NAME: Final = re.compile(_RUN)
# Lowercase only: a class such as [Ii]n would cost the scan its fast search for the space.
_PREPOSITION: Final = (
    "(?:in|to|from|at|near|around|across|through|into|towards?|via|outside|visit|visited|visiting)"
)
_LISTED: Final = f"{_RUN}(?:(?:,? and |,? or |, ){_RUN})*"
_PLACES_AFTER: Final = re.compile(f" {_PREPOSITION} (?:the )?({_LISTED})")
"""Where a text may name places: capitalized words after a preposition of place or a visit,
and the names listed with them ("to Rome, Paris and Berlin")."""

_ASKS: Final = re.compile(
    r"\b(?:where|cit(?:y|ies)|towns?|countr(?:y|ies)|states|(?:which|what) state|regions?"
    r"|continents?|abroad|overseas"
    r"|visit(?:s|ed|ing)?|travel(?:s|led|ed|ling|ing)?|vacation(?:s|ed|ing)?)\b",
    re.IGNORECASE,
)


@functools.cache
def _places() -> frozenset[str]:
    text = resources.files(__package__).joinpath("places.txt").read_text(encoding="utf-8")
    return frozenset(line for line in text.splitlines() if line and not line.startswith("#"))


def names_a_place(text: str) -> bool:
    """Whether ``text`` names a place of the gazetteer after a preposition of place.

    One scan in C of each line indexed ("to Rome", "in the Netherlands", "visited Paris and
    Lyon"); the words after the preposition are looked up only where there are some.
    """
    places = _places()
    for listed in _PLACES_AFTER.findall(text):
        words = listed.replace(",", " ").split()
        for i in range(len(words)):
            for n in range(1, min(_MAX_WORDS, len(words) - i) + 1):
                if " ".join(words[i : i + n]) in places:
                    return True
    return False


def matchable(name: str) -> bool:
    """Whether :func:`names_a_place` can find ``name`` in a text.

    Capitalized words, hyphenated or not, and the particles between them: ``places.txt`` holds
    only such names (``scripts/make-places`` keeps no other).
    """
    return _NAME.fullmatch(name) is not None


def asks_for_place(question: str) -> bool:
    """Whether ``question`` asks where, which city, country, state or region, or of travels."""
    return _ASKS.search(question) is not None
