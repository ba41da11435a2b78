"""The page's GFM tables and highlighted code, in a real headless browser (Debian's chromium).

A scripted reply holds tables (aligned columns, an escaped pipe, inline markdown in cells, rows
short and long of cells, a table in a list item, a wide one) and Python code: the page renders
the tables with the table tags only, scrolls the wide one sideways inside the reply at 1280x800
and at 390x844, and colors the code with the runs ``POST /v1/highlight`` answers (spans with a
class and text; the code's text and its Copy unchanged), when the reply has streamed and when
the history is loaded. A failed highlight leaves the plain code and logs no console error.
Generated text with pipes renders only the allowed nodes.

Every test writes screenshots into ``$HARNESS_SCREENSHOTS`` (or a directory under its
``tmp_path``) and prints their paths, as ``test_page.py``'s do.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import test_page as page
from _served import scripted_agent, served
from hypothesis import strategies as st
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement

from harness.serve import new_key

browser = page.browser  # the fixtures of test_page.py: chromium, and where screenshots go
screens = page.screens
Screens = page.Screens
DESKTOP, PHONE = page.DESKTOP, page.PHONE
until, shown, text_of = page.until, page.shown, page.text_of

CODE = 'def area(r):\n    """A circle\'s."""\n    return 3.14 * r ** 2  # <b>not bold</b>'
WIDE = [f"column_{n}_with_a_long_name" for n in range(1, 13)]
TABLES = f"""Here are the results:
| Name | Count | Share | Note |
|:-----|------:|:-----:|------|
| `alpha` | 12 | 40% | **bold** and a pipe \\| here |
| beta | 3 |
| gamma | 15 | 50% | kept | dropped |
a row without pipes

```python
{CODE}
```

- a list item holding a table:

  | k | v |
  | --- | --- |
  | x | *1* |

| {" | ".join(WIDE)} |
|{"---|" * len(WIDE)}
| {" | ".join(f"value {n}" for n in range(1, 13))} |
"""


def console_errors(driver: webdriver.Chrome) -> list[str]:
    """The browser console's errors since the last look (reading the log empties it)."""
    read = cast(Callable[[str], list[dict[str, Any]]], driver.get_log)  # untyped
    return [entry["message"] for entry in read("browser") if entry["level"] == "SEVERE"]


def cells(row: WebElement) -> list[str]:
    return [text_of(cell) for cell in row.find_elements(By.CSS_SELECTOR, "th, td")]


def highlighted(driver: webdriver.Chrome) -> list[WebElement]:
    """The keyword spans of the reply's Python block, once the page has colored it."""
    return until(
        driver,
        lambda d: d.find_elements(By.CSS_SELECTOR, ".msg.assistant .code-block code .hl-k"),
        "the code block was not highlighted",
    )


