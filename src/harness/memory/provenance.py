"""Where each memory entry came from, kept by the harness where the model cannot write.

Every line the harness writes to memory (a daily-log bullet of the flush, a ``memory_save``, a
line of MEMORY.md that consolidation wrote, a line the operator adopted) gets an
:class:`Entry`: a stable id, the file and text it was written as, who wrote it, the session
and agent, the time, the sources it was drawn from (message ids, or the entry ids a
consolidated line merges) and its :class:`Trust`. The entries of a user live in the
workspace's ``memory`` ledger (:mod:`harness.workspace.ledger`: beside the workspace, or in
the store), never in the workspace: the model and the sandbox can write every memory file,
but not one record.

A line is matched to its records by the file and the digest of its text (bullet marker and
spacing aside). So a line that was edited, or added through the file tools, has no record:
it counts as :attr:`Trust.UNKNOWN`, whatever it claims. Trust is computed by code, never
written by a model:

- a user's own turn is :attr:`Trust.USER`; a tool result (a file read, a web page, an MCP
  tool, a subagent's reply), a message the harness wrote (a notice, a reminder) and a
  compaction summary are :attr:`Trust.UNTRUSTED`; what the assistant said in a turn is as
  trusted as the least trusted thing the turn had read by then (:func:`message_trusts`);
- an entry takes the lowest trust of its sources (:func:`lowest`); a line that matches no
  source at all is UNKNOWN;
- a reviewer's promotion makes an entry :attr:`Trust.OPERATOR`; a rejection keeps it in the
  ledger (its history) and takes it out of memory's use.

Only entries that are at least USER (:attr:`Trust.trusted`) are merged into MEMORY.md on their
own; UNTRUSTED ones wait for review (``harness memory review``).
"""

from __future__ import annotations

import re
import secrets
import time
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final, Literal

from harness.kernel import Msg, written_by_harness
from harness.memory._files import digest
from harness.memory.render import is_summary
from harness.workspace.ledger import Ledger, Record, ledger_for

if TYPE_CHECKING:
    from harness.stores.base import BaseStore
    from harness.workspace import WorkspaceManager

__all__ = [
    "STATUS_TOOLS",
    "Entry",
    "Judgement",
    "MemoryBook",
    "Provenance",
    "Source",
    "Trust",
    "Writer",
    "attribute",
    "entry_digest",
    "is_fact",
    "judge_turn",
    "lowest",
    "message_trusts",
    "origin",
    "words",
]

Writer = Literal["flush", "user_turn", "memory_save", "consolidation", "operator"]
"""Who wrote an entry: the flush's model, the user's own words (an explicit "remember"),
the model through ``memory_save``, consolidation, or the operator (adopted, promoted)."""

LEDGER_KIND: Final = "memory"
COVERED: Final = 0.5
"""A line is drawn from sources that hold at least this share of its words."""
_PROVENANCES: weakref.WeakKeyDictionary[WorkspaceManager, Provenance] = weakref.WeakKeyDictionary()
"""The provenance of each workspace (:meth:`Provenance.for_workspace`)."""
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_WORD = re.compile(r"[^\W_]+")
_HEADING = re.compile(r"#{1,6}\s")
_FUNCTION_WORDS: Final = frozenset(
    (
        "the",
        "and",
        "for",
        "are",
        "was",
        "were",
        "has",
        "have",
        "had",
        "not",
        "but",
        "this",
        "that",
        "these",
        "those",
        "with",
        "from",
        "into",
        "onto",
        "about",
        "than",
        "then",
        "they",
        "them",
        "their",
        "there",
        "here",
        "which",
        "who",
        "whom",
        "whose",
        "what",
        "when",
        "where",
        "why",
        "how",
        "its",
        "his",
        "her",
        "hers",
        "she",
        "him",
        "our",
        "ours",
        "you",
        "your",
        "yours",
        "will",
        "would",
        "can",
        "could",
        "should",
        "shall",
        "may",
        "might",
        "must",
        "does",
        "did",
        "been",
        "being",
        "also",
        "just",
        "very",
        "such",
        "user",
        "users",
    )
)
"""Words that say nothing of where a line came from (and the extraction model's "The user")."""


