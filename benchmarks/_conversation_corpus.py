"""A large conversation workspace for the search benchmark, resampled from the LoCoMo dev set.

The three LoCoMo dev conversations (``_locomo.py``) hold 1,451 turns; this module turns them
into a workspace of any size that reads like the LoCoMo logs, about 1,000 lines per daily file
(1,000 files holding 1,000,000 lines at the default size, 10 files at 10k):

- ``memory/YYYY-MM-DD.md``, one file a day on consecutive dates from 2022-01-01, each opening
  with ``# <date>``, then several (about six per 1,000 lines) ``## Conversation at <h:mm am/pm>``
  sections at sorted times of the day, one ``- <speaker>: <text>`` line per turn (whitespace
  runs in a turn, a few of them line breaks, made one space). Every non-blank line
  (headings included) counts towards the size, which is met exactly.
- Each file is a day of one source conversation (the three take turns, file by file) between
  two people: two first names of ``_memory_data.FIRST_NAMES`` drawn for the file, standing for
  the source's two speakers.
- A section is a run of 60 to 250 consecutive turns of the source (starting at a random turn,
  wrapping around at its end, so it crosses session boundaries as a long chat would).
- Each copy of a turn is made distinct, keeping it conversation text:

  * the speaker's name, and every mention of either speaker in the text (nicknames included:
    "Mel" of Melanie), become the file's names;
  * relative days are substituted half of the time: "yesterday" becomes "last <weekday>" or
    "on <weekday>", "last week" "<n> weeks ago", "tomorrow" "on <weekday>", "next month"
    "in <month>";
  * three copies in four get a short chat sentence appended before any ``[shared <caption>]``
    (a city, a weekday, another first name, a number: "I'm in Porto until Friday, by the
    way.", "I've got 25 minutes before my next meeting.");
  * a copy that still equals an earlier line of the workspace (checked on an 8-byte BLAKE2
    digest of every line) is drawn again, with two such sentences, until it does not.

Queries are the dev questions (``question.text`` of every conversation, 383, shuffled), each
with its source speakers' names (and nicknames) swapped for the names of a file drawn from
that source, so "When did Caroline go to the LGBTQ support group?" asks about two people who
do talk in the workspace. The same seed always gives the same workspace and the same queries.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

from _locomo import Conversation
from _memory_data import CITIES, FIRST_NAMES, MONTHS, WEEKDAYS

LINES_PER_FILE = 1_000
START = date(2022, 1, 1)

_SECTION_TURNS = (60, 250)
_TAIL_SHARE = 0.75
_RELATIVE_SHARE = 0.5
_SHARED = " [shared "

# nicknames the dev conversations use for their speakers
_NICKNAMES: dict[str, tuple[str, ...]] = {"Melanie": ("Mel",)}

_Tail = Callable[[random.Random, tuple[str, str]], str]


def _pick(rng: random.Random, items: Sequence[str]) -> str:
    return items[rng.randrange(len(items))]


def _other(rng: random.Random, names: tuple[str, str]) -> str:
    while (name := _pick(rng, FIRST_NAMES)) in names:
        pass
    return name


TAILS: list[_Tail] = [
    lambda r, n: f"I'm in {_pick(r, CITIES)} until {_pick(r, WEEKDAYS)}, by the way.",
    lambda r, n: f"Writing this from {_pick(r, CITIES)}, it's {r.randrange(-5, 36)} degrees here.",
    lambda r, n: f"Let's catch up properly on {_pick(r, WEEKDAYS)}.",
    lambda r, n: f"Call me on {_pick(r, WEEKDAYS)} after {r.randrange(3, 10)} if you can.",
    lambda r, n: f"Sorry for the late reply, I just got back from {_pick(r, CITIES)}.",
    lambda r, n: f"I've got {r.randrange(5, 60)} minutes before my next meeting.",
    lambda r, n: f"Say hi to everyone in {_pick(r, CITIES)} for me!",
    lambda r, n: (
        f"My train to {_pick(r, CITIES)} leaves at {r.randrange(6, 22)}:"
        f"{_pick(r, ['00', '05', '15', '20', '30', '40', '45', '50'])}, so I'll be quick."
    ),
    lambda r, n: f"Still can't believe it's been {r.randrange(2, 13)} weeks already.",
    lambda r, n: f"We should do that together next {_pick(r, WEEKDAYS)}.",
    lambda r, n: f"I told {_other(r, n)} about it on {_pick(r, WEEKDAYS)}.",
    lambda r, n: (
        f"It reminded me of our trip to {_pick(r, CITIES)} {r.randrange(2, 16)} years ago."
    ),
    lambda r, n: f"Oh, and {_other(r, n)} says hello from {_pick(r, CITIES)}.",
    lambda r, n: f"I'll send you the photos on {_pick(r, WEEKDAYS)}.",
    lambda r, n: f"That's {r.randrange(2, 10)} times this month, haha.",
    lambda r, n: f"Fingers crossed for {_pick(r, WEEKDAYS)}!",
    lambda r, n: f"{_other(r, n)} and I talked about it for {r.randrange(2, 5)} hours.",
    lambda r, n: f"Anyway, I'm flying to {_pick(r, CITIES)} on the {_ordinal(r.randrange(1, 29))}.",
]

_RELATIVE: list[tuple[re.Pattern[str], Callable[[random.Random], str]]] = [
    (
        re.compile(r"\byesterday\b"),
        lambda r: f"{_pick(r, ['last', 'on'])} {_pick(r, WEEKDAYS)}",
    ),
    (re.compile(r"\blast week\b"), lambda r: f"{r.randrange(2, 6)} weeks ago"),
    (re.compile(r"\btomorrow\b"), lambda r: f"on {_pick(r, WEEKDAYS)}"),
    (re.compile(r"\bnext month\b"), lambda r: f"in {_pick(r, MONTHS)}"),
]


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _clock(minutes: int) -> str:
    """Minutes after midnight as LoCoMo writes a time: ``"1:56 pm"``."""
    hour, minute = divmod(minutes, 60)
    return f"{(hour - 1) % 12 + 1}:{minute:02d} {'am' if hour < 12 else 'pm'}"


@dataclass(frozen=True, slots=True)
class _Source:
    """One dev conversation as (speaker index, text, caption suffix) turns."""

    name: str
    speakers: tuple[str, str]
    turns: tuple[tuple[int, str, str], ...]
    mentions: re.Pattern[str]  # the speakers' names and nicknames, as whole words
    aliases: dict[str, int]  # name or nickname -> speaker index

    @classmethod
    def of(cls, conversation: Conversation) -> _Source:
        speakers = conversation.speakers
        aliases = {
            alias: i
            for i, name in enumerate(speakers)
            for alias in (name, *_NICKNAMES.get(name, ()))
        }
        turns = []
        for turn in conversation.turns:
            speaker, _, rest = turn.line.removeprefix("- ").partition(": ")
            # one line per turn: a few dev turns break before their caption
            text, shared, caption = " ".join(rest.split()).partition(_SHARED)
            turns.append((speakers.index(speaker), text, shared + caption))
        mentions = re.compile(r"\b(" + "|".join(sorted(aliases, key=len, reverse=True)) + r")\b")
        return cls(conversation.name, speakers, tuple(turns), mentions, aliases)

    def rename(self, text: str, names: tuple[str, str]) -> str:
        return self.mentions.sub(lambda m: names[self.aliases[m[1]]], text)


@dataclass(frozen=True, slots=True)
class DailyLog:
    path: str  # memory/YYYY-MM-DD.md
    source: str  # the dev conversation its turns come from
    speakers: tuple[str, str]  # the names standing for the source's two speakers


@dataclass(frozen=True, slots=True)
class Workspace:
    lines: int  # non-blank lines written, headings included
    logs: tuple[DailyLog, ...]
    queries: tuple[str, ...]
    seed: int
    _sources: dict[str, _Source]

    def new_turns(self, log: DailyLog, count: int, *, salt: str = "") -> list[str]:
        """``count`` more turn lines of ``log``'s people, as a memory flush would append."""
        rng = random.Random(f"{self.seed}:{log.path}:{salt}")
        source = self._sources[log.source]
        start = rng.randrange(len(source.turns))
        picked = (source.turns[(start + i) % len(source.turns)] for i in range(count))
        return [_copy(rng, source, turn, log.speakers, tails=1) for turn in picked]


