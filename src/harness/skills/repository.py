"""Skills: task instructions kept in the workspace, listed in the prompt, loaded on demand.

A skill is a folder with a ``SKILL.md`` and, optionally, any other files (templates, examples,
scripts) it refers to::

    <workspace>/skills/<name>/SKILL.md
    <workspace>/skills/<name>/templates/report.md        (a resource)
    <workspace>/users/<user>/skills/<name>/SKILL.md      (that user's own skill)

``SKILL.md`` is front matter and the instructions::

    ---
    name: weekly-report
    description: Writes the weekly status report from the team's notes.
    ---
    1. Read templates/report.md ...

Rules:

- ``name`` and ``description`` are required, non-empty strings. ``name`` is 1-64 letters,
  digits, ``-``, ``_`` or ``.``, starting with a letter or digit, and must equal the folder's
  name: the model loads a skill by name and reads its files by folder, so the two must not
  differ (a mismatch is reported, not guessed at). The description is folded to one line and
  holds at most :data:`MAX_DESCRIPTION_CHARS` characters, because every description is in
  every step's prompt. Other front matter keys are kept in :attr:`Skill.metadata`.
- Every other file of the folder, at any depth, is a resource; hidden files and folders
  (``.name``) are not, so lock files and editor droppings never reach the model.
- A user's skill replaces the shared skill of the same name as a whole, its resources included:
  the user sees only their own version. A user's folder without a ``SKILL.md`` is not a skill.
- A ``SKILL.md`` that cannot be used (no front matter, bad YAML, a missing or malformed field,
  a name that does not match its folder, an empty file) is skipped with a warning naming the
  file and the problem; a user's broken skill leaves the shared one of that name in place.

Reads go through the :class:`~harness.workspace.WorkspaceManager`, so skills live on any
backend, and happen at most once per ``refresh_seconds`` per user: edits show up within a
second without walking the folders at every reasoning step.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from harness.errors import ConfigError
from harness.workspace import SKILLS_DIR, WorkspaceManager, user_prefix
from harness.workspace.frontmatter import FrontMatterError, parse_front_matter

__all__ = [
    "DEFAULT_SKILL_REFRESH_SECONDS",
    "MAX_DESCRIPTION_CHARS",
    "SKILL_FILE",
    "Skill",
    "SkillRepository",
    "parse_skill",
]

logger = logging.getLogger(__name__)

SKILL_FILE: Final = "SKILL.md"
"""The file that makes a folder under ``skills/`` a skill."""

DEFAULT_SKILL_REFRESH_SECONDS: Final = 1.0
"""How long a user's skills are reused before the workspace is read again."""

MAX_DESCRIPTION_CHARS: Final = 1024
"""The longest description accepted; every description is in every step's prompt."""

MAX_CACHED_USERS: Final = 1024
"""Users whose skills are kept between reads; the least recently loaded are dropped first."""

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Skill:
    """One skill as the model sees it.

    Args:
        name: The id the model passes to ``load_skill``; also the folder's name.
        description: What it is for, on one line; the prompt lists it.
        instructions: The body of ``SKILL.md``.
        resources: The skill's other files, sorted, as paths relative to the namespace of the
            skill's owner (``skills/<name>/...``): the path a user's ``read_file`` resolves.
        source: The workspace path of the ``SKILL.md`` it was read from (a user's skill's
            starts with ``users/<user>/``).
        user_id: The user whose own skill this is; None for a shared skill.
        metadata: The other front matter keys.
    """

    name: str
    description: str
    instructions: str
    resources: tuple[str, ...] = ()
    source: str = ""
    user_id: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def folder(self) -> str:
        """The skill's folder as the model names it: ``skills/<name>``."""
        return f"{SKILLS_DIR}/{self.name}"


def parse_skill(text: str, source: str, *, folder: str | None = None) -> Skill:
    """A :class:`Skill` (without resources) from the text of a ``SKILL.md``.

    Args:
        text: The file's text.
        source: The file's workspace path, for messages.
        folder: The name of the folder holding the file; the skill's name must equal it.

    Raises:
        ConfigError: The front matter is missing or malformed, a required field is missing,
            or the name is not a valid id or differs from ``folder``; the message names
            ``source`` and the problem.
    """
    try:
        data, body = parse_front_matter(text)
    except FrontMatterError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    for key in ("name", "description"):
        if not isinstance(data.get(key), str) or not data[key].strip():
            msg = f"{source}: the front matter needs '{key}' (a non-empty string)"
            raise ConfigError(msg)
    name = data["name"].strip()
    if not _NAME.fullmatch(name):
        msg = (
            f"{source}: skill name {name!r} must be 1-64 letters, digits, '-', '_' or '.', "
            "starting with a letter or digit"
        )
        raise ConfigError(msg)
    if folder is not None and name != folder:
        msg = (
            f"{source}: the skill is named {name!r} but its folder is {folder!r}; "
            "rename the folder or change 'name' so they match"
        )
        raise ConfigError(msg)
    description = " ".join(data["description"].split())
    if len(description) > MAX_DESCRIPTION_CHARS:
        msg = (
            f"{source}: the description has {len(description)} characters, at most "
            f"{MAX_DESCRIPTION_CHARS} are allowed; move details into the instructions"
        )
        raise ConfigError(msg)
    extra = {key: value for key, value in data.items() if key not in ("name", "description")}
    return Skill(
        name=name,
        description=description,
        instructions=body,
        source=source,
        metadata=MappingProxyType(extra),
    )


