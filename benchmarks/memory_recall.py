"""Memory recall: does search return what answers a question, in its top 5 / top 10 hits?

Two labelled sets, both measured in one run beside ``rank_bm25`` (Okapi BM25 over every line,
lowercase ``\\w+`` tokens, the k best lines):

1. **Conversations (the headline).** The three LoCoMo dev conversations
   (``../shared/data/locomo-dev/``, real multi-session chats no one here wrote), one daily-log
   line per turn, measured exactly as that folder's README says (``_locomo.py``): a question is
   recalled when the text of every evidence turn is inside the concatenated content of the k
   hits. Reported for MemoryIndex snippets (the default: runs of lines within 300 characters
   per hit), MemoryIndex one line per hit (``snippets=False``) and rank_bm25, with the mean
   characters the k hits return and the median milliseconds per query.
   Targets: snippets recall@5 >= 0.67 at <= 1,500 characters per query; one line per hit
   >= 0.58; both above rank_bm25. Recall@5 is also given per LoCoMo category (multi-hop,
   temporal, open-domain, single-hop); on the held-out conversations (measured elsewhere)
   the target is snippets >= 0.70 overall and >= 0.35 on multi-hop. ``--baseline REV`` adds,
   in the same run, MemoryIndex snippets as the revision ``REV`` has them (``main``, a
   commit): its tree is checked out in a temporary git worktree and measured by this very
   script in a process of its own.
2. **Generated logs** (``_recall_data.py``, seeded): six months of daily memory files (about
   5,600 lines) and 344 questions, each labelled with its answer line(s); a hit counts when it
   is an answer line (MemoryIndex one line per hit). Too easy to tell methods apart; kept as
   a regression check.

    .venv/bin/python benchmarks/memory_recall.py [--data DIR] [--show-misses N] [--baseline REV]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from _locomo import CATEGORIES, DATA_DIR, Conversation, bm25_search, conversations, recalled
from _locomo import Question as Asked
from _recall_data import Dataset, Question, build

import harness
from harness.memory.index import MemoryIndex

_ROOT = Path(__file__).resolve().parents[1]

_WORD = re.compile(r"\w+")

Ranker = Callable[[str], list[tuple[str, int]]]
Search = Callable[[str, int], Sequence[str]]


# --- conversations ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Answer:
    """How one search method did on one question."""

    category: int
    at5: bool
    at10: bool
    chars: int
    seconds: float


@dataclass
class _Tally:
    """Recall at 5 and 10, characters and time per query, of one search method."""

    at5: int = 0
    at10: int = 0
    chars: int = 0
    seconds: list[float] = field(default_factory=list)
    categories: dict[int, list[int]] = field(default_factory=dict)  # category: [asked, at5]

    def add(self, search: Search, question: Asked) -> _Answer:
        start = time.perf_counter()
        five = search(question.text, 5)
        seconds = time.perf_counter() - start
        answer = _Answer(
            question.category,
            recalled(question, five),
            recalled(question, search(question.text, 10)),
            sum(len(text) for text in five),
            seconds,
        )
        self.record(answer)
        return answer

    def record(self, answer: _Answer) -> None:
        self.seconds.append(answer.seconds)
        self.chars += answer.chars
        self.at5 += answer.at5
        self.at10 += answer.at10
        counts = self.categories.setdefault(answer.category, [0, 0])
        counts[0] += 1
        counts[1] += answer.at5


@contextlib.contextmanager
def _indexed(conversation: Conversation) -> Iterator[MemoryIndex]:
    """A MemoryIndex of the conversation's daily logs, in a workspace of its own."""
    with tempfile.TemporaryDirectory(prefix="locomo-") as tmp:
        root = Path(tmp) / "workspace"
        conversation.write(root)
        with MemoryIndex(tmp) as index:
            index.index_all_from_workspace(root)
            yield index


