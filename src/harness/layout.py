"""Where things live in a workspace.

::

    <workspace>/AGENTS.md                 persona and rules, injected every step
    <workspace>/MEMORY.md                 curated long-term memory, injected under a token budget
    <workspace>/knowledge/KNOWLEDGE.md    injected; other knowledge files are listed
    <workspace>/memory/YYYY-MM-DD.md      daily memory log
    <workspace>/skills/<name>/SKILL.md    skills
    <workspace>/subagents/*.md            subagent declarations
    <workspace>/agents/<agent>/context/<session>/messages.jsonl   saved conversation
    <workspace>/agents/<agent>/sessions/<session>.jsonl           transcript (every message once)
    <workspace>/agents/<agent>/tasks/<task>.json, <task>.result.md  background task and result
    <workspace>/agents/<agent>/children/<session>.json            subagents the session started
    <workspace>/agents/<agent>/traces/<session>.jsonl             trace of the session's calls
    <workspace>/agents/<agent>/files/...  the model's files under ``IsolationScope.AGENT``
    <workspace>/users/<user>/...          the same layout, per user

A call made for a user reads that user's copy of a file first and falls back to the shared copy
(so a shared AGENTS.md serves every user until a user has their own), and writes only under the
user's namespace.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterable
from typing import Final
from urllib.parse import quote, unquote

from harness.errors import InvalidText

__all__ = [
    "AGENTS_DIR",
    "AGENTS_MD",
    "AGENT_FILES_DIR",
    "CHILDREN_DIR",
    "KEPT_BY_HARNESS",
    "KNOWLEDGE_DIR",
    "KNOWLEDGE_MD",
    "MEMORY_DIR",
    "MEMORY_MD",
    "SHARED_WITH_USERS",
    "SKILLS_DIR",
    "SUBAGENTS_DIR",
    "TASKS_DIR",
    "TRACES_DIR",
    "USERS_DIR",
    "agent_files_dir",
    "kept_by_harness",
    "safe_segment",
    "saved_sessions_dir",
    "session_dir",
    "shared_with_users",
    "user_from_segment",
    "user_prefix",
]

AGENTS_MD: Final = "AGENTS.md"
MEMORY_MD: Final = "MEMORY.md"
KNOWLEDGE_DIR: Final = "knowledge"
KNOWLEDGE_MD: Final = "knowledge/KNOWLEDGE.md"
MEMORY_DIR: Final = "memory"
SKILLS_DIR: Final = "skills"
SUBAGENTS_DIR: Final = "subagents"
AGENTS_DIR: Final = "agents"
CHILDREN_DIR: Final = "children"
"""Per parent session, the subagents it started (to continue them from any process)."""
TASKS_DIR: Final = "tasks"
"""An agent's background task records and results, under ``agents/<agent>/``."""
TRACES_DIR: Final = "traces"
"""An agent's traces, under ``agents/<agent>/``."""
AGENT_FILES_DIR: Final = "files"
"""Under ``agents/<agent>/``, the agent's own files: its namespace under ``AGENT`` scope."""
USERS_DIR: Final = "users"

SHARED_WITH_USERS: Final = (AGENTS_MD, KNOWLEDGE_DIR, SKILLS_DIR, SUBAGENTS_DIR)
"""What a user's read falls back to when the user has no file of that path: the operator's
persona, knowledge, skills and subagent declarations. Nothing else of the shared workspace is
a user's to see: not ``MEMORY.md`` or ``memory/`` (the memory of calls made without a user),
not ``agents/`` (their sessions, transcripts, tasks and traces), not ``large_tool_results/``."""


KEPT_BY_HARNESS: Final = AGENTS_DIR
"""The directory of a namespace that only the harness writes: sessions, transcripts, task
records, subagent registries, traces. The model reads it (``read_file``, ``grep_files``) but
never writes it, through the file tools or from the sandbox (bound read-only there): a file
it could put there (a directory where a session file belongs, a forged task record) could
otherwise stop the user's every call or speak for another user."""


