"""The tools ``harness.tools.filesystem``' docstring lists, and their parameters, are the real
ones."""

from __future__ import annotations

import re
from pathlib import Path

import harness.tools.filesystem
from harness.filesystem.shell import LocalShell
from harness.kernel.toolkit import Toolkit
from harness.tools import FilesystemTools


def test_the_listed_tools_and_parameters_are_the_registered_ones(workspace: Path) -> None:
    doc = harness.tools.filesystem.__doc__ or ""
    listed = {
        name: [p.strip().rstrip("?") for p in params.split(",") if p.strip()]
        for name, params in re.findall(r"^- ``(\w+)\(([^)]*)\)``", doc, re.M)
    }
    toolkit = Toolkit(FilesystemTools(LocalShell(workspace)).tools())
    real = {s.name: list(s.parameters["properties"]) for s in toolkit.schemas()}
    assert listed == real
