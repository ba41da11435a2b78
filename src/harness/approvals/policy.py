"""Which tool calls wait for a person, and what that person may decide: the operator's policy.

The policy comes from Python only (``HarnessAgent(approvals=...)``): no workspace file, no
declaration the model can write and no argument the model sends can remove a gate. A rule
gates a tool by its name (an MCP tool's too: ``server__tool``; a ``*`` pattern gates many), or
the tool itself says it needs approval (:func:`requires_approval`). A rule's predicate sees the
call's arguments and context; a predicate that raises, or arguments that do not validate
against the tool's schema, mean the call needs approval (the gate fails closed).
"""

from __future__ import annotations

import fnmatch
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeVar, overload

from harness.context import RuntimeContext

__all__ = [
    "ALL_DECISIONS",
    "DEFAULT_EXPIRY",
    "ApprovalPolicy",
    "ApprovalRule",
    "DecisionKind",
    "PendingApproval",
    "Resolver",
    "ReviewerDecision",
    "requires_approval",
]

logger = logging.getLogger(__name__)

DecisionKind = Literal["approve", "edit", "reject", "respond"]
"""approve: run as the model asked; edit: run with the reviewer's arguments; reject: do not
run, the model is told so; respond: do not run, the model reads the reviewer's text instead."""

ALL_DECISIONS: Final[frozenset[DecisionKind]] = frozenset({"approve", "edit", "reject", "respond"})

DEFAULT_EXPIRY: Final = 30 * 60.0
"""Seconds a request waits for a decision; an expired one is rejected (OpenClaw's 30 minutes)."""

_F = TypeVar("_F", bound=Callable[..., Any])
_MARK = "__harness_approval__"


@dataclass(frozen=True, kw_only=True)
class ApprovalRule:
    """When a tool's calls wait for approval, and what the reviewer may decide.

    Args:
        when: ``when(arguments, ctx) -> bool``; None gates every call of the tool. Raising
            counts as True.
        decisions: What the reviewer may decide.
        description: Shown to the reviewer: a text, or ``description(arguments) -> str``.
        expires_after: Seconds a request waits before it counts as rejected.
        idempotent: The tool may run again when a run started and its end is unknown (a crash
            while it ran); by default such a call is never run again.
    """

    when: Callable[[Mapping[str, Any], RuntimeContext], bool] | None = None
    decisions: frozenset[DecisionKind] = ALL_DECISIONS
    description: str | Callable[[Mapping[str, Any]], str] | None = None
    expires_after: float = DEFAULT_EXPIRY
    idempotent: bool = False

    def __post_init__(self) -> None:
        if not self.decisions or not self.decisions <= ALL_DECISIONS:
            msg = f"decisions must be a non-empty subset of {sorted(ALL_DECISIONS)}"
            raise ValueError(msg)
        if self.expires_after <= 0:
            msg = f"expires_after must be positive, got {self.expires_after}"
            raise ValueError(msg)

    def gates(self, arguments: Mapping[str, Any], ctx: RuntimeContext) -> bool:
        """Whether this call waits for approval; a predicate that fails says yes."""
        if self.when is None:
            return True
        try:
            return bool(self.when(arguments, ctx))
        except Exception:
            logger.warning(
                "an approval predicate failed; the call waits for approval", exc_info=True
            )
            return True

    def describe(self, tool: str, arguments: Mapping[str, Any]) -> str:
        """What the reviewer is shown; a describer that fails gives the plain default."""
        if isinstance(self.description, str):
            return self.description
        if self.description is not None:
            try:
                return str(self.description(arguments))
            except Exception:
                logger.warning("an approval description failed", exc_info=True)
        return f"The agent wants to call {tool}."


@dataclass(frozen=True, slots=True)
class ReviewerDecision:
    """What a reviewer decided about one pending approval.

    ``arguments`` for ``edit`` (validated against the tool's schema before the tool runs),
    ``message`` for ``respond`` (the text the model reads) and optionally for ``reject`` (why).
    """

    kind: DecisionKind
    arguments: Mapping[str, Any] | None = None
    message: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in ALL_DECISIONS:
            msg = f"unknown decision {self.kind!r}; use one of {sorted(ALL_DECISIONS)}"
            raise ValueError(msg)
        if self.kind == "edit" and not isinstance(self.arguments, Mapping):
            msg = "an edit gives the arguments the tool runs with (a JSON object)"
            raise ValueError(msg)
        if self.kind == "respond" and not (self.message and self.message.strip()):
            msg = "a respond decision gives the text the model reads instead of the tool's result"
            raise ValueError(msg)