@dataclass(frozen=True, slots=True)
class _Folder:
    """The files of one skill folder, as paths relative to the folder."""

    name: str
    files: tuple[str, ...]


class SkillRepository:
    """The skills available to each user: the shared ones, with the user's own on top.

    Args:
        workspace: Where the skills live.
        refresh_seconds: How long a user's skills are reused before the workspace is read
            again (0 reads at every request).
    """

    def __init__(
        self,
        workspace: WorkspaceManager,
        *,
        refresh_seconds: float = DEFAULT_SKILL_REFRESH_SECONDS,
    ) -> None:
        if refresh_seconds < 0:
            msg = f"refresh_seconds must be 0 or more, got {refresh_seconds!r}"
            raise ValueError(msg)
        self.workspace = workspace
        self.refresh_seconds = refresh_seconds
        self._cache: dict[str | None, tuple[float, Mapping[str, Skill]]] = {}

    async def skills(self, user_id: str | None = None) -> Mapping[str, Skill]:
        """The user's skills by name, sorted by name.

        The same mapping object is returned until the next read of the workspace, so callers
        can cache what they derive from it by identity.
        """
        now = time.monotonic()
        cached = self._cache.get(user_id)
        if cached is not None and now - cached[0] < self.refresh_seconds:
            return cached[1]
        skills = await self._load(user_id)
        self._cache.pop(user_id, None)
        while len(self._cache) >= MAX_CACHED_USERS:
            del self._cache[next(iter(self._cache))]
        self._cache[user_id] = (now, skills)
        return skills

    async def get(self, name: str, user_id: str | None = None) -> Skill | None:
        """The user's skill of that name, or None."""
        return (await self.skills(user_id)).get(name)

    async def _load(self, user_id: str | None) -> Mapping[str, Skill]:
        found = await self._read(await self._folders(SKILLS_DIR), SKILLS_DIR, None)
        if user_id:
            base = user_prefix(user_id) + SKILLS_DIR
            found.update(await self._read(await self._folders(base), base, user_id))
        return MappingProxyType(dict(sorted(found.items())))

    async def _folders(self, base: str) -> list[_Folder]:
        """The folders under ``base`` that hold a ``SKILL.md``, with their visible files."""
        files: dict[str, list[str]] = {}
        for path in await self.workspace.list_files(base):
            parts = path[len(base) + 1 :].split("/")
            if len(parts) < 2 or any(part.startswith(".") for part in parts):
                continue  # a file directly in skills/, or a hidden one
            files.setdefault(parts[0], []).append("/".join(parts[1:]))
        return [
            _Folder(name, tuple(sorted(rel)))
            for name, rel in sorted(files.items())
            if SKILL_FILE in rel
        ]

    async def _read(
        self, folders: list[_Folder], base: str, user_id: str | None
    ) -> dict[str, Skill]:
        sources = [f"{base}/{folder.name}/{SKILL_FILE}" for folder in folders]
        texts = await self.workspace.read_first(sources)
        skills: dict[str, Skill] = {}
        for folder, source in zip(folders, sources, strict=True):
            entry = texts.get(source)
            if entry is None:  # empty, or removed since it was listed
                logger.warning("skipped skill %s: the file is empty", source)
                continue
            try:
                skill = parse_skill(entry.text, source, folder=folder.name)
            except ConfigError as exc:
                logger.warning("skipped skill %s", exc)
                continue
            resources = tuple(
                f"{SKILLS_DIR}/{folder.name}/{rel}" for rel in folder.files if rel != SKILL_FILE
            )
            skills[skill.name] = Skill(
                name=skill.name,
                description=skill.description,
                instructions=skill.instructions,
                resources=resources,
                source=source,
                user_id=user_id,
                metadata=skill.metadata,
            )
        return skills
