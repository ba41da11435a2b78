"""Dates as keys: the days a question names, and the days a line's "yesterday" means.

A daily log's lines carry their file's day in the ``context`` column, as words and as one key
token (``May 8 2023 d20230508``, :func:`day_words`). Two things make that day useful beyond a
word match:

- **A question that names a day** ("What did Gina find on 1 February, 2023?", "in May 2023",
  "on 2023-02-01") is asking about the lines of that day: :func:`named_days` turns each date it
  names into an FTS5 expression over the keys, and the search ranks the rows of those days
  first (:mod:`harness.memory._search`). Written as words, the date would match every line of
  the month and the year, and drown the question's other words.
- **A line that says when relative to its day** ("I went to a support group yesterday",
  "last Tuesday", "two weeks ago") happened on another day than the one it was written:
  :func:`resolved_days` gives the days (or the month, or the year) those phrases mean, which
  go into the line's ``context`` beside its file's day, so the question that names the day of
  the event finds it.

Both are deterministic and English only: a phrase this module does not know is left alone
(the line keeps its file's day), never guessed.
"""

from __future__ import annotations

import calendar
import re
from datetime import date, timedelta
from typing import Final

__all__ = ["MONTHS", "day_words", "named_days", "resolved_days", "without_days"]

MONTHS: Final = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)

_MONTH_NUMBER: Final = {
    **{name.casefold(): i for i, name in enumerate(MONTHS, start=1)},
    **{name[:3].casefold(): i for i, name in enumerate(MONTHS, start=1)},
    "sept": 9,
}
_MONTH: Final = "(?:" + "|".join(sorted(_MONTH_NUMBER, key=len, reverse=True)) + r")\.?"
_DAY: Final = r"(?:[12]\d|3[01]|0?[1-9])(?:st|nd|rd|th)?"
_YEAR: Final = r"(?:1[89]|2\d)\d\d"

_NAMED: Final = re.compile(
    rf"\b(?:(?P<iy>{_YEAR})-(?P<im>[01]\d)-(?P<id>[0-3]\d)"
    rf"|(?P<d1>{_DAY})(?:\s+of)?\s+(?P<m1>{_MONTH})(?:,?\s+(?P<y1>{_YEAR}))?"
    rf"|(?P<m2>{_MONTH})\s+(?P<d2>{_DAY})(?:,?\s+(?P<y2>{_YEAR}))?"
    rf"|(?P<m3>{_MONTH}),?\s+(?P<y3>{_YEAR}))\b",
    re.IGNORECASE,
)
"""A date as people write it: ISO, "1 February, 2023", "Feb 1st 2023", "3 June", "May 2023"."""

_NUMBER: Final = {
    "a": 1,
    "an": 1,
    "one": 1,
    "a couple of": 2,
    "couple of": 2,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
}
_WEEKDAYS: Final = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_ABBREVIATIONS: Final = ("mon", "tues", "tue", "wed", "thurs", "thur", "thu", "fri", "sat", "sun")

_ANCHOR: Final = re.compile(r"\b(?:yesterday|tomorrow|last|next|ago)\b")
"""The word every phrase :func:`resolved_days` knows turns on, found in the lowered line."""

_FOLLOWER: Final = re.compile(
    r"\s+(night|weekend|week|month|year|" + "|".join((*_WEEKDAYS, *_ABBREVIATIONS)) + r")\b"
)
"""What follows "last" or "next" ("last Tuesday", "next month"), matched where it ends."""

_COUNTED: Final = re.compile(
    r"(?<![a-z0-9])(?P<n>\d{1,2}|a couple of|couple of|"
    + "|".join(re.escape(word) for word in _NUMBER if " " not in word)
    + r")\s+(?P<unit>day|weekend|week|month|year)s?\s+$"
)
"""What comes before "ago" ("two weeks ago"), searched for just before it."""

_LOOK_BACK: Final = 32


def _may_hold_a_phrase(lowered: str) -> bool:
    """Whether a lowered line holds a word every phrase has: most do not, and skip the regex.

    Substring tests cost a tenth of a case-insensitive regex search.
    """
    return (
        "last" in lowered
        or "ago" in lowered
        or "yesterday" in lowered
        or "tomorrow" in lowered
        or "next" in lowered
    )


def day_words(day: date) -> str:
    """A day as the ``context`` column holds it: ``May 8 2023 d20230508``.

    The words match a question's words; the key (``d`` and the ISO digits) is one token no
    other day has, so the rows of a day are one short posting list. As a phrase of the
    three words, every row of the year is read for the day's few: 4 ms at a million rows.
    """
    return f"{MONTHS[day.month - 1]} {day.day} {day.year} {_day_key(day)}"


def _day_key(day: date) -> str:
    return f"d{day.year:04d}{day.month:02d}{day.day:02d}"


def _month_key(year: int, month: int) -> str:
    return f"m{year:04d}{month:02d}"


def _month_words(year: int, month: int) -> str:
    """``April 2023 m202304``; ValueError for a year no date has (before 1 or after 9999)."""
    return f"{MONTHS[month - 1]} {date(year, month, 1).year} {_month_key(year, month)}"


def _year_words(year: int) -> str:
    return str(date(year, 1, 1).year)


