"""Syntax highlighting for the page: ``harness.serve.highlight`` and ``POST /v1/highlight``.

The runs of a block join back to its code exactly, whatever the code and the language (drawn
by hypothesis); Python is colored with Pygments' short classes; an unknown language, a passed
deadline or code Pygments would change (CR LF) is one plain run; requests over the limits are
refused with a 413 whose code names the limit; the route wants the key and is in the OpenAPI
document with its body.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _served import Served, scripted_agent, served
from hypothesis import given
from hypothesis import strategies as st
from pygments.token import STANDARD_TYPES  # type: ignore[import-untyped]

from harness.errors import RequestRefused
from harness.serve import ApiKeys, ServeConfig, digest, new_key
from harness.serve.highlight import (
    MAX_BLOCK_BYTES,
    MAX_BLOCKS,
    MAX_TOTAL_BYTES,
    CodeBlock,
    check_limits,
    highlight,
)

CLASSES = set(STANDARD_TYPES.values()) - {"w"}
LANGUAGES = [
    "python", "py", "PYTHON", "js", "javascript", "ts", "bash", "sh", "console", "json",
    "yaml", "toml", "c", "cpp", "c++", "rust", "go", "java", "html", "xml", "css", "sql",
    "diff", "markdown", "dockerfile", "text", "", "no-such-language", " python ",
]  # fmt: skip
CODEISH = [
    "def ", "class ", "return ", "import ", "(", ")", "{", "}", "[", "]", ":", ";", "\n",
    "\r\n", "\r", "\t", "    ", '"', "'", '"""', "#", "//", "/*", "*/", "<", ">", "</", "=",
    "+", "-", "0x1f", "3.14", "\\", "\\n", "$", "${x}", "@", "`", "é", "\U0001d518", "\u0000",
    "\ufeff", "<script>", "f'{x}'", "-- ", "@@ -1 +1 @@", "+added", "-removed",
]  # fmt: skip
CODE = st.lists(st.one_of(st.sampled_from(CODEISH), st.text(max_size=6)), max_size=60).map("".join)


def joined(runs: list[tuple[str, str]]) -> str:
    return "".join(text for _, text in runs)


@given(CODE, st.one_of(st.none(), st.sampled_from(LANGUAGES), st.text(max_size=10)))
def test_the_runs_of_any_code_join_back_to_it_exactly(code: str, language: str | None) -> None:
    runs = highlight(code, language)
    assert joined(runs) == code
    assert all(text for _, text in runs)  # no empty run
    assert all(cls in CLASSES for cls, _ in runs)
    assert all(a[0] != b[0] for a, b in itertools.pairwise(runs))  # neighbours merged


def test_python_is_colored_with_pygments_short_classes() -> None:
    code = "def area(r):\n    return 3.14 * r ** 2  # a circle\n"
    runs = highlight(code, "python")
    assert ("k", "def") in runs
    assert ("nf", "area") in runs
    assert ("k", "return") in runs
    assert ("mf", "3.14") in runs
    assert ("c1", "# a circle") in runs
    assert joined(runs) == code
    assert highlight(code, " Python ") == runs  # the fence's spelling, trimmed, any case


@pytest.mark.parametrize("language", [None, "", "text", "no-such-language", "../../etc/passwd"])
def test_no_or_an_unknown_language_is_one_plain_run(language: str | None) -> None:
    assert highlight("x = 1\n", language) == [("", "x = 1\n")]
    assert highlight("", language) == []


def test_code_pygments_would_change_and_a_passed_deadline_are_plain() -> None:
    crlf = "x = 1\r\ny = 2\r\n"
    assert highlight(crlf, "python") == [("", crlf)]  # Pygments reads CR LF as LF
    assert highlight("\ufeffx = 1", "python") == [("", "\ufeffx = 1")]  # and drops a BOM
    assert highlight("x = 1", "python", deadline=time.monotonic() - 1) == [("", "x = 1")]


def test_requests_over_the_limits_are_refused_naming_the_limit() -> None:
    check_limits([CodeBlock(code="x")] * MAX_BLOCKS)
    check_limits([CodeBlock(code="x" * MAX_BLOCK_BYTES)] * (MAX_TOTAL_BYTES // MAX_BLOCK_BYTES))
    cases = [
        ([CodeBlock(code="x")] * (MAX_BLOCKS + 1), "too_many_blocks", f"at most {MAX_BLOCKS}"),
        (
            [CodeBlock(code="ok"), CodeBlock(code="é" * (MAX_BLOCK_BYTES // 2 + 1))],
            "code_block_too_large",
            "code block 1 is 65,538 bytes",
        ),
        (
            [CodeBlock(code="x" * MAX_BLOCK_BYTES)] * (MAX_TOTAL_BYTES // MAX_BLOCK_BYTES + 1),
            "code_too_large",
            f"at most {MAX_TOTAL_BYTES:,} together",
        ),
    ]
    for blocks, code, words in cases:
        with pytest.raises(RequestRefused) as refused:
            check_limits(blocks)
        assert (refused.value.status, refused.value.code) == (413, code)
        assert words in refused.value.message
        assert "\n" not in refused.value.message


KEY = new_key()


@pytest.fixture
def server(workspace: Path) -> Iterator[Served]:
    config = ServeConfig(keys=ApiKeys({digest(KEY): "alice"}))
    with served(scripted_agent(workspace, []), config) as running:
        yield running


def test_the_route_highlights_for_a_key_and_refuses_the_rest(server: Served) -> None:
    blocks: list[dict[str, Any]] = [
        {"code": "def f():\n    pass\n", "language": "python"},
        {"code": "plain words", "language": None},
        {"code": "echo $HOME", "language": "bash"},
    ]
    with httpx.Client(base_url=server.url, timeout=20) as anonymous:
        assert anonymous.post("/v1/highlight", json={"blocks": blocks}).status_code == 401
        schema = anonymous.get("/openapi.json").json()
    body = schema["paths"]["/v1/highlight"]["post"]["requestBody"]["content"]
    assert "blocks" in body["application/json"]["schema"]["properties"]

    headers = {"Authorization": f"Bearer {KEY}"}
    with httpx.Client(base_url=server.url, timeout=20, headers=headers) as api:
        reply = api.post("/v1/highlight", json={"blocks": blocks})
        assert reply.status_code == 200, reply.text
        python, plain, shell = reply.json()["blocks"]
        assert ["k", "def"] in python
        assert "".join(text for _, text in python) == blocks[0]["code"]
        assert plain == [["", "plain words"]]
        assert "".join(text for _, text in shell) == "echo $HOME"
        assert any(cls == "nv" for cls, _ in shell)  # $HOME, a variable

        too_many = api.post("/v1/highlight", json={"blocks": [{"code": "x"}] * 65})
        assert too_many.status_code == 413
        assert too_many.json()["error"]["code"] == "too_many_blocks"
        too_large = api.post("/v1/highlight", json={"blocks": [{"code": "x" * 65_537}]})
        assert too_large.status_code == 413
        assert too_large.json()["error"]["code"] == "code_block_too_large"
        wrong = api.post("/v1/highlight", json={"blocks": [{"code": 1}]})
        assert wrong.status_code == 400
        assert wrong.json()["error"]["code"] == "invalid_request"
        assert api.post("/v1/highlight", json={"blocks": []}).json() == {"blocks": []}
