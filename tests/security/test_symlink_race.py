"""Hole 3 of the trust boundary: a link swapped in after a path was checked is never followed.

A path is checked (resolved, inside the namespace) and then used. A process that can write the
workspace (a command in the sandbox) swapped ``d`` between a directory and a link to a host
directory while one step ran thousands of reads of ``d/secret.txt``: some reads returned the
host file. Every local-disk operation now walks the checked path one directory descriptor at
a time, following no link, and acts on a name inside the directory it reached; so each read,
write, listing, move and delete either acts inside the workspace or fails. The swapper runs
beside the backend (a process of its own) and, in the last test, inside the sandbox through
the model's own ``execute``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from _steps import one_step

from _backends import open_backend
from harness import RuntimeContext
from harness.filesystem import SandboxFilesystem
from harness.memory import MemoryIndex
from harness.memory._files import scan as scanned_files
from harness.workspace import WorkspaceManager

OPERATIONS = 2_500
INSIDE = "inside the workspace\n"
OUTSIDE = "HOST FILE: outside the workspace\n"
HOST_ONLY = "host-only.txt"
"""A name only the host directory has: a listing that shows it has looked outside."""

SWAPPER = """
import os, sys, time
os.chdir(sys.argv[1])
outside = sys.argv[2]
end = time.monotonic() + float(sys.argv[3])
pause = float(sys.argv[4])
swaps = strays = 0
while time.monotonic() < end:
    os.rename("d", "d.real")
    try:
        os.symlink(outside, "d")
        os.unlink("d")
    except OSError:  # a writer made a new d while there was none: it is moved aside below
        pass
    while True:
        try:
            os.rename("d.real", "d")
            break
        except OSError:
            strays += 1
            try:
                os.rename("d", "stray%d" % strays)
            except OSError:
                pass
    swaps += 1
    if pause:
        time.sleep(pause)
print("swapped", swaps, "times")
"""
"""Swaps ``d`` between the real directory and a link to the host directory, as fast as it can
(for ``argv[3]`` seconds, or until killed), leaving the real one in place for ``argv[4]``
seconds each time (so that slow operations can also succeed). A ``d`` a writer creates while
the real one is away is moved aside, so the real one always comes back."""

Operation = Callable[[int], Awaitable[str]]


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A host directory the workspace must never reach: a secret and a name of its own."""
    host = tmp_path / "outside"
    host.mkdir()
    (host / "secret.txt").write_text(OUTSIDE, encoding="utf-8")
    (host / HOST_ONLY).write_text(OUTSIDE, encoding="utf-8")
    return host


def untouched(host: Path) -> None:
    """The host directory holds exactly what it held: nothing written, locked or moved there."""
    assert sorted(os.listdir(host)) == sorted(["secret.txt", HOST_ONLY])
    for name in ("secret.txt", HOST_ONLY):
        assert (host / name).read_text(encoding="utf-8") == OUTSIDE


async def race(root: Path, outside: Path, operation: Operation, *, pause: float = 0.0) -> list[str]:
    """``OPERATIONS`` concurrent operations, each answering a string, while the swapper runs."""
    swapper = await asyncio.create_subprocess_exec(
        sys.executable, "-c", SWAPPER, str(root), str(outside), "inf", str(pause)
    )
    try:
        await asyncio.sleep(0.2)  # let it get going

        async def guarded(i: int) -> str:
            try:
                return await operation(i)
            except Exception as exc:  # a refusal is a fine answer, a leak is not
                return f"{type(exc).__name__}: {exc}"

        answers = await asyncio.gather(*(guarded(i) for i in range(OPERATIONS)))
    finally:
        with contextlib.suppress(ProcessLookupError):
            swapper.kill()
        await swapper.wait()
        if (root / "d").is_symlink():  # killed mid-swap
            (root / "d").unlink()
        if (root / "d.real").is_dir():
            (root / "d.real").rename(root / "d")
    return list(answers)


def workspace_with_d(tmp_path: Path) -> Path:
    """The backend's workspace (``tmp_path/workspace``) holding ``d/secret.txt``."""
    root = tmp_path / "workspace"
    (root / "d").mkdir(parents=True)
    (root / "d" / "secret.txt").write_text(INSIDE, encoding="utf-8")
    return root


@pytest.mark.parametrize("backend", ["local", "sandbox"])
async def test_reads_racing_a_link_swapper_never_return_a_host_file(
    tmp_path: Path, outside: Path, backend: str
) -> None:
    async with open_backend(backend, tmp_path) as fs:
        root = workspace_with_d(tmp_path)

        async def read_or_get(i: int) -> str:
            if i % 2:
                result = await fs.read("d/secret.txt")
                return result.data.content if result.data is not None else ""
            found = await fs.get("d/secret.txt")
            return found[0].decode() if found is not None else ""

        answers = await race(root, outside, read_or_get)

    leaks = [answer for answer in answers if "HOST FILE" in answer]
    assert leaks == [], f"{len(leaks)} of {OPERATIONS} reads returned the host file"
    assert sum(answer == INSIDE for answer in answers) > 0  # the reads did run, and succeed