class Trust(StrEnum):
    """How far an entry may be believed, lowest first."""

    UNTRUSTED = "untrusted"
    """Drawn from content no user typed: tool results, files, subagents, MCP, notices."""
    UNKNOWN = "unknown"
    """No valid record: a line from before provenance, or edited through the file tools."""
    USER = "user"
    """The user's own words, or drawn only from them."""
    OPERATOR = "operator"
    """Adopted or promoted by the operator or a reviewer."""

    @property
    def rank(self) -> int:
        return _RANKS[self]

    @property
    def trusted(self) -> bool:
        """May reach MEMORY.md on its own: the user's or the operator's."""
        return self.rank >= _RANKS[Trust.USER]


_RANKS: Final = {trust: rank for rank, trust in enumerate(Trust)}


def lowest(trusts: Iterable[Trust], default: Trust = Trust.UNKNOWN) -> Trust:
    """The lowest of ``trusts`` (``default`` for none)."""
    return min(trusts, key=lambda trust: trust.rank, default=default)


def is_fact(line: str) -> bool:
    """Whether a line of a memory file states something (not blank, not a heading)."""
    stripped = line.strip()
    return bool(stripped.strip("#")) and not _HEADING.match(stripped)


def entry_digest(text: str) -> str:
    """What identifies a line's text: its digest, bullet marker and spacing aside."""
    return digest(" ".join(_BULLET.sub("", text, count=1).split()))


def words(text: str) -> set[str]:
    """The words of ``text`` that say where it came from (casefolded; numbers, no short words)."""
    return {
        w
        for w in _WORD.findall(text.casefold())
        if (len(w) > 2 or w.isdigit()) and w not in _FUNCTION_WORDS
    }


def _own_words(message: Msg) -> bool:
    """Whether ``message`` is the user's own typing (not a result, notice or summary)."""
    return (
        message.role == "user"
        and not written_by_harness(message)
        and not is_summary(message)
        and not message.tool_results
    )


STATUS_TOOLS: Final = frozenset({"memory_save"})
"""Tools whose result is only the harness's status line ("Saved to ..."): it carries nothing
from outside, so reading it lowers no turn's trust."""


def _status_only(message: Msg) -> bool:
    results = message.tool_results
    return bool(results) and all(result.name in STATUS_TOOLS for result in results)


def message_trusts(messages: Sequence[Msg]) -> dict[str, Trust]:
    """The trust of each message's words, by message id (module docs).

    The assistant's words are as trusted as the least trusted message of its turn before it
    (from the user's last own message on): once a turn read a web page, what the assistant
    says may be the page's.
    """
    trusts: dict[str, Trust] = {}
    turn = Trust.USER
    for message in messages:
        if _own_words(message):
            trust = turn = Trust.USER  # the user's own words open a new turn
        elif message.role == "assistant":
            trust = turn
        elif message.role == "system" and not is_summary(message):
            trust = Trust.OPERATOR
        elif _status_only(message):
            trust = turn  # the harness's own word on what the model asked of it
        else:  # tool results, notices, reminders, summaries, a parent agent's task
            trust = Trust.UNTRUSTED
        if trust is Trust.UNTRUSTED:
            turn = Trust.UNTRUSTED
        trusts[message.id] = trust
    return trusts


@dataclass(frozen=True, slots=True)
class Judgement:
    """How far what the model writes now may be believed, and the messages it draws on."""

    trust: Trust
    sources: tuple[str, ...] = ()
    origin: str = ""
    """What of it no user typed, in words a reviewer reads (``"web_fetch result"``)."""


def origin(messages: Iterable[Msg]) -> str:
    """The untrusted messages among ``messages``, said as a reviewer reads them."""
    kinds: dict[str, None] = {}
    for message in messages:
        if message.tool_results:
            results = (r for r in message.tool_results if r.name not in STATUS_TOOLS)
            kinds.update({f"{r.name or 'tool'} result": None for r in results})
        elif is_summary(message):
            kinds["a compaction summary"] = None
        elif written_by_harness(message):
            kinds["a notice or task the harness wrote"] = None
    return ", ".join(kinds)


