"""The model-facing filesystem tools: formats, caps, namespaces and the shared fallback."""

from __future__ import annotations

import asyncio
import base64
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import RuntimeContext
from harness.filesystem.base import FileInfo, GrepMatch, GrepResult, ListResult, ReadResult
from harness.filesystem.local import LocalFilesystem
from harness.kernel.message import ToolUseBlock
from harness.kernel.toolkit import Toolkit
from harness.tools import FilesystemTools
from harness.tools.filesystem import (
    DEFAULT_READ_LIMIT,
    EMPTY_FILE_REMINDER,
    MAX_LINE_CHARS,
    MAX_LIST_CHARS,
    MAX_LIST_LINES,
    MAX_READ_CHARS,
)

ALICE = RuntimeContext(session_id="s1", user_id="alice")
BOB = RuntimeContext(session_id="s1", user_id="bob")
SHARED = RuntimeContext(session_id="s1")

_CONTINUE = re.compile(r"continue with offset=(\d+)\)$")


@pytest.fixture
def tools(workspace: Path) -> FilesystemTools:
    return FilesystemTools(LocalFilesystem(workspace))


def alice_dir(workspace: Path) -> Path:
    path = workspace / "users" / "alice"
    path.mkdir(parents=True, exist_ok=True)
    return path


# -- schemas ---------------------------------------------------------------------------------


def test_six_tools_without_a_shell_and_their_schemas(tools: FilesystemTools) -> None:
    toolkit = Toolkit(tools.tools())
    assert toolkit.names == [
        "read_file",
        "write_file",
        "edit_file",
        "grep_files",
        "glob_files",
        "list_files",
    ]
    schemas = {schema.name: schema.parameters for schema in toolkit.schemas()}
    required = {name: sorted(params.get("required", [])) for name, params in schemas.items()}
    assert required == {
        "read_file": ["path"],
        "write_file": ["content", "path"],
        "edit_file": ["new_string", "old_string", "path"],
        "grep_files": ["pattern"],
        "glob_files": ["pattern"],
        "list_files": [],
    }
    properties = {name: sorted(params["properties"]) for name, params in schemas.items()}
    assert properties == {
        "read_file": ["limit", "offset", "path"],
        "write_file": ["content", "path"],
        "edit_file": ["new_string", "old_string", "path", "replace_all"],
        "grep_files": ["glob", "path", "pattern"],
        "glob_files": ["path", "pattern"],
        "list_files": ["path"],
    }
    # Optional parameters are plain optional types, not "X or null" the model must fill in.
    assert schemas["read_file"]["properties"]["offset"]["type"] == "integer"
    assert schemas["read_file"]["properties"]["limit"]["type"] == "integer"
    assert schemas["edit_file"]["properties"]["replace_all"]["type"] == "boolean"
    assert schemas["grep_files"]["properties"]["glob"]["type"] == "string"
    for schema in toolkit.schemas():
        assert schema.description, schema.name


def test_a_non_filesystem_is_refused() -> None:
    with pytest.raises(TypeError, match="AbstractFilesystem"):
        FilesystemTools(object())  # type: ignore[arg-type]


# -- read_file -------------------------------------------------------------------------------


async def test_read_numbers_lines_and_says_where_to_continue(
    workspace: Path, tools: FilesystemTools
) -> None:
    (workspace / "notes.md").write_text("\n".join(f"line {i}" for i in range(1, 11)))
    assert await tools.read_file("notes.md", SHARED, offset=2, limit=3) == (
        "3\tline 3\n4\tline 4\n5\tline 5\n... (lines 3-5 of 10; continue with offset=5)"
    )
    assert await tools.read_file("notes.md", SHARED, offset=8) == "9\tline 9\n10\tline 10"
    assert await tools.read_file("/notes.md", SHARED, limit=1) == (
        "1\tline 1\n... (lines 1-1 of 10; continue with offset=1)"
    )
    past = await tools.read_file("notes.md", SHARED, offset=10)
    assert past.startswith("Error: offset 10 is past the end of ")
    assert "10 lines" in past