@pytest.mark.parametrize("backend", ["local", "sandbox"])
async def test_writes_racing_a_link_swapper_never_land_outside(
    tmp_path: Path, outside: Path, backend: str
) -> None:
    async with open_backend(backend, tmp_path) as fs:
        root = workspace_with_d(tmp_path)

        async def write_somehow(i: int) -> str:
            name = f"d/w{i}.txt"
            match i % 7:
                case 0:
                    return str((await fs.write(name, INSIDE)).error)
                case 1:
                    return str((await fs.upload([(name, INSIDE.encode())]))[0].error)
                case 2:
                    return str(await fs.put(name, INSIDE.encode()))
                case 3:
                    await fs.append("d/log.txt", b"line\n")
                    return "appended"
                case 4:
                    edited = await fs.edit("d/secret.txt", "inside", "inside")
                    return str(edited.error)
                case 5:
                    return str((await fs.move("d/secret.txt", "d/secret.txt")).error)
                case _:
                    return str((await fs.delete("d/secret.txt.none")).error)

        answers = await race(root, outside, write_somehow)

    untouched(outside)
    assert answers.count("None") > 0  # writes did run, and succeed inside
    assert (root / "d" / "secret.txt").read_text(encoding="utf-8") == INSIDE


@pytest.mark.parametrize("backend", ["local", "sandbox"])
async def test_listings_racing_a_link_swapper_never_show_a_host_directory(
    tmp_path: Path, outside: Path, backend: str
) -> None:
    async with open_backend(backend, tmp_path) as fs:
        root = workspace_with_d(tmp_path)

        async def look(i: int) -> str:
            match i % 4:
                case 0:
                    return " ".join(e.path for e in (await fs.ls("d")).entries)
                case 1:
                    return " ".join(e.path for e in (await fs.glob("**", "d")).entries)
                case 2:
                    return " ".join(m.text for m in (await fs.grep("FILE", "d")).matches)
                case _:
                    return HOST_ONLY if await fs.exists(f"d/{HOST_ONLY}") else ""

        answers = await race(root, outside, look, pause=0.001)

    leaks = [answer for answer in answers if HOST_ONLY in answer or "HOST FILE" in answer]
    assert leaks == [], f"{len(leaks)} of {OPERATIONS} listings showed the host directory"
    assert any("d/secret.txt" in answer for answer in answers)  # the listings did run
    untouched(outside)


async def test_the_index_reads_no_file_through_a_directory_swapped_after_its_scan(
    tmp_path: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "tenant" / "workspace"
    memory = root / "users" / "alice" / "memory"
    memory.mkdir(parents=True)
    (memory / "secret.md").write_text("- alice's own note\n", encoding="utf-8")
    (outside / "secret.md").write_text("- HOST FILE: root password\n", encoding="utf-8")
    scan = scanned_files

    def scan_then_swap(workspace: Path) -> dict[str, tuple[int, int]]:
        found = scan(workspace)
        memory.rename(memory.with_name("memory.real"))
        memory.symlink_to(outside)  # the sandbox's move, between the scan and the read
        return found

    monkeypatch.setattr("harness.memory.index.scan", scan_then_swap)
    index = MemoryIndex(tmp_path / "tenant", workspace=root)
    try:
        await asyncio.to_thread(index.index_all_from_workspace, root)
        hits = await asyncio.to_thread(index.search, "password", user_id="alice")
    finally:
        index.close()

    assert [hit.content for hit in hits if "HOST FILE" in hit.content] == []


async def test_the_models_own_execute_racing_its_file_tools_reaches_no_host_file(
    tmp_path: Path, outside: Path
) -> None:
    """The reproduction of the issue: swapper and file tools in one step of a hostile model."""
    async with open_backend("sandbox", tmp_path) as fs:
        assert isinstance(fs, SandboxFilesystem)
        root = workspace_with_d(tmp_path)
        script = SWAPPER.replace("'", "'\\''")
        swap = f"python3 -c '{script}' . {outside} 4 0"
        calls = [{"name": "execute", "input": {"command": swap, "timeout": 30}}]
        for i in range(2_000):
            calls.append({"name": "read_file", "input": {"path": "d/secret.txt"}})
            if i % 4 == 0:
                written = {"path": f"d/w{i}", "content": f"written {i}\n"}
                calls.append({"name": "write_file", "input": written})
        results = await one_step(
            WorkspaceManager(root, fs), calls, RuntimeContext(session_id="race")
        )

    assert any("swapped" in r and "swapped 0 " not in r for r in results), results[0]
    leaks = [result for result in results if "HOST FILE" in result]
    assert leaks == [], f"{len(leaks)} tool results held the host file"
    untouched(outside)
    assert sum("inside the workspace" in result for result in results) > 0


async def test_a_kept_storage_path_is_walked_again_and_refuses_a_link_swapped_in(
    tmp_path: Path,
) -> None:
    """A storage path keeps its resolution between writes (it cost as much as the write); a
    directory swapped for a link afterwards is still refused, or followed where it stays
    inside, exactly as a fresh resolution would."""
    from harness.errors import PathOutsideWorkspace
    from harness.filesystem.local import LocalFilesystem

    root, outside = tmp_path / "ws", tmp_path / "host"
    outside.mkdir()
    fs = LocalFilesystem(root)
    path = "users/ann/agents/bot/context/s/messages.jsonl"
    await fs.append(path, b"one\n")
    await fs.append(path, b"two\n")  # from the kept resolution
    session = root / "users" / "ann" / "agents" / "bot" / "context" / "s"
    session.rename(root / "moved")
    session.symlink_to(outside, target_is_directory=True)
    with pytest.raises(PathOutsideWorkspace):
        await fs.append(path, b"three\n")
    with pytest.raises(PathOutsideWorkspace):
        await fs.get(path)
    assert list(outside.iterdir()) == []
    session.unlink()
    inside = root / "users" / "ann" / "kept"
    (root / "moved").rename(inside)
    session.symlink_to(inside, target_is_directory=True)  # a link that stays in the namespace
    await fs.append(path, b"four\n")
    assert (inside / "messages.jsonl").read_bytes() == b"one\ntwo\nfour\n"
    found = await fs.get(path)
    assert found is not None
    assert found[0] == b"one\ntwo\nfour\n"
