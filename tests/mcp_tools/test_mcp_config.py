"""MCPServerConfig and the operator's tools.json: the format, its defaults and its errors."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.mcp import (
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_STARTUP_TIMEOUT,
    MCPServerConfig,
    load_mcp_config,
    merge_servers,
    parse_tools_json,
)
from harness.mcp._connection import import_sdk

FULL = {
    "mcpServers": {
        "calc": {
            "command": "python",
            "args": ["server.py", "--key=${CALC_KEY}"],
            "env": {"TOKEN": "${CALC_KEY}", "LITERAL": "$${NOT_EXPANDED}"},
            "cwd": "/srv",
            "deny": ["reset"],
        },
        "search": {
            "type": "streamableHttp",
            "url": "http://127.0.0.1:${PORT}/mcp",
            "headers": {"Authorization": "Bearer ${CALC_KEY}"},
            "allow": ["query"],
            "startupTimeout": 5,
            "callTimeout": 1.5,
        },
    }
}


def test_a_full_file_parses_with_environment_references_expanded() -> None:
    servers = parse_tools_json(json.dumps(FULL), environ={"CALC_KEY": "s3cret", "PORT": "8123"})

    assert servers == [
        MCPServerConfig(
            name="calc",
            command="python",
            args=("server.py", "--key=s3cret"),
            env={"TOKEN": "s3cret", "LITERAL": "${NOT_EXPANDED}"},
            cwd="/srv",
            deny=("reset",),
        ),
        MCPServerConfig(
            name="search",
            url="http://127.0.0.1:8123/mcp",
            headers={"Authorization": "Bearer s3cret"},
            allow=("query",),
            startup_timeout=5.0,
            call_timeout=1.5,
        ),
    ]
    assert [server.transport for server in servers] == ["stdio", "http"]


def test_defaults() -> None:
    (server,) = parse_tools_json('{"mcpServers": {"a": {"command": "run-a"}}}')

    assert server.allow is None
    assert server.deny == ()
    assert server.args == ()
    assert server.startup_timeout == DEFAULT_STARTUP_TIMEOUT == 20.0
    assert server.call_timeout == DEFAULT_CALL_TIMEOUT
    assert server.tool_name("add") == "a__add"


@pytest.mark.parametrize("text", ["", "  \n", "{}", '{"mcpServers": {}}'])
def test_no_servers(text: str) -> None:
    assert parse_tools_json(text) == []


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"mcpServers": {', "tools.json is not valid JSON: Expecting property name"),
        ("[1]", "tools.json must hold a JSON object"),
        ('{"mcpServers": []}', '"mcpServers" must be an object'),
        ('{"mcpServers": {"a": "python"}}', "mcpServers.a must be an object"),
        ('{"mcpServers": {"a": {}}}', "needs exactly one of command"),
        (
            '{"mcpServers": {"a": {"command": "x", "url": "http://h/mcp"}}}',
            "needs exactly one of command (a process over stdio) or url (streamable HTTP); "
            "got both",
        ),
        ('{"mcpServers": {"a": {"command": "x", "alow": ["y"]}}}', "unknown keys ['alow']"),
        ('{"mcpServers": {"a": {"command": ["x"]}}}', '"command" must be a string, got list'),
        ('{"mcpServers": {"a": {"command": "x", "args": "y"}}}', '"args" must be a list'),
        ('{"mcpServers": {"a": {"command": "x", "env": {"K": 1}}}}', '"env" must be an object'),
        ('{"mcpServers": {"a": {"command": "x", "allow": [1]}}}', '"allow" must be a list'),
        (
            '{"mcpServers": {"a": {"command": "x", "startupTimeout": 0}}}',
            '"startupTimeout" must be a positive number of seconds, got 0',
        ),
        ('{"mcpServers": {"a": {"url": "ftp://h"}}}', "must start with http:// or https://"),
        ('{"mcpServers": {"a": {"type": "sse", "url": "http://h"}}}', "\"type\" 'sse' is not"),
        ('{"mcpServers": {"a": {"type": "stdio", "url": "http://h"}}}', 'needs "command"'),
        ('{"mcpServers": {"a b": {"command": "x"}}}', "name 'a b' must be 1-48 letters"),
        (
            '{"mcpServers": {"a": {"command": "x", "headers": {"K": "v"}}}}',
            "headers are for url servers",
        ),
    ],
)
def test_malformed_files_name_the_file_and_the_problem(text: str, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_tools_json(text, source="users/ada/tools.json" if "alow" in text else "tools.json")

    message = str(caught.value)
    assert problem in message
    assert message.startswith("users/ada/tools.json" if "alow" in text else "tools.json")


def test_an_unset_environment_variable_is_named() -> None:
    text = '{"mcpServers": {"a": {"command": "x", "env": {"K": "${MISSING_VAR}"}}}}'

    with pytest.raises(ConfigError, match=r"mcpServers\.a\.env\.K refers to \$\{MISSING_VAR\}"):
        parse_tools_json(text, environ={})


def test_the_process_environment_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_TEST_MCP_CMD", "my-server")

    (server,) = parse_tools_json('{"mcpServers": {"a": {"command": "${HARNESS_TEST_MCP_CMD}"}}}')

    assert server.command == "my-server"


def test_config_from_python_validates_and_stores_tuples() -> None:
    server = MCPServerConfig(name="a", command="x", args=["1"], allow=["p"], deny=["q"])  # type: ignore[arg-type]

    assert (server.args, server.allow, server.deny) == (("1",), ("p",), ("q",))
    with pytest.raises(ValueError, match="exactly one of command"):
        MCPServerConfig(name="a")
    with pytest.raises(ValueError, match="call_timeout must be > 0"):
        MCPServerConfig(name="a", command="x", call_timeout=0)
    with pytest.raises(ValueError, match="args, env and cwd are for command servers"):
        MCPServerConfig(name="a", url="http://h/mcp", args=("x",))


def test_deny_wins_over_allow() -> None:
    server = MCPServerConfig(name="a", command="x", allow=("p", "q"), deny=("q",))

    assert [server.allows(tool) for tool in ("p", "q", "r")] == [True, False, False]
    everything = MCPServerConfig(name="a", command="x", deny=("q",))
    assert [everything.allows(tool) for tool in ("p", "q", "r")] == [True, False, True]


def test_load_reads_the_operators_file_and_names_it_in_errors(tmp_path: Path) -> None:
    config = tmp_path / "tools.json"
    where = re.escape(str(config))
    with pytest.raises(ConfigError, match=rf"^no MCP configuration at {where}: give the path"):
        load_mcp_config(config)
    config.write_text('{"mcpServers": {"shared": {"command": "s"}}}')
    assert [s.name for s in load_mcp_config(config)] == ["shared"]
    config.write_text('{"mcpServers": {"own": {"url": 1}}}')
    with pytest.raises(ConfigError, match=rf'^{where}: mcpServers\.own: "url"'):
        load_mcp_config(config)
    config.write_bytes(b"\xff\xfe")
    with pytest.raises(ConfigError, match=rf"^cannot read the MCP configuration {where}: "):
        load_mcp_config(config)


def test_merge_rejects_a_server_configured_twice() -> None:
    code = [MCPServerConfig(name="a", command="x")]
    file = [MCPServerConfig(name="b", command="y"), MCPServerConfig(name="a", command="z")]

    with pytest.raises(ConfigError, match=r"'a' is configured both in tools\.json and in code"):
        merge_servers(code, file, "tools.json")
    assert [s.name for s in merge_servers(code, file[:1], "tools.json")] == ["a", "b"]


def test_importing_harness_does_not_import_the_sdk() -> None:
    code = "import sys, harness, harness.mcp, harness.agent; print('mcp' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )

    assert result.stdout.strip() == "False"


def test_a_missing_sdk_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)

    with pytest.raises(ConfigError, match=r"pip install -e '.*\[mcp\]'"):
        import_sdk()
