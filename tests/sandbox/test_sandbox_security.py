"""What a command in the bubblewrap sandbox cannot reach: host secrets, homes, the network,
the system, other users' files and the harness's environment."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from harness.context import RuntimeContext
from harness.filesystem import SandboxFilesystem


async def test_etc_shadow_is_not_readable(
    sandbox: SandboxFilesystem, alice: RuntimeContext
) -> None:
    result = await sandbox.execute("cat /etc/shadow", ctx=alice)
    assert result.exit_code != 0
    assert "root:" not in result.output


async def test_only_a_made_up_passwd_is_visible(
    sandbox: SandboxFilesystem, alice: RuntimeContext
) -> None:
    result = await sandbox.execute("cat /etc/passwd; whoami", ctx=alice)
    assert result.exit_code == 0
    names = {line.split(":", 1)[0] for line in result.output.splitlines() if ":" in line}
    assert names <= {"root", "sandbox"}
    assert result.output.splitlines()[-1] == "sandbox"


async def test_host_homes_are_not_visible(
    sandbox: SandboxFilesystem, alice: RuntimeContext
) -> None:
    home = Path(os.environ["HOME"])  # the test's own home (a temporary directory)
    (home / "secret.txt").write_text("host secret")
    for command in ("ls /root", "ls /home", f"cat {home}/secret.txt", f"ls {home}"):
        result = await sandbox.execute(command, ctx=alice)
        assert result.exit_code != 0, command
        assert "host secret" not in result.output
    found = await sandbox.execute(
        "find / -path /proc -prune -o -name secret.txt -print 2>/dev/null; echo done", ctx=alice
    )
    assert found.output == "done"


async def test_no_network_not_even_the_hosts_loopback(
    sandbox: SandboxFilesystem, alice: RuntimeContext
) -> None:
    connected: list[bool] = []

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connected.append(True)
        writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        local = await sandbox.execute(
            f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), "
            'timeout=2)"',
            ctx=alice,
        )
        internet = await sandbox.execute(
            "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), timeout=2)\"",
            ctx=alice,
        )
    finally:
        server.close()
        await server.wait_closed()
    assert local.exit_code != 0
    assert "ConnectionRefusedError" in local.output or "OSError" in local.output
    assert connected == []
    assert internet.exit_code != 0
    assert "Error" in internet.output


@pytest.mark.parametrize("target", ["/usr/x", "/etc/x", "/x", "/bin/x", "/workspace/../x"])
async def test_writing_outside_the_workspace_fails(
    sandbox: SandboxFilesystem, alice: RuntimeContext, target: str
) -> None:
    result = await sandbox.execute(f"touch {target}", ctx=alice)
    assert result.exit_code != 0
    assert result.output.startswith("[stderr] touch:")


async def test_tmp_is_private_and_gone_after_the_command(
    sandbox: SandboxFilesystem, alice: RuntimeContext
) -> None:
    first = await sandbox.execute("echo hi > /tmp/note && ls /tmp", ctx=alice)
    assert first.output == "note"
    second = await sandbox.execute("ls -A /tmp", ctx=alice)
    assert second.output == "<no output>"


async def test_writing_inside_lands_in_the_users_namespace_on_the_host(
    sandbox: SandboxFilesystem, alice: RuntimeContext
) -> None:
    result = await sandbox.execute("mkdir -p out && echo made > out/file.txt && pwd", ctx=alice)
    assert result.output == "/workspace"
    host = sandbox.root / "users" / "alice" / "out" / "file.txt"
    assert host.read_text() == "made\n"
    read = await sandbox.read("out/file.txt", ctx=alice)
    assert read.data is not None
    assert "made" in read.data.content


async def test_a_user_cannot_see_another_users_files(
    sandbox: SandboxFilesystem, alice: RuntimeContext, bob: RuntimeContext
) -> None:
    await sandbox.execute("echo bob-private > diary.txt", ctx=bob)
    assert (sandbox.root / "users" / "bob" / "diary.txt").exists()
    result = await sandbox.execute(
        "ls -A; cat ../users/bob/diary.txt; "
        "find / -path /proc -prune -o -name diary.txt -print 2>/dev/null; echo end",
        ctx=alice,
    )
    assert "bob-private" not in result.output
    found = [line for line in result.output.splitlines() if line.endswith("diary.txt")]
    assert all(line.startswith("[stderr] cat:") for line in found)


async def test_a_call_without_a_user_does_not_see_users(sandbox: SandboxFilesystem) -> None:
    await sandbox.execute("echo bob-private > diary.txt", ctx=RuntimeContext(user_id="bob"))
    nouser = RuntimeContext(session_id="shared")
    listing = await sandbox.execute("ls -A users; cat users/bob/diary.txt", ctx=nouser)
    assert "bob-private" not in listing.output
    written = await sandbox.execute("touch users/x", ctx=nouser)
    assert written.exit_code != 0


async def test_the_environment_is_clean(
    sandbox: SandboxFilesystem, alice: RuntimeContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HARNESS_TEST_SECRET", "do-not-leak")
    result = await sandbox.execute("env", ctx=alice)
    env = dict(line.split("=", 1) for line in result.output.splitlines())
    assert env.get("HOME") == "/workspace"
    assert "HARNESS_TEST_SECRET" not in env
    assert set(env) <= {"HOME", "PATH", "TMPDIR", "LANG", "PWD", "SHLVL", "_", "OLDPWD"}


async def test_extra_environment_is_passed(tmp_path: Path, sandbox: SandboxFilesystem) -> None:
    fs = SandboxFilesystem(tmp_path / "other", env={"GREETING": "hello"})
    result = await fs.execute("echo $GREETING")
    assert result.output == "hello"


async def test_no_capabilities_and_own_process_tree(
    sandbox: SandboxFilesystem, alice: RuntimeContext
) -> None:
    result = await sandbox.execute(
        "grep CapEff /proc/self/status; ls /proc | grep -c '^[0-9]'", ctx=alice
    )
    lines = result.output.splitlines()
    assert lines[0].split()[1] == "0000000000000000"
    assert int(lines[1]) < 10  # only the sandbox's own few processes, none of the host's


@pytest.mark.parametrize(
    "command",
    [
        "echo forged > agents/harness/tasks/task_x.json",
        "mkdir -p agents/harness/context/s && echo x > agents/harness/context/s/messages.jsonl",
        "rm -rf agents",
        "mv agents gone",
        "ln -s ../bob/agents/harness agents/harness",
        "mkfifo agents/fifo",
    ],
)
async def test_the_harness_records_are_read_only_to_commands(
    tmp_path: Path, sandbox: SandboxFilesystem, alice: RuntimeContext, command: str
) -> None:
    """A command can read ``agents/`` (its own sessions, tasks) but never write there: a file
    it put there could stop the user's calls or forge a record naming another user."""
    records = tmp_path / "workspace" / "users" / "alice" / "agents"
    records.mkdir(parents=True, exist_ok=True)
    (records / "kept.txt").write_text("kept\n")
    before = sorted(str(p.relative_to(records)) for p in records.rglob("*"))
    result = await sandbox.execute(command, ctx=alice)
    assert result.exit_code != 0, result.output
    assert sorted(str(p.relative_to(records)) for p in records.rglob("*")) == before
    read = await sandbox.execute("cat agents/kept.txt", ctx=alice)
    assert read.output == "kept"


