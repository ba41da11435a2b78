"""Where each memory entry came from, kept by the harness where the model cannot write.

Every line the harness writes to memory (a daily-log bullet of the flush, a ``memory_save``, a
line of MEMORY.md that consolidation wrote, a line the operator adopted) gets an
:class:`Entry`: a stable id, the file and text it was written as, who wrote it, the session
and agent, the time, the sources it was drawn from (message ids, or the entry ids a
consolidated line merges) and its :class:`Trust`. The entries of a user live in the
workspace's ``memory`` ledger (:mod:`harness.workspace.ledger`: beside the workspace, or in
the store), never in the workspace: the model and the sandbox can write every memory file,
but not one record.

Trust belongs to a save, never to a text. A record vouches for one line of its file whose text
has its digest (bullet marker and spacing aside): the same words written twice are two lines,
and each takes the trust of a record of its own (:meth:`MemoryBook.labels`, best records
first). A line no record is left for (edited, added through the file tools, or a copy of
another) counts as :attr:`Trust.UNKNOWN`, whatever it claims. Trust is computed by code, never
written by a model:

- a user's own message is :attr:`Trust.USER`; a tool result (a file read, a web page, an MCP
  tool, a subagent's reply), a message the harness wrote (a notice, a reminder) and a
  compaction summary are :attr:`Trust.UNTRUSTED`, unless the harness vouched for more
  (:data:`TRUST_KEY`: a summary of a conversation that had read nothing untrusted; the memory
  tools' results carry the lowest label they showed);
- trust follows the context, not the turn (``shared/DESIGN.md`` §6a): what the model read in
  one turn is still in front of it in the next, so its words are as trusted as the least
  trusted thing its context holds (:func:`message_trusts`), including the memory its system
  prompt showed (:data:`PROMPT_TRUST`), until a compaction replaces that part of the context;
- every line written on the model's behalf is judged by one function,
  :meth:`Context.judge`: the user's own words (their messages, or memory lines they vouched
  for, holding most of its words) keep the user's trust, lowered by any untrusted source that
  holds another of its words; anything else takes the lowest trust of the context and of what
  it draws on;
- a reviewer's promotion makes an entry :attr:`Trust.OPERATOR`; a rejection keeps it in the
  ledger (its history) and takes it out of memory's use. The latest review counts: the owner
  can undo either.

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

from harness.kernel import Msg, SessionState, written_by_harness
from harness.memory._files import digest
from harness.memory.render import is_summary
from harness.workspace.ledger import Ledger, Record, ledger_for, user_key

if TYPE_CHECKING:
    from harness.stores.base import BaseStore
    from harness.workspace import WorkspaceManager

__all__ = [
    "PROMPT_TRUST",
    "STATUS_TOOLS",
    "TRUST_KEY",
    "Context",
    "Entry",
    "Judgement",
    "MemoryBook",
    "Provenance",
    "Source",
    "Trust",
    "Writer",
    "attribute",
    "context_trust",
    "entry_digest",
    "excluded_record",
    "is_fact",
    "lowered",
    "lowest",
    "message_trust",
    "message_trusts",
    "origin",
    "prompt_trust",
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
from outside, so reading it lowers no context's trust."""

TRUST_KEY: Final = "harness_trust"
"""The metadata key of a message the harness wrote that says how far its words may be believed
(a :class:`Trust` value): a compaction summary (the lowest trust of what it replaced), a
``<workspace_update>`` note (the lowest label it shows). Set only by the harness's own code:
users send text, and the HTTP APIs and the CLI build messages from text."""

PROMPT_TRUST: Final = "memory_prompt_trust"
"""The session state's key for the lowest label of the memory the system prompt has shown
since the session started or was last compacted (:func:`lowered`, :func:`prompt_trust`)."""


def _vouched(value: object) -> Trust | None:
    try:
        return Trust(value) if isinstance(value, str) else None
    except ValueError:
        return None


