"""The check that this llama.cpp build runs on this CPU, in a child process, before it loads here.

The first test runs the real build in use: on a machine where it was compiled for another CPU
(``-march=native`` with AMX, say), its child dies of SIGILL and the test fails with the line a
user would see. The others replace the child's program to stand for such a build.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from conftest import local_weights
from harness.errors import ConfigError
from harness.models import _native_check
from harness.models._native_check import REBUILD_COMMAND, check_runs_here


def markers(cache: Path) -> list[Path]:
    return sorted(cache.glob("*.ok")) if cache.is_dir() else []


def test_the_build_in_use_generates_in_a_child_process(tmp_path: Path) -> None:
    weights = local_weights()

    check_runs_here(weights, cache_dir=tmp_path)  # raises, naming the signal, where it cannot

    assert len(markers(tmp_path)) == 1


def replace_child(monkeypatch: pytest.MonkeyPatch, code: str, runs: list[str]) -> None:
    def command(model_path: Path) -> list[str]:
        runs.append(str(model_path))
        return [sys.executable, "-c", code]

    monkeypatch.setattr(_native_check, "_command", command)


def a_model(tmp_path: Path) -> Path:
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF" + bytes(60))
    return path


def test_a_child_killed_by_sigill_is_one_line_that_names_the_rebuild(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs: list[str] = []
    replace_child(monkeypatch, "import os, signal; os.kill(os.getpid(), signal.SIGILL)", runs)
    cache = tmp_path / "cache"

    with pytest.raises(ConfigError) as caught:
        check_runs_here(a_model(tmp_path), cache_dir=cache)

    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("the local model cannot run on this CPU: ")
    assert "SIGILL (an illegal instruction" in message
    assert message.endswith(f"rebuild llama-cpp-python portably: {REBUILD_COMMAND}")
    assert markers(cache) == []  # not remembered: the next load asks again

    with pytest.raises(ConfigError):
        check_runs_here(a_model(tmp_path), cache_dir=cache)
    assert len(runs) == 2


def test_another_signal_is_a_crash_of_native_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    replace_child(monkeypatch, "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", [])

    with pytest.raises(
        ConfigError, match=r"died of SIGSEGV \(a crash in llama.cpp's native code\)"
    ):
        check_runs_here(a_model(tmp_path), cache_dir=tmp_path / "cache")


def test_a_passed_check_is_remembered_and_runs_no_child_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs: list[str] = []
    replace_child(monkeypatch, "pass", runs)
    model, cache = a_model(tmp_path), tmp_path / "cache"

    check_runs_here(model, cache_dir=cache)
    check_runs_here(model, cache_dir=cache)

    assert runs == [str(model)]
    assert len(markers(cache)) == 1


def test_a_changed_model_file_is_checked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs: list[str] = []
    replace_child(monkeypatch, "pass", runs)
    model, cache = a_model(tmp_path), tmp_path / "cache"
    check_runs_here(model, cache_dir=cache)

    model.write_bytes(b"GGUF" + bytes(100))  # another file at the same path
    check_runs_here(model, cache_dir=cache)

    assert len(runs) == 2
    assert len(markers(cache)) == 2


def test_a_python_error_in_the_child_is_left_to_the_load_in_this_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs: list[str] = []
    replace_child(monkeypatch, "raise SystemExit('cannot load: not a model')", runs)
    cache = tmp_path / "cache"

    check_runs_here(a_model(tmp_path), cache_dir=cache)  # no error: the real load reports it

    assert len(runs) == 1
    assert markers(cache) == []


def test_an_unwritable_cache_only_means_checking_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs: list[str] = []
    replace_child(monkeypatch, "pass", runs)
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the cache directory would be", encoding="utf-8")

    check_runs_here(a_model(tmp_path), cache_dir=blocker / "cache")
    check_runs_here(a_model(tmp_path), cache_dir=blocker / "cache")

    assert len(runs) == 2


def test_the_cache_directory_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_CACHE_DIR", "/srv/cache")
    assert _native_check.default_cache_dir() == Path("/srv/cache/local-model-checks")
    monkeypatch.delenv("HARNESS_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", "/xdg")
    assert _native_check.default_cache_dir() == Path("/xdg/harness/local-model-checks")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert _native_check.default_cache_dir() == Path.home() / ".cache/harness/local-model-checks"


def test_the_child_sees_the_modules_this_process_sees(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A build on sys.path but not on PYTHONPATH (as the benchmark loads one) is the one tried."""
    extra = tmp_path / "site"
    extra.mkdir()
    (extra / "only_here.py").write_text("", encoding="utf-8")
    monkeypatch.syspath_prepend(str(extra))
    monkeypatch.delenv("PYTHONPATH", raising=False)
    replace_child(monkeypatch, "import only_here", [])
    cache = tmp_path / "cache"

    check_runs_here(a_model(tmp_path), cache_dir=cache)

    assert len(markers(cache)) == 1
    assert "PYTHONPATH" not in os.environ


def test_signals_are_named_even_when_unknown() -> None:
    assert "SIGILL" in _native_check._crash_message(signal.SIGILL)
    assert "signal 200" in _native_check._crash_message(200)
