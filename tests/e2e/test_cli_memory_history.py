"""`harness memory consolidate` refusing a bad answer, `harness memory history` and `restore`.

The command talks through the real ``openai`` SDK to a local server speaking the protocol, the
setup of the report: a cut-off answer (``finish_reason: "length"``) and ``NO_REPLY`` must leave
MEMORY.md as it was, with the reason on stderr and exit code 1.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from _cli_runner import Cli, make_cli

from _servers import OpenAIServer
from harness.memory.index import MemoryIndex

MEMORY = "# Memory\n\n## Health\n- Allergic to penicillin\n\n## Work\n- Nurse at St. Mary's\n"
GOOD = MEMORY + "\n## Family\n- Sister Ana lives in Porto\n"


@pytest.fixture
def server(openai_server: OpenAIServer) -> OpenAIServer:
    return openai_server


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return make_cli(tmp_path)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    (root / "MEMORY.md").write_text(MEMORY, encoding="utf-8")
    (root / "memory" / "2026-11-30.md").write_text("- Sister Ana lives in Porto\n")
    return root


def answer(server: OpenAIServer, text: str, finish: str) -> None:
    server.queue_stream(
        [
            {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
        ]
    )


def consolidate(cli: Cli, server: OpenAIServer, workspace: Path) -> tuple[int, str, str]:
    env = {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": f"{server.url}/v1"}
    result = cli.run(
        "memory", "consolidate", "-w", workspace, "--model", "openai:gpt-test", env=env
    )
    return result.returncode, result.stdout, result.stderr


@pytest.mark.parametrize(
    ("text", "finish", "why"),
    [("# Memory\n## Health\n- Allergic to pen", "length", "cut by its token limit"),
     ("NO_REPLY", "stop", "'NO_REPLY', not a memory file")],
    ids=["length", "no-reply"],
)  # fmt: skip
def test_a_bad_answer_is_refused_and_memory_is_kept(
    cli: Cli, server: OpenAIServer, workspace: Path, text: str, finish: str, why: str
) -> None:
    answer(server, text, finish)

    code, stdout, stderr = consolidate(cli, server, workspace)

    assert code == 1, stderr
    assert stdout == ""
    assert stderr.splitlines()[-1].startswith("MEMORY.md unchanged: refused: ")
    assert why in stderr
    assert (workspace / "MEMORY.md").read_text(encoding="utf-8") == MEMORY
    assert not (workspace / "memory" / ".history").exists()


def test_history_lists_and_restore_brings_back_the_replaced_text(
    cli: Cli, server: OpenAIServer, workspace: Path
) -> None:
    answer(server, GOOD, "stop")
    code, stdout, stderr = consolidate(cli, server, workspace)
    assert (code, stdout, stderr) == (0, "MEMORY.md updated from 1 daily logs\n", "")

    listed = cli.run("memory", "history", "-w", workspace)
    assert listed.returncode == 0, listed
    (version,) = re.findall(r"\d{8}T\d{6}\.\d{6}Z", listed.stdout)
    shown = cli.run("memory", "history", version, "-w", workspace)
    assert (shown.returncode, shown.stdout) == (0, MEMORY), shown

    restored = cli.run("memory", "restore", version, "-w", workspace)

    assert restored.returncode == 0, restored
    assert restored.stdout.startswith(f"MEMORY.md restored from version {version}")
    assert (workspace / "MEMORY.md").read_text(encoding="utf-8") == MEMORY
    again = cli.run("memory", "history", "-w", workspace)
    assert len(re.findall(r"\d{8}T\d{6}\.\d{6}Z", again.stdout)) == 2  # GOOD is kept as well
    # The index (which a running agent searches without catching up) holds MEMORY.md as
    # restored: the consolidated line is only in the daily log it came from.
    with MemoryIndex(workspace.parent, workspace=workspace) as index:
        hits = index.search("Porto", 10)
    assert sorted(hit.path for hit in hits) == ["memory/2026-11-30.md"]


def test_restoring_an_unknown_version_is_one_line(cli: Cli, workspace: Path) -> None:
    result = cli.run("memory", "restore", "nope", "-w", workspace)

    assert result.returncode == 1
    assert result.stderr_lines == [
        "error: StorageError: no saved MEMORY.md version 'nope'; saved versions: none"
    ]
    assert (workspace / "MEMORY.md").read_text(encoding="utf-8") == MEMORY