def judge_turn(messages: Sequence[Msg]) -> Judgement:
    """The trust of the model's words at the end of ``messages``: its turn's lowest.

    The turn runs from the user's last own message; its sources are that message and every
    untrusted one the model had read since. A conversation with no message of the user's (a
    subagent's, whose task the parent model wrote) is untrusted.
    """
    start = next((i for i in range(len(messages) - 1, -1, -1) if _own_words(messages[i])), None)
    if start is None:
        read = [m for m in messages if m.role != "assistant"]
        return Judgement(Trust.UNTRUSTED, tuple(m.id for m in read), origin(read))
    trusts = message_trusts(messages)
    turn = messages[start:]
    sources = tuple(m.id for m in turn if m.role != "assistant" or trusts[m.id] is Trust.UNTRUSTED)
    trust = lowest((trusts[m.id] for m in turn), Trust.USER)
    return Judgement(trust, sources, origin(turn))


@dataclass(frozen=True, slots=True)
class Source:
    """Something a memory line may be drawn from: its words and its trust."""

    words: frozenset[str]
    trust: Trust
    carries: bool = True
    """Whether a word of it in a line may have come from it although the line is drawn from
    others: not for the model's own messages (their words came from somewhere else, or from
    the model, which adds a name it knows), nor for a line merely unknown."""

    @classmethod
    def of(cls, text: str, trust: Trust, *, carries: bool = True) -> Source:
        return cls(frozenset(words(text)), trust, carries)


def attribute(
    text: str, cited: Iterable[str], sources: Mapping[str, Source], fallback: Trust
) -> Judgement:
    """What a line is drawn from, and so how far it may be believed, decided by code.

    The line's sources are the ids it cites, when they hold at least :data:`COVERED` of its
    words; otherwise the fewest sources that together hold that share (the least trusted
    first among equals). Every other source that :attr:`Source.carries` words and holds one
    of the line's remaining words is a source too: a user's words with a web page's added are
    the page's. The trust is the
    lowest of them all; a line that no sources cover takes ``fallback``.
    """
    own = words(text)
    if not own:
        return Judgement(fallback)
    held = {i: source.words & own for i, source in sources.items() if source.words & own}
    chosen = [i for i in dict.fromkeys(cited) if i in held]
    if _share(own, chosen, held) < COVERED:
        chosen = _fewest(own, held, sources)
    if not chosen:
        return Judgement(fallback)
    rest = own.difference(*(held[i] for i in chosen))
    carried = (i for i in held if i not in chosen and sources[i].carries and held[i] & rest)
    drawn = [*chosen, *carried]
    return Judgement(lowest(sources[i].trust for i in drawn), tuple(drawn))


def _share(own: set[str], chosen: Sequence[str], held: Mapping[str, frozenset[str]]) -> float:
    return len(set().union(*(held[i] for i in chosen))) / len(own)


def _fewest(
    own: set[str], held: Mapping[str, frozenset[str]], sources: Mapping[str, Source]
) -> list[str]:
    """A greedy cover of :data:`COVERED` of ``own`` by the sources' words (none if impossible)."""
    chosen: list[str] = []
    covered: set[str] = set()
    while len(covered) < COVERED * len(own):
        best = max(
            (i for i in held if i not in chosen and held[i] - covered),
            key=lambda i: (len(held[i] - covered), -sources[i].trust.rank),
            default=None,
        )
        if best is None:
            return []
        chosen.append(best)
        covered |= held[best]
    return chosen


@dataclass(frozen=True, slots=True)
class Entry:
    """One memory entry as the ledger records it."""

    id: str
    path: str
    """The file, relative to the user's namespace (``MEMORY.md``, ``memory/<day>.md``)."""
    text: str
    writer: Writer
    trust: Trust
    sources: tuple[str, ...] = ()
    """Message ids (flush, ``memory_save``, user turn) or entry ids (consolidation)."""
    session_id: str | None = None
    agent: str | None = None
    at: float = field(default_factory=time.time)
    digest: str = ""
    origin: str = ""
    """What of its sources no user typed (:func:`origin`), for the reviewer."""

    @classmethod
    def new(
        cls,
        path: str,
        text: str,
        writer: Writer,
        trust: Trust,
        sources: Iterable[str] = (),
        *,
        session_id: str | None = None,
        agent: str | None = None,
        origin: str = "",
    ) -> Entry:
        return cls(
            id=f"mem_{secrets.token_hex(6)}",
            path=path,
            text=text,
            writer=writer,
            trust=trust,
            sources=tuple(sources),
            session_id=session_id,
            agent=agent,
            digest=entry_digest(text),
            origin=origin,
        )

    def as_record(self) -> Record:
        record = asdict(self)
        record["kind"] = "entry"
        record["trust"] = self.trust.value
        record["sources"] = list(self.sources)
        return record

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Entry | None:
        try:
            return cls(
                id=str(record["id"]),
                path=str(record["path"]),
                text=str(record["text"]),
                writer=record["writer"],
                trust=Trust(record["trust"]),
                sources=tuple(str(s) for s in record.get("sources") or ()),
                session_id=record.get("session_id"),
                agent=record.get("agent"),
                at=float(record.get("at") or 0),
                digest=str(record.get("digest") or entry_digest(str(record["text"]))),
                origin=str(record.get("origin") or ""),
            )
        except (KeyError, ValueError, TypeError):
            return None


