"""Loss 4: SIGTERM lost the turn in flight; SIGKILL lost it too and left a temporary file.

`harness run` runs one long turn (15 steps of 50 ``memory_save`` calls each into MEMORY.md)
and is stopped at a random moment by SIGTERM, SIGHUP or SIGKILL, 24 times (the moments drawn
within the time one whole turn takes on this machine, measured first). After each stop:

- SIGTERM and SIGHUP exit with 128 + the signal, like SIGINT does;
- the saved session holds the user's message once and every step completed before the stop:
  the model log shows which steps were complete (a request is only made after the session
  was saved with every step before it);
- MEMORY.md holds every fact the saved steps report, and at most one step's more;
- nothing is set aside in ``quarantine.jsonl`` but, after a SIGKILL, the last line of an
  append the kill cut short;
- after the next start no temporary file is left in the workspace.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from harness import RuntimeContext
from harness.session import SessionStore
from harness.workspace import WorkspaceManager

HARNESS = Path(sys.executable).parent / "harness"
CALLS_PER_STEP = 50
STEPS = 15  # the agent's default max_iters: the model asks for tools at every step
KILLS = 24
SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGKILL)
NO_COMPACTION = ("--context-window", "10000000")


@dataclass(frozen=True)
class Stopped:
    signum: int
    returncode: int
    stderr: str
    requests: int
    workspace: Path


def script(path: Path) -> Path:
    save = {"name": "memory_save", "input": {"fact": "step fact", "target": "MEMORY.md#Facts"}}
    turns = [
        {"match": "Extract NEW memories", "text": "NO_REPLY", "repeat": True},
        {"match": "^after$", "text": "fine", "repeat": True},
        # After a step the request ends with its results, or with the note saying MEMORY.md
        # changed (the workspace context hook's): either way the turn goes on.
        {
            "match": "^go$|Saved to|^<workspace_update>",
            "tool_calls": [save] * CALLS_PER_STEP,
            "repeat": True,
        },
        {"text": "ok", "repeat": True},
    ]
    path.write_text(json.dumps({"log": "requests.jsonl", "turns": turns}), encoding="utf-8")
    return path


def env(home: Path) -> dict[str, str]:
    removed = ("HARNESS_WORKSPACE", "HARNESS_MODEL", "HARNESS_STORE")
    return {**{k: v for k, v in os.environ.items() if k not in removed}, "HOME": str(home)}


def stop_a_long_turn(root: Path, signum: int, delay: float) -> Stopped:
    root.mkdir(parents=True)
    workspace = root / "ws"
    model = f"scripted:{script(root / 'script.json')}"
    log = root / "requests.jsonl"
    process = subprocess.Popen(
        [str(HARNESS), "run", "-w", str(workspace), "--model", model, *NO_COMPACTION, "go"],
        env=env(root),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not (log.exists() and log.stat().st_size) and time.monotonic() < deadline:
        time.sleep(0.02)  # the turn has started: its first request is logged
    time.sleep(delay)
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=60)
    requests = len(log.read_text(encoding="utf-8").splitlines())
    return Stopped(signum, process.returncode, stderr, requests, workspace)


def time_a_whole_turn(root: Path) -> float:
    """Seconds from the turn's first request to the end of the process, unstopped.

    The stops are drawn within this, so they land during the turn on a fast machine as on a
    slow one.
    """
    root.mkdir(parents=True)
    model = f"scripted:{script(root / 'script.json')}"
    log = root / "requests.jsonl"
    process = subprocess.Popen(
        [str(HARNESS), "run", "-w", str(root / "ws"), "--model", model, *NO_COMPACTION, "go"],
        env=env(root),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not (log.exists() and log.stat().st_size) and time.monotonic() < deadline:
        time.sleep(0.02)
    started = time.monotonic()
    assert process.wait(timeout=120) == 0
    seconds = time.monotonic() - started
    # Every step of the turn ran: a script that stopped matching would end the turn after one
    # step, and the stops would then test little (a workspace note once did that unseen).
    facts = (root / "ws" / "MEMORY.md").read_text(encoding="utf-8").count("- step fact")
    assert facts == STEPS * CALLS_PER_STEP, f"the whole turn saved {facts} facts"
    return seconds


def start_again(stopped: Stopped) -> subprocess.CompletedProcess[str]:
    model = f"scripted:{stopped.workspace.parent / 'script.json'}"
    return subprocess.run(
        [str(HARNESS), "run", "-w", str(stopped.workspace), "--model", model, *NO_COMPACTION,
         "after"],
        env=env(stopped.workspace.parent),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )  # fmt: skip


async def check(stopped: Stopped) -> tuple[int, int]:
    """The invariants after one stop; returns (steps saved, facts in MEMORY.md)."""
    name = signal.Signals(stopped.signum).name
    if stopped.returncode == 0:  # the turn ended before the signal came
        return -1, -1
    if stopped.signum == signal.SIGKILL:
        assert stopped.returncode == -signal.SIGKILL
    else:
        assert stopped.returncode == 128 + stopped.signum, stopped.stderr
        assert f"stopped by {name}" in stopped.stderr
    session = stopped.workspace / "agents/harness/context/default"
    raw = (session / "messages.jsonl").read_bytes()
    manager = WorkspaceManager(stopped.workspace)
    messages = await SessionStore(manager, "harness").load(RuntimeContext(session_id="default"))
    assert [m.text for m in messages if m.role == "user"] == ["go"], name
    results = sum(len(m.tool_results) for m in messages)
    assert results % CALLS_PER_STEP == 0, name  # whole steps only
    steps = results // CALLS_PER_STEP
    # Request k is made after the save of steps 0..k-1; the last logged one may be the flush's.
    agent_requests = stopped.requests
    assert steps >= agent_requests - 2, f"{name}: {agent_requests} requests, {steps} steps saved"
    memory = (stopped.workspace / "MEMORY.md").read_text(encoding="utf-8")
    facts = memory.count("- step fact")
    assert results <= facts <= results + CALLS_PER_STEP, f"{name}: {facts} facts, {results}"
    quarantine = session / "quarantine.jsonl"
    if quarantine.exists():
        # Linux ends a write between two pages when the writer is killed, so SIGKILL can cut
        # a step's append short; only that unfinished last line may be set aside, never
        # another (the step it belonged to was not saved, and is not counted above).
        assert stopped.signum == signal.SIGKILL, f"{name}: {quarantine.read_text()}"
        assert not raw.endswith(b"\n"), name
        kept = [json.loads(line) for line in quarantine.read_text().splitlines()]
        assert [record["line"] for record in kept] == [len(raw.splitlines())], name
    return steps, facts


async def test_stopped_at_random_moments_a_long_turn_loses_no_completed_step(
    tmp_path: Path,
) -> None:
    rng = random.Random(20261201)
    turn = time_a_whole_turn(tmp_path / "whole")
    plan = [(SIGNALS[i % 3], rng.uniform(0.0, 0.8 * turn)) for i in range(KILLS)]
    with ThreadPoolExecutor(max_workers=3) as pool:
        stops = list(
            pool.map(
                lambda item: stop_a_long_turn(tmp_path / f"run{item[0]}", *item[1]),
                enumerate(plan),
            )
        )
        checked = [await check(stopped) for stopped in stops]
        landed = sum(steps >= 0 for steps, _ in checked)
        again = list(pool.map(start_again, stops))

    for stopped, restarted in zip(stops, again, strict=True):
        assert restarted.returncode == 0, restarted.stderr
        assert restarted.stdout.strip() == "fine"
        strays = list(stopped.workspace.rglob("*.tmp"))
        assert strays == [], f"{signal.Signals(stopped.signum).name}: {strays}"
        manager = WorkspaceManager(stopped.workspace)
        after = await SessionStore(manager, "harness").load(RuntimeContext(session_id="default"))
        assert [m.text for m in after if m.role == "user"] == ["go", "after"]
    by_signal = {
        signal.Signals(signum).name: sum(s.signum == signum and s.returncode != 0 for s in stops)
        for signum in SIGNALS
    }
    print(
        f"a whole turn took {turn:.1f} s; {landed} of {KILLS} stops came during the turn "
        f"({by_signal}); steps saved per stop: "
        f"{[steps for steps, _ in checked]}; every completed step kept, no stray file"
    )
    assert landed >= 20, f"only {landed} of {KILLS} signals came during the turn"


def test_the_next_start_removes_the_temporary_files_of_killed_writers_only(tmp_path: Path) -> None:
    from harness.filesystem._beneath import directory_beneath, locked

    workspace = tmp_path / "ws"
    (workspace / "memory").mkdir(parents=True)
    stray = workspace / "memory" / ".MEMORY.md.0a1b2c3d.tmp"  # its writer was killed
    stray.write_text("half")
    live = workspace / ".MEMORY.md.9f8e7d6c.tmp"  # its writer is still writing
    live.write_text("half")
    other = workspace / "notes.tmp"  # not a temporary file of ours
    other.write_text("mine")

    with directory_beneath(workspace, workspace) as held, locked(held, "MEMORY.md"):
        WorkspaceManager(workspace).check()

    assert not stray.exists()
    assert live.exists()
    assert other.exists()


def test_a_stopping_signal_after_the_call_ended_still_exits_with_128_plus_it() -> None:
    """The call has saved everything by then; the process must not die by the signal's default
    action (the random-moment test above once landed a SIGHUP in that window)."""
    code = (
        "import os, signal, time\n"
        "from harness.cli._common import run_async\n"
        "async def done():\n"
        "    return 1\n"
        "run_async(done())\n"
        "os.kill(os.getpid(), signal.SIGHUP)\n"
        "time.sleep(10)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 128 + signal.SIGHUP, result
    assert "stopped by SIGHUP" in result.stderr
