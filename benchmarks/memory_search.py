"""Memory search speed: MemoryIndex against ripgrep and rank_bm25 on the same files, in one run.

For each size (10k, 100k and 1M lines by default) a workspace of realistic daily-log lines is
generated (see ``_memory_data.py``: ten namespaces, daily files of about 100 lines under
``## Memory Flush`` sections, MEMORY.md files, session transcripts, one line in twenty CJK).
Reported per size:

- full index: ``index_all_from_workspace`` on an empty index, time and lines/s;
- incremental update: three lines appended to one daily file, then ``index_from_string`` of
  that file (what a memory flush does) and ``index_all_from_workspace`` (what maintenance does:
  a stat of every file, a re-index of the changed one);
- search: p50/p95 over the query set (realistic questions, a third for a user, the rest
  shared), after 20 warm-up queries;
- baselines over the same files: ``rg -i -F`` for each query's rarest word (a process per
  query, as an agent's grep tool would run it; ``grep -rFi`` if rg is absent), and rank_bm25
  (BM25Okapi over every line, lowercase ``\\w+`` tokens): build time and search p50/p95.

Targets: search p95 <= 20 ms at 1M lines; one-file incremental update <= 50 ms at every size;
full index >= 50k lines/s.

    .venv/bin/python benchmarks/memory_search.py [--sizes 10k,100k,1M] [--queries 300]
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from _memory_data import build_workspace, iter_lines, queries

from harness.memory.index import MemoryIndex

_WORD = re.compile(r"\w+")
_BM25_BUDGET_S = 120.0


def _size(text: str) -> int:
    text = text.strip().lower()
    for suffix, factor in (("k", 1_000), ("m", 1_000_000)):
        if text.endswith(suffix):
            return int(float(text[:-1]) * factor)
    return int(text)


def _pcts(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered) * 1000, p95 * 1000


def _grep_command() -> tuple[list[str], str]:
    beside = Path(sys.executable).parent / "rg"
    rg = str(beside) if beside.exists() else shutil.which("rg")
    if rg:
        return [rg, "-i", "-F", "-n", "--no-messages"], "rg"
    return ["grep", "-r", "-i", "-F", "-n"], "grep -rFi (rg not found)"


def _rarest_words(qs: list[str], counts: Counter[str]) -> list[str]:
    rarest = []
    for q in qs:
        words = [w for w in _WORD.findall(q.lower()) if len(w) > 2]
        rarest.append(min(words or [q], key=lambda w: counts.get(w, 0)))
    return rarest


def run_size(lines: int, qs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"size": lines}
    with tempfile.TemporaryDirectory(prefix="memsearch-") as tmp:
        root = Path(tmp) / "workspace"
        started = time.perf_counter()
        out["lines"] = build_workspace(root, lines)
        out["generate_s"] = time.perf_counter() - started

        index = MemoryIndex(tmp).open()
        started = time.perf_counter()
        stats = index.index_all_from_workspace(root)
        out["index_s"] = time.perf_counter() - started
        out["rows"] = stats.rows

        daily = sorted((root / "memory").glob("*.md"))[-1]
        rel = daily.relative_to(root).as_posix()
        for label, full in (("flush", False), ("scan", True)):
            with daily.open("a") as handle:
                handle.write(f"- Appended by the benchmark ({label}): Anna moved to Lisbon.\n" * 3)
            started = time.perf_counter()
            if full:
                index.index_all_from_workspace(root)
            else:
                index.index_from_string(rel, daily.read_text())
            out[f"update_{label}_ms"] = (time.perf_counter() - started) * 1000

        for q in qs[:20]:
            index.search(q)
        times = []
        for i, q in enumerate(qs):
            started = time.perf_counter()
            index.search(q, 10, user_id="user03" if i % 3 == 0 else None)
            times.append(time.perf_counter() - started)
        out["search"] = _pcts(times)
        index.close()

        corpus_started = time.perf_counter()
        corpus = [_WORD.findall(text.lower()) for text in iter_lines(root)]
        tokenize_s = time.perf_counter() - corpus_started
        counts: Counter[str] = Counter(w for doc in corpus for w in set(doc))
        command, out["grep_tool"] = _grep_command()
        rare = _rarest_words(qs, counts)
        grep_times = []
        for word in rare[:100]:
            started = time.perf_counter()
            subprocess.run([*command, word, str(root)], capture_output=True, check=False)
            grep_times.append(time.perf_counter() - started)
        out["grep"] = _pcts(grep_times)

        out["bm25"] = _bm25(corpus, qs, tokenize_s)
    return out


def _bm25(corpus: list[list[str]], qs: list[str], tokenize_s: float) -> dict[str, Any]:
    from rank_bm25 import BM25Okapi  # type: ignore[import-untyped]

    started = time.perf_counter()
    bm25 = BM25Okapi(corpus)
    build_s = time.perf_counter() - started + tokenize_s
    times: list[float] = []
    budget_started = time.perf_counter()
    for q in qs:
        started = time.perf_counter()
        scores = bm25.get_scores(_WORD.findall(q.lower()))
        scores.argsort()[-10:]
        times.append(time.perf_counter() - started)
        if time.perf_counter() - budget_started > _BM25_BUDGET_S and len(times) >= 20:
            break
    return {"build_s": build_s, "search": _pcts(times), "queries": len(times)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10k,100k,1M", help="comma-separated line counts")
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()
    qs = queries(args.queries)
    print(f"{len(qs)} queries; SQLite {__import__('sqlite3').sqlite_version}")
    for size in (_size(s) for s in args.sizes.split(",")):
        r = run_size(size, qs)
        s50, s95 = r["search"]
        g50, g95 = r["grep"]
        b = r["bm25"]
        b50, b95 = b["search"]
        print(f"\n== {r['lines']:,} lines (generated in {r['generate_s']:.1f} s)")
        print(
            f"  full index        {r['index_s']:7.2f} s   "
            f"{r['lines'] / r['index_s']:>9,.0f} lines/s   (target >= 50,000)"
        )
        print(
            f"  incremental       flush {r['update_flush_ms']:6.1f} ms   "
            f"scan {r['update_scan_ms']:6.1f} ms   (target <= 50 ms)"
        )
        print(
            f"  MemoryIndex       search p50 {s50:7.2f} ms   p95 {s95:7.2f} ms   (target p95 <= 20)"
        )
        print(
            f"  {r['grep_tool']:<17} search p50 {g50:7.2f} ms   p95 {g95:7.2f} ms   (rarest word)"
        )
        print(
            f"  rank_bm25         search p50 {b50:7.2f} ms   p95 {b95:7.2f} ms   "
            f"build {b['build_s']:.1f} s   ({b['queries']} queries)"
        )
        print(
            f"  ratios            p95 vs {r['grep_tool'].split()[0]} {g95 / s95:5.1f}x faster, "
            f"vs rank_bm25 {b95 / s95:5.1f}x faster"
        )


if __name__ == "__main__":
    main()