def _ours(index: MemoryIndex, *, snippets: bool) -> Search:
    def search(question: str, k: int) -> list[str]:
        return [hit.content for hit in index.search(question, k, snippets=snippets)]

    return search


def _conversation_table(items: Sequence[Conversation], baseline: tuple[str, _Tally] | None) -> None:
    methods = ("MemoryIndex snippets", "MemoryIndex one line", "rank_bm25")
    tallies = {name: _Tally() for name in methods}
    asked = 0
    for conversation in items:
        with _indexed(conversation) as index:
            searches = dict(
                zip(
                    methods,
                    (
                        _ours(index, snippets=True),
                        _ours(index, snippets=False),
                        bm25_search(conversation),
                    ),
                    strict=True,
                )
            )
            for question in conversation.questions:
                asked += 1
                for name, search in searches.items():
                    tallies[name].add(search, question)
    if baseline is not None:
        tallies[baseline[0]] = baseline[1]
    turns = sum(len(c.turns) for c in items)
    print(
        f"LoCoMo dev: {len(items)} conversations, {turns:,} turns, {asked} questions "
        "(category 5 left out); recalled = every evidence turn inside the k hits"
    )
    print(f"{'method':<22}{'recall@5':>9}{'@10':>7}{'chars/query':>13}{'ms/query':>10}")
    for name, tally in tallies.items():
        print(
            f"{name:<22}{tally.at5 / asked:>9.3f}{tally.at10 / asked:>7.3f}"
            f"{tally.chars / asked:>13,.0f}{statistics.median(tally.seconds) * 1000:>10.2f}"
        )
    base = tallies["rank_bm25"].at5 or 1
    for name in methods[:2]:
        print(f"{name} / rank_bm25 at 5: {tallies[name].at5 / base:.2f}x")
    if baseline is not None:
        then = baseline[1].at5 or 1
        print(f"MemoryIndex snippets / {baseline[0]} at 5: {tallies[methods[0]].at5 / then:.2f}x")
    print(
        "targets: snippets >= 0.670 at <= 1,500 chars/query; one line >= 0.580; both above "
        "rank_bm25 (held-out: snippets >= 0.70, multi-hop >= 0.35)"
    )
    print()
    names = list(tallies)
    print("recall@5 by category")
    print(f"{'category':<14}{'n':>5}" + "".join(f"{name:>24}" for name in names))
    for category, label in CATEGORIES.items():
        n = tallies[methods[0]].categories.get(category, [0, 0])[0]
        cells = "".join(
            f"{tallies[name].categories.get(category, [0, 0])[1] / (n or 1):>24.3f}"
            for name in names
        )
        print(f"{label:<14}{n:>5}{cells}")


def _emit(items: Sequence[Conversation]) -> None:
    """For ``--baseline``: one JSON line per question of MemoryIndex snippets (module docs)."""
    tally = _Tally()
    for conversation in items:
        with _indexed(conversation) as index:
            for question in conversation.questions:
                answer = tally.add(_ours(index, snippets=True), question)
                print(json.dumps(dataclasses.asdict(answer)))