def _phrase(*words: object) -> str:
    return '"' + " ".join(str(word) for word in words) + '"'


def _spans(text: str) -> list[tuple[re.Match[str], str]]:
    """Each date ``text`` names, with its FTS5 expression over ``context``."""
    found: list[tuple[re.Match[str], str]] = []
    for match in _NAMED.finditer(text):
        groups = match.groupdict()
        if groups["iy"]:
            year, month, day = int(groups["iy"]), int(groups["im"]), int(groups["id"])
            if not 1 <= month <= 12:
                continue
            try:
                found.append((match, _day_key(date(year, month, day))))
            except ValueError:
                continue
            continue
        if groups["m3"]:  # a month of a year: any day of it, or the month a line means
            month = _MONTH_NUMBER[groups["m3"].rstrip(".").casefold()]
            found.append((match, _month_keys(int(groups["y3"]), month)))
            continue
        raw_month = groups["m1"] or groups["m2"]
        raw_day = groups["d1"] or groups["d2"]
        year_text = groups["y1"] or groups["y2"]
        month = _MONTH_NUMBER[raw_month.rstrip(".").casefold()]
        day = int(re.sub(r"\D", "", raw_day))
        if year_text is None:  # a day of any year: the words, as a phrase
            found.append((match, _phrase(MONTHS[month - 1], day)))
            continue
        try:
            found.append((match, _day_key(date(int(year_text), month, day))))
        except ValueError:  # 31 February
            continue
    return found


def _month_keys(year: int, month: int) -> str:
    """The keys of a month: its own (what "last month" resolves to) and each of its days'."""
    days = calendar.monthrange(year, month)[1]
    keys = [_day_key(date(year, month, day)) for day in range(1, days + 1)]
    return "(" + " OR ".join([_month_key(year, month), *keys]) + ")"


def named_days(text: str) -> str | None:
    """An FTS5 expression matching the rows of the days ``text`` names; None if it names none.

    Only rows whose ``context`` holds the date (their file's day, or a day one of their
    phrases resolves to) match: the month and the year as words would match every line of
    them. ``May`` alone is never a date ("may I ask"), only with a day or a year.
    """
    spans = [expression for _, expression in _spans(text)]
    if not spans:
        return None
    return "context : (" + " OR ".join(dict.fromkeys(spans)) + ")"


def without_days(text: str) -> str:
    """``text`` with the dates it names taken out (their rows are found by the date)."""
    for match, _ in reversed(_spans(text)):
        text = text[: match.start()] + " " + text[match.end() :]
    return text


def resolved_days(text: str, day: date) -> str:
    """The dates the relative phrases of a line written on ``day`` mean, as context words.

    "yesterday" and "last night" are the day before; "N days/weeks ago" that many before;
    "last week" seven days before; "last Tuesday" the latest Tuesday before ``day``; "last
    month", "N months ago" and "last year" name a month or a year. "" when there are none.
    The phrases are found from the words they turn on ("ago", "last"), each a literal a line
    is scanned for once: one expression with every phrase in it cost 17 µs a line.
    """
    lowered = text.lower()
    if not _may_hold_a_phrase(lowered):
        return ""
    words: list[str] = []
    for anchor in _ANCHOR.finditer(lowered):
        try:
            words.append(_meaning(lowered, anchor, day))
        except (OverflowError, ValueError):  # a date out of range: not a date
            continue
    return " ".join(dict.fromkeys(word for word in words if word))


def _meaning(lowered: str, anchor: re.Match[str], day: date) -> str:
    """The date words of the phrase around ``anchor``; "" when it is no phrase this knows."""
    which = anchor[0]
    if which == "yesterday":
        return day_words(day - timedelta(days=1))
    if which == "tomorrow":
        return day_words(day + timedelta(days=1))
    if which == "ago":
        counted = _COUNTED.search(lowered, max(0, anchor.start() - _LOOK_BACK), anchor.start())
        if counted is None:
            return ""
        count = counted["n"]
        n = int(count) if count.isdigit() else _NUMBER[count]
        return _back(counted["unit"], n, day)
    follows = _FOLLOWER.match(lowered, anchor.end())
    if follows is None:
        return ""
    what = follows[1]
    if which == "last":
        if what == "night":
            return day_words(day - timedelta(days=1))
        if what in ("week", "weekend", "month", "year"):
            return _back(what, 1, day)
        weekday = next(i for i, name in enumerate(_WEEKDAYS) if name.startswith(what[:3]))
        return day_words(day - timedelta(days=(day.weekday() - weekday) % 7 or 7))
    if what == "week":
        return day_words(day + timedelta(days=7))
    if what == "month":
        year, month = divmod(day.year * 12 + day.month, 12)
        return _month_words(year, month + 1)
    return _year_words(day.year + 1) if what == "year" else ""


def _back(unit: str, n: int, day: date) -> str:
    if unit in ("day", "week", "weekend"):
        return day_words(day - timedelta(days=n * (1 if unit == "day" else 7)))
    if unit == "month":
        year, month = divmod(day.year * 12 + day.month - 1 - n, 12)
        return _month_words(year, month + 1)
    return _year_words(day.year - n)
