from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.workspace import safe_segment, session_dir, user_prefix


def test_safe_ids_are_used_as_they_are() -> None:
    assert safe_segment("s1") == "s1"
    assert safe_segment("user_2.prod-eu") == "user_2.prod-eu"


@pytest.mark.parametrize(
    ("name", "expected"),
    [("..", "%2E%2E"), (".", "%2E"), ("a/b", "a%2Fb"), ("ü", "%C3%BC"), ("a b", "a%20b")],
)
def test_other_ids_are_percent_encoded(name: str, expected: str) -> None:
    assert safe_segment(name) == expected


def test_empty_id_is_refused() -> None:
    with pytest.raises(ValueError, match="must not be empty"):
        safe_segment("")


@given(st.text(min_size=1, max_size=60), st.text(min_size=1, max_size=60))
def test_segments_are_injective_and_stay_one_segment(a: str, b: str) -> None:
    sa, sb = safe_segment(a), safe_segment(b)
    assert "/" not in sa
    assert sa not in (".", "..")
    assert (sa == sb) == (a == b)


def test_long_ids_are_shortened_but_distinct() -> None:
    a, b = "x" * 300 + "a", "x" * 300 + "b"
    assert len(safe_segment(a)) == 120
    assert safe_segment(a) != safe_segment(b)


def test_an_id_shaped_like_a_shortened_one_keeps_its_own_segment() -> None:
    """A crafted id that spells a long id's shortened segment must not share its directory."""
    long_id = "x" * 300
    crafted = safe_segment(long_id)  # a short, safe-looking id of exactly that shape
    assert crafted != long_id
    assert safe_segment(crafted) != safe_segment(long_id)


_IDS = st.one_of(
    st.text(min_size=1, max_size=200),
    st.text(alphabet="x=-%0123456789abcdef", min_size=1, max_size=200),
    st.text(min_size=100, max_size=130).map(lambda t: "x" * 110 + t),
)


@given(_IDS, _IDS)
def test_segments_are_injective_shortened_or_not(a: str, b: str) -> None:
    """Shortened (long) and plain ids alike: two ids share a segment only when they are equal."""
    for id_ in (a, b, safe_segment(a), safe_segment(b)):
        assert (safe_segment(id_) == safe_segment(a)) == (id_ == a)
    assert len(safe_segment(a)) <= 120


def test_an_id_that_is_not_text_is_refused() -> None:
    with pytest.raises(ValueError, match="not valid text"):
        safe_segment("bad\udc80")


def test_session_dir_per_user() -> None:
    assert session_dir("bot", "s1") == "agents/bot/context/s1"
    assert session_dir("bot", "s1", "alice") == "users/alice/agents/bot/context/s1"
    assert user_prefix(None) == ""
    assert user_prefix("../x") == "users/%2E%2E%2Fx/"