def kept_by_harness(path: str) -> bool:
    """Whether a namespace-relative path is in :data:`KEPT_BY_HARNESS`, in any letter case.

    A disk may ignore the case of names, so ``Agents/`` may be the same directory.
    """
    top = path.replace("\\", "/").strip().strip("/").split("/", 1)[0]
    return top.casefold() == KEPT_BY_HARNESS


def shared_with_users(path: str, also: Iterable[str] = ()) -> bool:
    """Whether a user may read the shared workspace's ``path`` (a workspace-relative path).

    The one rule of visibility across scopes: every reader that falls back from a user's
    namespace to the shared files (the workspace context, the file tools, skills and subagent
    declarations) asks it. ``also`` adds files the operator configured as context for every
    user (``WorkspaceContextConfig.context_files``).
    """
    rel = path.strip("/")
    return any(
        rel == shared or rel.startswith(f"{shared}/") for shared in (*SHARED_WITH_USERS, *also)
    )


_SAFE = re.compile(r"[A-Za-z0-9_.-]+")
_MAX_SEGMENT = 120
_SHORTENED = "="
"""Joins a long id's prefix to its digest. Never part of a segment otherwise: it is not in the
safe set, and percent-encoding writes it as ``%3D``."""


@functools.lru_cache(maxsize=4096)  # a call computes its session's paths many times
def safe_segment(name: str) -> str:
    """Turn an id (user, session, agent) into one path segment, injectively.

    Ids made of letters, digits, ``_``, ``.`` and ``-`` are used as they are; anything else is
    percent-encoded, so two different ids never share a directory and no id can climb out of
    its parent (``..`` becomes ``%2E%2E``). An id whose segment would be longer than 120
    characters is shortened to a prefix, ``=`` and the SHA-256 of the whole id: no other id's
    segment holds a ``=``, so a shortened segment can never equal the segment of an id that was
    not shortened, and the full digest keeps two long ids apart.

    Raises:
        ValueError: The id is empty.
        InvalidText: The id is not valid text (a lone surrogate).
    """
    if not name:
        msg = "an id used in a path must not be empty"
        raise ValueError(msg)
    try:
        encoded = name.encode("utf-8")
    except UnicodeEncodeError:
        msg = f"the id {name[:40]!r} is not valid text (it holds a lone surrogate); use UTF-8"
        raise InvalidText(msg) from None
    if _SAFE.fullmatch(name) and name not in (".", ".."):
        segment = name
    else:
        segment = quote(encoded, safe="").replace(".", "%2E")
    if len(segment) > _MAX_SEGMENT:
        digest = hashlib.sha256(encoded).hexdigest()
        segment = f"{segment[: _MAX_SEGMENT - len(digest) - 1]}{_SHORTENED}{digest}"
    return segment


def user_from_segment(segment: str) -> str | None:
    """The user id a namespace directory belongs to; None if the name does not round-trip."""
    user_id = unquote(segment)
    return user_id if user_id and safe_segment(user_id) == segment else None


def user_prefix(user_id: str | None) -> str:
    """The workspace-relative directory of a user's namespace (``""`` for no user)."""
    return f"{USERS_DIR}/{safe_segment(user_id)}/" if user_id else ""


def agent_files_dir(agent: str) -> str:
    """The workspace-relative directory of an agent's own files (``agents/<agent>/files``).

    It is the agent's namespace under ``IsolationScope.AGENT``: every user and session of the
    agent shares it, no other agent reaches it, and it holds none of the harness's records.
    """
    return f"{AGENTS_DIR}/{safe_segment(agent)}/{AGENT_FILES_DIR}"


def saved_sessions_dir(agent: str, user_id: str | None = None) -> str:
    """The workspace-relative directory holding the agent's saved sessions, one directory each.

    The names of the directories in it are the :func:`safe_segment` of the session ids.
    """
    return f"{user_prefix(user_id)}{AGENTS_DIR}/{safe_segment(agent)}/context"


def session_dir(agent: str, session_id: str, user_id: str | None = None) -> str:
    """The workspace-relative directory holding one session's saved conversation."""
    return f"{saved_sessions_dir(agent, user_id)}/{safe_segment(session_id)}"
