"""Whether this llama.cpp build runs on this CPU, tried once in a child process.

A llama-cpp-python wheel compiled for another CPU (``-march=native`` on a machine with AMX or
AVX-512, then copied, or served again by pip's wheel cache) dies with SIGILL at its first
matrix product: the whole process goes, with no Python error and nothing printed (exit 132).
So the first time a build loads a model file, a child process loads it and generates a few
tokens. A child killed by a signal becomes a :class:`ConfigError` that says what to do; any
other failure is left to the real load, which reports it better.

A success is remembered by a marker file named by the build's libraries and the model file
(path, size and modification time of each), so every later load costs a few ``stat`` calls.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Final

from harness.errors import ConfigError

__all__ = ["REBUILD_COMMAND", "check_runs_here", "default_cache_dir", "signal_name"]

logger = logging.getLogger(__name__)

REBUILD_COMMAND: Final = (
    "./scripts/install-local in a checkout, else CMAKE_ARGS=-DGGML_NATIVE=OFF "
    "pip install --force-reinstall --no-cache-dir llama-cpp-python"
)
"""What rebuilds llama-cpp-python portably (no ``-march=native``)."""

TIMEOUT_S: Final = 300.0
"""Loading a large GGUF file from a slow disk takes a while; a hung child is not a crash."""

_CHILD: Final = """
import sys
from llama_cpp import Llama
llama = Llama(model_path=sys.argv[1], n_ctx=256, verbose=False)
llama.create_completion("The capital of France is", max_tokens=4, temperature=0.0)
llama.close()
"""
"""Load and generate: a prompt of several tokens and a few single-token steps, so both the
batched and the one-row matrix kernels run."""


def default_cache_dir() -> Path:
    """Where the markers live: ``$HARNESS_CACHE_DIR``, else the user's cache directory."""
    root = os.environ.get("HARNESS_CACHE_DIR") or Path(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "harness"
    )
    return Path(root) / "local-model-checks"


def check_runs_here(model_path: Path, *, cache_dir: Path | None = None) -> None:
    """Make sure llama.cpp can generate with ``model_path`` here, without risking this process.

    Blocking (it may run a child process for seconds): call it from a worker thread.

    Raises:
        ConfigError: The child was killed by a signal (an illegal instruction, usually): this
            llama-cpp-python was compiled for another CPU.
    """
    marker = (cache_dir or default_cache_dir()) / f"{_key(model_path)}.ok"
    if marker.exists():
        return
    try:
        child = subprocess.run(
            _command(model_path),
            env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        logger.warning(
            "the test generation of %s took over %.0f s; not checked", model_path, TIMEOUT_S
        )
        return
    if child.returncode < 0:
        raise ConfigError(_crash_message(-child.returncode))
    if child.returncode > 0:  # a Python error: the load in this process will say it properly
        logger.debug("test generation of %s failed: %s", model_path, child.stderr[-2000:])
        return
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    except OSError as exc:  # a read-only home: check again next time, say nothing more
        logger.debug("cannot remember the check of %s in %s: %s", model_path, marker, exc)


def _command(model_path: Path) -> list[str]:
    return [sys.executable, "-c", _CHILD, str(model_path)]


def _key(model_path: Path) -> str:
    """The build's libraries and the model file, as they are on disk now."""
    parts = [_stat_line(model_path.resolve())]
    spec = importlib.util.find_spec("llama_cpp")
    if spec and spec.origin:
        library = Path(spec.origin).parent / "lib"
        files = sorted(library.iterdir()) if library.is_dir() else [Path(spec.origin)]
        parts += [_stat_line(path) for path in files]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:24]


def _stat_line(path: Path) -> str:
    try:
        info = path.stat()
    except OSError:
        return f"{path} missing"
    return f"{path} {info.st_size} {info.st_mtime_ns}"


def signal_name(signum: int) -> str:
    """``SIGILL`` for 4; ``signal 200`` for a number no signal has."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _crash_message(signum: int) -> str:
    name = signal_name(signum)
    cause = (
        "an illegal instruction: this llama-cpp-python was compiled for another CPU"
        if signum == signal.SIGILL
        else "a crash in llama.cpp's native code"
    )
    return (
        f"the local model cannot run on this CPU: a test generation died of {name} ({cause}); "
        f"rebuild llama-cpp-python portably: {REBUILD_COMMAND}"
    )
