"""How an agent delegates: its subagents, the timeouts and limits of spawning, its task queue."""

from __future__ import annotations

from dataclasses import dataclass

from harness.subagents.declarations import Declaration

__all__ = ["DEFAULT_SUBAGENTS", "SubagentsConfig"]


@dataclass(frozen=True, kw_only=True)
class SubagentsConfig:
    """Subagents and background tasks of a :class:`~harness.HarnessAgent`.

    Args:
        declarations: Subagents given in Python, besides ``subagents/*.md`` of the workspace.
        general_purpose: Offer the built-in ``general-purpose`` subagent.
        default_timeout_seconds: How long ``agent_spawn``/``agent_send`` wait for a reply when
            the model gives no timeout; a run still going then continues as a background task.
        max_timeout_seconds: The longest wait the model may ask for.
        max_depth: How deep spawns may nest (children built here are leaves; this bounds agents
            that your factories build with subagents of their own).
        max_running: Background tasks of one agent running at once; more wait as ``pending``.
        heartbeat_seconds: How often a running task's record is refreshed.
        stale_after_seconds: A running task whose record is this old belongs to a dead worker
            and is reported ``failed: worker lost``.
        shutdown_grace_seconds: How long :meth:`~harness.HarnessAgent.aclose` lets running
            tasks finish before it cancels them.
        notice_lines: Lines of each result shown in the completion notice.
        refresh_seconds: How often ``subagents/*.md`` are re-read.
        allowed_models: The model specs a ``subagents/*.md`` file may name. Those files are
            the model's to write (its file tools reach them), and a spec chooses what runs and
            who is paid (``scripted:`` and ``local:`` name files, ``openai:`` a paid model), so
            a file naming any other model is skipped with a warning; without ``model:`` it
            runs on the parent's model. Declarations given in Python may name any model.
    """

    declarations: tuple[Declaration, ...] = ()
    general_purpose: bool = True
    default_timeout_seconds: float = 30.0
    max_timeout_seconds: float = 600.0
    max_depth: int = 3
    max_running: int = 8
    heartbeat_seconds: float = 10.0
    stale_after_seconds: float = 60.0
    shutdown_grace_seconds: float = 30.0
    notice_lines: int = 20
    refresh_seconds: float = 1.0
    allowed_models: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "declarations", tuple(self.declarations))
        object.__setattr__(self, "allowed_models", tuple(self.allowed_models))

    def timeout(self, requested: float | None) -> float:
        """The wait for a reply: the default for None, 0 (background) for 0 or less, capped."""
        if requested is None:
            return self.default_timeout_seconds
        if requested <= 0:
            return 0.0
        return min(float(requested), self.max_timeout_seconds)


DEFAULT_SUBAGENTS = SubagentsConfig()
