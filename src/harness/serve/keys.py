"""API keys: who a request is for.

A key is a random secret the operator hands to one user; the server keeps only its SHA-256
digest, so a leaked key file lets no one in. A key file has one entry per line::

    # user        digest of the key
    alice         sha256:5f0c...e1
    bob           sha256:a9d3...07

``HARNESS_API_KEYS`` holds the same entries, separated by newlines or commas. ``harness keys
add USER --file FILE`` makes a key, prints it once and appends its entry; ``harness keys list``
shows the users and a short prefix of each digest; ``harness keys revoke USER`` removes entries.
A running server reloads its key files when they change (:meth:`ApiKeys.watch`), so a revoked
key stops working within about a second, without a restart.

The user a request acts for comes from its key and from nothing the client sends: every
session, task, trace and memory the request can reach is that user's (``docs/serve.md``).
Keys are compared by digest in constant time; a key is 32 random bytes, so a fast digest is
as good as a slow one here.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import hmac
import logging
import os
import re
import secrets
import stat
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from harness.errors import ConfigError
from harness.filesystem._beneath import append_whole, make_directories, sync_directory

__all__ = [
    "KEYS_ENV",
    "ApiKeys",
    "KeyEntry",
    "add_key",
    "digest",
    "list_keys",
    "new_key",
    "revoke_keys",
]

logger = logging.getLogger("harness.serve")

KEYS_ENV: Final = "HARNESS_API_KEYS"

_PREFIX: Final = "sha256:"
_USER: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,127}")
_DIGEST: Final = re.compile(r"sha256:[0-9a-f]{64}")
_MAX_KEY_FILE: Final = 16 * 1024 * 1024
"""A key file's size limit: over 100,000 entries, far beyond any real file."""
_WRITTEN_BY_ADD: Final = "pass a file that 'harness keys add USER --file FILE' wrote"
SHOWN_DIGEST: Final = 12
"""How many hex digits of a digest ``harness keys list`` shows: enough to tell keys apart."""
RELOAD_SECONDS: Final = 1.0
"""How often a running server looks whether its key files changed."""


def new_key() -> str:
    """A fresh key: ``hk_`` and 43 URL-safe characters (32 random bytes)."""
    return "hk_" + secrets.token_urlsafe(32)


def digest(key: str) -> str:
    """The entry a key file keeps for ``key``."""
    return _PREFIX + hashlib.sha256(key.encode()).hexdigest()


class ApiKeys:
    """The users the server knows, by the digest of each one's keys (a user may have several).

    Keys loaded from files (:meth:`load`) follow those files: :meth:`watch`, which the served
    app runs, reloads them when one changes, so a revocation takes effect without a restart.
    A change that cannot be read (a file gone, unreadable or malformed) keeps the keys in use
    and logs an error: a half-written edit must not lock every user out, nor let anyone in.
    """

    __slots__ = ("_environ_text", "_files", "_stamps", "_users")

    def __init__(
        self,
        users_by_digest: Mapping[str, str],
        *,
        files: Iterable[Path] = (),
        environ_text: str = "",
    ) -> None:
        if not users_by_digest:
            msg = "no API keys are configured: add one with 'harness keys add USER --file FILE'"
            raise ConfigError(msg)
        self._users: Mapping[str, str] = dict(users_by_digest)
        self._files = tuple(files)
        self._environ_text = environ_text
        self._stamps = _stamps(self._files)

    @property
    def users_by_digest(self) -> Mapping[str, str]:
        """Each known digest and its user, as last loaded."""
        return self._users

    @property
    def files(self) -> tuple[Path, ...]:
        """The key files these keys were loaded from (and are reloaded from)."""
        return self._files

    @classmethod
    def parse(cls, text: str, *, source: str) -> ApiKeys:
        """Entries from a key file's text (or the variable's); a bad line is a ConfigError."""
        return cls(_parse(text, source=source))

    @classmethod
    def load(
        cls, files: Iterable[Path] = (), *, environ: Mapping[str, str] = os.environ
    ) -> ApiKeys:
        """The keys of ``files`` and of ``$HARNESS_API_KEYS`` together."""
        paths = tuple(files)
        text = environ.get(KEYS_ENV, "")
        return cls(_load(paths, text), files=paths, environ_text=text)

    def user_for(self, key: str) -> str | None:
        """The user whose key this is; None for an unknown key."""
        wanted = digest(key)
        found = None
        for entry, user in self._users.items():
            # Every entry is compared, so the time taken says nothing about which one matched.
            if hmac.compare_digest(entry, wanted):
                found = user
        return found

    async def reload(self) -> bool:
        """Load the key files again if one changed since the last look; whether keys changed.

        The files are looked at and read in a worker thread, never on the event loop. A file
        that cannot be read or parsed keeps the keys in use (an error is logged once per
        change). Revoking the last key is honoured: every request is then refused.
        """
        if not self._files:
            return False
        stamps = await asyncio.to_thread(_stamps, self._files)
        if stamps == self._stamps:
            return False
        self._stamps = stamps
        try:
            users = await asyncio.to_thread(_load, self._files, self._environ_text)
        except ConfigError as exc:
            logger.error("kept the API keys in use: %s", exc)
            return False
        if users == self._users:
            return False
        if not users:
            logger.warning("the API key files hold no key now: every request is refused")
        self._users = users
        logger.info(
            "reloaded the API keys: %d key(s) of %d user(s)", len(users), len(set(users.values()))
        )
        return True

    async def watch(self, interval: float = RELOAD_SECONDS) -> None:
        """Reload the key files whenever they change, looking every ``interval`` seconds.

        Runs until cancelled (the served app runs it for its lifetime); returns at once when
        the keys come from no file.
        """
        while self._files:
            await asyncio.sleep(interval)
            try:
                await self.reload()
            except OSError as exc:  # pragma: no cover - the thread pool itself failed
                logger.error("could not look at the API key files: %s", exc)


