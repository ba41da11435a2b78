"""`harness` with a real model and no network: in-process (`--model local`) and through
llama.cpp's OpenAI-compatible server (`--model openai:smollm2`, the `llama_server` fixture).

The model is SmolLM2-135M: what it says is anybody's guess, so these tests check what the
harness does around it (turns saved, memory written, compaction, clear errors), never the
wording of a reply.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from _cli_runner import (
    Cli,
    daily_logs,
    make_cli,
    read_jsonl,
    read_session,
    sessions_dir,
    text_of,
)

from conftest import LlamaServer, local_weights
from harness.models._native_check import REBUILD_COMMAND
from harness.models.local import INSTALL_COMMAND

TURNS = 8
CRATES = " ".join(f"crate {k} weighs {k * 3} kg;" for k in range(16))
"""Some 180 tokens a question: with a system prompt of some 1,300 tokens, four questions alone
overflow the 2,048-token window whatever the model answers, so a compaction (its trigger's, at
half the window, or an overflow's) comes by the fourth turn; short questions took 21 to 25 turns
to reach one, each turn with its model calls."""


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return make_cli(tmp_path)


def server_env(server: LlamaServer) -> dict[str, str]:
    return {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "none"}


OFFLINE = ("unshare", "--net", "--")
"""A network namespace of its own: no interface but a loopback that is down."""


def test_chat_with_the_local_model_answers_offline(cli: Cli) -> None:
    local_weights()  # skips (or fails in CI) without the extra
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is needed to run a command without a network")
    result = cli.run(
        "chat",
        "-w",
        "ws",
        "--model",
        "local",
        stdin="Hello! What can you do?\n/exit\n",
        timeout=300,
        prefix=OFFLINE,
    )

    assert result.returncode == 0, result
    assert result.stdout.strip(), result
    assert "error" not in result.stderr.lower(), result
    session = read_session(cli.cwd / "ws", "default")
    assert [message["role"] for message in session[-2:]] == ["user", "assistant"]


def test_without_the_extra_the_error_says_how_to_install_it(cli: Cli, tmp_path: Path) -> None:
    hide = tmp_path / "hide"
    hide.mkdir()
    # What `import llama_cpp` finds when the extra is not installed: nothing.
    (hide / "sitecustomize.py").write_text("import sys\nsys.modules['llama_cpp'] = None\n")

    # A real process: the hiding is done by a new interpreter's start (sitecustomize).
    result = cli.run("run", "--model", "local", "hi", env={"PYTHONPATH": str(hide)}, process=True)

    assert result.returncode == 2, result
    assert result.stderr_lines == [
        f"error: local models need llama-cpp-python: run {INSTALL_COMMAND}"
    ]


CRASHING_BUILD = """
import os, signal

class Llama:  # what a build for another CPU does at its first matrix product
    def __init__(self, *args, **kwargs):
        os.kill(os.getpid(), signal.SIGILL)
"""


def test_a_build_that_cannot_run_on_this_cpu_is_one_line_not_a_silent_exit_132(
    cli: Cli, tmp_path: Path
) -> None:
    local_weights()  # the bundled weights, found as for the real build
    build = tmp_path / "crashing-build"
    (build / "llama_cpp" / "lib").mkdir(parents=True)
    (build / "llama_cpp" / "__init__.py").write_text(CRASHING_BUILD, encoding="utf-8")

    # A real process: the build is what a new interpreter imports, and the check that tells
    # its crash (harness.models._native_check) is about a process that dies of SIGILL.
    result = cli.run(
        "run", "-w", "ws", "-s", "s1", "--model", "local", "Say hi",
        env={"PYTHONPATH": str(build)}, process=True,
    )  # fmt: skip

    assert result.returncode == 2, result
    assert result.stdout == "", result
    assert len(result.stderr_lines) == 1, result
    line = result.stderr_lines[0]
    assert line.startswith("error: the local model cannot run on this CPU: "), result
    assert "SIGILL" in line
    assert line.endswith(REBUILD_COMMAND), result
    # The accepted turn is kept, as after any failure of the model.
    assert [m["role"] for m in read_session(cli.cwd / "ws", "s1")] == ["user"]


@pytest.mark.parametrize(
    ("option", "problem"),
    [
        ("max_tokens", "'max_tokens' is not KEY=VALUE"),
        ("=3", "'=3' is not KEY=VALUE"),
    ],
)
def test_a_malformed_model_option_is_a_usage_error(cli: Cli, option: str, problem: str) -> None:
    result = cli.run("run", "--model", "local", "-o", option, "hi")

    assert result.returncode == 2, result
    assert problem in " ".join(result.stderr.split()), result


def test_an_option_the_model_does_not_take_is_named(cli: Cli) -> None:
    local_weights()

    result = cli.run("run", "--model", "local", "-o", "temprature=0.5", "hi")

    assert result.returncode == 2, result
    assert "unknown option temprature for a local model" in result.stderr, result


def test_one_run_against_the_server_saves_the_session_and_writes_memory(
    cli: Cli, llama_server: LlamaServer
) -> None:
    result = cli.run(
        "run",
        "-w",
        "ws",
        "-s",
        "interop",
        "--model",
        f"openai:{llama_server.model}",
        "-o",
        "max_tokens=64",
        "--json",
        "My name is Ada and I live in Lisbon. Please remember that.",
        env=server_env(llama_server),
        timeout=300,
    )

    assert result.returncode == 0, result
    reply = json.loads(result.stdout)
    assert reply["session_id"] == "interop"
    workspace = cli.cwd / "ws"
    session = read_session(workspace, "interop")
    assert [m["role"] for m in session] == ["user", "assistant"]
    assert session[-1]["id"] == reply["message_id"]
    assert text_of(session[-1]) == reply["reply"]
    (log,) = daily_logs(workspace)
    assert log.read_text(encoding="utf-8").strip(), "the memory flush wrote nothing"


def test_eight_turns_against_the_server_are_all_saved_through_compaction(
    cli: Cli, llama_server: LlamaServer
) -> None:
    workspace = cli.cwd / "ws"
    questions = [
        f"Turn {n}: please remember that box {n} is {n * 7} cm wide and holds {CRATES}"
        for n in range(TURNS)
    ]
    for question in questions:
        result = cli.run(
            "run",
            "-w",
            "ws",
            "-s",
            "long",
            "--model",
            f"openai:{llama_server.model}",
            "--context-window",
            str(llama_server.n_ctx),
            "-o",
            "max_tokens=64",
            question,
            env=server_env(llama_server),
            timeout=300,
        )
        assert result.returncode == 0, result

    sessions = sessions_dir(workspace)
    transcript = [m for m in read_jsonl(sessions / "long.jsonl") if m["type"] == "message"]
    assert [m["content"] for m in transcript if m["role"] == "user"] == questions
    assert sum(m["role"] == "assistant" for m in transcript) == TURNS
    compactions = read_jsonl(sessions / "long.compactions.jsonl")
    assert compactions, "the session never compacted"
    live = read_session(workspace, "long")
    assert text_of(live[-2]) == questions[-1]
    assert len(live) < 2 * TURNS, "the live session was never shortened"
