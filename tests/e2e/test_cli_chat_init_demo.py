"""`harness init`, `harness chat`, `harness demo` and the help of every command, end to end."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from datetime import date
from pathlib import Path

import pytest
from _cli_runner import (
    FLUSH_PROMPT,
    NO_MEMORIES,
    Cli,
    Result,
    agent_requests,
    daily_logs,
    last_text,
    make_cli,
    read_jsonl,
    read_session,
    sessions_dir,
    split_requests,
    squash,
    text_of,
    turns_of,
    visible_files,
    write_script,
)

from harness.cli.demo import DEMO_SCRIPT
from harness.cli.main import app
from harness.memory import CONSOLIDATION_SYSTEM_PROMPT, FLUSH_SYSTEM_PROMPT

SKELETON_FILES = ("AGENTS.md", "MEMORY.md", "knowledge/KNOWLEDGE.md")
SKELETON_DIRS = ("memory", "skills", "subagents")


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return make_cli(tmp_path)


def snapshot(root: Path) -> dict[str, tuple[int, bytes | None]]:
    """Every path under ``root`` with its modification time and (for files) content."""
    return {
        path.relative_to(root).as_posix(): (
            path.stat().st_mtime_ns,
            path.read_bytes() if path.is_file() else None,
        )
        for path in sorted(root.rglob("*"))
    }


# --- init ---------------------------------------------------------------------------------------


def test_init_creates_the_skeleton(cli: Cli, tmp_path: Path) -> None:
    # Long enough that the printed path would not fit in 80 columns.
    root = tmp_path / "a-workspace-directory-with-a-rather-long-name" / "and-one-more-level"

    result = cli.run("init", root)

    assert result.returncode == 0, result
    # The next step names the workspace it needs, quoted for the shell.
    assert result.stderr.startswith(f"Next: edit {root / 'AGENTS.md'}, then chat with it:\n")
    assert f"harness chat -w {root} --model openai:gpt-4o-mini" in result.stderr
    for rel in SKELETON_FILES:
        assert (root / rel).is_file()
        assert (root / rel).read_text(encoding="utf-8").startswith("# ")
    for rel in SKELETON_DIRS:
        assert (root / rel).is_dir()
        assert list((root / rel).iterdir()) == []
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) == sorted(
        [*SKELETON_FILES, *SKELETON_DIRS, "knowledge"]
    )
    lines = result.stdout.splitlines()
    assert lines[0] == f"Initialized workspace {root}"
    assert sorted(lines[1:]) == sorted(
        f"  created {rel}" for rel in (*SKELETON_FILES, *(f"{d}/" for d in SKELETON_DIRS))
    )


def test_init_twice_changes_nothing_and_says_so(cli: Cli, tmp_path: Path) -> None:
    root = tmp_path / "ws"
    assert cli.run("init", root).returncode == 0
    before = snapshot(root)

    result = cli.run("init", root)

    assert result.returncode == 0, result
    assert result.stderr.startswith("Next: edit ")
    assert result.stdout == f"Workspace {root} already has every skeleton file; nothing changed.\n"
    assert snapshot(root) == before


def test_init_keeps_an_existing_agents_md(cli: Cli, tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "AGENTS.md").write_text("# Mine\n\nDo not touch.\n", encoding="utf-8")

    result = cli.run("init", root)

    assert result.returncode == 0, result
    assert (root / "AGENTS.md").read_text(encoding="utf-8") == "# Mine\n\nDo not touch.\n"
    assert (root / "MEMORY.md").is_file()
    assert (root / "knowledge/KNOWLEDGE.md").is_file()
    assert "  created AGENTS.md" not in result.stdout.splitlines()
    assert "  created MEMORY.md" in result.stdout.splitlines()


def test_init_without_directory_uses_harness_workspace(cli: Cli, tmp_path: Path) -> None:
    root = tmp_path / "env-ws"

    result = cli.run("init", env={"HARNESS_WORKSPACE": str(root)})

    assert result.returncode == 0, result
    assert all((root / rel).is_file() for rel in SKELETON_FILES)
    assert list(cli.cwd.iterdir()) == []


# --- chat ---------------------------------------------------------------------------------------


def test_chat_replies_and_switches_session(cli: Cli, tmp_path: Path) -> None:
    script = write_script(
        tmp_path / "script.json",
        [
            NO_MEMORIES,
            {"match": "^hello$", "text": "Hi there!"},
            {"match": "^hi$", "text": "Hello again."},
        ],
        log="requests.jsonl",
    )
    workspace = tmp_path / "ws"

    result = cli.run(
        "chat",
        "-w",
        workspace,
        "-m",
        f"scripted:{script}",
        stdin="hello\n/session\n/session other\nhi\n/exit\n",
    )

    assert result.returncode == 0, result
    # replies alone on stdout; the "you> " prompts and notices go to stderr
    assert result.stdout == "Hi there!\nHello again.\n"
    notices = [line.replace("you> ", "") for line in result.stderr_lines]
    assert notices.index("session: default") < notices.index("session: other")
    assert "error" not in result.stderr
    assert turns_of(read_session(workspace, "default")) == [
        ("user", "hello"),
        ("assistant", "Hi there!"),
    ]
    assert turns_of(read_session(workspace, "other")) == [
        ("user", "hi"),
        ("assistant", "Hello again."),
    ]
    # The switched-to session starts empty: "hello" is not sent with "hi".
    _, second = agent_requests(tmp_path / "requests.jsonl")
    assert turns_of(second) == [("system", ""), ("user", "hi")]
    # Each turn was flushed in its own session, with that session's messages only.
    first_flush, second_flush = split_requests(tmp_path / "requests.jsonl").flush
    assert "[USER]: hello" in last_text(first_flush)
    assert "[USER]: hi" in last_text(second_flush)
    assert "hello" not in last_text(second_flush)
    assert visible_files(sessions_dir(workspace)) == [
        "default.flush.json",
        "default.jsonl",
        "default.log.jsonl",
        "other.flush.json",
        "other.jsonl",
        "other.log.jsonl",
        "sessions.json",
    ]


def test_chat_commands_are_answered_by_the_chat_not_the_model(cli: Cli, tmp_path: Path) -> None:
    script = write_script(
        tmp_path / "script.json",
        [NO_MEMORIES, {"match": "^/etc/hosts holds what", "text": "Host names."}],
        log="requests.jsonl",
    )

    result = cli.run(
        "chat",
        "-w",
        tmp_path / "ws",
        "-m",
        f"scripted:{script}",
        stdin="/help\n/?\n/frobnicate\n/etc/hosts holds what?\n/exit\n",
    )

    assert result.returncode == 0, result
    assert result.stderr.count("Commands (never sent to the model):") == 2
    assert "unknown command /frobnicate; /help lists them" in result.stderr
    assert result.stdout == "Host names.\n"  # a line that only starts with a slash is a turn
    asked = [turns_of(request) for request in agent_requests(tmp_path / "requests.jsonl")]
    assert asked == [[("system", ""), ("user", "/etc/hosts holds what?")]]


def test_chat_survives_a_failed_turn(cli: Cli, tmp_path: Path) -> None:
    script = write_script(
        tmp_path / "script.json",
        [NO_MEMORIES, {"match": "^second$", "text": "Still here."}],
        log="requests.jsonl",
    )
    workspace = tmp_path / "ws"

    result = cli.run(
        "chat", "-w", workspace, "-m", f"scripted:{script}", stdin="first\nsecond\n/exit\n"
    )

    assert result.returncode == 0, result
    assert "Still here." in result.stdout
    errors = [line for line in result.stderr_lines if "error:" in line]
    assert len(errors) == 1
    assert "ScriptExhaustedError" in errors[0]
    assert turns_of(read_session(workspace, "default")) == [
        ("user", "first"),
        ("user", "second"),
        ("assistant", "Still here."),
    ]
    # The failed turn's question is not lost to memory either: the next call's flush and
    # transcript carry it.
    (flush,) = split_requests(tmp_path / "requests.jsonl").flush
    window = last_text(flush).split(FLUSH_PROMPT, 1)[1]
    assert window.index("[USER]: first") < window.index("[USER]: second")
    transcript = read_jsonl(sessions_dir(workspace) / "default.jsonl")
    assert [(e["role"], e["content"]) for e in transcript] == [
        ("user", "first"),
        ("user", "second"),
        ("assistant", "Still here."),
    ]


def test_chat_ends_cleanly_at_end_of_input(cli: Cli, tmp_path: Path) -> None:
    script = write_script(
        tmp_path / "script.json",
        [NO_MEMORIES, {"text": "Only reply.", "repeat": True}],
        log="requests.jsonl",
    )
    workspace = tmp_path / "ws"

    # Blank lines are ignored; then input ends without /exit.
    result = cli.run(
        "chat", "-w", workspace, "-s", "c1", "-m", f"scripted:{script}", stdin="\n   \nhello\n"
    )

    assert result.returncode == 0, result
    assert result.stdout.count("Only reply.") == 1
    assert "error" not in result.stderr
    requests = split_requests(tmp_path / "requests.jsonl")
    assert (len(requests.agent), len(requests.flush), len(requests.consolidation)) == (1, 1, 0)
    assert turns_of(read_session(workspace, "c1")) == [
        ("user", "hello"),
        ("assistant", "Only reply."),
    ]


# --- demo ---------------------------------------------------------------------------------------

DEMO_SECTIONS = (
    "1. A call with a tool",
    "2. The session, restored",
    "3. Memory flushed after each call",
    "4. Consolidated into users/ada/MEMORY.md",
    "5. memory_search('when is the Lisbon marathon')",
    "6. A long session: eviction and compaction",
    "7. A subagent in the background",
    "8. A skill, loaded when needed",
    "9. The trace of a call",
    "10. The same agent in a bubblewrap sandbox",
    "11. A tool call that waits for approval",
    "12. Files in the workspace",
)


def panel_lines(stdout: str, number: int) -> list[str]:
    """The lines shown in the panel of demo section ``number``, as they were before the panel
    wrapped them (a line the tool printed starts with "Found " or "Source: ")."""
    lines = stdout.splitlines()
    top = next(i for i, line in enumerate(lines) if DEMO_SECTIONS[number - 1] in line)
    shown: list[str] = []
    for line in lines[top + 1 :]:
        if not line.startswith("│"):
            break
        text = line.strip()[1:-1].strip()
        if not shown or text.startswith(("Found ", "Source: ")) or not shown[-1]:
            shown.append(text)
        elif text:
            shown[-1] += " " + text
    return [line for line in shown if line]


def section_text(stdout: str, number: int) -> str:
    """The squashed text of demo section ``number``: from its title to the next one's."""
    text = squash(stdout)
    start = text.index(DEMO_SECTIONS[number - 1])
    end = text.index(DEMO_SECTIONS[number]) if number < len(DEMO_SECTIONS) else len(text)
    assert start < end, f"section {number} is out of order"
    return text[start:end]