def check_reply(driver: webdriver.Chrome) -> None:
    """The tables and the highlighted code of the reply, as the page shows them now."""
    reply = driver.find_element(By.CSS_SELECTOR, ".msg.assistant .md")
    first, nested, wide = reply.find_elements(By.CSS_SELECTOR, ".table-wrap > table")

    assert cells(first.find_element(By.CSS_SELECTOR, "thead tr")) == [
        "Name",
        "Count",
        "Share",
        "Note",
    ]
    heads = first.find_elements(By.CSS_SELECTOR, "th")
    assert [h.get_attribute("class") or "" for h in heads] == [
        "align-left",
        "align-right",
        "align-center",
        "",
    ]
    rows = first.find_elements(By.CSS_SELECTOR, "tbody tr")
    assert [cells(row) for row in rows] == [
        ["alpha", "12", "40%", "bold and a pipe | here"],
        ["beta", "3", "", ""],  # a short row is filled
        ["gamma", "15", "50%", "kept"],  # a long row's extra cell is dropped
        ["a row without pipes", "", "", ""],  # as GFM: the table runs to a blank line
    ]
    alpha = rows[0].find_elements(By.CSS_SELECTOR, "td")
    assert alpha[0].find_element(By.CSS_SELECTOR, "code").text == "alpha"
    assert alpha[3].find_element(By.CSS_SELECTOR, "strong").text == "bold"
    aligned = [cell.value_of_css_property("text-align") for cell in alpha]
    assert aligned == ["left", "right", "center", "left"]
    assert reply.find_element(By.CSS_SELECTOR, "p").text == "Here are the results:"

    assert nested.find_element(By.XPATH, "ancestor::li")  # the table in the list item
    assert cells(nested.find_element(By.CSS_SELECTOR, "tbody tr")) == ["x", "1"]
    assert nested.find_element(By.CSS_SELECTOR, "td em").text == "1"

    assert cells(wide.find_element(By.CSS_SELECTOR, "thead tr")) == WIDE
    box = driver.execute_script(
        "const wrap = arguments[0].parentElement;"
        "const bubble = wrap.closest('.msg').getBoundingClientRect();"
        "return {scroll: wrap.scrollWidth, client: wrap.clientWidth,"
        " overflow: getComputedStyle(wrap).overflowX, right: bubble.right,"
        " page: document.documentElement.scrollWidth, width: window.innerWidth};",
        wide,
    )
    assert box["scroll"] > box["client"], box  # wider than the reply: it scrolls
    assert box["overflow"] == "auto"
    assert box["right"] <= box["width"], box  # the reply stays within the window
    assert box["page"] <= box["width"], box  # and the page does not scroll sideways

    keywords = [text_of(span) for span in highlighted(driver)]
    assert keywords[:2] == ["def", "return"]
    [block] = reply.find_elements(By.CSS_SELECTOR, ".code-block")
    code = block.find_element(By.CSS_SELECTOR, "pre code")
    assert text_of(code) == CODE  # colored, not changed
    spans = code.find_elements(By.CSS_SELECTOR, "span")
    classes = {str(span.get_attribute("class")) for span in spans}
    assert {"hl-k", "hl-nf", "hl-sd", "hl-mf", "hl-c1"} <= classes
    assert all(c.startswith("hl-") for c in classes)
    assert all(span.get_attribute("class") for span in spans)  # plain text is no span
    comment = code.find_element(By.CSS_SELECTOR, ".hl-c1")
    assert text_of(comment) == "# <b>not bold</b>"  # set as text: no <b> element
    assert not driver.find_elements(By.CSS_SELECTOR, "#messages b, #messages script")
    plain = driver.execute_script("return getComputedStyle(arguments[0]).color", code)
    assert code.find_element(By.CSS_SELECTOR, ".hl-k").value_of_css_property("color") != plain


def test_tables_render_and_code_is_highlighted_at_desktop_and_phone_sizes(
    browser: webdriver.Chrome, workspace: Path, screens: Screens
) -> None:
    key = new_key()
    turns: list[dict[str, Any]] = [{"match": "tables", "text": TABLES}]
    with served(scripted_agent(workspace, turns), page.keyed(key)) as server:
        browser.execute_cdp_cmd(
            "Browser.grantPermissions",
            {
                "origin": server.url,
                "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"],
            },
        )
        page.set_viewport(browser, DESKTOP)
        page.open_page(browser, server)
        page.sign_in(browser, key)
        shown(browser, "app")
        page.send(browser, "show me tables and code")
        until(
            browser,
            lambda d: len(page.replies(d)) == 1 and d.find_element(By.ID, "send").is_enabled(),
            "the reply was not shown",
        )
        check_reply(browser)  # highlighted at the turn's end
        screens.take(browser, "streamed")

        url = browser.current_url
        for viewport in (DESKTOP, PHONE):  # and loaded from the history, at both sizes
            page.set_viewport(browser, viewport)
            browser.get(url)
            browser.refresh()
            shown(browser, "app")
            until(browser, lambda d: len(page.replies(d)) == 1, "the history was not shown")
            check_reply(browser)
            block = browser.find_element(By.CSS_SELECTOR, ".code-block")
            browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", block)
            screens.take(browser, "code")
            wide = browser.find_elements(By.CSS_SELECTOR, ".table-wrap")[-1]
            browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", wide)
            screens.take(browser, "wide-table")
            browser.execute_script("arguments[0].scrollLeft = 400", wide)
            screens.take(browser, "wide-table-scrolled")

            copy = block.find_element(By.CSS_SELECTOR, "[data-testid=copy-code]")
            copy.click()
            assert page.copied(browser, copy) == "clipboard"
            assert page.clipboard(browser) == CODE  # the plain code, not the spans

        # the dark theme has colors of its own
        keyword = browser.find_element(By.CSS_SELECTOR, ".code-block .hl-k")
        light = keyword.value_of_css_property("color")
        browser.execute_cdp_cmd(
            "Emulation.setEmulatedMedia",
            {"features": [{"name": "prefers-color-scheme", "value": "dark"}]},
        )
        until(
            browser,
            lambda _: keyword.value_of_css_property("color") != light,
            "the dark theme kept the light theme's colors",
        )
        screens.take(browser, "dark")
        assert console_errors(browser) == []


