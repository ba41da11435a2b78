"""A window that cannot hold the fixed part of a request: one line at the first call (issue 41).

The system prompt (with the workspace's files) and the tool schemas go with every step and no
compaction shrinks them. With ``--context-window`` smaller than they are, every call would
overflow and every recovery fail; the first call says so instead, before the model is asked,
in one line that names the sizes and what to change.
"""

from __future__ import annotations

from pathlib import Path

from _cli_runner import make_cli, write_script


def test_a_window_too_small_for_the_system_prompt_is_one_line_before_any_model_call(
    tmp_path: Path,
) -> None:
    cli = make_cli(tmp_path)
    script = write_script(tmp_path / "script.json", [{"text": "unused"}], log="requests.jsonl")

    result = cli.run(
        "run", "-w", "ws", "--model", f"scripted:{script}", "--context-window", "256", "hello"
    )

    assert result.returncode == 2, result  # a configuration problem
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    line = lines[0]
    assert line.startswith("error: the model's context window (256 tokens) cannot hold"), line
    assert "the system prompt takes at least" in line
    assert "tool schemas" in line
    assert "--context-window" in line
    assert "fewer tools" in line
    assert not (tmp_path / "requests.jsonl").exists()  # the model was never asked
    assert result.stdout == ""
