"""The exceptions Harness raises.

Every error a user can act on descends from :class:`HarnessError` and says what went wrong and
what to do about it. Programming mistakes (a bad argument to a constructor) raise the built-in
exception that fits, usually ``ValueError`` or ``TypeError``.

::

    HarnessError
    ├── ConfigError                 bad or missing configuration (model spec, API key, workspace)
    ├── ModelError                  the model provider failed
    │   ├── ContextOverflowError    the request did not fit the model's context window
    │   └── RateLimitError          the provider refused for rate or quota reasons
    ├── ScriptExhaustedError        a scripted model has no turn that answers the request
    ├── AgentInterrupted            ``interrupt()`` stopped a running call
    ├── WorkspaceError
    │   └── PathOutsideWorkspace    a path escapes the workspace root
    ├── StorageError                a file could not be read or written
    └── SessionBusy                 another call kept the session for longer than the wait
"""

from __future__ import annotations

__all__ = [
    "AgentInterrupted",
    "ConfigError",
    "ContextOverflowError",
    "HarnessError",
    "ModelError",
    "PathOutsideWorkspace",
    "RateLimitError",
    "ScriptExhaustedError",
    "SessionBusy",
    "StorageError",
    "WorkspaceError",
]


class HarnessError(Exception):
    """Root of every error Harness raises on purpose."""


class ConfigError(HarnessError):
    """Configuration is missing or invalid; the message says which setting and how to fix it."""


class ModelError(HarnessError):
    """The model provider returned an error or an unusable answer."""


class ContextOverflowError(ModelError):
    """The request is longer than the model's context window."""


class RateLimitError(ModelError):
    """The provider rejected the request for rate or quota reasons (after the SDK's retries)."""


class ScriptExhaustedError(ModelError):
    """A :class:`~harness.models.ScriptedChatModel` has no turn left that matches the request."""


class AgentInterrupted(HarnessError):
    """A call was stopped by ``interrupt()`` before it finished."""


class WorkspaceError(HarnessError):
    """The workspace cannot be used as asked."""


class PathOutsideWorkspace(WorkspaceError, ValueError):
    """A path would resolve outside the workspace (``..``, an absolute path, ``~``)."""


class StorageError(HarnessError):
    """Reading or writing persisted state failed."""


class SessionBusy(HarnessError):
    """Another call (in this process or another worker) kept the session for too long."""
