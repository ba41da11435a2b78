"""resolve_model: from a model spec (or HARNESS_MODEL) to a configured adapter."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from _servers import OpenAIServer, running
from harness.errors import ConfigError
from harness.kernel import Msg, TextBlock, complete
from harness.models import (
    AnthropicChatModel,
    OpenAIChatModel,
    ScriptedChatModel,
    resolve_model,
)

SPECS = "openai:<model>, anthropic:<model>, local[:<file.gguf>] or scripted:<path>"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # The adapters' SDKs read these too, so a developer's own settings must not leak in.
    for name in (
        "HARNESS_MODEL",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with running(OpenAIServer()) as server:
        yield server


def test_no_spec_and_no_harness_model_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as caught:
        resolve_model(None, env={})

    assert str(caught.value) == f"no model configured: pass --model {SPECS}, or set HARNESS_MODEL"


@pytest.mark.parametrize("spec", ["llama:7b", "openai:", "gpt-4o", "scripted:  "])
def test_an_unknown_spec_is_a_config_error_naming_it(spec: str) -> None:
    with pytest.raises(ConfigError) as caught:
        resolve_model(spec, env={})

    assert str(caught.value) == f"unknown model spec {spec.strip()!r}: use {SPECS}"


def test_openai_without_a_key_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as caught:
        resolve_model("openai:gpt-4o-mini", env={})

    assert str(caught.value) == (
        "OPENAI_API_KEY is not set: export it (any non-empty value works for a local "
        "OpenAI-compatible server, with OPENAI_BASE_URL pointing at it)"
    )


async def test_openai_with_key_and_base_url_talks_to_that_server(server: OpenAIServer) -> None:
    env = {"OPENAI_API_KEY": "sk-local", "OPENAI_BASE_URL": f"{server.url}/v1"}
    server.queue_stream(
        [{"choices": [{"index": 0, "delta": {"content": "pong"}, "finish_reason": "stop"}]}]
    )

    model = resolve_model("openai:qwen2.5-7b", env=env)
    assert isinstance(model, OpenAIChatModel)
    response = await complete(model, [Msg(role="user", content="ping")])
    await model.aclose()

    assert model.model_name == "qwen2.5-7b"
    assert model.base_url == f"{server.url}/v1/"
    assert response.content == [TextBlock(text="pong")]
    [request] = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-local"
    assert request.body["model"] == "qwen2.5-7b"


async def test_options_are_sent_with_every_request(server: OpenAIServer) -> None:
    env = {"OPENAI_API_KEY": "sk-local", "OPENAI_BASE_URL": f"{server.url}/v1"}
    server.queue_stream(
        [{"choices": [{"index": 0, "delta": {"content": "pong"}, "finish_reason": "stop"}]}]
    )

    model = resolve_model("openai:m", env=env, options={"max_tokens": 7, "temperature": 0.5})
    assert isinstance(model, OpenAIChatModel)
    await complete(model, [Msg(role="user", content="ping")])
    await model.aclose()

    [request] = server.requests
    assert (request.body["max_tokens"], request.body["temperature"]) == (7, 0.5)


def test_an_option_the_adapter_sets_itself_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"^options cannot set stream: the adapter sets"):
        resolve_model("openai:m", env={"OPENAI_API_KEY": "k"}, options={"stream": False})


def test_a_scripted_model_takes_no_options(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text('{"turns": []}')

    with pytest.raises(ConfigError, match=r"scripted model takes no options \(got seed, top_p\)"):
        resolve_model(f"scripted:{script}", env={}, options={"top_p": 1, "seed": 2})


def test_harness_model_is_used_when_no_spec_is_given() -> None:
    env = {"HARNESS_MODEL": " openai:gpt-4o-mini ", "OPENAI_API_KEY": "sk-test"}

    model = resolve_model(env=env)

    assert isinstance(model, OpenAIChatModel)
    assert model.model_name == "gpt-4o-mini"
    assert model.base_url == "https://api.openai.com/v1/"


def test_anthropic_without_a_key_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as caught:
        resolve_model("anthropic:claude-sonnet-4-5", env={})

    assert str(caught.value) == "ANTHROPIC_API_KEY is not set: export your Anthropic API key"


def test_anthropic_with_key_and_base_url() -> None:
    env = {"ANTHROPIC_API_KEY": "sk-ant", "ANTHROPIC_BASE_URL": "http://127.0.0.1:8124"}

    model = resolve_model("anthropic:claude-sonnet-4-5", env=env)

    assert isinstance(model, AnthropicChatModel)
    assert model.model_name == "claude-sonnet-4-5"
    assert model.base_url == "http://127.0.0.1:8124"


def test_scripted_with_a_missing_file_is_a_config_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "missing.json"

    with pytest.raises(ConfigError) as caught:
        resolve_model(f"scripted:{path}", env={})

    assert str(caught.value) == f"cannot read model script {path}: No such file or directory"


def test_scripted_with_invalid_json_is_a_config_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{"turns": [', encoding="utf-8")

    with pytest.raises(ConfigError) as caught:
        resolve_model(f"scripted:{path}", env={})

    assert str(caught.value) == (
        f"invalid model script {path}: file: Invalid JSON: EOF while parsing a list at line 1 "
        "column 11"
    )


def test_scripted_with_a_valid_file(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"turns": [{"text": "hello"}]}), encoding="utf-8")

    model = resolve_model(f"scripted:{path}", env={})

    assert isinstance(model, ScriptedChatModel)
    assert model.model_name == "scripted:script.json"