Decision = Literal["promote", "reject"]


@dataclass(frozen=True, slots=True)
class MemoryBook:
    """A user's entries and reviews, read at once: what every reader of memory asks."""

    entries: Mapping[str, Entry]
    reviews: Mapping[str, Decision]
    reviewed_at: Mapping[str, float]
    _lines: Mapping[tuple[str, str], tuple[Entry, ...]]

    @classmethod
    def of(cls, records: Iterable[Record]) -> MemoryBook:
        entries: dict[str, Entry] = {}
        reviews: dict[str, Decision] = {}
        reviewed_at: dict[str, float] = {}
        for record in records:
            if record.get("kind") == "entry":
                entry = Entry.from_record(record)
                if entry is not None:
                    entries.setdefault(entry.id, entry)
            elif record.get("kind") == "review" and record.get("decision") in ("promote", "reject"):
                reviews.setdefault(str(record.get("id")), record["decision"])
                reviewed_at.setdefault(str(record.get("id")), float(record.get("at") or 0))
        lines: dict[tuple[str, str], list[Entry]] = {}
        for entry in entries.values():
            lines.setdefault((entry.path, entry.digest), []).append(entry)
        return cls(entries, reviews, reviewed_at, {k: tuple(v) for k, v in lines.items()})

    def trust(self, entry: Entry) -> Trust:
        """An entry's trust after review (a rejected one is UNTRUSTED)."""
        review = self.reviews.get(entry.id)
        if review == "promote":
            return Trust.OPERATOR
        if review == "reject":
            return Trust.UNTRUSTED
        return entry.trust

    def rejected(self, entry: Entry) -> bool:
        return self.reviews.get(entry.id) == "reject"

    def of_line(self, path: str, text: str) -> tuple[Entry, ...]:
        """The entries written as this line of this file (none: edited, or from before)."""
        return self._lines.get((path, entry_digest(text)), ())

    def line_trust(self, path: str, text: str) -> Trust:
        """A line's trust: the best of its entries not rejected; UNKNOWN without one.

        A line all of whose entries were rejected is UNTRUSTED.
        """
        entries = self.of_line(path, text)
        if not entries:
            return Trust.UNKNOWN
        kept = [self.trust(e) for e in entries if not self.rejected(e)]
        return max(kept, key=lambda t: t.rank) if kept else Trust.UNTRUSTED

    def line_rejected(self, path: str, text: str) -> bool:
        entries = self.of_line(path, text)
        return bool(entries) and all(self.rejected(e) for e in entries)

    def sources(self, path: str, text: str) -> dict[str, Source]:
        """Each fact line of a file as a source (``path#L<n>``), with the line's trust."""
        return {
            f"{path}#L{number}": Source.of(line, trust, carries=trust is Trust.UNTRUSTED)
            for number, line in enumerate(text.splitlines(), start=1)
            if is_fact(line) and (trust := self.line_trust(path, line))
        }

    def kept(self, path: str, text: str) -> str:
        """``text`` without its untrusted lines (rejected, or waiting for review).

        What a model may be shown as known, and all that consolidation must keep.
        """
        return "\n".join(
            line
            for line in text.splitlines()
            if not is_fact(line) or self.line_trust(path, line) is not Trust.UNTRUSTED
        )

    def promoted_since(self, moment: float) -> list[Entry]:
        """Entries a reviewer promoted after ``moment`` (a timestamp), oldest first."""
        return sorted(
            (
                self.entries[i]
                for i, decision in self.reviews.items()
                if decision == "promote" and i in self.entries and self.reviewed_at[i] > moment
            ),
            key=lambda e: self.reviewed_at[e.id],
        )

    def waiting(self) -> list[Entry]:
        """Entries that wait for review: untrusted, not yet promoted or rejected, oldest first."""
        return sorted(
            (
                e
                for e in self.entries.values()
                if e.trust is Trust.UNTRUSTED and e.id not in self.reviews
            ),
            key=lambda e: (e.at, e.id),
        )


