"""The approval ledger: what was requested, decided, started and finished, out of the model's reach.

One append-only list of records per session, in the workspace's approvals ledger
(:mod:`harness.workspace.ledger`): beside the workspace (``<parent>/.<workspace name>.approvals/``,
which neither the file tools nor the sandbox can reach) for a workspace on this machine's disk,
or in the store (Redis) under a namespace of its own for a workspace in a store. The session
files are in the workspace, which a sandboxed command can write; so a waiting call is taken
from the session only when the ledger has a request for it with the same fingerprint (tool,
arguments, agent, session, user, call id).

Every change is one atomic step (an ``flock`` and an ``fsync`` on the local disk, a
compare-and-set in a store): that is what makes two reviewers deciding at once, or two workers
resuming at once, end with one decision and one run.

Records (JSON objects, one per line on disk), each with ``kind``, ``id`` (the approval's) and
``at`` (seconds since the epoch):

- ``requested``: the pending approval (:class:`~harness.approvals.PendingApproval`'s fields),
  its ``fingerprint`` and whether the tool is ``idempotent``;
- ``decided``: ``decision`` (``kind``, ``arguments``, ``message``), and ``by``;
- ``started``: the run began, with the ``arguments`` it runs with;
- ``finished``: the run ended, with its ``result`` (``output``, ``is_error``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.workspace.ledger import FileLedger, MemoryLedger, Record, StoreLedger
from harness.workspace.ledger import Ledger as ApprovalLedger
from harness.workspace.ledger import ledger_for as _ledger_for

if TYPE_CHECKING:
    from harness.stores.base import BaseStore
    from harness.workspace import WorkspaceManager

__all__ = ["ApprovalLedger", "FileLedger", "MemoryLedger", "Record", "StoreLedger", "ledger_for"]


def ledger_for(workspace: WorkspaceManager, store: BaseStore | None = None) -> ApprovalLedger:
    """Where a workspace's approvals are kept: out of the model's reach, beside the leases."""
    return _ledger_for(workspace, "approvals", store)
