"""Running commands: output format, caps, timeouts, working directories, missing bubblewrap,
and the unsandboxed LocalShell that shares the same runner."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from harness.context import RuntimeContext
from harness.filesystem import LocalShell, SandboxFilesystem, ShellFilesystem
from harness.filesystem.shell import _CommandRunner

TEN_MB = 10 * 1024 * 1024


async def test_output_exit_code_and_stderr_prefix(
    sandbox: SandboxFilesystem, alice: RuntimeContext
) -> None:
    result = await sandbox.execute("echo out; echo err1 >&2; echo err2 >&2; exit 3", ctx=alice)
    assert result.exit_code == 3
    assert result.output == "out\n[stderr] err1\n[stderr] err2"
    assert result.truncated is False


async def test_no_output(sandbox: SandboxFilesystem, alice: RuntimeContext) -> None:
    result = await sandbox.execute("true", ctx=alice)
    assert (result.output, result.exit_code) == ("<no output>", 0)


async def _ticks(path: Path) -> int:
    return len(await asyncio.to_thread(path.read_bytes)) if path.exists() else 0


async def _assert_stopped(ticks: Path) -> None:
    """The background loop that appends to ``ticks`` has been killed."""
    before = await _ticks(ticks)
    await asyncio.sleep(0.6)
    assert await _ticks(ticks) == before


TICKER = "(while true; do echo x >> ticks; sleep 0.05; done) & sleep 60"


@pytest.mark.parametrize("kind", ["sandbox", "local"])
async def test_timeout_kills_the_whole_tree_promptly(
    kind: str, sandbox: SandboxFilesystem, tmp_path: Path, alice: RuntimeContext
) -> None:
    fs: _CommandRunner = sandbox if kind == "sandbox" else LocalShell(tmp_path / "local")
    started = time.monotonic()
    result = await fs.execute(TICKER, timeout=1, ctx=alice)
    assert time.monotonic() - started < 5
    assert result.exit_code == 124
    assert "timed out after 1s" in result.output
    ticks = fs.root / "users" / "alice" / "ticks"
    assert await _ticks(ticks) > 0
    await _assert_stopped(ticks)


@pytest.mark.parametrize("kind", ["sandbox", "local"])
async def test_ten_megabytes_on_both_streams_do_not_deadlock(
    kind: str, sandbox: SandboxFilesystem, tmp_path: Path, alice: RuntimeContext
) -> None:
    fs: _CommandRunner = sandbox if kind == "sandbox" else LocalShell(tmp_path / "local")
    command = (
        f"head -c {TEN_MB} /dev/zero | tr '\\0' a & "
        f"head -c {TEN_MB} /dev/zero | tr '\\0' b >&2; wait"
    )
    started = time.monotonic()
    result = await fs.execute(command, timeout=20, ctx=alice)
    assert time.monotonic() - started < 10
    assert result.exit_code == 0
    assert result.truncated is True
    marker = "\n... Output truncated at 100000 characters."
    assert result.output.endswith(marker)
    assert len(result.output) == 100_000 + len(marker)
    assert set(result.output[: -len(marker)]) == {"a"}  # stdout first, as in the original


async def test_small_cap(tmp_path: Path, sandbox: SandboxFilesystem) -> None:
    fs = SandboxFilesystem(tmp_path / "w", max_output_chars=10)
    result = await fs.execute("echo 0123456789abcdef")
    assert result.output == "0123456789\n... Output truncated at 10 characters."
    assert result.truncated is True
    exact = await fs.execute("printf 0123456789")
    assert (exact.output, exact.truncated) == ("0123456789", False)


async def test_working_directory(sandbox: SandboxFilesystem, alice: RuntimeContext) -> None:
    await sandbox.execute("mkdir -p sub/deeper", ctx=alice)
    result = await sandbox.execute("pwd", working_directory="sub/deeper", ctx=alice)
    assert result.output == "/workspace/sub/deeper"


@pytest.mark.parametrize(
    ("directory", "complaint"),
    [
        ("/etc", "absolute"),
        ("/workspace/sub", "absolute"),
        ("../bob", ".."),
        ("sub/../../x", ".."),
        ("~", "home"),
        ("~/sub", "home"),
        ("missing", "does not exist"),
        ("file.txt", "is not a directory"),
        ("link", "outside"),
    ],
)
async def test_bad_working_directories_are_refused(
    sandbox: SandboxFilesystem, alice: RuntimeContext, directory: str, complaint: str
) -> None:
    await sandbox.execute("mkdir -p sub && touch file.txt && ln -s /etc link", ctx=alice)
    result = await sandbox.execute("touch ran", working_directory=directory, ctx=alice)
    assert result.exit_code == 2
    assert result.output.startswith("Error: ")
    assert complaint in result.output
    assert not (sandbox.root / "users" / "alice" / "ran").exists()


async def test_non_positive_timeout_is_refused(sandbox: SandboxFilesystem) -> None:
    result = await sandbox.execute("true", timeout=0)
    assert result.exit_code == 2
    assert "timeout" in result.output


async def test_missing_bubblewrap_explains_how_to_install_it(tmp_path: Path) -> None:
    fs = SandboxFilesystem(tmp_path / "w", bwrap="/nonexistent/bwrap")
    assert isinstance(fs, ShellFilesystem)
    result = await fs.execute("echo hi")
    assert result.exit_code == 127
    assert "bubblewrap" in result.output
    assert "apt-get install bubblewrap" in result.output
    problem = await fs.check()
    assert problem is not None
    assert "apt-get install bubblewrap" in problem
    await fs.start(RuntimeContext(user_id="alice"))  # logged, not raised
    assert (tmp_path / "w" / "users" / "alice").is_dir()


async def test_start_creates_the_namespace_and_checks_once(
    sandbox: SandboxFilesystem, bob: RuntimeContext
) -> None:
    await sandbox.start(bob)
    assert (sandbox.root / "users" / "bob").is_dir()
    sandbox.bwrap = "/nonexistent/bwrap"  # the check is cached: it does not run again
    assert await sandbox.check() is None


async def test_release_kills_what_the_call_started(
    sandbox: SandboxFilesystem, alice: RuntimeContext, bob: RuntimeContext
) -> None:
    running = asyncio.create_task(sandbox.execute(TICKER, ctx=alice))
    other = asyncio.create_task(sandbox.execute("sleep 2; echo bob-done", ctx=bob))
    ticks = sandbox.root / "users" / "alice" / "ticks"
    for _ in range(100):
        if await _ticks(ticks):
            break
        await asyncio.sleep(0.05)
    started = time.monotonic()
    await sandbox.release(alice)
    result = await running
    assert time.monotonic() - started < 3
    assert result.exit_code == 137  # SIGKILL, reported as a shell does
    await _assert_stopped(ticks)
    assert (await other).output == "bob-done"  # another call's command is left alone


async def test_cancelling_execute_kills_the_command(
    sandbox: SandboxFilesystem, alice: RuntimeContext
) -> None:
    running = asyncio.create_task(sandbox.execute(TICKER, ctx=alice))
    ticks = sandbox.root / "users" / "alice" / "ticks"
    for _ in range(100):
        if await _ticks(ticks):
            break
        await asyncio.sleep(0.05)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    await _assert_stopped(ticks)


# -- LocalShell ------------------------------------------------------------------------------


async def test_local_shell_runs_on_the_host_in_the_namespace(
    tmp_path: Path, alice: RuntimeContext
) -> None:
    fs = LocalShell(tmp_path / "w")
    assert isinstance(fs, ShellFilesystem)
    result = await fs.execute("pwd; echo hi > f.txt; echo oops >&2", ctx=alice)
    namespace = (tmp_path / "w" / "users" / "alice").resolve()
    assert result.output == f"{namespace}\n[stderr] oops"
    assert (namespace / "f.txt").read_text() == "hi\n"


async def test_local_shell_does_not_pass_the_harness_environment_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HARNESS_TEST_SECRET", "do-not-leak")
    plain = await LocalShell(tmp_path / "w", env={"EXTRA": "1"}).execute("env")
    assert "HARNESS_TEST_SECRET" not in plain.output
    assert "EXTRA=1" in plain.output
    inherited = await LocalShell(tmp_path / "w", inherit_env=True).execute("env")
    assert "HARNESS_TEST_SECRET=do-not-leak" in inherited.output


async def test_local_shell_refuses_escaping_directories(tmp_path: Path) -> None:
    fs = LocalShell(tmp_path / "w")
    os.makedirs(tmp_path / "w" / "users" / "alice")
    os.symlink(tmp_path, tmp_path / "w" / "users" / "alice" / "up")
    alice = RuntimeContext(user_id="alice")
    for directory in ("up", "..", "/tmp", "~"):
        result = await fs.execute("touch ran", working_directory=directory, ctx=alice)
        assert result.exit_code == 2, directory
    assert not (tmp_path / "ran").exists()


def test_bad_limits_are_refused_at_construction(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="timeout_seconds"):
        LocalShell(tmp_path, timeout_seconds=0)
    with pytest.raises(ValueError, match="max_output_chars"):
        SandboxFilesystem(tmp_path, max_output_chars=0)
    with pytest.raises(ValueError, match="bwrap"):
        SandboxFilesystem(tmp_path, bwrap=" ")