@dataclass(frozen=True, slots=True)
class PendingApproval:
    """A tool call waiting for a decision, as the reviewer is shown it.

    ``tool_call_id`` is the session's call that waits: the gated call itself, or the
    ``agent_spawn`` / ``agent_send`` through which a subagent's call surfaced. A call of a
    background task's subagent has none (the parent's turn goes on): ``task_id`` says which
    task waits, and a decision continues it.
    """

    id: str
    tool: str
    arguments: Mapping[str, Any]
    description: str
    decisions: frozenset[DecisionKind]
    requested_at: float
    expires_at: float
    agent: str
    session_id: str | None
    user_id: str | None
    tool_call_id: str | None
    subagent: str | None = None
    task_id: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """As JSON: what a paused call, the CLI and the HTTP API list."""
        return {
            "id": self.id,
            "tool": self.tool,
            "arguments": dict(self.arguments),
            "description": self.description,
            "decisions": sorted(self.decisions),
            "requested_at": self.requested_at,
            "expires_at": self.expires_at,
            "agent": self.agent,
            "session_id": self.session_id,
            "user_id": self.user_id,
            "tool_call_id": self.tool_call_id,
            "subagent": self.subagent,
            "task_id": self.task_id,
        }


Resolver = Callable[[PendingApproval], Awaitable[ReviewerDecision | None]]
"""Decides a request in this process (a prompt, a rule engine), or defers it with None."""


@dataclass(frozen=True, kw_only=True)
class ApprovalPolicy:
    """The operator's gates: rules by tool name (``*`` patterns allowed), and a resolver.

    Args:
        rules: ``{tool name or pattern: ApprovalRule()}``; ``True`` stands for ``ApprovalRule()``.
        resolver: Called for each new request before the call pauses; a decision it returns is
            recorded and applied at once, None leaves the request pending.
        idempotent: Tools no rule gates that may run again when a run started and its end is
            unknown, on a durable agent (``durable=True``); any other such call is reported
            "outcome unknown" and never run again. A gated tool says it in its rule.
    """

    rules: Mapping[str, ApprovalRule] = field(default_factory=dict)
    resolver: Resolver | None = None
    idempotent: frozenset[str] = frozenset()

    @classmethod
    def of(
        cls,
        value: ApprovalPolicy | Mapping[str, ApprovalRule | bool] | Iterable[str] | None,
    ) -> ApprovalPolicy | None:
        """The policy an agent's ``approvals=`` stands for (None: no gates of its own)."""
        if value is None or isinstance(value, ApprovalPolicy):
            return value
        if isinstance(value, Mapping):
            rules: dict[str, ApprovalRule] = {}
            for name, rule in value.items():
                if rule is True:
                    rules[name] = ApprovalRule()
                elif isinstance(rule, ApprovalRule):
                    rules[name] = rule
                elif rule is not False:
                    msg = f"approvals[{name!r}] must be an ApprovalRule or True, not {rule!r}"
                    raise TypeError(msg)
            return cls(rules=rules)
        if isinstance(value, str):
            msg = "approvals takes tool names as a list, not one string"
            raise TypeError(msg)
        return cls(rules={name: ApprovalRule() for name in value})

    def rule_for(self, tool: str, func: Callable[..., Any] | None) -> ApprovalRule | None:
        """The rule gating ``tool``: by exact name, by pattern, or the tool's own declaration."""
        if tool in self.rules:
            return self.rules[tool]
        for pattern, rule in self.rules.items():
            if any(c in pattern for c in "*?[") and fnmatch.fnmatchcase(tool, pattern):
                return rule
        declared = getattr(func, _MARK, None) if func is not None else None
        return declared if isinstance(declared, ApprovalRule) else None


def marked(func: Callable[..., Any]) -> bool:
    """Whether a tool's function says it needs approval (:func:`requires_approval`)."""
    return isinstance(getattr(func, _MARK, None), ApprovalRule)


@overload
def requires_approval(func: _F, /) -> _F: ...


@overload
def requires_approval(func: None = None, /, **rule: Any) -> Callable[[_F], _F]: ...


def requires_approval(func: _F | None = None, /, **rule: Any) -> _F | Callable[[_F], _F]:
    """Mark a tool as needing approval (``@requires_approval`` or ``@requires_approval(...)``).

    The keywords are :class:`ApprovalRule`'s. A gate declared here holds in every agent the
    tool is given to, with or without an ``approvals=`` policy.
    """

    def mark(target: _F) -> _F:
        setattr(target, _MARK, ApprovalRule(**rule))
        return target

    return mark(func) if func is not None else mark
