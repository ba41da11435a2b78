"""Per-user limits: a user over a limit gets 429 with Retry-After and a code naming the limit,
counted in /metrics, while every other user is served as before."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from _served import Served, scripted_agent, served

from harness.errors import ConfigError
from harness.models import load_prices
from harness.serve import ApiKeys, Price, ServeConfig, UserLimits, add_key

USAGE = {"input_tokens": 600, "output_tokens": 500}
TURNS: list[dict[str, Any]] = [
    {"match": "slow", "text": "Slowly done.", "delay": 30, "repeat": True, "usage": USAGE},
    {"text": "Done.", "repeat": True, "usage": USAGE},
]


@pytest.fixture
def keys(tmp_path: Path) -> tuple[str, str, Path]:
    file = tmp_path / "keys.txt"
    return add_key(file, "alice"), add_key(file, "bob"), file


def limited(workspace: Path, keys: tuple[str, str, Path], limits: UserLimits) -> Iterator[Served]:
    config = ServeConfig(keys=ApiKeys.load([keys[2]]), limits=limits)
    with served(scripted_agent(workspace, TURNS), config) as running:
        yield running


def api(server: Served, key: str) -> httpx2.Client:
    return httpx2.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=30
    )


def chat(client: httpx2.Client, text: str, session: str) -> httpx2.Response:
    body = {"model": "harness", "messages": [{"role": "user", "content": text}]}
    return client.post("/v1/chat/completions", json=body, headers={"X-Harness-Session": session})


def refused(reply: httpx2.Response, code: str) -> int:
    """The seconds of a 429's Retry-After, once its code is checked."""
    assert reply.status_code == 429, reply.text
    assert reply.json()["error"]["code"] == code
    return int(reply.headers["Retry-After"])


def limited_count(server: Served, key: str, limit: str) -> float:
    with api(server, key) as client:
        text = client.get("/metrics").text
    line = next(
        line
        for line in text.splitlines()
        if line.startswith(f'harness_limited_total{{limit="{limit}"}}')
    )
    return float(line.rsplit(" ", 1)[1])


def test_requests_past_the_minute_are_refused_for_that_user_alone(
    workspace: Path, keys: tuple[str, str, Path]
) -> None:
    alice, bob, _ = keys
    for server in limited(workspace, keys, UserLimits(requests_per_minute=3)):
        with api(server, alice) as first, api(server, bob) as second:
            for _ in range(3):
                assert first.get("/v1/sessions").status_code == 200
            wait = refused(first.get("/v1/sessions"), "rate_limited")
            assert 1 <= wait <= 60
            assert second.get("/v1/sessions").status_code == 200
        assert limited_count(server, bob, "rate_limited") >= 1


def test_a_second_turn_at_once_is_refused_and_the_others_run(
    workspace: Path, keys: tuple[str, str, Path]
) -> None:
    alice, bob, _ = keys
    for server in limited(workspace, keys, UserLimits(concurrent_turns=1)):
        with api(server, alice) as first, api(server, bob) as second:
            body = {"input": "slow", "detach": True}
            with first.stream("POST", "/v1/sessions/a1/turns", json=body) as started:
                assert started.status_code == 200
                head = itertools.islice(started.iter_lines(), 3)  # then it goes on, detached
                assert any("turn.started" in line for line in head)
            refused(chat(first, "hello", "a2"), "too_many_turns")
            reply = chat(second, "hello", "b1")
            assert reply.status_code == 200, reply.text
            assert first.post("/v1/sessions/a1/cancel").json()["cancelled"] is True
            deadline = time.monotonic() + 20
            while chat(first, "hello", "a2").status_code == 429:  # the stopped turn frees it
                assert time.monotonic() < deadline, "the stopped turn still counted"
                time.sleep(0.05)


def test_a_spent_day_refuses_new_turns_until_midnight(
    workspace: Path, keys: tuple[str, str, Path]
) -> None:
    alice, bob, _ = keys
    limits = UserLimits(
        tokens_per_day=5_000,
        cost_per_day=0.5,
        prices={"scripted": Price(input_per_million=1_000.0, output_per_million=0.0)},
    )
    for server in limited(workspace, keys, limits):
        with api(server, alice) as first, api(server, bob) as second:
            assert chat(first, "hello", "a1").status_code == 200  # 600 input tokens: 0.6
            wait = refused(chat(first, "again", "a1"), "cost_limit")
            assert 0 < wait <= 86_400
            assert chat(second, "hello", "b1").status_code == 200
            trace = first.get("/v1/sessions/a1/trace").json()
        assert limited_count(server, bob, "cost_limit") >= 1
    assert [call["cost"] for call in trace["calls"]] == [0.6]  # priced as it was charged
    tokens = UserLimits(tokens_per_day=1_000)
    for server in limited(workspace, keys, tokens):  # the day's spending is kept: a restart
        with api(server, bob) as second:  # bob's first turn already spent 1,100
            refused(chat(second, "again", "b1"), "token_limit")


def test_limits_and_prices_are_checked_when_given(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="requests_per_minute"):
        UserLimits(requests_per_minute=0)
    with pytest.raises(ConfigError, match="cost_per_day needs prices"):
        UserLimits(cost_per_day=1.0)
    with pytest.raises(ConfigError, match="input_per_million"):
        Price(-1.0, 0.0)
    table = tmp_path / "prices.json"
    table.write_text(json.dumps({"gpt-4o-mini": {"input": 0.15, "output": 0.6}}))
    assert load_prices(table) == {"gpt-4o-mini": Price(0.15, 0.6)}
    table.write_text(json.dumps({"gpt-4o-mini": {"in": 0.15}}))
    with pytest.raises(ConfigError, match="the price of 'gpt-4o-mini'"):
        load_prices(table)