TRACES = "users/ada/agents/guide/traces"


def visible_files_in(directory: Path) -> list[Path]:
    """The files of ``directory`` without lock files and other dot-files."""
    return [p for p in directory.iterdir() if not p.name.startswith(".")]


def assert_demo_ran_in(root: Path, stdout: str, days: tuple[date, date]) -> None:
    """The tour ran in ``root`` between the local dates ``days`` (start, end)."""
    text = squash(stdout)
    for section in DEMO_SECTIONS:
        assert section in text
    assert [text.index(s) for s in DEMO_SECTIONS] == sorted(text.index(s) for s in DEMO_SECTIONS)
    assert "guide: A marathon is about 42.2 km, Ada." in text
    assert "guide: You asked how far a marathon is: 42.2 km." in text
    assert 'The model called convert_miles({"miles": 26.2})' in text
    assert "AGENTS.md yes, MEMORY.md yes, session id yes." in text
    assert "restored 4 earlier messages of session 'tour'" in text
    # The workspace is printed whole, on one line, however long its path.
    assert f"Workspace: {root}" in stdout.splitlines()
    assert f"Look around: {root}" in stdout.splitlines()

    # After step 6 the session is the compaction summary and the kept tail; the whole
    # conversation, summary entry included, is in the transcript.
    messages = read_session(root, "tour", user="ada", agent="guide")
    assert [(m["role"], m.get("name")) for m in messages] == [
        ("user", "__compaction_summary__"),
        ("assistant", "guide"),
        ("user", None),
        ("assistant", "guide"),
        ("tool", "read_server_log"),
        ("assistant", "guide"),
    ]
    assert "How far is a marathon?" in messages[0]["content"][0]["text"]
    placeholder = messages[4]["content"][0]["output"]
    assert placeholder.startswith("Tool output was too large (15,208 chars, 400 lines)")
    (evicted,) = visible_files_in(root / "users/ada/large_tool_results/guide")
    assert f"`large_tool_results/guide/{evicted.name}`" in placeholder
    assert "12:02:03 ERROR upstream timeout" in evicted.read_text(encoding="utf-8")
    transcript = read_jsonl(sessions_dir(root, user="ada", agent="guide") / "tour.jsonl")
    assert transcript[2]["content"] == "[tool_result: convert_miles] 42.2 km"
    assert [e["type"] for e in transcript].count("summary") == 1
    (record,) = read_jsonl(sessions_dir(root, user="ada", agent="guide") / "tour.compactions.jsonl")
    assert (record["messages_before"], record["messages_after"]) == (9, 5)
    assert "Compacted: 9 messages -> 5" in section_text(stdout, 6)
    assert json.loads((root / "demo-script.json").read_text(encoding="utf-8")) == DEMO_SCRIPT
    requests = split_requests(root / "demo-requests.jsonl")
    # the tool call, the answer, the follow-up, the log tool call, the summary, the log answer;
    # then the spawn, its answer, the subagent's tool call and report, the answer to the notice;
    # the new agent's agent_send, the subagent's answer, the new agent's answer;
    # then load_skill, read_file and the answer; then execute and the answer; then the gated
    # call (the request before the pause) and, once approved, the answer
    assert len(requests.agent) == 21
    # one per call of the guide and of the subagent (the prefix was flushed already)
    assert len(requests.flush) == 8
    assert len(requests.consolidation) == 1  # step 4
    assert all(r[0]["role"] == "system" for r in [*requests.flush, *requests.consolidation])
    assert all(r[0]["content"][0]["text"] == FLUSH_SYSTEM_PROMPT for r in requests.flush)
    assert requests.consolidation[0][0]["content"][0]["text"].startswith(
        CONSOLIDATION_SYSTEM_PROMPT.split("{", 1)[0]
    )

    # 3. The first call's fact went to ada's daily log; the second call had nothing new.
    (log,) = daily_logs(root, user="ada")
    assert log.stem in {day.isoformat() for day in days}
    assert daily_logs(root) == []  # nothing in the shared namespace
    lines = log.read_text(encoding="utf-8").strip().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("## Memory Flush — ")
    assert lines[1] == "- Ada runs her first marathon in Lisbon in May."  # its citation checked
    assert f"3. Memory flushed after each call: users/ada/memory/{log.name}" in text
    assert lines[1] in section_text(stdout, 3)
    # 4. Consolidation wrote ada's own MEMORY.md (the shared one is unchanged) and its state.
    memory = (root / "users/ada/MEMORY.md").read_text(encoding="utf-8")
    assert "- Ada runs her first marathon, in Lisbon, in May." in memory
    assert "- Ada runs her first marathon, in Lisbon, in May." in section_text(stdout, 4)
    assert "Lisbon" not in (root / "MEMORY.md").read_text(encoding="utf-8")
    assert (root / "users/ada/memory/.consolidation_state").is_file()
    # 5. memory_search found the fact, shown as the agent sees it: each hit is the lines it
    # names, verbatim behind their trust labels (paths are relative to ada's namespace).
    found = section_text(stdout, 5)
    assert re.search(r"Found \d+ matches", found), found
    assert "Source: MEMORY.md#" in found
    assert f"Source: memory/{log.name}#" in found
    assert "Lisbon" in found
    heading, *hits = panel_lines(stdout, 5)
    assert heading == f"Found {len(hits)} matches:"
    for hit in hits:  # the panel shows a snippet's lines joined by spaces
        match = re.fullmatch(
            r"Source: (\S+)#L(\d+)(?:-L(\d+))? \(trust: (\w+); origin: .*?\) (.*)", hit
        )
        assert match, hit
        path, first = root / "users/ada" / match[1], int(match[2])
        last = int(match[3] or first)
        lines = path.read_text(encoding="utf-8").splitlines()[first - 1 : last]
        text = re.sub(r"\[(?:user|operator|unknown|untrusted)\] ", "", match[5])
        if path.suffix == ".jsonl":  # transcript entries: lines of their contents
            shown = [t for entry in lines for t in json.loads(entry)["content"].splitlines()]
            assert text in " ".join(t.strip() for t in shown if t.strip()), hit
            assert match[4] in ("unknown", "untrusted"), hit  # no record vouches for it
        else:
            assert text == " ".join(t.strip() for t in lines if t.strip()), hit
    # Ada's seeded memory is the operator's (the tour adopts it), her own words are hers.
    assert "[operator] - The user's name is Ada; she prefers metric units." in found
    assert "[user] - Ada runs her first marathon, in Lisbon, in May." in found
    # 7. The subagent ran in the background; its task record and result are in ada's
    # namespace, and the agent was told about it once, at its next step.
    (record_file,) = (root / "users/ada/agents/guide/tasks").glob("task_*.json")
    record = json.loads(record_file.read_text(encoding="utf-8"))
    assert (record["agent_id"], record["status"], record["session_id"]) == (
        "log-analyst",
        "completed",
        "delegation",
    )
    result_file = record_file.with_name(f"{record['task_id']}.result.md")
    report = "1 error in 400 lines: 12:02:03 upstream timeout after 30000 ms."
    assert result_file.read_text(encoding="utf-8") == report
    delegation = read_session(root, "delegation", user="ada", agent="guide")
    notices = [m for m in delegation if m.get("metadata", {}).get("reminder") == "task_delivery"]
    assert len(notices) == 1
    assert (
        f'<task id="{record["task_id"]}" state="completed" agent="log-analyst">'
        in (notices[0]["content"][0]["text"])
    )
    replies = [text_of(m) for m in delegation if m["role"] == "assistant" and text_of(m)]
    assert replies[-2:] == [
        "The log analyst reports one error: an upstream timeout at 12:02:03.",
        "The analyst suggests checking the upstream timeout settings first.",
    ]
    step7 = section_text(stdout, 7)
    assert f"Task {record['task_id']} (log-analyst): completed" in step7
    assert report in step7
    assert "continued its conversation with agent_send" in step7
    (child_session,) = (root / "users/ada/agents/log-analyst/context").iterdir()
    assert child_session.name.startswith("sub-")
    # The new agent rebuilt the child from the registry and continued its saved conversation.
    child = read_session(root, child_session.name, user="ada", agent="log-analyst")
    asked = [text_of(m) for m in child if m["role"] == "user"]
    assert asked[0] == "Find the errors in today's log."
    assert asked[-1] == "What should we check first?"
    assert text_of(child[-1]) == "The upstream service's timeout settings."
    registry = json.loads(
        (root / "users/ada/agents/guide/children/delegation.json").read_text(encoding="utf-8")
    )
    assert [(c["agent_id"], c["label"]) for c in registry["children"]] == [("log-analyst", "logs")]
    # 8. The skill was listed by name and description, then loaded and its resource read.
    step8 = " ".join(panel_lines(stdout, 8))
    assert "The prompt listed: - `release-notes`: Writes release notes in the team's template." in (
        step8
    )
    assert 'load_skill({"name": "release-notes"}), then' in step8
    assert 'read_file({"path": "skills/release-notes/template.md"})' in step8
    skill_requests = [r for r in requests.agent if "release notes" in json.dumps(r)]
    assert skill_requests
    assert all("Load `template.md`" not in json.dumps(r[0]) for r in skill_requests)
    # 9. The skill call's trace: its events, and totals that match them.
    trace = [json.loads(line) for line in (root / TRACES / "skills.jsonl").read_text().splitlines()]
    events = [r["event"] for r in trace]
    assert events[0] == "PreCall"
    assert events[-1] == "PostCall"
    assert [r["tool"] for r in trace if r["event"] == "PostActing"] == ["load_skill", "read_file"]
    assert "totals: ok, 3 steps" in section_text(stdout, 9)
    assert "2 tool calls, 0 tool errors" in section_text(stdout, 9)
    # 10. The command ran in the sandbox: in ada's namespace, with no view of the host's home.
    step10 = section_text(stdout, 10)
    if shutil.which("bwrap") is None and not os.environ.get("CI"):
        # Without bubblewrap (outside CI only) the tour says so and how to install it.
        assert "apt-get install bubblewrap" in step10
    else:
        assert "execute -> Exit code: 0" in step10
        assert "hello from /workspace" in step10
        assert "ls: cannot access '/root'" in step10
    # 11. The gated call waited, a new agent approved it, and it ran once.
    step11 = section_text(stdout, 11)
    assert 'publish_changelog({"channel": "#releases"})' in step11
    assert "the tool ran 1 time(s)" in step11
    assert "guide: The changelog is out on #releases." in step11
    assert (root.parent / f".{root.name}.approvals").is_dir()  # beside it, not in it
    # 12. The files: the transcript beside the session, the index beside the workspace.
    transcripts = sessions_dir(root, user="ada", agent="guide")
    assert visible_files(transcripts) == [
        "delegation.flush.json",
        "delegation.jsonl",
        "delegation.log.jsonl",
        "sessions.json",
        "tour.compactions.jsonl",
        "tour.flush.json",
        "tour.jsonl",
        "tour.log.jsonl",
    ]
    # The table lists what the tour wrote (lock files left out), and nothing else is there.
    lines = stdout.splitlines()
    title = next(i for i, line in enumerate(lines) if DEMO_SECTIONS[11] in line)
    rows = [re.fullmatch(r"\s*[\d,]+  (\S+)", line) for line in lines[title + 1 :]]
    listed = [row[1] for row in rows if row]
    (kept,) = (root / "users/ada/memory/.history").glob("MEMORY-*.md")  # the replaced text
    assert listed == [
        "AGENTS.md",
        "MEMORY.md",
        "demo-requests.jsonl",
        "demo-script.json",
        "knowledge/KNOWLEDGE.md",
        "skills/release-notes/SKILL.md",
        "skills/release-notes/template.md",
        "subagents/log-analyst.md",
        "users/ada/MEMORY.md",
        "users/ada/agents/guide/children/delegation.json",
        "users/ada/agents/guide/context/approval/messages.jsonl",
        "users/ada/agents/guide/context/approval/state.json",
        "users/ada/agents/guide/context/delegation/messages.jsonl",
        "users/ada/agents/guide/context/delegation/state.json",
        "users/ada/agents/guide/context/sandbox/messages.jsonl",
        "users/ada/agents/guide/context/sandbox/state.json",
        "users/ada/agents/guide/context/skills/messages.jsonl",
        "users/ada/agents/guide/context/skills/state.json",
        "users/ada/agents/guide/context/tour/messages.jsonl",
        "users/ada/agents/guide/context/tour/state.json",
        "users/ada/agents/guide/sessions/delegation.flush.json",
        "users/ada/agents/guide/sessions/delegation.jsonl",
        "users/ada/agents/guide/sessions/delegation.log.jsonl",
        "users/ada/agents/guide/sessions/sessions.json",
        "users/ada/agents/guide/sessions/tour.compactions.jsonl",
        "users/ada/agents/guide/sessions/tour.flush.json",
        "users/ada/agents/guide/sessions/tour.jsonl",
        "users/ada/agents/guide/sessions/tour.log.jsonl",
        f"users/ada/agents/guide/tasks/{record_file.name}",
        f"users/ada/agents/guide/tasks/{result_file.name}",
        "users/ada/agents/guide/traces/approval.jsonl",
        "users/ada/agents/guide/traces/delegation.jsonl",
        "users/ada/agents/guide/traces/sandbox.jsonl",
        "users/ada/agents/guide/traces/skills.jsonl",
        "users/ada/agents/guide/traces/tour.jsonl",
        f"users/ada/agents/log-analyst/context/{child_session.name}/messages.jsonl",
        f"users/ada/agents/log-analyst/context/{child_session.name}/state.json",
        "users/ada/agents/log-analyst/sessions/sessions.json",
        f"users/ada/agents/log-analyst/sessions/{child_session.name}.flush.json",
        f"users/ada/agents/log-analyst/sessions/{child_session.name}.jsonl",
        f"users/ada/agents/log-analyst/sessions/{child_session.name}.log.jsonl",
        f"users/ada/agents/log-analyst/traces/{child_session.name}.jsonl",
        f"users/ada/large_tool_results/guide/{evicted.name}",
        "users/ada/memory/.consolidation_state",
        f"users/ada/memory/.history/{kept.name}",
        f"users/ada/memory/{log.name}",
    ]
    on_disk = [
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and not p.name.endswith(".lock")
    ]
    assert sorted(on_disk) == listed
    assert (root.parent / "memory_index.db").is_file()
    assert not (root / "memory_index.db").exists()
    assert f"The search index is {root.parent / 'memory_index.db'}" in stdout


