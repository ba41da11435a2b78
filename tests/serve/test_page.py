"""The web page of ``harness serve`` in a real headless browser (Debian's chromium).

The page is loaded from a real server with a scripted agent and used as a person would: sign
in (a wrong key is refused with the server's message), start a session, send a message whose
answer calls a tool, watch the tool call and the streamed reply appear, reload and find the
same history, see the trace timeline. Text from the server is shown as text: a reply full of
HTML runs nothing.

Without chromium and chromedriver the tests skip outside CI and fail in CI (scripts/check
installs them).
"""

from __future__ import annotations

import contextlib
import http.server
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx2
import pytest
from _served import Served, scripted_agent, served
from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.wait import WebDriverWait

from _required import unavailable
from harness.serve import ApiKeys, ServeConfig, digest, new_key

T = TypeVar("T")

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
WAIT = 20.0  # seconds: generous for a slow 2-core machine; a passing wait returns at once

QUESTION = "Which files are in the workspace?"
REPLY = "The workspace holds notes.txt and little else."
REBOUND = "rebound.test"
"""A name the browser resolves to 127.0.0.1, as a rebinding attacker's DNS makes it do."""
ATTACK = "<img src=x onerror=\"document.title='pwned'\"><script>document.title='pwned'</script>"


def _missing() -> str | None:
    for binary, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not binary.exists():
            return f"{binary} is not installed (apt-get install {package})"
    return None


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[webdriver.Chrome]:
    reason = _missing()
    if reason is not None:
        unavailable(reason)
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-proxy-server",
        f"--host-resolver-rules=MAP {REBOUND} 127.0.0.1",  # DNS rebinding, done
        "--window-size=1280,900",
        f"--user-data-dir={tmp_path / 'chromium'}",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(
        options=options, service=webdriver.ChromeService(executable_path=str(CHROMEDRIVER))
    )
    try:
        yield driver
    finally:
        driver.quit()


def keyed(key: str) -> ServeConfig:
    return ServeConfig(keys=ApiKeys.parse(f"alice {digest(key)}", source="test"))


def until(driver: webdriver.Chrome, condition: Callable[[webdriver.Chrome], T], what: str) -> T:
    """The condition's first true value, polled; a failure says what the page shows then."""
    try:
        return WebDriverWait(driver, WAIT, poll_frequency=0.05).until(condition)
    except TimeoutException:
        pytest.fail(f"{what} within {WAIT:g} s; the page shows: {texts(driver, 'body')}")


def texts(driver: webdriver.Chrome, css: str) -> list[str]:
    return [
        str(node.get_property("textContent")) for node in driver.find_elements(By.CSS_SELECTOR, css)
    ]


def transcript(driver: webdriver.Chrome) -> list[str]:
    """The classes of what the conversation shows, in order."""
    nodes = driver.find_elements(By.CSS_SELECTOR, "#messages > *")
    return [str(node.get_attribute("class")) for node in nodes]


def shown(driver: webdriver.Chrome, element_id: str) -> WebElement:
    """The element once it is displayed."""
    element = driver.find_element(By.ID, element_id)
    until(driver, lambda _: element.is_displayed(), f"#{element_id} was not shown")
    return element


def sign_in(driver: webdriver.Chrome, key: str) -> None:
    field = shown(driver, "key")
    field.clear()
    field.send_keys(key)
    driver.find_element(By.ID, "login").click()


def send(driver: webdriver.Chrome, text: str) -> None:
    box = driver.find_element(By.ID, "input")
    box.send_keys(text)
    driver.find_element(By.ID, "send").click()


def turn_done(driver: webdriver.Chrome, reply: str) -> None:
    """Wait until the reply is shown in full and the page takes a new message."""
    until(
        driver,
        lambda d: (
            reply in texts(d, ".msg.assistant") and d.find_element(By.ID, "send").is_enabled()
        ),
        f"the reply {reply!r} was not shown",
    )


