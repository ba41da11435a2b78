"""What an operator replacing another OpenAI-compatible server expects around the API itself.

``GET /v1/models/{id}``, ``/health``, the OpenAPI schema and its page, Prometheus ``/metrics``
(one scrape summing every worker), CORS for listed origins only, request logs from every
worker, and API keys listed and revoked while the server runs. Each over real HTTP on a real
uvicorn (in a thread, or ``harness serve`` as a process).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import os
import re
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from _served import Served, scripted_agent, serve_process, served
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from harness.cli.main import app as cli
from harness.errors import ConfigError
from harness.serve import ApiKeys, ServeConfig, add_key
from harness.serve.config import web_origin
from harness.serve.http import json_body
from harness.serve.keys import list_keys, revoke_keys
from harness.serve.metrics import TURN_METRICS

TURNS: list[dict[str, Any]] = [{"text": "Done.", "repeat": True}]
ORIGIN = "http://app.example.test:3000"


@pytest.fixture
def server(workspace: Path) -> Iterator[Served]:
    with served(scripted_agent(workspace, TURNS)) as running:
        yield running


@pytest.fixture
def keyed(workspace: Path, tmp_path: Path) -> Iterator[tuple[Served, str, Path]]:
    file = tmp_path / "keys.txt"
    key = add_key(file, "alice")
    add_key(file, "bob")
    config = ServeConfig(keys=ApiKeys.load([file], environ={}))
    with served(scripted_agent(workspace, TURNS), config) as running:
        yield running, key, file


def script(tmp_path: Path) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"turns": TURNS}))
    return f"scripted:{path}"


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape by name and labels."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def requests_counted(text: str, method: str, status: str) -> float:
    key = ("harness_http_requests_total", (("method", method), ("status", status)))
    return samples(text).get(key, 0.0)


# -- GET /v1/models/{id} ------------------------------------------------------------------------


async def test_the_openai_sdk_retrieves_the_agents_model_and_no_other(server: Served) -> None:
    async with openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0) as api:
        model = await api.models.retrieve("harness")
        listed = await api.models.list()
        with pytest.raises(openai.NotFoundError) as missing:
            await api.models.retrieve("gpt-4o")
    assert (model.id, model.object, model.owned_by) == ("harness", "model", "harness")
    assert model.created > 0
    assert [m.model_dump() for m in listed.data] == [model.model_dump()]  # one shape
    assert missing.value.code == "model_not_found"
    assert "'gpt-4o'" in missing.value.message


async def test_a_model_is_retrieved_with_a_key_only(keyed: tuple[Served, str, Path]) -> None:
    server, key, _ = keyed
    async with httpx2.AsyncClient(base_url=server.url, timeout=10) as api:
        without = await api.get("/v1/models/harness")
        wrong = await api.get("/v1/models/harness", headers={"Authorization": "Bearer hk_no"})
        right = await api.get("/v1/models/harness", headers={"Authorization": f"Bearer {key}"})
        other = await api.get("/v1/models/a/b", headers={"Authorization": f"Bearer {key}"})
    assert without.json()["error"]["code"] == "missing_api_key"
    assert wrong.json()["error"]["code"] == "invalid_api_key"
    assert right.status_code == 200
    assert right.json()["id"] == "harness"
    assert other.status_code == 404
    assert other.json()["error"]["code"] == "model_not_found"


# -- /health --------------------------------------------------------------------------------------


async def test_health_answers_as_healthz_without_a_key_on_any_host(
    keyed: tuple[Served, str, Path],
) -> None:
    server, _, _ = keyed
    async with httpx2.AsyncClient(base_url=server.url, timeout=10) as api:
        health = await api.get("/health", headers={"Host": "10.1.2.3:8000"})
        healthz = await api.get("/healthz")
    assert health.status_code == healthz.status_code == 200
    assert health.json() == healthz.json() == {"status": "ok"}


# -- OpenAPI --------------------------------------------------------------------------------------


async def test_the_openapi_schema_has_every_route_and_their_bodies(
    keyed: tuple[Served, str, Path],
) -> None:
    server, _, _ = keyed
    async with httpx2.AsyncClient(base_url=server.url, timeout=10) as api:
        reply = await api.get("/openapi.json")  # no key: a schema holds no user's data
    assert reply.status_code == 200
    schema = reply.json()
    paths = schema["paths"]
    for path in ("/v1/chat/completions", "/v1/models", "/v1/models/{model_id}", "/health"):
        assert path in paths, sorted(paths)
    assert "/v1/sessions/{session_id}/turns" in paths
    chat = paths["/v1/chat/completions"]["post"]["requestBody"]["content"]["application/json"]
    assert {"model", "messages"} <= set(chat["schema"]["properties"])
    assert chat["schema"]["properties"]["messages"]["items"]["properties"]["role"]
    turns = paths["/v1/sessions/{session_id}/turns"]["post"]["requestBody"]
    assert "input" in turns["content"]["application/json"]["schema"]["properties"]
    responses = paths["/v1/responses"]["post"]["requestBody"]["content"]["application/json"]
    assert "input" in responses["schema"]["properties"]
    assert "#/$defs" not in reply.text  # every nested model inlined: no dangling reference
    assert paths["/v1/models"]["get"]["security"] == [{"apiKey": []}]
    assert "security" not in paths["/health"]["get"]
    assert schema["components"]["securitySchemes"]["apiKey"]["scheme"] == "bearer"
    assert "/metrics" not in paths
    assert "/docs" not in paths


def test_json_body_inlines_nested_models() -> None:
    from pydantic import BaseModel

    class Inner(BaseModel):
        text: str

    class Outer(BaseModel):
        items: list[Inner]
        one: Inner | None = None

    body = json_body(Outer)["requestBody"]["content"]["application/json"]["schema"]
    assert body["properties"]["items"]["items"]["properties"] == {
        "text": {"title": "Text", "type": "string"}
    }
    assert "$ref" not in json.dumps(body)


async def test_the_docs_page_may_load_swagger_from_its_cdn_and_the_main_page_may_not(
    server: Served,
) -> None:
    async with httpx2.AsyncClient(base_url=server.url, timeout=10) as api:
        docs = await api.get("/docs")
        page = await api.get("/")
    assert docs.status_code == 200
    assert "swagger-ui" in docs.text
    policy = docs.headers["content-security-policy"]
    assert "https://cdn.jsdelivr.net" in policy
    assert "'unsafe-inline'" not in policy.split("script-src", 1)[1].split(";", 1)[0]
    for script in re.findall(r"<script>(.*?)</script>", docs.text, flags=re.DOTALL):
        hashed = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
        assert f"'sha256-{hashed}'" in policy  # the inline script the page runs is allowed
    assert "connect-src 'self'" in policy
    assert "frame-ancestors 'none'" in policy
    main = page.headers["content-security-policy"]
    assert "cdn.jsdelivr.net" not in main
    assert "https:" not in main


# -- /metrics -------------------------------------------------------------------------------------


async def test_metrics_are_open_on_a_keyless_loopback_server(server: Served) -> None:
    async with httpx2.AsyncClient(base_url=server.url, timeout=10) as api:
        before = (await api.get("/metrics")).text
        for _ in range(3):
            await api.get("/v1/models/nope")
        reply = await api.get("/metrics")
    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("text/plain")
    found = samples(reply.text)
    assert ("harness_turns_total", (("outcome", "completed"),)) in found
    assert ("harness_tokens_total", (("kind", "input"),)) in found
    assert ("harness_sessions_busy", ()) in found
    grown = requests_counted(reply.text, "GET", "404") - requests_counted(before, "GET", "404")
    assert grown == 3


async def test_metrics_need_a_key_on_a_keyed_server(keyed: tuple[Served, str, Path]) -> None:
    server, key, _ = keyed
    async with httpx2.AsyncClient(base_url=server.url, timeout=10) as api:
        without = await api.get("/metrics")
        wrong = await api.get("/metrics", headers={"Authorization": "Bearer hk_wrong"})
        right = await api.get("/metrics", headers={"Authorization": f"Bearer {key}"})
    assert without.status_code == wrong.status_code == 401
    assert right.status_code == 200
    assert "harness_turns_total" in right.text


async def test_metrics_open_answers_a_scraper_without_a_key(
    workspace: Path, tmp_path: Path
) -> None:
    file = tmp_path / "keys.txt"
    add_key(file, "alice")
    config = ServeConfig(keys=ApiKeys.load([file], environ={}), metrics_open=True)
    with served(scripted_agent(workspace, TURNS), config) as server:
        async with httpx2.AsyncClient(base_url=server.url, timeout=10) as api:
            scraped = await api.get("/metrics")
            models = await api.get("/v1/models")
    assert scraped.status_code == 200
    assert "harness_http_requests_total" in scraped.text
    assert models.status_code == 401  # only the metrics are open


async def test_one_scrape_sums_every_worker_and_the_directory_goes_at_exit(
    tmp_path: Path,
) -> None:
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    args = ["-w", str(tmp_path / "ws"), "-m", script(tmp_path), "--workers", "2"]
    log = tmp_path / "workers.log"
    with serve_process(args, log, env={"TMPDIR": str(temporary)}) as (url, _):
        assert len(list(temporary.glob("harness-metrics-*"))) == 1

        async def missing() -> None:  # a connection of its own: either worker may answer
            async with httpx2.AsyncClient(base_url=url, timeout=20) as api:
                assert (await api.get("/v1/models/nope")).status_code == 404

        await asyncio.gather(*(missing() for _ in range(40)))
        scrapes = []
        for _ in range(4):
            async with httpx2.AsyncClient(base_url=url, timeout=20) as api:
                scrapes.append((await api.get("/metrics")).text)
    # Whichever worker answered a scrape, it counted all 40: the workers' counts are summed.
    assert [requests_counted(text, "GET", "404") for text in scrapes] == [40.0] * 4
    pids = set(re.findall(r"Started server process \[(\d+)\]", log.read_text()))
    assert len(pids) == 2, log.read_text()
    assert list(temporary.glob("harness-metrics-*")) == []


def test_turn_metrics_count_each_outcome_from_the_events() -> None:
    async def run(
        events: list[tuple[str, dict[str, Any]]], *, close_after: int | None = None
    ) -> None:
        async def source() -> Any:
            for event in events:
                yield event

        seen = 0
        observed = TURN_METRICS.observe(source())
        try:
            async for _ in observed:
                seen += 1
                if close_after is not None and seen == close_after:
                    break
        finally:
            await observed.aclose()

    def scrape() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        from harness.serve.metrics import metrics_text

        return samples(metrics_text().decode())

    def outcome(found: dict[Any, float], name: str) -> float:
        return found[("harness_turns_total", (("outcome", name),))]

    started = ("turn.started", {"session_id": "s"})
    step = ("step.completed", {"input_tokens": 7, "output_tokens": 3})
    before = scrape()
    asyncio.run(run([started, step, step, ("turn.completed", {"message": {}})]))
    asyncio.run(run([started, ("approval.requested", {}), ("turn.paused", {})]))
    asyncio.run(run([started, ("error", {"code": "model_error", "message": "x"})]))
    asyncio.run(run([started, ("error", {"code": "turn_timeout", "message": "x"})]))
    asyncio.run(run([started, step, ("text.delta", {"text": "a"})], close_after=2))
    asyncio.run(run([]))  # never started (the session stayed busy): not a turn
    after = scrape()
    for name in ("completed", "paused", "failed", "timeout", "cancelled"):
        assert outcome(after, name) - outcome(before, name) == 1, name
    tokens = ("harness_tokens_total", (("kind", "input"),))
    assert after[tokens] - before[tokens] == 7 * 3
    for code in ("model_error", "turn_timeout"):
        key = ("harness_turn_errors_total", (("code", code),))
        assert after[key] - before.get(key, 0.0) == 1
    count = ("harness_turn_seconds_count", ())
    assert after[count] - before[count] == 5
    assert after[("harness_sessions_busy", ())] == before[("harness_sessions_busy", ())]


def test_observe_closes_the_events_it_is_given() -> None:
    closed: list[bool] = []

    async def source() -> Any:
        try:
            yield ("turn.started", {"session_id": "s"})
            yield ("text.delta", {"text": "a"})
        finally:
            closed.append(True)

    async def main() -> None:
        observed = TURN_METRICS.observe(source())
        assert (await anext(observed))[0] == "turn.started"
        await observed.aclose()

    asyncio.run(main())
    assert closed == [True]


# -- CORS -----------------------------------------------------------------------------------------


@pytest.fixture
def cors(workspace: Path) -> Iterator[Served]:
    config = ServeConfig(cors_origins=(ORIGIN,))
    with served(scripted_agent(workspace, TURNS), config) as running:
        yield running


def preflight(api: httpx2.Client, origin: str, method: str = "POST") -> httpx2.Response:
    return api.options(
        "/v1/chat/completions",
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": method,
            "Access-Control-Request-Headers": "authorization,content-type,x-harness-session,"
            "last-event-id",
        },
    )


CHAT = {"model": "harness", "messages": [{"role": "user", "content": "hi"}]}


def test_a_listed_origin_gets_a_preflight_and_its_answer(cors: Served) -> None:
    with httpx2.Client(base_url=cors.url, timeout=20) as api:
        granted = preflight(api, ORIGIN)
        reply = api.post(
            "/v1/chat/completions", json=CHAT, headers={"Origin": ORIGIN, "X-Harness-Session": "c"}
        )
        listing = api.get("/v1/models", headers={"Origin": ORIGIN})
    assert granted.status_code == 200, granted.text
    assert granted.headers["access-control-allow-origin"] == ORIGIN
    methods = {m.strip() for m in granted.headers["access-control-allow-methods"].split(",")}
    assert {"GET", "POST", "PATCH", "DELETE", "OPTIONS"} <= methods
    allowed = granted.headers["access-control-allow-headers"].lower()
    for header in ("authorization", "content-type", "x-harness-session", "last-event-id"):
        assert header in allowed
    assert "access-control-allow-credentials" not in granted.headers
    assert reply.status_code == 200, reply.text
    assert reply.json()["choices"][0]["message"]["content"] == "Done."
    assert reply.headers["access-control-allow-origin"] == ORIGIN
    assert reply.headers["access-control-expose-headers"] == "X-Harness-Session"
    assert listing.headers["access-control-allow-origin"] == ORIGIN


_HEADER = st.from_regex(r"[a-z][a-z0-9-]{0,30}", fullmatch=True)
STAINLESS = [
    "x-stainless-os",
    "x-stainless-lang",
    "x-stainless-arch",
    "x-stainless-runtime",
    "x-stainless-runtime-version",
    "x-stainless-package-version",
    "x-stainless-retry-count",
    "x-stainless-timeout",
]


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(asked=st.lists(st.one_of(st.sampled_from(STAINLESS), _HEADER), min_size=1, max_size=8))
def test_a_listed_origins_preflight_grants_the_headers_its_client_sends(
    cors: Served, asked: list[str]
) -> None:
    """The official openai JS SDK's preflight asks for its x-stainless-* headers: a listed page
    using it got 400 "Disallowed CORS headers" and could not reach the server."""
    requested = ",".join(["authorization", "content-type", *asked])
    with httpx2.Client(base_url=cors.url, timeout=20) as api:
        granted = api.options(
            "/v1/chat/completions",
            headers={
                "Origin": ORIGIN,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": requested,
            },
        )
        denied = api.options(
            "/v1/chat/completions",
            headers={
                "Origin": "http://evil.example.test:3000",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": requested,
            },
        )
    assert granted.status_code == 200, granted.text
    allowed = {
        h.strip() for h in granted.headers["access-control-allow-headers"].lower().split(",")
    }
    assert set(requested.split(",")) <= allowed
    assert denied.status_code == 403


def test_an_unlisted_origin_is_refused_before_and_after_its_preflight(cors: Served) -> None:
    other = "http://evil.example.test:3000"
    with httpx2.Client(base_url=cors.url, timeout=20) as api:
        denied = preflight(api, other)
        posted = api.post("/v1/chat/completions", json=CHAT, headers={"Origin": other})
    for reply in (denied, posted):
        assert reply.status_code == 403
        assert reply.json()["error"]["code"] == "origin_not_allowed"
        assert "access-control-allow-origin" not in reply.headers


def spellings(origin: str) -> st.SearchStrategy[str]:
    """Origins that look like ``origin`` but are not its browser spelling."""
    scheme, rest = origin.split("://")
    host, port = rest.rsplit(":", 1)
    recased = st.text(st.sampled_from("aAeEpPxXtTsS"), min_size=1).map(
        lambda _: "".join(c.upper() if i % 2 else c for i, c in enumerate(origin))
    )
    return st.one_of(
        recased,
        st.sampled_from(
            [
                f"{scheme}://{host}.:{port}",
                f"{scheme}://{host}",
                f"https://{rest}",
                f"{scheme}://user@{rest}",
                f"{scheme}://user:pw@{rest}",
                f"{origin}/",
                f"{origin}/path",
                f"{scheme}://{host}:0{port}",
                f"{scheme}://{host}.evil.example:{port}",
                f"{scheme}://evil.{host}:{port}",
                f"{origin}, {origin}",
                "null",
                "*",
            ]
        ),
        st.integers(1, 65535)
        .filter(lambda p: p != int(port))
        .map(lambda p: f"{scheme}://{host}:{p}"),
        st.text(
            st.characters(min_codepoint=33, max_codepoint=255, exclude_characters="\x7f")
        ).filter(lambda t: t != origin and t.strip() == t and t != ""),
    )


def test_no_other_spelling_of_a_listed_origin_gets_through_the_guard(cors: Served) -> None:
    with httpx2.Client(base_url=cors.url, timeout=20) as api:

        @settings(max_examples=150, deadline=None)
        @given(spellings(ORIGIN))
        def refused(origin: str) -> None:
            reply = api.get("/v1/models", headers={b"Origin": origin.encode("latin-1")})
            assert reply.status_code == 403, (origin, reply.text)
            assert reply.json()["error"]["code"] == "origin_not_allowed"

        refused()
        assert api.get("/v1/models", headers={"Origin": ORIGIN}).status_code == 200


@pytest.mark.parametrize(
    ("given_origin", "canonical"),
    [
        ("HTTPS://App.Example.COM:443/", "https://app.example.com"),
        ("http://localhost:3000", "http://localhost:3000"),
        ("http://[0:0:0:0:0:0:0:1]:8080", "http://[::1]:8080"),
        ("http://127.0.0.1:80", "http://127.0.0.1"),
    ],
)
def test_origins_are_kept_as_a_browser_spells_them(given_origin: str, canonical: str) -> None:
    assert web_origin(given_origin) == canonical
    assert ServeConfig(cors_origins=(given_origin,)).cors_origins == (canonical,)


@pytest.mark.parametrize(
    "bad",
    [
        "*",
        "https://*.example.com",
        "app.example.com",
        "https://app.example.com/path",
        "https://user@app.example.com",
        "ftp://app.example.com",
        "null",
        "https://app.example.com:99999",
        "https://app.example.com.",
        "",
    ],
)
def test_a_bad_origin_is_a_one_line_config_error(bad: str) -> None:
    with pytest.raises(ConfigError, match="not a web origin") as refused:
        ServeConfig(cors_origins=(bad,))
    assert "\n" not in str(refused.value)
    result = CliRunner().invoke(cli, ["serve", "--cors-origin", bad or " "], env={"COLUMNS": "300"})
    assert result.exit_code == 2
    assert "not a web origin" in result.output


# -- several workers log their requests -----------------------------------------------------------

LOG_LINE = re.compile(
    r'^\S+ \S+ 127\.0\.0\.1 "GET /v1/models/nope" 404 user=- \d+\.\d ms$', re.MULTILINE
)


async def test_every_worker_logs_its_requests(tmp_path: Path) -> None:
    args = ["-w", str(tmp_path / "ws"), "-m", script(tmp_path), "--workers", "2"]
    log = tmp_path / "workers.log"
    with serve_process(args, log) as (url, _):

        async def missing() -> None:
            async with httpx2.AsyncClient(base_url=url, timeout=20) as api:
                await api.get("/v1/models/nope")

        await asyncio.gather(*(missing() for _ in range(10)))
    # The server has stopped: every line it logged is in the file.
    assert len(LOG_LINE.findall(log.read_text())) == 10, log.read_text()


# -- keys: list, revoke, and a server that follows ------------------------------------------------


def test_keys_list_shows_users_and_digest_prefixes_never_keys(tmp_path: Path) -> None:
    file = tmp_path / "keys.txt"
    alice = add_key(file, "alice")
    bob = add_key(file, "bob")
    shown = CliRunner().invoke(cli, ["keys", "list", "--file", str(file)])
    as_json = CliRunner().invoke(cli, ["keys", "list", "--file", str(file), "--json"])
    assert shown.exit_code == as_json.exit_code == 0, shown.output
    records = json.loads(as_json.stdout)
    assert [r["user"] for r in records] == ["alice", "bob"]
    assert all(re.fullmatch(r"[0-9a-f]{12}", r["digest"]) for r in records)
    lines = shown.stdout.splitlines()
    assert [line.split() for line in lines] == [[r["user"], r["digest"]] for r in records]
    for key in (alice, bob):
        assert key not in shown.output
        assert key not in as_json.output


def test_revoke_removes_a_users_entries_and_keeps_the_rest(tmp_path: Path) -> None:
    file = tmp_path / "keys.txt"
    file.write_text("# operator's note\n")
    file.chmod(0o600)
    add_key(file, "alice")
    add_key(file, "alice")
    bob = add_key(file, "bob")
    inode = file.stat().st_ino
    result = CliRunner().invoke(cli, ["keys", "revoke", "alice", "--file", str(file)])
    assert result.exit_code == 0, result.output
    assert "revoked 2 key(s) of alice" in result.output
    assert file.read_text().startswith("# operator's note\nbob sha256:")
    assert [e.user for e in list_keys(file)] == ["bob"]
    assert ApiKeys.load([file], environ={}).user_for(bob) == "bob"
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
    assert file.stat().st_ino != inode  # a new file put in place, never rewritten in place
    assert [p.name for p in tmp_path.iterdir()] == ["keys.txt"]  # no temporary file left


def test_revoke_by_digest_removes_one_key(tmp_path: Path) -> None:
    file = tmp_path / "keys.txt"
    first = add_key(file, "alice")
    second = add_key(file, "alice")
    entries = list_keys(file)
    removed = revoke_keys(file, "alice", entries[1].short)
    assert removed == [entries[1]]
    keys = ApiKeys.load([file], environ={})
    assert keys.user_for(first) == "alice"
    assert keys.user_for(second) is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["carol"], "no key of user 'carol'"),
        (["alice", "--digest", "zz"], "not the start of a digest"),
        (["alice", "--digest", "0" * 64], "no key of user 'alice'"),
    ],
)
def test_revoking_what_is_not_there_exits_1_in_one_line(
    tmp_path: Path, args: list[str], message: str
) -> None:
    file = tmp_path / "keys.txt"
    add_key(file, "alice")
    before = file.read_text()
    result = CliRunner().invoke(cli, ["keys", "revoke", *args, "--file", str(file)])
    assert result.exit_code == 1, result.output
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert file.read_text() == before


def test_an_ambiguous_digest_prefix_revokes_nothing(tmp_path: Path) -> None:
    file = tmp_path / "keys.txt"
    file.write_text(f"alice sha256:{'ab' * 32}\nalice sha256:{'ac' * 32}\n")
    with pytest.raises(LookupError, match="2 keys"):
        revoke_keys(file, "alice", "a")
    assert len(list_keys(file)) == 2


def test_a_running_server_honours_a_revocation_without_a_restart(
    keyed: tuple[Served, str, Path],
) -> None:
    server, key, file = keyed
    headers = {"Authorization": f"Bearer {key}"}
    with httpx2.Client(base_url=server.url, timeout=10) as api:
        assert api.get("/v1/models", headers=headers).status_code == 200
        result = CliRunner().invoke(cli, ["keys", "revoke", "alice", "--file", str(file)])
        assert result.exit_code == 0, result.output
        deadline = time.monotonic() + 5
        status = 200
        while status == 200 and time.monotonic() < deadline:
            time.sleep(0.1)
            status = api.get("/v1/models", headers=headers).status_code
        assert status == 401
        # A key added meanwhile works as soon as it is reloaded too.
        carol = add_key(file, "carol")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if api.get("/v1/models", headers={"Authorization": f"Bearer {carol}"}).is_success:
                break
            time.sleep(0.1)
        else:
            pytest.fail("a key added to the file was not picked up")


async def test_a_broken_key_file_keeps_the_keys_in_use(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    file = tmp_path / "keys.txt"
    key = add_key(file, "alice")
    keys = ApiKeys.load([file], environ={})
    file.write_text("alice not-a-digest\n")
    with caplog.at_level(logging.ERROR, logger="harness.serve"):
        assert await keys.reload() is False
    assert keys.user_for(key) == "alice"
    assert "kept the API keys in use" in caplog.text
    assert "expected 'USER sha256:" in caplog.text
    file.unlink()
    assert await keys.reload() is False
    assert keys.user_for(key) == "alice"
    file.write_text("")  # every key revoked: honoured, every request is refused
    assert await keys.reload() is True
    assert keys.user_for(key) is None


def test_add_after_a_revoke_lands_in_the_new_file(tmp_path: Path) -> None:
    file = tmp_path / "keys.txt"
    add_key(file, "alice")
    revoke_keys(file, "alice")
    bob = add_key(file, "bob")
    assert ApiKeys.load([file], environ={}).user_for(bob) == "bob"
    assert os.stat(file).st_size > 0
