"""An appender (``Storage.appender``) keeps ``Storage.append``'s rules on every backend.

The session store appends each step through an appender held for the call; the local disk's
keeps the file open between appends. Whatever else happens to the file meanwhile (a rewrite of
the session, a plain append from another writer, a removal, a rename onto or away from it, the
appender closed and used again), the file holds exactly what a plain append after each of those
operations would have left: no record lost, doubled, or written into a file no longer at the
path.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _backends import FACTORIES, open_backend

PATH = "users/alice/agents/bot/context/s1/messages.jsonl"
OTHER = "users/alice/agents/bot/context/s1/other.jsonl"

_RECORD = st.binary(min_size=1, max_size=40).map(lambda data: data + b"\n")
OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("held"), _RECORD),
        st.tuples(st.just("plain"), _RECORD),
        st.tuples(st.just("put"), _RECORD),
        st.tuples(st.just("put-other"), _RECORD),
        st.tuples(st.sampled_from(["remove", "away", "onto", "close", "sync"]), st.just(b"")),
    ),
    min_size=1,
    max_size=25,
)


@pytest.mark.parametrize("backend", sorted(FACTORIES))
@settings(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(operations=OPERATIONS)
async def test_an_appender_leaves_what_plain_appends_would_have_left(
    backend: str, tmp_path_factory: pytest.TempPathFactory, operations: list[tuple[str, bytes]]
) -> None:
    async with open_backend(backend, tmp_path_factory.mktemp(backend)) as fs:
        model: dict[str, bytes] = {}
        appender = fs.appender(PATH)
        try:
            for operation, data in operations:
                if operation == "held":
                    await appender.append(data)
                    model[PATH] = model.get(PATH, b"") + data
                elif operation == "plain":
                    await fs.append(PATH, data)
                    model[PATH] = model.get(PATH, b"") + data
                elif operation == "put":
                    await fs.put(PATH, data)
                    model[PATH] = data
                elif operation == "put-other":
                    await fs.put(OTHER, data)
                    model[OTHER] = data
                elif operation == "remove" and PATH in model:
                    await fs.remove(PATH)
                    del model[PATH]
                elif operation == "away" and PATH in model:
                    await fs.rename(PATH, OTHER)
                    model[OTHER] = model.pop(PATH)
                elif operation == "onto" and OTHER in model:
                    await fs.rename(OTHER, PATH)
                    model[PATH] = model.pop(OTHER)
                elif operation == "close":
                    await appender.aclose()
                elif operation == "sync":
                    await appender.sync()
                for path in (PATH, OTHER):
                    found = await fs.get(path)
                    assert (found[0] if found else None) == model.get(path), (operation, path)
        finally:
            await appender.aclose()


async def test_a_closed_appender_lets_go_of_the_file(tmp_path: Path) -> None:
    """Closing gives the descriptors back: a call's appender holds nothing once it returned."""
    from harness.filesystem import LocalFilesystem

    fs = LocalFilesystem(tmp_path / "ws")
    appender = fs.appender(PATH)
    opened = _descriptors()
    await appender.append(b"one\n")
    assert _descriptors() > opened  # the file, its lock and its directory are held
    await appender.aclose()  # closes them on a worker thread, without waiting for it
    for _ in range(500):
        if _descriptors() == opened:
            break
        await asyncio.sleep(0.01)
    assert _descriptors() == opened


def _descriptors() -> int:
    return len(list(Path("/proc/self/fd").iterdir()))
