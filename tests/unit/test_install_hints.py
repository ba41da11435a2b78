"""An error about a missing extra says how to install it from the Harness checkout.

``pip install 'harness[serve]'`` would fetch the PyPI package called harness, which is another
project: every hint must name this project's checkout (here: the one the tests run from) and
the extra it declares, never a bare PyPI install.
"""

from __future__ import annotations

import importlib
import re
import shlex
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.main import app
from harness.errors import ConfigError, install_hint

CHECKOUT = Path(__file__).resolve().parents[2]
SRC = CHECKOUT / "src" / "harness"

BARE_PYPI = re.compile(r"pip install (?:-{1,2}[\w-]+ )*['\"]?harness(?:\[|\b)")
"""``pip install [options] harness...``: a name pip looks up on PyPI."""


def extras() -> set[str]:
    project = tomllib.loads((CHECKOUT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["name"] == "harness"
    return set(project["optional-dependencies"])


def hinted_target(message: str, extra: str) -> Path:
    """The checkout the message's pip command installs ``extra`` from (checked to be one)."""
    argv = shlex.split(message.split(" -m pip install ", 1)[1].split(" (")[0].split(" or ")[0])
    target = argv[argv.index("-e") + 1]
    assert target.endswith(f"[{extra}]"), message
    return Path(target.removesuffix(f"[{extra}]"))


def _serve() -> str:
    result = CliRunner().invoke(app, ["serve", "--port", "1"])
    assert result.exit_code == 2, result.output
    return result.stderr


def _anthropic() -> str:
    from harness.models.anthropic import AnthropicChatModel

    with pytest.raises(ConfigError) as caught:
        AnthropicChatModel("claude-test", api_key="k")
    return str(caught.value)


def _mcp() -> str:
    from harness.mcp._connection import import_sdk

    with pytest.raises(ConfigError) as caught:
        import_sdk()
    return str(caught.value)


def _local() -> str:
    from harness.models.local import LocalChatModel

    with pytest.raises(ConfigError) as caught:
        LocalChatModel()
    return str(caught.value)


def _otel() -> str:
    from harness.observability.otel import GenAiSpans

    with pytest.raises(ConfigError) as caught:
        GenAiSpans()
    return str(caught.value)


def _temporal() -> str:
    cached = sys.modules.pop("harness.durable", None)
    try:
        with pytest.raises(ConfigError) as caught:
            importlib.import_module("harness.durable")
    finally:
        if cached is not None:
            sys.modules["harness.durable"] = cached
    return str(caught.value)


def _embeddings() -> str:
    from harness.memory.embedding import import_optional

    with pytest.raises(ConfigError) as caught:
        import_optional("numpy")
    return str(caught.value)


MISSING: dict[str, tuple[str, Callable[[], str]]] = {
    "serve": ("harness.serve.http", _serve),
    "anthropic": ("anthropic", _anthropic),
    "mcp": ("mcp", _mcp),
    "local": ("llama_cpp", _local),
    "otel": ("opentelemetry", _otel),
    "embeddings": ("numpy", _embeddings),
    "temporal": ("temporalio", _temporal),
}
"""Each extra: a module it brings, and what fails without it (returning the error's text)."""


def test_every_extra_is_covered() -> None:
    assert set(MISSING) == extras() - {"dev"}


@pytest.mark.parametrize("extra", sorted(MISSING))
def test_a_missing_extra_names_the_checkout_not_pypi(
    extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    module, fail = MISSING[extra]
    monkeypatch.setitem(sys.modules, module, None)  # `import module` fails as if not installed

    message = fail()

    assert not BARE_PYPI.search(message), message
    assert install_hint(extra, *(["--no-cache-dir"] if extra == "local" else [])) in message
    assert hinted_target(message, extra) == CHECKOUT
    assert f"{shlex.quote(sys.executable)} -m pip" in message  # this interpreter's pip


def test_the_hint_outside_a_checkout_says_to_run_pip_in_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import harness.errors

    monkeypatch.setattr(harness.errors, "source_checkout", lambda: None)

    hint = install_hint("serve")

    assert hint.startswith("pip install -e '.[serve]' in the Harness checkout")
    assert "not from PyPI" in hint
    assert not BARE_PYPI.search(hint)


def test_no_source_file_or_page_hints_at_a_pypi_install() -> None:
    files = [*SRC.rglob("*.py"), *(CHECKOUT / "docs").glob("*.md"), CHECKOUT / "README.md"]
    offenders = [
        f"{path.relative_to(CHECKOUT)}:{number}: {line.strip()}"
        for path in sorted(files)
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if BARE_PYPI.search(line)
    ]
    assert offenders == []
