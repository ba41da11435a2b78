"""Human approval of tool calls: the operator's policy, the ledger, and the gate between them.

See ``docs/approvals.md`` for the flows (Python, CLI) and what each crash point leaves.
"""

from harness.approvals.desk import ApprovalDesk
from harness.approvals.gate import ApprovalGate, fingerprint, still_waiting
from harness.approvals.ledger import (
    ApprovalLedger,
    FileLedger,
    MemoryLedger,
    StoreLedger,
    ledger_for,
)
from harness.approvals.policy import (
    ALL_DECISIONS,
    DEFAULT_EXPIRY,
    ApprovalPolicy,
    ApprovalRule,
    DecisionKind,
    PendingApproval,
    Resolver,
    ReviewerDecision,
    requires_approval,
)

__all__ = [
    "ALL_DECISIONS",
    "DEFAULT_EXPIRY",
    "ApprovalDesk",
    "ApprovalGate",
    "ApprovalLedger",
    "ApprovalPolicy",
    "ApprovalRule",
    "DecisionKind",
    "FileLedger",
    "MemoryLedger",
    "PendingApproval",
    "Resolver",
    "ReviewerDecision",
    "StoreLedger",
    "fingerprint",
    "ledger_for",
    "requires_approval",
    "still_waiting",
]
