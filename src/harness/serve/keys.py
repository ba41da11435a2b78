"""API keys: who a request is for.

A key is a random secret the operator hands to one user; the server keeps only its SHA-256
digest, so a leaked key file lets no one in. A key file has one entry per line::

    # user        digest of the key
    alice         sha256:5f0c...e1
    bob           sha256:a9d3...07

``HARNESS_API_KEYS`` holds the same entries, separated by newlines or commas. ``harness keys
add USER --file FILE`` makes a key, prints it once and appends its entry.

The user a request acts for comes from its key and from nothing the client sends: every
session, task, trace and memory the request can reach is that user's (``docs/serve.md``).
Keys are compared by digest in constant time; a key is 32 random bytes, so a fast digest is
as good as a slow one here.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from harness.errors import ConfigError

__all__ = ["KEYS_ENV", "ApiKeys", "add_key", "digest", "new_key"]

KEYS_ENV: Final = "HARNESS_API_KEYS"

_PREFIX: Final = "sha256:"
_USER: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,127}")
_DIGEST: Final = re.compile(r"sha256:[0-9a-f]{64}")
_MAX_KEY_FILE: Final = 16 * 1024 * 1024
"""A key file's size limit: over 100,000 entries, far beyond any real file."""
_WRITTEN_BY_ADD: Final = "pass a file that 'harness keys add USER --file FILE' wrote"


def new_key() -> str:
    """A fresh key: ``hk_`` and 43 URL-safe characters (32 random bytes)."""
    return "hk_" + secrets.token_urlsafe(32)


def digest(key: str) -> str:
    """The entry a key file keeps for ``key``."""
    return _PREFIX + hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class ApiKeys:
    """The users the server knows, by the digest of each one's keys (a user may have several)."""

    users_by_digest: Mapping[str, str]

    def __post_init__(self) -> None:
        if not self.users_by_digest:
            msg = "no API keys are configured: add one with 'harness keys add USER --file FILE'"
            raise ConfigError(msg)

    @classmethod
    def parse(cls, text: str, *, source: str) -> ApiKeys:
        """Entries from a key file's text (or the variable's); a bad line is a ConfigError."""
        users: dict[str, str] = {}
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
            if users.setdefault(entry, user) != user:
                msg = f"{where}: this key is already given to user {users[entry]!r}"
                raise ConfigError(msg)
        return cls(users)

    @classmethod
    def load(
        cls, files: Iterable[Path] = (), *, environ: Mapping[str, str] = os.environ
    ) -> ApiKeys:
        """The keys of ``files`` and of ``$HARNESS_API_KEYS`` together."""
        users: dict[str, str] = {}
        for path in files:
            users.update(cls.parse(_read_key_file(path), source=str(path)).users_by_digest)
        if environ.get(KEYS_ENV, "").strip():
            users.update(cls.parse(environ[KEYS_ENV], source=KEYS_ENV).users_by_digest)
        return cls(users)

    def user_for(self, key: str) -> str | None:
        """The user whose key this is; None for an unknown key."""
        wanted = digest(key)
        found = None
        for entry, user in self.users_by_digest.items():
            # Every entry is compared, so the time taken says nothing about which one matched.
            if hmac.compare_digest(entry, wanted):
                found = user
        return found


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
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as handle:
        handle.write(f"{user} {digest(key)}\n")
    return key
