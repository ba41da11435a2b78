"""Approvals across real processes and SIGKILL: a gated tool runs at most once, only approved.

Each step is a process of its own running a HarnessAgent on one workspace (``WORKER``): one
pauses on a gated ``deploy``, others approve and resume it, some are killed with SIGKILL at the
worst moments. ``deploy`` appends a line to a witness file outside the workspace before it
answers, so the witness counts its runs whatever the agent recorded:

- paused in one process, approved and resumed in another: it ran once; resuming again, once;
- two processes approving and resuming at once: once;
- killed while the tool ran: the next resume does not run it again, and says the outcome is
  unknown;
- killed after the tool finished but before the session saved its result: not run again, and
  the result the ledger kept is the one the model reads;
- a background task's child waits after its process ended, is approved from another process
  and runs once there; killed while the continued task runs the tool, never run again.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

WORKER = r"""
import asyncio, json, sys, time
from pathlib import Path
from harness import HarnessAgent, RuntimeContext
from harness.approvals import ApprovalRule
from harness.kernel import Hook, Paused, PostActing
from harness.models import ScriptedChatModel

root, mode = Path(sys.argv[1]), sys.argv[2]
witness = root / "witness.txt"

async def deploy(target: str) -> str:
    '''Deploy.

    Args:
        target: Where.
    '''
    with witness.open("a") as file:
        file.write(f"deploy:{target}\n")
    if mode in ("resume-slow", "decide-task-slow"):
        (root / "running.flag").write_text("yes")
        time.sleep(60)  # killed in here
    if mode == "resume-jitter":
        time.sleep(0.05)
    return f"deployed {target}"

class HangAfterTheResult(Hook):
    priority = 2000  # after the approval hook recorded the end of the run
    events = (PostActing,)
    async def on_event(self, event):
        (root / "finished.flag").write_text("yes")
        await asyncio.sleep(60)  # killed in here, before the session saves the result

async def main():
    agent = HarnessAgent(
        model=ScriptedChatModel([
            {"match": "ship", "tool_calls": [{"name": "deploy", "input": {"target": "prod"}}]},
            {"match": "^delegate", "tool_calls": [{"name": "agent_spawn", "input": {
                "agent_id": "general-purpose", "task": "ship it"}}]},
            {"match": "^background", "tool_calls": [{"name": "agent_spawn", "input": {
                "agent_id": "general-purpose", "task": "ship it", "timeout_seconds": 0}}]},
            {"text": "done", "repeat": True},
        ]),
        workspace=root / "ws",
        tools=[deploy],
        approvals={"deploy": ApprovalRule()},
        hooks=[HangAfterTheResult()] if mode == "resume-hang" else [],
        memory=None,
        trace=False,
    )
    ctx = RuntimeContext(session_id="s", user_id="ann")
    try:
        if mode in ("pause", "pause-child"):
            paused = await agent.call("ship it" if mode == "pause" else "delegate it", ctx=ctx)
            print(json.dumps(list(paused.pending)))
        elif mode == "pause-task":
            await agent.call("background it", ctx=ctx)
            [task] = await agent.tasks.records("ann")
            task = await agent.tasks.wait(task, 60)
            pending = [p.as_dict() for p in await agent.pending_approvals(ctx)]
            print(json.dumps({"task": task.task_id, "status": task.status, "pending": pending}))
        elif mode.startswith("decide-task"):
            await agent.decide({sys.argv[3]: "approve"}, ctx=ctx)
            task = await agent.tasks.get(sys.argv[4], "ann")
            task = await agent.tasks.wait(task, 0 if mode == "decide-task-peek" else 60)
            print(json.dumps([task.status, await agent.tasks.result(task)]))
        elif mode == "pending":
            print(json.dumps([p.id for p in await agent.pending_approvals(ctx)]))
        elif mode == "results":
            messages = await agent.sessions.load(ctx)
            print(json.dumps([[r.text, r.is_error] for m in messages for r in m.tool_results]))
        else:
            decisions = {sys.argv[3]: "approve"} if len(sys.argv) > 3 else None
            outcome = await agent.resume(decisions, ctx=ctx)
            if isinstance(outcome, Paused):
                sys.exit(f"still paused: {outcome.message}")
            print(json.dumps(outcome.reply.text))
    finally:
        await agent.aclose()

