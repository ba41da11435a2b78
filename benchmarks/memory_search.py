"""Memory search speed: MemoryIndex against simpler searches on the same files, in one run.

Two corpora, at each size (10k, 100k and 1M lines by default):

- generated: a workspace of realistic daily-log lines (see ``_memory_data.py``: ten
  namespaces, daily files of about 100 lines under ``## Memory Flush`` sections, MEMORY.md
  files, session transcripts, one line in twenty CJK); the query set is realistic questions,
  a third for a user, the rest shared, ten hits each.
- conversation: daily logs of conversation turns resampled from the LoCoMo dev conversations
  (see ``_conversation_corpus.py``: about 1,000 lines per file, 1,000 files at 1M lines, each
  copy of a turn made distinct); the queries are the 383 dev questions about the people of
  the workspace, five hits each (LoCoMo's k).

Reported per corpus and size:

- full index: ``index_all_from_workspace`` on an empty index, time and lines/s;
- incremental update: three lines appended to one daily file, then ``index_from_string`` of
  that file (what a memory flush does) and ``index_all_from_workspace`` (what maintenance does:
  a stat of every file, a re-index of the changed one);
- search: p50/p95 over the query set, after 20 warm-up queries;
- baselines over the same data: p50/p95, and MemoryIndex's over theirs (ours/theirs):

  * generated: ``rg -i -F`` for each query's rarest word (a process per query, as an agent's
    grep tool would run it; ``grep -rFi`` if rg is absent), and rank_bm25 (BM25Okapi over
    every line, lowercase ``\\w+`` tokens): build time and search p50/p95;
  * conversation: naive FTS5, a plain ``fts5(content)`` table (default tokenizer) of the same
    lines, built in the same run (time and lines/s beside the full index), and queried with
    ``SELECT rowid, content FROM lines WHERE lines MATCH '"w1" OR "w2" ...' ORDER BY
    bm25(lines) LIMIT 5``, the words being the lowercase ``\\w+`` words of the question;
    after the same warm-up.

rank_bm25 and the naive query stop after 120 s of timed queries (at least 20; the
conversation queries are shuffled, so a prefix is a fair sample) and say how many they ran.

Targets: search p95 <= 20 ms at 1M lines; one-file incremental update <= 50 ms at every size;
full index >= 50k lines/s.

    .venv/bin/python benchmarks/memory_search.py [--sizes 10k,100k,1M] [--queries 300]
        [--corpus generated,conversation] [--data LOCOMO_DEV_DIR]
"""

from __future__ import annotations

import argparse
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from _conversation_corpus import build_workspace as build_conversations
from _locomo import DATA_DIR, Conversation, conversations
from _memory_data import build_workspace, iter_lines, queries

from harness.memory.index import MemoryIndex

_T = TypeVar("_T")

_WORD = re.compile(r"\w+")
_BM25_BUDGET_S = 120.0
_NAIVE_BUDGET_S = 120.0
_WARMUP = 20
_GREP_QUERIES = 100
_GENERATED_K = 10
_CONVERSATION_K = 5
_CORPORA = ("generated", "conversation")


# --- measuring -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Pcts:
    """Latency percentiles in milliseconds."""

    p50: float
    p95: float


@dataclass(frozen=True, slots=True)
class Baseline:
    name: str
    search: Pcts
    note: str = ""


@dataclass(slots=True)
class Report:
    """What one corpus at one size measured."""

    corpus: str
    lines: int
    files: int
    queries: int
    generate_s: float
    index_s: float = 0.0
    rows: int = 0
    flush_ms: float = 0.0
    scan_ms: float = 0.0
    search: Pcts = Pcts(0.0, 0.0)
    baselines: list[Baseline] = field(default_factory=list)
    naive_index_s: float = 0.0  # a plain FTS5 table of the same lines, when measured


def _size(text: str) -> int:
    text = text.strip().lower()
    for suffix, factor in (("k", 1_000), ("m", 1_000_000)):
        if text.endswith(suffix):
            return int(float(text[:-1]) * factor)
    return int(text)


def _timed(fn: Callable[[], _T]) -> tuple[_T, float]:
    """``fn()`` and the seconds it took."""
    started = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - started


def _pcts(samples: Sequence[float]) -> Pcts:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return Pcts(statistics.median(ordered) * 1000, p95 * 1000)


def _latencies(
    run: Callable[[int, str], object],
    qs: Sequence[str],
    *,
    warmup: int = _WARMUP,
    budget_s: float | None = None,
) -> tuple[Pcts, int]:
    """Percentiles of ``run(i, query)`` over ``qs`` after ``warmup`` untimed calls.

    With ``budget_s``, stops once that much time has gone by (after at least 20 queries).
    Returns the percentiles and how many queries were timed.
    """
    for i, q in enumerate(qs[:warmup]):
        run(i, q)
    times: list[float] = []
    budget_started = time.perf_counter()
    for i, q in enumerate(qs):
        started = time.perf_counter()
        run(i, q)
        times.append(time.perf_counter() - started)
        if (
            budget_s is not None
            and time.perf_counter() - budget_started > budget_s
            and len(times) >= 20
        ):
            break
    return _pcts(times), len(times)