async def test_read_default_limit_is_200_lines(workspace: Path, tools: FilesystemTools) -> None:
    (workspace / "big.txt").write_text("".join(f"{i}\n" for i in range(500)))
    rows = (await tools.read_file("big.txt", SHARED)).splitlines()
    assert len(rows) == DEFAULT_READ_LIMIT + 1
    assert rows[0] == "1\t0"
    assert rows[-2] == "200\t199"
    assert rows[-1] == "... (lines 1-200 of 500; continue with offset=200)"


async def test_very_long_lines_never_return_everything_again(
    workspace: Path, tools: FilesystemTools
) -> None:
    """Pain point 20: a few huge lines must not make every read return the whole file."""
    (workspace / "wide.txt").write_text(("W" * 50_000 + "\n") * 30)
    out = await tools.read_file("wide.txt", SHARED, limit=30)
    rows = out.splitlines()
    assert rows[0] == f"1\t{'W' * MAX_LINE_CHARS}... [line cut: 50,000 chars]"
    assert len(out) <= MAX_READ_CHARS + 200
    # Following the continuation lines reads every line once and stops.
    offset, seen, calls = 0, 0, 0
    while True:
        calls += 1
        out = await tools.read_file("wide.txt", SHARED, offset=offset, limit=30)
        assert len(out) <= MAX_READ_CHARS + 200
        seen += sum(1 for row in out.splitlines() if row[:1].isdigit())
        match = _CONTINUE.search(out)
        if match is None:
            break
        assert int(match.group(1)) > offset
        offset = int(match.group(1))
    assert seen == 30
    assert calls == 4  # nine cut lines (about 2,030 chars each) fit in one read


async def test_read_empty_missing_and_binary_files(workspace: Path, tools: FilesystemTools) -> None:
    (workspace / "empty.md").write_text("")
    assert await tools.read_file("empty.md", SHARED) == EMPTY_FILE_REMINDER
    missing = await tools.read_file("missing.md", SHARED)
    assert missing.startswith("Error: ")
    assert "missing.md" in missing
    assert (await tools.read_file("", SHARED)) == "Error: path is required"

    small = bytes(range(256)) * 2
    (workspace / "small.bin").write_bytes(small)
    out = await tools.read_file("small.bin", SHARED)
    assert out.startswith("small.bin is a binary file (512 bytes)")
    assert base64.b64encode(small).decode() in out

    big = bytes(range(256)) * 400
    (workspace / "big.bin").write_bytes(big)
    out = await tools.read_file("big.bin", SHARED)
    assert out.startswith("big.bin is a binary file (102,400 bytes)")
    assert base64.b64encode(big).decode()[:100] not in out
    assert len(out) < 500


async def test_read_falls_back_to_the_shared_file_for_a_user(
    workspace: Path, tools: FilesystemTools
) -> None:
    (workspace / "AGENTS.md").write_text("shared persona")
    (workspace / "knowledge").mkdir()
    (workspace / "knowledge" / "faq.md").write_text("shared faq")
    assert await tools.read_file("AGENTS.md", ALICE) == "1\tshared persona"
    assert await tools.read_file("/knowledge/faq.md", ALICE) == "1\tshared faq"
    # The user's own copy wins once it exists, for that user only.
    (alice_dir(workspace) / "AGENTS.md").write_text("alice persona")
    assert await tools.read_file("AGENTS.md", ALICE) == "1\talice persona"
    assert await tools.read_file("AGENTS.md", BOB) == "1\tshared persona"
    # A file nobody has is still an error.
    assert (await tools.read_file("knowledge/none.md", ALICE)).startswith("Error: ")


async def test_no_shared_fallback_under_users(workspace: Path, tools: FilesystemTools) -> None:
    bob = workspace / "users" / "bob"
    bob.mkdir(parents=True)
    (bob / "secret.txt").write_text("BOB-SECRET")
    for path in ("users/bob/secret.txt", "/users/bob/secret.txt", "./users/bob/secret.txt"):
        out = await tools.read_file(path, ALICE)
        assert out.startswith("Error: "), path
        assert "BOB-SECRET" not in out


async def test_writes_and_edits_never_touch_the_shared_file(
    workspace: Path, tools: FilesystemTools
) -> None:
    (workspace / "AGENTS.md").write_text("shared persona")
    # Editing a file the user only sees through the fallback does not edit the shared one.
    out = await tools.edit_file("AGENTS.md", "shared", "hacked", ALICE)
    assert out.startswith("Error: ")
    assert (workspace / "AGENTS.md").read_text() == "shared persona"
    # Writing creates the user's own copy, which the user then reads.
    assert await tools.write_file("AGENTS.md", "mine", ALICE) == "Written to AGENTS.md"
    assert (workspace / "AGENTS.md").read_text() == "shared persona"
    assert (workspace / "users" / "alice" / "AGENTS.md").read_text() == "mine"
    assert await tools.read_file("AGENTS.md", ALICE) == "1\tmine"


