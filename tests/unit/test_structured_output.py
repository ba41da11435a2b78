"""Structured output: the final answer fits the output type the call asked for, or the call
fails saying why; a model whose first answer is prose is asked again with what is wrong."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from typer.testing import CliRunner

from harness import HarnessAgent, OutputInvalid, RuntimeContext
from harness.cli.main import app
from harness.errors import ConfigError
from harness.kernel import (
    OUTPUT_SCHEMA,
    ChatChunk,
    ChatResponse,
    Ended,
    Finished,
    Msg,
    ToolSchema,
)
from harness.memory.provenance import Trust, message_trust
from harness.models import ScriptedChatModel

CTX = RuntimeContext(session_id="s")


class City(BaseModel):
    name: str
    population: int


def finished(outcome: Ended) -> Finished:
    assert isinstance(outcome, Finished), f"the call did not finish: {outcome!r}"
    return outcome


def agent(workspace: Path, turns: list[dict[str, object]]) -> HarnessAgent:
    return HarnessAgent(model=ScriptedChatModel(turns), workspace=workspace, memory=None)


async def test_prose_is_answered_with_the_problem_and_the_json_that_fits_is_the_output(
    workspace: Path,
) -> None:
    turns: list[dict[str, object]] = [
        {"match": "^Answer with only", "text": "It is Paris, a lovely city."},
        {"match": "no JSON value", "text": '```json\n{"name": "Paris", "population": "many"}\n```'},
        {"match": "valid integer", "text": 'Sure: {"name": "Paris", "population": 2100000}'},
    ]
    async with agent(workspace, turns) as harness:
        outcome = finished(await harness.call("Which city?", ctx=CTX, output=City))
        saved = await harness.sessions.load(CTX)
        model = harness.model
    assert outcome.output == City(name="Paris", population=2100000)
    assert outcome.reply.text == '{"name": "Paris", "population": 2100000}'
    assert isinstance(model, ScriptedChatModel)
    told = [request[-1].text for request in model.requests]
    assert "fits this JSON schema (City)" in told[0]
    assert "it holds no JSON value" in told[1]
    assert "population: Input should be a valid integer" in told[2]
    notes = [m for m in saved if m.name == "output_format"]
    assert len(notes) == 3  # the instruction and two corrections, kept with the session
    assert {message_trust(m) for m in notes} == {Trust.USER}  # they lower no memory trust


async def test_an_answer_that_never_fits_fails_naming_the_last_problem(workspace: Path) -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    turns: list[dict[str, object]] = [{"text": '{"ok": "yes"}', "repeat": True}]
    async with agent(workspace, turns) as harness:
        with pytest.raises(OutputInvalid, match="after 3 tries: ok: 'yes' is not of type"):
            await harness.call("ok?", ctx=CTX, output=schema)
        other = RuntimeContext(session_id="t")
        fits = finished(await harness.call("ok?", ctx=other, output={"type": "object"}))
    assert fits.output == {"ok": "yes"}


class Holding(ScriptedChatModel):
    """A scripted model that says it holds its answers to a schema, and keeps its options."""

    constrains_output = True

    def __init__(self, turns: list[dict[str, object]]) -> None:
        super().__init__(turns)
        self.options: list[dict[str, Any]] = []

    async def stream(
        self, messages: Sequence[Msg], tools: Sequence[ToolSchema], **options: Any
    ) -> AsyncIterator[ChatChunk | ChatResponse]:
        self.options.append(options)
        async for item in super().stream(messages, tools):
            yield item


async def test_a_model_that_holds_its_answer_gets_the_schema_at_every_step_of_the_turn(
    workspace: Path,
) -> None:
    turns: list[dict[str, object]] = [
        {"tool_calls": [{"name": "list_files", "input": {}}]},
        {"text": '{"name": "Oslo", "population": 700000}'},
        {"text": "Plain words."},
    ]
    holding = Holding(turns)
    async with HarnessAgent(model=holding, workspace=workspace, memory=None) as harness:
        finished(await harness.call("Which city?", ctx=CTX, output=City))
        finished(await harness.call("And now?", ctx=CTX))  # a plain turn is held to nothing
    schema = City.model_json_schema()
    assert holding.options == [{OUTPUT_SCHEMA: schema}, {OUTPUT_SCHEMA: schema}, {}]


def test_an_output_that_is_no_type_or_schema_is_refused_at_once(workspace: Path) -> None:
    harness = agent(workspace, [])
    with pytest.raises(ConfigError, match="not a JSON schema"):
        harness.stream("x", output={"type": "no such type"})
    with pytest.raises(ConfigError, match="pydantic model class or a JSON schema"):
        harness.stream("x", output=42)  # type: ignore[arg-type]


def test_harness_run_prints_the_json_that_fits_the_schema_file(tmp_path: Path) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps({"type": "object", "required": ["city"]}))
    script = tmp_path / "script.json"
    turns = [
        {"match": "^Answer with only", "text": "Porto, surely."},
        {"match": "no JSON value", "text": 'Here: {"city": "Porto"}'},
        {"match": "Extract NEW", "text": "NO_REPLY", "repeat": True},
    ]
    script.write_text(json.dumps({"turns": turns}))
    argv = ["run", "where?", "-w", str(tmp_path / "ws"), "--model", f"scripted:{script}"]

    done = CliRunner().invoke(app, [*argv, "--output-schema", str(schema)])
    schema.write_text('{"type": 7}')
    refused = CliRunner().invoke(app, [*argv, "--output-schema", str(schema)])

    assert (done.exit_code, done.stdout.strip()) == (0, '{"city": "Porto"}')
    assert refused.exit_code == 2
    assert "not a JSON schema" in refused.output