def _substitute(
    rng: random.Random,
    pattern: re.Pattern[str],
    replacement: Callable[[random.Random], str],
    text: str,
) -> str:
    def one(_: re.Match[str]) -> str:
        return replacement(rng)

    return pattern.sub(one, text)


def _copy(
    rng: random.Random,
    source: _Source,
    turn: tuple[int, str, str],
    names: tuple[str, str],
    *,
    tails: int,
) -> str:
    speaker, text, caption = turn
    text = source.rename(text, names)
    for pattern, replacement in _RELATIVE:
        if rng.random() < _RELATIVE_SHARE:
            text = _substitute(rng, pattern, replacement, text)
    for _ in range(tails):
        text = f"{text} {TAILS[rng.randrange(len(TAILS))](rng, names)}"
    return f"- {names[speaker]}: {text}{source.rename(caption, names)}"


class _Distinct:
    """Remembers an 8-byte digest of every line, to make each one distinct."""

    def __init__(self) -> None:
        self._seen: set[bytes] = set()

    def add(self, line: str) -> bool:
        key = hashlib.blake2b(line.encode(), digest_size=8).digest()
        if key in self._seen:
            return False
        self._seen.add(key)
        return True


def _daily_text(
    rng: random.Random,
    source: _Source,
    day: date,
    names: tuple[str, str],
    lines: int,
    distinct: _Distinct,
) -> str:
    """A daily log of exactly ``lines`` non-blank lines (``lines`` >= 3)."""
    low, high = _SECTION_TURNS
    sizes: list[int] = []
    left = lines - 1  # the date heading
    while left > 0:
        want = rng.randint(low, high)
        # a section takes all that is left rather than leave a sliver (or a heading alone)
        size = left - 1 if left - 1 - want < low else want
        sizes.append(size)
        left -= size + 1
    times = sorted(rng.sample(range(7 * 60, 23 * 60 + 30), len(sizes)))
    out = [f"# {day.isoformat()}"]
    turns = source.turns
    for size, minutes in zip(sizes, times, strict=True):
        out += ["", f"## Conversation at {_clock(minutes)}", ""]
        start = rng.randrange(len(turns))
        for i in range(size):
            turn = turns[(start + i) % len(turns)]
            line = _copy(rng, source, turn, names, tails=int(rng.random() < _TAIL_SHARE))
            while not distinct.add(line):
                line = _copy(rng, source, turn, names, tails=2)
            out.append(line)
    return "\n".join(out) + "\n"