# -- write_file and edit_file ----------------------------------------------------------------


async def test_write_creates_new_files_only(workspace: Path, tools: FilesystemTools) -> None:
    assert await tools.write_file("docs/a.md", "hello\n", ALICE) == "Written to docs/a.md"
    assert (workspace / "users" / "alice" / "docs" / "a.md").read_text() == "hello\n"
    assert await tools.write_file("docs/a.md", "again", ALICE) == (
        "Error: Cannot write to docs/a.md because it already exists. Read and then make an "
        "edit, or write to a new path."
    )
    assert (workspace / "users" / "alice" / "docs" / "a.md").read_text() == "hello\n"
    assert await tools.write_file("top.md", "x", SHARED) == "Written to top.md"
    assert (workspace / "top.md").read_text() == "x"
    assert await tools.write_file("  ", "x", SHARED) == "Error: path is required"


async def test_edit_formats(workspace: Path, tools: FilesystemTools) -> None:
    notes = alice_dir(workspace) / "notes.md"
    notes.write_text("alpha beta\nbeta gamma\n")
    assert await tools.edit_file("notes.md", "alpha", "ALPHA", ALICE) == (
        "Edited notes.md (1 replacement(s))"
    )
    assert notes.read_text() == "ALPHA beta\nbeta gamma\n"
    assert await tools.edit_file("notes.md", "beta", "B", ALICE) == (
        "Error: String appears more than once in file. Use replace_all=true to replace every "
        "occurrence, or add surrounding context to old_string so that it matches once."
    )
    assert notes.read_text() == "ALPHA beta\nbeta gamma\n"
    assert await tools.edit_file("notes.md", "beta", "B", ALICE, replace_all=True) == (
        "Edited notes.md (2 replacement(s))"
    )
    assert notes.read_text() == "ALPHA B\nB gamma\n"
    assert await tools.edit_file("notes.md", "zeta", "Z", ALICE) == (
        "Error: String not found in file"
    )
    assert await tools.edit_file("notes.md", "", "Z", ALICE) == (
        "Error: old_string is empty; give the exact text to replace"
    )
    assert await tools.edit_file("notes.md", "B", "B", ALICE) == (
        "Error: old_string and new_string are the same; nothing would change"
    )
    missing = await tools.edit_file("nope.md", "a", "b", ALICE)
    assert missing.startswith("Error: ")
    assert not (workspace / "users" / "alice" / "nope.md").exists()


async def test_edit_normalizes_crlf_in_the_strings(workspace: Path, tools: FilesystemTools) -> None:
    notes = alice_dir(workspace) / "notes.md"
    notes.write_text("one\ntwo\nthree\n")
    assert await tools.edit_file("notes.md", "one\r\ntwo", "1\r\n2", ALICE) == (
        "Edited notes.md (1 replacement(s))"
    )
    assert notes.read_text() == "1\n2\nthree\n"


# -- grep, glob, list ------------------------------------------------------------------------


async def test_grep_formats(workspace: Path, tools: FilesystemTools) -> None:
    home = alice_dir(workspace)
    (home / "memory").mkdir()
    (home / "memory" / "a.md").write_text("red apple\ngreen pear\nred [cherry]\n")
    (home / "notes.txt").write_text("red car\n")
    out = await tools.grep_files("red", ALICE)
    assert out.splitlines() == [
        "memory/a.md:1:red apple",
        "memory/a.md:3:red [cherry]",
        "notes.txt:1:red car",
    ]
    # Literal, not a regular expression.
    assert await tools.grep_files("[cherry]", ALICE) == "memory/a.md:3:red [cherry]"
    assert await tools.grep_files("red", ALICE, glob="*.txt") == "notes.txt:1:red car"
    assert await tools.grep_files("red", ALICE, path="memory", glob="*.txt") == ("No matches found")
    assert await tools.grep_files("blue", ALICE) == "No matches found"
    assert await tools.grep_files("red", ALICE, path="nowhere") == "No matches found"
    assert await tools.grep_files("", ALICE) == (
        "Error: pattern is empty; give the text to look for"
    )