class Provenance:
    """The memory entries of a workspace's users, in its ``memory`` ledger (module docs)."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    @classmethod
    def for_workspace(
        cls, workspace: WorkspaceManager, store: BaseStore | None = None
    ) -> Provenance:
        """The workspace's provenance, one per workspace: every reader and writer shares it.

        The flush, consolidation, ``memory_save`` and the prompt then share one view of the
        ledger instead of each being handed one. Its ledger is where the workspace keeps state
        out of the model's reach (:meth:`WorkspaceManager.out_of_reach`: ``store``, else the
        workspace's own store).
        """
        if store is not None:
            return cls(ledger_for(workspace, LEDGER_KIND, store))
        shared = _PROVENANCES.get(workspace)
        if shared is None:
            shared = _PROVENANCES[workspace] = cls(ledger_for(workspace, LEDGER_KIND))
        return shared

    @staticmethod
    def key(user_id: str | None) -> str:
        return f"user:{user_id}" if user_id is not None else "shared"

    async def add(self, user_id: str | None, entries: Sequence[Entry]) -> None:
        """Record entries (before or right after the lines they describe are written)."""
        if entries:
            records = [entry.as_record() for entry in entries]
            await self.ledger.change(self.key(user_id), lambda _: records)

    async def adopt(self, user_id: str | None, path: str, text: str) -> list[Entry]:
        """Vouch for every fact line of a file as the operator's (``harness memory adopt``).

        For files from before provenance: their lines count as unknown until adopted. A line
        already the operator's is not recorded again; a rejected one is not adopted.
        """

        def change(records: list[Record]) -> list[Record]:
            book = MemoryBook.of(records)
            added: dict[str, Entry] = {}
            for line in text.splitlines():
                if not is_fact(line) or book.line_rejected(path, line):
                    continue
                if book.line_trust(path, line) is not Trust.OPERATOR:
                    entry = Entry.new(path, line.strip(), "operator", Trust.OPERATOR)
                    added.setdefault(entry.digest, entry)
            adopted[:] = added.values()  # a store's compare-and-set may ask again
            return [entry.as_record() for entry in added.values()]

        adopted: list[Entry] = []
        await self.ledger.change(self.key(user_id), change)
        return adopted

    async def book(self, user_id: str | None) -> MemoryBook:
        return MemoryBook.of(await self.ledger.records(self.key(user_id)))

    async def review(
        self, user_id: str | None, entry_id: str, decision: Decision, *, by: str | None = None
    ) -> Entry:
        """Promote or reject an entry that waits; the same decision again is harmless.

        Raises:
            KeyError: The user has no entry of that id.
            ValueError: It was already decided otherwise.
        """
        found: list[Entry] = []

        def change(records: list[Record]) -> list[Record]:
            book = MemoryBook.of(records)
            entry = book.entries.get(entry_id)
            if entry is None:
                msg = f"no memory entry {entry_id!r}; list them with `harness memory review`"
                raise KeyError(msg)
            found[:] = [entry]  # a store's compare-and-set may ask again
            earlier = book.reviews.get(entry_id)
            if earlier == decision:
                return []
            if earlier is not None:
                done = {"promote": "promoted", "reject": "rejected"}[earlier]
                msg = f"memory entry {entry_id!r} was already {done}; a review is final"
                raise ValueError(msg)
            return [
                {
                    "kind": "review",
                    "id": entry_id,
                    "decision": decision,
                    "by": by,
                    "at": time.time(),
                }
            ]

        await self.ledger.change(self.key(user_id), change)
        return found[0]
