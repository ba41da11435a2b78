"""``GET /metrics`` counts the turns a served agent ran, as Prometheus scrapes it.

Needs :meth:`harness.serve.metrics.TurnMetrics.observe` wired into the turn's pump
(``harness.serve.streams.TurnStream``, which every route starts through
``TurnStreams.start``): every served turn's events pass through it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from _served import Served, scripted_agent, serve_process, served
from prometheus_client.parser import text_string_to_metric_families

TURNS: list[dict[str, Any]] = [{"match": "^hello", "text": "Done.", "repeat": True}]
"""Anything but a greeting finds no turn of the script: the model fails."""

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(text: str) -> Samples:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def scrape(url: str) -> Samples:
    with httpx2.Client(base_url=url, timeout=20) as api:
        reply = api.get("/metrics")
    assert reply.status_code == 200, reply.text
    return samples(reply.text)


def grown(before: Samples, after: Samples, name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    return after.get(key, 0.0) - before.get(key, 0.0)


@pytest.fixture
def server(workspace: Path) -> Iterator[Served]:
    with served(scripted_agent(workspace, TURNS)) as running:
        yield running


async def test_a_chat_completion_is_counted_with_its_tokens_and_time(server: Served) -> None:
    before = scrape(server.url)
    async with openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0) as api:
        reply = await api.chat.completions.create(
            model="harness", messages=[{"role": "user", "content": "hello"}]
        )
    after = scrape(server.url)
    assert reply.choices[0].message.content == "Done."
    assert grown(before, after, "harness_turns_total", outcome="completed") == 1
    assert grown(before, after, "harness_turn_seconds_count") == 1
    assert reply.usage is not None
    assert grown(before, after, "harness_tokens_total", kind="input") == reply.usage.prompt_tokens
    assert grown(before, after, "harness_tokens_total", kind="output") == (
        reply.usage.completion_tokens
    )
    assert after[("harness_sessions_busy", ())] == 0
    assert grown(before, after, "harness_http_requests_total", method="POST", status="200") == 1


async def test_a_failed_turn_is_counted_by_its_error_code(server: Served) -> None:
    before = scrape(server.url)
    async with openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0) as api:
        with pytest.raises(openai.APIStatusError) as failed:
            await api.chat.completions.create(
                model="harness", messages=[{"role": "user", "content": "fail now"}]
            )
    after = scrape(server.url)
    code = str(failed.value.code)
    assert code == "script_exhausted_error"
    assert grown(before, after, "harness_turns_total", outcome="failed") == 1
    assert grown(before, after, "harness_turn_errors_total", code=code) == 1
    assert grown(before, after, "harness_turns_total", outcome="completed") == 0


async def test_turns_on_every_worker_are_summed_in_one_scrape(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [{"text": "Done.", "repeat": True}]}))
    args = ["-w", str(tmp_path / "ws"), "-m", f"scripted:{script}", "--workers", "2"]
    with serve_process(args, tmp_path / "workers.log") as (url, _):
        for i in range(6):
            async with openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0) as api:
                await api.chat.completions.create(
                    model="harness",
                    messages=[{"role": "user", "content": f"hello {i}"}],
                    extra_headers={"X-Harness-Session": f"s{i}"},
                )
        completed = ("harness_turns_total", (("outcome", "completed"),))
        counted = [scrape(url)[completed] for _ in range(4)]
    assert counted == [6.0] * 4
