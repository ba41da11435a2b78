"""Every refusal and failure of every file tool is an error result (``is_error``), whatever the
tool and the reason, so traces, the events API and spans count it as a failure."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import RuntimeContext
from harness.filesystem.local import LocalFilesystem
from harness.filesystem.shell import LocalShell
from harness.kernel.message import ToolResultBlock, ToolUseBlock
from harness.kernel.toolkit import Toolkit
from harness.tools import FilesystemTools

ALICE = RuntimeContext(session_id="s1", user_id="alice")
NOBODY = RuntimeContext(session_id="s1")

names = st.text(st.sampled_from("abcxyz019_-"), min_size=1, max_size=8)
escapes = st.one_of(
    st.builds(lambda n: f"../{n}", names),
    st.builds(lambda n: f"a/../../{n}", names),
    st.builds(lambda n: f"~/{n}", names),
    st.builds(lambda n: f"{n}\x00.md", names),
    st.builds(lambda n: "x" * 256 + f"/{n}", names),  # a name longer than any disk allows
)
kept = st.builds(lambda a, n: f"agents/{a}/{n}.md", names, names)  # the harness's own records
missing = st.builds(lambda n: f"missing/{n}.md", names)


def calls() -> st.SearchStrategy[tuple[str, dict[str, Any], RuntimeContext]]:
    """A refused file tool call: the tool, its arguments and whose call it is."""
    any_ctx = st.sampled_from([ALICE, NOBODY])
    bad_path = st.one_of(escapes, kept)
    return st.one_of(
        st.tuples(
            st.just("write_file"),
            st.fixed_dictionaries({"path": bad_path, "content": names}),
            any_ctx,
        ),
        st.tuples(
            st.just("write_file"), st.just({"path": "notes.md", "content": "again"}), any_ctx
        ),
        st.tuples(st.just("write_file"), st.just({"path": " ", "content": "x"}), any_ctx),
        st.tuples(
            st.just("write_file"),
            st.builds(lambda n: {"path": f"users/{n}/x.md", "content": "x"}, names),
            st.just(NOBODY),
        ),
        st.tuples(
            st.just("edit_file"),
            st.fixed_dictionaries(
                {
                    "path": st.one_of(bad_path, missing),
                    "old_string": names,
                    "new_string": st.just("new"),
                }
            ),
            any_ctx,
        ),
        st.tuples(
            st.just("edit_file"),
            st.builds(
                lambda n: {"path": "notes.md", "old_string": f"absent {n}", "new_string": "y"},
                names,
            ),
            any_ctx,
        ),
        st.tuples(
            st.just("edit_file"),
            st.just({"path": "notes.md", "old_string": "twice", "new_string": "once"}),
            any_ctx,
        ),
        st.tuples(
            st.just("edit_file"),
            st.just({"path": "notes.md", "old_string": "", "new_string": "y"}),
            any_ctx,
        ),
        st.tuples(
            st.just("edit_file"),
            st.just({"path": "notes.md", "old_string": "twice", "new_string": "twice"}),
            any_ctx,
        ),
        st.tuples(
            st.just("read_file"),
            st.fixed_dictionaries({"path": st.one_of(escapes, missing)}),
            any_ctx,
        ),
        st.tuples(
            st.just("read_file"),
            st.builds(lambda o: {"path": "notes.md", "offset": o}, st.integers(5, 10_000)),
            any_ctx,
        ),
        st.tuples(
            st.just("grep_files"),
            st.fixed_dictionaries({"pattern": names, "path": escapes}),
            any_ctx,
        ),
        st.tuples(st.just("grep_files"), st.just({"pattern": ""}), any_ctx),
        st.tuples(
            st.just("glob_files"),
            st.fixed_dictionaries({"pattern": st.just("**/*"), "path": escapes}),
            any_ctx,
        ),
        st.tuples(st.just("glob_files"), st.just({"pattern": " "}), any_ctx),
        st.tuples(st.just("list_files"), st.fixed_dictionaries({"path": escapes}), any_ctx),
        st.tuples(st.just("list_files"), st.just({"path": "users"}), st.just(NOBODY)),
    )


def run(
    toolkit: Toolkit, name: str, arguments: dict[str, Any], ctx: RuntimeContext
) -> ToolResultBlock:
    return asyncio.run(toolkit.call(ToolUseBlock(id="c1", name=name, input=arguments), ctx))


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(call=calls())
def test_a_refused_call_is_an_error_result(
    workspace: Path, call: tuple[str, dict[str, Any], RuntimeContext]
) -> None:
    for notes in (workspace / "notes.md", workspace / "users" / "alice" / "notes.md"):
        notes.parent.mkdir(parents=True, exist_ok=True)
        notes.write_text("twice\ntwice\n")
    toolkit = Toolkit(FilesystemTools(LocalFilesystem(workspace)).tools())
    name, arguments, ctx = call
    result = run(toolkit, name, arguments, ctx)
    assert result.text.startswith("Error: "), (name, arguments, result.text)
    assert result.is_error, (name, arguments, result.text)


class BrokenDisk(LocalFilesystem):
    """A backend whose every operation fails as a disk or a store can."""

    def __init__(self, root: Path, failure: Exception) -> None:
        super().__init__(root)
        self.failure = failure

    async def _fail(self, *args: Any, **kwargs: Any) -> Any:
        raise self.failure

    read = write = edit = grep = glob = ls = _fail


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    failure=st.sampled_from([OSError(5, "Input/output error"), ValueError("bad bytes")]),
    name=st.sampled_from(
        ["read_file", "write_file", "edit_file", "grep_files", "glob_files", "list_files"]
    ),
)
def test_a_backend_failure_is_an_error_result(
    workspace: Path, failure: Exception, name: str
) -> None:
    arguments = {
        "read_file": {"path": "a.md"},
        "write_file": {"path": "a.md", "content": "x"},
        "edit_file": {"path": "a.md", "old_string": "x", "new_string": "y"},
        "grep_files": {"pattern": "x"},
        "glob_files": {"pattern": "*"},
        "list_files": {},
    }[name]
    toolkit = Toolkit(FilesystemTools(BrokenDisk(workspace, failure)).tools())
    result = run(toolkit, name, arguments, ALICE)
    assert result.is_error, (name, result.text)
    assert result.text == f"Error: {failure}"


def test_a_successful_call_is_not_an_error(workspace: Path) -> None:
    toolkit = Toolkit(FilesystemTools(LocalFilesystem(workspace)).tools())
    written = run(toolkit, "write_file", {"path": "Error: a.md", "content": "x"}, ALICE)
    listed = run(toolkit, "glob_files", {"pattern": "*"}, ALICE)
    assert (written.text, written.is_error) == ("Written to Error: a.md", False)
    assert (listed.text, listed.is_error) == (
        "Error: a.md (1 bytes)",
        False,
    )  # a name, not a failure


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    arguments=st.one_of(
        st.just({"command": " "}),
        st.builds(lambda t: {"command": "true", "timeout": t}, st.floats(max_value=0)),
        st.builds(lambda p: {"command": "true", "working_directory": p}, escapes),
        st.builds(lambda p: {"command": "true", "working_directory": p}, missing),
        st.just({"command": "true", "working_directory": "/etc"}),
    )
)
def test_a_refused_command_is_an_error_result(workspace: Path, arguments: dict[str, Any]) -> None:
    toolkit = Toolkit(FilesystemTools(LocalShell(workspace)).tools())
    result = run(toolkit, "execute", arguments, ALICE)
    assert result.text.startswith("Error: "), (arguments, result.text)
    assert result.is_error, (arguments, result.text)
