"""The ``execute`` tool: when it is offered, its output format, and its checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import RuntimeContext
from harness.filesystem.base import ExecuteResult, ShellFilesystem
from harness.filesystem.local import LocalFilesystem
from harness.filesystem.shell import LocalShell
from harness.kernel.toolkit import Toolkit
from harness.tools import FilesystemTools

ALICE = RuntimeContext(session_id="s1", user_id="alice")
SHARED = RuntimeContext(session_id="s1")


class RecordingShell(LocalFilesystem, ShellFilesystem):
    """A filesystem whose ``execute`` answers a set result and records what it was asked."""

    def __init__(self, root: Path, result: ExecuteResult) -> None:
        super().__init__(root)
        self.result = result
        self.calls: list[tuple[str, float | None, str | None, RuntimeContext | None]] = []

    async def execute(
        self,
        command: str,
        timeout: float | None = None,  # noqa: ASYNC109
        working_directory: str | None = None,
        ctx: RuntimeContext | None = None,
    ) -> ExecuteResult:
        self.calls.append((command, timeout, working_directory, ctx))
        return self.result


def recording(
    workspace: Path, output: str, code: int = 0, truncated: bool = False
) -> RecordingShell:
    return RecordingShell(
        workspace, ExecuteResult(output=output, exit_code=code, truncated=truncated)
    )


def test_execute_is_offered_only_with_a_shell(workspace: Path) -> None:
    plain = [tool.__name__ for tool in FilesystemTools(LocalFilesystem(workspace)).tools()]
    assert "execute" not in plain
    toolkit = Toolkit(FilesystemTools(LocalShell(workspace)).tools())
    assert toolkit.names[-1] == "execute"
    schema = toolkit.schemas()[-1].parameters
    assert sorted(schema["properties"]) == ["command", "timeout", "working_directory"]
    assert schema["required"] == ["command"]
    assert schema["properties"]["timeout"]["type"] == "number"
    assert schema["properties"]["working_directory"]["type"] == "string"


@pytest.mark.parametrize(
    ("output", "code", "truncated", "expected"),
    [
        ("hello\n", 0, False, "Exit code: 0\n\nhello"),
        ("", 3, False, "Exit code: 3"),
        ("  \n", 1, False, "Exit code: 1"),
        ("line 1\nline 2", 0, True, "Exit code: 0\n\nline 1\nline 2\n(output was truncated)"),
        ("", 0, True, "Exit code: 0\n(output was truncated)"),
        ("boom\n[stderr] bad", 127, False, "Exit code: 127\n\nboom\n[stderr] bad"),
    ],
)
async def test_execute_output_format(
    workspace: Path, output: str, code: int, truncated: bool, expected: str
) -> None:
    fs = recording(workspace, output, code, truncated)
    assert await FilesystemTools(fs).execute("anything", ALICE) == expected


async def test_execute_passes_the_call_on(workspace: Path) -> None:
    fs = recording(workspace, "ok")
    tools = FilesystemTools(fs)
    (workspace / "users" / "alice" / "sub").mkdir(parents=True)
    await tools.execute("ls", ALICE)
    await tools.execute("ls", ALICE, working_directory="sub", timeout=5)
    await tools.execute("ls", ALICE, working_directory="  ", timeout=0.5)
    assert fs.calls == [
        ("ls", None, None, ALICE),
        ("ls", 5, "sub", ALICE),
        ("ls", 0.5, None, ALICE),
    ]


@pytest.mark.parametrize(
    ("command", "directory", "seconds", "expected"),
    [
        ("", None, None, "Error: command is empty; give a shell command to run"),
        ("ls", None, 0, "Error: timeout must be a positive number of seconds, got 0"),
        ("ls", None, -5, "Error: timeout must be a positive number of seconds, got -5"),
        (
            "ls",
            "/tmp",
            None,
            "Error: working_directory '/tmp' is an absolute path; give a directory relative "
            "to the workspace",
        ),
        (
            "ls",
            "nope",
            None,
            "Error: working_directory 'nope' does not exist in the workspace; create it first "
            "or leave working_directory out",
        ),
    ],
)
async def test_execute_refuses_bad_requests_before_running(
    workspace: Path, command: str, directory: str | None, seconds: float | None, expected: str
) -> None:
    fs = recording(workspace, "ran")
    out = await FilesystemTools(fs).execute(
        command, ALICE, working_directory=directory, timeout=seconds
    )
    assert out == expected
    assert fs.calls == []


@pytest.mark.parametrize("directory", ["..", "../bob", "a/../..", "~", "~/x", "a\x00b"])
async def test_execute_refuses_escaping_directories(workspace: Path, directory: str) -> None:
    fs = recording(workspace, "ran")
    out = await FilesystemTools(fs).execute("ls", ALICE, working_directory=directory)
    assert out.startswith("Error: working_directory: "), out
    assert fs.calls == []


# -- a real shell ----------------------------------------------------------------------------


async def test_a_real_command_in_the_users_namespace(workspace: Path) -> None:
    tools = FilesystemTools(LocalShell(workspace))
    assert await tools.execute("echo hi", ALICE) == "Exit code: 0\n\nhi"
    assert await tools.execute("exit 3", ALICE) == "Exit code: 3\n\n<no output>"
    assert await tools.execute("echo oops >&2; exit 1", ALICE) == ("Exit code: 1\n\n[stderr] oops")
    # Files a command writes land in the caller's namespace and the file tools see them.
    assert await tools.execute("mkdir -p sub && echo made > sub/f.txt", ALICE) == (
        "Exit code: 0\n\n<no output>"
    )
    assert (workspace / "users" / "alice" / "sub" / "f.txt").read_text() == "made\n"
    assert await tools.read_file("sub/f.txt", ALICE) == "1\tmade"
    assert await tools.execute("pwd", ALICE, working_directory="sub") == (
        f"Exit code: 0\n\n{(workspace / 'users' / 'alice' / 'sub').resolve()}"
    )
    assert await tools.execute("pwd", SHARED) == f"Exit code: 0\n\n{workspace.resolve()}"


async def test_a_real_command_times_out_and_output_is_truncated(workspace: Path) -> None:
    tools = FilesystemTools(LocalShell(workspace, max_output_chars=100))
    out = await tools.execute("sleep 5", ALICE, timeout=0.3)
    assert out.startswith("Exit code: 124\n\nCommand timed out after 0.3")
    out = await tools.execute("yes | head -c 100000", ALICE)
    assert out.startswith("Exit code: 0\n\ny\ny\n")
    assert out.endswith("(output was truncated)")
    assert len(out) < 400


async def test_a_symlink_out_is_not_a_working_directory(workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    home = workspace / "users" / "alice"
    home.mkdir(parents=True)
    (home / "out").symlink_to(outside)
    out = await FilesystemTools(LocalShell(workspace)).execute(
        "touch planted", ALICE, working_directory="out"
    )
    assert out.startswith("Error: "), out
    assert list(outside.iterdir()) == []


async def test_an_offloaded_result_is_reachable_by_read_file_and_the_shell(
    workspace: Path,
) -> None:
    """Pain point 22: an evicted result lives where both the file tools and commands see it."""
    fs = LocalShell(workspace)
    tools = FilesystemTools(fs)
    await fs.put("large_tool_results/agent/dump-1.txt", b"row 0\nrow 1\n", ALICE)
    assert await tools.read_file("large_tool_results/agent/dump-1.txt", ALICE, offset=1) == (
        "2\trow 1"
    )
    assert await tools.execute("tail -n 1 large_tool_results/agent/dump-1.txt", ALICE) == (
        "Exit code: 0\n\nrow 1"
    )