def _parse(text: str, *, source: str) -> dict[str, str]:
    users: dict[str, str] = {}
    for number, entry in _entries(text, source=source):
        if users.setdefault(entry.digest, entry.user) != entry.user:
            given = users[entry.digest]
            msg = f"{source}, entry {number}: this key is already given to user {given!r}"
            raise ConfigError(msg)
    return users


def _load(files: tuple[Path, ...], environ_text: str) -> dict[str, str]:
    users: dict[str, str] = {}
    for path in files:
        users.update(_parse(_read_key_file(path), source=str(path)))
    if environ_text.strip():
        users.update(_parse(environ_text, source=KEYS_ENV))
    return users


_Stamp = tuple[int, int, int, int] | None


def _stamps(files: tuple[Path, ...]) -> tuple[_Stamp, ...]:
    """What tells that a file changed: its device, inode, size and modification time."""
    found: list[_Stamp] = []
    for path in files:
        try:
            info = os.stat(path)
        except OSError:
            found.append(None)
        else:
            found.append((info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns))
    return tuple(found)


@dataclass(frozen=True, slots=True)
class KeyEntry:
    """One entry of a key file: the user and the digest of their key (never the key)."""

    user: str
    digest: str

    @property
    def short(self) -> str:
        """The digest's first hex digits, as ``harness keys list`` shows them."""
        return self.digest.removeprefix(_PREFIX)[:SHOWN_DIGEST]


