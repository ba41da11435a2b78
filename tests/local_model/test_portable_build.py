"""The llama-cpp-python in use is the portable build of scripts/install-local, not a native one.

A build compiled with ``-march=native`` on a CPU with AVX-512 or AMX uses those instructions and
dies with SIGILL on a CPU without them (or, for AMX, on some that advertise it); pip's wheel
cache then serves that build to every later install. These tests read the installed library:
its machine code and where it was installed from.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from importlib import metadata
from pathlib import Path

import pytest

from conftest import local_weights

ROOT = Path(__file__).resolve().parents[2]


def library_files() -> list[Path]:
    local_weights()  # skips (or fails in CI) without the extra
    import llama_cpp

    folder = Path(llama_cpp.__file__).parent / "lib"
    unique = {path.resolve() for path in folder.glob("*.so*")}
    assert unique, f"no shared library in {folder}"
    return sorted(unique)


def test_the_installed_build_has_no_avx512_or_amx_instruction() -> None:
    files = library_files()
    objdump = shutil.which("objdump")
    if objdump is None:  # binutils comes with the compiler that built the library
        pytest.fail("objdump (binutils) is needed to read the library's machine code")

    for path in files:
        code = subprocess.run(
            [objdump, "-d", "--no-show-raw-insn", str(path)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        wide = [line for line in code.splitlines() if "%zmm" in line or "%tmm" in line]
        assert not wide, f"{path.name} uses AVX-512 or AMX, e.g. {wide[0].strip()}"


def test_the_installed_build_came_from_its_keyed_wheel_directory() -> None:
    library_files()
    direct = metadata.distribution("llama_cpp_python").read_text("direct_url.json")
    assert direct, "llama-cpp-python was installed from an index, not by scripts/install-local"
    wheel = Path(json.loads(direct)["url"].removeprefix("file://"))

    assert wheel.parent.name.startswith("llama-cpp-python-"), wheel
    assert "-portable-" in wheel.parent.name, wheel
    key = (wheel.parent / "BUILD-KEY").read_text(encoding="utf-8")
    assert "-DGGML_NATIVE=OFF" in key
    assert "-DGGML_AVX2=ON" in key
    # The pinned version is what the script builds, and what is installed.
    script = (ROOT / "scripts" / "install-local").read_text(encoding="utf-8")
    assert f"LLAMA_CPP_PYTHON_VERSION={metadata.version('llama_cpp_python')}\n" in script