def message_trust(message: Msg) -> Trust | None:
    """The trust of what ``message`` brings into the context; None for what brings nothing.

    The model's own words bring nothing (they are as trusted as what it had read: see
    :func:`message_trusts`), and neither does the harness's status line of a save.
    """
    if message.role == "assistant":
        return None
    if _own_words(message):
        return Trust.USER
    if is_summary(message) or written_by_harness(message):
        return _vouched(message.metadata.get(TRUST_KEY)) or Trust.UNTRUSTED
    if message.role == "system":
        return Trust.OPERATOR
    if message.tool_results:
        results = [r for r in message.tool_results if r.name not in STATUS_TOOLS]
        if not results:
            return None
        return lowest(_vouched(r.trust) or Trust.UNTRUSTED for r in results)
    return Trust.UNTRUSTED


def message_trusts(messages: Sequence[Msg], shown: Trust = Trust.USER) -> dict[str, Trust]:
    """The trust of each message's words, by message id (module docs).

    What the model says is as trusted as the least trusted thing its context held by then
    (``shown``: the memory its system prompt showed): once it read a web page, anything it
    says may be the page's, in this turn or any later one, until a compaction replaces the
    page with a summary (whose trust is what it replaced).
    """
    trusts: dict[str, Trust] = {}
    context = lowest((shown, Trust.USER))
    for message in messages:
        trust = message_trust(message)
        if trust is None:
            trust = context
        elif trust.rank < context.rank:
            context = trust
        trusts[message.id] = trust
    return trusts


def context_trust(messages: Iterable[Msg], shown: Trust = Trust.USER) -> Trust:
    """The lowest trust of what ``messages`` (and ``shown``, the prompt's memory) hold.

    Never above the user's: the model writes for the user, not for the operator.
    """
    return lowest(
        (shown, Trust.USER, *(t for m in messages if (t := message_trust(m)) is not None))
    )


def lowered(state: SessionState, trust: Trust) -> None:
    """Record that the system prompt showed memory as trusted as ``trust`` (a lower one stays)."""
    if trust.rank < prompt_trust(state).rank:
        state.set(PROMPT_TRUST, trust.value)


def prompt_trust(state: SessionState | None) -> Trust:
    """The lowest label of the memory the session's system prompt has shown (USER: none)."""
    shown = _vouched(state.get(PROMPT_TRUST)) if state is not None else None
    return lowest((shown or Trust.USER, Trust.USER))


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


