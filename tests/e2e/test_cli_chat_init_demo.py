"""`harness init`, `harness chat`, `harness demo` and the help of every command, end to end."""

from __future__ import annotations

import json
import re
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from _cli_runner import (
    Cli,
    Result,
    make_cli,
    read_jsonl,
    read_requests,
    read_session,
    squash,
    turns_of,
    write_script,
)

from harness.cli.demo import DEMO_SCRIPT
from harness.cli.main import app

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

    assert (result.returncode, result.stderr) == (0, ""), result
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

    assert (result.returncode, result.stderr) == (0, ""), result
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
    _, second = read_requests(tmp_path / "requests.jsonl")
    assert turns_of(second) == [("system", ""), ("user", "hi")]


def test_chat_survives_a_failed_turn(cli: Cli, tmp_path: Path) -> None:
    script = write_script(tmp_path / "script.json", [{"match": "^second$", "text": "Still here."}])
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


def test_chat_ends_cleanly_at_end_of_input(cli: Cli, tmp_path: Path) -> None:
    script = write_script(
        tmp_path / "script.json", [{"text": "Only reply.", "repeat": True}], log="requests.jsonl"
    )
    workspace = tmp_path / "ws"

    # Blank lines are ignored; then input ends without /exit.
    result = cli.run(
        "chat", "-w", workspace, "-s", "c1", "-m", f"scripted:{script}", stdin="\n   \nhello\n"
    )

    assert result.returncode == 0, result
    assert result.stdout.count("Only reply.") == 1
    assert "error" not in result.stderr
    assert len(read_requests(tmp_path / "requests.jsonl")) == 1
    assert turns_of(read_session(workspace, "c1")) == [
        ("user", "hello"),
        ("assistant", "Only reply."),
    ]


# --- demo ---------------------------------------------------------------------------------------

DEMO_SECTIONS = ("1. A call with a tool", "2. The session, restored", "3. Files in the workspace")


def assert_demo_ran_in(root: Path, stdout: str) -> None:
    text = squash(stdout)
    for section in DEMO_SECTIONS:
        assert section in text
    assert "guide: A marathon is about 42.2 km, Ada." in text
    assert "guide: You asked how far a marathon is: 42.2 km." in text
    assert 'The model called convert_miles({"miles": 26.2})' in text
    assert "AGENTS.md yes, MEMORY.md yes, session id yes." in text
    assert "restored 4 earlier messages of session 'tour'" in text
    # The workspace is printed whole, on one line, however long its path.
    assert f"Workspace: {root}" in stdout.splitlines()
    assert f"Look around: {root}" in stdout.splitlines()

    messages = read_session(root, "tour", user="ada", agent="guide")
    assert [m["role"] for m in messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]
    assert messages[2]["content"][0]["output"] == "42.2 km"
    assert json.loads((root / "demo-script.json").read_text(encoding="utf-8")) == DEMO_SCRIPT
    requests = read_jsonl(root / "demo-requests.jsonl")
    assert len(requests) == 3  # the tool call, the answer, the follow-up


def test_demo_in_a_given_workspace(cli: Cli, tmp_path: Path) -> None:
    root = tmp_path / "a-demo-workspace-with-a-long-enough-name-to-pass-80-columns" / "tour"
    started = time.monotonic()

    result = cli.run("demo", "--workspace", root, timeout=60)

    assert time.monotonic() - started < 30
    assert (result.returncode, result.stderr) == (0, ""), result
    assert_demo_ran_in(root, result.stdout)


def test_demo_in_a_new_temporary_directory(cli: Cli, tmp_path: Path) -> None:
    temp = tmp_path / "tmp-for-the-demo-with-a-name-long-enough-to-pass-the-console-width"
    temp.mkdir()

    result = cli.run("demo", env={"TMPDIR": str(temp)}, timeout=60)

    assert (result.returncode, result.stderr) == (0, ""), result
    match = re.search(r"^Look around: (.+)$", result.stdout, re.MULTILINE)
    assert match, result
    root = Path(match.group(1))
    try:
        assert root.parent == temp
        assert root.name.startswith("harness-demo-")
        assert_demo_ran_in(root, result.stdout)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    assert list(cli.cwd.iterdir()) == []


# --- help ---------------------------------------------------------------------------------------

COMMANDS = {
    (c.name or c.callback.__name__): c.callback for c in app.registered_commands if c.callback
}


@pytest.fixture(scope="module")
def helps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Result]:
    """``harness --help`` (key ``""``) and ``harness <command> --help``, run side by side."""
    cli = make_cli(tmp_path_factory.mktemp("help"))
    names = ["", *COMMANDS]
    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        results = pool.map(lambda name: cli.run(*[name] if name else [], "--help"), names)
        return dict(zip(names, results, strict=True))


def test_commands_are_the_documented_four() -> None:
    assert sorted(COMMANDS) == ["chat", "demo", "init", "run"]


def test_top_level_help_lists_every_command(helps: dict[str, Result]) -> None:
    result = helps[""]

    assert (result.returncode, result.stderr) == (0, ""), result
    for name in COMMANDS:
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
