"""The exceptions Harness raises.

Every error a user can act on descends from :class:`HarnessError` and says what went wrong and
what to do about it. Programming mistakes (a bad argument to a constructor) raise the built-in
exception that fits, usually ``ValueError`` or ``TypeError``.

::

    HarnessError
    ├── ConfigError                 bad or missing configuration (model spec, API key, workspace)
    │   └── WindowTooSmall          the system prompt and tools alone do not fit the window
    ├── ModelError                  the model provider failed
    │   ├── ContextOverflowError    the request did not fit the model's context window
    │   ├── RateLimitError          the provider refused for rate or quota reasons
    │   └── ScriptExhaustedError    a scripted model has no turn that answers the request
    ├── AgentInterrupted            ``interrupt()`` stopped a running call
    ├── UnknownApproval             no pending approval of the session has that id
    ├── ApprovalConflict            an approval was already decided otherwise
    ├── InvalidDecision             a decision its rule or its tool's schema refuses
    ├── CannotRewind                no last message to replace, or calls after it wait (ValueError)
    ├── OutputInvalid               the answer did not fit the asked output type, after retries
    ├── InvalidText                 input that cannot be stored as text (a lone surrogate)
    ├── WorkspaceError
    │   ├── PathOutsideWorkspace    a path escapes the workspace root
    │   │   └── OtherNamespace      a path into a namespace the call may not see
    │   └── FrontMatterError        a declaration's front matter is missing or malformed
    ├── StorageError                a file could not be read or written
    │   ├── UnusableFile            not a file the harness can use (a FIFO, a directory, too big)
    │   └── TurnNotSaved            a call ran but what it accepted could not be saved
    ├── SessionBusy                 another call kept the session for longer than the wait
    ├── MCPServerUnavailable        an MCP server could not be started or has stopped
    ├── MCPToolError                an MCP server answered a tool call with an error, or late
    ├── EngineUnavailable           the durable engine (Temporal) cannot be reached
    ├── TurnFailed                  a turn the durable engine ran failed in its worker
    └── RequestRefused              ``harness serve`` refuses a request (its HTTP status and code)

``InvalidDecision``, ``CannotRewind``, ``InvalidText``, ``PathOutsideWorkspace`` and
``FrontMatterError`` are ``ValueError`` too: each is about a value (a decision, a rewind, a
text, a path, a file's text) that cannot be used. Every class lives here,
whichever package raises it, so one ``except`` on this tree catches what Harness means to raise
(``tests/unit/test_public_api.py`` holds every package to it, and
``tests/unit/test_errors_doc.py`` this drawing to the classes).
"""

from __future__ import annotations

import functools
import shlex
import sys
from pathlib import Path

__all__ = [
    "AgentInterrupted",
    "ApprovalConflict",
    "CannotRewind",
    "ConfigError",
    "ContextOverflowError",
    "EngineUnavailable",
    "FrontMatterError",
    "HarnessError",
    "InvalidDecision",
    "InvalidText",
    "MCPServerUnavailable",
    "MCPToolError",
    "ModelError",
    "OtherNamespace",
    "OutputInvalid",
    "PathOutsideWorkspace",
    "RateLimitError",
    "RequestRefused",
    "ScriptExhaustedError",
    "SessionBusy",
    "StorageError",
    "TurnFailed",
    "TurnNotSaved",
    "UnknownApproval",
    "UnusableFile",
    "WindowTooSmall",
    "WorkspaceError",
]


def install_hint(extra: str, *pip_options: str) -> str:
    """The command that installs Harness's optional ``extra``, for the error that needs it.

    Never a PyPI install of ``harness[extra]``: the package called harness on PyPI is another
    project, and Harness is installed from its checkout. When this code runs from a checkout
    (an editable install), the command names it and this interpreter's pip, ready to paste;
    otherwise it says to run pip in the checkout. Not in ``__all__``: the tree of classes is
    this module's public surface; the packages with an extra share this one line.
    """
    options = "".join(f"{option} " for option in pip_options)
    checkout = source_checkout()
    if checkout is None:
        return (
            f"pip install {options}-e '.[{extra}]' in the Harness checkout (not from PyPI: "
            "the package named harness there is another project)"
        )
    target = shlex.quote(f"{checkout}[{extra}]")
    return f"{shlex.quote(sys.executable)} -m pip install {options}-e {target}"


@functools.cache
def source_checkout() -> Path | None:
    """The Harness checkout this code runs from (``src/harness`` in it), or None.

    Once per process: a stat, when the first hint is made (at import, for most).
    """
    root = Path(__file__).resolve().parents[2]
    return root if (root / "pyproject.toml").is_file() else None


class HarnessError(Exception):
    """Root of every error Harness raises on purpose."""


class ConfigError(HarnessError):
    """Configuration is missing or invalid; the message says which setting and how to fix it."""