@dataclass(frozen=True, slots=True)
class Context:
    """What the model had in front of it when it wrote: the judge of what is written for it.

    Everything written on the model's behalf is judged here (``memory_save``, the flush's
    bullets, consolidation's lines). ``trust`` is the lowest of the context; ``sources`` are
    its messages (by id) and the memory lines it was shown (``path#L<n>``), each with its
    words and trust; ``ceiling`` is the most any line may be trusted (the user's, for what the
    model writes in a conversation).
    """

    trust: Trust
    sources: Mapping[str, Source]
    messages: Mapping[str, Msg] = field(default_factory=dict)
    ceiling: Trust = Trust.OPERATOR

    @classmethod
    def of(
        cls,
        messages: Sequence[Msg],
        *,
        known: Mapping[str, Source] | None = None,
        shown: Trust = Trust.USER,
    ) -> Context:
        """The context of ``messages``: all of them, not only a turn's.

        ``known``: memory lines shown to the model, sources too; ``shown``: the lowest label
        its system prompt showed (:func:`prompt_trust`).
        """
        trusts = message_trusts(messages, shown)
        sources: dict[str, Source] = {}
        for message in messages:
            own = message_trust(message)
            if message.role == "system" or (own is None and message.role != "assistant"):
                continue  # the operator's instructions and the harness's status lines
            if own is None and not trusts[message.id].trusted:
                continue  # the model's words after it read something untrusted: no source
            body = "\n".join(r.text for r in message.tool_results) or message.text
            if body.strip():
                carries = message.role != "assistant"
                sources[message.id] = Source.of(body, trusts[message.id], carries=carries)
        return cls(
            context_trust(messages, shown),
            {**sources, **(known or {})},
            {message.id: message for message in messages},
            ceiling=Trust.USER,
        )

    def judge(self, text: str, cited: Iterable[str] = ()) -> Judgement:
        """How far ``text``, written on the model's behalf, may be believed (module docs).

        The user's own words: when trusted sources (the user's messages, memory lines the
        user or operator vouched for) hold at least :data:`COVERED` of its words (the cited
        ones first), it takes their trust, lowered by every other source that holds one of
        its remaining words and :attr:`Source.carries` them: a user's words with a web
        page's added are the page's. Anything else takes the lowest trust of the context and
        of the sources that hold its words. A citation can narrow what a line is drawn from,
        never vouch for words the cited sources do not hold.
        """
        own = words(text)
        if not own:
            return self._judgement(lowest((self.trust, self.ceiling)), ())
        held = {i: s.words & own for i, s in self.sources.items() if s.words & own}
        vouching = {i: w for i, w in held.items() if self.sources[i].trust.trusted}
        chosen = [i for i in dict.fromkeys(cited) if i in vouching]
        if _share(own, chosen, held) < COVERED:
            chosen = _fewest(own, vouching, self.sources)
        floor = self.ceiling
        if not chosen:  # not the user's words: as trusted as what it was written from
            chosen = _fewest(own, held, self.sources)
            floor = lowest((self.trust, self.ceiling))
        rest = own.difference(*(held[i] for i in chosen))
        carried = [
            i for i in held if i not in chosen and self.sources[i].carries and held[i] & rest
        ]
        drawn = (*chosen, *carried)
        return self._judgement(lowest((floor, *(self.sources[i].trust for i in drawn))), drawn)

    def _judgement(self, trust: Trust, drawn: tuple[str, ...]) -> Judgement:
        """The judgement, with what a reviewer reads of where an untrusted line came from."""
        if trust.trusted:
            return Judgement(trust, drawn)
        low = [i for i, source in self.sources.items() if not source.trust.trusted]
        read = [self.messages[i] for i in (*drawn, *low) if i in self.messages]
        lines = [i for i in drawn if i not in self.messages and not self.sources[i].trust.trusted]
        said = [origin(read), f"memory lines ({', '.join(lines)})" if lines else ""]
        return Judgement(trust, drawn, ", ".join(part for part in said if part))


