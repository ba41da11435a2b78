"""The official OpenAI JS SDK (the ``openai`` npm package) in a real browser, against the server.

A web app on another origin is one of the clients ``harness serve`` is meant for (its
``cors_origins``), and the one most web apps use is OpenAI's SDK. Its requests are not the ones
a Python test writes by hand: it adds its own headers (``x-stainless-*``, so every request
needs a CORS preflight), reads the stream with the browser's fetch, parses the SSE itself and
reads our headers only if CORS exposes them. So the SDK, as pinned by ``tests/serve/js``
(``scripts/check`` installs it with ``npm ci``), is loaded as plain ES modules by a page in
headless chromium, served from another loopback port (its own origin), and runs streamed turns
on a real keyed server that lists that origin: each reply arrives whole, in several chunks, and
the page logs no error. The same page on an unlisted origin is refused.

Without chromium or the installed SDK the tests skip outside CI and fail in CI.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import http.server
import json
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import httpx2
import pytest
import test_page
from _served import Served, scripted_agent, served
from selenium import webdriver
from selenium.webdriver.common.by import By
from test_page import keyed, until

from _required import unavailable
from harness.serve import new_key

browser = test_page.browser  # the page tests' headless chromium: a fixture of this module too

PACKAGE = Path(__file__).with_name("js")
SDK = PACKAGE / "node_modules" / "openai"

QUESTION = "Which files are in the workspace?"
REPLY = "The workspace holds notes.txt and little else."
FOLLOW_UP = "And what is in notes.txt?"
SECOND_REPLY = "It says to remember the milk."
TURNS: list[dict[str, Any]] = [
    {"match": "(?i)which files", "text": REPLY},
    {"match": "(?i)what is in", "text": SECOND_REPLY},
]

# The page: the SDK as the browser's own ES modules (no bundler), a call named by ``run``, and
# its outcome written into #result, the error's name and message included, so that a failure
# is shown by the page rather than by a timeout. The import is dynamic for the same reason: a
# module that fails to load is caught and shown too.
_PAGE = """<!doctype html>
<meta charset="utf-8"><title>the openai SDK</title><link rel="icon" href="data:,">
<pre id="result"></pre>
<script type="module">
const ask = __ASK__;

async function chatTurn(client, messages) {
  const {data: stream, response} = await client.chat.completions
    .create({model: "harness", messages, stream: true})
    .withResponse();
  const deltas = [];
  let finish = null;
  for await (const chunk of stream) {
    for (const choice of chunk.choices) {
      if (choice.delta.content) deltas.push(choice.delta.content);
      if (choice.finish_reason) finish = choice.finish_reason;
    }
  }
  return {deltas, finish, session: response.headers.get("X-Harness-Session")};
}

const runs = {
  // Two turns as a chat UI sends them: the second resends the history the first ended with.
  async chat(client) {
    const first = await chatTurn(client, [{role: "user", content: ask.question}]);
    const second = await chatTurn(client, [
      {role: "user", content: ask.question},
      {role: "assistant", content: first.deltas.join("")},
      {role: "user", content: ask.followUp},
    ]);
    return {first, second};
  },
  async responses(client) {
    const stream = client.responses.stream({model: "harness", input: ask.question});
    const types = [];
    const deltas = [];
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === "response.output_text.delta") deltas.push(event.delta);
    }
    const final = await stream.finalResponse();
    return {types, deltas, text: final.output_text, status: final.status};
  },
};

const result = document.getElementById("result");
try {
  const {default: OpenAI} = await import("/openai/index.mjs");
  const client = new OpenAI({
    apiKey: ask.key,
    baseURL: ask.baseURL,
    dangerouslyAllowBrowser: true,
    maxRetries: 0,  // a refusal shows at once, not after the SDK's backoff
  });
  result.textContent = JSON.stringify({value: await runs[ask.run](client)});
} catch (error) {
  result.textContent = JSON.stringify({error: `${error.name}: ${error.message}`});
}
</script>
"""


class _Files(http.server.SimpleHTTPRequestHandler):
    def guess_type(self, path: str | os.PathLike[str]) -> str:
        # ES modules must come as JavaScript, whatever this Python's mimetypes knows of .mjs.
        if os.fspath(path).endswith(".mjs"):
            return "text/javascript"
        return super().guess_type(path)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def static_site(root: Path) -> Iterator[int]:
    """The files under ``root`` over HTTP on a loopback port of their own; yields the port."""
    site = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Files, directory=str(root))
    )
    thread = threading.Thread(target=site.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(site.server_address[1])
    finally:
        site.shutdown()
        site.server_close()


@pytest.fixture
def sdk() -> str:
    """The installed SDK's version, which must be the one ``tests/serve/js`` pins."""
    manifest = SDK / "package.json"
    if not (SDK / "index.mjs").exists():
        unavailable(f"{SDK} is not installed (npm ci --prefix tests/serve/js)")
    pinned = json.loads((PACKAGE / "package.json").read_text())["dependencies"]["openai"]
    installed = str(json.loads(manifest.read_text())["version"])
    if installed != pinned:
        unavailable(
            f"openai {installed} is installed, {pinned} is pinned (npm ci --prefix tests/serve/js)"
        )
    return installed


