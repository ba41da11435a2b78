"""Long turns for a real model with a small window (``llama_server``), shared by the tests of
``harness run`` and ``chat`` (tests/e2e) and of ``harness serve`` (tests/serve).

Each turn carries some 500 tokens, so by the third the conversation no longer fits a
2,048-token window (the second's request usually overflows already): only the overflow recovery
(compact by force, try the step once more) lets it go on. No ``--context-window`` is given, so
compaction's own triggers are out of reach and an overflow is the only way a compaction happens.
Three turns are therefore enough for a forced compaction whatever the model answers (a fourth
only repeated the overflow of the second and third, at the cost of a compaction and two model
calls more on every edge).
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import LlamaServer
from harness.memory.transcript import sessions_dir

TURNS = 3
FILLER = " ".join(f"fact{n} is about harbour cranes and tides." for n in range(40))


def question(turn: int) -> str:
    return f"Note {turn}: {FILLER} Reply with OK."


def server_env(server: LlamaServer) -> dict[str, str]:
    return {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "none"}


def model_args(server: LlamaServer) -> list[str]:
    return ["--model", f"openai:{server.model}", "-o", "max_tokens=32", "-o", "seed=3"]


def assert_kept_through_a_forced_compaction(workspace: Path, session: str) -> None:
    """Every turn was asked and answered, and a compaction forced by an overflow kept them."""
    sessions = workspace / sessions_dir("harness")  # the transcripts, whole
    transcript = [m for m in _records(sessions / f"{session}.jsonl") if m["type"] == "message"]
    asked = [m["content"] for m in transcript if m["role"] == "user"]
    assert asked == [question(turn) for turn in range(TURNS)]
    assert sum(m["role"] == "assistant" for m in transcript) >= TURNS
    compactions = _records(sessions / f"{session}.compactions.jsonl")
    assert any(record["forced"] for record in compactions), compactions


def _records(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
