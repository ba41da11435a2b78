"""An append the disk cuts short is a failure, never a record half on the disk and whole in mind.

A write to a file that the disk runs out of room for part way returns how much it wrote, not an
error: a full disk takes the bytes that fit the file's last page and refuses the rest only at
the next write. An append that wrote once and trusted it kept a torn line on the disk while
telling its caller the record was saved (an approval's decision, a user's key). Each is tried
on a real full disk (a 1 MiB tmpfs, as in ``test_save_faults.py``): a record too big for what
room the file's last page has fails with the disk's reason, and what was saved before stays.
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given
from hypothesis import strategies as st

from _disks import fill, small_disk
from harness.errors import ConfigError, StorageError
from harness.filesystem import _beneath
from harness.serve.keys import add_key, list_keys
from harness.workspace.ledger import FileLedger

BIG = "x" * 20_000
"""More than the room a full disk leaves in a file's last page (a page is 4 KiB)."""


async def test_a_ledger_record_cut_short_by_a_full_disk_fails_and_keeps_the_others(
    tmp_path: Path,
) -> None:
    with small_disk(tmp_path / "disk") as disk:
        ledger = FileLedger(disk / "ledger", kind="approvals")
        await ledger.change("s", lambda records: [{"decision": "approve", "id": "1"}])
        before = ledger.path("s").read_bytes()
        filler = fill(disk)
        with pytest.raises(StorageError, match="No space left"):
            await ledger.change("s", lambda records: [{"decision": "deny", "note": BIG}])
        assert ledger.path("s").read_bytes() == before  # nothing of the failed record
        filler.unlink()
        again = FileLedger(disk / "ledger", kind="approvals")  # what the disk holds
        assert [record["decision"] for record in await again.records("s")] == ["approve"]
        assert [record["decision"] for record in await ledger.records("s")] == ["approve"]
        await ledger.change("s", lambda records: [{"decision": "deny", "id": "2"}])
        assert [record["decision"] for record in await again.records("s")] == ["approve", "deny"]


def test_a_key_cut_short_by_a_full_disk_is_not_handed_out(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk") as disk:
        keys = disk / "keys"
        add_key(keys, "alice")
        with keys.open("a", encoding="utf-8") as handle:  # a long file: its last page nearly full
            handle.write(f"# {'-' * 4000}\n")
        before = keys.read_bytes()
        fill(disk)
        with pytest.raises(ConfigError, match=f"cannot add a key to the API key file {keys}: No"):
            add_key(keys, "bob")
        assert keys.read_bytes() == before
        assert [entry.user for entry in list_keys(keys)] == ["alice"]


# -- any cut: every append of a file is whole or nothing -----------------------------------------


def _appended_by_append(directory: Path, data: bytes) -> None:
    held = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        _beneath.append(held, "log.jsonl", data)
    finally:
        os.close(held)


def _appended_by_a_held_file(directory: Path, data: bytes) -> None:
    held = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        file = _beneath.HeldFile(held, "log.jsonl")
        try:
            assert file.append(data)
        finally:
            file.close()
    finally:
        os.close(held)


@given(
    before=st.binary(max_size=300),
    data=st.binary(min_size=1, max_size=3000),
    room=st.integers(min_value=0, max_value=3100),
    most=st.integers(min_value=1, max_value=4096),
    appends=st.sampled_from([_appended_by_append, _appended_by_a_held_file]),
)
def test_an_append_the_disk_cuts_short_at_any_byte_leaves_the_file_as_it_was(
    before: bytes,
    data: bytes,
    room: int,
    most: int,
    appends: Callable[[Path, bytes], None],
) -> None:
    """A disk with ``room`` bytes left, whose writes take at most ``most`` bytes at a time."""
    real_write = os.write
    with tempfile.TemporaryDirectory() as scratch:
        target = Path(scratch) / "log.jsonl"
        target.write_bytes(before)
        taken = 0

        def disk_write(fd: int, chunk: bytes | memoryview) -> int:
            nonlocal taken
            if os.path.realpath(f"/proc/self/fd/{fd}") != str(target.resolve()):
                return real_write(fd, chunk)
            if taken >= room:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            written = real_write(fd, bytes(chunk[: min(most, room - taken)]))
            taken += written
            return written

        with mock.patch.object(os, "write", disk_write):
            if room >= len(data):
                appends(Path(scratch), data)
                assert target.read_bytes() == before + data
            else:
                with pytest.raises(OSError, match="No space left") as refused:
                    appends(Path(scratch), data)
                assert refused.value.errno == errno.ENOSPC
                assert target.read_bytes() == before
