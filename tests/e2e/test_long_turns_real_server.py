"""Long turns against a real model with a small window, through ``harness run`` and ``chat``.

llama.cpp's server with SmolLM2 and a 2,048-token window (tests/_long_turns.py says why the
turns overflow it). ``harness run`` calls the agent, ``harness chat`` streams it: issue 28 found
that the streamed path had no overflow recovery, so a chat of long turns ended in
``ContextOverflowError``. What the model says is anybody's guess: these tests check that every
turn was answered and kept, and that the recovery is what kept them. tests/serve has the same
for ``harness serve``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _cli_runner import Cli, make_cli

from _long_turns import (
    TURNS,
    assert_kept_through_a_forced_compaction,
    model_args,
    question,
    server_env,
)
from conftest import LlamaServer


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return make_cli(tmp_path)


def test_run_calls_long_turns_through_the_overflow(cli: Cli, llama_server: LlamaServer) -> None:
    for turn in range(TURNS):
        result = cli.run(
            "run",
            "-w",
            "ws",
            "-s",
            "long",
            *model_args(llama_server),
            question(turn),
            env=server_env(llama_server),
            timeout=300,
        )
        assert result.returncode == 0, (turn, result)
    assert_kept_through_a_forced_compaction(cli.cwd / "ws", "long")


def test_chat_streams_long_turns_through_the_overflow(cli: Cli, llama_server: LlamaServer) -> None:
    stdin = "".join(question(turn) + "\n" for turn in range(TURNS))
    result = cli.run(
        "chat",
        "-w",
        "ws",
        "-s",
        "long",
        *model_args(llama_server),
        stdin=stdin,
        env=server_env(llama_server),
        timeout=600,
    )
    assert result.returncode == 0, result
    assert "error:" not in result.stderr, result.stderr
    assert_kept_through_a_forced_compaction(cli.cwd / "ws", "long")
