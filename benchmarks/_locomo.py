"""The LoCoMo dev conversations as daily memory logs, and recall measured as their README says.

Each conversation (``../shared/data/locomo-dev/conversation-<id>.json``, three of the ten of
LoCoMo, ACL 2024) becomes one workspace. Each of its sessions becomes lines of the daily log
``memory/<session date>.md``: a ``# <date>`` heading (once per file), a ``## Conversation at
<time>`` heading, then one line per turn, ``- <speaker>: <text>``, with `` [shared <caption>]``
appended when the turn shared a photo. Adversarial questions (category 5) are left out.

A question is recalled at k when the text of every one of its evidence turns
(``<speaker>: <text>``) is a substring of the concatenated content of the k hits.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo-dev"

_SESSION = re.compile(r"session_(\d+)")
_EVIDENCE_SPLIT = re.compile(r"[;,\s]+")
_WORD = re.compile(r"\w+")


@dataclass(frozen=True, slots=True)
class Turn:
    """One dialog turn: its id (``D<session>:<i>``), its log line and its evidence text."""

    dia_id: str
    line: str
    evidence: str


CATEGORIES: dict[int, str] = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
"""LoCoMo's question categories (5, adversarial, is left out): the names its paper gives."""


@dataclass(frozen=True, slots=True)
class Question:
    text: str
    evidence: tuple[str, ...]  # the evidence texts every hit list must contain
    category: int = 0  # a key of CATEGORIES


@dataclass(frozen=True, slots=True)
class Conversation:
    name: str
    files: dict[str, str]  # workspace path -> text
    speakers: tuple[str, str]
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]

    def write(self, root: Path) -> None:
        for path, text in self.files.items():
            target = root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")

    def lines(self) -> list[str]:
        """Every non-blank line of the logs, headings included (what the index sees)."""
        return [line for text in self.files.values() for line in text.splitlines() if line]


def _when(stamp: str) -> tuple[str, str]:
    """``"1:56 pm on 8 May, 2023"`` -> (``"2023-05-08"``, ``"1:56 pm"``)."""
    clock, _, day = stamp.partition(" on ")
    return datetime.strptime(day.strip(), "%d %B, %Y").date().isoformat(), clock.strip()


def load(path: Path) -> Conversation:
    data = json.loads(path.read_text(encoding="utf-8"))
    sessions = sorted(
        (int(m[1]), data[key]) for key in data if (m := _SESSION.fullmatch(key)) is not None
    )
    files: dict[str, list[str]] = {}
    turns: list[Turn] = []
    for number, session in sessions:
        day, clock = _when(data[f"session_{number}_date_time"])
        lines = files.setdefault(f"memory/{day}.md", [f"# {day}"])
        lines += ["", f"## Conversation at {clock}", ""]
        for turn in session:
            evidence = f"{turn['speaker']}: {turn['text']}"
            caption = turn.get("blip_caption")
            line = f"- {evidence}" + (f" [shared {caption}]" if caption else "")
            lines.append(line)
            turns.append(Turn(turn["dia_id"], line, evidence))
    by_id = {turn.dia_id: turn.evidence for turn in turns}
    questions = []
    for qa in data["qa"]:
        if qa.get("category") == 5:
            continue
        ids = [i for e in qa["evidence"] for i in _EVIDENCE_SPLIT.split(e) if i]
        texts = tuple(by_id[i] for i in ids if i in by_id)
        if texts:
            questions.append(Question(qa["question"], texts, int(qa.get("category") or 0)))
    return Conversation(
        name=path.stem,
        files={p: "\n".join(lines) + "\n" for p, lines in files.items()},
        speakers=(data["speaker_a"], data["speaker_b"]),
        turns=tuple(turns),
        questions=tuple(questions),
    )


def conversations(directory: Path = DATA_DIR) -> list[Conversation]:
    found = sorted(directory.glob("conversation-*.json"))
    if not found:
        msg = f"no conversation-*.json in {directory}; pass --data with the LoCoMo dev folder"
        raise SystemExit(msg)
    return [load(path) for path in found]


Search = Callable[[str, int], Sequence[str]]
"""(question, k) -> the contents of at most k hits."""


def recalled(question: Question, contents: Sequence[str]) -> bool:
    joined = "\n".join(contents)
    return all(text in joined for text in question.evidence)


def bm25_search(conversation: Conversation) -> Search:
    """``rank_bm25``'s Okapi BM25, one document per line, lowercase ``\\w+`` tokens."""
    from rank_bm25 import BM25Okapi  # type: ignore[import-untyped]

    lines = conversation.lines()
    bm25 = BM25Okapi([_WORD.findall(line.lower()) for line in lines])

    def search(question: str, k: int) -> list[str]:
        scores = bm25.get_scores(_WORD.findall(question.lower()))
        best = sorted(range(len(lines)), key=lambda i: -scores[i])[:k]
        return [lines[i] for i in best]

    return search


def questions_of(items: Sequence[Conversation]) -> Iterator[tuple[Conversation, Question]]:
    for conversation in items:
        for question in conversation.questions:
            yield conversation, question
