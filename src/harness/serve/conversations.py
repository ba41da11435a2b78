"""Clients that keep no session id: the history they resend names the session it continues.

Most chat UIs and SDK examples resend the whole conversation with every request and no
``X-Harness-Session``; put in one ``default`` session, unrelated chats merged, and a Responses
client without ``previous_response_id`` lost the history it resent. The rule instead:

- a request whose resent history (its user and assistant texts, up to its last assistant
  message) is the history a turn of one of the user's sessions ended with **continues that
  session**, taking only its new turn: nothing is kept twice;
- anything else **starts a new session**, which keeps the resent history first (as the
  messages they were), then runs the new turn: a client that brings a conversation from
  elsewhere loses none of it.

After each turn, the history it ended with (the request's, its new user messages and the
reply) is recorded for its session in the user's ``conversations`` ledger (beside the
workspace, or in the store the workers share), by digest only. A record is consumed when a
request continues it, so two clients whose histories are the same word for word (both said
"hi" and got the same answer) each continue a session of their own, and never one another's.
A request refused before its turn starts (too long, over a limit) leaves nothing behind: its
claim is given back and a session it began is deleted, so its retry finds what it would have.
Trust boundary: the user is the key's; a history only ever finds that user's sessions.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Sequence
from typing import Final, Literal

from harness.context import RuntimeContext
from harness.kernel import Msg
from harness.serve.streams import Ending, TurnStream
from harness.serve.turns import TurnEvent
from harness.session import SessionStore
from harness.workspace import WorkspaceManager
from harness.workspace.ledger import Record, ledger_for, user_key

__all__ = ["Conversations", "Said", "new_session_id"]

LEDGER_KIND: Final = "conversations"

Said = tuple[Literal["user", "assistant"], str]
"""One message of a resent history: its role and its text."""


def new_session_id(prefix: str) -> str:
    """A new session's id: ``<prefix>-`` and 24 random hex digits."""
    return f"{prefix}-{secrets.token_hex(12)}"


def _digest(history: Sequence[Said]) -> str:
    canonical = json.dumps([[role, " ".join(text.split())] for role, text in history])
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class Conversations:
    """Finds the session a resent history continues, and records where each turn left one."""

    def __init__(self, workspace: WorkspaceManager, sessions: SessionStore) -> None:
        self.ledger = ledger_for(workspace, LEDGER_KIND)
        self.sessions = sessions

    async def continued(self, user: str | None, history: Sequence[Said]) -> str | None:
        """The session whose last turn ended with ``history``, claimed for this request.

        None for an empty history, or one no turn of the user's ended with.
        """
        if not history:
            return None
        wanted = _digest(history)
        found: list[str] = []

        def claim(records: list[Record]) -> list[Record]:
            held: dict[tuple[object, object], bool] = {}  # the latest claim or release counts
            for r in records:
                if r.get("kind") in ("taken", "released"):
                    held[r["digest"], r["session"]] = r["kind"] == "taken"
            taken = {pair for pair, holding in held.items() if holding}
            for record in records:  # the oldest first: twins continue in the order they came
                if record.get("kind") != "ended" or record.get("digest") != wanted:
                    continue
                if (wanted, record.get("session")) not in taken:
                    found[:] = [str(record["session"])]  # a store's compare-and-set may ask again
                    return [{"kind": "taken", "digest": wanted, "session": record["session"]}]
            found.clear()
            return []

        await self.ledger.change(user_key(user), claim)
        return found[0] if found else None

    async def release(self, user: str | None, session: str, history: Sequence[Said]) -> None:
        """Give back a claim whose request was refused, so that its retry continues ``session``."""
        record = {"kind": "released", "digest": _digest(history), "session": session}
        await self.ledger.change(user_key(user), lambda _: [record])

    async def ended(self, user: str | None, session: str, history: Sequence[Said]) -> None:
        """Record that a turn of ``session`` ended with ``history``."""
        record = {"kind": "ended", "digest": _digest(history), "session": session}
        await self.ledger.change(user_key(user), lambda _: [record])

    def ending(self, history: Sequence[Said], asked: str) -> Ending:
        """What a stateless request's turn records as it ends: the history it ended with.

        Recorded before the end is sent, so a client that asks again at once finds it; as
        the client will resend it: a whole reply's text, or a stream's every step's text
        (both, when they differ). A turn that ends without a reply records nothing.
        """

        async def ended(turn: TurnStream, event: TurnEvent) -> None:
            name, data = event
            if name != "turn.completed":
                return
            streamed = "".join(str(d.get("text", "")) for n, d in turn.emitted if n == "text.delta")
            whole = str(data.get("message", {}).get("text", ""))
            user, session = turn.ctx.user_id, turn.ctx.session_id or ""
            for text in dict.fromkeys((whole, streamed)):
                await self.ended(user, session, [*history, ("user", asked), ("assistant", text)])

        return ended

    async def seed(self, ctx: RuntimeContext, history: Sequence[Said]) -> None:
        """A new session keeps the history resent to it, before its first turn."""
        if history:
            messages = [Msg(role=role, content=text) for role, text in history]
            await self.sessions.save(ctx, messages)
