"""The in-process runner makes each run see what a new process would: here, its own width."""

from __future__ import annotations

import io
import sys
import types
from pathlib import Path

import pytest
from _cli_runner import _process_state, make_cli
from rich.console import Console


def test_every_console_a_command_module_holds_is_made_for_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A parent may export COLUMNS (pytest-xdist's workers start with COLUMNS=80), and a module
    # first imported during an earlier run keeps the console that run made, its width fixed.
    monkeypatch.setenv("COLUMNS", "80")
    module = types.ModuleType("harness.cli._imported_in_an_earlier_run")
    module.out = Console()  # type: ignore[attr-defined]
    module.err = Console(stderr=True)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    env = make_cli(tmp_path).env({"COLUMNS": "250"})

    with _process_state(("--help",), env, tmp_path, "", io.BytesIO(), io.BytesIO()):
        widths = (module.out.width, module.err.width)

    assert widths == (250, 250)