asyncio.run(main())
"""


def worker(root: Path, mode: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", WORKER, str(root), mode, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(process: subprocess.Popen[str]) -> object:
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def paused(root: Path) -> str:
    pending = finish(worker(root, "pause"))
    assert isinstance(pending, list)
    [request] = pending
    assert request["tool"] == "deploy"
    return str(request["id"])


def runs(root: Path) -> list[str]:
    witness = root / "witness.txt"
    return witness.read_text().split() if witness.exists() else []


def results(root: Path) -> list[list[object]]:
    return finish(worker(root, "results"))  # type: ignore[return-value]


def wait_for(path: Path, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while not path.exists():
        if process.poll() is not None:
            pytest.fail(f"the worker ended early: {process.communicate()[1]}")
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.02)


def kill(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=30)  # reaps it and closes its pipes


def test_paused_in_one_process_approved_in_another_it_runs_once(tmp_path: Path) -> None:
    ident = paused(tmp_path)
    assert runs(tmp_path) == []

    assert finish(worker(tmp_path, "resume", ident)) == "done"
    assert finish(worker(tmp_path, "resume", ident)) == "done"  # the same decision again

    assert runs(tmp_path) == ["deploy:prod"]
    assert results(tmp_path) == [["deployed prod", False]]


def test_two_processes_approving_at_once_run_it_once(tmp_path: Path) -> None:
    ident = paused(tmp_path)

    both = [worker(tmp_path, "resume", ident) for _ in range(2)]
    replies = [finish(process) for process in both]

    assert replies == ["done", "done"]
    assert runs(tmp_path) == ["deploy:prod"]


def test_killed_while_the_tool_ran_it_is_never_run_again(tmp_path: Path) -> None:
    ident = paused(tmp_path)
    running = worker(tmp_path, "resume-slow", ident)
    wait_for(tmp_path / "witness.txt", running)
    kill(running)

    assert finish(worker(tmp_path, "resume")) == "done"

    assert runs(tmp_path) == ["deploy:prod"]
    [[text, is_error]] = results(tmp_path)
    assert is_error is True
    assert "whether it took effect is unknown" in str(text)


def test_killed_after_it_finished_before_the_save_it_is_not_run_again(tmp_path: Path) -> None:
    ident = paused(tmp_path)
    hanging = worker(tmp_path, "resume-hang", ident)
    wait_for(tmp_path / "finished.flag", hanging)
    kill(hanging)

    assert finish(worker(tmp_path, "resume")) == "done"

    assert runs(tmp_path) == ["deploy:prod"]
    assert results(tmp_path) == [["deployed prod", False]]  # the result the ledger kept


def test_without_a_decision_a_resume_runs_nothing(tmp_path: Path) -> None:
    paused(tmp_path)

    process = worker(tmp_path, "resume")
    _, err = process.communicate(timeout=120)

    assert process.returncode != 0
    assert "still paused" in err
    assert runs(tmp_path) == []


KILLS = 12


def test_kills_at_random_moments_never_run_it_twice_or_unapproved(tmp_path: Path) -> None:
    """Pause, killed at a random moment; resume with the approval, killed at a random moment;
    then resume once more, cleanly. Whatever the moments, the tool never ran before its
    approval, it ran exactly once, and the ledger recorded the approval before the start."""
    rng = random.Random(20261203)
    for round_ in range(KILLS):
        root = tmp_path / f"round{round_}"
        pausing = worker(root, "pause")
        time.sleep(rng.uniform(0.0, 1.2))  # killed while it pauses, or after
        kill(pausing)
        assert runs(root) == []  # a gated call never runs before its approval
        waiting = finish(worker(root, "pending"))
        assert isinstance(waiting, list)
        ident = str(waiting[0]) if waiting else paused(root)
        resumer = worker(root, "resume-jitter", ident)
        time.sleep(rng.uniform(0.0, 1.5))  # a process start takes about 0.5 s here
        kill(resumer)
        assert len(runs(root)) <= 1

        assert finish(worker(root, "resume", ident)) == "done"

        assert runs(root) == ["deploy:prod"], round_
        [ledger] = (root / ".ws.approvals").glob("*.jsonl")
        kinds = [json.loads(line)["kind"] for line in ledger.read_text().splitlines()]
        assert kinds.index("decided") < kinds.index("started"), kinds
        assert kinds.count("started") == 1, kinds


def test_a_subagents_call_paused_in_one_process_is_approved_in_another_once(
    tmp_path: Path,
) -> None:
    """The child's waiting call is the parent's; a new process approves it on the parent's
    session, the child runs the tool once and the parent's turn completes."""
    pending = finish(worker(tmp_path, "pause-child"))
    assert isinstance(pending, list)
    [request] = pending
    assert (request["tool"], request["subagent"]) == ("deploy", "general-purpose")
    assert runs(tmp_path) == []

    assert finish(worker(tmp_path, "resume", str(request["id"]))) == "done"
    assert finish(worker(tmp_path, "resume", str(request["id"]))) == "done"

    assert runs(tmp_path) == ["deploy:prod"]


def test_a_background_tasks_call_waits_across_processes_and_runs_once(tmp_path: Path) -> None:
    """The task waits after its process ended; a new process approves, the task continues
    there and the tool runs once; deciding again in a third process runs nothing."""
    paused_task = finish(worker(tmp_path, "pause-task"))
    assert isinstance(paused_task, dict)
    [request] = paused_task["pending"]
    task_id = paused_task["task"]
    assert paused_task["status"] == "waiting"
    assert (request["tool"], request["task_id"]) == ("deploy", task_id)
    assert runs(tmp_path) == []

    ident = str(request["id"])
    assert finish(worker(tmp_path, "decide-task", ident, task_id)) == ["completed", "done"]
    assert finish(worker(tmp_path, "decide-task", ident, task_id)) == ["completed", "done"]
    assert runs(tmp_path) == ["deploy:prod"]


def test_killed_while_a_continued_task_ran_its_tool_it_is_never_run_again(
    tmp_path: Path,
) -> None:
    """The process that continued the task dies inside the tool; a decision sent again from
    another process continues nothing (the task no longer waits), and the tool ran once."""
    paused_task = finish(worker(tmp_path, "pause-task"))
    assert isinstance(paused_task, dict)
    [request] = paused_task["pending"]
    task_id, ident = paused_task["task"], str(request["id"])

    slow = worker(tmp_path, "decide-task-slow", ident, task_id)
    wait_for(tmp_path / "running.flag", slow)
    kill(slow)

    again = worker(tmp_path, "pending")
    assert finish(again) == []  # the task runs (or ran): nothing of it waits
    decided = worker(tmp_path, "decide-task-peek", ident, task_id)
    shown = finish(decided)
    assert isinstance(shown, list)
    assert shown[0] == "running"  # its dead worker's record, until it is found stale
    assert runs(tmp_path) == ["deploy:prod"]
