"""Every script in examples/ runs, offline, and prints what it is there to show.

The examples are discovered by globbing, so a new one is run here as soon as it exists; it
must also get its key lines in ``KEY_LINES`` (a test says so), because an example that exits
0 but no longer shows its point is broken too. Each runs as a subprocess in a temporary
directory given as argv[1], with no model configured in the environment (the test conftest
removes HARNESS_MODEL and the API keys), so the scripted model answers.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples"
EXAMPLES = sorted(EXAMPLES_DIR.glob("*.py"))

KEY_LINES: dict[str, tuple[str, ...]] = {
    "01_first_agent.py": (
        "agent: 'to be or not to be' has 6 words.",
        "tool call: word_count({'text': 'to be or not to be'})",
        "restored 4 messages of session 'first'",
        "agent: You asked how many words 'to be or not to be' has.",
    ),
    "02_memory.py": (
        "- Ada's dentist appointment is on 14 May at 9:30.",
        "memory_search returned:",
        "[friday] agent: Your dentist appointment is on 14 May at 9:30.",
    ),
    "03_long_session.py": (
        "  the session keeps: Tool output was too large (12,016 chars, 400 lines)",
        "evicted result: large_tool_results/harness/read_server_log-",
        "compacted: 7 -> 3 messages",
        "## SESSION INTENT",
    ),
    "04_subagents.py": (
        "agent: The log analyst is on it.",
        "(log-analyst): completed",
        "  result: 1 error: 12:02:03 upstream timeout after 30000 ms.",
        "<system-reminder>",
        "agent: The analyst found one error: an upstream timeout.",
    ),
    "05_multi_user.py": (
        "[bob] agent: You have no notes yet.",
        "[ada] agent: Your note says: Launch on Friday.",
        "  users/ada/notes.md",
        "  users/bob/agents/harness/context/default/messages.jsonl",
    ),
    "06_backends.py": (
        "sandbox: ",
        "remote [worker-2] restored 4 messages from the store",
        "remote [worker-2] agent: todo.md, with one item: ship it.",
        "e.g. users/ada/todo.md: True",
    ),
}
"""What each example must print (substrings of its standard output)."""

TIMEOUT_SECONDS = 120


def _run(example: Path, workdir: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HARNESS_", "OPENAI_"))}
    env.pop("ANTHROPIC_API_KEY", None)
    return subprocess.run(
        [sys.executable, str(example), str(workdir / "out")],
        cwd=workdir,  # an example must not depend on, or write to, the current directory
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_SECONDS,
        check=False,
    )


def test_examples_are_found() -> None:
    assert len(EXAMPLES) >= 6, f"expected the examples in {EXAMPLES_DIR}, found {EXAMPLES}"


def test_every_example_has_key_lines() -> None:
    missing = [path.name for path in EXAMPLES if path.name not in KEY_LINES]
    assert not missing, f"add the lines these examples must print to KEY_LINES: {missing}"
    stale = sorted(set(KEY_LINES) - {path.name for path in EXAMPLES})
    assert not stale, f"KEY_LINES names examples that no longer exist: {stale}"


@pytest.mark.parametrize("example", EXAMPLES, ids=[path.name for path in EXAMPLES])
def test_example_runs(example: Path, tmp_path: Path) -> None:
    done = _run(example, tmp_path)
    assert done.returncode == 0, f"{example.name} failed:\n{done.stdout}\n{done.stderr}"
    for line in KEY_LINES.get(example.name, ()):
        assert line in done.stdout, f"{example.name} did not print {line!r}:\n{done.stdout}"
    assert (tmp_path / "out").is_dir(), f"{example.name} wrote nothing under argv[1]"
    left = sorted(p.name for p in tmp_path.iterdir() if p.name != "out")
    assert not left, f"{example.name} wrote outside argv[1]: {left}"


def test_multi_user_example_keeps_users_apart(tmp_path: Path) -> None:
    done = _run(EXAMPLES_DIR / "05_multi_user.py", tmp_path)
    assert done.returncode == 0, done.stderr
    assert "users/bob/notes.md" not in done.stdout
    assert (tmp_path / "out/workspace/users/ada/notes.md").read_text() == "Launch on Friday."
    assert not (tmp_path / "out/workspace/users/bob/notes.md").exists()