def trace_steps(driver: webdriver.Chrome) -> list[WebElement]:
    """The step bars of the trace panel, once there is at least one."""
    return until(
        driver,
        lambda d: d.find_elements(By.CSS_SELECTOR, "#trace .bar.step"),
        "the trace panel showed no step bar",
    )


_WATCH = """
// Note what the page shows the moment the first tool call appears (before the reply streams).
window.__seen = null;
const messages = document.getElementById("messages");
new MutationObserver((_, observer) => {
  const call = messages.querySelector(".tool-call");
  if (call && window.__seen === null) {
    window.__seen = {
      call: call.textContent,
      sendDisabled: document.getElementById("send").disabled,
      replies: Array.from(messages.querySelectorAll(".msg.assistant"), (n) => n.textContent),
    };
    observer.disconnect();
  }
}).observe(messages, {childList: true, subtree: true});
"""


def test_a_conversation_streams_and_comes_back_after_a_reload(
    browser: webdriver.Chrome, workspace: Path
) -> None:
    home = workspace / "users" / "alice"  # the files of the key's user
    home.mkdir(parents=True)
    (home / "notes.txt").write_text("remember the milk\n")
    key = new_key()
    turns: list[dict[str, Any]] = [
        {
            "match": "(?i)which files",
            "tool_calls": [{"name": "list_files", "input": {"path": "."}}],
        },
        # the tool's result is the request's last message; a short delay keeps the reply apart
        {"match": "notes.txt", "text": REPLY, "delay": 0.3},
    ]
    with served(scripted_agent(workspace, turns), keyed(key)) as server:
        browser.get(server.url + "/")
        assert browser.title == "Harness"

        # A wrong key is refused with the server's message, and the page stays at the sign-in.
        sign_in(browser, "hk_not-a-key-of-this-server")
        error = browser.find_element(By.ID, "login-error")
        until(browser, lambda _: error.text, "no sign-in error was shown")
        assert "not known" in error.text
        assert not browser.find_element(By.ID, "app").is_displayed()

        sign_in(browser, key)
        shown(browser, "app")
        assert not browser.find_element(By.ID, "login-view").is_displayed()
        assert texts(browser, "#sessions .session") == []

        browser.find_element(By.ID, "new-session").click()
        until(browser, lambda d: "#session=web-" in d.current_url, "no session was in the URL")
        session = browser.current_url.split("#session=", 1)[1]
        assert re.fullmatch(r"web-[a-z0-9]+-[a-z0-9]+", session)
        assert browser.find_element(By.ID, "session-title").text == session

        browser.execute_script(_WATCH)
        send(browser, QUESTION)
        seen = until(
            browser, lambda d: d.execute_script("return window.__seen"), "no tool call was shown"
        )
        assert "list_files" in seen["call"]
        assert seen["sendDisabled"] is True  # no second message while the turn runs
        assert REPLY not in seen["replies"]  # the tool call shows before the reply streams
        turn_done(browser, REPLY)
        assert transcript(browser) == ["msg user", "tool-call", "msg assistant"]
        assert texts(browser, ".msg.user") == [QUESTION]
        [call] = browser.find_elements(By.CSS_SELECTOR, ".tool-call")
        assert call.find_element(By.CSS_SELECTOR, ".tool-name").text == "list_files"
        assert '"path": "."' in str(call.find_element(By.CSS_SELECTOR, ".tool-input").text)
        assert "notes.txt" in str(call.find_element(By.CSS_SELECTOR, ".tool-result").text)
        assert trace_steps(browser)
        until(
            browser,
            lambda d: texts(d, "#sessions .session") == [session],
            "the new session was not listed",
        )

        # A reload keeps the key (sessionStorage) and the session (the URL's hash), and shows
        # the history the server kept.
        browser.refresh()
        shown(browser, "app")
        until(browser, lambda d: REPLY in texts(d, ".msg.assistant"), "the history was not shown")
        assert texts(browser, ".msg.user") == [QUESTION]
        [call] = browser.find_elements(By.CSS_SELECTOR, ".tool-call")
        assert call.find_element(By.CSS_SELECTOR, ".tool-name").text == "list_files"
        assert "notes.txt" in str(call.find_element(By.CSS_SELECTOR, ".tool-result").text)
        assert transcript(browser) == ["msg user", "tool-call", "msg assistant"]
        steps = trace_steps(browser)
        assert len(steps) == 2  # the step that called the tool and the one that answered
        labels = texts(browser, "#trace .trace-label")
        assert any("scripted" in label for label in labels)
        assert any(label.startswith("list_files") for label in labels)
        assert browser.find_elements(By.CSS_SELECTOR, "#trace .bar.tool")

        # Signing out forgets the key: a reload asks for it again.
        browser.find_element(By.ID, "logout").click()
        shown(browser, "login-view")
        browser.refresh()
        shown(browser, "login-view")
        assert not browser.find_element(By.ID, "app").is_displayed()


