"""``harness run`` on a disk that is full: the turn fails with one line, and no reply is shown
as kept (it used to print the reply and exit 0 with nothing saved)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from _cli_runner import make_cli, write_script

from _disks import fill, small_disk

TURNS: list[dict[str, Any]] = [
    {"match": "Extract NEW", "text": "NO_REPLY", "repeat": True},
    {"match": "first", "text": "one"},
    {"match": "second", "text": "two"},
]


def test_harness_run_on_a_full_disk_exits_non_zero_with_one_line(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk") as disk:
        cli = make_cli(tmp_path / "cli")
        script = write_script(tmp_path / "script.json", TURNS)
        common = ["-w", str(disk / "ws"), "-s", "s", "--model", f"scripted:{script}"]
        assert cli.run("run", *common, "first").returncode == 0
        fill(disk)
        result = cli.run("run", *common, "second " + "x" * 20_000)  # more than a page left
        assert result.returncode == 1, result
        assert "Traceback" not in result.stderr
        assert len(result.stderr_lines) == 1, result
        assert "could not be saved" in result.stderr
        assert "two" not in result.stdout  # the reply is not presented as kept