@dataclasses.dataclass(frozen=True)
class Site:
    """The page's files (the page itself and the SDK) and the port they are served on."""

    root: Path
    port: int

    def page(self, run: str, server: Served, key: str) -> str:
        """Write the page that runs ``run`` against ``server``; its path on the site."""
        ask = {
            "run": run,
            "key": key,
            "baseURL": f"{server.url}/v1",
            "question": QUESTION,
            "followUp": FOLLOW_UP,
        }
        (self.root / f"{run}.html").write_text(_PAGE.replace("__ASK__", json.dumps(ask)))
        return f"/{run}.html"


@pytest.fixture
def site(sdk: str, tmp_path: Path) -> Iterator[Site]:
    root = tmp_path / "site"
    root.mkdir()
    (root / "openai").symlink_to(SDK.resolve(), target_is_directory=True)
    with static_site(root) as port:
        yield Site(root, port)


def outcome(driver: webdriver.Chrome) -> dict[str, Any]:
    """What the page's call came to: ``{"value": ...}`` or ``{"error": "Name: message"}``."""
    text = until(
        driver,
        lambda d: d.find_element(By.ID, "result").text,
        "the page's call did not end",
    )
    return cast(dict[str, Any], json.loads(text))


def console_errors(driver: webdriver.Chrome) -> list[str]:
    """The messages the page logged as errors (a failed load, a CORS refusal, an exception)."""
    browser_log = cast(Callable[[str], list[dict[str, Any]]], driver.get_log)  # untyped
    return [entry["message"] for entry in browser_log("browser") if entry["level"] == "SEVERE"]


def run_on_listed_origin(
    driver: webdriver.Chrome, site: Site, workspace: Path, run: str
) -> dict[str, Any]:
    """Run ``run`` from the site's page, at an origin the keyed server lists; its value."""
    key = new_key()
    origin = f"http://127.0.0.1:{site.port}"
    config = dataclasses.replace(keyed(key), cors_origins=(origin,))
    with served(scripted_agent(workspace, TURNS), config) as server:
        driver.get(origin + site.page(run, server, key))
        ended = outcome(driver)
    assert "error" not in ended, ended["error"]
    assert console_errors(driver) == []
    return cast(dict[str, Any], ended["value"])


def test_the_sdk_streams_chat_completions_from_another_origin(
    site: Site, browser: webdriver.Chrome, workspace: Path
) -> None:
    value = run_on_listed_origin(browser, site, workspace, "chat")
    first, second = value["first"], value["second"]
    assert "".join(first["deltas"]) == REPLY
    assert len(first["deltas"]) > 1  # streamed as it came, not in one piece at the end
    assert first["finish"] == "stop"
    assert "".join(second["deltas"]) == SECOND_REPLY
    assert len(second["deltas"]) > 1
    # The session header is readable by the page (CORS exposes it), and the resent history
    # continued the first turn's session rather than starting one.
    assert first["session"]
    assert second["session"] == first["session"]


def test_the_sdk_streams_a_response_from_another_origin(
    site: Site, browser: webdriver.Chrome, workspace: Path
) -> None:
    value = run_on_listed_origin(browser, site, workspace, "responses")
    assert "".join(value["deltas"]) == REPLY
    assert len(value["deltas"]) > 1
    assert value["text"] == REPLY
    assert value["status"] == "completed"
    assert value["types"][0] == "response.created"
    assert value["types"][-1] == "response.completed"


def test_the_sdk_on_an_unlisted_origin_is_refused(
    site: Site, browser: webdriver.Chrome, workspace: Path
) -> None:
    key = new_key()
    listed = f"http://127.0.0.1:{site.port}"
    config = dataclasses.replace(keyed(key), cors_origins=(listed,))
    with served(scripted_agent(workspace, TURNS), config) as server:
        # The same page and key, on another origin of the same site: the browser lets the
        # SDK see no answer, and the server ran no turn.
        browser.get(f"http://localhost:{site.port}" + site.page("chat", server, key))
        ended = outcome(browser)
        with httpx2.Client(base_url=server.url, timeout=20) as api:
            sessions = api.get("/v1/sessions", headers={"Authorization": f"Bearer {key}"})
    assert ended.get("error", "").startswith("Error: Connection error"), ended
    assert any("CORS" in message for message in console_errors(browser))
    assert sessions.status_code == 200, sessions.text
    assert sessions.json()["data"] == []