def test_html_from_the_server_is_shown_as_text(browser: webdriver.Chrome, workspace: Path) -> None:
    key = new_key()
    reply = f"Here it is: {ATTACK} done."
    turns: list[dict[str, Any]] = [
        {"match": "show me", "tool_calls": [{"name": "list_files", "input": {"path": ATTACK}}]},
        {"text": reply},
    ]
    with served(scripted_agent(workspace, turns), keyed(key)) as server:
        browser.get(server.url + "/")
        sign_in(browser, key)
        shown(browser, "app")
        browser.find_element(By.ID, "new-session").click()
        until(browser, lambda d: "#session=" in d.current_url, "no session was in the URL")
        send(browser, f"show me {ATTACK}")
        turn_done(browser, reply)
        trace_steps(browser)  # the turn's last request has ended: the page had time to misbehave

        assert texts(browser, ".msg.user") == [f"show me {ATTACK}"]
        assert json.dumps(ATTACK) in browser.find_element(By.CSS_SELECTOR, ".tool-input").text
        assert not browser.find_elements(By.CSS_SELECTOR, "#app img, #app script")
        assert browser.title == "Harness"

        browser.refresh()  # the history, rendered from GET /v1/sessions/{id}
        until(browser, lambda d: reply in texts(d, ".msg.assistant"), "the history was not shown")
        trace_steps(browser)
        assert not browser.find_elements(By.CSS_SELECTOR, "#app img, #app script")
        assert browser.title == "Harness"


_PARSE = """
const events = [];
const parser = new SseParser((name, data) => events.push([name, data]));
for (const chunk of arguments[0]) parser.feed(chunk);
parser.end();
return events;
"""


def test_a_keyless_server_needs_no_key(browser: webdriver.Chrome, workspace: Path) -> None:
    turns: list[dict[str, Any]] = [{"text": "Hello there, friend.", "repeat": True}]
    with served(scripted_agent(workspace, turns)) as server:
        open_page(browser, server)
        sign_in(browser, "")
        shown(browser, "app")
        assert browser.find_element(By.ID, "whoami").text == "keyless local server"
        send(browser, "hi")  # without a session selected, the page starts one
        turn_done(browser, "Hello there, friend.")
        assert "#session=web-" in browser.current_url

        # The page's event-stream parser, on chunks cut anywhere: inside a CRLF, a line, a field.
        chunks = [
            "event: text.delta\r",
            '\ndata: {"text"',
            ': "a"}\r\n\r\n: ping\n\n',
            'data: {"x": 1}\n',
            'data: {"y": 2}\n\nevent: text.delta\ndata:{"text": "b"}\n\n',
            'event: error\ndata: {"cut": "off"}',  # no closing blank line: not an event
        ]
        assert browser.execute_script(_PARSE, chunks) == [
            ["text.delta", '{"text": "a"}'],
            ["message", '{"x": 1}\n{"y": 2}'],
            ["text.delta", '{"text": "b"}'],
        ]


def open_page(driver: webdriver.Chrome, server: Served) -> None:
    driver.get(server.url + "/")
    shown(driver, "login-view")


