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
from harness.filesystem.base import FileData, FsError, FsErrorCode, GrepMatch, ReadResult

__all__ = [
    "BINARY_EXTENSIONS",
    "DEFAULT_MAX_FILE_BYTES",
    "MAX_NAME_BYTES",
    "BadName",
    "Fail",
    "SymlinkEscape",
    "check_names",
    "clean_pattern",
    "edited",
    "exists_message",
    "glob_regex",
    "grep_filter",
    "match_line_endings",
    "matching_lines",
    "read_result",
    "refusal",
    "shown_path",
    "split_lines",
    "text_of",
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


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A regex matching the paths (relative, ``/``-separated) a glob pattern selects."""
    if not pattern:
        return re.compile(r"(?!)")
    parts = pattern.split("/")
    out: list[str] = []
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            out.append(".*" if last else "(?:[^/]+/)*")
        else:
            out.append(_segment_regex(part) + ("" if last else "/"))
    return re.compile("".join(out), re.DOTALL)


def _segment_regex(segment: str) -> str:
    """One name of a glob pattern as a regex: ``*``, ``?`` and ``[...]`` stay in the name."""
    out: list[str] = []
    i = 0
    while i < len(segment):
        char = segment[i]
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[" and (close := segment.find("]", i + 2)) != -1:
            body = segment[i + 1 : close]
            negate = body[:1] in ("!", "^")
            body = body[1:] if negate else body
            escaped = body.replace("\\", "\\\\").replace("^", "\\^")
            out.append(f"[{'^/' if negate else ''}{escaped}]")
            i = close
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


def grep_filter(glob: str | None) -> Callable[[str, str], bool]:
    """Whether grep's ``glob`` selects a file, given its name and its path below the search.

    A pattern with a ``/`` matches the path below the search directory, any other the name.

    Raises:
        PathOutsideWorkspace: The pattern climbs out of the search directory.
    """
    if not glob:
        return lambda name, below: True
    cleaned = clean_pattern(glob)
    regex = glob_regex(cleaned)
    by_path = "/" in cleaned
    return lambda name, below: regex.fullmatch(below if by_path else name) is not None


def matching_lines(shown: str, text: str, pattern: str) -> list[GrepMatch]:
    """The lines of ``text`` holding the literal ``pattern``, 1-based, without a trailing CR."""
    if pattern not in text:
        return []
    return [
        GrepMatch(shown, number, line.removesuffix("\r"))
        for number, line in enumerate(text.split("\n"), start=1)
        if pattern in line
    ]