def _pair(rng: random.Random) -> tuple[str, str]:
    first, second = rng.sample(FIRST_NAMES, 2)
    return first, second


def build_workspace(
    root: Path, total_lines: int, conversations: Sequence[Conversation], *, seed: int = 7
) -> Workspace:
    """Write ``total_lines`` lines of daily logs resampled from ``conversations`` under ``root``."""
    rng = random.Random(seed)
    sources = {c.name: _Source.of(c) for c in conversations}
    order = list(sources.values())
    files = max(1, round(total_lines / LINES_PER_FILE))
    base, extra = divmod(total_lines, files)
    if base < 3:
        msg = f"{total_lines} lines are too few for {files} daily logs"
        raise ValueError(msg)
    (root / "memory").mkdir(parents=True, exist_ok=True)
    distinct = _Distinct()
    logs: list[DailyLog] = []
    for i in range(files):
        day = START + timedelta(days=i)
        source = order[i % len(order)]
        names = _pair(rng)
        log = DailyLog(f"memory/{day.isoformat()}.md", source.name, names)
        text = _daily_text(rng, source, day, names, base + (i < extra), distinct)
        (root / log.path).write_text(text, encoding="utf-8")
        logs.append(log)
    queries = _queries(random.Random(seed + 1), conversations, sources, logs)
    return Workspace(total_lines, tuple(logs), queries, seed, sources)


def _queries(
    rng: random.Random,
    conversations: Sequence[Conversation],
    sources: dict[str, _Source],
    logs: Sequence[DailyLog],
) -> tuple[str, ...]:
    """Every dev question, about the people of a daily log of its conversation."""
    out = []
    for conversation in conversations:
        own = [log for log in logs if log.source == conversation.name] or list(logs)
        source = sources[conversation.name]
        for question in conversation.questions:
            out.append(source.rename(question.text, _pick_log(rng, own).speakers))
    rng.shuffle(out)  # any prefix is a fair sample (of the three conversations)
    return tuple(out)


def _pick_log(rng: random.Random, logs: Sequence[DailyLog]) -> DailyLog:
    return logs[rng.randrange(len(logs))]
