"""A warning logged while `harness chat` waits at its prompt goes on a line of its own.

Background work logs while the prompt waits for the next line (the memory flush of the turn
just answered, say). Written as it came, the warning continued the prompt's line, ``you>
WARNING ...``, and what the user typed next went after it. The chat here reads a pipe that the
test writes (Typer's runner takes only text as input: the chat's stdin is swapped for the
pipe as it starts), so a warning can be logged exactly while the prompt waits.
"""

from __future__ import annotations

import io
import json
import logging
import os
import sys
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

import harness.cli.main as cli_main
from harness.cli.main import app

WAIT_S = 30.0


def test_a_warning_while_the_prompt_waits_gets_its_own_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No turn for the memory flush: the flush after the turn fails in the background and
    # warns, as it does for a newcomer's first script.
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [{"match": "hello", "text": "Hi there."}]}))
    prompts = threading.Semaphore(0)
    drawn: list[None] = []
    read_line = cli_main._Lines.next

    async def next_line(self: cli_main._Lines) -> str:
        drawn.append(None)
        prompts.release()  # the prompt is drawn: the chat waits for a line now
        return await read_line(self)

    flushed = threading.Event()
    drawn_at_flush: list[int] = []

    def seen(record: logging.LogRecord) -> bool:
        drawn_at_flush.append(len(drawn))
        flushed.set()
        return True

    monkeypatch.setattr(cli_main._Lines, "next", next_line)
    reading, writing = os.pipe()
    typed = os.fdopen(writing, "wb", buffering=0)
    stdin = io.TextIOWrapper(os.fdopen(reading, "rb"), encoding="utf-8")
    read_as_bytes = cli_main._read_stdin_as_bytes

    def from_the_pipe() -> None:
        sys.stdin = stdin  # the runner puts its own back when the command ends
        read_as_bytes()

    monkeypatch.setattr(cli_main, "_read_stdin_as_bytes", from_the_pipe)

    def user() -> None:
        with typed:
            typed.write(b"hello\n")
            for _ in range(2):  # the first prompt, then the one after the reply
                if not prompts.acquire(timeout=WAIT_S):
                    return
            flushed.wait(WAIT_S)  # in the background, after the reply
            # Logged from another thread, as work in a worker thread does, while it waits.
            logging.getLogger("harness.memory.maintenance").warning("the index is busy")
            typed.write(b"/exit\n")

    flush_log = logging.getLogger("harness.hooks.memory_flush")
    flush_log.addFilter(seen)
    worker = threading.Thread(target=user)
    worker.start()
    try:
        with stdin:
            result = CliRunner().invoke(
                app, ["chat", "-w", str(tmp_path / "ws"), "--model", f"scripted:{script}"]
            )
            worker.join(WAIT_S)
    finally:
        flush_log.removeFilter(seen)

    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "Hi there."
    stderr = result.stderr
    # (The input is a pipe, not a terminal: nothing echoes the line typed after a prompt.)
    assert "you> \nWARNING harness.memory.maintenance: the index is busy\nyou> " in stderr
    flush_warning = "WARNING harness.hooks.memory_flush: memory flush for session 'default' failed"
    assert flush_warning in stderr
    if drawn_at_flush == [2]:  # as it nearly always is: the prompt waited for the next line
        assert f"you> \n{flush_warning}" in stderr
