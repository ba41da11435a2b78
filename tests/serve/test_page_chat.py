"""The page's chat habits, in a real headless browser (Debian's chromium): regenerate the last
answer, edit the last message, search the chat list, an approval card brought into view with
Approve, Edit, Reject and Respond, Send held while a call waits, and a console without errors.

People compare the page with ChatGPT and Open WebUI: these are what they reach for first. Each
test checks what the server kept too (a regenerated or edited turn replaces the last one in the
session, a reload shows the same), and takes screenshots at 1280x800 and 390x844 into
``$HARNESS_SCREENSHOTS`` (or a directory under its ``tmp_path``), printing their paths.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import test_page as page
from _served import Served, scripted_agent, served
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from harness.serve import new_key

browser = page.browser  # the fixtures of test_page.py: chromium, and where screenshots go
screens = page.screens
Screens = page.Screens
until, shown, send, replies, texts = page.until, page.shown, page.send, page.replies, page.texts


def console_errors(driver: webdriver.Chrome) -> list[str]:
    """What the page logged as errors since the last call (a failed request, an exception)."""
    browser_log = cast(Callable[[str], list[dict[str, Any]]], driver.get_log)  # untyped
    return [entry["message"] for entry in browser_log("browser") if entry["level"] == "SEVERE"]


def idle(driver: webdriver.Chrome) -> None:
    """Wait until no turn runs and the last turn's actions are offered."""
    until(
        driver,
        lambda d: (
            d.find_elements(By.CSS_SELECTOR, "#messages [data-testid=edit-last]")
            and not d.find_element(By.ID, "stop").is_displayed()
        ),
        "the page did not come back to rest with the last turn's actions",
    )


def click(driver: webdriver.Chrome, testid: str) -> None:
    driver.find_element(By.CSS_SELECTOR, f"#messages [data-testid={testid}]").click()


def saved(server: Served, key: str, session: str) -> list[tuple[str, str]]:
    with page.api_client(server, key) as api:
        messages = api.get(f"/v1/sessions/{session}").json()["messages"]
    return [(m["role"], m["text"]) for m in messages if m["text"]]


def current_session(driver: webdriver.Chrome) -> str:
    return str(driver.execute_script("return decodeURIComponent(location.hash.slice(9))"))


def test_regenerate_and_edit_replace_the_last_turn(
    browser: webdriver.Chrome, workspace: Path, screens: Screens
) -> None:
    key = new_key()
    turns: list[dict[str, Any]] = [
        {"match": "^Name a colour", "text": "Blue."},
        {"match": "^Name a colour", "text": "Green, this time."},
        {"match": "^Name a fruit", "text": "A pear."},
    ]
    with served(scripted_agent(workspace, turns), page.keyed(key)) as server:
        page.signed_in(browser, server, key)
        assert console_errors(browser) == []
        send(browser, "Name a colour")
        page.turn_done(browser, "Blue.")
        idle(browser)
        screens.both(browser, "last-turn-actions")

        click(browser, "regenerate-last")
        page.turn_done(browser, "Green, this time.")
        idle(browser)
        assert replies(browser) == ["Green, this time."]  # the first answer is gone
        assert texts(browser, ".msg.user") == ["Name a colour"]

        click(browser, "edit-last")
        field = browser.find_element(By.CSS_SELECTOR, "[data-testid=edit-input]")
        field.clear()
        field.send_keys("Name a fruit")
        screens.both(browser, "editing")
        browser.find_element(By.CSS_SELECTOR, "[data-testid=edit-send]").click()
        page.turn_done(browser, "A pear.")
        idle(browser)
        assert texts(browser, ".msg.user") == ["Name a fruit"]
        assert replies(browser) == ["A pear."]

        session = current_session(browser)
        assert saved(server, key, session) == [("user", "Name a fruit"), ("assistant", "A pear.")]
        browser.refresh()
        until(browser, lambda d: replies(d) == ["A pear."], "the reload showed another history")
        assert texts(browser, ".msg.user") == ["Name a fruit"]
        assert console_errors(browser) == []


def test_the_chat_list_is_searched_by_title(
    browser: webdriver.Chrome, workspace: Path, screens: Screens
) -> None:
    key = new_key()
    with served(
        scripted_agent(workspace, [{"text": "Hi.", "repeat": True}]), page.keyed(key)
    ) as server:
        page.make_sessions(server, key, ["garden-plans", "tax-return", "Garden-shed"])
        page.signed_in(browser, server, key)
        page.open_drawer(browser, "toggle-sessions", "side")
        until(browser, lambda d: len(page.session_ids(d)) == 3, "the chats were not listed")
        search = shown(browser, "session-search")
        search.send_keys("GARDEN")
        until(
            browser,
            lambda d: page.session_ids(d) == ["Garden-shed", "garden-plans"],
            "the search did not keep the garden chats alone",
        )
        screens.take(browser, "search")
        page.set_viewport(browser, page.PHONE)  # the chats are a drawer there: opened to look
        page.open_drawer(browser, "toggle-sessions", "side")
        until(browser, lambda d: d.find_element(By.ID, "side").rect["x"] >= 0, "no drawer")
        screens.take(browser, "search")
        search.send_keys(" nothing like it")
        until(
            browser,
            lambda d: texts(d, "#sessions-empty") == ["No chats match."],
            "a search with no match did not say so",
        )
        search.send_keys(Keys.CONTROL, "a")
        search.send_keys(Keys.BACKSPACE)
        until(browser, lambda d: len(page.session_ids(d)) == 3, "clearing did not list all")