def _entries(text: str, *, source: str) -> Iterator[tuple[int, KeyEntry]]:
    """Each entry of a key file's text with its number; a bad line is a ConfigError."""
    for number, raw in enumerate(re.split(r"[\n,]", text), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        where = f"{source}, entry {number}"
        if len(parts) != 2 or not _DIGEST.fullmatch(parts[1]):
            msg = f"{where}: expected 'USER sha256:<64 hex digits>', got {line[:60]!r}"
            raise ConfigError(msg)
        user, entry = parts
        if not _USER.fullmatch(user):
            msg = f"{where}: {user!r} is not a user id (letters, digits, . _ @ -)"
            raise ConfigError(msg)
        yield number, KeyEntry(user, entry)


def _read_key_file(path: Path) -> str:
    """The text of a key file; anything that is not a readable UTF-8 text file is a ConfigError.

    Opened without blocking and checked to be a regular file first: a FIFO or a device given
    by mistake would otherwise hang the server's start (or read forever, as ``/dev/zero``).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        msg = f"cannot read the API key file {path}: {exc.strerror or exc}"
        raise ConfigError(msg) from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            msg = f"the API key file {path} is not a regular file; {_WRITTEN_BY_ADD}"
            raise ConfigError(msg)
        if info.st_size > _MAX_KEY_FILE:
            msg = (
                f"the API key file {path} is {info.st_size:,} bytes, more than a key file's "
                f"{_MAX_KEY_FILE:,}; {_WRITTEN_BY_ADD}"
            )
            raise ConfigError(msg)
        chunks: list[bytes] = []
        while chunk := os.read(fd, 1 << 20):  # a read may return less than asked for
            chunks.append(chunk)
        data = b"".join(chunks)
    except OSError as exc:
        msg = f"cannot read the API key file {path}: {exc.strerror or exc}"
        raise ConfigError(msg) from exc
    finally:
        os.close(fd)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        msg = f"the API key file {path} is not UTF-8 text (at byte {exc.start}); {_WRITTEN_BY_ADD}"
        raise ConfigError(msg) from None


def add_key(path: Path, user: str) -> str:
    """Make a key for ``user``, append its digest to the key file, and return the key."""
    if not _USER.fullmatch(user):
        msg = f"{user!r} is not a user id: use letters, digits and . _ @ - (at most 128)"
        raise ConfigError(msg)
    key = new_key()
    try:  # the key is handed out once: its line, and a new file's name, are on the disk first
        made = make_directories(path.parent, 0o777)
        new = not path.exists()
        with _locked(path, create=True) as fd:
            append_whole(fd, f"{user} {digest(key)}\n".encode())
            os.fsync(fd)
        if new or made:
            sync_directory(path.parent, made)
    except OSError as exc:
        msg = f"cannot add a key to the API key file {path}: {exc.strerror or exc}"
        raise ConfigError(msg) from exc
    return key


def list_keys(path: Path) -> list[KeyEntry]:
    """The entries of a key file, in its order."""
    return [entry for _, entry in _entries(_read_key_file(path), source=str(path))]


def revoke_keys(path: Path, user: str, digest_prefix: str | None = None) -> list[KeyEntry]:
    """Remove ``user``'s entries from the key file and return them.

    With ``digest_prefix``, only the one entry of theirs whose digest starts so. Comments and
    other users' entries stay as they were.

    The file is rewritten whole, atomically: a new file beside it, with its mode, replaces it,
    so a server reloading it (:meth:`ApiKeys.watch`) reads the old file or the new one, never
    half of one. A lock on the file keeps a ``harness keys add`` at the same time from being
    lost.

    Raises:
        ConfigError: The file cannot be read or is malformed.
        LookupError: The user has no entry there, or the prefix names none or several of theirs.
    """
    wanted = _digest_prefix(digest_prefix) if digest_prefix is not None else None
    with _locked(path, create=False) as fd:
        text = _read_key_file(path)
        entries = dict(_entries(text, source=str(path)))
        theirs = {n: e for n, e in entries.items() if e.user == user}
        if not theirs:
            raise LookupError(f"{path} has no key of user {user!r}")
        if wanted is not None:
            matching = {e.digest for e in theirs.values() if e.digest.startswith(wanted)}
            if len(matching) != 1:
                count = "no key" if not matching else f"{len(matching)} keys"
                shown = wanted.removeprefix(_PREFIX)
                msg = f"{count} of user {user!r} in {path} has a digest starting with {shown!r}"
                raise LookupError(msg + ("; give more digits" if matching else ""))
            theirs = {n: e for n, e in theirs.items() if e.digest in matching}
        kept = _without_entries(text, set(theirs))
        _replace(path, kept, mode=stat.S_IMODE(os.fstat(fd).st_mode))
    return list(theirs.values())


def _digest_prefix(value: str) -> str:
    hexa = value.strip().lower().removeprefix(_PREFIX)
    if not re.fullmatch(r"[0-9a-f]{1,64}", hexa):
        raise LookupError(f"{value[:80]!r} is not the start of a digest (hex digits)")
    return _PREFIX + hexa


def _without_entries(text: str, numbers: set[int]) -> str:
    """``text`` without the entries numbered ``numbers`` (as :func:`_entries` numbers them).

    An entry is a line, or a comma-separated part of one (``$HARNESS_API_KEYS``' form); a line
    left with neither an entry nor a comment is dropped, every other line is kept as it was.
    """
    kept_lines: list[str] = []
    number = 0
    for line in text.split("\n"):
        parts = line.split(",")
        kept = []
        for part in parts:
            number += 1
            if number not in numbers:
                kept.append(part)
        if len(kept) == len(parts):
            kept_lines.append(line)
        elif any(part.strip() for part in kept):
            kept_lines.append(",".join(kept))
    return "\n".join(kept_lines)


def _replace(path: Path, text: str, *, mode: int) -> None:
    """Write ``text`` to a new file beside ``path`` with ``mode``, then put it in its place."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            os.fchmod(handle.fileno(), mode)
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    with contextlib.suppress(OSError):  # the rename itself, made durable
        sync_directory(path.parent)


@contextlib.contextmanager
def _locked(path: Path, *, create: bool) -> Iterator[int]:
    """The key file, open for writing and locked against other writers of this module.

    The lock is on the file itself; a file replaced while we waited for it (a revocation) is
    opened again, so an entry appended after a revocation lands in the new file.
    """
    flags = os.O_RDWR | os.O_CLOEXEC | (os.O_CREAT if create else 0)
    while True:
        try:
            fd = os.open(path, flags, 0o600)
        except OSError as exc:
            msg = f"cannot open the API key file {path}: {exc.strerror or exc}"
            raise ConfigError(msg) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                current = os.stat(path)
            except FileNotFoundError:
                current = None
            opened = os.fstat(fd)
            if current is not None and (current.st_dev, current.st_ino) == (
                opened.st_dev,
                opened.st_ino,
            ):
                yield fd
                return
        finally:
            os.close(fd)
