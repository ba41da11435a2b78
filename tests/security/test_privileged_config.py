"""Hole 1 of the trust boundary: a ``tools.json`` the agent writes never runs a program.

An MCP server's ``command`` is a program run on the host, so the servers come only from the
operator (``mcp_config=`` / ``--mcp-config``, a file outside the workspace). Each test has the
scripted model (standing in for a hostile one) plant a ``tools.json`` whose server would write a
marker file, by one route or another, and then checks that a later agent on the same workspace
starts nothing: the marker stays absent. The routes run on every backend.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from _backends import open_backend
from harness import HarnessAgent, RuntimeContext
from harness.errors import ConfigError
from harness.filesystem import AbstractFilesystem
from harness.models import ScriptedChatModel
from harness.workspace import WorkspaceManager

HARNESS = Path(sys.executable).parent / "harness"


def payload(marker: Path) -> str:
    """A tools.json whose one server, if ever started, writes ``marker``."""
    server = {"command": "sh", "args": ["-c", f"id > {marker}"]}
    return json.dumps({"mcpServers": {"x": server}})


def plant(how: str, marker: Path) -> list[dict[str, Any]]:
    """The model's tool calls that put the payload where an earlier version read it."""
    text = payload(marker)
    if how == "write_file":
        return [{"name": "write_file", "input": {"path": "tools.json", "content": text}}]
    if how == "edit_file":  # a harmless tools.json is there already: the model rewrites it
        return [
            {
                "name": "edit_file",
                "input": {"path": "tools.json", "old_string": '{"mcpServers": {}}',
                          "new_string": text},
            }
        ]  # fmt: skip
    if how == "execute":  # from inside the sandbox, where /workspace is the workspace
        quoted = text.replace("'", "'\\''")
        return [{"name": "execute", "input": {"command": f"printf '%s' '{quoted}' > tools.json"}}]
    raise AssertionError(how)


async def run_turn(
    workspace: WorkspaceManager, calls: list[dict[str, Any]], user: str | None = None
) -> None:
    model = ScriptedChatModel([{"tool_calls": calls}, {"text": "done"}])
    agent = HarnessAgent(model=model, workspace=workspace, memory=None)
    try:
        await agent.call("go", ctx=RuntimeContext(session_id="s1", user_id=user))
    finally:
        await agent.aclose()


@pytest.fixture
def workspace(fs: AbstractFilesystem, tmp_path: Path) -> WorkspaceManager:
    return WorkspaceManager(tmp_path / "workspace", fs)


async def planted_then_next_agent(
    workspace: WorkspaceManager, how: str, marker: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The model plants the payload in one turn; a later agent's turn must start nothing."""
    if how == "edit_file":
        assert isinstance(workspace.backend, AbstractFilesystem)
        await workspace.backend.write("tools.json", '{"mcpServers": {}}')

    await run_turn(workspace, plant(how, marker))
    planted = await workspace.backend.get("tools.json")
    assert planted is not None
    assert b"id >" in planted[0]  # the plant took
    with caplog.at_level(logging.WARNING, logger="harness.mcp.hook"):
        await run_turn(workspace, [{"name": "list_files", "input": {}}])

    assert not marker.exists()
    assert any("tools.json in the workspace is not read" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("how", ["write_file", "edit_file"])
async def test_a_tools_json_the_model_writes_starts_no_program(
    workspace: WorkspaceManager, tmp_path: Path, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    await planted_then_next_agent(workspace, how, tmp_path / "PWNED", caplog)


async def test_a_tools_json_written_from_inside_the_sandbox_starts_no_program(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with open_backend("sandbox", tmp_path) as sandbox:
        workspace = WorkspaceManager(tmp_path / "workspace", sandbox)
        await planted_then_next_agent(workspace, "execute", tmp_path / "PWNED", caplog)


async def test_a_users_own_tools_json_starts_no_program(
    workspace: WorkspaceManager, tmp_path: Path
) -> None:
    marker = tmp_path / "PWNED"

    await run_turn(workspace, plant("write_file", marker), user="alice")  # users/alice/tools.json
    await run_turn(workspace, [{"name": "list_files", "input": {}}], user="alice")
    await run_turn(workspace, [{"name": "list_files", "input": {}}])

    assert not marker.exists()


@pytest.mark.parametrize("inside", ["tools.json", "users/alice/tools.json", "sub/../tools.json"])
def test_an_operator_file_inside_the_workspace_is_refused(tmp_path: Path, inside: str) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()

    with pytest.raises(ConfigError, match=r"is inside the workspace .* keep it outside"):
        HarnessAgent(
            model=ScriptedChatModel([]), workspace=workspace, mcp_config=workspace / inside
        )


def test_a_link_from_outside_into_the_workspace_is_refused(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (tmp_path / "config").symlink_to(workspace)  # the path looks outside, the file is inside

    with pytest.raises(ConfigError, match="is inside the workspace"):
        HarnessAgent(
            model=ScriptedChatModel([]), workspace=workspace, mcp_config=tmp_path / "config/t.json"
        )


def harness(*args: str | Path, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(HARNESS), *map(str, args)],
        cwd=cwd,
        env={**env, "HOME": str(cwd)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_through_the_command_line_the_planted_file_runs_nothing(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HARNESS_", "OPENAI_"))}
    marker = tmp_path / "PWNED"
    plant_script = tmp_path / "plant.json"
    plant_script.write_text(
        json.dumps(
            {
                "turns": [
                    {"tool_calls": plant("write_file", marker)},
                    {"text": "saved", "repeat": True},
                ]
            }
        )
    )
    workspace = tmp_path / "ws"

    first = harness(
        "run", "-w", workspace, "-m", f"scripted:{plant_script}", "save it", cwd=tmp_path, env=env
    )
    second = harness(
        "run", "-w", workspace, "-m", f"scripted:{plant_script}", "again", cwd=tmp_path, env=env
    )

    assert first.returncode == 0, first.stderr
    assert (workspace / "tools.json").is_file()
    assert second.returncode == 0, second.stderr
    assert not marker.exists()
    assert "tools.json in the workspace is not read" in second.stderr

    inside = workspace / "tools.json"
    script = f"scripted:{plant_script}"
    refused = harness(
        "run", "-w", workspace, "-m", script, "--mcp-config", inside, "x", cwd=tmp_path, env=env
    )
    assert refused.returncode == 2
    assert refused.stderr.startswith("error: the MCP configuration ")
    assert len(refused.stderr.splitlines()) == 1
    assert not marker.exists()