def _baseline(revision: str, data: Path) -> tuple[str, _Tally]:
    """MemoryIndex snippets as ``revision`` has them, measured by this script beside it."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", f"{revision}^{{commit}}"],
        cwd=_ROOT, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="recall-baseline-") as tmp:
        tree = Path(tmp) / "tree"
        git = ["git", "-C", str(_ROOT), "worktree"]
        subprocess.run([*git, "add", "--detach", "--quiet", str(tree), commit], check=True)
        try:
            done = subprocess.run(
                [sys.executable, __file__, "--data", str(data), "--emit"],
                env={**os.environ, "PYTHONPATH": str(tree / "src")},
                capture_output=True, text=True, check=True,
            )  # fmt: skip
        finally:
            subprocess.run([*git, "remove", "--force", str(tree)], check=True)
    if f"harness from {tree / 'src'}" not in done.stderr:
        raise SystemExit(f"the baseline did not import {commit}'s harness: {done.stderr[-500:]}")
    tally = _Tally()
    for line in done.stdout.splitlines():
        tally.record(_Answer(**json.loads(line)))
    return f"snippets at {commit}", tally


# --- generated logs -----------------------------------------------------------------------------


def _bm25_ranker(data: Dataset) -> Ranker:
    from rank_bm25 import BM25Okapi  # type: ignore[import-untyped]

    lines = data.lines()
    bm25 = BM25Okapi([_WORD.findall(text.lower()) for _, _, text in lines])

    def rank(question: str) -> list[tuple[str, int]]:
        scores = bm25.get_scores(_WORD.findall(question.lower()))
        best = sorted(range(len(lines)), key=lambda i: -scores[i])[:10]
        return [(lines[i][0], lines[i][1]) for i in best]

    return rank


def _recall(rank: Ranker, questions: Sequence[Question], k: int) -> float:
    found = sum(1 for q in questions if set(rank(q.text)[:k]) & set(q.answers))
    return 100.0 * found / len(questions) if questions else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--show-misses", type=int, default=0, help="print N MemoryIndex misses")
    parser.add_argument("--data", type=Path, default=DATA_DIR, help="the LoCoMo dev folder")
    parser.add_argument("--baseline", metavar="REV", help="also measure REV's MemoryIndex")
    parser.add_argument("--emit", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    items = conversations(args.data)
    if args.emit:
        print(f"harness from {Path(harness.__file__).parent.parent}", file=sys.stderr)
        _emit(items)
        return
    baseline = _baseline(args.baseline, args.data) if args.baseline else None
    _conversation_table(items, baseline)
    print()
    _generated_table(args.show_misses)


def _generated_table(show_misses: int) -> None:
    data = build()
    with tempfile.TemporaryDirectory(prefix="memrecall-") as tmp:
        root = Path(tmp) / "workspace"
        data.write(root)
        with MemoryIndex(tmp) as index:
            index.index_all_from_workspace(root)
            cache: dict[str, list[tuple[str, int]]] = {}

            def ours(question: str) -> list[tuple[str, int]]:
                if question not in cache:
                    hits = index.search(question, 10, snippets=False)
                    cache[question] = [(h.path, h.line_number) for h in hits]
                return cache[question]

            theirs = _bm25_ranker(data)
            groups: dict[str, list[Question]] = {"all": data.questions}
            for q in data.questions:
                groups.setdefault(q.group, []).append(q)
            print(
                f"Generated logs: {len(data.lines()):,} lines in {len(data.files)} daily files; "
                f"{len(data.questions)} questions (MemoryIndex one line per hit)"
            )
            print(
                f"{'questions':<18}{'n':>5}  {'MemoryIndex @5':>15}{'@10':>7}  "
                f"{'rank_bm25 @5':>13}{'@10':>7}  {'diff @5':>8}{'@10':>7}"
            )
            for name, questions in groups.items():
                o5, o10 = _recall(ours, questions, 5), _recall(ours, questions, 10)
                t5, t10 = _recall(theirs, questions, 5), _recall(theirs, questions, 10)
                print(
                    f"{name:<18}{len(questions):>5}  {o5:>14.1f}%{o10:>6.1f}%  "
                    f"{t5:>12.1f}%{t10:>6.1f}%  {o5 - t5:>+7.1f}{o10 - t10:>+7.1f}"
                )
            misses = [q for q in data.questions if not set(ours(q.text)[:5]) & set(q.answers)]
            for q in misses[:show_misses]:
                answer = data.files[q.answers[0][0]].split("\n")[q.answers[0][1] - 1]
                top = index.search(q.text, 1, snippets=False)
                print(
                    f"\nMISS {q.text!r}\n  answer: {answer}\n  top:    "
                    f"{top[0].content if top else '-'}"
                )


if __name__ == "__main__":
    main()
