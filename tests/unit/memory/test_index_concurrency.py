from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from harness.memory.index import MemoryIndex


def _version(word: str, n: int = 20) -> str:
    return "\n".join(f"- {word} fact number {i}" for i in range(n)) + "\n"


def test_a_second_process_searches_while_the_first_writes(tmp_path: Path) -> None:
    with MemoryIndex(tmp_path) as index:
        index.index_from_string("MEMORY.md", _version("alpha"))
        reader = textwrap.dedent(
            f"""
            import sys, time
            from harness.memory.index import MemoryIndex
            index = MemoryIndex({str(tmp_path)!r}).open()
            searches, deadline = 0, time.monotonic() + 0.8
            while time.monotonic() < deadline:
                hits = index.search("alpha beta", limit=50, snippets=False)
                words = {{h.content.split()[1] for h in hits}}
                if len(hits) != 20 or len(words) != 1:
                    sys.exit(f"torn read: {{len(hits)}} hits, words {{words}}")
                searches += 1
            print(searches)
            """
        )
        child = subprocess.Popen(
            [sys.executable, "-c", reader],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        writes = 0
        while child.poll() is None:
            index.index_from_string("MEMORY.md", _version("beta" if writes % 2 else "alpha"))
            writes += 1
        out, err = child.communicate()
    assert child.returncode == 0, err
    assert int(out) > 10
    assert writes > 10


def test_two_instances_on_one_database_see_each_others_writes(tmp_path: Path) -> None:
    with MemoryIndex(tmp_path) as first, MemoryIndex(tmp_path) as second:
        first.index_from_string("memory/2026-01-01.md", "- written by the first\n")
        second.index_from_string("memory/2026-01-02.md", "- written by the second\n")
        assert {h.path for h in first.search("written", limit=5, snippets=False)} == {
            "memory/2026-01-01.md",
            "memory/2026-01-02.md",
        }
        assert len(second.search("first", snippets=False)) == 1


def test_two_instances_writing_at_once_lose_nothing(tmp_path: Path) -> None:
    errors: list[BaseException] = []

    def writer(name: str) -> None:
        try:
            with MemoryIndex(tmp_path) as index:
                for i in range(30):
                    index.index_from_string(f"memory/{name}-{i}.md", f"- {name} wrote {i}\n")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in ("left", "right")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with MemoryIndex(tmp_path) as index:
        assert len(index.search("wrote", limit=100, snippets=False)) == 60


def test_one_instance_is_safe_to_share_between_threads(tmp_path: Path) -> None:
    errors: list[BaseException] = []
    with MemoryIndex(tmp_path) as index:
        index.index_from_string("MEMORY.md", _version("alpha"))
        stop = time.monotonic() + 0.5

        def search() -> None:
            try:
                while time.monotonic() < stop:
                    assert len(index.search("alpha beta", limit=50, snippets=False)) == 20
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        readers = [threading.Thread(target=search) for _ in range(3)]
        for thread in readers:
            thread.start()
        flip = 0
        while time.monotonic() < stop:
            index.index_from_string("MEMORY.md", _version("beta" if flip % 2 else "alpha"))
            flip += 1
        for thread in readers:
            thread.join()
    assert errors == []
