"""Memory recall: does search put the line that answers a question in the top 5 / top 10?

The labelled set (``_recall_data.py``, seeded): six months of daily memory files (about 5,600
lines) and 344 questions a user would ask about them, each labelled with its answer line(s).
Both systems search the same lines:

- MemoryIndex: ``search(question, 10)`` over the workspace. It indexes each daily file's date
  ("March 14 2026") and the section heading as a low-weight context column; that is a real
  advantage for the few questions that name a day ("What did I buy on March 14?"), reported
  separately below.
- rank_bm25: ``BM25Okapi`` over every line, lowercase ``\\w+`` tokens for lines and questions;
  the ten best scores.

Target: MemoryIndex recall@5 at least 10 points above rank_bm25.

    .venv/bin/python benchmarks/memory_recall.py [--show-misses N]
"""

from __future__ import annotations

import argparse
import re
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from _recall_data import Dataset, Question, build

from harness.memory.index import MemoryIndex

_WORD = re.compile(r"\w+")

Ranker = Callable[[str], list[tuple[str, int]]]


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
    args = parser.parse_args()
    data = build()
    with tempfile.TemporaryDirectory(prefix="memrecall-") as tmp:
        root = Path(tmp) / "workspace"
        data.write(root)
        with MemoryIndex(tmp) as index:
            index.index_all_from_workspace(root)
            cache: dict[str, list[tuple[str, int]]] = {}

            def ours(question: str) -> list[tuple[str, int]]:
                if question not in cache:
                    cache[question] = [(h.path, h.line_number) for h in index.search(question, 10)]
                return cache[question]

            theirs = _bm25_ranker(data)
            groups: dict[str, list[Question]] = {"all": data.questions}
            for q in data.questions:
                groups.setdefault(q.group, []).append(q)
            print(
                f"{len(data.lines()):,} lines in {len(data.files)} daily files; "
                f"{len(data.questions)} questions"
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
            for q in misses[: args.show_misses]:
                answer = data.files[q.answers[0][0]].split("\n")[q.answers[0][1] - 1]
                top = index.search(q.text, 1)
                print(
                    f"\nMISS {q.text!r}\n  answer: {answer}\n  top:    "
                    f"{top[0].content if top else '-'}"
                )


if __name__ == "__main__":
    main()
