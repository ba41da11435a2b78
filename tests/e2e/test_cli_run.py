"""`harness run` end to end: sessions across processes, users, --json, env defaults, tools."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from _cli_runner import (
    FLUSH_PROMPT,
    NO_MEMORIES,
    Cli,
    Result,
    agent_requests,
    last_text,
    make_cli,
    memory_dir,
    read_jsonl,
    read_session,
    session_file,
    sessions_dir,
    split_requests,
    turns_of,
    visible_files,
    write_script,
)

FIRST_REPLY = "The first answer."
SECOND_REPLY = "The second answer, which remembers the first."


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return make_cli(tmp_path)


@dataclass(frozen=True)
class TwoTurns:
    workspace: Path
    log: Path
    first: Result
    second: Result


@pytest.fixture(scope="module")
def two_turns(tmp_path_factory: pytest.TempPathFactory) -> TwoTurns:
    """Two `harness run` processes continuing session s1 of one workspace."""
    root = tmp_path_factory.mktemp("two_turns")
    cli = make_cli(root)
    script = write_script(
        root / "script.json",
        [
            NO_MEMORIES,
            {"match": "^first question$", "text": FIRST_REPLY},
            {"match": "^second question$", "text": SECOND_REPLY},
        ],
        log="requests.jsonl",
    )
    workspace = root / "ws"
    common = ("--session", "s1", "--workspace", workspace, "--model", f"scripted:{script}")
    first = cli.run("run", *common, "first question")
    second = cli.run("run", *common, "second question")
    return TwoTurns(workspace, root / "requests.jsonl", first, second)


def test_each_run_prints_its_reply_and_exits_0(two_turns: TwoTurns) -> None:
    assert two_turns.first.returncode == 0, two_turns.first
    assert two_turns.first.stdout == FIRST_REPLY + "\n"
    assert two_turns.second.returncode == 0, two_turns.second
    assert two_turns.second.stdout == SECOND_REPLY + "\n"


def test_without_verbose_stderr_is_empty(two_turns: TwoTurns) -> None:
    assert two_turns.first.stderr == ""
    assert two_turns.second.stderr == ""


def test_second_process_sends_the_first_turn_before_the_new_question(two_turns: TwoTurns) -> None:
    first_request, second_request = agent_requests(two_turns.log)
    assert turns_of(first_request) == [("system", ""), ("user", "first question")]
    assert turns_of(second_request) == [
        ("system", ""),
        ("user", "first question"),
        ("assistant", FIRST_REPLY),
        ("user", "second question"),
    ]
    # The restored turn is the saved one, not a re-creation: same message ids.
    assert second_request[1]["id"] == first_request[1]["id"]


def test_each_process_flushes_only_its_own_new_turn(two_turns: TwoTurns) -> None:
    # Memory is on by default: after each call the model is asked for new memories, and the
    # second process sends only the turn the first one already flushed.
    requests = split_requests(two_turns.log)
    first_flush, second_flush = requests.flush
    first_window = last_text(first_flush).split(FLUSH_PROMPT, 1)[1]
    second_window = last_text(second_flush).split(FLUSH_PROMPT, 1)[1]
    assert "[USER]: first question" in first_window
    assert f"[ASSISTANT]: {FIRST_REPLY}" in first_window
    assert "[USER]: second question" in second_window
    assert f"[ASSISTANT]: {SECOND_REPLY}" in second_window
    assert "first question" not in second_window
    assert FIRST_REPLY not in second_window
    assert requests.consolidation == []  # NO_REPLY: no daily log, nothing to consolidate


def test_session_file_holds_both_turns_with_distinct_ids(two_turns: TwoTurns) -> None:
    messages = read_session(two_turns.workspace, "s1")
    assert turns_of(messages) == [
        ("user", "first question"),
        ("assistant", FIRST_REPLY),
        ("user", "second question"),
        ("assistant", SECOND_REPLY),
    ]
    ids = [m["id"] for m in messages]
    assert len(set(ids)) == 4
    assert all(isinstance(i, str) and i for i in ids)
    # Nothing was saved anywhere else in the workspace (no user namespace, no other session).
    assert sorted(p.name for p in (two_turns.workspace / "agents/harness/context").iterdir()) == [
        "s1"
    ]
    assert not (two_turns.workspace / "users").exists()
    # The flush found nothing to remember, so no daily log was written.
    assert not memory_dir(two_turns.workspace).exists()


def test_transcript_holds_each_message_once(two_turns: TwoTurns) -> None:
    sessions = sessions_dir(two_turns.workspace)
    assert visible_files(sessions) == ["s1.flush.json", "s1.jsonl", "s1.log.jsonl", "sessions.json"]
    saved = read_session(two_turns.workspace, "s1")
    transcript = read_jsonl(sessions / "s1.jsonl")
    assert [(e["type"], e["role"], e["content"]) for e in transcript] == [
        ("message", "user", "first question"),
        ("message", "assistant", FIRST_REPLY),
        ("message", "user", "second question"),
        ("message", "assistant", SECOND_REPLY),
    ]
    # The saved session's messages, each once, each chained to the one before it.
    assert [e["id"] for e in transcript] == [m["id"] for m in saved]
    assert [e["parent_id"] for e in transcript] == [None, *(m["id"] for m in saved[:-1])]
    assert read_jsonl(sessions / "s1.log.jsonl") == transcript
    index = json.loads((sessions / "sessions.json").read_text(encoding="utf-8"))
    assert index["sessions"]["s1"]["messages"] == 4
    assert index["sessions"]["s1"]["title"] == "first question"


def test_users_have_separate_sessions_with_the_same_id(cli: Cli, tmp_path: Path) -> None:
    script = write_script(
        tmp_path / "script.json",
        [
            NO_MEMORIES,
            {"match": "alice", "text": "Hello Alice."},
            {"match": "bob", "text": "Hello Bob."},
        ],
        log="requests.jsonl",
    )
    workspace = tmp_path / "ws"
    common = ("--session", "s1", "-w", workspace, "-m", f"scripted:{script}")

    alice = cli.run("run", *common, "--user", "alice", "I am alice")
    bob = cli.run("run", *common, "--user", "bob", "I am bob")

    assert (alice.returncode, alice.stdout) == (0, "Hello Alice.\n"), alice
    assert (bob.returncode, bob.stdout) == (0, "Hello Bob.\n"), bob
    assert turns_of(read_session(workspace, "s1", user="alice")) == [
        ("user", "I am alice"),
        ("assistant", "Hello Alice."),
    ]
    assert turns_of(read_session(workspace, "s1", user="bob")) == [
        ("user", "I am bob"),
        ("assistant", "Hello Bob."),
    ]
    assert session_file(workspace, "s1", user="alice").parent == (
        workspace / "users/alice/agents/harness/context/s1"
    )
    assert not session_file(workspace, "s1").exists()  # nothing in the shared namespace
    _, bob_request = agent_requests(tmp_path / "requests.jsonl")
    assert turns_of(bob_request) == [("system", ""), ("user", "I am bob")]
    # Transcripts are per user too, and bob's flush saw only bob's turn.
    for user in ("alice", "bob"):
        transcript = read_jsonl(sessions_dir(workspace, user=user) / "s1.jsonl")
        assert [e["content"] for e in transcript] == [f"I am {user}", f"Hello {user.title()}."]
    assert not sessions_dir(workspace).exists()
    _, bob_flush = split_requests(tmp_path / "requests.jsonl").flush
    assert "I am bob" in last_text(bob_flush)
    assert "alice" not in last_text(bob_flush).lower()


def test_json_prints_one_object_describing_the_reply(cli: Cli, tmp_path: Path) -> None:
    # Long, with quotes, a newline, markup-like brackets and non-ASCII: printed JSON must keep
    # it exactly (no wrapping at the console width, no markup interpretation).
    reply = 'Sure: "quoted" [b]not bold[/b], café ünïcode.\nSecond line ' + "x" * 150
    script = write_script(tmp_path / "script.json", [NO_MEMORIES, {"text": reply}])

    result = cli.run(
        "run",
        "--json",
        "-s",
        "j1",
        "-u",
        "carol",
        "-w",
        tmp_path / "ws",
        "-m",
        f"scripted:{script}",
        "q",
    )

    assert result.returncode == 0, result
    assert result.stderr == ""
    saved = read_session(tmp_path / "ws", "j1", user="carol")
    assert json.loads(result.stdout) == {
        "session_id": "j1",
        "user_id": "carol",
        "message_id": saved[-1]["id"],
        "reply": reply,
    }


def test_json_without_user_reports_null_user(cli: Cli, tmp_path: Path) -> None:
    script = write_script(tmp_path / "script.json", [NO_MEMORIES, {"text": "ok"}])

    result = cli.run("run", "--json", "-w", tmp_path / "ws", "-m", f"scripted:{script}", "q")

    assert result.returncode == 0, result
    record = json.loads(result.stdout)
    assert record == {
        "session_id": "default",
        "user_id": None,
        "message_id": read_session(tmp_path / "ws", "default")[-1]["id"],
        "reply": "ok",
    }


def test_plain_reply_is_printed_verbatim(cli: Cli, tmp_path: Path) -> None:
    # Longer than the 80 columns a console assumes when stdout is a pipe, with markup-like text.
    reply = "First [red]line[/red]\n  indented,  two  spaces: " + " ".join(["word"] * 40) + " end."
    script = write_script(tmp_path / "script.json", [NO_MEMORIES, {"text": reply}])

    result = cli.run("run", "-w", tmp_path / "ws", "-m", f"scripted:{script}", "q")

    assert result.returncode == 0, result
    assert result.stdout == reply + "\n"


def test_harness_model_env_is_used_without_model_option(cli: Cli, tmp_path: Path) -> None:
    script = write_script(
        tmp_path / "script.json",
        [NO_MEMORIES, {"text": "From the env model."}],
        log="requests.jsonl",
    )

    result = cli.run(
        "run", "-w", tmp_path / "ws", "hi", env={"HARNESS_MODEL": f"scripted:{script}"}
    )

    assert (result.returncode, result.stdout) == (0, "From the env model.\n"), result
    requests = split_requests(tmp_path / "requests.jsonl")
    assert len(requests.agent) == 1
    assert len(requests.flush) == 1  # the memory model is the agent's model


def test_model_option_wins_over_harness_model_env(cli: Cli, tmp_path: Path) -> None:
    chosen = write_script(
        tmp_path / "chosen.json", [NO_MEMORIES, {"text": "From the option."}], log="chosen.jsonl"
    )
    ignored = write_script(
        tmp_path / "ignored.json", [NO_MEMORIES, {"text": "From the env."}], log="ignored.jsonl"
    )

    result = cli.run(
        "run",
        "-w",
        tmp_path / "ws",
        "-m",
        f"scripted:{chosen}",
        "hi",
        env={"HARNESS_MODEL": f"scripted:{ignored}"},
    )

    assert (result.returncode, result.stdout) == (0, "From the option.\n"), result
    # The memory model follows the chosen model too: the env's model is never asked.
    assert len(split_requests(tmp_path / "chosen.jsonl").flush) == 1
    assert not (tmp_path / "ignored.jsonl").exists()


def test_harness_workspace_env_is_used_without_workspace_option(cli: Cli, tmp_path: Path) -> None:
    script = write_script(tmp_path / "script.json", [NO_MEMORIES, {"text": "ok"}])
    workspace = tmp_path / "env-ws"

    result = cli.run(
        "run",
        "-s",
        "e1",
        "-m",
        f"scripted:{script}",
        "hi",
        env={"HARNESS_WORKSPACE": str(workspace)},
    )

    assert (result.returncode, result.stdout) == (0, "ok\n"), result
    assert turns_of(read_session(workspace, "e1")) == [("user", "hi"), ("assistant", "ok")]
    assert list(cli.cwd.iterdir()) == []  # not the ./.harness/workspace default
    assert (tmp_path / "memory_index.db").is_file()  # the search index sits beside the workspace


def test_default_workspace_is_under_the_working_directory(cli: Cli, tmp_path: Path) -> None:
    script = write_script(tmp_path / "script.json", [NO_MEMORIES, {"text": "ok"}])

    result = cli.run("run", "-m", f"scripted:{script}", "hi")

    assert (result.returncode, result.stdout) == (0, "ok\n"), result
    default = cli.cwd / ".harness" / "workspace"
    assert turns_of(read_session(default, "default")) == [("user", "hi"), ("assistant", "ok")]
    # The search index sits beside the workspace, not inside it.
    assert (cli.cwd / ".harness" / "memory_index.db").is_file()
    assert not (default / "memory_index.db").exists()


def test_call_to_an_unknown_tool_goes_back_to_the_model(cli: Cli, tmp_path: Path) -> None:
    script = write_script(
        tmp_path / "script.json",
        [
            NO_MEMORIES,
            {"match": "^use a tool$", "tool_calls": [{"name": "nosuch", "input": {"x": 1}}]},
            # Fits only when the tool's error came back as the tool result.
            {"match": "unknown tool 'nosuch'", "text": "That tool does not exist."},
        ],
        log="requests.jsonl",
    )

    result = cli.run("run", "-w", tmp_path / "ws", "-m", f"scripted:{script}", "use a tool")

    assert (result.returncode, result.stdout, result.stderr) == (
        0,
        "That tool does not exist.\n",
        "",
    ), result
    messages = read_session(tmp_path / "ws", "default")
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    (call,) = [b for b in messages[1]["content"] if b["type"] == "tool_use"]
    (outcome,) = messages[2]["content"]
    assert (call["name"], call["input"]) == ("nosuch", {"x": 1})
    assert outcome["type"] == "tool_result"
    assert outcome["id"] == call["id"]
    assert outcome["is_error"] is True
    assert "unknown tool 'nosuch'" in outcome["output"]
    requests = split_requests(tmp_path / "requests.jsonl")
    assert len(requests.agent) == 2
    assert len(requests.flush) == 1


def test_verbose_traces_on_stderr_only(cli: Cli, tmp_path: Path) -> None:
    script = write_script(tmp_path / "script.json", [NO_MEMORIES, {"text": "Traced reply."}])

    result = cli.run(
        "run", "--verbose", "-s", "v1", "-w", tmp_path / "ws", "-m", f"scripted:{script}", "q"
    )

    assert result.returncode == 0, result
    assert result.stdout == "Traced reply.\n"
    for event in ("PreReasoning", "PostCall"):
        lines = [line for line in result.stderr_lines if event in line]
        assert lines, result
        assert "session=v1" in lines[0]