def test_demo_in_a_given_workspace(cli: Cli, tmp_path: Path) -> None:
    root = tmp_path / "a-demo-workspace-with-a-long-enough-name-to-pass-80-columns" / "tour"
    started, first_day = time.monotonic(), date.today()

    result = cli.run("demo", "--workspace", root, timeout=60)

    assert time.monotonic() - started < 30
    assert (result.returncode, result.stderr) == (0, ""), result
    assert_demo_ran_in(root, result.stdout, (first_day, date.today()))


def test_demo_in_a_new_temporary_directory(cli: Cli, tmp_path: Path) -> None:
    temp = tmp_path / "tmp-for-the-demo-with-a-name-long-enough-to-pass-the-console-width"
    temp.mkdir()
    first_day = date.today()

    result = cli.run("demo", env={"TMPDIR": str(temp)}, timeout=60)

    assert (result.returncode, result.stderr) == (0, ""), result
    match = re.search(r"^Look around: (.+)$", result.stdout, re.MULTILINE)
    assert match, result
    root = Path(match.group(1))
    try:
        # <TMPDIR>/harness-demo-*/workspace, so the index beside it is the tour's own too.
        assert root.parent.parent == temp
        assert root.parent.name.startswith("harness-demo-")
        assert root.name == "workspace"
        assert sorted(p.name for p in temp.iterdir()) == [root.parent.name]
        assert_demo_ran_in(root, result.stdout, (first_day, date.today()))
    finally:
        shutil.rmtree(root.parent, ignore_errors=True)
    assert list(cli.cwd.iterdir()) == []


