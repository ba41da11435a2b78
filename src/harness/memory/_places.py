"""Places as keys: the places a line names, and the questions that ask for one.

"Which cities has Jon visited?" is answered by "Took a short trip last week to Rome", which
shares no word with it. What they share is a kind of thing: the question asks for a place and
the line names one. So a line that names a known place carries, in its ``context`` column, one
key token (:data:`PLACE_KEY`) and the place's country and continent as words
(:func:`place_words`: "Rome" adds ``Italy Europe European``), and a question that asks for a
place (:func:`asks_for_place`) searches for the key beside its words. The key is one more
clause with its own idf: it lifts the lines that name a place among those that match the
question as well, and finds the one that matches nothing else. The country and the continent
are a second hop the gazetteer knows: "Has Jon been to Italy?", "European countries".

The places are those of ``places.tsv`` (every country, US state and city of at least 100,000
people, from GeoNames; ``scripts/make-places`` writes it), matched as written (capitalized:
"nice" and "reading" are words) and only after a preposition of place or a visit ("to Rome",
"in the Netherlands", "visited Paris and Lyon"): a city's name is also a person's ("Thanks,
Sofia!") or a word at the start of a sentence ("Nice pic!"). A place named otherwise ("my home
country, Sweden") is passed over; a person after such a word ("talked to Sofia") is taken for
a place.

Deterministic and English only, like :mod:`harness.memory._dates`; what the model writes may
name places on its own lines, which changes only how its owner's rows rank.
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from typing import Final

__all__ = ["PLACE_KEY", "asks_for_place", "matchable", "place_words"]

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
_PLACES_AFTER: Final = re.compile(
    f" {_PREPOSITION} (?:the )?({_RUN}(?:(?:,? and |,? or |, ){_RUN})*)"
)
"""Where a text names places: capitalized words after a preposition of place or a visit, and
the names listed with them ("to Rome, Paris and Berlin")."""

_ADJECTIVES: Final = {
    "Africa": "African",
    "Asia": "Asian",
    "Europe": "European",
    "North America": "North American",
    "South America": "South American",
    "Oceania": "Oceanian",
    "Antarctica": "Antarctic",
}

_ASKS: Final = re.compile(
    r"\b(?:where|cit(?:y|ies)|towns?|countr(?:y|ies)|abroad"
    r"|visit(?:s|ed|ing)?|travel(?:s|led|ed|ling|ing)?)\b",
    re.IGNORECASE,
)


@functools.cache
def _places() -> dict[str, str]:
    """Place name -> its words in a row's context (country and continent, as words)."""
    text = resources.files(__package__).joinpath("places.tsv").read_text(encoding="utf-8")
    places: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        name, country, continent = line.split("\t")
        places[name] = " ".join(filter(None, (country, continent, _ADJECTIVES.get(continent))))
    return places


def place_words(text: str) -> str:
    """The key and the countries and continents of the places ``text`` names, or ``""``.

    A name is looked up only where it follows a preposition of place ("to Rome", "in the
    Netherlands", "visited Paris and Lyon"): one scan in C of each line indexed, and the
    sign that tells a place from a person ("Thanks, Sofia!") or a word ("Nice pic!").
    """
    named = _PLACES_AFTER.findall(text)
    if not named:  # most lines
        return ""
    found: dict[str, None] = {}
    for listed in named:
        words = listed.replace(",", " ").split()
        i = 0
        while i < len(words):
            length, hop = _longest_name(words, i)
            if hop:
                found.setdefault(PLACE_KEY)
                found.update(dict.fromkeys(hop.split()))
            i += length
    return " ".join(found)


def _longest_name(words: list[str], i: int) -> tuple[int, str]:
    """(its words, its country and continent) of the longest place name at ``words[i]``.

    ``(1, "")`` when none starts there.
    """
    places = _places()
    for n in range(min(_MAX_WORDS, len(words) - i), 0, -1):
        hop = places.get(" ".join(words[i : i + n]))
        if hop is not None:
            return n, hop
    return 1, ""


def matchable(name: str) -> bool:
    """Whether :func:`place_words` can find ``name`` in a text.

    Capitalized words, hyphenated or not, and the particles between them: ``places.tsv`` holds
    only such names (``scripts/make-places`` keeps no other).
    """
    return _NAME.fullmatch(name) is not None


def asks_for_place(question: str) -> bool:
    """Whether ``question`` asks where, or which city, town or country, or of visits."""
    return _ASKS.search(question) is not None
