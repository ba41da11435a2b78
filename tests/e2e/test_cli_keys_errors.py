"""`harness keys list` and `revoke` say what went wrong in one line, whatever the file's name."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from harness.cli.main import app

# Names with a line break or another control character: a terminal would break the line there.
NAMES = st.text(
    st.characters(categories=("Cc", "Zl", "Zp", "L"), exclude_characters="\x00/"),
    min_size=1,
    max_size=12,
).filter(lambda name: name not in {".", ".."})


@settings(deadline=None)
@given(name=NAMES, command=st.sampled_from(["list", "revoke"]), present=st.booleans())
def test_a_key_file_error_is_one_line_for_any_file_name(
    tmp_path_factory: pytest.TempPathFactory, name: str, command: str, present: bool
) -> None:
    root = tmp_path_factory.mktemp("keys")
    path = root / name
    if present:
        path.write_text("not a key entry\n", encoding="utf-8")
    args = ["keys", command, *(["bob"] if command == "revoke" else []), "--file", str(path)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code in {1, 2}, result.output
    lines = [line for line in result.stderr.split("\n") if line]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
