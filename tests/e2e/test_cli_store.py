"""`harness run --store redis://...`: two workspaces (two workers) continue one session."""

from __future__ import annotations

from pathlib import Path

import pytest
from _cli_runner import NO_MEMORIES, Cli, agent_requests, make_cli, write_script


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return make_cli(tmp_path)


def test_two_workers_share_a_session_through_the_store(
    cli: Cli, tmp_path: Path, redis_url: str
) -> None:
    script = write_script(
        tmp_path / "script.json",
        [NO_MEMORIES, {"match": "again", "text": "second"}, {"text": "first"}],
        log="requests.jsonl",
    )

    def run(worker: str, prompt: str, *extra: str) -> str:
        result = cli.run(
            "run", prompt, "-w", tmp_path / worker, "-m", f"scripted:{script}", "-s", "s1",
            "-u", "ann", *extra,
        )  # fmt: skip
        assert result.returncode == 0, result
        return result.stdout.strip()

    assert run("worker-a", "hello", "--store", redis_url) == "first"
    assert run("worker-b", "hello again", "--store", redis_url) == "second"
    last = agent_requests(tmp_path / "requests.jsonl")[-1]
    texts = [block["text"] for m in last for block in m["content"] if block.get("type") == "text"]
    assert texts[-3:] == ["hello", "first", "hello again"]  # worker B continued A's session
    assert not (tmp_path / "worker-a" / "users").exists()  # nothing on the workers' disks
    # Without the store, a worker's own disk has no such session.
    assert run("worker-b", "hello again") == "second"


def test_an_unknown_store_is_a_usage_error(cli: Cli, tmp_path: Path) -> None:
    result = cli.run("run", "hi", "-w", tmp_path / "w", "-m", "scripted:x", "--store", "ftp://x")
    assert result.returncode == 2
    assert "unknown store 'ftp://x'; use redis://host:port/db" in result.stderr