_FAIL_HIGHLIGHT = """
// The highlight route unreachable, as on a network that fails: every other request goes on.
const fetched = window.fetch;
window.fetch = (input, options) => String(input).includes("/v1/highlight")
  ? Promise.reject(new TypeError("Failed to fetch")) : fetched(input, options);
"""


def test_a_failed_highlight_leaves_the_plain_code_and_no_console_error(
    browser: webdriver.Chrome, workspace: Path, screens: Screens
) -> None:
    turns: list[dict[str, Any]] = [{"match": "code", "text": f"```python\n{CODE}\n```"}]
    with served(scripted_agent(workspace, turns)) as server:
        page.open_page(browser, server)
        page.sign_in(browser, "")
        shown(browser, "app")
        browser.execute_script(_FAIL_HIGHLIGHT)
        page.send(browser, "some code please")
        until(
            browser,
            lambda d: len(page.replies(d)) == 1 and d.find_element(By.ID, "send").is_enabled(),
            "the reply was not shown",
        )
        asked = browser.execute_script(
            "return performance.getEntriesByType('resource')"
            ".filter((e) => e.name.includes('/v1/highlight')).length"
        )
        assert asked == 0  # refused before it left the page
        code = browser.find_element(By.CSS_SELECTOR, ".code-block pre code")
        assert text_of(code) == CODE
        assert code.find_elements(By.CSS_SELECTOR, "*") == []  # plain text, no spans
        screens.take(browser, "plain")
        assert console_errors(browser) == []


_TABLE_TOKENS = [
    "|", "| ", " |", "\\|", "||", "---", "-", ":--", "--:", ":-:", ":", "|---|", "| a |",
    "| --- | --- |", "\n", "\n\n", "  ", "- ", "> ", "`", "**", "_", "[x](", "https://x.y",
    "javascript:alert(1)", "<script>alert(1)</script>", "<img src=x onerror=alert(1)>",
    "```", "word", "é",
]  # fmt: skip
_TABLEISH = st.lists(
    st.one_of(st.sampled_from(_TABLE_TOKENS), st.text(max_size=3)), max_size=50
).map("".join)


def test_tables_of_any_text_make_only_safe_nodes(
    browser: webdriver.Chrome, workspace: Path
) -> None:
    """Generated text of pipes, delimiter rows and markdown, through the check of
    ``test_page.py`` (its allowed tags and attributes): tables add only table, thead, tbody,
    tr, th and td with a class, and nothing runs or takes long."""
    with served(scripted_agent(workspace, [])) as server:
        page.open_page(browser, server)
        hard = [
            "|" * 5000 + "\n" + "|-" * 2500,
            "| a |\n|" + "-" * 5000 + "x",
            ("| " + "x | " * 300 + "\n|" + "---|" * 300 + "\n") + ("| y " * 300 + "\n") * 50,
            "|a|\n|-|\n" + "\\|" * 5000,
        ]
        page.renders_safely(browser, _TABLEISH, hard)


_PARSE = """
return arguments[0].map((text) => {
  const root = renderMarkdown(text);
  return Array.from(root.children, (node) => node.matches(".table-wrap")
    ? Array.from(node.querySelectorAll("tr"),
        (row) => Array.from(row.children, (cell) => cell.tagName + ":" + cell.textContent))
    : node.tagName);
});
"""


def test_what_is_and_is_not_a_table(browser: webdriver.Chrome, workspace: Path) -> None:
    """GFM's rules, on the page's own renderer: outer pipes optional, the delimiter row must
    have as many cells as the header, a blank line ends the table, a pipe in code is escaped."""
    cases = {
        "a | b\n--|--\n1 | 2": [[["TH:a", "TH:b"], ["TD:1", "TD:2"]]],
        "| a |\n| - |": [[["TH:a"]]],  # a header alone: no body
        "| a | b |\n| --- |\n| 1 | 2 |": ["P"],  # the delimiter row is one cell short
        "| a | b |\n| --- | x |": ["P"],  # not a delimiter row
        "a\nb | c\n-|-\n\nd": ["P", [["TH:b", "TH:c"]], "P"],
        "| `x \\| y` | z |\n|---|---|": [[["TH:x | y", "TH:z"]]],
        "| a |\n|---|\n> quoted": [[["TH:a"]], "BLOCKQUOTE"],
        "---\n| a |": ["HR", "P"],
    }
    with served(scripted_agent(workspace, [])) as server:
        page.open_page(browser, server)
        parsed = browser.execute_script(_PARSE, list(cases))
    assert dict(zip(cases, parsed, strict=True)) == cases