def attribute(
    text: str, cited: Iterable[str], sources: Mapping[str, Source], fallback: Trust
) -> Judgement:
    """What a line is drawn from, and how far it may be believed: :meth:`Context.judge`.

    In a context of ``sources`` alone, whose trust is ``fallback``.
    """
    return Context(fallback, sources).judge(text, cited)


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
                reviews[str(record.get("id"))] = record["decision"]  # the latest one counts
                reviewed_at[str(record.get("id"))] = float(record.get("at") or 0)
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
        """The entries written as this text in this file (none: edited, or from before)."""
        return self._lines.get((path, entry_digest(text)), ())

    def labels(self, path: str, text: str) -> dict[int, Trust | None]:
        """The trust of each fact line of a file, by its index; None for a line not shown.

        Trust belongs to a save, never to a text: each record vouches for one line written
        as it, the best records first (the lines of one text are the same words, so which
        copy gets which record says nothing), then the rejected ones (None). A line no record
        is left for is UNKNOWN, or not shown either when every record of its text was
        rejected: rewriting a rejected line does not bring it back.
        """
        queues: dict[str, list[Trust | None]] = {}
        found: dict[int, Trust | None] = {}
        for index, line in enumerate(text.splitlines()):
            if not is_fact(line):
                continue
            key = entry_digest(line)
            queue = queues.get(key)
            if queue is None:
                entries = self._lines.get((path, key), ())
                kept = [self.trust(e) for e in entries if not self.rejected(e)]
                kept.sort(key=lambda trust: trust.rank, reverse=True)
                extra: Trust | None = None if entries and not kept else Trust.UNKNOWN
                queue = queues[key] = [extra, *([None] * (len(entries) - len(kept))), *kept[::-1]]
            found[index] = queue.pop() if len(queue) > 1 else queue[0]
        return found

    def sources(self, path: str, text: str) -> dict[str, Source]:
        """Each fact line of a file as a source (``path#L<n>``), with the line's trust."""
        lines = text.splitlines()
        return {
            f"{path}#L{index + 1}": Source.of(lines[index], trust, carries=trust is Trust.UNTRUSTED)
            for index, trust in self.labels(path, text).items()
            if trust is not None
        }

    def kept(self, path: str, text: str) -> str:
        """``text`` without its untrusted lines (rejected, or waiting for review).

        What a model may be shown as known, and all that consolidation must keep.
        """
        labels = self.labels(path, text)
        return "\n".join(
            line
            for index, line in enumerate(text.splitlines())
            if labels.get(index, Trust.USER) not in (None, Trust.UNTRUSTED)
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

    def excluded(self) -> list[Entry]:
        """Entries kept out of the prompt: waiting for review, or rejected; oldest first.

        What the owner is shown so that nothing is dropped silently (:meth:`why`), and can
        trust or reject (:meth:`Provenance.review`).
        """
        return sorted(
            (e for e in self.entries.values() if self.trust(e) is Trust.UNTRUSTED),
            key=lambda e: (e.at, e.id),
        )

    def why(self, entry: Entry) -> str:
        """Why an entry is kept out of the prompt, in words its owner reads ("" if it is not)."""
        if self.rejected(entry):
            return "rejected by a review"
        if self.trust(entry) is not Trust.UNTRUSTED:
            return ""
        drawn = f" ({entry.origin})" if entry.origin else ""
        return f"waits for review: written after the model read content no user typed{drawn}"


def excluded_record(book: MemoryBook, entry: Entry) -> Record:
    """An entry kept out of the prompt as the CLI's ``--json`` and the HTTP API show it.

    Its record, with ``review`` (the decision, or None while it waits) and ``why``.
    """
    return {**entry.as_record(), "review": book.reviews.get(entry.id), "why": book.why(entry)}


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
        return user_key(user_id)

    async def add(self, user_id: str | None, entries: Sequence[Entry]) -> None:
        """Record entries (before or right after the lines they describe are written)."""
        if entries:
            records = [entry.as_record() for entry in entries]
            await self.ledger.change(self.key(user_id), lambda _: records)

    async def adopt(self, user_id: str | None, path: str, text: str) -> list[Entry]:
        """Vouch for every fact line of a file as the operator's (``harness memory adopt``).

        For files from before provenance: their lines count as unknown until adopted. A line
        already the operator's is not recorded again; a rejected one is not adopted; each copy
        of a repeated line is adopted as a line of its own (a record vouches for one line).
        """

        def change(records: list[Record]) -> list[Record]:
            book = MemoryBook.of(records)
            lines = text.splitlines()
            added = [
                Entry.new(path, lines[index].strip(), "operator", Trust.OPERATOR)
                for index, trust in book.labels(path, text).items()
                if trust is not None and trust is not Trust.OPERATOR
            ]
            adopted[:] = added  # a store's compare-and-set may ask again
            return [entry.as_record() for entry in added]

        adopted: list[Entry] = []
        await self.ledger.change(self.key(user_id), change)
        return adopted

    async def book(self, user_id: str | None) -> MemoryBook:
        return MemoryBook.of(await self.ledger.records(self.key(user_id)))

    async def review(
        self, user_id: str | None, entry_id: str, decision: Decision, *, by: str | None = None
    ) -> Entry:
        """Promote (trust) or reject an entry; the same decision again is harmless.

        The latest decision counts, so the owner can undo a rejection or a promotion: nothing
        is dropped for good (what a promoted entry already gave MEMORY.md stays there).

        Raises:
            KeyError: The user has no entry of that id.
        """
        found: list[Entry] = []

        def change(records: list[Record]) -> list[Record]:
            book = MemoryBook.of(records)
            entry = book.entries.get(entry_id)
            if entry is None:
                msg = f"no memory entry {entry_id!r}; list them with `harness memory review`"
                raise KeyError(msg)
            found[:] = [entry]  # a store's compare-and-set may ask again
            if book.reviews.get(entry_id) == decision:
                return []
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