def _measure_index(
    report: Report,
    tmp: str,
    root: Path,
    daily: str,
    appended: Callable[[str], list[str]],
    search: Callable[[MemoryIndex, int, str], object],
    qs: Sequence[str],
) -> MemoryIndex:
    """Full index, flush and scan updates of ``daily``, search latency; the open index.

    ``appended(label)`` gives the lines appended to ``daily`` before each update.
    """
    index = MemoryIndex(tmp).open()
    stats, report.index_s = _timed(lambda: index.index_all_from_workspace(root))
    report.rows = stats.rows
    path = root / daily
    for label in ("flush", "scan"):
        with path.open("a", encoding="utf-8") as handle:
            handle.write("".join(f"{line}\n" for line in appended(label)))
        if label == "flush":
            _, seconds = _timed(lambda: index.index_from_string(daily, path.read_text("utf-8")))
            report.flush_ms = seconds * 1000
        else:
            _, seconds = _timed(lambda: index.index_all_from_workspace(root))
            report.scan_ms = seconds * 1000
    report.search, _ = _latencies(lambda i, q: search(index, i, q), qs)
    return index


# --- the generated corpus ------------------------------------------------------------------


def _grep_command() -> tuple[list[str], str]:
    beside = Path(sys.executable).parent / "rg"
    rg = str(beside) if beside.exists() else shutil.which("rg")
    if rg:
        return [rg, "-i", "-F", "-n", "--no-messages"], "rg"
    return ["grep", "-r", "-i", "-F", "-n"], "grep -rFi (rg not found)"


def _rarest_words(qs: Sequence[str], counts: Counter[str]) -> list[str]:
    rarest = []
    for q in qs:
        words = [w for w in _WORD.findall(q.lower()) if len(w) > 2]
        rarest.append(min(words or [q], key=lambda w: counts.get(w, 0)))
    return rarest


def run_generated(lines: int, qs: Sequence[str]) -> Report:
    with tempfile.TemporaryDirectory(prefix="memsearch-") as tmp:
        root = Path(tmp) / "workspace"
        written, generate_s = _timed(lambda: build_workspace(root, lines))
        files = sum(1 for path in root.rglob("*") if path.is_file())
        report = Report("generated", written, files, len(qs), generate_s)
        daily = sorted((root / "memory").glob("*.md"))[-1].relative_to(root).as_posix()
        index = _measure_index(
            report,
            tmp,
            root,
            daily,
            lambda label: [f"- Appended by the benchmark ({label}): Anna moved to Lisbon."] * 3,
            lambda index, i, q: index.search(
                q, _GENERATED_K, user_id="user03" if i % 3 == 0 else None
            ),
            qs,
        )
        index.close()

        corpus, tokenize_s = _timed(
            lambda: [_WORD.findall(text.lower()) for text in iter_lines(root)]
        )
        counts: Counter[str] = Counter(w for doc in corpus for w in set(doc))
        command, grep_tool = _grep_command()
        rare = _rarest_words(qs, counts)[:_GREP_QUERIES]
        grep, _ = _latencies(
            lambda i, word: subprocess.run(
                [*command, word, str(root)], capture_output=True, check=False
            ),
            rare,
            warmup=0,
        )
        report.baselines.append(Baseline(grep_tool, grep, "(rarest word)"))
        report.baselines.append(_bm25(corpus, qs, tokenize_s))
    return report


def _bm25(corpus: list[list[str]], qs: Sequence[str], tokenize_s: float) -> Baseline:
    from rank_bm25 import BM25Okapi  # type: ignore[import-untyped]

    bm25, build_s = _timed(lambda: BM25Okapi(corpus))

    def run(_: int, q: str) -> None:
        bm25.get_scores(_WORD.findall(q.lower())).argsort()[-_GENERATED_K:]

    search, timed = _latencies(run, qs, warmup=0, budget_s=_BM25_BUDGET_S)
    return Baseline("rank_bm25", search, f"build {build_s + tokenize_s:.1f} s   ({timed} queries)")


# --- the conversation corpus ---------------------------------------------------------------


def naive_expression(question: str) -> str:
    """The naive FTS5 query: every lowercase ``\\w+`` word of ``question``, quoted, OR'ed."""
    return " OR ".join(f'"{word}"' for word in _WORD.findall(question.lower()))


