"""Run the installed ``harness`` command in a subprocess with an isolated environment.

Shared by the end-to-end tests: a :class:`Cli` runs the console script with ``HOME`` pointing at
a temporary directory and without the variables that would let the developer's own model, keys
or workspace leak in; the helpers write scripted-model files and read what the CLI left on disk.

Memory is on by default: after every call the agent's model is also asked, as the memory model,
for new memories (and now and then to consolidate them). Scripts therefore start with
:data:`NO_MEMORIES` (or a flush turn of their own), and :func:`split_requests` tells the agent's
requests from the memory model's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

HARNESS: Final = Path(sys.executable).parent / "harness"
"""The console script installed next to the interpreter running the tests."""

REMOVED_ENV: Final = (
    "HARNESS_WORKSPACE",
    "HARNESS_MODEL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    # Output must look the same on every machine: no forced colours, no inherited width.
    "COLUMNS",
    "LINES",
    "FORCE_COLOR",
    "NO_COLOR",
    "TTY_COMPATIBLE",
    "TTY_INTERACTIVE",
    "PYTHONDEVMODE",
)

BASE_ENV: Final = {k: v for k, v in os.environ.items() if k not in REMOVED_ENV}
"""The environment the commands inherit, taken once at import in the main thread: reading
``os.environ`` from the worker threads that run commands side by side races with pytest
rewriting ``PYTEST_CURRENT_TEST`` and can raise ``KeyError``."""

TIMEOUT_S: Final = 60.0

TRACE_EVENTS: Final = ("PreCall", "PreReasoning", "PostReasoning", "PostCall")

FLUSH_PROMPT: Final = "Extract NEW memories"
"""Text of the memory flush's request (its last message), which no agent request holds."""

CONSOLIDATION_PROMPT: Final = "New daily log entries to merge"
"""Text of the consolidation's request (its last message)."""

NO_MEMORIES: Final[Mapping[str, Any]] = {"match": FLUSH_PROMPT, "text": "NO_REPLY", "repeat": True}
"""A script turn answering every memory flush with "nothing new"; put it first in a script so
that the agent's turns are not spent on the flush (memory is on by default)."""


@dataclass(frozen=True)
class Result:
    """What one run of the command did."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def stderr_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]

    def __str__(self) -> str:  # shown by pytest when an assertion about a result fails
        return (
            f"harness {' '.join(self.args)} -> {self.returncode}\n"
            f"--- stdout ---\n{self.stdout}--- stderr ---\n{self.stderr}"
        )


@dataclass(frozen=True)
class Cli:
    """Runs ``harness`` with ``HOME`` at ``home`` and the working directory at ``cwd``."""

    home: Path
    cwd: Path

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        env = dict(BASE_ENV)
        env["HOME"] = str(self.home)
        env["PYTHONWARNINGS"] = "error"  # a warning in the command is a failure, as in pytest
        env.update(extra or {})
        return env

    def run(
        self,
        *args: str | Path,
        env: Mapping[str, str] | None = None,
        stdin: str = "",
        timeout: float = TIMEOUT_S,
        prefix: Sequence[str] = (),
    ) -> Result:
        """Run ``harness *args``; ``prefix`` is a command that runs it (``unshare --net --``)."""
        argv = tuple(str(arg) for arg in args)
        completed = subprocess.run(
            [*prefix, str(HARNESS), *argv],
            input=stdin,
            capture_output=True,
            text=True,
            env=self.env(env),
            cwd=self.cwd,
            timeout=timeout,
            check=False,
        )
        return Result(argv, completed.returncode, completed.stdout, completed.stderr)


def make_cli(root: Path) -> Cli:
    """A :class:`Cli` whose home and working directory are fresh directories under ``root``."""
    home, cwd = root / "home", root / "cwd"
    home.mkdir(parents=True)
    cwd.mkdir(parents=True)
    return Cli(home=home, cwd=cwd)


def write_script(path: Path, turns: Sequence[Mapping[str, Any]], *, log: str | None = None) -> Path:
    """Write a scripted-model file (see ``harness.models.scripted``); returns its path."""
    script: dict[str, Any] = {"turns": list(turns)}
    if log is not None:
        script["log"] = log
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(script), encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def read_requests(log: Path) -> list[list[dict[str, Any]]]:
    """Every request the scripted model received, in order: each a list of message dicts."""
    return read_jsonl(log)


def last_text(request: Sequence[Mapping[str, Any]]) -> str:
    """The text of a request's last message: what a scripted turn's ``match`` is searched in."""
    return text_of(request[-1])


@dataclass(frozen=True)
class Requests:
    """A request log split by who asked: the agent, the memory flush, the consolidation."""

    agent: list[list[dict[str, Any]]]
    flush: list[list[dict[str, Any]]]
    consolidation: list[list[dict[str, Any]]]


def split_requests(log: Path) -> Requests:
    """The requests of ``log`` by who made them, each list in order.

    The memory model's requests are told apart by their prompts (:data:`FLUSH_PROMPT`,
    :data:`CONSOLIDATION_PROMPT`), so the agent's own requests can be checked exactly. A log that
    does not exist holds no request.
    """
    split = Requests(agent=[], flush=[], consolidation=[])
    for request in read_requests(log) if log.exists() else []:
        text = last_text(request)
        if FLUSH_PROMPT in text:
            split.flush.append(request)
        elif CONSOLIDATION_PROMPT in text:
            split.consolidation.append(request)
        else:
            split.agent.append(request)
    return split


def agent_requests(log: Path) -> list[list[dict[str, Any]]]:
    """The requests the agent itself made (the memory model's left out), in order."""
    return split_requests(log).agent


def session_file(
    workspace: Path, session: str, *, user: str | None = None, agent: str = "harness"
) -> Path:
    base = workspace / "users" / user if user else workspace
    return base / "agents" / agent / "context" / session / "messages.jsonl"


def read_session(
    workspace: Path, session: str, *, user: str | None = None, agent: str = "harness"
) -> list[dict[str, Any]]:
    return read_jsonl(session_file(workspace, session, user=user, agent=agent))


def text_of(message: Mapping[str, Any]) -> str:
    """The text blocks of a serialized message, joined."""
    return "".join(block["text"] for block in message["content"] if block["type"] == "text")


def turns_of(messages: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(role, text) of each message, the system prompt reduced to its role."""
    return [(m["role"], "" if m["role"] == "system" else text_of(m)) for m in messages]


def memory_dir(workspace: Path, *, user: str | None = None) -> Path:
    """The daily logs' directory of the shared namespace or of ``user``'s."""
    return (workspace / "users" / user if user else workspace) / "memory"


def daily_logs(workspace: Path, *, user: str | None = None) -> list[Path]:
    """The markdown files directly in a namespace's ``memory/`` (daily logs), by name."""
    return sorted(memory_dir(workspace, user=user).glob("*.md"))


def sessions_dir(workspace: Path, *, user: str | None = None, agent: str = "harness") -> Path:
    """Where an agent's session transcripts are kept in a namespace."""
    base = workspace / "users" / user if user else workspace
    return base / "agents" / agent / "sessions"


def visible_files(directory: Path) -> list[str]:
    """Names of the files in ``directory`` that are not hidden (lock files are), sorted."""
    return sorted(p.name for p in directory.iterdir() if p.is_file() and not p.name.startswith("."))


def squash(text: str) -> str:
    """``text`` with every run of whitespace (including console line breaks) made one space."""
    return " ".join(text.split())