def test_a_waiting_call_is_shown_and_holds_send_until_it_is_answered(
    browser: webdriver.Chrome, workspace: Path, tmp_path: Path, screens: Screens
) -> None:
    """The card is in view though a long answer came before it; Send is held with the page's
    words (no 409); Respond gives the model a text instead of running the tool."""
    witness = tmp_path / "deployed.txt"
    long_answer = "\n\n".join(f"Paragraph {n} of a long answer." for n in range(60))
    key = new_key()
    turns: list[dict[str, Any]] = [
        {"match": "^Tell me everything", "text": long_answer},
        {"match": "^ship", "tool_calls": [{"name": "deploy", "input": {"target": "prod"}}]},
        {"match": "Not today", "text": "Understood, nothing shipped."},
    ]
    opener = scripted_agent(
        workspace, turns, tools=[page.deploying(witness)], approvals={"deploy": True}
    )
    with served(opener, page.keyed(key)) as server:
        page.signed_in(browser, server, key)
        send(browser, "Tell me everything")
        until(
            browser,
            lambda d: (
                "Paragraph 59" in "".join(replies(d)) and d.find_element(By.ID, "send").is_enabled()
            ),
            "the long answer did not end",
        )
        send(browser, "ship it")
        page.approval_card(browser, "no approval card was shown")
        until(browser, lambda d: in_view(d, "[data-testid=approval]"), "the card is out of view")
        hint = shown(browser, "composer-hint")
        assert "waits for your decision" in hint.text
        assert not browser.find_element(By.ID, "send").is_enabled()
        assert not browser.find_elements(By.CSS_SELECTOR, "#messages [data-testid=edit-last]")
        screens.both(browser, "approval-in-view")

        for _ in range(3):  # a reload shows the chat and its card, every time
            browser.refresh()
            until(
                browser,
                lambda d: (
                    d.find_elements(By.CSS_SELECTOR, "[data-testid=approval]")
                    and in_view(d, "[data-testid=approval]")
                ),
                "after a reload the card was not shown in view",
            )
            assert "Pick a chat" not in browser.find_element(By.ID, "messages").text
        assert not browser.find_element(By.ID, "send").is_enabled()
        browser.find_element(By.ID, "input").send_keys("and another thing", Keys.ENTER)
        assert not browser.find_elements(By.CSS_SELECTOR, "[data-testid=error]")  # no 409
        card = browser.find_element(By.CSS_SELECTOR, "[data-testid=approval]")
        names = [b.text for b in card.find_elements(By.CSS_SELECTOR, ".actions button")]
        assert names == ["Approve", "Edit", "Reject", "Respond"]
        card.find_element(By.CSS_SELECTOR, "[data-testid=respond]").click()
        card.find_element(By.CSS_SELECTOR, "[data-testid=approval-response]").send_keys(
            "Not today: the release is frozen."
        )
        screens.both(browser, "respond")
        card.find_element(By.CSS_SELECTOR, "[data-testid=respond]").click()
        page.turn_done(browser, "Understood, nothing shipped.")
        assert browser.find_element(By.ID, "composer-hint").is_displayed() is False
        assert browser.find_element(By.ID, "input").get_property("value") == "and another thing"
        assert console_errors(browser) == []
    assert not witness.exists()


def in_view(driver: webdriver.Chrome, css: str) -> bool:
    """Whether the element is wholly inside the visible part of the conversation."""
    return bool(
        driver.execute_script(
            "const box = document.querySelector(arguments[0]).getBoundingClientRect();"
            "const view = document.getElementById('messages').getBoundingClientRect();"
            "return box.top >= view.top - 1 && box.bottom <= view.bottom + 1;",
            css,
        )
    )


def test_a_new_chat_logs_no_error(browser: webdriver.Chrome, workspace: Path) -> None:
    key = new_key()
    with served(
        scripted_agent(workspace, [{"text": "Hi.", "repeat": True}]), page.keyed(key)
    ) as server:
        page.signed_in(browser, server, key)
        page.open_drawer(browser, "toggle-sessions", "side")
        browser.find_element(By.ID, "new-session").click()
        until(
            browser,
            lambda d: "A new chat" in d.find_element(By.ID, "messages").text,
            "a new chat did not say it is new",
        )
        send(browser, "hello")
        page.turn_done(browser, "Hi.")
        assert console_errors(browser) == []
