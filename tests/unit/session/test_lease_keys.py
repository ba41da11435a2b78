"""One lease per session directory: calls share a lease exactly when they share a directory.

The lease used to be keyed by the ids as spelled (``<agent>/<user or ->/<session>``) while the
directory came from the naming rule, so user ``-`` and a call without a user, or user ``a/b``
with session ``c`` and user ``a`` with session ``b/c``, shared a lease but not a directory, and
an id crafted in the shape of a shortened long id shared a directory but not a lease: two calls
then appended to one file at once.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import HarnessAgent, RuntimeContext
from harness.models import ScriptedChatModel
from harness.workspace import safe_segment, session_dir


class RecordingLeases:
    """Leases that grant everything and remember the key of each hold."""

    def __init__(self) -> None:
        self.keys: list[str] = []

    @contextlib.asynccontextmanager
    async def hold(self, key: str, *, wait: float) -> AsyncIterator[None]:
        self.keys.append(key)
        yield


_IDS = st.one_of(
    st.sampled_from(["-", "a", "a/b", "b/c", "c", ".", "%2E", "x" * 300, safe_segment("x" * 300)]),
    st.text(min_size=1, max_size=20).filter(str.strip),
)


async def _lease_key(tmp_path: Path, ctx: RuntimeContext) -> str:
    leases = RecordingLeases()
    model = ScriptedChatModel([{"text": "ok", "repeat": True}])
    async with HarnessAgent(
        model=model, workspace=tmp_path / "ws", session_leases=leases, memory=None, trace=False
    ) as agent:
        await agent.call("hi", ctx=ctx)
    return leases.keys[0]


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.none(), _IDS), _IDS, st.one_of(st.none(), _IDS), _IDS)
async def test_two_calls_share_a_lease_exactly_when_they_share_a_directory(
    tmp_path: Path, user_a: str | None, session_a: str, user_b: str | None, session_b: str
) -> None:
    a = RuntimeContext(user_id=user_a, session_id=session_a)
    b = RuntimeContext(user_id=user_b, session_id=session_b)
    same_directory = session_dir("harness", session_a, user_a) == session_dir(
        "harness", session_b, user_b
    )
    assert ((await _lease_key(tmp_path, a)) == (await _lease_key(tmp_path, b))) == same_directory


async def test_a_user_named_dash_and_no_user_hold_different_leases(tmp_path: Path) -> None:
    dash = await _lease_key(tmp_path, RuntimeContext(user_id="-", session_id="s"))
    nobody = await _lease_key(tmp_path, RuntimeContext(session_id="s"))
    assert dash != nobody
