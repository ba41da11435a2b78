"""Structured output: a turn whose final answer must fit a schema.

A caller asks for an output type (a pydantic model, or a JSON schema) with ``HarnessAgent.call(...,
output=...)``, ``harness run --output-schema FILE``, chat completions' ``response_format``
(``json_schema`` or ``json_object``) or the Responses API's ``text.format``. The turn then
goes as any turn (tools run, memory is kept), and:

- the model is told, after the input, to answer with only a JSON value that fits the schema
  (a message the harness writes, which names the schema: :func:`instruction`);
- its final answer is checked (:func:`check`): the JSON is taken from the answer (a fenced
  code block, or the first ``{``/``[`` to its last match), parsed and validated, with pydantic
  for a model and ``jsonschema`` for a schema;
- an answer that does not fit is answered with what is wrong (:func:`correction`) and the
  model asked again, at most ``retries`` times (2 by default); then the call fails with
  :class:`~harness.errors.OutputInvalid`, which names the last problem;
- the finished outcome's reply is the JSON text alone, and its ``output`` the value: the
  model's instance, or the parsed JSON.

Trust boundary: the schema is the caller's (the operator's code, or a user's request); the
messages that carry it are written by the harness and vouched for as the user's (they hold
nothing of a tool's output), so they lower no memory trust. A model's answer is checked, never
trusted: what reaches ``output`` has passed validation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from pydantic import BaseModel, ValidationError

from harness.errors import ConfigError
from harness.kernel import SYNTHETIC, Msg
from harness.memory.provenance import TRUST_KEY, Trust

__all__ = ["DEFAULT_RETRIES", "OutputSpec", "OutputType", "check", "correction", "instruction"]

DEFAULT_RETRIES: Final = 2
"""How many times a model whose answer does not fit is asked again."""

OutputType = type[BaseModel] | Mapping[str, Any]
"""What a caller gives: a pydantic model, or a JSON schema."""

_FENCED: Final = re.compile(r"```(?:json)?\s*\n(.*?)\n\s*```", re.DOTALL)
_NOTE_NAME: Final = "output_format"


@dataclass(frozen=True, slots=True)
class OutputSpec:
    """The output a call asks for: its schema, and the model that validates it (if any)."""

    schema: Mapping[str, Any]
    name: str = "answer"
    model: type[BaseModel] | None = None
    retries: int = DEFAULT_RETRIES

    @classmethod
    def of(cls, given: OutputType | OutputSpec, *, retries: int = DEFAULT_RETRIES) -> OutputSpec:
        """The spec of a pydantic model, a JSON schema, or a spec.

        Raises:
            ConfigError: ``given`` is none of them, or a schema ``jsonschema`` cannot read.
        """
        if isinstance(given, OutputSpec):
            return given
        if isinstance(given, type) and issubclass(given, BaseModel):
            return cls(given.model_json_schema(), given.__name__, given, retries)
        if isinstance(given, Mapping):
            from jsonschema.exceptions import SchemaError  # type: ignore[import-untyped]
            from jsonschema.validators import validator_for  # type: ignore[import-untyped]

            try:
                validator_for(given).check_schema(given)
            except SchemaError as exc:
                msg = f"the output schema is not a JSON schema: {exc.message}"
                raise ConfigError(msg) from None
            return cls(dict(given), str(given.get("title") or "answer"), None, retries)
        raise ConfigError(
            f"output must be a pydantic model class or a JSON schema, not {type(given).__name__}"
        )


def instruction(spec: OutputSpec) -> Msg:
    """What the model is told after the input: answer with JSON that fits the schema."""
    schema = json.dumps(spec.schema, ensure_ascii=False)
    text = (
        f"Answer with only a JSON value that fits this JSON schema ({spec.name}), no prose "
        f"around it: {schema}"
    )
    return _note(text)


def correction(spec: OutputSpec, problem: str) -> Msg:
    """What the model is told when its answer did not fit: what is wrong, and to answer again."""
    return _note(
        f"Your last answer does not fit the schema {spec.name}: {problem}. Answer again with "
        "only the JSON value, fixed."
    )


def _note(text: str) -> Msg:
    # The harness's words, carrying the caller's schema: no outside content, so the user's.
    metadata = {SYNTHETIC: True, TRUST_KEY: Trust.USER.value}
    return Msg(role="user", name=_NOTE_NAME, content=text, metadata=metadata)


def check(spec: OutputSpec, answer: str) -> tuple[str, Any] | str:
    """``(json_text, value)`` when ``answer`` holds a JSON value that fits; else what is wrong."""
    text = _json_of(answer)
    if text is None:
        return "it holds no JSON value"
    try:
        value = json.loads(text)
    except ValueError as exc:
        return f"it is not valid JSON ({exc})"
    if spec.model is not None:
        try:
            return text, spec.model.model_validate(value)
        except ValidationError as exc:
            return "; ".join(f"{_path(e['loc'])}: {e['msg']}" for e in exc.errors()[:3])
    from jsonschema.validators import validator_for

    errors = sorted(validator_for(spec.schema)(spec.schema).iter_errors(value), key=str)[:3]
    if errors:
        return "; ".join(f"{_path(e.path)}: {e.message}" for e in errors)
    return text, value


def _path(parts: Any) -> str:
    return ".".join(str(part) for part in parts) or "value"


def _json_of(answer: str) -> str | None:
    """The JSON text of an answer: a fenced block's, or from its first brace to its last."""
    fenced = _FENCED.search(answer)
    if fenced:
        return fenced[1].strip()
    starts = [i for i in (answer.find("{"), answer.find("[")) if i >= 0]
    if not starts:
        return None
    start = min(starts)
    end = answer.rfind("}" if answer[start] == "{" else "]")
    return answer[start : end + 1] if end > start else None