# --- help ---------------------------------------------------------------------------------------

COMMANDS = {
    (c.name or c.callback.__name__): c.callback for c in app.registered_commands if c.callback
}
GROUPS = sorted(g.name for g in app.registered_groups if g.name)


@pytest.fixture(scope="module")
def helps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Result]:
    """``harness --help`` (key ``""``) and ``harness <command> --help``, run once for the module."""
    cli = make_cli(tmp_path_factory.mktemp("help"))
    return {name: cli.run(*[name] if name else [], "--help") for name in ["", *COMMANDS]}


def test_commands_are_the_documented_seven() -> None:
    assert sorted(COMMANDS) == ["chat", "demo", "init", "run", "serve", "trace", "worker"]
    # their subcommands: test_cli_memory.py, test_cli_tasks.py, tests/serve/, and below
    assert GROUPS == ["approvals", "keys", "memory", "sessions", "tasks"]


def test_top_level_help_lists_every_command(helps: dict[str, Result]) -> None:
    result = helps[""]

    assert (result.returncode, result.stderr) == (0, ""), result
    for name in [*COMMANDS, *GROUPS]:
        assert re.search(rf"\b{name} {{2,}}\w", result.stdout), f"{name} missing:\n{result.stdout}"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_command_help_shows_its_description(helps: dict[str, Result], name: str) -> None:
    result = helps[name]

    assert (result.returncode, result.stderr) == (0, ""), result
    lines = result.stdout.splitlines()
    usage = next(i for i, line in enumerate(lines) if "Usage: harness" in line)
    panel = next(i for i, line in enumerate(lines) if line.startswith("╭"))
    description = squash("\n".join(lines[usage + 1 : panel]))
    doc = COMMANDS[name].__doc__
    assert doc
    assert description == squash(doc)


@pytest.mark.parametrize("name", ["run", "chat"])
def test_help_names_the_environment_defaults(helps: dict[str, Result], name: str) -> None:
    # Written as "[default: ...]" in the help string, Rich markup would silently drop them.
    assert "[default: ($HARNESS_WORKSPACE or" in helps[name].stdout
    assert "[default: ($HARNESS_MODEL)]" in helps[name].stdout
