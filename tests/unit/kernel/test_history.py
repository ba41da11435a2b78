from __future__ import annotations

from collections.abc import Callable

import pytest

from harness.kernel import History, Msg


def conversation() -> History:
    return History(Msg(role="user", content=f"m{i}") for i in range(4))


def test_growing_is_not_a_rewrite() -> None:
    history = conversation()
    history.append(Msg(role="assistant", content="a"))
    history.extend([Msg(role="user", content="b")])
    history += [Msg(role="assistant", content="c")]
    assert (len(history), history.rewrites) == (7, 0)
    assert isinstance(history, History)


@pytest.mark.parametrize(
    "change",
    [
        lambda h: h.__setitem__(1, Msg(role="user", content="x")),
        lambda h: h.__setitem__(slice(None), [*h]),  # memory[:] = ..., even the same messages
        lambda h: h.__delitem__(0),
        lambda h: h.insert(0, Msg(role="user", content="x")),
        lambda h: h.pop(),
        lambda h: h.remove(h[0]),
        lambda h: h.clear(),
        lambda h: h.reverse(),
        lambda h: h.sort(key=lambda m: m.text),
        lambda h: h.__imul__(2),
    ],
)
def test_every_other_change_counts(change: Callable[[History], object]) -> None:
    history = conversation()
    change(history)
    assert history.rewrites == 1
