from __future__ import annotations

from harness.kernel import Msg
from harness.sections import SystemSection, inject_section


def test_without_a_leading_system_message_one_is_put_first_and_nothing_searched() -> None:
    """The section went into the first system message anywhere in the history, so every step
    scanned the whole conversation when the agent had no system prompt."""
    later = Msg(role="system", content="a caller's note")
    messages = [Msg(role="user", content="hi"), later, Msg(role="user", content="go")]
    for injected in (inject_section(messages, "S"), SystemSection().apply(messages, "S")):
        assert [m.role for m in injected] == ["system", "user", "system", "user"]
        assert (injected[0].name, injected[0].text) == ("workspace_context", "S")
        assert injected[2] is later
    assert [m.role for m in messages] == ["user", "system", "user"]  # the input is left as it was


def test_a_leading_system_message_gets_the_section_and_is_reused() -> None:
    system = Msg(role="system", content="You help.")
    section = SystemSection()
    first = section.apply([system, Msg(role="user", content="a")], "S")
    second = section.apply([system, Msg(role="user", content="b")], "S")
    assert [b.text for b in first[0].content] == ["You help.", "S"]  # type: ignore[union-attr]
    assert second[0] is first[0]