@pytest.mark.parametrize("obstacle", ["file", "link", "fifo"])
async def test_an_obstacle_where_the_records_belong_is_moved_aside(
    tmp_path: Path, sandbox: SandboxFilesystem, alice: RuntimeContext, obstacle: str
) -> None:
    """Something other than a directory at ``agents`` (left from before) is set aside, not
    followed or bound: a link there would otherwise mount its target into the sandbox."""
    namespace = tmp_path / "workspace" / "users" / "alice"
    other = tmp_path / "workspace" / "users" / "bob" / "agents"
    other.mkdir(parents=True)
    (other / "bob.txt").write_text("bob's record")
    namespace.mkdir(parents=True, exist_ok=True)
    if obstacle == "file":
        (namespace / "agents").write_text("not a directory")
    elif obstacle == "link":
        (namespace / "agents").symlink_to(other)
    else:
        os.mkfifo(namespace / "agents")
    result = await sandbox.execute("ls -a agents; ls", ctx=alice)
    assert "bob.txt" not in result.output
    assert (namespace / "agents").is_dir()
    assert not (namespace / "agents").is_symlink()
    assert [p.name.split("-")[0] for p in namespace.glob("agents.moved-*")] == ["agents.moved"]
    assert (other / "bob.txt").read_text() == "bob's record"