def _naive_index(root: Path, database: Path) -> sqlite3.Connection:
    """A plain FTS5 table of every non-blank line of the workspace (default tokenizer)."""
    conn = sqlite3.connect(database)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE VIRTUAL TABLE lines USING fts5(content)")
    with conn:
        for path in sorted(root.rglob("*.md")):
            text = path.read_text(encoding="utf-8")
            conn.executemany(
                "INSERT INTO lines (content) VALUES (?)",
                ((line.strip(),) for line in text.splitlines() if line.strip()),
            )
    return conn


def run_conversation(lines: int, dev: Sequence[Conversation]) -> Report:
    with tempfile.TemporaryDirectory(prefix="memsearch-") as tmp:
        root = Path(tmp) / "workspace"
        workspace, generate_s = _timed(lambda: build_conversations(root, lines, dev))
        qs = workspace.queries
        report = Report("conversation", workspace.lines, len(workspace.logs), len(qs), generate_s)
        log = workspace.logs[-1]
        index = _measure_index(
            report,
            tmp,
            root,
            log.path,
            lambda label: workspace.new_turns(log, 3, salt=label),
            lambda index, _, q: index.search(q, _CONVERSATION_K),
            qs,
        )
        index.close()
        naive, report.naive_index_s = _timed(lambda: _naive_index(root, Path(tmp) / "naive.db"))
        sql = (
            "SELECT rowid, content FROM lines WHERE lines MATCH ? "
            f"ORDER BY bm25(lines) LIMIT {_CONVERSATION_K}"
        )
        try:
            search, timed = _latencies(
                lambda _, q: naive.execute(sql, (naive_expression(q),)).fetchall(),
                qs,
                budget_s=_NAIVE_BUDGET_S,
            )
        finally:
            naive.close()
        note = f"(LIMIT {_CONVERSATION_K}, {timed} queries)"
        report.baselines.append(Baseline("naive FTS5 OR", search, note))
    return report


# --- the report ----------------------------------------------------------------------------


def _versus(ours: float, theirs: float) -> str:
    """``ours / theirs``, and how many times faster or slower that is."""
    ratio = ours / theirs
    speed = f"{1 / ratio:.1f}x faster" if ratio <= 1 else f"{ratio:.1f}x slower"
    return f"{ratio:6.3f} ({speed})"


def print_report(r: Report) -> None:
    print(
        f"\n== {r.corpus}: {r.lines:,} lines in {r.files:,} file{'' if r.files == 1 else 's'}, "
        f"{r.queries} queries "
        f"(generated in {r.generate_s:.1f} s)"
    )
    print(
        f"  full index        {r.index_s:7.2f} s   "
        f"{r.lines / r.index_s:>9,.0f} lines/s   (target >= 50,000)"
    )
    if r.naive_index_s:
        print(
            f"  naive FTS5 index  {r.naive_index_s:7.2f} s   "
            f"{r.lines / r.naive_index_s:>9,.0f} lines/s   "
            f"ours/naive {_versus(r.index_s, r.naive_index_s)}"
        )
    print(
        f"  incremental       flush {r.flush_ms:6.1f} ms   "
        f"scan {r.scan_ms:6.1f} ms   (target flush <= 50 ms)"
    )
    rows = [Baseline("MemoryIndex", r.search, "(target p95 <= 20 at 1M lines)"), *r.baselines]
    for row in rows:
        print(
            f"  {row.name:<17} search p50 {row.search.p50:7.2f} ms   "
            f"p95 {row.search.p95:7.2f} ms   {row.note}".rstrip()
        )
    for b in r.baselines:
        label = f"ours/{b.name.split()[0]}"
        print(
            f"  {label:<17} p50 {_versus(r.search.p50, b.search.p50)}   "
            f"p95 {_versus(r.search.p95, b.search.p95)}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10k,100k,1M", help="comma-separated line counts")
    parser.add_argument("--queries", type=int, default=300, help="queries for the generated corpus")
    parser.add_argument(
        "--corpus", default=",".join(_CORPORA), help="comma-separated: generated, conversation"
    )
    parser.add_argument(
        "--data", type=Path, default=DATA_DIR, help="the LoCoMo dev folder (conversation corpus)"
    )
    args = parser.parse_args()
    corpora = [c.strip() for c in args.corpus.split(",") if c.strip()]
    unknown = sorted(set(corpora) - set(_CORPORA))
    if unknown or not corpora:
        parser.error(f"--corpus takes {', '.join(_CORPORA)}; not {', '.join(unknown) or 'none'}")
    qs = queries(args.queries) if "generated" in corpora else []
    dev = conversations(args.data) if "conversation" in corpora else []
    print(f"SQLite {sqlite3.sqlite_version}; corpora: {', '.join(corpora)}")
    for size in (_size(s) for s in args.sizes.split(",")):
        if "generated" in corpora:
            print_report(run_generated(size, qs))
        if "conversation" in corpora:
            print_report(run_conversation(size, dev))


if __name__ == "__main__":
    main()