_CROSS_SITE = """<!doctype html><title>another site</title>
<form id="form" method="POST" enctype="text/plain" action="{target}/v1/sessions/victim/turns">
<input name='{{"input": "sent by a form on another site' value='"}}'></form>
<script>
// What any page the operator visits can send to a server on this machine, with no preflight
// (the form's body is the JSON {{"input": "sent by a form on another site="}}).
window.attack = Promise.allSettled([
  fetch("{target}/v1/sessions/victim/turns", {{
    method: "POST", mode: "no-cors", headers: {{"Content-Type": "text/plain"}},
    body: JSON.stringify({{input: "sent by another site"}}),
  }}),
  fetch("{target}/v1/chat/completions", {{
    method: "POST", mode: "no-cors",
    body: JSON.stringify({{model: "harness", messages: [{{role: "user", content: "sent too"}}],
                           metadata: {{session_id: "victim"}}}}),
  }}),
]).then((results) => results.map((r) => r.status));
</script>"""


@contextlib.contextmanager
def another_site(page: str) -> Iterator[str]:
    """A page on another origin (another port of this machine), like any site's."""
    body = page.encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    site = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=site.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{site.server_address[1]}/"
    finally:
        site.shutdown()
        site.server_close()


def test_another_site_cannot_run_turns_on_a_keyless_server(
    browser: webdriver.Chrome, workspace: Path
) -> None:
    turns: list[dict[str, Any]] = [{"text": "Done.", "repeat": True}]
    with served(scripted_agent(workspace, turns)) as server:
        with another_site(_CROSS_SITE.format(target=server.url)) as page:
            browser.get(page)
            statuses = browser.execute_async_script(
                "window.attack.then(arguments[arguments.length - 1]);"
            )
            assert statuses == ["fulfilled", "fulfilled"]  # sent; the answers are opaque
            browser.find_element(By.ID, "form").submit()
            until(browser, lambda d: "origin_not_allowed" in d.page_source, "no refusal shown")
        # A turn of the operator's own waits for any turn an attack started, then shows all.
        with httpx2.Client(base_url=server.url, timeout=20) as api:
            mine = api.post("/v1/sessions/victim/turns", json={"input": "mine"})
            assert mine.status_code == 200
            history = api.get("/v1/sessions/victim").json()["messages"]
    assert [m["text"] for m in history if m["role"] == "user"] == ["mine"]


_READ_ALL = """
const done = arguments[arguments.length - 1];
Promise.all([
  fetch("/v1/sessions").then((r) => r.status),
  fetch("/v1/sessions/s1/turns", {
    method: "POST", headers: {"Content-Type": "application/json"},
    body: JSON.stringify({input: "sent by a rebound page"}),
  }).then((r) => r.status),
]).then(done, (e) => done(String(e)));
"""


def test_a_rebound_name_reads_nothing_from_a_keyless_server(
    browser: webdriver.Chrome, workspace: Path
) -> None:
    turns: list[dict[str, Any]] = [{"text": "Done.", "repeat": True}]
    with served(scripted_agent(workspace, turns)) as server:
        port = server.url.rsplit(":", 1)[1]
        # The page of rebound.test, now at 127.0.0.1: same-origin with the server, for the
        # browser; only the Host header still names rebound.test.
        browser.get(f"http://{REBOUND}:{port}/")
        assert "host_not_allowed" in browser.page_source
        assert browser.execute_async_script(_READ_ALL) == [421, 421]
        with httpx2.Client(base_url=server.url, timeout=20) as api:
            assert api.get("/v1/sessions").json()["data"] == []


def deploying(witness: Path) -> Any:
    """A ``deploy`` tool that notes each run in ``witness``, a file outside the agent."""

    async def deploy(target: str) -> str:
        """Deploy.

        Args:
            target: Where.
        """
        with witness.open("a") as file:
            file.write(target + "\n")
        return f"deployed {target}"

    return deploy


