"""What a file tool means, whichever backend runs it: names, reads, edits, globs and messages.

The local, store-backed and composite backends all refuse the same names, read and edit text
the same way, match globs alike and say the same things, because they take it from here. A
backend keeps only what is its own: how it reaches the bytes.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from typing import Final

from harness.errors import OtherNamespace, PathOutsideWorkspace
from harness.filesystem.base import (
    MAX_GREP_MATCHES,
    FileData,
    FsError,
    FsErrorCode,
    GrepMatch,
    GrepResult,
    ReadResult,
)

__all__ = [
    "BINARY_EXTENSIONS",
    "DEFAULT_MAX_FILE_BYTES",
    "MAX_NAME_BYTES",
    "BadName",
    "Fail",
    "Glob",
    "SymlinkEscape",
    "check_names",
    "clean_pattern",
    "edited",
    "exists_message",
    "grep_filter",
    "grep_result",
    "match_line_endings",
    "matching_lines",
    "read_result",
    "refusal",
    "shown_path",
    "size_limit",
    "split_lines",
    "text_of",
    "too_large_message",
]


DEFAULT_MAX_FILE_BYTES: Final = 10 * 1024 * 1024
"""Files larger than this are not read, edited or searched (10 MiB, the original's default)."""


MAX_NAME_BYTES: Final = 240
"""The longest file or directory name, in UTF-8 bytes.

Disks take 255; an atomic write's temporary file (``.<name>.<8 chars>.tmp``) needs 14 more.
"""


BINARY_EXTENSIONS: Final = frozenset(
    {
        # images
        "png", "jpg", "jpeg", "gif", "bmp", "ico", "webp", "tif", "tiff", "heic", "avif",
        # audio and video
        "mp3", "wav", "ogg", "flac", "m4a", "aac", "mp4", "m4v", "mov", "avi", "mkv", "webm",
        # documents
        "pdf", "doc", "docx", "xls", "xlsx", "ppt", "pptx", "odt", "ods", "odp",
        # archives
        "zip", "gz", "tgz", "bz2", "xz", "zst", "7z", "rar", "tar", "jar", "war",
        # compiled code and native libraries
        "class", "pyc", "so", "dylib", "dll", "exe", "o", "a", "wasm", "bin",
        # databases
        "sqlite", "db",
    }
)  # fmt: skip
"""Extensions read as base64 whatever their bytes (the original's list, roughly)."""


class SymlinkEscape(PathOutsideWorkspace):
    """The path resolves, through a symbolic link, to somewhere outside the namespace."""


class BadName(PathOutsideWorkspace):
    """A name the filesystem cannot hold (too long, not encodable) or a symlink loop."""


class Fail(Exception):
    """An expected failure of a tool operation, carried out as its result's error."""

    def __init__(self, code: FsErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = FsError(code, message)


def read_result(
    name: str, raw: bytes, modified: float | None, path: str, offset: int, limit: int | None
) -> ReadResult:
    """The lines a read asked for (or the whole file, base64, when it is not text).

    Raises:
        Fail: ``offset`` is past the end of a non-empty file.
    """
    text = text_of(name, raw)
    if text is None:
        content = base64.b64encode(raw).decode("ascii")
        return ReadResult(FileData(content, "base64", modified_at=modified))
    lines = split_lines(text)
    if lines and offset >= len(lines):
        raise Fail(
            FsErrorCode.INVALID_PATH,
            f"offset {offset} is past the end of '{path}' ({len(lines)} lines); "
            f"use an offset below {len(lines)}",
        )
    end = offset + limit if limit else len(lines)
    content = "".join(lines[offset:end])
    return ReadResult(FileData(content, modified_at=modified, total_lines=len(lines)))


def check_names(path: str, rel: str) -> None:
    """Refuse a name that is not text or too long for the file system (as every backend does).

    Raises:
        BadName: Naming the problem.
    """
    for name in rel.split("/") if rel else ():
        try:
            size = len(name.encode("utf-8"))
        except UnicodeEncodeError as exc:
            msg = f"path {shown_path(path)} is not valid text; use a UTF-8 name"
            raise BadName(msg) from exc
        if size > MAX_NAME_BYTES:
            msg = (
                f"path {shown_path(path)} has a name of {size} bytes; names are limited to "
                f"{MAX_NAME_BYTES} bytes, use a shorter one"
            )
            raise BadName(msg)


def refusal(exc: PathOutsideWorkspace) -> FsError:
    """The error a tool operation reports for a refused path."""
    code = (
        FsErrorCode.PERMISSION_DENIED
        if isinstance(exc, SymlinkEscape | OtherNamespace)
        else FsErrorCode.INVALID_PATH
    )
    return FsError(code, str(exc))


def size_limit(owner: str, name: str, value: object) -> int:
    """A backend's size limit (``max_file_bytes``, ``max_storage_bytes``), checked.

    Raises:
        TypeError: It is not an int.
        ValueError: It is not positive.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        msg = f"{owner} {name} must be an int, got {value!r}"
        raise TypeError(msg)
    if value <= 0:
        msg = f"{owner} {name} must be positive, got {value}"
        raise ValueError(msg)
    return value


def too_large_message(path: str, size: int, limit: int) -> str:
    """What a storage read says of a file over its limit (it was not read)."""
    return (
        f"{shown_path(path)} holds at least {size:,} bytes, over the limit of {limit:,} for "
        "this read; it was not read: shorten or remove it"
    )


def exists_message(path: str) -> str:
    return (
        f"Cannot write to {path} because it already exists. "
        "Read and then make an edit, or write to a new path."
    )


def shown_path(path: str) -> str:
    """A path for an error message, shortened when it is very long."""
    return f"'{path}'" if len(path) <= 80 else f"'{path[:60]}...' ({len(path)} chars)"


def text_of(name: str, raw: bytes) -> str | None:
    """The UTF-8 text of a file, or None for a binary one (by extension or by content)."""
    _, dot, extension = name.rpartition(".")
    if dot and extension.lower() in BINARY_EXTENSIONS:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def split_lines(text: str) -> list[str]:
    r"""Lines split on ``\n`` only, each keeping it (``str.splitlines`` also splits on ``\r``)."""
    lines = text.split("\n")
    tail = lines.pop()
    return [line + "\n" for line in lines] + ([tail] if tail else [])


def match_line_endings(text: str, old: str, new: str) -> tuple[str, str]:
    """``old`` and ``new`` with the file's line endings, when ``old`` is not found as given."""
    if old in text:
        return old, new
    if "\r\n" in old and "\r\n" not in text:
        return old.replace("\r\n", "\n"), new.replace("\r\n", "\n")
    if "\r\n" in text and "\n" in old and "\r\n" not in old:
        return old.replace("\n", "\r\n"), new.replace("\r\n", "\n").replace("\n", "\r\n")
    return old, new


def edited(
    path: str, name: str, raw: bytes, old: str, new: str, replace_all: bool
) -> tuple[bytes, int]:
    """A file's bytes after an edit, and how many occurrences it replaced (any backend).

    Raises:
        Fail: The file is binary, or ``old`` is not found, or found more than once without
            ``replace_all``.
    """
    text = text_of(name, raw)
    if text is None:
        raise Fail(
            FsErrorCode.UNSUPPORTED,
            f"'{path}' is a binary file; edit only text files, or upload new bytes",
        )
    old, new = match_line_endings(text, old, new)
    count = text.count(old)
    if count == 0:
        raise Fail(FsErrorCode.NO_MATCH, f"String not found in file: '{old}'")
    if count > 1 and not replace_all:
        raise Fail(
            FsErrorCode.NOT_UNIQUE,
            f"String '{old}' appears {count} times in '{path}'; use replace_all=True "
            "to replace every occurrence, or add surrounding context to make it unique",
        )
    updated = text.replace(old, new) if replace_all else text.replace(old, new, 1)
    return updated.encode("utf-8"), count if replace_all else 1


def clean_pattern(pattern: str) -> str:
    """A glob pattern relative to the search directory.

    Raises:
        PathOutsideWorkspace: The pattern climbs out (``..``), or names a home directory.
    """
    cleaned = pattern.replace("\\", "/").strip().lstrip("/")
    parts = cleaned.split("/")
    if "\x00" in cleaned or ".." in parts or cleaned.startswith("~"):
        msg = f"glob pattern {shown_path(pattern)} leaves the search directory; use one inside it"
        raise BadName(msg)
    return "/".join(part for part in parts if part not in ("", "."))


MAX_PATTERN_CHARS: Final = 1_000
"""The longest glob pattern a search takes (matching costs the pattern's length per name)."""


class Glob:
    """A glob pattern, matched without backtracking.

    ``*``, ``?`` and ``[...]`` (``[!...]`` or ``[^...]`` negated, ``a-z`` ranges) match within
    one name; a ``**`` part spans directories: in the middle it stands for any number of whole
    names (none included), at the end for everything below (``a/**`` matches what lies under
    ``a``; ``**`` alone matches every path).

    A name is matched by the greedy wildcard algorithm, which returns to its last ``*`` only,
    and a path part by part keeping the set of positions reached, so a match costs at most the
    pattern's length times the path's. A pattern the model chose cannot make it run longer (a
    backtracking regex runs exponentially long on ``*a*a*a*a*b``, holding the GIL).

    The common patterns (``**/*.md``, ``memory/*.md``: one ``**`` at most, one ``*`` per name
    at most) are matched by a regex instead, 5 to 17 times faster: with a single variable part
    per name, and names split at ``/`` that no other part matches, it can only backtrack
    within one name or over one ``**``, linearly.
    """

    __slots__ = ("_parts", "_regex")

    def __init__(self, pattern: str) -> None:
        if len(pattern) > MAX_PATTERN_CHARS:
            msg = (
                f"glob pattern {shown_path(pattern)} is {len(pattern):,} characters long; "
                f"use at most {MAX_PATTERN_CHARS:,}"
            )
            raise BadName(msg)
        self._parts: tuple[_Name | None, ...] | None = (
            tuple(None if part == "**" else _Name(part) for part in pattern.split("/"))
            if pattern
            else None
        )
        parts = self._parts or ()
        linear = sum(part is None for part in parts) <= 1 and all(
            part.stars <= 1 for part in parts if part is not None
        )
        self._regex = _regex(parts) if parts and linear else None

    def fullmatch(self, path: str) -> bool:
        """Whether the relative, ``/``-separated ``path`` matches the whole pattern."""
        if self._regex is not None:
            return self._regex.fullmatch(path) is not None
        if self._parts is None:
            return False  # the empty pattern matches nothing
        names = path.split("/")  # "" is one empty name, as the regex translation read it
        reached = {0}  # how many names of the path the parts so far can account for
        last = len(self._parts) - 1
        for index, part in enumerate(self._parts):
            if part is None and index == last:  # after '/', or from the start: anything
                return any(at < len(names) or at == 0 for at in reached)
            if part is None:
                reached = set(range(min(reached), len(names) + 1))
            else:
                reached = {at + 1 for at in reached if at < len(names) and part.matches(names[at])}
            if not reached:
                return False
        return len(names) in reached


_STAR: Final = "*"
_ONE: Final = "?"


class _Name:
    """One name of a glob pattern: literal characters, ``*``, ``?`` and character classes."""

    __slots__ = ("_literal", "stars", "tokens")

    def __init__(self, pattern: str) -> None:
        self.tokens = _name_tokens(pattern)
        self.stars = self.tokens.count(_STAR)
        plain = all(isinstance(token, str) and len(token) == 1 for token in self.tokens)
        self._literal = pattern if plain and "*" not in pattern and "?" not in pattern else None

    def matches(self, name: str) -> bool:
        if self._literal is not None:
            return name == self._literal
        tokens = self.tokens
        t = n = 0
        star, resume = -1, 0  # the last '*' seen, and where its match would end next
        while n < len(name):
            if t < len(tokens) and tokens[t] == _STAR:
                star, resume = t, n
                t += 1
            elif t < len(tokens) and _one_matches(tokens[t], name[n]):
                t += 1
                n += 1
            elif star != -1:  # let the last '*' take one more character, and go on from there
                t, resume = star + 1, resume + 1
                n = resume
            else:
                return False
        while t < len(tokens) and tokens[t] == _STAR:
            t += 1
        return t == len(tokens)


_Token = str | tuple[bool, frozenset[str], tuple[tuple[str, str], ...]]
"""``*``, ``?``, a literal character (never ``*`` or ``?``: those are always wildcards), or a
class: (negated, characters, ranges)."""


def _name_tokens(pattern: str) -> list[_Token]:
    tokens: list[_Token] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "*":
            if not tokens or tokens[-1] != _STAR:  # '**' within a name is one '*'
                tokens.append(_STAR)
        elif char == "?":
            tokens.append(_ONE)
        elif char == "[" and (close := pattern.find("]", i + 2)) != -1:
            tokens.append(_char_class(pattern[i + 1 : close]))
            i = close
        else:
            tokens.append(char)
        i += 1
    return tokens


def _char_class(body: str) -> _Token:
    negated = body[:1] in ("!", "^")
    body = body[1:] if negated else body
    chars: set[str] = set()
    ranges: list[tuple[str, str]] = []
    j = 0
    while j < len(body):
        if j + 2 < len(body) and body[j + 1] == "-":
            ranges.append((body[j], body[j + 2]))
            j += 3
        else:
            chars.add(body[j])
            j += 1
    return (negated, frozenset(chars), tuple(ranges))


def _regex(parts: tuple[_Name | None, ...]) -> re.Pattern[str]:
    """The parts as one regex (for the patterns :class:`Glob` leaves to one)."""
    out: list[str] = []
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part is None:
            out.append(".*" if last else "(?:[^/]+/)*")
        else:
            out.append("".join(map(_token_regex, part.tokens)) + ("" if last else "/"))
    return re.compile("".join(out), re.DOTALL)


def _token_regex(token: _Token) -> str:
    if token == _STAR:
        return "[^/]*"
    if token == _ONE:
        return "[^/]"
    if isinstance(token, str):
        return re.escape(token)
    negated, chars, ranges = token
    inside = "".join(re.escape(char) for char in sorted(chars)) + "".join(
        f"{re.escape(low)}-{re.escape(high)}" for low, high in ranges if low <= high
    )
    if not inside:  # a class of reversed ranges only: nothing, or anything when negated
        return "[^/]" if negated else "(?!)"
    return f"[^/{inside}]" if negated else f"[{inside}]"


def _one_matches(token: _Token, char: str) -> bool:
    """Whether one token that takes one character (not ``*``) takes ``char``."""
    if token == _ONE:
        return True
    if isinstance(token, str):
        return token == char
    negated, chars, ranges = token
    inside = char in chars or any(low <= char <= high for low, high in ranges)
    return inside != negated


def grep_filter(glob: str | None) -> Callable[[str, str], bool]:
    """Whether grep's ``glob`` selects a file, given its name and its path below the search.

    A pattern with a ``/`` matches the path below the search directory, any other the name.

    Raises:
        PathOutsideWorkspace: The pattern climbs out of the search directory.
    """
    if not glob:
        return lambda name, below: True
    cleaned = clean_pattern(glob)
    matcher = Glob(cleaned)
    by_path = "/" in cleaned
    return lambda name, below: matcher.fullmatch(below if by_path else name)


def grep_result(matches: list[GrepMatch], *, truncated: bool = False) -> GrepResult:
    """A grep's answer: its matches sorted by path and line, at most :data:`MAX_GREP_MATCHES`.

    A search stops once it holds one match more than the limit, which tells it was cut.
    """
    matches.sort(key=lambda m: (m.path, m.line))
    cut = truncated or len(matches) > MAX_GREP_MATCHES
    return GrepResult(matches[:MAX_GREP_MATCHES], truncated=cut)


def matching_lines(shown: str, text: str, pattern: str, limit: int) -> list[GrepMatch]:
    """The first ``limit`` lines of ``text`` holding the literal ``pattern``, 1-based.

    A trailing CR is dropped. The text is scanned only as far as the last of them, and no list
    of all its lines is made.
    """
    matches: list[GrepMatch] = []
    if "\n" in pattern:
        return matches  # a line never holds a line break
    line, counted = 1, 0  # the line number of text[counted]
    start = text.find(pattern)
    while start != -1 and len(matches) < limit:
        begin = text.rfind("\n", 0, start) + 1
        end = text.find("\n", start)
        end = len(text) if end == -1 else end
        line += text.count("\n", counted, begin)
        counted = begin
        matches.append(GrepMatch(shown, line, text[begin:end].removesuffix("\r")))
        start = text.find(pattern, end + 1)
    return matches