async def test_glob_formats(workspace: Path, tools: FilesystemTools) -> None:
    home = alice_dir(workspace)
    (home / "memory" / "sub").mkdir(parents=True)
    (home / "memory" / "2026-01-01.md").write_text("abc")
    (home / "memory" / "sub" / "2026-01-02.md").write_text("abcdef")
    (home / "top.md").write_text("12345")
    (home / "other.txt").write_text("")
    assert (await tools.glob_files("**/*.md", ALICE)).splitlines() == [
        "memory/2026-01-01.md (3 bytes)",
        "memory/sub/2026-01-02.md (6 bytes)",
        "top.md (5 bytes)",
    ]
    assert (await tools.glob_files("**/*.md", ALICE, path="memory")).splitlines() == [
        "memory/2026-01-01.md (3 bytes)",
        "memory/sub/2026-01-02.md (6 bytes)",
    ]
    assert await tools.glob_files("*.md", ALICE, path="/memory/") == (
        "memory/2026-01-01.md (3 bytes)"
    )
    assert await tools.glob_files("*.pdf", ALICE) == "No matching files found"
    assert await tools.glob_files(" ", ALICE) == (
        "Error: pattern is empty; give a glob pattern such as **/*.md"
    )


async def test_list_formats(workspace: Path, tools: FilesystemTools) -> None:
    home = alice_dir(workspace)
    (home / "memory").mkdir()
    (home / "memory" / "a.md").write_text("abc")
    (home / "notes.txt").write_text("1234567")
    (home / "empty").mkdir()
    assert (await tools.list_files(ALICE)).splitlines() == [
        "[DIR]  empty",
        "[DIR]  memory",
        "[FILE] notes.txt (7 bytes)",
    ]
    assert await tools.list_files(ALICE, path="memory") == "[FILE] memory/a.md (3 bytes)"
    assert await tools.list_files(ALICE, path="empty") == "Empty or not a directory: empty"
    assert await tools.list_files(ALICE, path="missing") == "Empty or not a directory: missing"
    assert await tools.list_files(ALICE, path="notes.txt") == (
        "Empty or not a directory: notes.txt"
    )


async def test_listings_are_capped(workspace: Path, tools: FilesystemTools) -> None:
    home = alice_dir(workspace)
    (home / "many").mkdir()
    for i in range(450):
        (home / "many" / f"f{i:03}.txt").write_text(f"hit {i}\n")
    for out in (
        await tools.list_files(ALICE, path="many"),
        await tools.glob_files("*.txt", ALICE, path="many"),
        await tools.grep_files("hit", ALICE, path="many"),
    ):
        rows = out.splitlines()
        assert len(rows) == MAX_LIST_LINES + 1
        assert rows[-1].startswith("... (250 more ")
        assert rows[-1].endswith("not shown; narrow the path or pattern to see them)")
    # Long grep lines are cut and the characters capped as well.
    (home / "wide").mkdir()
    for i in range(40):
        (home / "wide" / f"w{i:02}.txt").write_text("needle " + "x" * 5_000 + "\n")
    out = await tools.grep_files("needle", ALICE, path="wide")
    assert len(out) <= MAX_LIST_CHARS + 200
    rows = out.splitlines()
    assert rows[0].endswith("... [line cut: 5,007 chars]")
    assert re.fullmatch(r"\.\.\. \(\d+ more matches not shown; .*\)", rows[-1])


class LeakyFilesystem(LocalFilesystem):
    """A backend that forgets to hide ``users/`` from a call without a user."""

    async def ls(self, path: str = "/", ctx: RuntimeContext | None = None) -> ListResult:
        return ListResult([FileInfo("users", is_dir=True), FileInfo("a.md", size=1)])

    async def glob(
        self, pattern: str, path: str = "/", ctx: RuntimeContext | None = None
    ) -> ListResult:
        return ListResult([FileInfo("Users/bob/x.md", size=1), FileInfo("a.md", size=1)])

    async def grep(
        self,
        pattern: str,
        path: str = "/",
        glob: str | None = None,
        ctx: RuntimeContext | None = None,
    ) -> GrepResult:
        return GrepResult([GrepMatch("users/bob/x.md", 1, "x"), GrepMatch("a.md", 2, "x")])