def test_an_approval_card_decides_a_waiting_call_and_comes_back_after_a_reload(
    browser: webdriver.Chrome, workspace: Path, tmp_path: Path
) -> None:
    """A gated call shows a card with its arguments; after a reload the card is back; an edit
    of the arguments in the card runs the tool with them, once, and the turn completes."""
    witness = tmp_path / "deployed.txt"
    deploy = deploying(witness)

    key = new_key()
    turns: list[dict[str, Any]] = [
        {"match": "ship", "tool_calls": [{"name": "deploy", "input": {"target": "prod"}}]},
        {"match": "deployed", "text": "Shipped to staging."},
    ]
    opener = scripted_agent(workspace, turns, tools=[deploy], approvals={"deploy": True})
    with served(opener, keyed(key)) as server:
        browser.get(server.url + "/")
        sign_in(browser, key)
        shown(browser, "app")
        send(browser, "ship it")
        card = until(
            browser,
            lambda d: d.find_elements(By.CSS_SELECTOR, "[data-testid=approval]"),
            "no approval card was shown",
        )[0]
        assert "approval needed: deploy" in str(card.get_property("textContent"))
        assert json.loads(
            str(card.find_element(By.CSS_SELECTOR, "textarea").get_property("value"))
        ) == {"target": "prod"}
        assert not witness.exists()

        browser.refresh()  # the card is restored from the server
        card = until(
            browser,
            lambda d: d.find_elements(By.CSS_SELECTOR, "[data-testid=approval]"),
            "the approval card did not come back after a reload",
        )[0]
        arguments = card.find_element(By.CSS_SELECTOR, "textarea")
        arguments.clear()
        arguments.send_keys('{"target": "staging"}')
        card.find_element(By.CSS_SELECTOR, "[data-testid=approve]").click()
        turn_done(browser, "Shipped to staging.")

    assert witness.read_text() == "staging\n"


def test_a_background_tasks_approval_card_continues_the_task(
    browser: webdriver.Chrome, workspace: Path, tmp_path: Path
) -> None:
    """A background task's waiting call has a card (after a reload) that names the task; its
    Approve continues the task, which runs the tool once, and the page says so."""
    witness = tmp_path / "deployed.txt"
    deploy = deploying(witness)

    key = new_key()
    spawn = {"agent_id": "general-purpose", "task": "ship it", "timeout_seconds": 0}
    turns: list[dict[str, Any]] = [
        {"match": "^delegate", "tool_calls": [{"name": "agent_spawn", "input": spawn}]},
        {"match": "^ship", "tool_calls": [{"name": "deploy", "input": {"target": "prod"}}]},
        {"match": "status: accepted", "text": "Started in the background."},
        {"text": "Shipped.", "repeat": True},
    ]
    opener = scripted_agent(workspace, turns, tools=[deploy], approvals={"deploy": True})
    with served(opener, keyed(key)) as server:
        browser.get(server.url + "/")
        sign_in(browser, key)
        shown(browser, "app")
        send(browser, "delegate it")
        turn_done(browser, "Started in the background.")
        with httpx2.Client(
            base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=20
        ) as api:
            for _ in range(200):  # the task's child reaches its gated call in the background
                if [t for t in api.get("/v1/tasks").json()["data"] if t["status"] == "waiting"]:
                    break
                time.sleep(0.05)
        browser.refresh()
        card = until(
            browser,
            lambda d: d.find_elements(By.CSS_SELECTOR, "[data-testid=approval]"),
            "no approval card for the background task",
        )[0]
        assert "[background task task_" in str(card.get_property("textContent"))
        card.find_element(By.CSS_SELECTOR, "[data-testid=approve]").click()
        until(
            browser,
            lambda d: d.find_elements(By.CSS_SELECTOR, "[data-testid=task-continued]"),
            "the page did not say the task continues",
        )
        for _ in range(200):
            if witness.exists():
                break
            time.sleep(0.05)
    assert witness.read_text() == "prod\n"