class WindowTooSmall(ConfigError):
    """The fixed part of every request does not fit the model's context window.

    The system prompt, the tool schemas and the room kept for the answer are sent with every
    step and no compaction shrinks them, so no call can succeed: the message names the sizes
    and what to change (a larger window, fewer tools). Raised before the first model call when
    the window is known ahead, else at the first overflow, whose error states the window.
    """


class ModelError(HarnessError):
    """The model provider returned an error or an unusable answer."""


class ContextOverflowError(ModelError):
    """The request is longer than the model's context window.

    When the provider's error states the sizes (llama.cpp, OpenAI, Anthropic and most
    OpenAI-compatible servers do), they are kept here, as the provider counted them, so that
    recovery can size what it keeps instead of guessing; None when not stated.

    Attributes:
        requested_tokens: What the request needed: its prompt, plus the answer's room when the
            provider counts that in (``answer_tokens``).
        limit_tokens: The most the provider allows: the model's context window.
        answer_tokens: The part of ``requested_tokens`` kept for the answer (``max_tokens``).
    """

    def __init__(
        self,
        message: str,
        *,
        requested_tokens: int | None = None,
        limit_tokens: int | None = None,
        answer_tokens: int | None = None,
    ) -> None:
        super().__init__(message)
        self.requested_tokens = requested_tokens
        self.limit_tokens = limit_tokens
        self.answer_tokens = answer_tokens

    @property
    def prompt_tokens(self) -> int | None:
        """The prompt's tokens as the provider counted them (the answer's room left out)."""
        if self.requested_tokens is None:
            return None
        return self.requested_tokens - (self.answer_tokens or 0)


class RateLimitError(ModelError):
    """The provider rejected the request for rate or quota reasons (after the SDK's retries)."""


class ScriptExhaustedError(ModelError):
    """A :class:`~harness.models.ScriptedChatModel` has no turn left that matches the request."""


class AgentInterrupted(HarnessError):
    """A call was stopped by ``interrupt()`` before it finished."""


class UnknownApproval(HarnessError, LookupError):
    """No pending approval of the session has the id given (list them first)."""


class ApprovalConflict(HarnessError):
    """The approval was already decided otherwise: a decision is final."""


class InvalidDecision(HarnessError, ValueError):
    """A reviewer's decision that cannot be recorded; the approval can be decided again.

    A kind its rule does not allow, or edited arguments the tool's schema refuses.
    """


class CannotRewind(HarnessError, ValueError):
    """A turn asked to replace the session's last input: there is none, or calls wait after it."""


class OutputInvalid(HarnessError):
    """The model's answer did not fit the output type the call asked for, after every retry."""


class InvalidText(HarnessError, ValueError):
    """Text that cannot be stored: it holds a lone surrogate, which has no UTF-8 form.

    Refused where it enters (a user's input, an id), so it is never discovered when a session
    is saved. What the harness itself takes in (tool output, file names, the model's answer)
    is escaped instead.
    """


class WorkspaceError(HarnessError):
    """The workspace cannot be used as asked."""


class PathOutsideWorkspace(WorkspaceError, ValueError):
    """A path would resolve outside the workspace (``..``, an absolute path, ``~``)."""


class OtherNamespace(PathOutsideWorkspace):
    """A path into a namespace the call may not see (a permission matter, not a bad path)."""


class FrontMatterError(WorkspaceError, ValueError):
    """A declaration's front matter (a skill's, a subagent's) is missing or malformed."""


class StorageError(HarnessError):
    """Reading or writing persisted state failed."""


class UnusableFile(StorageError):
    """What is at a path is not a file the harness can use.

    A directory, a FIFO, a socket or a device where a file belongs, or a file over the read's
    size limit. The storage works; this one file does not. A reader of files the model can
    write skips it with a warning naming it, rather than failing the call (docs/security.md).
    """


class TurnNotSaved(StorageError):
    """A call's session could not be saved (a full disk, a store that stopped answering).

    The call is a failure even when the model answered: nothing of it may be presented as
    kept. ``reply`` is the answer the model gave, for a caller that wants to show it as lost.
    """

    def __init__(self, message: str, *, reply: object = None) -> None:
        super().__init__(message)
        self.reply = reply


class SessionBusy(HarnessError):
    """Another call (in this process or another worker) kept the session for too long."""


class MCPServerUnavailable(HarnessError):
    """An MCP server could not be started, or is no longer running."""


class MCPToolError(HarnessError):
    """An MCP server answered a tool call with an error, or did not answer in time."""


class EngineUnavailable(HarnessError):
    """The durable engine (a Temporal server) cannot be reached, or refused the connection."""


class TurnFailed(HarnessError):
    """A turn the durable engine ran failed in its worker; the message is the worker's error."""


class RequestRefused(HarnessError):
    """A served request refused: an HTTP ``status``, a stable ``code`` and what to do instead."""

    def __init__(
        self, status: int, code: str, message: str, *, retry_after: int | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after
        """Seconds after which the same request may succeed (``Retry-After``), if known."""