async def test_users_namespaces_never_show_in_a_no_user_listing(workspace: Path) -> None:
    tools = FilesystemTools(LeakyFilesystem(workspace))
    assert await tools.list_files(SHARED) == "[FILE] a.md (1 bytes)"
    assert await tools.glob_files("**/*", SHARED) == "a.md (1 bytes)"
    assert await tools.grep_files("x", SHARED) == "a.md:2:x"
    # A user's own namespace may well have a directory called users.
    assert (await tools.list_files(ALICE)).splitlines() == ["[DIR]  users", "[FILE] a.md (1 bytes)"]


async def test_no_fallback_for_users_in_any_letter_case(workspace: Path) -> None:
    tools = FilesystemTools(LocalFilesystem(workspace))
    shared_users = workspace / "Users" / "bob"
    shared_users.mkdir(parents=True)
    (shared_users / "secret.txt").write_text("BOB-SECRET")
    out = await tools.read_file("Users/bob/secret.txt", ALICE)
    assert out.startswith("Error: ")
    assert "BOB-SECRET" not in out


async def test_tools_run_through_the_toolkit_with_the_calls_context(workspace: Path) -> None:
    """The toolkit injects the context; the model passes only its own arguments."""
    toolkit = Toolkit(FilesystemTools(LocalFilesystem(workspace)).tools())
    write = ToolUseBlock(
        id="c1", name="write_file", input={"path": "n.md", "content": "one\ntwo\n"}
    )
    assert (await toolkit.call(write, ALICE)).output == "Written to n.md"
    assert (workspace / "users" / "alice" / "n.md").read_text() == "one\ntwo\n"
    read = ToolUseBlock(id="c2", name="read_file", input={"path": "n.md", "offset": 1})
    assert (await toolkit.call(read, ALICE)).output == "2\ttwo"
    edit = ToolUseBlock(
        id="c3", name="edit_file", input={"path": "n.md", "old_string": "two", "new_string": "2"}
    )
    assert (await toolkit.call(edit, ALICE)).output == "Edited n.md (1 replacement(s))"
    listing = ToolUseBlock(id="c4", name="list_files", input={})
    assert (await toolkit.call(listing, BOB)).output == "Empty or not a directory: /"


_KEPT_SPELLINGS = st.sampled_from(["agents", "Agents", "AGENTS", "./agents", "/agents", "agents/"])


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    top=_KEPT_SPELLINGS,
    rest=st.sampled_from(["harness/tasks/t.json", "harness/context/s/messages.jsonl", "x.md"]),
    caller=st.sampled_from([ALICE, SHARED]),
)
async def test_the_harness_records_cannot_be_written_by_the_tools(
    tmp_path_factory: pytest.TempPathFactory, top: str, rest: str, caller: RuntimeContext
) -> None:
    """``agents/`` is the harness's: a forged task record or a directory where a session file
    belongs could speak for another user or stop every call, so the tools write elsewhere."""
    workspace = tmp_path_factory.mktemp("kept")
    tools = FilesystemTools(LocalFilesystem(workspace))
    path = f"{top.rstrip('/')}/{rest}"
    written = await tools.write_file(path, "forged", caller)
    assert written.startswith("Error:"), written
    assert "where the harness keeps its own records" in written
    edited = await tools.edit_file(path, "a", "b", caller)
    assert "where the harness keeps its own records" in edited
    assert not any(p.is_file() for p in workspace.rglob("*"))
    assert (
        await tools.write_file("notes/agents.md", "fine", caller)
    ) == "Written to notes/agents.md"


class _HangingDisk(LocalFilesystem):
    """A disk whose reads and searches never answer (a hung network mount)."""

    async def read(self, *args: object, **kwargs: object) -> ReadResult:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def grep(self, *args: object, **kwargs: object) -> GrepResult:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def test_a_call_to_a_disk_that_hangs_is_given_up_on(workspace: Path) -> None:
    tools = FilesystemTools(_HangingDisk(workspace), timeout_seconds=0.2)
    for answer in (await tools.read_file("a.md", ALICE), await tools.grep_files("x", ALICE)):
        assert answer.startswith("Error: the file operation took longer than 0.2 s")
