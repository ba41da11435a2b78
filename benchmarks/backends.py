"""Read, write, append and list on every filesystem backend, with local disk as the baseline.

Each backend gets the same work, as one user (``users/<id>/`` namespace), through the storage
operations the harness uses (``get``, ``put``, ``append``) and the tool operation ``ls``:

- ``write``: ``put`` of a 2 KB file (a session or a memory file), 500 different paths;
- ``read``: ``get`` of those files;
- ``append``: ``append`` of a 200-byte record to one daily log, 500 times;
- ``ls``: listing a directory of 500 files, 50 times.

Each operation is timed one at a time (latency: median and p95), and the same operations are
run 16 at a time for throughput (operations per second). Backends: local disk (the baseline),
the bubblewrap sandbox (its files are local; only ``execute`` is sandboxed), a composite
routing ``memory/`` to a second local directory, the in-memory store, and a real Redis
(``redis-server`` started on a free loopback port for the run).

    .venv/bin/python benchmarks/backends.py [--ops 500]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from harness import RuntimeContext
from harness.filesystem import AbstractFilesystem
from harness.filesystem.composite import CompositeFilesystem
from harness.filesystem.local import LocalFilesystem
from harness.filesystem.remote import RemoteFilesystem
from harness.filesystem.sandbox import SandboxFilesystem
from harness.stores.memory import InMemoryStore
from harness.stores.redis import RedisStore

CTX = RuntimeContext(session_id="bench", user_id="bench-user")
PAYLOAD = b"x" * 2048
RECORD = b"- a remembered fact, one line of a daily log, about two hundred bytes long. " * 2 + b"\n"
CONCURRENCY = 16

Op = Callable[[int], Awaitable[object]]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_redis(directory: Path) -> tuple[subprocess.Popen[bytes], str] | None:
    binary = shutil.which("redis-server")
    if binary is None:
        return None
    port = free_port()
    server = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        cwd=directory,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return server, f"redis://127.0.0.1:{port}/0"
        except OSError:
            time.sleep(0.05)
    server.kill()
    return None


async def timed(op: Op, count: int) -> tuple[list[float], float]:
    """Latencies (ms) one at a time, then operations per second at CONCURRENCY."""
    latencies = []
    for i in range(count):
        start = time.perf_counter()
        await op(i)
        latencies.append((time.perf_counter() - start) * 1000)
    queue = iter(range(count))

    async def lane() -> None:
        for i in queue:
            await op(i)

    start = time.perf_counter()
    await asyncio.gather(*(lane() for _ in range(CONCURRENCY)))
    return latencies, count / (time.perf_counter() - start)


async def measure(fs: AbstractFilesystem, ops: int) -> dict[str, tuple[list[float], float]]:
    async def write(i: int) -> object:
        return await fs.put(f"bench/files/f{i}.md", PAYLOAD, CTX)

    async def read(i: int) -> object:
        return await fs.get(f"bench/files/f{i}.md", CTX)

    async def append(i: int) -> object:
        await fs.append("memory/daily.md", RECORD, CTX)
        return None

    async def ls(i: int) -> object:
        return await fs.ls("bench/files", CTX)

    results = {
        "write": await timed(write, ops),
        "read": await timed(read, ops),
        "append": await timed(append, ops),
        "ls": await timed(ls, max(1, ops // 10)),
    }
    found = await fs.get("memory/daily.md", CTX)
    assert found is not None, "the daily log is missing"
    assert found[0].count(b"\n") == 2 * ops, "an append was lost"
    return results


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1] if len(values) >= 20 else max(values)


async def run(ops: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        redis = start_redis(root)
        backends: dict[str, Callable[[], AbstractFilesystem]] = {
            "local (baseline)": lambda: LocalFilesystem(root / "local"),
            "sandbox": lambda: SandboxFilesystem(root / "sandbox"),
            "composite": lambda: CompositeFilesystem(
                LocalFilesystem(root / "composite-a"),
                {"memory/": LocalFilesystem(root / "composite-b")},
            ),
            "in-memory store": lambda: RemoteFilesystem(InMemoryStore()),
        }
        if redis is not None:
            url = redis[1]
            backends["redis store"] = lambda: RemoteFilesystem(RedisStore(url, prefix="bench"))
        results = {}
        try:
            for name, make in backends.items():
                fs = make()
                try:
                    results[name] = await measure(fs, ops)
                finally:
                    await fs.aclose()
        finally:
            if redis is not None:
                redis[0].terminate()
                redis[0].wait()
    base = results["local (baseline)"]
    print(
        f"{ops} operations each (ls: {max(1, ops // 10)}); latency one at a time, "
        f"throughput {CONCURRENCY} at a time"
    )
    print(
        f"{'backend':18s} {'op':7s} {'median ms':>10s} {'p95 ms':>8s} {'ops/s':>9s} "
        f"{'ops/s vs local':>15s}"
    )
    for name, by_op in results.items():
        for op, (latencies, rate) in by_op.items():
            ratio = rate / base[op][1]
            print(
                f"{name:18s} {op:7s} {statistics.median(latencies):10.3f} {p95(latencies):8.3f} "
                f"{rate:9.0f} {ratio:14.2f}x"
            )
    if redis is None:
        print("redis store: skipped (redis-server is not installed: apt-get install redis-server)")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ops", type=int, default=500, help="operations of each kind")
    args = parser.parse_args()
    asyncio.run(run(args.ops))


if __name__ == "__main__":
    main()
