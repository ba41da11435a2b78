"""docs/model-scripts.md stays true: its example runs as printed, and its tool table is real.

The example script is taken from the page and run with the page's commands through the CLI;
every turn of it must have answered a real request (so each marker the page names, the memory
flush's, the consolidation's and the summary's, is still in the harness's prompts), and each
step must have done what the page says. The table of built-in tools must list exactly the
tools an agent is offered, each with its schema's arguments (``?`` for an optional one).
"""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import time
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.agent import HarnessAgent
from harness.cli.main import app
from harness.filesystem import SandboxFilesystem
from harness.kernel import Msg
from harness.models import ScriptedChatModel

PAGE = Path(__file__).resolve().parents[2] / "docs" / "model-scripts.md"


def section(title: str) -> str:
    text = PAGE.read_text(encoding="utf-8")
    assert f"\n## {title}\n" in text, f"{PAGE.name} has no '## {title}' section"
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def code_block(body: str, language: str) -> str:
    found = re.search(rf"```{language}\n(.*?)```", body, re.S)
    assert found is not None, f"no ```{language} block"
    return found.group(1)


def last_text(request: list[dict[str, Any]]) -> str:
    """What a turn's ``match`` is searched in: the last message's text and tool results."""
    message = Msg.model_validate(request[-1])
    return "\n".join(
        part for part in [message.text, *(r.text for r in message.tool_results)] if part
    )


def test_the_example_runs_as_documented(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    body = section("An example")
    script = json.loads(code_block(body, "json"))
    commands = [line for line in code_block(body, "bash").splitlines() if line.strip()]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "script.json").write_text(json.dumps(script), encoding="utf-8")

    outputs, took = [], []
    for command in commands:
        argv = shlex.split(command)
        assert argv[0] == "harness"
        started = time.monotonic()
        result = CliRunner().invoke(app, argv[1:])
        took.append(time.monotonic() - started)
        assert result.exit_code == 0, f"{command}\n{result.output}"
        assert "WARNING" not in result.stderr, f"{command}\n{result.stderr}"
        outputs.append(result.stdout)

    turns = script["turns"]
    # Every turn answered a request the harness really made: the markers are the real ones.
    requests = [
        json.loads(line)
        for line in (tmp_path / script["log"]).read_text(encoding="utf-8").splitlines()
    ]
    texts = [last_text(request) for request in requests]
    for turn in turns:
        assert any(re.search(turn["match"], text) for text in texts), turn["match"]
    # And each step did what the page says.
    ws = tmp_path / "ws"
    assert outputs[0].strip() == "Noted in notes.md."
    assert took[0] >= 0.5  # the write_file turn's delay
    assert (ws / "notes.md").read_text(encoding="utf-8") == "Dentist: Friday 9:30\n"
    log = (ws / "memory" / f"{date.today().isoformat()}.md").read_text(encoding="utf-8")
    assert "- The user's dentist appointment is on Friday at 9:30." in log
    assert (ws / "MEMORY.md").read_text(encoding="utf-8").strip() == turns[2]["text"]
    assert outputs[2].strip() == "Your notes say: dentist on Friday at 9:30."
    trace = CliRunner().invoke(app, ["trace", "default", "-w", "ws", "--json"])
    assert '"input_tokens": 420' in trace.stdout  # the last turn's usage


def documented_tools() -> dict[str, list[str]]:
    rows = re.findall(
        r"^\| `(\w+)` \| ([^|]*) \|", section("The built-in tools and their arguments"), re.M
    )
    return {name: re.findall(r"`(\w+\??)`", arguments) for name, arguments in rows}


def real_tools(root: Path) -> dict[str, list[str]]:
    """Every built-in tool an agent is offered on a sandbox (which adds ``execute``)."""
    agent = HarnessAgent(
        model=ScriptedChatModel([]), workspace=root, filesystem=SandboxFilesystem(root)
    )
    try:
        schemas = agent.delegate.toolkit.schemas()
    finally:
        asyncio.run(agent.aclose())
    found = {}
    for schema in schemas:
        required = set(schema.parameters.get("required") or [])
        found[schema.name] = [
            name if name in required else f"{name}?"
            for name in schema.parameters.get("properties", {})
        ]
    return found


def test_the_tool_table_is_the_tools_schemas(workspace: Path) -> None:
    real = real_tools(workspace)
    documented = documented_tools()

    rows = "\n".join(
        f"| `{name}` | {', '.join(f'`{a}`' for a in arguments) or '(none)'} |"
        for name, arguments in sorted(real.items())
    )
    assert documented == real, f"docs/model-scripts.md's tool table should say:\n{rows}"
